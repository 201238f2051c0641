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

int bench_cuda_memops64(int device)
{
    return device >= 0 && device < probe.ndev && probe.dev[device].memops64;
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

static CUevent wait_event; /* of bound_dev, for --stream-wait event */

/* A rank bound to one CPU shares it with the library's threads that move
 * stream-ordered work on (its progress thread, its CUDA event poller).
 * cuStreamSynchronize spins there without yielding (the driver's default
 * schedule spins while the process has fewer contexts than the machine
 * has CPUs, whatever its binding) and keeps them off the CPU until the
 * scheduler preempts it (ipcpipe then notices and its threads sleep
 * between looks): such a rank polls the stream and yields between polls,
 * as an application bound to one core should wait for any library with a
 * helper thread (docs/launchers.md), or sleeps on a blocking-sync event
 * (--stream-wait event); --stream-wait chooses. */

int bench_cuda_stream_sync(void *stream, char *err, size_t elen)
{
    CUresult r;
    switch (bench_stream_wait()) {
    case BENCH_WAIT_EVENT:
        r = CUDA_SUCCESS;
        if (!wait_event)
            r = TOOL_CU(cuEventCreate)(
                &wait_event, CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING);
        if (r == CUDA_SUCCESS)
            r = TOOL_CU(cuEventRecord)(wait_event, (CUstream)stream);
        if (r == CUDA_SUCCESS)
            r = TOOL_CU(cuEventSynchronize)(wait_event);
        break;
    case BENCH_WAIT_POLL:
        while ((r = TOOL_CU(cuStreamQuery)((CUstream)stream)) ==
               CUDA_ERROR_NOT_READY)
            sched_yield();
        break;
    default:
        r = TOOL_CU(cuStreamSynchronize)((CUstream)stream);
    }
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
    if (wait_event) {
        TOOL_CU(cuEventDestroy)(wait_event);
        wait_event = NULL;
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

#endif
