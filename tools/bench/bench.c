/* ipcpipe-bench: bandwidth and latency of ipcpipe's paths between two ranks,
 * on host or GPU memory, each figure next to a ceiling measured in the same
 * run (memcpy on host memory; single-process CUDA copies on GPU memory).
 *
 * Without a launcher it re-runs itself as --ranks ranks (ipcp_launch); under
 * mpirun, srun or torchrun it takes rank and size from ipcp_init.  Rank 0
 * receives, times and prints; rank 1 sends; other ranks only keep pace. */
#include "bench.h"
#include "sizes.h"

#include <ctype.h>
#include <errno.h>
#include <fnmatch.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "launch.h"

/* --compare's references come first within a size, so that each row of
 * ipcpipe can be set against them as it is printed.  Their ceilings: d2d
 * for what moves device to device (NCCL goes over P2P where it can), the
 * pinned copies for what stages through host memory, memcpy for Open MPI
 * (host memory, as ipcpipe's host rows). */
const bench_path_t bench_paths[] = {
    {"d2d", IPCP_PATH_AUTO, 0, BENCH_KIND_LOCAL, BENCH_CEIL_D2D, BENCH_CEIL_D2D,
     0},
    {"d2h", IPCP_PATH_AUTO, 0, BENCH_KIND_LOCAL, BENCH_CEIL_STAGED,
     BENCH_CEIL_D2H, 0},
    {"h2d", IPCP_PATH_AUTO, 0, BENCH_KIND_LOCAL, BENCH_CEIL_STAGED,
     BENCH_CEIL_H2D, 0},
    {"nccl", IPCP_PATH_AUTO, 0, BENCH_KIND_NCCL, BENCH_CEIL_D2D, 0, 0},
    {"naive", IPCP_PATH_AUTO, 0, BENCH_KIND_NAIVE, BENCH_CEIL_STAGED, 0, 0},
    {"ompi", IPCP_PATH_AUTO, 0, BENCH_KIND_MPI, BENCH_CEIL_MEMCPY, 0, 0},
    {"direct", IPCP_PATH_DIRECT, 0, BENCH_KIND_IPCP, 0, 0, 0},
    {"staged", IPCP_PATH_STAGED, 0, BENCH_KIND_IPCP, 0, 0, 0},
    {"auto", IPCP_PATH_AUTO, 0, BENCH_KIND_IPCP, 0, 0, 0},
    {"bidir", IPCP_PATH_AUTO, 1, BENCH_KIND_IPCP, 0, 0, 0},
    {"bidir-direct", IPCP_PATH_DIRECT, 1, BENCH_KIND_IPCP, 0, 0, 0},
    {"stream", IPCP_PATH_AUTO, 0, BENCH_KIND_IPCP, 0, 0, 1},
};
const int bench_npaths = (int)(sizeof(bench_paths) / sizeof(bench_paths[0]));

#define GIB ((size_t)1 << 30)

