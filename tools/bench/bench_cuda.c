/* ipcpipe-bench: everything that calls CUDA, through the tools' table of
 * driver entry points (tools/common/tool_cuda.h: fetched from the driver
 * the library loaded) and the library's description of the GPUs
 * (ipcpipe_diag.h).  Without CUDA at build time every function here says
 * so and the bench runs on host memory only. */
#include "bench.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#ifdef IPCP_HAVE_CUDA

#include <pthread.h>

#include "ipcpipe_diag.h"
#include "tool_cuda.h"
#include "bench_cuda_int.h"

/* Formats "<what>: CUDA_ERROR_X: description" into err when r failed.
 * Returns 0 on success, -1 on failure. */
int bench_cu_ok(CUresult r, char *err, size_t elen, const char *what)
{
    char msg[160];
    if (r == CUDA_SUCCESS)
        return 0;
    if (err && elen)
        bench_fmt(err, elen, "%s: %s", what,
                  tool_cu_strerror(r, msg, sizeof(msg)));
    return -1;
}

/* ---- Devices ------------------------------------------------------------- */

static ipcp_diag_gpus_t probe;
static int probe_done, probe_ok;
static char probe_why[256];
CUcontext bench_cu_bound_ctx;
static int bound_dev = -1;

static int setting_is_off(const char *name)
{
    for (int i = 0; i < ipcp_settings_count(); i++) {
        ipcp_setting_info_t si;
        if (ipcp_setting_get(i, &si) == IPCP_OK && strcmp(si.name, name) == 0)
            return strcmp(si.value, "off") == 0;
    }
    return 0;
}

int bench_cuda_usable(char *why, size_t len)
{
    if (!probe_done) {
        probe_done = 1;
        if (setting_is_off("IPCPIPE_CUDA")) {
            bench_fmt(probe_why, sizeof(probe_why),
                      "IPCPIPE_CUDA=off turns the library's CUDA backend off");
        } else if (ipcp_diag_gpus(&probe) != IPCP_OK) {
            bench_fmt(probe_why, sizeof(probe_why), "%s", ipcp_last_error());
            probe.ndev = 0;
        } else if (tool_cu_load(probe_why, sizeof(probe_why)) < 0) {
            probe.ndev = 0;
        } else {
            probe_ok = 1;
        }
    }
    if (!probe_ok)
        bench_fmt(why, len, "%s", probe_why);
    return probe_ok;
}

int bench_cuda_ndev(void)
{
    char why[8];
    return bench_cuda_usable(why, sizeof(why)) ? probe.ndev : 0;
}

int bench_cuda_bus_id(int device, char *bus, size_t len, char *name,
                      size_t nlen)
{
    if (device < 0 || device >= bench_cuda_ndev())
        return -1;
    bench_fmt(bus, len, "%s", probe.dev[device].pci_bus_id);
    bench_fmt(name, nlen, "%s", probe.dev[device].name);
    return 0;
}

int bench_cuda_find_bus(const char *bus)
{
    for (int d = 0; d < bench_cuda_ndev(); d++)
        if (strcasecmp(probe.dev[d].pci_bus_id, bus) == 0)
            return d;
    return -1;
}

int bench_cuda_peer(int a, int b)
{
    int n = bench_cuda_ndev();
    return a >= 0 && b >= 0 && a < n && b < n && probe.peer[a][b];
}

int bench_cu_retain_ctx(int device, CUcontext *ctx, char *err, size_t elen)
{
    char what[64];
    CUdevice dev;
    bench_fmt(what, sizeof(what), "cuDeviceGet(%d)", device);
    if (bench_cu_ok(TOOL_CU(cuDeviceGet)(&dev, device), err, elen, what) < 0)
        return -1;
    bench_fmt(what, sizeof(what), "cuDevicePrimaryCtxRetain(device %d)",
              device);
    return bench_cu_ok(TOOL_CU(cuDevicePrimaryCtxRetain)(ctx, dev), err, elen,
                       what);
}

void bench_cu_release_ctx(int device)
{
    CUdevice dev;
    if (TOOL_CU(cuDeviceGet)(&dev, device) == CUDA_SUCCESS)
        TOOL_CU(cuDevicePrimaryCtxRelease)(dev);
}

