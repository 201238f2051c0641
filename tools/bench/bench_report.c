/* ipcpipe-bench: the table, the JSON, the CSV and the progress line
 * (rank 0).  JSON and CSV are written from one list of fields per case, so
 * they always carry the same ones (CSV names a nested JSON field
 * "devices.receiver"). */
#include "json.h"
#include "bench.h"

#include <math.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "bench_commit.h"

/* Rows of ipcpipe set against the references of their size (--compare). */
#define SUMMARY_MAX 8

static struct {
    int progress;   /* a progress line may be on stderr */
    int first_json; /* no JSON object printed yet */
    int measured, waived, failed;
    /* how much later rank 1 left the timed barriers: cases, range (us) */
    int nskew;
    double skew_lo, skew_hi;
    double t0;        /* start of the run, for the progress line */
    double next_beat; /* when a heartbeat line is due (stderr no terminal) */
    /* --compare: the references of the size being printed */
    size_t size;
    double nccl, naive, ompi; /* GB/s; 0: none */
    double ompi_lat;          /* us; 0: none */
    int nsum;
    struct {
        char name[32];
        double vs_nccl, vs_naive, vs_ompi; /* GB/s over GB/s; 0: none */
        double lat_vs_ompi;                /* us over us; 0: none */
    } sum[SUMMARY_MAX];
} rep;

static const char *mem_name(bench_mem_t m)
{
    return m == BENCH_MEM_CUDA ? "cuda" : "host";
}

static const char *alloc_name(bench_alloc_t a)
{
    static const char *const names[] = {"ipcp", "plain", "vmm",
                                        "vmm0", "pool",  "spool"};
    return (unsigned)a < sizeof(names) / sizeof(names[0]) ? names[a] : "?";
}

/* Where the GPU buffers of a row came from, in words. */
static const char *alloc_words(bench_alloc_t a)
{
    switch (a) {
    case BENCH_ALLOC_PLAIN:
        return "cuMemAlloc (the library's legacy IPC path)";
    case BENCH_ALLOC_VMM:
        return "cuMemCreate with a POSIX fd handle (memory the library did "
               "not allocate, exported by fd)";
    case BENCH_ALLOC_VMM0:
        return "cuMemCreate without handle types (memory no process can "
               "share)";
    case BENCH_ALLOC_POOL:
        return "cuMemAllocAsync from the default pool (memory no process "
               "can share)";
    case BENCH_ALLOC_SPOOL:
        return "cuMemAllocFromPoolAsync, a pool made with POSIX fd handles";
    default:
        return "ipcp_mem_alloc (VMM, exported as file descriptors)";
    }
}

static void header_memory(const bench_setup_info_t *in)
{
    if (in->mem != BENCH_MEM_CUDA) {
        printf("# memory: host, from %s%s%s\n",
               in->alloc == BENCH_ALLOC_PLAIN
                   ? "posix_memalign (private: no peer can map it)"
                   : "ipcp_mem_alloc (shared memory peers can map)",
               in->mem_note[0] ? "; " : "", in->mem_note);
        return;
    }
    printf("# memory: cuda, from %s\n", alloc_words(in->alloc));
    for (int r = 0; r < 2; r++) {
        if (in->dev[r] < 0)
            continue;
        printf("#   rank %d (%s) on device %d: %s, %s\n", r,
               r ? "sender" : "receiver", in->dev[r], in->dev_name[r],
               in->bus[r]);
    }
}