static const char usage_text[] =
    "usage: ipcpipe-bench [options]\n"
    "Windowed bandwidth (median of repeats) and small-message latency of\n"
    "each path between two ranks, on host or GPU memory, next to a\n"
    "ceiling measured in the same run, with the data checked.  Spawns its\n"
    "own ranks unless a launcher (mpirun, srun, torchrun) started it.\n"
    "\n"
    "  --mem KIND      host, cuda or auto (default: cuda when the\n"
    "                  library's CUDA backend can run and a GPU is\n"
    "                  visible, else host)\n"
    "  --devices MAP   GPU of each rank: split (rank r on device\n"
    "                  r % ndev when 2 or more are visible, else 0;\n"
    "                  the default), same (all on device 0), or a list\n"
    "                  A,B,... (rank r on the (r % n)-th); ordinals as\n"
    "                  each process sees them\n"
    "  --alloc KIND    buffers from ipcp (ipcp_mem_alloc: shared memory,\n"
    "                  VMM on GPUs; the default) or plain (posix_memalign,\n"
    "                  cuMemAlloc on GPUs: the library's legacy IPC path)\n"
    "  --window N      transfers posted back to back per repetition\n"
    "                  (default: 64 MiB / size, between 1 and 64)\n"
    "  --sizes LIST    comma-separated sizes (8,4K,1M,1G+1); default:\n"
    "                  powers of 2 from --min to --max\n"
    "  --min SIZE      smallest size of the sweep (default 8)\n"
    "  --max SIZE      largest size of the sweep (default 1G)\n"
    "  --case NAME     run only matching cases; repeatable.  NAME is a\n"
    "                  path (direct, staged, auto = the library's\n"
    "                  choice, eager for small messages; bidir = auto\n"
    "                  in both directions at once, bidir-direct the\n"
    "                  same with the direct path forced (not striped);\n"
    "                  stream = auto\n"
    "                  through the stream-ordered calls on one CUDA\n"
    "                  stream a rank, waived on host memory: W sends\n"
    "                  or receives enqueued, then the stream waited\n"
    "                  for, and a ping-pong of batches of 32 round\n"
    "                  trips enqueued back to back) or its prefix,\n"
    "                  PATH:SIZE (direct:256M), or a glob (\"*:4K\");\n"
    "                  with --compare also nccl, naive, d2d, d2h, h2d\n"
    "                  (GPU memory) and ompi (host memory).\n"
    "                  Default: every path at every size\n"
    "  --list          print the selected case names and exit\n"
    "  --iters N       timed repetitions per case, and ping-pong rounds\n"
    "                  (default: 2 GiB / (window * size) repetitions and\n"
    "                  2 GiB / size rounds, each between 40 and 1000)\n"
    "  --warmup N      untimed transfers before timing (default 2)\n"
    "  --lat-max SIZE  ping-pong latency up to this size (default 64K;\n"
    "                  0: never)\n"
    "  --stream-reqs every|last\n"
    "                  the stream case's ping-pong asks for a request on\n"
    "                  every call, or (last, the default, as stream-\n"
    "                  ordered code is written) only on each batch's last\n"
    "                  send and receive; the stream orders the rest\n"
    "  --no-verify     do not check the data (default: fresh random\n"
    "                  data every run; the receiving buffer poisoned\n"
    "                  first, then every byte of the first warm-up and of\n"
    "                  the last timed transfer checked, on GPU memory\n"
    "                  after a copy back to the host)\n"
    "  --ranks N       ranks to spawn without a launcher (default 2)\n"
    "  --timeout S     kill spawned ranks after S seconds (default none)\n"
    "  --pin           bind each spawned rank to one CPU (rank i to the\n"
    "                  i-th allowed one, as mpirun and srun do by\n"
    "                  default); under a launcher its binding applies\n"
    "  --compare       also run, per size, the reference points a user\n"
    "                  would otherwise pick.  On GPU memory, between the\n"
    "                  same ranks and buffers: nccl (ncclSend/ncclRecv,\n"
    "                  a window's calls in one group, libnccl.so.2\n"
    "                  loaded at run time; waived without\n"
    "                  it), naive (the forum post's staged pattern of\n"
    "                  examples/seed.c --naive: 16 chunks D2H, then H2D\n"
    "                  into rank 1's buffer opened while rank 0's device\n"
    "                  is current, 4 streams a side), and rows for the\n"
    "                  single-process copies the ceilings measure (d2d,\n"
    "                  d2h, h2d).  Each row of ipcpipe is then also given\n"
    "                  as a ratio to nccl and to naive.  On host memory:\n"
    "                  ompi, Open MPI's shared-memory transport (mpirun\n"
    "                  -np 2 --mca pml ob1 --mca btl self,vader, or sm\n"
    "                  from Open MPI 5, running ipcpipe-bench-mpi from\n"
    "                  this program's directory) with the same sizes, W,\n"
    "                  repetitions, warm-up, clock and data checks, its\n"
    "                  ranks on the CPUs of ipcpipe's (--pin included):\n"
    "                  MPI_Isend/MPI_Irecv windows and an MPI_Send/\n"
    "                  MPI_Recv ping-pong, all sizes in one mpirun at\n"
    "                  the first ompi case.  Each ipcpipe row is then\n"
    "                  given as GB/s and latency ratios to ompi's.\n"
    "                  Without mpirun on PATH a note says so and there\n"
    "                  are no ompi rows; an mpirun that fails fails them,\n"
    "                  its output on stderr\n"
    "  --json          a JSON array, one object per case, not the table\n"
    "  --csv           CSV, not the table: a header line with the JSON\n"
    "                  fields (nested ones as devices.receiver, ...),\n"
    "                  then one line per case\n"
    "  --plot FILE     after the run, write an SVG chart of GB/s against\n"
    "                  size to FILE: a line per path or reference, dashed\n"
    "                  lines for the ceilings (with the table, --json or\n"
    "                  --csv)\n"
    "  --trace FILE    write a Chrome/Perfetto timeline of one case to\n"
    "                  FILE (IPCPIPE_TRACE; select the case with --case)\n"
    "  --load d2h|h2d  beside the whole run, a third process copies\n"
    "                  64 MiB of pinned memory at a time over one GPU's\n"
    "                  PCIe link: device to host on the sender's GPU\n"
    "                  (d2h) or host to device on the receiver's (h2d),\n"
    "                  as another job on the machine would; what striping\n"
    "                  does when its staged path is shared.  Needs --mem\n"
    "                  cuda; prints the load's own GB/s at the end\n"
    "  --tune          measure striping (IPCPIPE_STRIPE=auto) between\n"
    "                  every ordered pair of visible GPUs now, write the\n"
    "                  calibration file (IPCPIPE_STRIPE_CACHE), print\n"
    "                  the table and exit (otherwise it is measured at\n"
    "                  the first transfer that could stripe)\n"
    "  --help          this text\n"
    "\n"
    "GB/s is 1e9 bytes/s: window * size bytes (twice that for bidir),\n"
    "timed by the receiver (rank 0) from the moment both ranks have left\n"
    "the barrier that starts a repetition (rank 1 sends the times it left\n"
    "at; processes of one machine share the clock) to the completion of\n"
    "its last receive.  Ceilings: memcpy\n"
    "(host), d2d, min(d2h,h2d) and d2d-bidir (CUDA), in the receiving\n"
    "process; the header says what each is.\n"
    "References: the figures a user compares against (NCCL send/recv, the\n"
    "forum post's pattern, pinned copies, Open MPI; docs/measured.md\n"
    "lists those of one 2 x H200 run) hold for one machine,\n"
    "driver and run.\n"
    "--compare measures them here instead, in the same run, with the same\n"
    "window, buffers and clock, so that the ratios mean something.\n"
    "A progress line is shown when stderr is a terminal, never in pipes,\n"
    "JSON or CSV.\n"
    "Exit status: 0 when every case verified or was waived, 1 when one\n"
    "failed, 2 on bad options.\n";

