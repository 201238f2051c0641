/* ipcpipe-bench: the GPU ceilings, copies in the receiving process alone
 * with the same window as the row beside them: the copy engine between
 * the two devices, pinned D2H and H2D, both directions at once, and both
 * paths at once (striped).  Through the tools' table of driver entry
 * points, as bench_cuda.c. */
#include "bench.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef IPCP_HAVE_CUDA

#include "tool_cuda.h"
#include "bench_cuda_int.h"

/* Side 0 is the sender's device (a), side 1 the receiver's (b); a == b
 * when both ranks share a device or the sender's is not visible here.
 * Each side's buffer holds the window's slots in [0, half) and the source
 * of the copies that leave it at [half, half + size).  A stream is a
 * lane: lane s is side s's, and lane 2 a second one of the sender's
 * device (the staged part of the striped ceiling beside the direct). */
enum { LANES = 3 };
static const int lane_side[LANES] = {0, 1, 0};

struct bench_cuda_ceil {
    int dev[2];
    int plain;
    int gated; /* streams start together on a flag (64-bit memops) */
    CUcontext ctx[2];
    int retained[2];
    CUstream st[LANES];
    CUevent ev[LANES][2]; /* [lane][start, stop] */
    bench_buf_t buf[2];
    size_t half;
    void *pinned;
    size_t pinned_len;
    volatile uint64_t *gate;
    CUdeviceptr gate_dev[2];
    uint64_t gate_val;
};

/* One stream's share of a measurement: window copies of len bytes (0:
 * the measurement's size), the k-th from src + (k % slots) * src_step to
 * dst + (k % slots) * dst_step. */
typedef struct cjob {
    int lane;
    CUdeviceptr dst, src;
    size_t dst_step, src_step;
    size_t len;
} cjob_t;

static int side_enqueue(bench_cuda_ceil_t *cc, const cjob_t *j, size_t size,
                        int window, int slots, int gated, char *err,
                        size_t elen)
{
    int side = lane_side[j->lane];
    CUstream s = cc->st[j->lane];
    char what[128];
    if (j->len)
        size = j->len;
    if (bench_cu_ok(TOOL_CU(cuCtxSetCurrent)(cc->ctx[side]), err, elen,
                    "cuCtxSetCurrent") < 0)
        return -1;
    if (gated && bench_cu_ok(TOOL_CU(cuStreamWaitValue64)(
                                 s, cc->gate_dev[side], cc->gate_val,
                                 CU_STREAM_WAIT_VALUE_GEQ),
                             err, elen, "cuStreamWaitValue64(gate)") < 0)
        return -1;
    if (bench_cu_ok(TOOL_CU(cuEventRecord)(cc->ev[j->lane][0], s), err, elen,
                    "cuEventRecord(start)") < 0)
        return -1;
    for (int k = 0; k < window; k++) {
        size_t slot = (size_t)(k % slots);
        CUresult r = TOOL_CU(cuMemcpyAsync)(
            j->dst + slot * j->dst_step, j->src + slot * j->src_step, size, s);
        if (r != CUDA_SUCCESS) {
            bench_fmt(what, sizeof(what),
                      "cuMemcpyAsync(%zu bytes, device %d stream)", size,
                      cc->dev[side]);
            return bench_cu_ok(r, err, elen, what);
        }
    }
    return bench_cu_ok(TOOL_CU(cuEventRecord)(cc->ev[j->lane][1], s), err, elen,
                       "cuEventRecord(stop)");
}

/* Runs the jobs (at most one per lane) at once; ms[j] is each one's time
 * from its stream's start to its last copy.  The streams wait for a flag
 * the host writes once everything is enqueued, so that both start together
 * and none drains while the host is still enqueuing; not for windows longer
 * than the default's, where enqueuing behind a waiting stream might fill
 * its queue and block. */