int bench_cuda_bind(int device, char *err, size_t elen)
{
    char why[256];
    if (!bench_cuda_usable(why, sizeof(why))) {
        bench_fmt(err, elen, "%s", why);
        return -1;
    }
    if (device < 0 || device >= probe.ndev) {
        bench_fmt(err, elen, "CUDA device %d is not visible (%d visible)",
                  device, probe.ndev);
        return -1;
    }
    if (bound_dev == device)
        return 0;
    bench_cuda_unbind();
    CUcontext ctx;
    if (bench_cu_retain_ctx(device, &ctx, err, elen) < 0)
        return -1;
    if (bench_cu_ok(TOOL_CU(cuCtxSetCurrent)(ctx), err, elen,
                    "cuCtxSetCurrent") < 0) {
        bench_cu_release_ctx(device);
        return -1;
    }
    bench_cu_bound_ctx = ctx;
    bound_dev = device;
    return 0;
}

static CUstream user_stream; /* of bound_dev, for the stream case */

void *bench_cuda_stream(char *err, size_t elen)
{
    if (bound_dev < 0) {
        bench_fmt(err, elen, "no CUDA device bound");
        return NULL;
    }
    if (!user_stream && bench_cu_ok(TOOL_CU(cuStreamCreate)(
                                        &user_stream, CU_STREAM_NON_BLOCKING),
                                    err, elen, "cuStreamCreate") < 0) {
        user_stream = NULL;
        return NULL;
    }
    return user_stream;
}

/* A rank bound to one CPU shares it with the library's threads that move
 * stream-ordered work on (its progress thread, its CUDA event poller).
 * cuStreamSynchronize spins there without yielding (the driver's default
 * schedule spins while the process has fewer contexts than the machine
 * has CPUs, whatever its binding) and keeps them off the CPU until the
 * scheduler preempts it (ipcpipe then notices and its threads sleep
 * between looks): such a rank polls the stream and yields between polls,
 * as an application bound to one core should wait for any library with a
 * helper thread (docs/launchers.md); --stream-wait chooses. */
int bench_cuda_stream_sync(void *stream, char *err, size_t elen)
{
    CUresult r;
    if (!bench_stream_poll())
        r = TOOL_CU(cuStreamSynchronize)((CUstream)stream);
    else
        while ((r = TOOL_CU(cuStreamQuery)((CUstream)stream)) ==
               CUDA_ERROR_NOT_READY)
            sched_yield();
    return bench_cu_ok(r, err, elen, "waiting for the stream");
}

void bench_cuda_unbind(void)
{
    if (bound_dev < 0)
        return;
    if (user_stream) {
        TOOL_CU(cuStreamSynchronize)(user_stream);
        TOOL_CU(cuStreamDestroy)(user_stream);
        user_stream = NULL;
    }
    TOOL_CU(cuCtxSetCurrent)(NULL);
    bench_cu_release_ctx(bound_dev);
    bound_dev = -1;
    bench_cu_bound_ctx = NULL;
}

/* Plain allocations are made in device's context; the thread's current
 * context is restored afterwards. */
static int with_ctx(CUcontext ctx, CUcontext *saved, char *err, size_t elen)
{
    if (bench_cu_ok(TOOL_CU(cuCtxGetCurrent)(saved), err, elen,
                    "cuCtxGetCurrent") < 0)
        return -1;
    if (*saved == ctx)
        return 0;
    return bench_cu_ok(TOOL_CU(cuCtxSetCurrent)(ctx), err, elen,
                       "cuCtxSetCurrent");
}

static void restore_ctx(CUcontext saved)
{
    CUcontext cur = NULL;
    if (TOOL_CU(cuCtxGetCurrent)(&cur) == CUDA_SUCCESS && cur != saved)
        TOOL_CU(cuCtxSetCurrent)(saved);
}