static void usage(FILE *f)
{
    fputs(usage_text, f);
}

/* "123", "4K", "1M+3": a sum of terms ending at '\0', or at ',' when endp
 * is given (lists). */
static int parse_size(const char *s, size_t *out, const char **endp)
{
    return ipcp_tool_parse_size(s, endp ? "," : NULL, out, endp);
}

void bench_format_size(size_t size, char *buf, size_t len)
{
    static const char units[] = "KMGT";
    int u = -1;
    size_t v = size;
    while (v >= 1024 && v % 1024 == 0 && u < 3) {
        v /= 1024;
        u++;
    }
    if (u < 0)
        snprintf(buf, len, "%zu", size);
    else
        snprintf(buf, len, "%zu%c", v, units[u]);
}

int bench_window(const bench_opts_t *o, size_t size)
{
    if (o->window > 0)
        return o->window;
    size_t w = BENCH_WINDOW_BYTES / (size ? size : 1);
    return w < 1 ? 1 : w > BENCH_WINDOW_MAX ? BENCH_WINDOW_MAX : (int)w;
}

/* About 2 GiB per case, at least 40 repetitions and at most 1000 barriers.
 * With ten at least, the medians of 256 MiB striped runs on one machine
 * spread over 3-4% of the ceiling (105.3-108.6%; 104.0 and 108.1%), those
 * of 40 repetitions over 0.4% at most (108.1-108.5%; 107.3 and 107.3%):
 * a repetition or two of a run may stall for hundreds of us, and the last
 * one follows the check's poison. */
static int clamp_reps(size_t bytes_per_rep)
{
    size_t n = 2 * GIB / (bytes_per_rep ? bytes_per_rep : 1);
    return n < 40 ? 40 : n > 1000 ? 1000 : (int)n;
}

int bench_reps(const bench_opts_t *o, size_t size)
{
    if (o->iters > 0)
        return o->iters;
    size_t w = (size_t)bench_window(o, size);
    return clamp_reps(size > SIZE_MAX / w ? SIZE_MAX : w * size);
}

int bench_lat_rounds(const bench_opts_t *o, size_t size)
{
    return o->iters > 0 ? o->iters : clamp_reps(size);
}

