/* The CUDA driver, loaded at run time.  Nothing links against libcuda: the
 * library is opened with dlopen on first use and every entry point is
 * fetched through cuGetProcAddress, so a binary built here starts on a
 * machine without a GPU driver and the CUDA backend then reports itself
 * unsupported.  Shared by the CUDA backend and its tests (the tools keep a
 * table of their own, tools/common/tool_cuda.h, through ipcpipe_diag.h).
 *
 * Each entry point is requested by its base name together with the CUDA
 * version of the ABI we call it with, and with the legacy default stream.
 * The pointer's type is that of the prototype cuda.h gives the name (cuda.h
 * maps some names to versioned symbols: cuMemcpyHtoD -> cuMemcpyHtoD_v2,
 * cuStreamWaitValue64 -> cuStreamWaitValue64_v2, which __typeof__ follows).
 * Asking for CUDA_VERSION instead would not always give that ABI: with the
 * 13.0 headers cuGetProcAddress("cuCtxSynchronize", 13000) returns the
 * variant that takes a context, while cuda.h's cuCtxSynchronize takes none.
 * cuda_driver.c checks every pairing at compile time against the PFN_
 * typedefs of cudaTypedefs.h, and the versions are old enough (11.7 at
 * most) that any driver with cuGetProcAddress_v2 (12.0) has them.
 * Per-thread default stream variants (_ptsz) are never used. */
#ifndef IPCP_BACKEND_CUDA_DRIVER_H
#define IPCP_BACKEND_CUDA_DRIVER_H

#if defined(CUDA_API_PER_THREAD_DEFAULT_STREAM)
#error "the CUDA backend uses the legacy default stream ABI"
#endif

#include <cuda.h>
#include <stddef.h>

#include "common/status.h"

/* Every driver function the library and its tests call:
 * X(base name, CUDA version of the ABI used).  The version is the newest
 * PFN_<name>_v<version> in cudaTypedefs.h whose type matches cuda.h's
 * prototype; a new entry must name one (the build checks it). */
