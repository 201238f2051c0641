/* The small-message lane on CUDA: the kernels of lane_kernels.cu, embedded
 * as a fatbin, loaded once per device's primary context, launched on the
 * user's stream.  Without nvcc at build time the file provides only the
 * unload that close calls, and the backend offers no lane. */
#include <string.h>

#include "backend/cuda/cuda_backend.h"
#include "common/status.h"

#ifdef IPCP_HAVE_LANE
#include "lane_fatbin.h"

#define LANE_THREADS 128 /* lane_kernels.cu's __launch_bounds__ */

static const char *const lane_names[2] = {"ipcp_lane_send", "ipcp_lane_recv"};

/* Called with be->lock held and device's context current. */
static ipcp_status_t lane_load(ipcp__backend_t *be, int device)
{
    ipcp__cuda_dev_t *d = &be->dev[device];
    CUmodule mod;
    CUfunction fn[2];
    if (d->lane_mod)
        return IPCP_OK;
    ipcp_status_t st = ipcp__cu_check(
        IPCP_CU(cuModuleLoadData)(&mod, ipcp__lane_fatbin), IPCP_LOG_ERROR,
        "cuModuleLoadData(small-message lane kernels, device %d; built for "
        "sm_80 and sm_90 with PTX for newer GPUs)",
        device);
    if (st != IPCP_OK)
        return st;
    /* Under CUDA's lazy loading (the default) a kernel is loaded at its
     * first launch, and loading synchronizes the context: a first launch
     * behind a user's stream that waits (or beside one of our kernels that
     * spins) would deadlock.  Asking for an attribute loads it now. */
    for (int i = 0; i < 2 && st == IPCP_OK; i++) {
        int max = 0;
        st = ipcp__cu_check(
            IPCP_CU(cuModuleGetFunction)(&fn[i], mod, lane_names[i]),
            IPCP_LOG_ERROR, "cuModuleGetFunction(%s)", lane_names[i]);
        if (st == IPCP_OK)
            st = ipcp__cu_check(
                IPCP_CU(cuFuncGetAttribute)(
                    &max, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, fn[i]),
                IPCP_LOG_ERROR, "cuFuncGetAttribute(%s)", lane_names[i]);
        if (st == IPCP_OK && max < LANE_THREADS)
            st = ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_CUDA, IPCP_ERR_CUDA,
                            "%s runs at most %d threads a block on device %d, "
                            "%d needed",
                            lane_names[i], max, device, LANE_THREADS);
    }
    if (st != IPCP_OK) {
        IPCP_CU(cuModuleUnload)(mod);
        return st;
    }
    int major = 0;
    IPCP_CU(cuDeviceGetAttribute)
    (&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, d->dev);
    d->lane_pdl = major >= 9;
    d->lane_fn[0] = fn[0];
    d->lane_fn[1] = fn[1];
    d->lane_mod = mod;
    return IPCP_OK;
}

/* Zeroed on a stream of our own and waited for: the peer may write into
 * the block as soon as it is exported, so nothing may clear it later, and
 * the legacy stream or a context-wide synchronize could wait behind a
 * user's stream that waits for this very lane. */
static ipcp_status_t lane_zero(int device, void *ptr, size_t len)
{
    CUstream s;
    ipcp_status_t st =
        ipcp__cu_check(IPCP_CU(cuStreamCreate)(&s, CU_STREAM_NON_BLOCKING),
                       IPCP_LOG_ERROR, "cuStreamCreate(device %d)", device);
    if (st != IPCP_OK)
        return st;
    st = ipcp__cu_check(
        IPCP_CU(cuMemsetD8Async)((CUdeviceptr)(uintptr_t)ptr, 0, len, s),
        IPCP_LOG_ERROR, "cuMemsetD8Async(%p, %zu bytes)", ptr, len);
    if (st == IPCP_OK)
        st = ipcp__cu_check(IPCP_CU(cuStreamSynchronize)(s), IPCP_LOG_ERROR,
                            "cuStreamSynchronize(device %d)", device);
    IPCP_CU(cuStreamDestroy)(s);
    return st;
}

