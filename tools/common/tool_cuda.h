/* The tools' own table of CUDA driver entry points, fetched from the
 * driver the library loaded (ipcp_diag_cuda_proc): nothing links libcuda,
 * and a tool built here starts where there is no driver.  Only with the
 * CUDA headers at build time (IPCP_HAVE_CUDA). */
#ifndef IPCP_TOOLS_TOOL_CUDA_H
#define IPCP_TOOLS_TOOL_CUDA_H

#ifdef IPCP_HAVE_CUDA

#include <cuda.h>
#include <stddef.h>

/* X(base name, CUDA version of the ABI used, an older one to fall back to
 * or 0): the newest PFN_ typedef of cudaTypedefs.h whose type is cuda.h's
 * prototype (checked at build time).  cuda.h maps cuEventElapsedTime to
 * cuEventElapsedTime_v2 (CUDA 12.8); a 12.0-12.7 driver lacks it, and
 * there the original (same prototype) is taken instead. */
#define TOOL_CU_FUNCS(X)                                                       \
    X(cuGetErrorName, 6000, 0)                                                 \
    X(cuGetErrorString, 6000, 0)                                               \
    X(cuDeviceGet, 2000, 0)                                                    \
    X(cuDeviceGetAttribute, 2000, 0)                                           \
    X(cuDevicePrimaryCtxRetain, 7000, 0)                                       \
    X(cuDevicePrimaryCtxRelease, 11000, 0)                                     \
    X(cuCtxGetCurrent, 4000, 0)                                                \
    X(cuCtxSetCurrent, 4000, 0)                                                \
    X(cuCtxSynchronize, 2000, 0)                                               \
    X(cuCtxEnablePeerAccess, 4000, 0)                                          \
    X(cuStreamCreate, 2000, 0)                                                 \
    X(cuStreamDestroy, 4000, 0)                                                \
    X(cuStreamQuery, 2000, 0)                                                  \
    X(cuStreamSynchronize, 2000, 0)                                            \
    X(cuStreamWaitEvent, 3020, 0)                                              \
    X(cuStreamWaitValue64, 11070, 0)                                           \
    X(cuEventCreate, 2000, 0)                                                  \
    X(cuEventRecord, 2000, 0)                                                  \
    X(cuEventSynchronize, 2000, 0)                                             \
    X(cuEventElapsedTime, 12080, 2000)                                         \
    X(cuEventDestroy, 4000, 0)                                                 \
    X(cuMemAlloc, 3020, 0)                                                     \
    X(cuMemFree, 3020, 0)                                                      \
    X(cuMemHostAlloc, 2020, 0)                                                 \
    X(cuMemFreeHost, 2000, 0)                                                  \
    X(cuMemHostGetDevicePointer, 3020, 0)                                      \
    X(cuMemsetD8, 3020, 0)                                                     \
    X(cuMemcpyHtoD, 3020, 0)                                                   \
    X(cuMemcpyDtoH, 3020, 0)                                                   \
    X(cuMemcpyAsync, 4000, 0)                                                  \
    X(cuMemcpyHtoDAsync, 3020, 0)                                              \
    X(cuMemcpyDtoHAsync, 3020, 0)                                              \
    X(cuIpcGetMemHandle, 4010, 0)                                              \
    X(cuIpcOpenMemHandle, 11000, 0)                                            \
    X(cuIpcCloseMemHandle, 4010, 0)                                            \
    X(cuMemGetAllocationGranularity, 10020, 0)                                 \
    X(cuMemCreate, 10020, 0)                                                   \
    X(cuMemRelease, 10020, 0)                                                  \
    X(cuMemAddressReserve, 10020, 0)                                           \
    X(cuMemAddressFree, 10020, 0)                                              \
    X(cuMemMap, 10020, 0)                                                      \
    X(cuMemUnmap, 10020, 0)                                                    \
    X(cuMemSetAccess, 10020, 0)                                                \
    X(cuMemAllocAsync, 11020, 0)                                               \
    X(cuMemFreeAsync, 11020, 0)                                                \
    X(cuMemAllocFromPoolAsync, 11020, 0)                                       \
    X(cuMemPoolCreate, 11020, 0)                                               \
    X(cuMemPoolDestroy, 11020, 0)

typedef struct tool_cu_table {
#define TOOL_CU_FIELD_(name, abi, old) __typeof__(&name) pfn_##name;
    TOOL_CU_FUNCS(TOOL_CU_FIELD_)
#undef TOOL_CU_FIELD_
} tool_cu_table_t;

extern tool_cu_table_t tool_cu;

/* Calls a driver function by its base name: TOOL_CU(cuMemAlloc)(...). */
#define TOOL_CU(name) (tool_cu.pfn_##name)

/* Fills the table once (later calls return the first outcome): 0, or -1
 * with the reason in err (no driver, or an entry point it lacks). */
int tool_cu_load(char *err, size_t elen);

/* "CUDA_ERROR_X: description" of r into buf. */
const char *tool_cu_strerror(CUresult r, char *buf, size_t len);

/* Makes a driver call; a failure goes to die_fn (printf-like, does not
 * return) as the call's text and the driver's reason. */
#define TOOL_CU_OR(die_fn, call)                                               \
    do {                                                                       \
        CUresult r_ = (call);                                                  \
        if (r_ != CUDA_SUCCESS) {                                              \
            char b_[160];                                                      \
            die_fn("%s: %s", #call, tool_cu_strerror(r_, b_, sizeof(b_)));     \
        }                                                                      \
    } while (0)

#endif

#endif