static int run_jobs(bench_cuda_ceil_t *cc, const cjob_t *jobs, int njobs,
                    size_t size, int window, int slots, float *ms, char *err,
                    size_t elen)
{
    int rc = 0, gated = cc->gated && window <= BENCH_WINDOW_MAX;
    cc->gate_val++;
    for (int j = 0; j < njobs && rc == 0; j++)
        rc = side_enqueue(cc, &jobs[j], size, window, slots, gated, err, elen);
    /* Released whatever happened: a stream left waiting would hang. */
    if (gated)
        __atomic_store_n(cc->gate, cc->gate_val, __ATOMIC_SEQ_CST);
    for (int j = 0; j < njobs; j++) {
        int s = jobs[j].lane;
        char e2[256];
        CUresult r = TOOL_CU(cuStreamSynchronize)(cc->st[s]);
        if (bench_cu_ok(r, e2, sizeof(e2), "cuStreamSynchronize") < 0 &&
            rc == 0) {
            bench_fmt(err, elen, "%s", e2);
            rc = -1;
        }
        if (rc == 0)
            rc = bench_cu_ok(
                TOOL_CU(cuEventElapsedTime)(&ms[j], cc->ev[s][0], cc->ev[s][1]),
                err, elen, "cuEventElapsedTime");
    }
    return rc;
}

static void ceil_free_side(ipcp_comm_t *comm, bench_cuda_ceil_t *cc, int s)
{
    if (cc->ctx[s])
        TOOL_CU(cuCtxSetCurrent)(cc->ctx[s]);
    for (int l = 0; l < LANES; l++) {
        if (lane_side[l] != s)
            continue;
        for (int e = 0; e < 2; e++)
            if (cc->ev[l][e])
                TOOL_CU(cuEventDestroy)(cc->ev[l][e]);
        if (cc->st[l])
            TOOL_CU(cuStreamDestroy)(cc->st[l]);
    }
    if (cc->buf[s].ptr)
        bench_cuda_buf_free(comm, &cc->buf[s]);
    if (cc->retained[s])
        bench_cu_release_ctx(cc->dev[s]);
}

void bench_cuda_ceil_destroy(ipcp_comm_t *comm, bench_cuda_ceil_t *cc)
{
    if (!cc)
        return;
    for (int s = 0; s < 2; s++)
        ceil_free_side(comm, cc, s);
    if (cc->pinned)
        TOOL_CU(cuMemFreeHost)(cc->pinned);
    if (cc->gate)
        TOOL_CU(cuMemFreeHost)((void *)cc->gate);
    if (bench_cu_bound_ctx)
        TOOL_CU(cuCtxSetCurrent)(bench_cu_bound_ctx);
    free(cc);
}

/* Lane l's stream and events, in its side's context (current). */
static int ceil_open_lane(bench_cuda_ceil_t *cc, int l, char *err, size_t elen)
{
    if (bench_cu_ok(TOOL_CU(cuStreamCreate)(&cc->st[l], CU_STREAM_NON_BLOCKING),
                    err, elen, "cuStreamCreate") < 0)
        return -1;
    for (int e = 0; e < 2; e++)
        if (bench_cu_ok(TOOL_CU(cuEventCreate)(&cc->ev[l][e], CU_EVENT_DEFAULT),
                        err, elen, "cuEventCreate") < 0)
            return -1;
    return 0;
}

static int ceil_open_side(ipcp_comm_t *comm, bench_cuda_ceil_t *cc, int s,
                          size_t len, int *nomem, char *err, size_t elen)
{
    if (bench_cu_retain_ctx(cc->dev[s], &cc->ctx[s], err, elen) < 0)
        return -1;
    cc->retained[s] = 1;
    if (bench_cu_ok(TOOL_CU(cuCtxSetCurrent)(cc->ctx[s]), err, elen,
                    "cuCtxSetCurrent") < 0)
        return -1;
    for (int l = 0; l < LANES; l++)
        if (lane_side[l] == s && ceil_open_lane(cc, l, err, elen) < 0)
            return -1;
    if (bench_cuda_buf_alloc(comm, len, cc->dev[s],
                             cc->plain ? BENCH_ALLOC_PLAIN : BENCH_ALLOC_IPCP,
                             &cc->buf[s], nomem, err, elen) < 0)
        return -1;
    if (cc->gated &&
        bench_cu_ok(TOOL_CU(cuMemHostGetDevicePointer)(&cc->gate_dev[s],
                                                       (void *)cc->gate, 0),
                    err, elen, "cuMemHostGetDevicePointer(gate)") < 0)
        return -1;
    return 0;
}