static void header_ceilings(const bench_setup_info_t *in)
{
    if (in->mem != BENCH_MEM_CUDA) {
        int q = bench_host_queues();
        printf("# ceilings, measured in this run with the same W, median: "
               "memcpy = one thread's memcpy of W*size bytes in the\n"
               "#   receiving process; memcpy-par = %d threads of it (as many "
               "as the library's copy queues), each a\n"
               "#   share of every transfer, spread over both ranks' CPUs "
               "when the ranks are bound to fewer (the\n"
               "#   library then copies in both); nt-par = the same threads "
               "copying with non-temporal stores, as\n"
               "#   the library copies pieces from 256 KiB up; memcpy-bidir, "
               "nt-bidir = both directions at once,\n"
               "#   %d threads each, aggregate; a row is set against the "
               "fastest of these at its size (named)\n",
               q, q);
        return;
    }
    int a = in->ceil_dev[0], b = in->ceil_dev[1];
    if (a < 0) {
        printf("# ceilings (d2d, min(d2h,h2d), d2d-bidir): none measured, "
               "no device buffers\n");
        return;
    }
    printf("# ceilings, measured in this run by the receiving process alone, "
           "CUDA events, same W, median; devices as it numbers them:\n"
           "#   d2d = cuMemcpyAsync device %d -> device %d (buffers on the "
           "sender's and the receiver's device);\n"
           "#   min(d2h,h2d) = min of pinned D2H on device %d and pinned H2D "
           "on device %d;\n"
           "#   d2d-bidir = %d -> %d and %d -> %d at once on two streams, "
           "aggregate; 2*min(d2h,h2d) for bidir over the staged path;\n"
           "#   striped (rows that striped one way, from 4 MiB) = d2d of "
           "most of each copy while its tail goes D2H on a\n"
           "#   second stream of device %d and H2D on device %d at the same "
           "time, the best of staged shares 4-15%%\n",
           a, b, a, b, a, b, b, a, a, b);
    if (in->ceil_note && in->ceil_note[0])
        printf("#   note: %s\n", in->ceil_note);
}

static void csv_header(const bench_ctx_t *ctx);

static void header_compare_host(const bench_ctx_t *ctx)
{
    char ompi[BENCH_REASON_MAX + 64];
    bench_ompi_describe(ctx, ompi, sizeof(ompi));
    if (!ompi[0])
        return;
    printf("# --compare: a reference on the same cores, with the same sizes, "
           "W, slots, repetitions, warm-up and clock:\n"
           "#   ompi = %s: two MPI ranks of its\n"
           "#     own (ipcpipe-bench-mpi), each bound to the CPUs of "
           "ipcpipe's rank of that number; W MPI_Isend (rank 1) /\n"
           "#     MPI_Irecv (rank 0) and MPI_Waitall per repetition, the "
           "ping-pong with MPI_Send/MPI_Recv; its own buffers\n"
           "#     (posix_memalign, touched), data checked as ipcpipe's "
           "(fresh data, poisoned slots, first and last checked)\n"
           "#   each ipcpipe row is then set against ompi of its size "
           "(\"vs references\" lines: GB/s over ompi's GB/s, latency\n"
           "#     over ompi's latency; vs_ompi, lat_vs_ompi in JSON/CSV)\n",
           ompi);
}

static void header_compare(const bench_opts_t *o, const bench_ctx_t *ctx)
{
    const bench_setup_info_t *in = bench_ctx_info(ctx);
    char nccl[BENCH_REASON_MAX];
    if (o->compare && in->mem != BENCH_MEM_CUDA)
        header_compare_host(ctx);
    if (!o->compare || in->mem != BENCH_MEM_CUDA)
        return;
    bench_nccl_describe(nccl, sizeof(nccl));
    printf("# --compare: references between the same ranks, on the same "
           "buffers, with the same W, timed the same way:\n"
           "#   nccl = ncclSend (rank 1) / ncclRecv (rank 0) on one stream "
           "of each rank's device, a window's calls in one group; %s\n"
           "#   nccl-ungrouped = the same calls outside any group, each its "
           "own kernel after the previous one (no ping-pong)\n"
           "#   naive = the forum post's pattern (examples/seed.c --naive): "
           "rank 0 opens rank 1's cuMemAlloc buffer while its own device\n"
           "#     is current, then per transfer 16 chunks D2H on 4 streams "
           "of its device into pinned memory and H2D on 4 streams of\n"
           "#     rank 1's device after an event (data moves rank 0 -> "
           "rank 1; rank 0 times it)\n"
           "#   d2d, d2h, h2d, striped = the single-process copies of the "
           "ceilings, as rows (rank 0 alone; no data check);\n"
           "#     striped from 4 MiB, on one device too (its direct part "
           "then a copy within the device)\n"
           "#   each ipcpipe row is then set against nccl (grouped) and "
           "naive of its size (\"vs references\" lines; vs_nccl,\n"
           "#     vs_naive in JSON/CSV)\n",
           nccl);
}