static int parse_sizes_list(bench_opts_t *o, const char *list)
{
    const char *p = list;
    o->nsizes = 0;
    while (*p) {
        size_t v;
        const char *end;
        if (o->nsizes == BENCH_MAX_SIZES)
            return -1;
        if (parse_size(p, &v, &end) < 0 || v == 0 || (*end && *end != ','))
            return -1;
        o->sizes[o->nsizes++] = v;
        p = *end ? end + 1 : end;
    }
    return o->nsizes > 0 ? 0 : -1;
}

static int sweep_sizes(bench_opts_t *o, size_t min, size_t max)
{
    o->nsizes = 0;
    for (size_t s = min; s <= max; s *= 2) {
        if (o->nsizes == BENCH_MAX_SIZES)
            return -1;
        o->sizes[o->nsizes++] = s;
        if (s > SIZE_MAX / 2)
            break;
    }
    return o->nsizes > 0 ? 0 : -1;
}

int bench_parse_int(const char *s, int min, int max, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < min || v > max)
        return -1;
    *out = (int)v;
    return 0;
}

enum {
    OPT_SIZES = 256,
    OPT_MIN,
    OPT_MAX,
    OPT_CASE,
    OPT_LIST,
    OPT_ITERS,
    OPT_WARMUP,
    OPT_RANKS,
    OPT_JSON,
    OPT_CSV,
    OPT_COMPARE,
    OPT_PLOT,
    OPT_TRACE,
    OPT_NO_VERIFY,
    OPT_LAT_MAX,
    OPT_STREAM_REQS,
    OPT_TIMEOUT,
    OPT_MEM,
    OPT_DEVICES,
    OPT_ALLOC,
    OPT_WINDOW,
    OPT_TUNE,
    OPT_LOAD,
    OPT_PIN,
    OPT_HELP,
};

static const struct option long_opts[] = {
    {"sizes", required_argument, NULL, OPT_SIZES},
    {"min", required_argument, NULL, OPT_MIN},
    {"max", required_argument, NULL, OPT_MAX},
    {"case", required_argument, NULL, OPT_CASE},
    {"list", no_argument, NULL, OPT_LIST},
    {"iters", required_argument, NULL, OPT_ITERS},
    {"warmup", required_argument, NULL, OPT_WARMUP},
    {"ranks", required_argument, NULL, OPT_RANKS},
    {"json", no_argument, NULL, OPT_JSON},
    {"csv", no_argument, NULL, OPT_CSV},
    {"compare", no_argument, NULL, OPT_COMPARE},
    {"plot", required_argument, NULL, OPT_PLOT},
    {"trace", required_argument, NULL, OPT_TRACE},
    {"no-verify", no_argument, NULL, OPT_NO_VERIFY},
    {"lat-max", required_argument, NULL, OPT_LAT_MAX},
    {"stream-reqs", required_argument, NULL, OPT_STREAM_REQS},
    {"timeout", required_argument, NULL, OPT_TIMEOUT},
    {"mem", required_argument, NULL, OPT_MEM},
    {"devices", required_argument, NULL, OPT_DEVICES},
    {"alloc", required_argument, NULL, OPT_ALLOC},
    {"window", required_argument, NULL, OPT_WINDOW},
    {"tune", no_argument, NULL, OPT_TUNE},
    {"load", required_argument, NULL, OPT_LOAD},
    {"pin", no_argument, NULL, OPT_PIN},
    {"help", no_argument, NULL, OPT_HELP},
    {NULL, 0, NULL, 0},
};

/* Sizes as given on the command line, turned into o->sizes at the end. */
typedef struct size_args {
    const char *list;
    size_t min, max;
} size_args_t;

/* "same", "split" or "A,B,...". */
static int parse_devices(bench_opts_t *o, const char *arg)
{
    if (strcmp(arg, "same") == 0) {
        o->devmode = BENCH_DEV_SAME;
        return 0;
    }
    if (strcmp(arg, "split") == 0) {
        o->devmode = BENCH_DEV_SPLIT;
        return 0;
    }
    o->devmode = BENCH_DEV_LIST;
    o->ndevlist = 0;
    for (const char *p = arg;;) {
        char *end;
        if (!isdigit((unsigned char)*p) || o->ndevlist == BENCH_MAX_DEVLIST)
            return -1;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (errno || v < 0 || v > 1023 || (*end && *end != ','))
            return -1;
        o->devlist[o->ndevlist++] = (int)v;
        if (!*end)
            return 0;
        p = end + 1;
    }
}

