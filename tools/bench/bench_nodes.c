/* ipcpipe-bench-nodes: transfers between ranks on two nodes, ipcpipe
 * (ipcp_init_mpi: its remote path) beside plain MPI on the same buffers,
 * timed the same way, and device memory beside its ceilings.
 *
 *   mpirun -np 2 ipcpipe-bench-nodes [--mem host|cuda|both] [--sizes LIST]
 *                                    [--reps N] [--rounds N] [--ordered]
 *
 * Rank r counts as on node r (IPCPIPE_NODE, unless the caller set it), so
 * one machine stands for two.  Rank 1 sends, rank 0 receives and times:
 * each repetition starts at an MPI_Barrier and posts W sends and W
 * receives (W from the size: 64 up to 64 KiB, 16 up to 1 MiB, 4 up to 64
 * MiB, else 2), each into its own slot, and ends when rank 0's receives
 * are done; a repetition of MPI and one of ipcpipe take turns, so both
 * meet the same machine.  Medians of the repetitions with min-max.  The
 * last repetition's data is fresh and checked in every slot.  Latency:
 * each round trip of 8 bytes timed alone (blocking send and receive), the
 * median half of one.
 *
 * Device rows (cuMemAlloc buffers on each rank's first GPU): ipcpipe only
 * (this MPI may not take device memory), beside what bounds it: MPI on
 * host buffers of the same size, its repetitions in turn with ipcpipe's,
 * and the pinned device-to-host and host-to-device copies of one
 * process, W slots at a time, timed here.  --ordered adds a row of the
 * stream-ordered calls on the same device buffers (ipcp_isend_on_stream,
 * ipcp_irecv_on_stream on a stream of each rank's), timed the same way
 * to the end of the requests and the stream, in turns with the plain
 * calls. */
#include <mpi.h>

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ipcpipe_cuda.h"
#include "ipcpipe_diag.h"
#include "ipcpipe_mpi.h"
#include "pattern.h"
#include "sizes.h"
#include "slots.h"
#include "stat3.h"
#ifdef IPCP_HAVE_CUDA
#include "tool_cuda.h"
#endif

#define MAX_SIZES 32
#define MAX_REPS  200
enum { T_DATA = 1, T_LAT = 2 };

typedef struct nopts {
    int host, cuda;
    size_t sizes[MAX_SIZES];
    int nsizes, reps, rounds;
    int on_node; /* both ranks on one node: ipcp_init_mpi against ipcp_init */
    int ordered; /* device rows: the stream-ordered calls too */
} nopts_t;

static int me = -1;

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "ipcpipe-bench-nodes [rank %d]: ", me);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    MPI_Abort(MPI_COMM_WORLD, 2);
}

