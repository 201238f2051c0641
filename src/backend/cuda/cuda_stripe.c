/* Striping calibration (backend stripe_calibrate): in one process, a copy
 * from device src to device dst over the direct link alone, then split
 * between that link and a pipelined copy through pinned host memory at
 * several staged shares.  The staged part moves as the engine will move
 * it, in chunks cut by ipcp__stripe_unit.  IPCP_STRIPE_RING: through a ring
 * of 16 MiB slots, D2H on src and H2D on dst ordered by stream memory
 * operations on flags in host memory, as two processes hand chunks over
 * (a first version ordered them with events and predicted gains that ring
 * did not reach: each flag hand-over costs microseconds that events do
 * not).  IPCP_STRIPE_DRIVEN: each chunk's H2D waits for an event after its
 * D2H, through a buffer that holds the whole part, as a receiver copying
 * by itself does; on 2 x H200 its best share at 256 MiB was 9-10%, against
 * 8% for the ring.  The staged path alone is measured on the ring.  The
 * share that finishes soonest wins if it beats the direct copy by more
 * than noise; then the smallest size where it still does not lose is
 * found.  Where the GPUs have the memory, the best share is also found
 * at 1 GiB (the staged part's fixed costs weigh less there, so it can
 * take more), and at 1 GiB in both directions at once (both
 * parts of each direction share each GPU's copy engines with the other
 * direction's).  Host clock around synchronized streams, best of several
 * runs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_backend.h"
#include "common/log.h"
#include "common/status.h"
#include "common/time.h"

#define CAL_SIZE  ((size_t)256 << 20)
#define CAL_LARGE ((size_t)1 << 30)
#define CAL_CHUNK ((size_t)16 << 20) /* the ring's slot on GPUs */
#define CAL_SLOTS 4
#define CAL_ALIGN ((size_t)64 << 10)
#define CAL_REPS  3
/* DRIVEN: the largest staged share swept (a little over it) and the most
 * chunks of a staged part (ipcp__stripe_unit cuts at least 1 MiB). */
#define CAL_STAGE_SHARE 0.15
#define CAL_EVENTS      256
/* A share must gain this much over the direct copy to be used. */
#define CAL_GAIN 1.02
/* Shares within this of the fastest one count as ties (noise). */
#define CAL_TIE 1.005

typedef struct cal {
    ipcp__backend_t *be;
    CUcontext sctx, dctx;
    int src, dst;
    void *sbuf, *sh, *dbuf, *dh;
    char *ring;
    int ring_reg;
    /* full[s] and freed[s] as in the engine's channel, a line each */
    uint64_t *flags;
    int flags_reg;
    uint64_t seq; /* chunks moved so far */
    CUstream direct, d2h, h2d;
    size_t cap;  /* bytes of sbuf and dbuf */
    int layout;  /* IPCP_STRIPE_* */
    char *stage; /* DRIVEN: the staged part's buffer */
    size_t stage_len;
    int stage_reg;
    CUevent ev[CAL_EVENTS]; /* DRIVEN: one per chunk */
} cal_t;

#define CAL_FLAG_STRIDE 8 /* uint64_t per 64-byte line */
#define CAL_FULL(c, s)  ((c)->flags + (size_t)(s)*CAL_FLAG_STRIDE)
#define CAL_FREED(c, s)                                                        \
    ((c)->flags + (size_t)(CAL_SLOTS + (s)) * CAL_FLAG_STRIDE)

#define CAL_CU(call, ...)                                                      \
    do {                                                                       \
        st = ipcp__cu_check((call), IPCP_LOG_WARN, __VA_ARGS__);               \
        if (st != IPCP_OK)                                                     \
            return st;                                                         \
    } while (0)

