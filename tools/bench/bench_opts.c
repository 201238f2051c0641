/* ipcpipe-bench: its options: the usage text, parsing, and the checks
 * that make a bad option an error naming it. */
#include "bench.h"
#include "sizes.h"

#include <ctype.h>
#include <errno.h>
#include <fnmatch.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "launch.h"

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
    "                  cuMemAlloc on GPUs: the library's legacy IPC path);\n"
    "                  GPU memory of other allocators: vmm (cuMemCreate\n"
    "                  with a POSIX fd handle), vmm0 (without handles),\n"
    "                  pool (cuMemAllocAsync, the default pool), spool (a\n"
    "                  pool made with POSIX fd handles)\n"
    "  --window N      transfers posted back to back per repetition\n"
    "                  (default: 64 MiB / size, between 1 and 64)\n"
    "  --sizes LIST    comma-separated sizes (8,4K,1M,1G+1); default:\n"
    "                  powers of 2 from --min to --max\n"
    "  --min SIZE      smallest size of the sweep (default 8)\n"
    "  --max SIZE      largest size of the sweep (default 1G)\n"
    "  --case NAME     run only matching cases; repeatable.  NAME is a\n"
    "                  path (direct, staged, bounce = through a ring in\n"
    "                  the receiver's GPU memory, GPU memory only;\n"
    "                  auto = the library's\n"
    "                  choice, eager for small messages; bidir = auto\n"
    "                  in both directions at once, bidir-direct the\n"
    "                  same with the direct path forced (not striped);\n"
    "                  stream = auto\n"
    "                  through the stream-ordered calls on one CUDA\n"
    "                  stream a rank, waived on host memory: W sends\n"
    "                  or receives enqueued, then the stream waited\n"
    "                  for, and a ping-pong of batches of round trips\n"
    "                  enqueued back to back, --stream-batch) or its\n"
    "                  prefix (a whole name selects that path alone),\n"
    "                  PATH:SIZE (direct:256M), or a glob (\"*:4K\");\n"
    "                  with --compare also nccl, nccl-ungrouped, naive,\n"
    "                  d2d, d2h, h2d, striped (GPU memory) and ompi (host\n"
    "                  memory).\n"
    "                  Default: every path at every size\n"
    "  --list          print the selected case names and exit\n"
    "  --iters N       timed repetitions per case, and ping-pong rounds\n"
    "                  (default: 2 GiB / (window * size) repetitions and\n"
    "                  2 GiB / size rounds, each between 40 and 1000)\n"
    "  --warmup N      untimed transfers before timing (default 2)\n"
    "  --lat-max SIZE  ping-pong latency up to this size (default 64K;\n"
    "                  0: never)\n"
    "  --ahead N       after the timed repetitions of a one-way case on\n"
    "                  host memory, N windows more, back to back with no\n"
    "                  barrier between them, so that the sender may run\n"
    "                  ahead of its receiver (messages then come before\n"
    "                  their receives); GB/s of each window after the\n"
    "                  first but the last, median (default 0: none; at\n"
    "                  least 3)\n"
    "  --stream-reqs every|last\n"
    "                  the stream case's ping-pong asks for a request on\n"
    "                  every call, or (last, the default, as stream-\n"
    "                  ordered code is written) only on each batch's last\n"
    "                  send and receive; the stream orders the rest\n"
    "  --stream-batch N\n"
    "                  round trips the stream case's ping-pong enqueues\n"
    "                  before each rank waits for its stream (default\n"
    "                  32: the rate at which round trips can be issued;\n"
    "                  1: the true latency, the host waiting for every\n"
    "                  round trip, as a blocking ping-pong is timed)\n"
    "  --stream-wait auto|sync|poll|event\n"
    "                  how a rank waits for its CUDA stream (the stream\n"
    "                  case, the NCCL rows): sync (cuStreamSynchronize,\n"
    "                  which spins without yielding under the driver's\n"
    "                  default schedule), poll (cuStreamQuery, yielding\n"
    "                  between polls), event (a blocking-sync event\n"
    "                  recorded after the stream's work: the rank sleeps\n"
    "                  until the device interrupts), or auto (the\n"
    "                  default: poll when the rank may run on one CPU,\n"
    "                  else sync)\n"
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
    "                  a window's calls in one group, and a ping-pong\n"
    "                  timed as the stream case's, libnccl.so.2\n"
    "                  loaded at run time; waived without\n"
    "                  it), nccl-ungrouped (the same calls outside any\n"
    "                  group, each its own kernel; no ping-pong), naive (the "
    "forum post's staged pattern of\n"
    "                  examples/seed.c --naive: 16 chunks D2H, then H2D\n"
    "                  into rank 1's buffer opened while rank 0's device\n"
    "                  is current, 4 streams a side), and rows for the\n"
    "                  single-process copies the ceilings measure (d2d,\n"
    "                  d2h, h2d, and from 4 MiB striped: the copy engine\n"
    "                  and pinned staging at once).  Each row of ipcpipe\n"
    "                  is then also given as a ratio to nccl and to\n"
    "                  naive.  On host memory:\n"
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
    "  --json          JSON, not the table: {\"run\": what made the\n"
    "                  figures, \"cases\": one object per case}\n"
    "  --csv           CSV, not the table: a header line with the JSON\n"
    "                  fields (nested ones as devices.receiver, ...),\n"
    "                  then one line per case\n"
    "  --plot FILE     after the run, write an SVG chart of GB/s against\n"
    "                  size to FILE: a line per path or reference, dashed\n"
    "                  lines for the ceilings (with the table, --json or\n"
    "                  --csv)\n"
    "  --plot-log      the plot's GB/s on a log10 axis (whole decades), so\n"
    "                  that small-message lines do not lie flat\n"
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
    "  --heartbeat S   when stderr is no terminal (a pipe, a log, mpirun),\n"
    "                  a line there every S seconds at most, between\n"
    "                  cases: how many are done, the time left at their\n"
    "                  pace (default 30; 0: none)\n"
    "  --help          this text\n"
    "  --version       the version of ipcpipe it runs\n"
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
    "failed, 2 on bad options or --mem cuda where no GPU can be used.\n";