#define OK(call)                                                               \
    do {                                                                       \
        ipcp_status_t st_ = (call);                                            \
        if (st_ != IPCP_OK)                                                    \
            die("%s: %s (%s)", #call, ipcp_strerror(st_), ipcp_last_error());  \
    } while (0)

static int window_of(size_t n)
{
    return n <= (64 << 10) ? 64 : n <= (1 << 20) ? 16 : n <= (64 << 20) ? 4 : 2;
}

/* ---- Buffers --------------------------------------------------------- */

typedef struct nbuf {
    int dev;
    size_t size;
    int w;
    unsigned char *p[64];
} nbuf_t;

#ifdef IPCP_HAVE_CUDA
#define CU(call) TOOL_CU_OR(die, call)
#endif

static void nbuf_alloc(nbuf_t *b, int dev, size_t size, int w)
{
    b->dev = dev;
    b->size = size;
    b->w = w;
    for (int i = 0; i < w; i++) {
#ifdef IPCP_HAVE_CUDA
        if (dev) {
            CUdeviceptr d;
            CU(TOOL_CU(cuMemAlloc)(&d, size ? size : 1));
            b->p[i] = (unsigned char *)(uintptr_t)d;
            continue;
        }
#endif
        if (!(b->p[i] = malloc(size ? size : 1)))
            die("no memory for %d buffers of %zu bytes", w, size);
    }
}

static void nbuf_free(nbuf_t *b)
{
    for (int i = 0; i < b->w; i++) {
#ifdef IPCP_HAVE_CUDA
        if (b->dev) {
            TOOL_CU(cuMemFree)((CUdeviceptr)(uintptr_t)b->p[i]);
            continue;
        }
#endif
        free(b->p[i]);
    }
}

/* Slot i filled with the stream of seed at offset i * size (fresh), or
 * with a poison byte (seed 0). */
static void nbuf_fill(nbuf_t *b, uint64_t seed, unsigned char *tmp)
{
    char err[256];
    for (int i = 0; i < b->w; i++)
        if (tool_slot_fill(b->p[i], b->dev, b->size, seed,
                           (uint64_t)i * b->size, tmp, err, sizeof(err)))
            die("filling buffer %d of %zu bytes: %s", i, b->size, err);
}

/* 1 when every slot holds the stream of seed. */
static int nbuf_check(nbuf_t *b, uint64_t seed, unsigned char *tmp)
{
    char err[256];
    for (int i = 0; i < b->w; i++) {
        unsigned char *h =
            tool_slot_read(b->p[i], b->dev, b->size, tmp, err, sizeof(err));
        if (!h)
            die("reading buffer %d of %zu bytes: %s", i, b->size, err);
        if (ipcp_pattern_check(h, b->size, seed, (uint64_t)i * b->size) !=
            b->size)
            return 0;
    }
    return 1;
}

/* ---- One repetition -------------------------------------------------- */

/* W transfers from rank 1 to rank 0 from the barrier on; rank 0's time
 * (s), rank 1's 0. */
static double rep_mpi(nbuf_t *b, int w)
{
    MPI_Request r[64];
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < w; i++) {
        if (me == 0)
            MPI_Irecv(b->p[i], (int)b->size, MPI_BYTE, 1, T_DATA,
                      MPI_COMM_WORLD, &r[i]);
        else
            MPI_Isend(b->p[i], (int)b->size, MPI_BYTE, 0, T_DATA,
                      MPI_COMM_WORLD, &r[i]);
    }
    MPI_Waitall(w, r, MPI_STATUSES_IGNORE);
    return me == 0 ? MPI_Wtime() - t0 : 0;
}

/* *remote: cleared when a transfer took another path than remote. */
static double rep_ipcp(ipcp_comm_t *c, nbuf_t *b, int w, int *remote)
{
    ipcp_request_t *r[64];
    ipcp_xfer_info_t info;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < w; i++) {
        if (me == 0)
            OK(ipcp_irecv(c, b->p[i], b->size, 1, T_DATA, &r[i]));
        else
            OK(ipcp_isend(c, b->p[i], b->size, 0, T_DATA, &r[i]));
    }
    for (int i = 0; i < w; i++) {
        OK(ipcp_wait(r[i], &info));
        if (info.path != IPCP_PATH_REMOTE || info.nbytes != b->size)
            *remote = 0;
    }
    return me == 0 ? MPI_Wtime() - t0 : 0;
}

#ifdef IPCP_HAVE_CUDA
static CUstream ordered_stream; /* --ordered: the stream of this rank */

/* rep_ipcp with the stream-ordered calls: to the end of the requests
 * (which move transfers with other nodes on) and of the stream. */
static double rep_ordered(ipcp_comm_t *c, nbuf_t *b, int w, int *remote)
{
    ipcp_request_t *r[64];
    ipcp_xfer_info_t info;
    ipcp_stream_t s = (ipcp_stream_t)ordered_stream;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < w; i++) {
        if (me == 0)
            OK(ipcp_irecv_on_stream(c, b->p[i], b->size, 1, T_DATA, s, &r[i]));
        else
            OK(ipcp_isend_on_stream(c, b->p[i], b->size, 0, T_DATA, s, &r[i]));
    }
    for (int i = 0; i < w; i++) {
        OK(ipcp_wait(r[i], &info));
        if (info.path != IPCP_PATH_REMOTE || info.nbytes != b->size)
            *remote = 0;
    }
    CU(TOOL_CU(cuStreamSynchronize)(ordered_stream));
    return me == 0 ? MPI_Wtime() - t0 : 0;
}
#endif

/* The repetition of ipcpipe's calls: plain, or stream-ordered. */
static double rep_lib(ipcp_comm_t *c, nbuf_t *b, int w, int *remote,
                      int ordered)
{
#ifdef IPCP_HAVE_CUDA
    if (ordered)
        return rep_ordered(c, b, w, remote);
#endif
    (void)ordered;
    return rep_ipcp(c, b, w, remote);
}