/* Enqueues one copy of len bytes, share of it staged. */
static ipcp_status_t cal_enqueue(cal_t *c, size_t len, double share)
{
    ipcp_status_t st;
    size_t stg = (size_t)((double)len * share);
    stg -= stg % CAL_ALIGN;
    if (share >= 1)
        stg = len;
    size_t dlen = len - stg;
    CUdeviceptr sp = (CUdeviceptr)(uintptr_t)c->sbuf;
    CUdeviceptr dp = (CUdeviceptr)(uintptr_t)c->dbuf;

    CAL_CU(IPCP_CU(cuCtxSetCurrent)(c->sctx), "cuCtxSetCurrent");
    if (dlen)
        CAL_CU(IPCP_CU(cuMemcpyAsync)(dp, sp, dlen, c->direct),
               "cuMemcpyAsync(%zu bytes, device %d -> %d)", dlen, c->src,
               c->dst);
    size_t chunk =
        share >= 1 ? CAL_CHUNK : (size_t)ipcp__stripe_unit(stg, CAL_CHUNK);
    if (c->layout == IPCP_STRIPE_DRIVEN && share < 1) {
        if (stg > c->stage_len || (stg + chunk - 1) / chunk > CAL_EVENTS)
            return ipcp__fail(IPCP_LOG_WARN, IPCP_SUB_CUDA, IPCP_ERR_INVALID,
                              "calibration: %zu staged bytes do not fit its "
                              "stage buffer",
                              stg);
        int k = 0;
        for (size_t off = dlen; off < len; off += chunk, k++) {
            size_t n = len - off < chunk ? len - off : chunk;
            char *h = c->stage + (off - dlen);
            CAL_CU(IPCP_CU(cuCtxSetCurrent)(c->sctx), "cuCtxSetCurrent");
            CAL_CU(IPCP_CU(cuMemcpyDtoHAsync)(h, sp + off, n, c->d2h),
                   "cuMemcpyDtoHAsync(%zu bytes, device %d)", n, c->src);
            CAL_CU(IPCP_CU(cuEventRecord)(c->ev[k], c->d2h), "cuEventRecord");
            CAL_CU(IPCP_CU(cuCtxSetCurrent)(c->dctx), "cuCtxSetCurrent");
            CAL_CU(IPCP_CU(cuStreamWaitEvent)(c->h2d, c->ev[k], 0),
                   "cuStreamWaitEvent");
            CAL_CU(IPCP_CU(cuMemcpyHtoDAsync)(dp + off, h, n, c->h2d),
                   "cuMemcpyHtoDAsync(%zu bytes, device %d)", n, c->dst);
        }
        return IPCP_OK;
    }
    for (size_t off = dlen; off < len; off += chunk, c->seq++) {
        size_t n = len - off < chunk ? len - off : chunk;
        uint64_t g = c->seq / CAL_SLOTS;
        int slot = (int)(c->seq % CAL_SLOTS);
        char *h = c->ring + (size_t)slot * CAL_CHUNK;
        CUdeviceptr full = ipcp__cuda_dev_addr(CAL_FULL(c, slot));
        CUdeviceptr freed = ipcp__cuda_dev_addr(CAL_FREED(c, slot));
        CAL_CU(IPCP_CU(cuCtxSetCurrent)(c->sctx), "cuCtxSetCurrent");
        CAL_CU(IPCP_CU(cuStreamWaitValue64)(c->d2h, freed, g,
                                            CU_STREAM_WAIT_VALUE_GEQ),
               "cuStreamWaitValue64");
        CAL_CU(IPCP_CU(cuMemcpyDtoHAsync)(h, sp + off, n, c->d2h),
               "cuMemcpyDtoHAsync(%zu bytes, device %d)", n, c->src);
        CAL_CU(IPCP_CU(cuStreamWriteValue64)(c->d2h, full, g + 1,
                                             CU_STREAM_WRITE_VALUE_DEFAULT),
               "cuStreamWriteValue64");
        CAL_CU(IPCP_CU(cuCtxSetCurrent)(c->dctx), "cuCtxSetCurrent");
        CAL_CU(IPCP_CU(cuStreamWaitValue64)(c->h2d, full, g + 1,
                                            CU_STREAM_WAIT_VALUE_GEQ),
               "cuStreamWaitValue64");
        CAL_CU(IPCP_CU(cuMemcpyHtoDAsync)(dp + off, h, n, c->h2d),
               "cuMemcpyHtoDAsync(%zu bytes, device %d)", n, c->dst);
        CAL_CU(IPCP_CU(cuStreamWriteValue64)(c->h2d, freed, g + 1,
                                             CU_STREAM_WRITE_VALUE_DEFAULT),
               "cuStreamWriteValue64");
    }
    return IPCP_OK;
}