/* What --load put beside the run, as a header line or a note. */
static void header_load(const bench_opts_t *o, const bench_ctx_t *ctx)
{
    char text[BENCH_REASON_MAX];
    int dev, d2h = o->load == BENCH_LOAD_D2H;
    if (o->load == BENCH_LOAD_NONE)
        return;
    if (bench_ctx_load(ctx, &dev))
        bench_fmt(text, sizeof(text),
                  "load (--load %s): a third process copies %zu MiB of "
                  "pinned memory %d at a time, %s, on rank %d's GPU "
                  "(device %d as that rank numbers them) from before the "
                  "first case to the end; the ceilings ran beside it too",
                  bench_load_name(o->load), BENCH_LOAD_CHUNK >> 20,
                  BENCH_LOAD_DEPTH, d2h ? "device to host" : "host to device",
                  d2h ? 1 : 0, dev);
    else
        bench_fmt(text, sizeof(text),
                  "load (--load %s): not started, rank %d has no GPU buffers",
                  bench_load_name(o->load), d2h ? 1 : 0);
    if (o->json || o->csv)
        bench_report_note(o, text);
    else
        printf("# %s\n", text);
}

extern char **environ;

/* The first model name /proc/cpuinfo gives, or "". */
static void cpu_model(char *buf, size_t len)
{
    char line[256];
    FILE *f = fopen("/proc/cpuinfo", "r");
    buf[0] = '\0';
    while (f && fgets(line, sizeof(line), f)) {
        char *colon = strchr(line, ':');
        if (strncmp(line, "model name", 10) == 0 && colon) {
            colon += strspn(colon + 1, " \t") + 1;
            colon[strcspn(colon, "\n")] = '\0';
            snprintf(buf, len, "%s", colon);
            break;
        }
    }
    if (f)
        fclose(f);
}

/* The GPUs this process sees, as [{"device", "name", "bus"}]. */
static void json_gpus(void)
{
    printf("[");
    for (int d = 0; d < bench_cuda_ndev(); d++) {
        char bus[32] = "", name[128] = "";
        bench_cuda_bus_id(d, bus, sizeof(bus), name, sizeof(name));
        printf("%s{\"device\": %d, \"name\": ", d ? ", " : "", d);
        ipcp_json_str(stdout, name);
        printf(", \"bus\": ");
        ipcp_json_str(stdout, bus);
        printf("}");
    }
    printf("]");
}

/* What made the figures: the library, the commit, the machine, the ranks,
 * the options and every IPCPIPE_* setting of the environment. */