/* Plain allocations need peer access enabled in each context for the
 * copy engine to move data between the devices directly (VMM allocations
 * from ipcp_mem_alloc are already mapped for every peer device). */
static int ceil_enable_peers(bench_cuda_ceil_t *cc, char *err, size_t elen)
{
    if (!cc->plain || cc->dev[0] == cc->dev[1])
        return 0;
    for (int s = 0; s < 2; s++) {
        if (!bench_cuda_peer(cc->dev[s], cc->dev[1 - s]))
            continue;
        if (bench_cu_ok(TOOL_CU(cuCtxSetCurrent)(cc->ctx[s]), err, elen,
                        "cuCtxSetCurrent") < 0)
            return -1;
        CUresult r = TOOL_CU(cuCtxEnablePeerAccess)(cc->ctx[1 - s], 0);
        if (r != CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED &&
            bench_cu_ok(r, err, elen, "cuCtxEnablePeerAccess") < 0)
            return -1;
    }
    return 0;
}

bench_cuda_ceil_t *bench_cuda_ceil_create(ipcp_comm_t *comm, int a, int b,
                                          int plain, size_t len,
                                          size_t pinned_len, int *nomem,
                                          char *err, size_t elen)
{
    *nomem = 0;
    if (tool_cu_load(err, elen) < 0)
        return NULL;
    bench_cuda_ceil_t *cc = calloc(1, sizeof(*cc));
    if (!cc) {
        *nomem = 1;
        bench_fmt(err, elen, "out of memory");
        return NULL;
    }
    cc->dev[0] = a;
    cc->dev[1] = b;
    cc->plain = plain;
    cc->half = len;
    cc->pinned_len = pinned_len ? pinned_len : 1;
    cc->gated = bench_cuda_memops64(a) && bench_cuda_memops64(b);
    CUresult r = TOOL_CU(cuMemHostAlloc)(&cc->pinned, cc->pinned_len,
                                         CU_MEMHOSTALLOC_PORTABLE);
    if (r != CUDA_SUCCESS) {
        cc->pinned = NULL;
        *nomem = r == CUDA_ERROR_OUT_OF_MEMORY;
        bench_cu_ok(r, err, elen, "cuMemHostAlloc(pinned staging)");
        goto fail;
    }
    memset(cc->pinned, 0, cc->pinned_len);
    if (cc->gated) {
        void *g = NULL;
        r = TOOL_CU(cuMemHostAlloc)(
            &g, 64, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP);
        if (bench_cu_ok(r, err, elen, "cuMemHostAlloc(gate)") < 0)
            goto fail;
        cc->gate = g;
        *cc->gate = 0;
    }
    for (int s = 0; s < 2; s++)
        if (ceil_open_side(comm, cc, s, 2 * len, nomem, err, elen) < 0)
            goto fail;
    if (ceil_enable_peers(cc, err, elen) < 0)
        goto fail;
    if (bench_cu_bound_ctx)
        TOOL_CU(cuCtxSetCurrent)(bench_cu_bound_ctx);
    return cc;
fail:
    bench_cuda_ceil_destroy(comm, cc);
    return NULL;
}

static CUdeviceptr dptr(const bench_buf_t *b, size_t off)
{
    return (CUdeviceptr)(uintptr_t)b->ptr + off;
}