ipcp_status_t ipcp__cuda_lane_prepare(ipcp__backend_t *be, int device,
                                      void *ptr, size_t len)
{
    ipcp__cuda_scope_t sc;
    ipcp_status_t st;
    if ((st = ipcp__cuda_enter(be, device, IPCP_LOG_ERROR, &sc)) != IPCP_OK)
        return st;
    pthread_mutex_lock(&be->lock);
    st = lane_load(be, device);
    pthread_mutex_unlock(&be->lock);
    if (st == IPCP_OK && ptr)
        st = lane_zero(device, ptr, len);
    ipcp__cuda_leave(&sc);
    return st;
}

/* Called for every small message, on the user's thread: no allocation,
 * and the context pushed only when another one is current. */
ipcp_status_t ipcp__cuda_lane_launch(ipcp__backend_t *be, int device,
                                     void *stream, int op,
                                     const ipcp__lane_kargs_t *a)
{
    ipcp__cuda_scope_t sc;
    ipcp_status_t st;
    if (device < 0 || device >= be->ndev || !be->dev[device].lane_fn[0])
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_CUDA, IPCP_ERR_STATE,
                          "small-message lane kernels not loaded on device %d",
                          device);
    CUfunction fn = be->dev[device].lane_fn[op == IPCP_LANE_RECV];
    if ((st = ipcp__cuda_enter(be, device, IPCP_LOG_ERROR, &sc)) != IPCP_OK)
        return st;
    ipcp__lane_kargs_t args = *a;
    void *params[] = {&args};
    if (__atomic_load_n(&be->dev[device].lane_pdl, __ATOMIC_RELAXED)) {
        CUlaunchAttribute attr;
        CUlaunchConfig lc;
        memset(&attr, 0, sizeof(attr));
        memset(&lc, 0, sizeof(lc));
        attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
        attr.value.programmaticStreamSerializationAllowed = 1;
        lc.gridDimX = lc.gridDimY = lc.gridDimZ = 1;
        lc.blockDimX = LANE_THREADS;
        lc.blockDimY = lc.blockDimZ = 1;
        lc.hStream = (CUstream)stream;
        lc.attrs = &attr;
        lc.numAttrs = 1;
        CUresult r = IPCP_CU(cuLaunchKernelEx)(&lc, fn, params, NULL);
        if (r != CUDA_ERROR_NOT_SUPPORTED && r != CUDA_ERROR_INVALID_VALUE) {
            st = ipcp__cu_check(r, IPCP_LOG_ERROR,
                                "cuLaunchKernelEx(%s, message %llu, device %d)",
                                lane_names[op == IPCP_LANE_RECV],
                                (unsigned long long)a->k, device);
            ipcp__cuda_leave(&sc);
            return st;
        }
        /* A launch refused for its attribute is not an error of the
         * stream: plain launches from now on. */
        IPCP_INFO(IPCP_SUB_CUDA,
                  "programmatic dependent launch refused on "
                  "device %d (CUresult %d); the lane launches plainly",
                  device, (int)r);
        __atomic_store_n(&be->dev[device].lane_pdl, 0, __ATOMIC_RELAXED);
    }
    st = ipcp__cu_check(
        IPCP_CU(cuLaunchKernel)(fn, 1, 1, 1, LANE_THREADS, 1, 1, 0,
                                (CUstream)stream, params, NULL),
        IPCP_LOG_ERROR, "cuLaunchKernel(%s, message %llu, device %d)",
        lane_names[op == IPCP_LANE_RECV], (unsigned long long)a->k, device);
    ipcp__cuda_leave(&sc);
    return st;
}
#endif /* IPCP_HAVE_LANE */

void ipcp__cuda_lane_unload(ipcp__backend_t *be)
{
    for (int d = 0; d < be->ndev; d++) {
        ipcp__cuda_scope_t sc;
        if (!be->dev[d].lane_mod ||
            ipcp__cuda_enter(be, d, IPCP_LOG_WARN, &sc) != IPCP_OK)
            continue;
        IPCP_CU(cuModuleUnload)(be->dev[d].lane_mod);
        ipcp__cuda_leave(&sc);
        be->dev[d].lane_mod = NULL;
        memset(be->dev[d].lane_fn, 0, sizeof(be->dev[d].lane_fn));
    }
}