static int plain_alloc(CUcontext ctx, int device, size_t len, CUdeviceptr *p,
                       int *nomem, char *err, size_t elen)
{
    CUcontext saved;
    char what[96];
    if (with_ctx(ctx, &saved, err, elen) < 0)
        return -1;
    CUresult r = TOOL_CU(cuMemAlloc)(p, len ? len : 1);
    restore_ctx(saved);
    *nomem = r == CUDA_ERROR_OUT_OF_MEMORY;
    bench_fmt(what, sizeof(what), "cuMemAlloc(%zu bytes on device %d)", len,
              device);
    return bench_cu_ok(r, err, elen, what);
}

/* Device part of bench_buf_alloc (bench_mem.c handles host memory).  A
 * plain allocation keeps its device's primary context retained until it is
 * freed: the last release would destroy the context and the memory. */
int bench_cuda_buf_alloc(ipcp_comm_t *comm, size_t len, int device,
                         bench_alloc_t alloc, bench_buf_t *b, int *nomem,
                         char *err, size_t elen)
{
    *nomem = 0;
    memset(b, 0, sizeof(*b));
    if (alloc != BENCH_ALLOC_IPCP && alloc != BENCH_ALLOC_PLAIN) {
        if (bench_foreign_alloc(alloc, device, len, b, nomem, err, elen) < 0)
            return -1;
    } else if (alloc == BENCH_ALLOC_PLAIN) {
        CUcontext ctx;
        CUdeviceptr p;
        if (bench_cu_retain_ctx(device, &ctx, err, elen) < 0)
            return -1;
        if (plain_alloc(ctx, device, len, &p, nomem, err, elen) < 0) {
            bench_cu_release_ctx(device);
            return -1;
        }
        b->ptr = (void *)(uintptr_t)p;
    } else {
        ipcp_alloc_params_t ap;
        ipcp_alloc_params_init(&ap);
        ap.type = IPCP_MEM_CUDA;
        ap.device = device;
        ipcp_status_t st = ipcp_mem_alloc(comm, len, &ap, &b->ptr);
        if (st != IPCP_OK) {
            *nomem = st == IPCP_ERR_NOMEM;
            bench_fmt(err, elen,
                      "ipcp_mem_alloc(%zu bytes on CUDA device %d): %s: %s",
                      len, device, ipcp_strerror(st), ipcp_last_error());
            return -1;
        }
    }
    b->len = len;
    b->device = device;
    b->alloc = alloc;
    return 0;
}

void bench_cuda_buf_free(ipcp_comm_t *comm, bench_buf_t *b)
{
    char err[256];
    if (b->foreign) {
        bench_foreign_free(b);
    } else if (b->alloc == BENCH_ALLOC_PLAIN) {
        /* cuMemFree needs no particular current context under UVA. */
        if (bench_cu_ok(TOOL_CU(cuMemFree)((CUdeviceptr)(uintptr_t)b->ptr), err,
                        sizeof(err), "cuMemFree") < 0)
            fprintf(stderr, "ipcpipe-bench: %s\n", err);
        bench_cu_release_ctx(b->device);
    } else {
        ipcp_status_t st = ipcp_mem_free(comm, b->ptr);
        if (st != IPCP_OK)
            fprintf(stderr, "ipcpipe-bench: ipcp_mem_free: %s: %s\n",
                    ipcp_strerror(st), ipcp_last_error());
    }
}

/* Synchronous copies and fills on the bound device.  cuMemcpyHtoD from
 * pageable memory and cuMemsetD8 may return before the device has the
 * data, and the library's streams do not wait for the legacy stream, so
 * each is followed by cuCtxSynchronize. */
int bench_cuda_h2d(void *dst, const void *src, size_t n, char *err, size_t elen)
{
    char what[96];
    bench_fmt(what, sizeof(what), "cuMemcpyHtoD(%p, %zu bytes)", dst, n);
    if (bench_cu_ok(TOOL_CU(cuMemcpyHtoD)((CUdeviceptr)(uintptr_t)dst, src, n),
                    err, elen, what) < 0)
        return -1;
    return bench_cu_ok(TOOL_CU(cuCtxSynchronize)(), err, elen,
                       "cuCtxSynchronize after cuMemcpyHtoD");
}