static ipcp_status_t cal_sync(cal_t *c)
{
    ipcp_status_t st;
    CAL_CU(IPCP_CU(cuCtxSetCurrent)(c->dctx), "cuCtxSetCurrent");
    CAL_CU(IPCP_CU(cuStreamSynchronize)(c->h2d), "cuStreamSynchronize");
    CAL_CU(IPCP_CU(cuCtxSetCurrent)(c->sctx), "cuCtxSetCurrent");
    CAL_CU(IPCP_CU(cuStreamSynchronize)(c->direct), "cuStreamSynchronize");
    CAL_CU(IPCP_CU(cuStreamSynchronize)(c->d2h), "cuStreamSynchronize");
    return IPCP_OK;
}

/* One copy of len bytes, share of it staged, and with rev the same the
 * other way at once; *s gets the seconds until both ended. */
static ipcp_status_t cal_run(cal_t *c, cal_t *rev, size_t len, double share,
                             double *s)
{
    ipcp_status_t st;
    double t0 = ipcp__now_s();
    if ((st = cal_enqueue(c, len, share)) ||
        (rev && (st = cal_enqueue(rev, len, share))) || (st = cal_sync(c)) ||
        (rev && (st = cal_sync(rev))))
        return st;
    *s = ipcp__now_s() - t0;
    return IPCP_OK;
}

static ipcp_status_t cal_best(cal_t *c, cal_t *rev, size_t len, double share,
                              int reps, double *best)
{
    *best = 1e30;
    for (int r = 0; r < reps; r++) {
        double s;
        ipcp_status_t st = cal_run(c, rev, len, share, &s);
        if (st != IPCP_OK)
            return st;
        if (s < *best)
            *best = s;
    }
    return IPCP_OK;
}