static int parse_choice(const char *arg, const char *const *names, int n,
                        int *out)
{
    for (int i = 0; i < n; i++) {
        if (strcmp(arg, names[i]) == 0) {
            *out = i;
            return 0;
        }
    }
    return -1;
}

/* Applies one option; returns 0, or -1 when its value is bad. */
static int apply_opt(bench_opts_t *o, size_args_t *sa, int c, const char *arg)
{
    static const char *const mems[] = {"auto", "host", "cuda"};
    static const char *const allocs[] = {"ipcp", "plain"};
    char *end;
    int v;
    switch (c) {
    case OPT_MEM:
        if (parse_choice(arg, mems, 3, &v) < 0)
            return -1;
        o->mem = (bench_mem_t)v;
        return 0;
    case OPT_ALLOC:
        if (parse_choice(arg, allocs, 2, &v) < 0)
            return -1;
        o->alloc = (bench_alloc_t)v;
        return 0;
    case OPT_DEVICES:
        return parse_devices(o, arg);
    case OPT_WINDOW:
        return bench_parse_int(arg, 1, BENCH_MAX_WINDOW, &o->window);
    case OPT_SIZES:
        sa->list = arg;
        return 0;
    case OPT_MIN:
        return parse_size(arg, &sa->min, NULL) < 0 || !sa->min ? -1 : 0;
    case OPT_MAX:
        return parse_size(arg, &sa->max, NULL) < 0 || !sa->max ? -1 : 0;
    case OPT_CASE:
        if (o->npatterns == BENCH_MAX_PATTERNS)
            return -1;
        o->patterns[o->npatterns++] = arg;
        return 0;
    case OPT_ITERS:
        return bench_parse_int(arg, 1, 1000000, &o->iters);
    case OPT_WARMUP:
        return bench_parse_int(arg, 0, 1000000, &o->warmup);
    case OPT_RANKS:
        return bench_parse_int(arg, 2, IPCP_LAUNCH_MAX_RANKS, &o->nranks);
    case OPT_LAT_MAX:
        return parse_size(arg, &o->lat_max, NULL);
    case OPT_STREAM_REQS:
        if (strcmp(arg, "every") && strcmp(arg, "last"))
            return -1;
        o->stream_reqs_every = strcmp(arg, "every") == 0;
        return 0;
    case OPT_TIMEOUT:
        o->timeout_s = strtod(arg, &end);
        return end == arg || *end || !(o->timeout_s >= 0) ? -1 : 0;
    case OPT_LIST:
        o->list = 1;
        return 0;
    case OPT_JSON:
        o->json = 1;
        return 0;
    case OPT_CSV:
        o->csv = 1;
        return 0;
    case OPT_COMPARE:
        o->compare = 1;
        return 0;
    case OPT_PLOT:
        o->plot = arg;
        return *arg ? 0 : -1;
    case OPT_TRACE:
        o->trace = arg;
        return 0;
    case OPT_NO_VERIFY:
        o->verify = 0;
        return 0;
    case OPT_TUNE:
        o->tune = 1;
        return 0;
    case OPT_PIN:
        o->pin = 1;
        return 0;
    case OPT_LOAD:
        if (strcmp(arg, "d2h") == 0)
            o->load = BENCH_LOAD_D2H;
        else if (strcmp(arg, "h2d") == 0)
            o->load = BENCH_LOAD_H2D;
        else
            return -1;
        return 0;
    default:
        return -1;
    }
}

/* Returns 0, 1 after --help, or 2 on a bad option (message printed). */
static int parse_args(int argc, char **argv, bench_opts_t *o)
{
    size_args_t sa = {NULL, 8, GIB};
    *o = (bench_opts_t){
        .warmup = 2, .nranks = 2, .verify = 1, .lat_max = 64 * 1024};
    opterr = 0;
    int c, li = 0;
    while ((c = getopt_long(argc, argv, "", long_opts, &li)) != -1) {
        if (c == OPT_HELP) {
            usage(stdout);
            return 1;
        }
        if (c == '?' || c == ':') {
            fprintf(stderr, "ipcpipe-bench: bad option %s (see --help)\n",
                    argv[optind - 1]);
            return 2;
        }
        if (apply_opt(o, &sa, c, optarg) < 0) {
            fprintf(stderr, "ipcpipe-bench: bad value \"%s\" for --%s\n",
                    optarg, long_opts[li].name);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "ipcpipe-bench: unexpected argument %s\n",
                argv[optind]);
        return 2;
    }
    if (o->json && o->csv) {
        fprintf(stderr, "ipcpipe-bench: --json and --csv exclude each other\n");
        return 2;
    }
    if (o->load != BENCH_LOAD_NONE && (o->mem != BENCH_MEM_CUDA || o->tune)) {
        fprintf(stderr, "ipcpipe-bench: --load loads a GPU's PCIe link: it "
                        "needs --mem cuda, and does not go with --tune\n");
        return 2;
    }
    if (sa.list ? parse_sizes_list(o, sa.list)
                : sweep_sizes(o, sa.min, sa.max)) {
        fprintf(stderr,
                "ipcpipe-bench: bad sizes (each > 0, --min <= --max, at most "
                "%d)\n",
                BENCH_MAX_SIZES);
        return 2;
    }
    return 0;
}