/* The jobs of one kind; returns how many (0: unknown kind). */
static int ceil_jobs(bench_cuda_ceil_t *cc, bench_ceil_kind_t kind, int dir,
                     size_t size, cjob_t *j)
{
    CUdeviceptr host = (CUdeviceptr)(uintptr_t)cc->pinned;
    const bench_buf_t *a = &cc->buf[0], *b = &cc->buf[1];
    size_t h = cc->half;
    switch (kind) {
    case BENCH_CEIL_D2D:
        /* Pushed by the sender's device, as the direct path does. */
        j[0] = (cjob_t){0, dptr(b, 0), dptr(a, h), size, 0, 0};
        return 1;
    case BENCH_CEIL_D2D_BIDIR:
        j[0] = (cjob_t){0, dptr(b, 0), dptr(a, h), size, 0, 0};
        j[1] = (cjob_t){1, dptr(a, 0), dptr(b, h), size, 0, 0};
        return 2;
    case BENCH_CEIL_STAGED:
    case BENCH_CEIL_D2H:
    case BENCH_CEIL_H2D:
        if (kind == BENCH_CEIL_D2H || (kind == BENCH_CEIL_STAGED && dir == 0))
            /* D2H on the sender's device */
            j[0] = (cjob_t){0, host, dptr(a, h), 0, 0, 0};
        else /* H2D on the receiver's device */
            j[0] = (cjob_t){1, dptr(b, 0), host, size, 0, 0};
        return 1;
    default:
        return 0;
    }
}

/* The striped ceiling: the window copied over both paths at once in this
 * process, a share of each copy's bytes through pinned host memory (D2H on
 * a second stream of the sender's device beside its direct copy, H2D on
 * the receiver's) and the rest by the copy engine.  The two staged copies
 * run at the same time, not one after the other as a pipeline must, so no
 * transfer that splits its bytes between the paths beats it.  The best of
 * a few shares (the library's calibration finds 4-15%); t has room for
 * reps times. */
static const double stripe_shares[] = {0.04, 0.06, 0.08, 0.10, 0.12, 0.15};

static double striped_share(bench_cuda_ceil_t *cc, double share, size_t size,
                            int window, int slots, int reps, double *t,
                            char *err, size_t elen)
{
    const bench_buf_t *a = &cc->buf[0], *b = &cc->buf[1];
    CUdeviceptr host = (CUdeviceptr)(uintptr_t)cc->pinned;
    size_t staged = (size_t)(share * (double)size) & ~(size_t)4095;
    size_t direct = size - staged;
    if (!staged || staged >= size)
        return 0;
    cjob_t j[3] = {
        {0, dptr(b, 0), dptr(a, cc->half), size, 0, direct},
        {2, host, dptr(a, cc->half + direct), 0, 0, staged},
        {1, dptr(b, direct), host, size, 0, staged},
    };
    float ms[3] = {0, 0, 0};
    int n = 0, rc = run_jobs(cc, j, 3, size, window, slots, ms, err, elen);
    for (int r = 0; r < reps && rc == 0; r++) {
        rc = run_jobs(cc, j, 3, size, window, slots, ms, err, elen);
        float m = ms[0] > ms[1] ? ms[0] : ms[1];
        m = ms[2] > m ? ms[2] : m;
        if (rc == 0 && m > 0)
            t[n++] = (double)m * 1e-3;
    }
    double med = rc == 0 ? bench_median(t, n) : 0;
    return med > 0 ? (double)window * (double)size / med / 1e9 : (rc ? -1 : 0);
}

