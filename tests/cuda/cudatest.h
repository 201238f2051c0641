/* Helpers shared by the CUDA tests: checked driver calls, options, the
 * machine check done before any rank starts, and launching two ranks one
 * of which is killed on purpose. */
#ifndef IPCP_CUDATEST_H
#define IPCP_CUDATEST_H

#include <signal.h>
#include <sys/wait.h>

#include "backend/cuda/cuda_backend.h"
#include "testutil.h"

/* A driver call that must succeed; prints the driver's error name. */
#define CU_OK(call)                                                            \
    do {                                                                       \
        CUresult cu_r_ = (call);                                               \
        if (cu_r_ != CUDA_SUCCESS) {                                           \
            char cu_b_[200];                                                   \
            T_FAIL("%s: %s", #call,                                            \
                   ipcp__cu_strerror(cu_r_, cu_b_, sizeof cu_b_));             \
        }                                                                      \
    } while (0)

/* Loads the driver and makes device's primary context current on this
 * thread (the test's own driver calls need one); returns it retained. */
static inline CUcontext ct_use_device(int device)
{
    CUdevice dev;
    CUcontext ctx;
    T_OK(ipcp__cu_load());
    CU_OK(IPCP_CU(cuInit)(0));
    CU_OK(IPCP_CU(cuDeviceGet)(&dev, device));
    CU_OK(IPCP_CU(cuDevicePrimaryCtxRetain)(&ctx, dev));
    CU_OK(IPCP_CU(cuCtxSetCurrent)(ctx));
    return ctx;
}

/* Writes n bytes of host memory h to device memory p and waits until they
 * have landed: a pageable HtoD may return before its DMA does, and the
 * library's streams (or a queue on another device) do not wait for the
 * legacy stream that carries it. */
static inline void ct_htod(CUdeviceptr p, const void *h, size_t n)
{
    CU_OK(IPCP_CU(cuMemcpyHtoD)(p, h, n));
    CU_OK(IPCP_CU(cuCtxSynchronize)());
}

/* Sets n bytes of device memory p to v and waits until that has landed: a
 * cuMemsetD8 on device memory may return before it has (it runs on the
 * legacy stream), and a peer may write the same bytes right after. */
static inline void ct_memset(CUdeviceptr p, unsigned char v, size_t n)
{
    CU_OK(IPCP_CU(cuMemsetD8)(p, v, n));
    CU_OK(IPCP_CU(cuCtxSynchronize)());
}

/* The properties of a pinned VMM allocation on device that may be
 * exported as handles (0: none), and its granule in *gran. */
static inline void ct_vmm_prop(CUmemAllocationProp *prop, int device,
                               unsigned handles, size_t *gran)
{
    memset(prop, 0, sizeof(*prop));
    prop->type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop->location.id = device;
    prop->requestedHandleTypes = (CUmemAllocationHandleType)handles;
    *gran = 0;
    CU_OK(IPCP_CU(cuMemGetAllocationGranularity)(
        gran, prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
}

/* The value after `key` on the command line, or dflt. */
static inline const char *ct_opt(int argc, char **argv, const char *key,
                                 const char *dflt)
{
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], key) == 0)
            return argv[i + 1];
    return dflt;
}

/* In the launching process, so that both ranks agree (a rank that exits
 * 77 alone would be taken for a failure): 77 when the CUDA backend cannot
 * open here or fewer than min_devices are visible, else 0. */
static inline int ct_check_machine(int min_devices)
{
    ipcp__backend_t *be = NULL;
    ipcp_status_t st = ipcp__cuda_backend_ops.open(NULL, &be);
    if (st == IPCP_ERR_UNSUPPORTED) {
        printf("SKIP: CUDA backend unavailable: %s\n", ipcp_last_error());
        return T_SKIP;
    }
    T_OK(st);
    int ndev = be->ndev;
    ipcp__cuda_backend_ops.close(be);
    if (ndev < min_devices) {
        printf("SKIP: needs %d CUDA devices, %d visible\n", min_devices, ndev);
        return T_SKIP;
    }
    return 0;
}

/* The path a transfer of size bytes the receiver sends direct reports:
 * striped when IPCPIPE_STRIPE is a fixed share that leaves bytes for both
 * parts and the ranks use two GPUs (the stripe variants of the tests). */
static inline ipcp_path_t ct_direct_path(size_t size, int two_gpus)
{
    const char *s = getenv("IPCPIPE_STRIPE");
    double share = s ? atof(s) : 0;
    size_t staged = (size_t)((double)size * share);
    return two_gpus && share > 0 && staged > 0 && staged < size
               ? IPCP_PATH_STRIPED
               : IPCP_PATH_DIRECT;
}

#endif