/* ---- Rows ------------------------------------------------------------ */

static double gbs(size_t size, int w, double s)
{
    return s > 0 ? (double)size * w / s / 1e9 : 0;
}

static void row(const char *what, size_t size, int w, stat3_t s,
                const char *beside)
{
    if (me != 0)
        return;
    printf("%-20s %11zu  x%-3d %9.2f GB/s  [%.2f-%.2f]  %s\n", what, size, w,
           s.med, s.min, s.max, beside);
    fflush(stdout);
}

/* MPI on host buffers and ipcpipe on host (dev 0) or device buffers in
 * turns (ordered: its stream-ordered calls); *mpi: MPI's figures. */
static stat3_t run_size(ipcp_comm_t *c, const nopts_t *o, size_t size, int dev,
                        int ordered, stat3_t *mpi, uint64_t seed)
{
    int w = window_of(size), remote = 1;
    nbuf_t b, hb;
    double tm[MAX_REPS], ti[MAX_REPS];
    unsigned char *tmp = malloc(size ? size : 1);
    if (!tmp)
        die("no memory for %zu bytes", size);
    nbuf_alloc(&b, dev, size, w);
    nbuf_fill(&b, me == 1 ? seed : 0, tmp);
    hb = b;
    if (dev) {
        nbuf_alloc(&hb, 0, size, w);
        nbuf_fill(&hb, me == 1 ? seed : 0, tmp);
    }
    rep_lib(c, &b, w, &remote, ordered); /* warm-up: slots, pages */
    rep_mpi(&hb, w);
    for (int k = 0; k < o->reps; k++) {
        if (k == o->reps - 1 && me == 0)
            nbuf_fill(&hb, 0, tmp); /* the last one is checked */
        tm[k] = gbs(size, w, rep_mpi(&hb, w));
        if (k == o->reps - 1 && me == 0) {
            if (!nbuf_check(&hb, seed, tmp))
                die("MPI: %zu bytes x%d: data differs", size, w);
            nbuf_fill(&b, 0, tmp);
        }
        ti[k] = gbs(size, w, rep_lib(c, &b, w, &remote, ordered));
    }
    int ok = me == 0 ? nbuf_check(&b, seed, tmp) : 1;
    MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (!ok)
        die("ipcpipe: %zu bytes x%d (%s memory): data differs", size, w,
            dev ? "device" : "host");
    if (!remote)
        die("ipcpipe: %zu bytes did not take the remote path", size);
    nbuf_free(&b);
    if (dev)
        nbuf_free(&hb);
    free(tmp);
    stat3_t si = ipcp_tool_stats(ti, o->reps),
            sm = ipcp_tool_stats(tm, o->reps);
    char beside[128];
    *mpi = sm;
    row("MPI host", size, w, sm, dev ? "(beside the device row)" : "");
    if (!dev) {
        snprintf(beside, sizeof(beside), "%.2fx MPI  verified",
                 si.med / sm.med);
        row("ipcpipe host", size, w, si, beside);
    }
    return si;
}

/* The half round trip of 8 bytes, each round trip timed alone. */
static void latency(ipcp_comm_t *c, const nopts_t *o)
{
    unsigned char b[8] = {0};
    double vm[4096], vi[4096];
    int n = o->rounds < 4096 ? o->rounds : 4096;
    for (int k = -10; k < n; k++) {
        for (int which = 0; which < 2; which++) {
            double t0 = MPI_Wtime();
            if (me == 0 && which) {
                OK(ipcp_send(c, b, 8, 1, T_LAT));
                OK(ipcp_recv(c, b, 8, 1, T_LAT, NULL));
            } else if (me == 0) {
                MPI_Send(b, 8, MPI_BYTE, 1, T_LAT, MPI_COMM_WORLD);
                MPI_Recv(b, 8, MPI_BYTE, 1, T_LAT, MPI_COMM_WORLD,
                         MPI_STATUS_IGNORE);
            } else if (which) {
                OK(ipcp_recv(c, b, 8, 0, T_LAT, NULL));
                OK(ipcp_send(c, b, 8, 0, T_LAT));
            } else {
                MPI_Recv(b, 8, MPI_BYTE, 0, T_LAT, MPI_COMM_WORLD,
                         MPI_STATUS_IGNORE);
                MPI_Send(b, 8, MPI_BYTE, 0, T_LAT, MPI_COMM_WORLD);
            }
            double us = (MPI_Wtime() - t0) * 1e6 / 2;
            if (k >= 0)
                (which ? vi : vm)[k] = us;
        }
    }
    stat3_t sm = ipcp_tool_stats(vm, n), si = ipcp_tool_stats(vi, n);
    if (me == 0) {
        printf("%-20s %11d  %-4s %9.2f us    [%.2f-%.2f]  half round trip\n",
               "MPI latency", 8, "", sm.med, sm.min, sm.max);
        printf("%-20s %11d  %-4s %9.2f us    [%.2f-%.2f]  %+.2f us vs MPI\n",
               "ipcpipe latency", 8, "", si.med, si.min, si.max,
               si.med - sm.med);
    }
}