static double striped_measure(bench_cuda_ceil_t *cc, size_t size, int window,
                              int slots, int reps, double *t, char *err,
                              size_t elen)
{
    double best = 0;
    /* One device (two processes sharing it): the direct part is a copy
     * within it, the staged part leaves and re-enters it (--compare's
     * striped row). */
    if (cc->dev[0] != cc->dev[1] && !bench_cuda_peer(cc->dev[0], cc->dev[1])) {
        bench_fmt(err, elen,
                  "striping needs a direct path between devices %d and %d",
                  cc->dev[0], cc->dev[1]);
        return 0;
    }
    for (size_t i = 0; i < sizeof(stripe_shares) / sizeof(stripe_shares[0]);
         i++) {
        double g = striped_share(cc, stripe_shares[i], size, window, slots,
                                 reps, t, err, elen);
        if (g < 0)
            return 0;
        best = g > best ? g : best;
    }
    if (best <= 0)
        bench_fmt(err, elen, "no share of %zu bytes measured a time", size);
    return best;
}

double bench_cuda_ceil_measure(bench_cuda_ceil_t *cc, bench_ceil_kind_t kind,
                               size_t size, int window, int slots, int reps,
                               char *err, size_t elen)
{
    if (!cc) {
        bench_fmt(err, elen, "no CUDA ceiling state");
        return 0;
    }
    if ((size_t)slots * size > cc->half || size > cc->pinned_len) {
        bench_fmt(err, elen, "ceiling buffers too small for %zu x %zu bytes",
                  (size_t)slots, size);
        return 0;
    }
    int ndir = kind == BENCH_CEIL_STAGED ? 2 : 1;
    double best = 0, *t = calloc((size_t)reps, sizeof(*t));
    if (!t) {
        bench_fmt(err, elen, "out of memory");
        return 0;
    }
    if (kind == BENCH_CEIL_STRIPED) {
        best = striped_measure(cc, size, window, slots, reps, t, err, elen);
        ndir = 0;
    }
    for (int dir = 0; dir < ndir; dir++) {
        cjob_t jobs[2];
        float ms[2] = {0, 0};
        int nj = ceil_jobs(cc, kind, dir, size, jobs), n = 0;
        if (nj == 0) {
            bench_fmt(err, elen, "no CUDA ceiling of kind %d", (int)kind);
            best = 0;
            break;
        }
        /* One untimed round: first-use costs (peer mappings, TLBs). */
        int rc = run_jobs(cc, jobs, nj, size, window, slots, ms, err, elen);
        for (int r = 0; r < reps && rc == 0; r++) {
            rc = run_jobs(cc, jobs, nj, size, window, slots, ms, err, elen);
            float m = nj == 2 && ms[1] > ms[0] ? ms[1] : ms[0];
            if (rc == 0 && m > 0)
                t[n++] = (double)m * 1e-3;
        }
        double med = rc == 0 ? bench_median(t, n) : 0;
        double bytes = (double)window * (double)size * nj;
        double gbps = med > 0 ? bytes / med / 1e9 : 0;
        if (gbps <= 0) {
            if (rc == 0)
                bench_fmt(err, elen, "CUDA events measured no time");
            best = 0;
            break;
        }
        best = dir == 0 || gbps < best ? gbps : best; /* staged: the min */
    }
    free(t);
    if (bench_cu_bound_ctx)
        TOOL_CU(cuCtxSetCurrent)(bench_cu_bound_ctx);
    return best;
}

#else /* !IPCP_HAVE_CUDA */

static const char no_cuda[] =
    "this ipcpipe-bench was built without CUDA (IPCPIPE_HAVE_CUDA off)";

bench_cuda_ceil_t *bench_cuda_ceil_create(ipcp_comm_t *comm, int a, int b,
                                          int plain, size_t len,
                                          size_t pinned_len, int *nomem,
                                          char *err, size_t elen)
{
    *nomem = 0;
    bench_fmt(err, elen, "%s", no_cuda);
    return NULL;
}

void bench_cuda_ceil_destroy(ipcp_comm_t *comm, bench_cuda_ceil_t *cc)
{
}

double bench_cuda_ceil_measure(bench_cuda_ceil_t *cc, bench_ceil_kind_t kind,
                               size_t size, int window, int slots, int reps,
                               char *err, size_t elen)
{
    bench_fmt(err, elen, "%s", no_cuda);
    return 0;
}

#endif