static int pattern_matches(const char *pat, const bench_case_t *c)
{
    if (strpbrk(pat, "*?["))
        return fnmatch(pat, c->name, 0) == 0 ||
               fnmatch(pat, c->path->name, 0) == 0;
    const char *colon = strchr(pat, ':');
    size_t plen = colon ? (size_t)(colon - pat) : strlen(pat);
    if (plen == 0 || strncmp(c->path->name, pat, plen) != 0)
        return 0;
    if (!colon)
        return 1;
    size_t want;
    return parse_size(colon + 1, &want, NULL) == 0 && want == c->size;
}

/* Builds the selected cases, size-major so that the table groups the paths
 * of one size.  Returns the count, or -1 when a --case matched nothing. */
static int build_cases(const bench_opts_t *o, bench_case_t **out)
{
    bench_case_t *cs =
        calloc((size_t)o->nsizes * (size_t)bench_npaths, sizeof(*cs));
    int used[BENCH_MAX_PATTERNS] = {0}, n = 0;
    if (!cs)
        return -1;
    for (int s = 0; s < o->nsizes; s++) {
        for (int p = 0; p < bench_npaths; p++) {
            bench_case_t *c = &cs[n];
            if (bench_paths[p].kind != BENCH_KIND_IPCP && !o->compare)
                continue;
            char sz[24];
            c->path = &bench_paths[p];
            c->size = o->sizes[s];
            bench_format_size(c->size, sz, sizeof(sz));
            snprintf(c->name, sizeof(c->name), "%s:%s", c->path->name, sz);
            int sel = o->npatterns == 0;
            for (int i = 0; i < o->npatterns; i++)
                if (pattern_matches(o->patterns[i], c))
                    sel = used[i] = 1;
            n += sel;
        }
    }
    for (int i = 0; i < o->npatterns; i++) {
        if (!used[i]) {
            fprintf(stderr,
                    "ipcpipe-bench: no case matches \"%s\" (see --list%s)\n",
                    o->patterns[i],
                    o->compare ? ""
                               : "; nccl, naive, d2d, d2h, h2d and ompi "
                                 "need --compare");
            free(cs);
            return -1;
        }
    }
    *out = cs;
    return n;
}

static int spawn_ranks(const bench_opts_t *o, char **argv)
{
    ipcp_launch_opts_t lo = {
        .nranks = o->nranks,
        .timeout_s = o->timeout_s,
        .argv_self = argv,
        .pin = o->pin,
    };
    ipcp_launch_result_t res;
    if (ipcp_launch(&lo, &res) != 0) {
        fprintf(stderr, "ipcpipe-bench: cannot start %d ranks: %s\n", o->nranks,
                strerror(errno));
        return 1;
    }
    return ipcp_launch_exit_code(&res);
}

/* Joins a note to the ones before it. */
static void add_note(char *note, size_t len, const char *text)
{
    size_t used = strlen(note);
    bench_fmt(note + used, len - used, "%s%s", used ? "; " : "", text);
}

/* The cases that run: --compare's GPU references on GPU memory only, Open
 * MPI's rows on host memory only and where it is installed (rank 0 finds
 * out and tells the others; every rank knows the memory once the context
 * exists, and drops the same ones).  Returns the count, or -1 when the
 * ranks lost step; note says what was left out and why (rank 0). */