/* --on-node: both ranks on one node, ipcpipe from ipcp_init_mpi and from
 * ipcp_init (a job of its own) in turns on the same buffers: what
 * starting from MPI costs the paths of one node. */
static void run_ab(ipcp_comm_t *cm, ipcp_comm_t *cp, const nopts_t *o,
                   size_t size, int dev, uint64_t seed)
{
    int w = window_of(size), any = 1;
    nbuf_t b;
    double ta[MAX_REPS], tb[MAX_REPS];
    unsigned char *tmp = malloc(size ? size : 1);
    if (!tmp)
        die("no memory for %zu bytes", size);
    nbuf_alloc(&b, dev, size, w);
    nbuf_fill(&b, me == 1 ? seed : 0, tmp);
    rep_ipcp(cm, &b, w, &any);
    rep_ipcp(cp, &b, w, &any);
    for (int k = 0; k < o->reps; k++) {
        ta[k] = gbs(size, w, rep_ipcp(cm, &b, w, &any));
        if (k == o->reps - 1 && me == 0) {
            if (!nbuf_check(&b, seed, tmp))
                die("ipcp_init_mpi: %zu bytes x%d: data differs", size, w);
            nbuf_fill(&b, 0, tmp);
        }
        tb[k] = gbs(size, w, rep_ipcp(cp, &b, w, &any));
    }
    int ok = me == 0 ? nbuf_check(&b, seed, tmp) : 1;
    MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (!ok)
        die("ipcp_init: %zu bytes x%d: data differs", size, w);
    nbuf_free(&b);
    free(tmp);
    stat3_t sa = ipcp_tool_stats(ta, o->reps),
            sb = ipcp_tool_stats(tb, o->reps);
    char beside[96];
    row(dev ? "ipcp_init dev" : "ipcp_init host", size, w, sb, "");
    snprintf(beside, sizeof(beside), "%.3fx ipcp_init  verified",
             sa.med / sb.med);
    row(dev ? "ipcp_init_mpi dev" : "ipcp_init_mpi host", size, w, sa, beside);
}

#ifdef IPCP_HAVE_CUDA
/* Pinned copies of one process: W slots of size, device to host (d2h 1)
 * or host to device, median GB/s of reps. */
static stat3_t copy_ceiling(size_t size, int w, int d2h, int reps)
{
    CUdeviceptr d;
    void *h;
    CUstream s;
    CUevent e0, e1;
    double v[MAX_REPS];
    CU(TOOL_CU(cuMemAlloc)(&d, size));
    CU(TOOL_CU(cuMemHostAlloc)(&h, size, 0));
    CU(TOOL_CU(cuStreamCreate)(&s, CU_STREAM_NON_BLOCKING));
    CU(TOOL_CU(cuEventCreate)(&e0, 0));
    CU(TOOL_CU(cuEventCreate)(&e1, 0));
    for (int k = -1; k < reps; k++) {
        CU(TOOL_CU(cuEventRecord)(e0, s));
        for (int i = 0; i < w; i++)
            CU(d2h ? TOOL_CU(cuMemcpyDtoHAsync)(h, d, size, s)
                   : TOOL_CU(cuMemcpyHtoDAsync)(d, h, size, s));
        CU(TOOL_CU(cuEventRecord)(e1, s));
        CU(TOOL_CU(cuStreamSynchronize)(s));
        float ms = 0;
        CU(TOOL_CU(cuEventElapsedTime)(&ms, e0, e1));
        if (k >= 0)
            v[k] = gbs(size, w, ms / 1e3);
    }
    TOOL_CU(cuEventDestroy)(e0);
    TOOL_CU(cuEventDestroy)(e1);
    TOOL_CU(cuStreamDestroy)(s);
    TOOL_CU(cuMemFreeHost)(h);
    TOOL_CU(cuMemFree)(d);
    return ipcp_tool_stats(v, reps);
}