/* cap: the buffers' size. */
static ipcp_status_t cal_setup(cal_t *c, size_t cap)
{
    ipcp_status_t st;
    c->cap = cap;
    if ((st = ipcp__cuda_ctx(c->be, c->src, IPCP_LOG_WARN, &c->sctx)) ||
        (st = ipcp__cuda_ctx(c->be, c->dst, IPCP_LOG_WARN, &c->dctx)))
        return st;
    /* Our allocator grants every device that can reach it access. */
    if ((st = ipcp__cuda_mem_alloc(c->be, cap, c->src, &c->sbuf, &c->sh)) ||
        (st = ipcp__cuda_mem_alloc(c->be, cap, c->dst, &c->dbuf, &c->dh)))
        return st;
    if (posix_memalign((void **)&c->ring, 4096, CAL_CHUNK * CAL_SLOTS) != 0) {
        c->ring = NULL;
        return ipcp__fail(IPCP_LOG_WARN, IPCP_SUB_CUDA, IPCP_ERR_NOMEM,
                          "no memory for the calibration's host ring");
    }
    CAL_CU(IPCP_CU(cuCtxSetCurrent)(c->sctx), "cuCtxSetCurrent");
    CAL_CU(IPCP_CU(cuMemHostRegister)(c->ring, CAL_CHUNK * CAL_SLOTS,
                                      CU_MEMHOSTREGISTER_PORTABLE),
           "cuMemHostRegister(%zu bytes)", CAL_CHUNK * CAL_SLOTS);
    c->ring_reg = 1;
    size_t fl = (size_t)2 * CAL_SLOTS * CAL_FLAG_STRIDE * sizeof(uint64_t);
    if (posix_memalign((void **)&c->flags, 4096, 4096) != 0) {
        c->flags = NULL;
        return ipcp__fail(IPCP_LOG_WARN, IPCP_SUB_CUDA, IPCP_ERR_NOMEM,
                          "no memory for the calibration's flags");
    }
    memset(c->flags, 0, fl);
    CAL_CU(IPCP_CU(cuMemHostRegister)(c->flags, 4096,
                                      CU_MEMHOSTREGISTER_PORTABLE |
                                          CU_MEMHOSTREGISTER_DEVICEMAP),
           "cuMemHostRegister(flags)");
    c->flags_reg = 1;
    if (c->layout == IPCP_STRIPE_DRIVEN) {
        c->stage_len =
            ipcp__align_up((size_t)(CAL_STAGE_SHARE * (double)cap), CAL_ALIGN);
        if (posix_memalign((void **)&c->stage, 4096, c->stage_len) != 0) {
            c->stage = NULL;
            return ipcp__fail(IPCP_LOG_WARN, IPCP_SUB_CUDA, IPCP_ERR_NOMEM,
                              "no memory for the calibration's stage buffer");
        }
        CAL_CU(IPCP_CU(cuMemHostRegister)(c->stage, c->stage_len,
                                          CU_MEMHOSTREGISTER_PORTABLE),
               "cuMemHostRegister(%zu bytes)", c->stage_len);
        c->stage_reg = 1;
        for (int i = 0; i < CAL_EVENTS; i++)
            CAL_CU(IPCP_CU(cuEventCreate)(&c->ev[i], CU_EVENT_DISABLE_TIMING),
                   "cuEventCreate");
    }
    CAL_CU(IPCP_CU(cuStreamCreate)(&c->direct, CU_STREAM_NON_BLOCKING),
           "cuStreamCreate");
    CAL_CU(IPCP_CU(cuStreamCreate)(&c->d2h, CU_STREAM_NON_BLOCKING),
           "cuStreamCreate");
    CAL_CU(IPCP_CU(cuCtxSetCurrent)(c->dctx), "cuCtxSetCurrent");
    CAL_CU(IPCP_CU(cuStreamCreate)(&c->h2d, CU_STREAM_NON_BLOCKING),
           "cuStreamCreate");
    CAL_CU(IPCP_CU(cuMemsetD8)((CUdeviceptr)(uintptr_t)c->dbuf, 0, cap),
           "cuMemsetD8");
    CAL_CU(IPCP_CU(cuCtxSetCurrent)(c->sctx), "cuCtxSetCurrent");
    CAL_CU(IPCP_CU(cuMemsetD8)((CUdeviceptr)(uintptr_t)c->sbuf, 1, cap),
           "cuMemsetD8");
    return IPCP_OK;
}

static void cal_teardown(cal_t *c)
{
    /* A run that failed half-way may leave waits on flags nobody writes:
     * move every flag past them first (GEQ is cyclic). */
    if (c->flags)
        for (int i = 0; i < 2 * CAL_SLOTS; i++)
            __atomic_store_n(c->flags + (size_t)i * CAL_FLAG_STRIDE,
                             c->seq / CAL_SLOTS + 2 + (1ull << 62),
                             __ATOMIC_RELEASE);
    if (c->dctx && IPCP_CU(cuCtxSetCurrent)(c->dctx) == CUDA_SUCCESS) {
        if (c->h2d) {
            IPCP_CU(cuStreamSynchronize)(c->h2d);
            IPCP_CU(cuStreamDestroy)(c->h2d);
        }
    }
    if (c->sctx && IPCP_CU(cuCtxSetCurrent)(c->sctx) == CUDA_SUCCESS) {
        if (c->direct) {
            IPCP_CU(cuStreamSynchronize)(c->direct);
            IPCP_CU(cuStreamDestroy)(c->direct);
        }
        if (c->d2h) {
            IPCP_CU(cuStreamSynchronize)(c->d2h);
            IPCP_CU(cuStreamDestroy)(c->d2h);
        }
        for (int i = 0; i < CAL_EVENTS; i++)
            if (c->ev[i])
                IPCP_CU(cuEventDestroy)(c->ev[i]);
        if (c->stage_reg)
            IPCP_CU(cuMemHostUnregister)(c->stage);
        if (c->ring_reg)
            IPCP_CU(cuMemHostUnregister)(c->ring);
        if (c->flags_reg)
            IPCP_CU(cuMemHostUnregister)(c->flags);
    }
    free(c->ring);
    free(c->stage);
    free(c->flags);
    if (c->sh)
        ipcp__cuda_mem_free(c->be, c->sh);
    if (c->dh)
        ipcp__cuda_mem_free(c->be, c->dh);
}