int bench_cuda_d2h(void *dst, const void *src, size_t n, char *err, size_t elen)
{
    char what[96];
    bench_fmt(what, sizeof(what), "cuMemcpyDtoH(%p, %zu bytes)", src, n);
    if (bench_cu_ok(TOOL_CU(cuCtxSynchronize)(), err, elen,
                    "cuCtxSynchronize before cuMemcpyDtoH") < 0)
        return -1;
    return bench_cu_ok(
        TOOL_CU(cuMemcpyDtoH)(dst, (CUdeviceptr)(uintptr_t)src, n), err, elen,
        what);
}

int bench_cuda_memset(void *dst, unsigned char v, size_t n, char *err,
                      size_t elen)
{
    char what[96];
    bench_fmt(what, sizeof(what), "cuMemsetD8(%p, 0x%02x, %zu bytes)", dst, v,
              n);
    if (bench_cu_ok(TOOL_CU(cuMemsetD8)((CUdeviceptr)(uintptr_t)dst, v, n), err,
                    elen, what) < 0)
        return -1;
    return bench_cu_ok(TOOL_CU(cuCtxSynchronize)(), err, elen,
                       "cuCtxSynchronize after cuMemsetD8");
}

/* ---- Ceilings ------------------------------------------------------------ */

/* Side 0 is the sender's device (a), side 1 the receiver's (b); a == b
 * when both ranks share a device or the sender's is not visible here.
 * Each side's buffer holds the window's slots in [0, half) and the source
 * of the copies that leave it at [half, half + size). */
struct bench_cuda_ceil {
    int dev[2];
    int plain;
    int gated; /* streams start together on a flag (64-bit memops) */
    CUcontext ctx[2];
    int retained[2];
    CUstream st[2];
    CUevent ev[2][2]; /* [side][start, stop] */
    bench_buf_t buf[2];
    size_t half;
    void *pinned;
    size_t pinned_len;
    volatile uint64_t *gate;
    CUdeviceptr gate_dev[2];
    uint64_t gate_val;
};

/* One stream's share of a measurement: window copies of size bytes, the
 * k-th from src + (k % slots) * src_step to dst + (k % slots) * dst_step. */
typedef struct cjob {
    int side;
    CUdeviceptr dst, src;
    size_t dst_step, src_step;
} cjob_t;

static int side_enqueue(bench_cuda_ceil_t *cc, const cjob_t *j, size_t size,
                        int window, int slots, int gated, char *err,
                        size_t elen)
{
    CUstream s = cc->st[j->side];
    char what[128];
    if (bench_cu_ok(TOOL_CU(cuCtxSetCurrent)(cc->ctx[j->side]), err, elen,
                    "cuCtxSetCurrent") < 0)
        return -1;
    if (gated && bench_cu_ok(TOOL_CU(cuStreamWaitValue64)(
                                 s, cc->gate_dev[j->side], cc->gate_val,
                                 CU_STREAM_WAIT_VALUE_GEQ),
                             err, elen, "cuStreamWaitValue64(gate)") < 0)
        return -1;
    if (bench_cu_ok(TOOL_CU(cuEventRecord)(cc->ev[j->side][0], s), err, elen,
                    "cuEventRecord(start)") < 0)
        return -1;
    for (int k = 0; k < window; k++) {
        size_t slot = (size_t)(k % slots);
        CUresult r = TOOL_CU(cuMemcpyAsync)(
            j->dst + slot * j->dst_step, j->src + slot * j->src_step, size, s);
        if (r != CUDA_SUCCESS) {
            bench_fmt(what, sizeof(what),
                      "cuMemcpyAsync(%zu bytes, device %d stream)", size,
                      cc->dev[j->side]);
            return bench_cu_ok(r, err, elen, what);
        }
    }
    return bench_cu_ok(TOOL_CU(cuEventRecord)(cc->ev[j->side][1], s), err, elen,
                       "cuEventRecord(stop)");
}