static void json_run(const bench_opts_t *o, ipcp_comm_t *comm,
                     const bench_ctx_t *ctx)
{
    char host[256] = "", date[32] = "", model[256];
    struct utsname u;
    time_t now = time(NULL);
    struct tm tm;
    if (gethostname(host, sizeof(host) - 1) != 0)
        host[0] = '\0';
    if (gmtime_r(&now, &tm))
        strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", &tm);
    if (uname(&u) != 0)
        snprintf(u.release, sizeof(u.release), "unknown");
    cpu_model(model, sizeof(model));
    printf("{\"run\": {\"version\": ");
    ipcp_json_str(stdout, ipcp_version_string());
    printf(", \"commit\": ");
    ipcp_json_str(stdout, IPCP_BENCH_COMMIT);
    printf(", \"date\": ");
    ipcp_json_str(stdout, date);
    printf(", \"host\": ");
    ipcp_json_str(stdout, host);
    printf(", \"kernel\": ");
    ipcp_json_str(stdout, u.release);
    printf(", \"cpus\": %ld, \"cpu_model\": ", sysconf(_SC_NPROCESSORS_ONLN));
    ipcp_json_str(stdout, model);
    printf(", \"ranks\": %d, \"job\": ", ipcp_comm_size(comm));
    ipcp_json_str(stdout, ipcp_comm_job(comm));
    printf(", \"mem\": \"%s\", \"gpus\": ",
           bench_ctx_mem(ctx) == BENCH_MEM_CUDA ? "cuda" : "host");
    json_gpus();
    printf(", \"options\": {\"window\": %d, \"iters\": %d, \"warmup\": %d, "
           "\"verify\": %s, \"compare\": %s, \"pin\": %s, "
           "\"stream_wait\": \"%s\", \"stream_batch\": %d, "
           "\"ahead\": %d, \"seed\": \"0x%016llx\"}",
           o->window, o->iters, o->warmup, o->verify ? "true" : "false",
           o->compare ? "true" : "false", o->pin ? "true" : "false",
           bench_stream_wait() == BENCH_WAIT_EVENT  ? "event"
           : bench_stream_wait() == BENCH_WAIT_POLL ? "poll"
                                                    : "sync",
           o->stream_batch, o->ahead, (unsigned long long)bench_ctx_seed(ctx));
    printf(", \"settings\": {");
    int n = 0;
    for (char **e = environ; e && *e; e++) {
        const char *eq = strchr(*e, '=');
        /* Rank, size and job are the launcher's (and "ranks", "job"). */
        if (strncmp(*e, "IPCPIPE_", 8) != 0 || !eq ||
            strncmp(*e, "IPCPIPE_RANK=", 13) == 0 ||
            strncmp(*e, "IPCPIPE_SIZE=", 13) == 0 ||
            strncmp(*e, "IPCPIPE_JOB=", 12) == 0)
            continue;
        char name[128];
        snprintf(name, sizeof(name), "%.*s", (int)(eq - *e), *e);
        printf("%s", n++ ? ", " : "");
        ipcp_json_str(stdout, name);
        printf(": ");
        ipcp_json_str(stdout, eq + 1);
    }
    printf("}},\n \"cases\": [");
}

void bench_report_begin(const bench_opts_t *o, ipcp_comm_t *comm,
                        const bench_ctx_t *ctx, int ncases, const char *note)
{
    /* A progress line only helps someone watching; in a pipe, a log, JSON
     * or CSV it would be noise. */
    rep.progress = !o->json && !o->csv && isatty(STDERR_FILENO);
    rep.first_json = 1;
    rep.t0 = bench_now_s();
    rep.next_beat = rep.t0 + o->heartbeat;
    if (o->json || o->csv) {
        if (note)
            bench_report_note(o, note);
        header_load(o, ctx);
        if (o->json)
            json_run(o, comm, ctx);
        else
            csv_header(ctx);
        fflush(stdout);
        return;
    }
    char cap[24];
    if (bench_ctx_cap(ctx))
        bench_format_size(bench_ctx_cap(ctx), cap, sizeof(cap));
    else
        snprintf(cap, sizeof(cap), "none");
    printf("# ipcpipe-bench %s: %d ranks (rank 0 receives, rank 1 sends; "
           "both in bidir), job %s\n",
           ipcp_version_string(), ipcp_comm_size(comm), ipcp_comm_job(comm));
    header_memory(bench_ctx_info(ctx));
    printf("# %d cases, verify %s (seed 0x%016llx), warm-up %d, buffers up "
           "to %s\n",
           ncases, o->verify ? "on" : "off",
           (unsigned long long)bench_ctx_seed(ctx), o->warmup, cap);
    printf("# GB/s = 1e9 bytes/s, median of the timed repetitions; a "
           "repetition posts W transfers back to back and moves W*size "
           "bytes,\n"
           "#   timed from both ranks leaving a barrier (rank 1 sends the "
           "times it left at; one clock) to the receiver's last receive's "
           "completion;\n"
           "#   bidir: both ranks send W and receive W at once, 2*W*size "
           "bytes to the last completion on either rank;\n"
           "#   host memory: the k-th send reads source slot k %% slots, "
           "every slot rewritten before each repetition (fresh data, as a "
           "program sends what it just wrote)\n");
    header_ceilings(bench_ctx_info(ctx));
    header_load(o, ctx);
    header_compare(o, ctx);
    if (note)
        bench_report_note(o, note);
    printf("# latency = half a ping-pong round trip, median; ratio = GB/s "
           "over the ceiling GB/s\n");
    printf(BENCH_ROW_FMT, "size", "path", "W", "GB/s", "ceiling GB/s",
           "ceiling", "ratio %", "latency us", "verified");
    fflush(stdout);
}

