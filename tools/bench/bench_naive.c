/* ipcpipe-bench's CUDA work between its processes: --compare naive, the
 * forum post's pattern (examples/seed.c --naive) in driver terms, with the
 * IPC handle of rank 1's buffer it opens; and --load's copies in a third
 * process (bench_cuda.c has the devices and buffers they use). */
#include "bench.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef IPCP_HAVE_CUDA

#include "tool_cuda.h"
#include "bench_cuda_int.h"

/* ---- The forum post's pattern (--compare naive) ------------------------ */

/* As examples/seed.c run_naive, in driver terms: 4 streams a side, each
 * transfer in 16 chunks. */
#define NAIVE_STREAMS 4
#define NAIVE_CHUNKS  16

struct bench_naive {
    int dev[2];       /* [0]: rank 0's device (bound), [1]: rank 1's */
    CUcontext ctx[2]; /* their primary contexts, retained */
    int retained[2];
    CUstream d2h[NAIVE_STREAMS]; /* on dev[0] */
    CUstream h2d[NAIVE_STREAMS]; /* on dev[1] */
    CUevent ev[NAIVE_STREAMS];   /* on dev[0], joining d2h[s] to h2d[s] */
    void *pinned;
    size_t pinned_len;
    CUdeviceptr mapped; /* rank 1's buffer, opened in ctx[0]; 0: none */
};

static void restore_bound(void)
{
    if (bench_cu_bound_ctx)
        TOOL_CU(cuCtxSetCurrent)(bench_cu_bound_ctx);
}

static int naive_side(bench_naive_t *nv, int side, char *err, size_t elen)
{
    char what[96];
    if (bench_cu_retain_ctx(nv->dev[side], &nv->ctx[side], err, elen) < 0)
        return -1;
    nv->retained[side] = 1;
    if (bench_cu_ok(TOOL_CU(cuCtxSetCurrent)(nv->ctx[side]), err, elen,
                    "cuCtxSetCurrent") < 0)
        return -1;
    for (int s = 0; s < NAIVE_STREAMS; s++) {
        CUstream *st = side ? &nv->h2d[s] : &nv->d2h[s];
        bench_fmt(what, sizeof(what), "cuStreamCreate(%s stream %d, device %d)",
                  side ? "H2D" : "D2H", s, nv->dev[side]);
        if (bench_cu_ok(TOOL_CU(cuStreamCreate)(st, CU_STREAM_NON_BLOCKING),
                        err, elen, what) < 0)
            return -1;
        if (side == 0 && bench_cu_ok(TOOL_CU(cuEventCreate)(
                                         &nv->ev[s], CU_EVENT_DISABLE_TIMING),
                                     err, elen, "cuEventCreate") < 0)
            return -1;
    }
    return 0;
}

bench_naive_t *bench_naive_create(int dev0, int dev1, size_t pinned_len,
                                  int *nomem, char *err, size_t elen)
{
    *nomem = 0;
    if (tool_cu_load(err, elen) < 0)
        return NULL;
    bench_naive_t *nv = calloc(1, sizeof(*nv));
    if (!nv) {
        *nomem = 1;
        bench_fmt(err, elen, "out of memory");
        return NULL;
    }
    nv->dev[0] = dev0;
    nv->dev[1] = dev1;
    nv->pinned_len = pinned_len ? pinned_len : 1;
    if (naive_side(nv, 0, err, elen) < 0 || naive_side(nv, 1, err, elen) < 0)
        goto fail;
    /* cudaMallocHost in the seed: pinned, usable from both contexts. */
    CUresult r = TOOL_CU(cuMemHostAlloc)(&nv->pinned, nv->pinned_len,
                                         CU_MEMHOSTALLOC_PORTABLE);
    if (r != CUDA_SUCCESS) {
        nv->pinned = NULL;
        *nomem = r == CUDA_ERROR_OUT_OF_MEMORY;
        bench_cu_ok(r, err, elen,
                    "cuMemHostAlloc(pinned staging of the naive case)");
        goto fail;
    }
    memset(nv->pinned, 0, nv->pinned_len);
    restore_bound();
    return nv;
fail:
    bench_naive_destroy(nv);
    return NULL;
}