static void usage(FILE *f)
{
    fputs(usage_text, f);
}

/* "123", "4K", "1M+3": a sum of terms ending at '\0', or at ',' when endp
 * is given (lists). */
int bench_parse_size(const char *s, size_t *out, const char **endp)
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

/* --sizes; on a bad list, err says which item and why. */
static int parse_sizes_list(bench_opts_t *o, const char *list, char *err,
                            size_t elen)
{
    const char *p = list;
    o->nsizes = 0;
    while (*p) {
        size_t v;
        const char *end;
        if (o->nsizes == BENCH_MAX_SIZES) {
            snprintf(err, elen, "more than %d sizes", BENCH_MAX_SIZES);
            return -1;
        }
        if (bench_parse_size(p, &v, &end) < 0 || v == 0 ||
            (*end && *end != ',')) {
            int n = (int)strcspn(p, ",");
            snprintf(err, elen,
                     "\"%.*s\" is not a size (bytes above 0, with K, M or G, "
                     "terms joined by +: 4K, 1M+3)",
                     n, p);
            return -1;
        }
        o->sizes[o->nsizes++] = v;
        p = *end ? end + 1 : end;
    }
    if (o->nsizes == 0)
        snprintf(err, elen, "no size given");
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
    OPT_AHEAD,
    OPT_STREAM_REQS,
    OPT_STREAM_BATCH,
    OPT_STREAM_WAIT,
    OPT_TIMEOUT,
    OPT_MEM,
    OPT_DEVICES,
    OPT_ALLOC,
    OPT_WINDOW,
    OPT_TUNE,
    OPT_LOAD,
    OPT_PIN,
    OPT_HELP,
    OPT_VERSION,
    OPT_HEARTBEAT,
    OPT_PLOT_LOG,
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
    {"ahead", required_argument, NULL, OPT_AHEAD},
    {"stream-reqs", required_argument, NULL, OPT_STREAM_REQS},
    {"stream-batch", required_argument, NULL, OPT_STREAM_BATCH},
    {"stream-wait", required_argument, NULL, OPT_STREAM_WAIT},
    {"timeout", required_argument, NULL, OPT_TIMEOUT},
    {"mem", required_argument, NULL, OPT_MEM},
    {"devices", required_argument, NULL, OPT_DEVICES},
    {"alloc", required_argument, NULL, OPT_ALLOC},
    {"window", required_argument, NULL, OPT_WINDOW},
    {"tune", no_argument, NULL, OPT_TUNE},
    {"load", required_argument, NULL, OPT_LOAD},
    {"pin", no_argument, NULL, OPT_PIN},
    {"help", no_argument, NULL, OPT_HELP},
    {"version", no_argument, NULL, OPT_VERSION},
    {"heartbeat", required_argument, NULL, OPT_HEARTBEAT},
    {"plot-log", no_argument, NULL, OPT_PLOT_LOG},
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

/* An option without an argument; -1: not one. */
static int apply_flag(bench_opts_t *o, int c)
{
    switch (c) {
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
    case OPT_NO_VERIFY:
        o->verify = 0;
        return 0;
    case OPT_TUNE:
        o->tune = 1;
        return 0;
    case OPT_PIN:
        o->pin = 1;
        return 0;
    case OPT_PLOT_LOG:
        o->plot_log = 1;
        return 0;
    default:
        return -1;
    }
}

/* --stream-wait auto|sync|poll|event; -1 for anything else. */
static int parse_stream_wait(bench_opts_t *o, const char *arg)
{
    static const char *const names[] = {"auto", "sync", "poll", "event"};
    for (int i = 0; i < 4; i++)
        if (strcmp(arg, names[i]) == 0) {
            o->stream_wait = i; /* bench_wait_t's order */
            bench_set_stream_wait(i);
            return 0;
        }
    return -1;
}

/* Applies one option; returns 0, or -1 when its value is bad. */
static int apply_opt(bench_opts_t *o, size_args_t *sa, int c, const char *arg)
{
    static const char *const mems[] = {"auto", "host", "cuda"};
    static const char *const allocs[] = {"ipcp", "plain", "vmm",
                                         "vmm0", "pool",  "spool"};
    char *end;
    int v;
    switch (c) {
    case OPT_MEM:
        if (parse_choice(arg, mems, 3, &v) < 0)
            return -1;
        o->mem = (bench_mem_t)v;
        return 0;
    case OPT_ALLOC:
        if (parse_choice(arg, allocs, 6, &v) < 0)
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
        return bench_parse_size(arg, &sa->min, NULL) < 0 || !sa->min ? -1 : 0;
    case OPT_MAX:
        return bench_parse_size(arg, &sa->max, NULL) < 0 || !sa->max ? -1 : 0;
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
        return bench_parse_size(arg, &o->lat_max, NULL);
    case OPT_AHEAD: /* the first and the last window are not timed */
        return bench_parse_int(arg, 0, 1000000, &o->ahead) < 0 ||
                       (o->ahead > 0 && o->ahead < 3)
                   ? -1
                   : 0;
    case OPT_STREAM_REQS:
        if (strcmp(arg, "every") && strcmp(arg, "last"))
            return -1;
        o->stream_reqs_every = strcmp(arg, "every") == 0;
        return 0;
    case OPT_STREAM_BATCH:
        return bench_parse_int(arg, 1, BENCH_MAX_STREAM_BATCH,
                               &o->stream_batch);
    case OPT_STREAM_WAIT:
        return parse_stream_wait(o, arg);
    case OPT_TIMEOUT:
        o->timeout_s = strtod(arg, &end);
        return end == arg || *end || !(o->timeout_s >= 0) ? -1 : 0;
    case OPT_HEARTBEAT:
        o->heartbeat = strtod(arg, &end);
        return end == arg || *end || !(o->heartbeat >= 0) ? -1 : 0;
    case OPT_PLOT:
        o->plot = arg;
        return *arg ? 0 : -1;
    case OPT_TRACE:
        o->trace = arg;
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
        return apply_flag(o, c);
    }
}

/* Returns 0, 1 after --help, or 2 on a bad option (message printed). */
int bench_parse_args(int argc, char **argv, bench_opts_t *o)
{
    size_args_t sa = {NULL, 8, GIB};
    *o = (bench_opts_t){.warmup = 2,
                        .nranks = 2,
                        .verify = 1,
                        .lat_max = 64 * 1024,
                        .stream_batch = 32,
                        .heartbeat = 30};
    opterr = 0;
    int c, li = 0;
    while ((c = getopt_long(argc, argv, "", long_opts, &li)) != -1) {
        if (c == OPT_HELP) {
            usage(stdout);
            return 1;
        }
        if (c == OPT_VERSION) {
            printf("ipcpipe-bench %s\n", ipcp_version_string());
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
    char err[200];
    if (sa.list && parse_sizes_list(o, sa.list, err, sizeof(err))) {
        fprintf(stderr, "ipcpipe-bench: --sizes %s: %s\n", sa.list, err);
        return 2;
    }
    if (!sa.list && sweep_sizes(o, sa.min, sa.max)) {
        fprintf(stderr,
                "ipcpipe-bench: bad --min/--max (each > 0, --min <= --max, at "
                "most %d sizes between)\n",
                BENCH_MAX_SIZES);
        return 2;
    }
    return 0;
}