void bench_report_note(const bench_opts_t *o, const char *text)
{
    if (o->json || o->csv)
        fprintf(stderr, "ipcpipe-bench: note: %s\n", text);
    else
        printf("# note: %s\n", text);
    fflush(stdout);
}

/* What is left of the run at the pace of the cases done so far (cases
 * differ: a guess), as " ~N s left", or "" before the first has ended. */
static void time_left(int done, int total, double el, char *buf, size_t len)
{
    buf[0] = '\0';
    if (done > 0 && total > done)
        snprintf(buf, len, ", ~%.0f s left", el / done * (total - done));
}

void bench_report_progress(const bench_opts_t *o, int done, int total,
                           const char *name)
{
    double now = bench_now_s(), el = now - rep.t0;
    char left[48];
    time_left(done, total, el, left, sizeof(left));
    if (rep.progress) {
        fprintf(stderr, "\r\033[K[%d/%d, %.0f%% done, %.0f s%s] %s ...",
                done + 1, total, total ? 100.0 * done / total : 0.0, el, left,
                name);
        fflush(stderr);
        return;
    }
    /* Elsewhere (a pipe, a log, mpirun's output) a line now and then, so
     * that a long run is seen to move. */
    if (o->heartbeat <= 0 || isatty(STDERR_FILENO) || now < rep.next_beat)
        return;
    rep.next_beat = now + o->heartbeat;
    fprintf(stderr,
            "ipcpipe-bench: %d of %d cases done after %.0f s%s; now %s\n", done,
            total, el, left, name);
    fflush(stderr);
}

/* Enough digits for 8-byte figures without hiding a 400 GB/s one. */
/* ---- one list of fields for JSON and CSV ------------------------------- */

typedef enum { F_NULL, F_STR, F_NUM, F_UINT, F_INT, F_BOOL } ftype_t;

typedef struct field {
    const char *key; /* "a.b": b of the object a (JSON), column a.b (CSV) */
    ftype_t type;
    const char *s;
    double d;
    unsigned long long u;
    long long i;
} field_t;

#define MAX_FIELDS 40

typedef struct fields {
    field_t f[MAX_FIELDS];
    int n;
} fields_t;

static field_t *field_add(fields_t *fs, const char *key, ftype_t t)
{
    field_t *f = &fs->f[fs->n < MAX_FIELDS - 1 ? fs->n++ : fs->n];
    *f = (field_t){.key = key, .type = t};
    return f;
}

static void field_str(fields_t *fs, const char *key, const char *v)
{
    field_add(fs, key, v ? F_STR : F_NULL)->s = v;
}

static void field_num(fields_t *fs, const char *key, double v, int valid)
{
    field_add(fs, key, valid && isfinite(v) ? F_NUM : F_NULL)->d = v;
}

static void field_int(fields_t *fs, const char *key, long long v, int valid)
{
    field_add(fs, key, valid ? F_INT : F_NULL)->i = v;
}

static void field_bool(fields_t *fs, const char *key, int v)
{
    field_add(fs, key, v < 0 ? F_NULL : F_BOOL)->i = v;
}

/* vs: GB/s of r over its size's reference (0 when it has none). */
static double vs_ref(const bench_result_t *r, double ref)
{
    const bench_path_t *p = r->c->path;
    if (p->kind != BENCH_KIND_IPCP || p->bidir || r->outcome != BENCH_OK ||
        !(r->gbps > 0) || !(ref > 0) || r->c->size != rep.size)
        return 0;
    return r->gbps / ref;
}