static int cuda_open(void)
{
    char err[256];
    static ipcp_diag_gpus_t g; /* the driver initialised, the GPUs seen */
    CUdevice dev;
    CUcontext ctx;
    if (ipcp_diag_gpus(&g) != IPCP_OK || g.ndev < 1 ||
        tool_cu_load(err, sizeof(err)) != 0) {
        if (me == 0)
            printf("device rows: %s\n", g.ndev < 1 ? ipcp_last_error() : err);
        return 0;
    }
    if (TOOL_CU(cuDeviceGet)(&dev, 0) != CUDA_SUCCESS ||
        TOOL_CU(cuDevicePrimaryCtxRetain)(&ctx, dev) != CUDA_SUCCESS)
        return 0;
    CU(TOOL_CU(cuCtxSetCurrent)(ctx));
    return 1;
}
#endif

#ifdef IPCP_HAVE_CUDA
/* Device rows: ipcpipe on device buffers beside MPI on host ones and the
 * pinned copies of one process, and with --ordered the stream-ordered
 * calls beside them. */
static void device_rows(ipcp_comm_t *c, const nopts_t *o, uint64_t seed)
{
    stat3_t mh;
    for (int i = 0; i < o->nsizes; i++) {
        size_t n = o->sizes[i];
        int w = window_of(n);
        stat3_t d2h = copy_ceiling(n, w, 1, o->reps),
                h2d = copy_ceiling(n, w, 0, o->reps);
        stat3_t sd = run_size(c, o, n, 1, 0, &mh, seed + 200 + (uint64_t)i);
        double dev = sd.med, ceil = mh.med;
        const char *by = "MPI host";
        if (d2h.med < ceil)
            ceil = d2h.med, by = "pinned D2H";
        if (h2d.med < ceil)
            ceil = h2d.med, by = "pinned H2D";
        if (me == 0) {
            char beside[160];
            row("pinned D2H (1 proc)", n, w, d2h, "");
            row("pinned H2D (1 proc)", n, w, h2d, "");
            snprintf(beside, sizeof(beside),
                     "%.0f%% of min(MPI host, D2H, H2D) = %.2f (%s)  verified",
                     100 * dev / ceil, ceil, by);
            row("ipcpipe device", n, w, sd, beside);
        }
        if (!o->ordered)
            continue;
        stat3_t mo, so = run_size(c, o, n, 1, 1, &mo, seed + 400 + (uint64_t)i);
        if (me == 0) {
            char beside[160];
            snprintf(beside, sizeof(beside),
                     "%.0f%% of the same ceiling, %.2fx the plain calls  "
                     "verified",
                     100 * so.med / ceil, so.med / sd.med);
            row("ipcpipe dev ordered", n, w, so, beside);
        }
    }
}
#endif

/* --on-node: ipcp_init_mpi's job (c) beside one of ipcp_init, in turns
 * on the same buffers. */
static void on_node_ab(ipcp_comm_t *c, const nopts_t *o, int all, uint64_t seed)
{
    ipcp_comm_t *cp = NULL;
    ipcp_comm_params_t p;
    char job[64];
    unsigned long id = (unsigned long)seed;
    snprintf(job, sizeof(job), "benchnodes-%lx", id);
    ipcp_comm_params_init(&p);
    p.rank = me;
    p.size = 2;
    p.job_id = job;
    OK(ipcp_init(&p, &cp));
    if (me == 0)
        printf("both ranks on one node: ipcp_init_mpi's job beside one of "
               "ipcp_init, in turns on the same buffers\n");
    for (int i = 0; o->host && i < o->nsizes; i++)
        run_ab(c, cp, o, o->sizes[i], 0, seed + (uint64_t)i);
    for (int i = 0; all && i < o->nsizes; i++)
        run_ab(c, cp, o, o->sizes[i], 1, seed + 300 + (uint64_t)i);
    OK(ipcp_finalize(cp));
}