/* Runs the jobs (at most one per side) at once; ms[j] is each one's time
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
        int s = jobs[j].side;
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
    for (int e = 0; e < 2; e++)
        if (cc->ev[s][e])
            TOOL_CU(cuEventDestroy)(cc->ev[s][e]);
    if (cc->st[s])
        TOOL_CU(cuStreamDestroy)(cc->st[s]);
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

static int ceil_open_side(ipcp_comm_t *comm, bench_cuda_ceil_t *cc, int s,
                          size_t len, int *nomem, char *err, size_t elen)
{
    if (bench_cu_retain_ctx(cc->dev[s], &cc->ctx[s], err, elen) < 0)
        return -1;
    cc->retained[s] = 1;
    if (bench_cu_ok(TOOL_CU(cuCtxSetCurrent)(cc->ctx[s]), err, elen,
                    "cuCtxSetCurrent") < 0 ||
        bench_cu_ok(TOOL_CU(cuStreamCreate)(&cc->st[s], CU_STREAM_NON_BLOCKING),
                    err, elen, "cuStreamCreate") < 0 ||
        bench_cu_ok(TOOL_CU(cuEventCreate)(&cc->ev[s][0], CU_EVENT_DEFAULT),
                    err, elen, "cuEventCreate") < 0 ||
        bench_cu_ok(TOOL_CU(cuEventCreate)(&cc->ev[s][1], CU_EVENT_DEFAULT),
                    err, elen, "cuEventCreate") < 0)
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
    cc->gated = probe.dev[a].memops64 && probe.dev[b].memops64;
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
        j[0] = (cjob_t){0, dptr(b, 0), dptr(a, h), size, 0};
        return 1;
    case BENCH_CEIL_D2D_BIDIR:
        j[0] = (cjob_t){0, dptr(b, 0), dptr(a, h), size, 0};
        j[1] = (cjob_t){1, dptr(a, 0), dptr(b, h), size, 0};
        return 2;
    case BENCH_CEIL_STAGED:
    case BENCH_CEIL_D2H:
    case BENCH_CEIL_H2D:
        if (kind == BENCH_CEIL_D2H || (kind == BENCH_CEIL_STAGED && dir == 0))
            /* D2H on the sender's device */
            j[0] = (cjob_t){0, host, dptr(a, h), 0, 0};
        else /* H2D on the receiver's device */
            j[0] = (cjob_t){1, dptr(b, 0), host, size, 0};
        return 1;
    default:
        return 0;
    }
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

int bench_cuda_usable(char *why, size_t len)
{
    bench_fmt(why, len, "%s", no_cuda);
    return 0;
}

int bench_cuda_ndev(void)
{
    return 0;
}

int bench_cuda_bind(int device, char *err, size_t elen)
{
    bench_fmt(err, elen, "%s", no_cuda);
    return -1;
}

void *bench_cuda_stream(char *err, size_t elen)
{
    bench_fmt(err, elen, "%s", no_cuda);
    return NULL;
}

int bench_cuda_stream_sync(void *stream, char *err, size_t elen)
{
    (void)stream;
    bench_fmt(err, elen, "%s", no_cuda);
    return -1;
}

void bench_cuda_unbind(void)
{
}

int bench_cuda_bus_id(int device, char *bus, size_t len, char *name,
                      size_t nlen)
{
    return -1;
}

int bench_cuda_find_bus(const char *bus)
{
    return -1;
}

int bench_cuda_peer(int a, int b)
{
    return 0;
}

int bench_cuda_buf_alloc(ipcp_comm_t *comm, size_t len, int device,
                         bench_alloc_t alloc, bench_buf_t *b, int *nomem,
                         char *err, size_t elen)
{
    *nomem = 0;
    bench_fmt(err, elen, "%s", no_cuda);
    return -1;
}

void bench_cuda_buf_free(ipcp_comm_t *comm, bench_buf_t *b)
{
}

int bench_cuda_h2d(void *dst, const void *src, size_t n, char *err, size_t elen)
{
    bench_fmt(err, elen, "%s", no_cuda);
    return -1;
}

int bench_cuda_d2h(void *dst, const void *src, size_t n, char *err, size_t elen)
{
    bench_fmt(err, elen, "%s", no_cuda);
    return -1;
}

int bench_cuda_memset(void *dst, unsigned char v, size_t n, char *err,
                      size_t elen)
{
    bench_fmt(err, elen, "%s", no_cuda);
    return -1;
}

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