/* Latency of r over its size's Open MPI latency (0 when either is not
 * measured). */
static double lat_vs_ompi(const bench_result_t *r)
{
    const bench_path_t *p = r->c->path;
    if (p->kind != BENCH_KIND_IPCP || p->bidir || r->outcome != BENCH_OK ||
        !(r->latency_us > 0) || !isfinite(r->latency_us) ||
        !(rep.ompi_lat > 0) || r->c->size != rep.size)
        return 0;
    return r->latency_us / rep.ompi_lat;
}

static void row_fields(const bench_ctx_t *ctx, const bench_result_t *r,
                       fields_t *fs)
{
    const bench_setup_info_t *in = bench_ctx_info(ctx);
    static const char *const outcome[] = {"ok", "waived", "failed"};
    const bench_path_t *p = r->c->path;
    int ok = r->outcome == BENCH_OK, ref = p->kind != BENCH_KIND_IPCP;
    int cuda = in->mem == BENCH_MEM_CUDA && in->dev[0] >= 0,
        cdev = cuda && in->ceil_dev[0] >= 0;
    fs->n = 0;
    field_str(fs, "case", r->c->name);
    field_add(fs, "size", F_UINT)->u = r->c->size;
    field_str(fs, "path", p->name);
    field_str(fs, "path_used",
              !ok   ? NULL
              : ref ? p->name
                    : ipcp_path_name(r->path_used));
    field_str(fs, "mem", mem_name(in->mem));
    field_str(fs, "alloc", alloc_name(in->alloc));
    field_int(fs, "devices.receiver", in->dev[0], cuda);
    field_int(fs, "devices.sender", in->dev[1], cuda);
    field_str(fs, "devices.receiver_bus", cuda ? in->bus[0] : NULL);
    field_str(fs, "devices.sender_bus", cuda ? in->bus[1] : NULL);
    field_int(fs, "ceiling_devices.from", in->ceil_dev[0], cdev);
    field_int(fs, "ceiling_devices.to", in->ceil_dev[1], cdev);
    field_int(fs, "window", r->window, 1);
    field_num(fs, "gbps", r->gbps, ok && r->gbps > 0);
    field_num(fs, "gbps_min", r->gbps_min, ok && r->gbps_min > 0);
    field_num(fs, "gbps_max", r->gbps_max, ok && r->gbps_max > 0);
    field_num(fs, "ceiling_gbps", r->ceiling_gbps, r->ceiling_gbps > 0);
    field_str(fs, "ceiling_kind",
              r->ceiling_gbps > 0 ? bench_ceil_name(r->ceiling_kind) : NULL);
    field_num(fs, "ratio", r->gbps / r->ceiling_gbps,
              ok && r->gbps > 0 && r->ceiling_gbps > 0);
    field_num(fs, "latency_us", r->latency_us, ok && r->latency_us >= 0);
    field_num(fs, "latency_min_us", r->latency_min_us,
              ok && r->latency_min_us >= 0);
    field_num(fs, "latency_max_us", r->latency_max_us,
              ok && r->latency_max_us >= 0);
    field_num(fs, "first_us", r->first_us, ok && r->first_us >= 0);
    field_num(fs, "post_us", r->post_us, ok && r->post_us >= 0);
    field_num(fs, "start_skew_us", r->skew_us, ok && isfinite(r->skew_us));
    field_num(fs, "ahead_gbps", r->ahead_gbps, ok && r->ahead_gbps > 0);
    field_num(fs, "ahead_gbps_min", r->ahead_min, ok && r->ahead_min > 0);
    field_num(fs, "ahead_gbps_max", r->ahead_max, ok && r->ahead_max > 0);
    field_bool(fs, "verified", !ok || r->verified < 0 ? -1 : r->verified);
    field_int(fs, "iters", r->iters, 1);
    field_str(fs, "status", outcome[r->outcome]);
    field_str(fs, "reason", r->reason[0] ? r->reason : NULL);
    field_bool(fs, "reference", ref);
    double vn = vs_ref(r, rep.nccl), vv = vs_ref(r, rep.naive);
    double vo = vs_ref(r, rep.ompi), lo = lat_vs_ompi(r);
    field_num(fs, "vs_nccl", vn, vn > 0);
    field_num(fs, "vs_naive", vv, vv > 0);
    field_num(fs, "vs_ompi", vo, vo > 0);
    field_num(fs, "lat_vs_ompi", lo, lo > 0);
}