#define IPCP_CU_FUNCS(X)                                                       \
    X(cuGetErrorName, 6000)                                                    \
    X(cuGetErrorString, 6000)                                                  \
    X(cuInit, 2000)                                                            \
    X(cuDriverGetVersion, 2020)                                                \
    X(cuDeviceGet, 2000)                                                       \
    X(cuDeviceGetCount, 2000)                                                  \
    X(cuDeviceGetName, 2000)                                                   \
    X(cuDeviceGetAttribute, 2000)                                              \
    X(cuDeviceGetPCIBusId, 4010)                                               \
    X(cuDeviceGetUuid, 11040)                                                  \
    X(cuDeviceCanAccessPeer, 4000)                                             \
    X(cuDevicePrimaryCtxRetain, 7000)                                          \
    X(cuDevicePrimaryCtxRelease, 11000)                                        \
    X(cuDevicePrimaryCtxGetState, 7000)                                        \
    X(cuCtxGetCurrent, 4000)                                                   \
    X(cuCtxSetCurrent, 4000)                                                   \
    X(cuCtxPushCurrent, 4000)                                                  \
    X(cuCtxPopCurrent, 4000)                                                   \
    X(cuCtxSynchronize, 2000)                                                  \
    X(cuCtxEnablePeerAccess, 4000)                                             \
    X(cuPointerGetAttributes, 7000)                                            \
    X(cuMemGetAllocationGranularity, 10020)                                    \
    X(cuMemCreate, 10020)                                                      \
    X(cuMemRelease, 10020)                                                     \
    X(cuMemAddressReserve, 10020)                                              \
    X(cuMemAddressFree, 10020)                                                 \
    X(cuMemMap, 10020)                                                         \
    X(cuMemUnmap, 10020)                                                       \
    X(cuMemSetAccess, 10020)                                                   \
    X(cuMemExportToShareableHandle, 10020)                                     \
    X(cuMemImportFromShareableHandle, 10020)                                   \
    X(cuMemGetAddressRange, 3020)                                              \
    X(cuMemRetainAllocationHandle, 11000)                                      \
    X(cuMemGetAllocationPropertiesFromHandle, 10020)                           \
    X(cuMemGetAccess, 10020)                                                   \
    X(cuIpcGetMemHandle, 4010)                                                 \
    X(cuIpcOpenMemHandle, 11000)                                               \
    X(cuIpcCloseMemHandle, 4010)                                               \
    X(cuMemHostRegister, 6050)                                                 \
    X(cuMemHostUnregister, 4000)                                               \
    X(cuMemHostGetDevicePointer, 3020)                                         \
    X(cuStreamCreate, 2000)                                                    \
    X(cuStreamDestroy, 4000)                                                   \
    X(cuStreamQuery, 2000)                                                     \
    X(cuStreamIsCapturing, 10000)                                              \
    X(cuStreamBeginCapture, 10010)                                             \
    X(cuStreamEndCapture, 10000)                                               \
    X(cuGraphDestroy, 10000)                                                   \
    X(cuStreamSynchronize, 2000)                                               \
    X(cuStreamAddCallback, 5000)                                               \
    X(cuEventCreate, 2000)                                                     \
    X(cuEventRecord, 2000)                                                     \
    X(cuEventQuery, 2000)                                                      \
    X(cuEventDestroy, 4000)                                                    \
    X(cuStreamWaitEvent, 3020)                                                 \
    X(cuEventSynchronize, 2000)                                                \
    X(cuEventElapsedTime, 2000)                                                \
    X(cuMemcpyAsync, 4000)                                                     \
    X(cuStreamWriteValue64, 11070)                                             \
    X(cuStreamWaitValue64, 11070)                                              \
    X(cuStreamBatchMemOp, 11070)                                               \
    X(cuMemAlloc, 3020)                                                        \
    X(cuMemAllocAsync, 11020)                                                  \
    X(cuMemFreeAsync, 11020)                                                   \
    X(cuMemAllocFromPoolAsync, 11020)                                          \
    X(cuMemPoolCreate, 11020)                                                  \
    X(cuMemPoolDestroy, 11020)                                                 \
    X(cuMemPoolSetAccess, 11020)                                               \
    X(cuMemPoolGetAccess, 11020)                                               \
    X(cuMemPoolExportToShareableHandle, 11020)                                 \
    X(cuMemPoolImportFromShareableHandle, 11020)                               \
    X(cuMemPoolExportPointer, 11020)                                           \
    X(cuMemPoolImportPointer, 11020)                                           \
    X(cuMemAllocManaged, 6000)                                                 \
    X(cuMemFree, 3020)                                                         \
    X(cuMemGetInfo, 3020)                                                      \
    X(cuMemcpyHtoD, 3020)                                                      \
    X(cuMemcpyDtoH, 3020)                                                      \
    X(cuMemsetD8, 3020)                                                        \
    X(cuMemcpyHtoDAsync, 3020)                                                 \
    X(cuMemcpyDtoHAsync, 3020)                                                 \
    X(cuMemsetD8Async, 3020)                                                   \
    X(cuModuleLoadData, 2000)                                                  \
    X(cuModuleUnload, 2000)                                                    \
    X(cuModuleGetFunction, 2000)                                               \
    X(cuFuncGetAttribute, 2020)                                                \
    X(cuLaunchKernel, 4000)                                                    \
    X(cuLaunchKernelEx, 11060)

/* The table.  A field is named pfn_ plus the base name: token pasting does
 * not expand cuda.h's version macros, while __typeof__(&name) does. */
typedef struct ipcp__cu_table {
#define IPCP_CU_FIELD_(name, abi) __typeof__(&name) pfn_##name;
    IPCP_CU_FUNCS(IPCP_CU_FIELD_)
#undef IPCP_CU_FIELD_
} ipcp__cu_table_t;

/* Filled once by ipcp__cu_load(); read-only afterwards. */
extern ipcp__cu_table_t ipcp__cu;

/* Any entry point of the loaded driver by base name and ABI version, as
 * cuGetProcAddress gives it (legacy default stream); NULL when there is no
 * driver or no such entry (ipcp_diag_cuda_proc). */
void *ipcp__cu_proc(const char *name, int abi);