/* The share to use at len bytes (with rev: both ways at once): the
 * smallest within noise of the fastest.  Past its best share the staged
 * part sets the time, and each point of share costs there several times
 * what it gains below (2 x H200 between processes, 1 GiB one way: 9% 430,
 * 10% 432.5, 11% 399 GB/s), so ties go to the smaller share. */
static ipcp_status_t cal_sweep(cal_t *c, cal_t *rev, size_t len, double *share,
                               double *secs)
{
    static const double shares[] = {0.04, 0.05, 0.06, 0.07, 0.08, 0.09,
                                    0.10, 0.11, 0.12, 0.13, 0.14};
    enum { N = sizeof(shares) / sizeof(shares[0]) };
    double t[N], best = 1e30;
    ipcp_status_t st;
    for (int i = 0; i < N; i++) {
        if ((st = cal_best(c, rev, len, shares[i], CAL_REPS, &t[i])))
            return st;
        IPCP_DEBUG(IPCP_SUB_CUDA,
                   "striping %d -> %d%s, %zu MiB, share %.2f: "
                   "%.1f GB/s",
                   c->src, c->dst, rev ? " and back" : "", len >> 20, shares[i],
                   (rev ? 2.0 : 1.0) * (double)len / t[i] / 1e9);
        if (t[i] < best)
            best = t[i];
    }
    for (int i = 0; i < N; i++)
        if (t[i] <= best * CAL_TIE) {
            *share = shares[i];
            *secs = t[i];
            break;
        }
    return IPCP_OK;
}

static ipcp_status_t cal_measure(cal_t *c, cal_t *rev, ipcp__stripe_cal_t *out)
{
    static const size_t sizes[] = {(size_t)128 << 20, (size_t)64 << 20,
                                   (size_t)32 << 20, (size_t)16 << 20,
                                   (size_t)8 << 20};
    double direct, staged, t, best, best_share = 0;
    ipcp_status_t st;

    memset(out, 0, sizeof(*out));
    if ((st = cal_best(c, NULL, CAL_SIZE, 0.1, 1, &t)) || /* warm-up */
        (st = cal_best(c, NULL, CAL_SIZE, 0, CAL_REPS, &direct)) ||
        (st = cal_best(c, NULL, CAL_SIZE, 1, 1, &staged)) ||
        (st = cal_sweep(c, NULL, CAL_SIZE, &best_share, &best)))
        return st;
    out->size = CAL_SIZE;
    out->direct_gbs = (double)CAL_SIZE / direct / 1e9;
    out->staged_gbs = (double)CAL_SIZE / staged / 1e9;
    out->striped_gbs = (double)CAL_SIZE / best / 1e9;
    if (best * CAL_GAIN > direct)
        return IPCP_OK; /* no share gains: striping stays off */
    out->share = best_share;
    out->min_size = CAL_SIZE;
    double share, ts;
    if (c->cap >= CAL_LARGE) {
        if ((st = cal_best(c, NULL, CAL_LARGE, 0, CAL_REPS, &direct)) ||
            (st = cal_sweep(c, NULL, CAL_LARGE, &share, &ts)))
            return st;
        out->size_large = CAL_LARGE;
        out->direct_large_gbs = (double)CAL_LARGE / direct / 1e9;
        out->striped_large_gbs = (double)CAL_LARGE / ts / 1e9;
        /* Not gaining at 1 GiB (not seen): the smaller size's share. */
        out->share_large = ts * CAL_GAIN <= direct ? share : best_share;
    }
    /* Down from 128 MiB while the split does not lose, each size at the
     * share the engine would give it. */
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        double d, s,
            f = ipcp__stripe_fit(best_share, CAL_SIZE, out->share_large,
                                 out->size_large, sizes[i]);
        if (f <= 0)
            break;
        if ((st = cal_best(c, NULL, sizes[i], 0, CAL_REPS + 2, &d)) ||
            (st = cal_best(c, NULL, sizes[i], f, CAL_REPS + 2, &s)))
            return st;
        if (s > d)
            break;
        out->min_size = sizes[i];
    }
    if (!rev || c->cap < CAL_LARGE)
        return IPCP_OK;
    if ((st = cal_best(c, rev, CAL_LARGE, 0, CAL_REPS, &direct)) ||
        (st = cal_sweep(c, rev, CAL_LARGE, &share, &ts)))
        return st;
    out->bidir_direct_gbs = 2.0 * (double)CAL_LARGE / direct / 1e9;
    out->bidir_gbs = 2.0 * (double)CAL_LARGE / ts / 1e9;
    out->share_bidir = ts * CAL_GAIN <= direct ? share : 0;
    return IPCP_OK;
}