static void json_value(const field_t *f)
{
    switch (f->type) {
    case F_NULL:
        printf("null");
        break;
    case F_STR:
        ipcp_json_str(stdout, f->s);
        break;
    case F_NUM:
        printf("%.6g", f->d);
        break;
    case F_UINT:
        printf("%llu", f->u);
        break;
    case F_INT:
        printf("%lld", f->i);
        break;
    case F_BOOL:
        printf("%s", f->i ? "true" : "false");
        break;
    }
}

/* Keys "a.b" that follow each other make the object "a" (null when every
 * member is null). */
static void json_obj(const fields_t *fs)
{
    printf("%s\n  {", rep.first_json ? "" : ",");
    rep.first_json = 0;
    for (int k = 0; k < fs->n;) {
        const char *dot = strchr(fs->f[k].key, '.');
        printf("%s\"", k ? ", " : "");
        if (!dot) {
            printf("%s\": ", fs->f[k].key);
            json_value(&fs->f[k++]);
            continue;
        }
        size_t plen = (size_t)(dot - fs->f[k].key);
        int end = k, any = 0;
        while (end < fs->n &&
               strncmp(fs->f[end].key, fs->f[k].key, plen + 1) == 0)
            any |= fs->f[end++].type != F_NULL;
        printf("%.*s\": ", (int)plen, fs->f[k].key);
        if (!any) {
            printf("null");
        } else {
            printf("{");
            for (int j = k; j < end; j++) {
                printf("%s\"%s\": ", j > k ? ", " : "",
                       fs->f[j].key + plen + 1);
                json_value(&fs->f[j]);
            }
            printf("}");
        }
        k = end;
    }
    printf("}");
}

/* RFC 4180: a field with a comma, a quote or a line break is quoted, its
 * quotes doubled. */
static void csv_str(const char *s)
{
    if (!strpbrk(s, ",\"\r\n")) {
        fputs(s, stdout);
        return;
    }
    putchar('"');
    for (; *s; s++) {
        if (*s == '"')
            putchar('"');
        putchar(*s);
    }
    putchar('"');
}

/* Null is an empty field. */
static void csv_line(const fields_t *fs)
{
    for (int k = 0; k < fs->n; k++) {
        const field_t *f = &fs->f[k];
        if (k)
            putchar(',');
        if (f->type == F_STR)
            csv_str(f->s);
        else if (f->type != F_NULL)
            json_value(f);
    }
    putchar('\n');
}

static void csv_header(const bench_ctx_t *ctx)
{
    static const bench_case_t dummy = {&bench_paths[0], 0, "-"};
    bench_result_t r = {.c = &dummy, .outcome = BENCH_WAIVED};
    fields_t fs;
    row_fields(ctx, &r, &fs);
    for (int k = 0; k < fs.n; k++) {
        if (k)
            putchar(',');
        csv_str(fs.f[k].key);
    }
    putchar('\n');
}

/* ---- --compare: the references of a size ------------------------------- */