/* Calls a driver function by its base name: IPCP_CU(cuInit)(0). */
#define IPCP_CU(name) (ipcp__cu.pfn_##name)

/* Opens libcuda.so.1 and fills the table (once per process; later calls
 * return the first outcome).  IPCP_ERR_UNSUPPORTED, logged at debug level
 * only, when there is no driver, it is older than CUDA 12.0, or it lacks an
 * entry point; the reason is the last error ("no GPU driver: libcuda.so.1
 * not found ..." when it is absent).  Does not call cuInit. */
ipcp_status_t ipcp__cu_load(void);
/* Whether libcuda is loaded in this process (by anyone), without loading
 * it: about 20 ns while no library was loaded or unloaded since the last
 * call (the ops' present). */
int ipcp__cu_present(void);

/* "CUDA_ERROR_X: description" for r, in buf. */
const char *ipcp__cu_strerror(CUresult r, char *buf, size_t len);

/* The name of r without calling the driver ("CUDA_ERROR_ILLEGAL_ADDRESS"),
 * for stream callbacks, which must not call CUDA; NULL when unknown. */
const char *ipcp__cu_errname_nocall(CUresult r);

/* The one wrapper for CUDA results: IPCP_OK for CUDA_SUCCESS, otherwise
 * fails with st (through ipcp__fail, logged at `level`) and the message
 * "<what>: CUDA_ERROR_X: description", what being formatted from fmt (by
 * convention the call and its arguments: "cuMemCreate(%zu bytes, device
 * %d)").  Probes pass a quiet level. */
ipcp_status_t ipcp__cu_result(CUresult r, int level, ipcp_status_t st,
                              const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* The usual case: a failed call is IPCP_ERR_CUDA. */
#define ipcp__cu_check(r, level, ...)                                          \
    ipcp__cu_result((r), (level), IPCP_ERR_CUDA, __VA_ARGS__)

/* ---- What the machine offers (tests, ipcpipe-info, the doctor) ----------- */

#define IPCP_CU_MAX_DEVICES 32

typedef struct ipcp__cu_dev_info {
    char name[96];
    char pci_bus_id[32]; /* "0000:19:00.0" */
    char uuid[48];       /* "GPU-xxxxxxxx-..."; "" when unreadable */
    int uva;             /* unified addressing */
    int vmm;             /* cuMemCreate and friends */
    int vmm_fd;          /* VMM export as a POSIX file descriptor */
    int memops64;        /* 64-bit stream memory operations */
    int host_va;         /* registered host memory at the host's address */
    int mps;             /* ipcp__cu_device_mps() */
} ipcp__cu_dev_info_t;

typedef struct ipcp__cu_probe {
    int driver_version; /* 13000 for CUDA 13.0 */
    int ndev;           /* visible devices (at most IPCP_CU_MAX_DEVICES) */
    ipcp__cu_dev_info_t dev[IPCP_CU_MAX_DEVICES];
    /* peer[a][b]: device a can access device b's memory directly
     * (cuDeviceCanAccessPeer); 1 on the diagonal. */
    unsigned char peer[IPCP_CU_MAX_DEVICES][IPCP_CU_MAX_DEVICES];
} ipcp__cu_probe_t;

/* Whether contexts made on dev in this process are clients of an MPS
 * server (the multi-process service, which runs the work of several
 * processes on one GPU at once instead of in turns): 1 yes, 0 no, -1 when
 * the driver does not say (drivers older than the attribute).  Needs
 * cuInit, not a context. */
int ipcp__cu_device_mps(CUdevice dev);

/* dev's UUID as the driver names it ("GPU-xxxxxxxx-xxxx-..."): 0, or -1
 * when the driver cannot say. */
int ipcp__cu_uuid(CUdevice dev, char *buf, size_t len);

/* Loads the driver, calls cuInit and describes the devices, without
 * creating a context.  IPCP_ERR_UNSUPPORTED (quietly, reason as last
 * error) when there is no driver or no device; then p->ndev is 0 and
 * p->driver_version is set when the driver could say. */
ipcp_status_t ipcp__cu_probe(ipcp__cu_probe_t *p);

#endif