/* The buffers' size: 1 GiB when both GPUs have room for the buffers of
 * both directions (2 GiB each) and some to spare, else 256 MiB. */
static size_t cal_cap(ipcp__backend_t *be, int src, int dst)
{
    int devs[2] = {src, dst};
    for (int i = 0; i < 2; i++) {
        ipcp__cuda_scope_t sc;
        size_t fr = 0, total = 0;
        if (ipcp__cuda_enter(be, devs[i], IPCP_LOG_WARN, &sc) != IPCP_OK)
            return CAL_SIZE;
        CUresult r = IPCP_CU(cuMemGetInfo)(&fr, &total);
        ipcp__cuda_leave(&sc);
        if (r != CUDA_SUCCESS || fr < 3 * CAL_LARGE)
            return CAL_SIZE;
    }
    return CAL_LARGE;
}

ipcp_status_t ipcp__cuda_stripe_calibrate(ipcp__backend_t *be, int src, int dst,
                                          int layout, ipcp__stripe_cal_t *out)
{
    cal_t c, r;
    CUcontext prev = NULL;
    if (src < 0 || dst < 0 || src >= be->ndev || dst >= be->ndev)
        return ipcp__fail(IPCP_LOG_INFO, IPCP_SUB_CUDA, IPCP_ERR_UNSUPPORTED,
                          "GPU %d or %d is not visible to this process", src,
                          dst);
    if (src == dst || be->dev[src].id == be->dev[dst].id)
        return ipcp__fail(IPCP_LOG_INFO, IPCP_SUB_CUDA, IPCP_ERR_UNSUPPORTED,
                          "one GPU: nothing to stripe");
    if (!be->peer[src][dst])
        return ipcp__fail(IPCP_LOG_INFO, IPCP_SUB_CUDA, IPCP_ERR_UNSUPPORTED,
                          "GPU %d cannot write GPU %d's memory directly", src,
                          dst);
    memset(&c, 0, sizeof(c));
    c.be = be;
    c.src = src;
    c.dst = dst;
    c.layout = layout;
    memset(&r, 0, sizeof(r));
    r.be = be;
    r.src = dst;
    r.dst = src;
    r.layout = layout;
    IPCP_CU(cuCtxGetCurrent)(&prev);
    size_t cap = cal_cap(be, src, dst);
    ipcp_status_t st = cal_setup(&c, cap);
    /* Both ways at once only where each GPU can write the other's memory
     * and there was room for 1 GiB buffers. */
    int both = st == IPCP_OK && cap >= CAL_LARGE && be->peer[dst][src] &&
               cal_setup(&r, cap) == IPCP_OK;
    if (st == IPCP_OK)
        st = cal_measure(&c, both ? &r : NULL, out);
    if (r.be)
        cal_teardown(&r);
    cal_teardown(&c);
    /* The calling thread's context as it was (the engine's thread cache
     * is told through the bind helper). */
    IPCP_CU(cuCtxSetCurrent)(prev);
    ipcp__cuda_bind_forget();
    return st;
}

int ipcp__cuda_device_ident(ipcp__backend_t *be, int device, char *uuid,
                            size_t len, int *driver)
{
    if (device < 0 || device >= be->ndev ||
        ipcp__cu_uuid(be->dev[device].dev, uuid, len) < 0)
        return -1;
    *driver = be->driver_version;
    return 0;
}