static void summary_flush(const bench_opts_t *o)
{
    if (o->compare && !o->json && !o->csv && rep.nsum > 0) {
        char sz[24];
        bench_format_size(rep.size, sz, sizeof(sz));
        printf("#   %s vs references:", sz);
        for (int k = 0; k < rep.nsum; k++) {
            const char *sep = "";
            printf("%s %s", k ? ";" : "", rep.sum[k].name);
            if (rep.sum[k].vs_nccl > 0) {
                printf(" %.2f x nccl", rep.sum[k].vs_nccl);
                sep = ",";
            }
            if (rep.sum[k].vs_naive > 0) {
                printf("%s %.2f x naive", sep, rep.sum[k].vs_naive);
                sep = ",";
            }
            if (rep.sum[k].vs_ompi > 0) {
                printf("%s %.2f x ompi", sep, rep.sum[k].vs_ompi);
                sep = ",";
            }
            if (rep.sum[k].lat_vs_ompi > 0)
                printf("%s latency %.2f x ompi's", sep, rep.sum[k].lat_vs_ompi);
        }
        printf("\n");
    }
    rep.nsum = 0;
}

static void summary_note(const bench_opts_t *o, const bench_result_t *r)
{
    const bench_path_t *p = r->c->path;
    if (r->c->size != rep.size) {
        summary_flush(o);
        rep.size = r->c->size;
        rep.nccl = rep.naive = rep.ompi = rep.ompi_lat = 0;
    }
    int ok = r->outcome == BENCH_OK && r->gbps > 0;
    if (p->kind == BENCH_KIND_NCCL && !p->ungrouped && ok)
        rep.nccl = r->gbps;
    else if (p->kind == BENCH_KIND_NAIVE && ok)
        rep.naive = r->gbps;
    else if (p->kind == BENCH_KIND_MPI && ok) {
        rep.ompi = r->gbps;
        rep.ompi_lat =
            r->latency_us > 0 && isfinite(r->latency_us) ? r->latency_us : 0;
    }
    double vn = vs_ref(r, rep.nccl), vv = vs_ref(r, rep.naive);
    double vo = vs_ref(r, rep.ompi), lo = lat_vs_ompi(r);
    if ((vn > 0 || vv > 0 || vo > 0 || lo > 0) && rep.nsum < SUMMARY_MAX) {
        bench_path_label(r, rep.sum[rep.nsum].name, sizeof(rep.sum[0].name));
        rep.sum[rep.nsum].vs_nccl = vn;
        rep.sum[rep.nsum].vs_naive = vv;
        rep.sum[rep.nsum].vs_ompi = vo;
        rep.sum[rep.nsum].lat_vs_ompi = lo;
        rep.nsum++;
    }
}

void bench_report_case(const bench_opts_t *o, const bench_ctx_t *ctx,
                       const bench_result_t *r)
{
    if (rep.progress)
        fprintf(stderr, "\r\033[K");
    if (r->outcome == BENCH_WAIVED)
        rep.waived++;
    else if (r->outcome == BENCH_ERROR || r->verified == 0)
        rep.failed++;
    else
        rep.measured++;
    /* Open MPI's rows leave barriers of their own (MPI_Barrier). */
    if (isfinite(r->skew_us) && r->c->path->kind != BENCH_KIND_MPI) {
        if (!rep.nskew++ || r->skew_us < rep.skew_lo)
            rep.skew_lo = r->skew_us;
        if (rep.nskew == 1 || r->skew_us > rep.skew_hi)
            rep.skew_hi = r->skew_us;
    }
    summary_note(o, r);
    if (o->json || o->csv) {
        fields_t fs;
        row_fields(ctx, r, &fs);
        if (o->json)
            json_obj(&fs);
        else
            csv_line(&fs);
    } else {
        bench_table_row(o, r);
    }
    fflush(stdout);
}

void bench_report_end(const bench_opts_t *o, int nfailed)
{
    if (rep.progress)
        fprintf(stderr, "\r\033[K");
    summary_flush(o);
    if (o->json) {
        printf("\n]}\n");
    } else if (!o->csv) {
        if (rep.nskew)
            printf("# rank 1 left the timed barriers %.1f to %.1f us after "
                   "rank 0 (medians of %d cases; not timed: no transfer can "
                   "start before both have left)\n",
                   rep.skew_lo, rep.skew_hi, rep.nskew);
        printf("# %d measured, %d waived, %d failed%s\n", rep.measured,
               rep.waived, rep.failed,
               nfailed < 0 ? " (stopped: the ranks lost step)" : "");
    }
    fflush(stdout);
}