static void usage(void)
{
    if (me == 0)
        fprintf(stderr,
                "usage: mpirun -np 2 ipcpipe-bench-nodes [--mem "
                "host|cuda|both] [--sizes LIST] [--reps N] [--rounds N] "
                "[--on-node] [--ordered]\n");
}

static void parse(int argc, char **argv, nopts_t *o)
{
    const char *sizes = "64K,1M,16M,256M", *mem = "both";
    o->reps = 10;
    o->rounds = 1000;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "--help")) {
            usage();
            MPI_Finalize();
            exit(0);
        } else if (!strcmp(argv[i], "--mem") && v) {
            mem = v;
        } else if (!strcmp(argv[i], "--sizes") && v) {
            sizes = v;
        } else if (!strcmp(argv[i], "--reps") && v) {
            o->reps = atoi(v);
        } else if (!strcmp(argv[i], "--rounds") && v) {
            o->rounds = atoi(v);
        } else if (!strcmp(argv[i], "--on-node")) {
            o->on_node = 1;
            continue;
        } else if (!strcmp(argv[i], "--ordered")) {
            o->ordered = 1;
            continue;
        } else {
            usage();
            die("unknown option or missing value: %s", argv[i]);
        }
        i++;
    }
    if (o->reps < 1 || o->reps > MAX_REPS || o->rounds < 0)
        die("--reps takes 1-%d, --rounds 0 or more", MAX_REPS);
    o->host = !strcmp(mem, "host") || !strcmp(mem, "both");
    o->cuda = !strcmp(mem, "cuda") || !strcmp(mem, "both");
    if (!o->host && !o->cuda)
        die("--mem takes host, cuda or both, not '%s'", mem);
    for (const char *s = sizes; *s;) {
        const char *end = s;
        if (o->nsizes == MAX_SIZES ||
            ipcp_tool_parse_size(s, ",", &o->sizes[o->nsizes], &end) != 0 ||
            o->sizes[o->nsizes] > INT32_MAX)
            die("--sizes: bad list '%s' (at most %d sizes, each below 2 GiB)",
                sizes, MAX_SIZES);
        o->nsizes++;
        s = *end == ',' ? end + 1 : end;
    }
}

int main(int argc, char **argv)
{
    nopts_t o;
    int size;
    char node[16];
    ipcp_comm_t *c = NULL;
    memset(&o, 0, sizeof(o));
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    parse(argc, argv, &o);
    if (size != 2)
        die("runs with 2 ranks (mpirun -np 2), not %d", size);
    snprintf(node, sizeof(node), "n%d", me);
    if (!o.on_node)
        setenv("IPCPIPE_NODE", node, 0);
    int cuda = 0;
#ifdef IPCP_HAVE_CUDA
    if (o.cuda)
        cuda = cuda_open();
#endif
    int all = 0;
    MPI_Allreduce(&cuda, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (o.cuda && !all && me == 0)
        printf("device rows: waived (no GPU on every rank)\n");
#ifdef IPCP_HAVE_CUDA
    if (all && o.ordered)
        CU(TOOL_CU(cuStreamCreate)(&ordered_stream, CU_STREAM_NON_BLOCKING));
#endif
    OK(ipcp_init_mpi(MPI_COMM_WORLD, NULL, &c));
    uint64_t seed = 0;
    if (me == 0)
        seed = (uint64_t)(MPI_Wtime() * 1e9) | 1;
    MPI_Bcast(&seed, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    if (me == 0)
        printf("ipcpipe %s, two ranks on two nodes (IPCPIPE_NODE), rank 1 "
               "sends, rank 0 receives; medians of %d repetitions "
               "[min-max]\n",
               ipcp_version_string(), o.reps);
    if (o.on_node) {
        on_node_ab(c, &o, all, seed);
        OK(ipcp_finalize(c));
        MPI_Finalize();
        return 0;
    }
    stat3_t mh;
    for (int i = 0; o.host && i < o.nsizes; i++)
        run_size(c, &o, o.sizes[i], 0, 0, &mh, seed + (uint64_t)i);
    if (o.rounds)
        latency(c, &o);
#ifdef IPCP_HAVE_CUDA
    if (all)
        device_rows(c, &o, seed);
#endif
    OK(ipcp_finalize(c));
    MPI_Finalize();
    return 0;
}