static int runnable_cases(bench_ctx_t *ctx, const bench_case_t *all, int nall,
                          bench_case_t *out, char *note, size_t nlen)
{
    int host = bench_ctx_mem(ctx) != BENCH_MEM_CUDA, any_mpi = 0;
    int n = 0, gpu_out = 0, mpi_out = 0;
    char why[BENCH_REASON_MAX], text[2 * BENCH_REASON_MAX];
    for (int i = 0; i < nall; i++)
        any_mpi |= all[i].path->kind == BENCH_KIND_MPI;
    int mpi = any_mpi && host ? bench_ompi_select(ctx, why, sizeof(why)) : 0;
    if (mpi < 0)
        return -1;
    for (int i = 0; i < nall; i++) {
        bench_kind_t k = all[i].path->kind;
        if (k != BENCH_KIND_IPCP && k != BENCH_KIND_MPI && host)
            gpu_out++;
        else if (k == BENCH_KIND_MPI && !mpi)
            mpi_out++;
        else
            out[n++] = all[i];
    }
    note[0] = '\0';
    if (gpu_out) {
        bench_fmt(text, sizeof(text),
                  "--compare's GPU references (NCCL, the forum post's "
                  "staged pattern, single-process GPU copies) need GPU "
                  "memory; %d case%s left out",
                  gpu_out, gpu_out == 1 ? "" : "s");
        add_note(note, nlen, text);
    }
    if (mpi_out && host)
        bench_fmt(text, sizeof(text), "--compare has no ompi rows: %s", why);
    else if (mpi_out)
        bench_fmt(text, sizeof(text),
                  "--compare's ompi reference runs on host memory only "
                  "(--mem host); %d case%s left out",
                  mpi_out, mpi_out == 1 ? "" : "s");
    if (mpi_out)
        add_note(note, nlen, text);
    return n;
}

static void plot_subtitle(const bench_ctx_t *ctx, char *buf, size_t len)
{
    const bench_setup_info_t *in = bench_ctx_info(ctx);
    if (in->mem != BENCH_MEM_CUDA || in->dev[0] < 0)
        bench_fmt(buf, len, "ipcpipe %s, host memory, between two processes",
                  ipcp_version_string());
    else
        bench_fmt(buf, len,
                  "ipcpipe %s, GPU memory: rank 1 on %s (%s) -> rank 0 on "
                  "%s (%s)",
                  ipcp_version_string(), in->dev_name[1], in->bus[1],
                  in->dev_name[0], in->bus[0]);
}

/* Rank 0, after the run; returns 0 or 1 (not written). */
static int write_plot(const bench_opts_t *o, const bench_ctx_t *ctx,
                      const bench_result_t *rs, int n)
{
    char sub[320], err[BENCH_REASON_MAX];
    if (!rs) {
        fprintf(stderr, "ipcpipe-bench: --plot %s: out of memory\n", o->plot);
        return 1;
    }
    plot_subtitle(ctx, sub, sizeof(sub));
    if (bench_plot_write(o->plot, rs, n, sub, err, sizeof(err)) == 0)
        return 0;
    fprintf(stderr, "ipcpipe-bench: --plot %s: %s\n", o->plot, err);
    return 1;
}

/* Runs every case on this rank; returns the number of failed cases on rank
 * 0 (0 elsewhere), or -1 when the ranks lost step with each other. */
static int run_cases(ipcp_comm_t *comm, const bench_opts_t *o,
                     const bench_case_t *all, int nall)
{
    bench_case_t *cs = calloc((size_t)nall, sizeof(*cs));
    bench_ctx_t *ctx = cs ? bench_ctx_create(comm, o, all, nall) : NULL;
    if (!ctx) {
        free(cs);
        return -1;
    }
    int rank = ipcp_comm_rank(comm), nfailed = 0;
    char note[3 * BENCH_REASON_MAX];
    int n = runnable_cases(ctx, all, nall, cs, note, sizeof(note));
    if (n < 0) {
        bench_ctx_destroy(ctx);
        free(cs);
        return -1;
    }
    bench_result_t *rs =
        rank == 0 && o->plot ? calloc((size_t)n + 1, sizeof(*rs)) : NULL;
    if (rank == 0)
        bench_report_begin(o, comm, ctx, n, note[0] ? note : NULL);
    for (int i = 0; i < n; i++) {
        bench_result_t res;
        if (rank == 0) {
            if (i == 0 || cs[i].size != cs[i - 1].size) {
                char what[64];
                bench_fmt(what, sizeof(what), "%s (ceilings first)",
                          cs[i].name);
                bench_report_progress(o, i, n, what);
                bench_ceilings_measure(ctx, cs, n, i);
            }
            bench_report_progress(o, i, n, cs[i].name);
        }
        if (bench_run_case(ctx, &cs[i], i, &res) < 0) {
            nfailed = -1;
            break;
        }
        if (rank != 0)
            continue;
        bench_report_case(o, ctx, &res);
        nfailed += res.outcome == BENCH_ERROR || res.verified == 0;
        if (rs)
            rs[i] = res;
    }
    if (rank == 0) {
        bench_report_end(o, nfailed);
        if (o->plot && nfailed >= 0)
            nfailed += write_plot(o, ctx, rs, n);
    }
    /* Sends left behind when rank 0 gave up on a case are taken by the
     * progress threads before their buffers go (commands run in order). */
    if (nfailed >= 0)
        (void)ipcp_barrier(comm);
    bench_ctx_destroy(ctx);
    free(rs);
    free(cs);
    return nfailed;
}