int bench_naive_open(bench_naive_t *nv,
                     const unsigned char h[BENCH_IPC_HANDLE_BYTES], void **ptr,
                     char *err, size_t elen)
{
    CUipcMemHandle hd;
    char what[128];
    _Static_assert(sizeof(hd) == BENCH_IPC_HANDLE_BYTES,
                   "BENCH_IPC_HANDLE_BYTES must be CU_IPC_HANDLE_SIZE");
    memcpy(&hd, h, sizeof(hd));
    bench_naive_close(nv);
    /* The seed's choice, kept on purpose: the mapping is made while rank
     * 0's own device is current, so it belongs to that context although
     * the memory is on rank 1's GPU. */
    if (bench_cu_ok(TOOL_CU(cuCtxSetCurrent)(nv->ctx[0]), err, elen,
                    "cuCtxSetCurrent") < 0)
        return -1;
    bench_fmt(what, sizeof(what),
              "cuIpcOpenMemHandle(rank 1's buffer, in device %d's context)",
              nv->dev[0]);
    int rc =
        bench_cu_ok(TOOL_CU(cuIpcOpenMemHandle)(
                        &nv->mapped, hd, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
                    err, elen, what);
    if (rc < 0)
        nv->mapped = 0;
    *ptr = (void *)(uintptr_t)nv->mapped;
    restore_bound();
    return rc;
}

void bench_naive_close(bench_naive_t *nv)
{
    char err[BENCH_REASON_MAX];
    if (!nv || !nv->mapped)
        return;
    TOOL_CU(cuCtxSetCurrent)(nv->ctx[0]);
    if (bench_cu_ok(TOOL_CU(cuIpcCloseMemHandle)(nv->mapped), err, sizeof(err),
                    "cuIpcCloseMemHandle") < 0)
        fprintf(stderr, "ipcpipe-bench: %s\n", err);
    nv->mapped = 0;
    restore_bound();
}

/* One chunk: D2H on device 0's stream s, an event, and H2D on device 1's
 * stream s after it, each issued with its device's context current (the
 * seed's cudaSetDevice calls). */
static int naive_chunk(bench_naive_t *nv, int s, CUdeviceptr src,
                       unsigned char *host, CUdeviceptr dst, size_t n,
                       char *err, size_t elen)
{
    char what[96];
    if (bench_cu_ok(TOOL_CU(cuCtxSetCurrent)(nv->ctx[0]), err, elen,
                    "cuCtxSetCurrent(device 0)") < 0)
        return -1;
    bench_fmt(what, sizeof(what), "cuMemcpyDtoHAsync(%zu bytes, stream %d)", n,
              s);
    if (bench_cu_ok(TOOL_CU(cuMemcpyDtoHAsync)(host, src, n, nv->d2h[s]), err,
                    elen, what) < 0 ||
        bench_cu_ok(TOOL_CU(cuEventRecord)(nv->ev[s], nv->d2h[s]), err, elen,
                    "cuEventRecord") < 0)
        return -1;
    if (bench_cu_ok(TOOL_CU(cuCtxSetCurrent)(nv->ctx[1]), err, elen,
                    "cuCtxSetCurrent(device 1)") < 0 ||
        bench_cu_ok(TOOL_CU(cuStreamWaitEvent)(nv->h2d[s], nv->ev[s], 0), err,
                    elen, "cuStreamWaitEvent") < 0)
        return -1;
    bench_fmt(what, sizeof(what),
              "cuMemcpyHtoDAsync(%zu bytes into the mapping, stream %d)", n, s);
    return bench_cu_ok(TOOL_CU(cuMemcpyHtoDAsync)(dst, host, n, nv->h2d[s]),
                       err, elen, what);
}

int bench_naive_window(bench_naive_t *nv, const void *src, size_t size,
                       int window, int slots, char *err, size_t elen)
{
    if (!nv->mapped) {
        bench_fmt(err, elen, "bench bug: no mapping open");
        return -1;
    }
    if (size == 0 || (size_t)slots * size > nv->pinned_len) {
        bench_fmt(err, elen, "pinned staging too small for %d x %zu bytes",
                  slots, size);
        return -1;
    }
    size_t chunk = (size + NAIVE_CHUNKS - 1) / NAIVE_CHUNKS;
    CUdeviceptr s0 = (CUdeviceptr)(uintptr_t)src;
    int rc = 0;
    for (int k = 0; k < window && rc == 0; k++) {
        size_t slot = (size_t)(k % slots) * size;
        unsigned char *host = (unsigned char *)nv->pinned + slot;
        int c = 0;
        for (size_t off = 0; off < size && rc == 0; off += chunk, c++) {
            size_t n = size - off < chunk ? size - off : chunk;
            rc = naive_chunk(nv, c % NAIVE_STREAMS, s0 + off, host + off,
                             nv->mapped + slot + off, n, err, elen);
        }
    }
    /* Everything enqueued is waited for, also after a failure. */
    for (int s = 0; s < NAIVE_STREAMS; s++) {
        char e2[BENCH_REASON_MAX];
        for (int side = 0; side < 2; side++) {
            CUstream st = side ? nv->h2d[s] : nv->d2h[s];
            if (bench_cu_ok(TOOL_CU(cuStreamSynchronize)(st), e2, sizeof(e2),
                            "cuStreamSynchronize") < 0 &&
                rc == 0) {
                bench_fmt(err, elen, "%s", e2);
                rc = -1;
            }
        }
    }
    restore_bound();
    return rc;
}

void bench_naive_destroy(bench_naive_t *nv)
{
    if (!nv)
        return;
    bench_naive_close(nv);
    for (int side = 0; side < 2; side++) {
        if (!nv->retained[side])
            continue;
        TOOL_CU(cuCtxSetCurrent)(nv->ctx[side]);
        for (int s = 0; s < NAIVE_STREAMS; s++) {
            CUstream st = side ? nv->h2d[s] : nv->d2h[s];
            if (st)
                TOOL_CU(cuStreamDestroy)(st);
            if (side == 0 && nv->ev[s])
                TOOL_CU(cuEventDestroy)(nv->ev[s]);
        }
    }
    if (nv->pinned)
        TOOL_CU(cuMemFreeHost)(nv->pinned);
    restore_bound();
    for (int side = 0; side < 2; side++)
        if (nv->retained[side])
            bench_cu_release_ctx(nv->dev[side]);
    free(nv);
}

int bench_cuda_ipc_handle(void *ptr, unsigned char h[BENCH_IPC_HANDLE_BYTES],
                          char *err, size_t elen)
{
    CUipcMemHandle hd;
    if (bench_cu_ok(
            TOOL_CU(cuIpcGetMemHandle)(&hd, (CUdeviceptr)(uintptr_t)ptr), err,
            elen, "cuIpcGetMemHandle(the naive case's buffer)") < 0)
        return -1;
    memcpy(h, &hd, sizeof(hd));
    return 0;
}

/* --load's copies (bench_load.c): BENCH_LOAD_DEPTH copies of
 * BENCH_LOAD_CHUNK bytes between device memory and pinned host memory on
 * one stream, waited for, again, until *stop.  A batch of several keeps
 * the copy engine busy while the host waits; the first batch's end is
 * reported on ready_fd, so that nothing is timed before the load runs. */
int bench_cuda_load_run(int device, int h2d, volatile sig_atomic_t *stop,
                        int ready_fd, double *bytes, double *secs, char *err,
                        size_t elen)
{
    CUdeviceptr d = 0;
    void *h = NULL;
    CUstream s = NULL;
    int rc = -1;
    *bytes = *secs = 0;
    /* The driver initialized first (the bind), as everywhere else here. */
    if (bench_cuda_bind(device, err, elen) < 0)
        return -1;
    if (tool_cu_load(err, elen) < 0)
        goto out;
    if (bench_cu_ok(TOOL_CU(cuMemAlloc)(&d, BENCH_LOAD_CHUNK), err, elen,
                    "cuMemAlloc(load buffer)") < 0 ||
        bench_cu_ok(TOOL_CU(cuMemHostAlloc)(&h, BENCH_LOAD_CHUNK, 0), err, elen,
                    "cuMemHostAlloc(load buffer)") < 0 ||
        bench_cu_ok(TOOL_CU(cuStreamCreate)(&s, CU_STREAM_NON_BLOCKING), err,
                    elen, "cuStreamCreate") < 0)
        goto out;
    memset(h, 0x5a, BENCH_LOAD_CHUNK);
    double t0 = bench_now_s();
    for (int batch = 0; !*stop; batch++) {
        for (int i = 0; i < BENCH_LOAD_DEPTH; i++) {
            CUresult r =
                h2d ? TOOL_CU(cuMemcpyHtoDAsync)(d, h, BENCH_LOAD_CHUNK, s)
                    : TOOL_CU(cuMemcpyDtoHAsync)(h, d, BENCH_LOAD_CHUNK, s);
            if (bench_cu_ok(r, err, elen,
                            h2d ? "cuMemcpyHtoDAsync(load)"
                                : "cuMemcpyDtoHAsync(load)") < 0)
                goto out;
        }
        if (bench_cu_ok(TOOL_CU(cuStreamSynchronize)(s), err, elen,
                        "cuStreamSynchronize(load)") < 0)
            goto out;
        *bytes += (double)BENCH_LOAD_DEPTH * (double)BENCH_LOAD_CHUNK;
        if (batch == 0 && ready_fd >= 0 && write(ready_fd, "R", 1) != 1) {
            bench_fmt(err, elen, "cannot tell the rank the load runs: %s",
                      strerror(errno));
            goto out;
        }
    }
    *secs = bench_now_s() - t0;
    rc = 0;
out:
    if (s)
        TOOL_CU(cuStreamDestroy)(s);
    if (h)
        TOOL_CU(cuMemFreeHost)(h);
    if (d)
        TOOL_CU(cuMemFree)(d);
    bench_cuda_unbind();
    return rc;
}

#else

static const char no_cuda[] =
    "this ipcpipe-bench was built without CUDA (IPCPIPE_HAVE_CUDA off)";

bench_naive_t *bench_naive_create(int dev0, int dev1, size_t pinned_len,
                                  int *nomem, char *err, size_t elen)
{
    *nomem = 0;
    bench_fmt(err, elen, "%s", no_cuda);
    return NULL;
}

int bench_naive_open(bench_naive_t *nv,
                     const unsigned char h[BENCH_IPC_HANDLE_BYTES], void **ptr,
                     char *err, size_t elen)
{
    bench_fmt(err, elen, "%s", no_cuda);
    return -1;
}

void bench_naive_close(bench_naive_t *nv)
{
}

int bench_naive_window(bench_naive_t *nv, const void *src, size_t size,
                       int window, int slots, char *err, size_t elen)
{
    bench_fmt(err, elen, "%s", no_cuda);
    return -1;
}

void bench_naive_destroy(bench_naive_t *nv)
{
}

int bench_cuda_ipc_handle(void *ptr, unsigned char h[BENCH_IPC_HANDLE_BYTES],
                          char *err, size_t elen)
{
    bench_fmt(err, elen, "%s", no_cuda);
    return -1;
}

int bench_cuda_load_run(int device, int h2d, volatile sig_atomic_t *stop,
                        int ready_fd, double *bytes, double *secs, char *err,
                        size_t elen)
{
    *bytes = *secs = 0;
    bench_fmt(err, elen, "%s", no_cuda);
    return -1;
}

#endif