static int rank_main(const bench_opts_t *o, const bench_case_t *cs, int n)
{
    ipcp_comm_t *comm;
    double t0 = bench_now_s();
    ipcp_status_t st = ipcp_init(NULL, &comm);
    double init_ms = (bench_now_s() - t0) * 1e3;
    if (st != IPCP_OK) {
        fprintf(stderr, "ipcpipe-bench: ipcp_init: %s: %s\n", ipcp_strerror(st),
                ipcp_last_error());
        return 1;
    }
    int rc = 0;
    if (ipcp_comm_size(comm) < 2) {
        if (ipcp_comm_rank(comm) == 0)
            fprintf(stderr, "ipcpipe-bench: needs at least 2 ranks (have %d)\n",
                    ipcp_comm_size(comm));
        rc = 2;
    } else {
        int nfailed = run_cases(comm, o, cs, n);
        rc = nfailed != 0 ? 1 : 0;
    }
    int rank = ipcp_comm_rank(comm);
    t0 = bench_now_s();
    st = ipcp_finalize(comm);
    double fin_ms = (bench_now_s() - t0) * 1e3;
    if (st != IPCP_OK) {
        fprintf(stderr, "ipcpipe-bench: ipcp_finalize: %s: %s\n",
                ipcp_strerror(st), ipcp_last_error());
        rc = rc ? rc : 1;
    }
    /* Start and stop, apart from the cases (the first transfer of each
     * carries its own one-time costs, CUDA's start-up included). */
    if (rank == 0 && st == IPCP_OK) {
        char note[160];
        bench_fmt(note, sizeof(note),
                  "rank 0: ipcp_init %.1f ms (the bootstrap waits for every "
                  "rank), ipcp_finalize %.1f ms",
                  init_ms, fin_ms);
        bench_report_note(o, note);
    }
    return rc;
}

int main(int argc, char **argv)
{
    bench_opts_t o;
    if (argc > 1 && strcmp(argv[1], "--load-worker") == 0)
        return bench_load_worker_main(argc, argv);
    int rc = parse_args(argc, argv, &o);
    if (rc)
        return rc == 1 ? 0 : rc;
    if (o.tune)
        return bench_tune();
    bench_case_t *cs = NULL;
    int n = build_cases(&o, &cs);
    if (n < 0)
        return 2;
    if (o.list) {
        for (int i = 0; i < n; i++)
            printf("%s\n", cs[i].name);
        free(cs);
        return 0;
    }
    if (n == 0) {
        fprintf(stderr, "ipcpipe-bench: no case selected\n");
        free(cs);
        return 2;
    }
    if (o.trace && !ipcp_launch_is_rank()) {
        /* The ranks read IPCPIPE_TRACE when they start; one case keeps the
         * timeline (and its overlap ratio) about one thing. */
        if (n != 1) {
            fprintf(stderr,
                    "ipcpipe-bench: --trace needs exactly one case "
                    "(e.g. --case staged:256M); %d selected\n",
                    n);
            free(cs);
            return 2;
        }
        setenv("IPCPIPE_TRACE", o.trace, 1);
    } else if (o.trace && (!getenv("IPCPIPE_TRACE") ||
                           strcmp(getenv("IPCPIPE_TRACE"), o.trace) != 0)) {
        /* Ranks this program spawned find it set already. */
        fprintf(stderr, "ipcpipe-bench: under a launcher, set IPCPIPE_TRACE "
                        "for the ranks instead of --trace\n");
        free(cs);
        return 2;
    }
    rc = ipcp_launch_is_rank() ? rank_main(&o, cs, n) : spawn_ranks(&o, argv);
    free(cs);
    return rc;
}
