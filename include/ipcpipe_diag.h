/* ipcpipe's diagnostics: what its tools (ipcpipe-info, ipcpipe-bench) read
 * of the library beyond the API of ipcpipe.h.  The GPUs as the CUDA backend
 * sees them, the driver's entry points from the libcuda the library loaded
 * (so that a tool needs no driver at build or link time), and sizes as the
 * IPCPIPE_* settings take them.  Applications need only ipcpipe.h. */
#ifndef IPCPIPE_DIAG_H
#define IPCPIPE_DIAG_H

#include <stddef.h>

#include "ipcpipe.h"

#ifdef __cplusplus
extern "C" {
#endif

#define IPCP_DIAG_MAX_GPUS 32

/* One GPU as the CUDA backend sees it. */
typedef struct ipcp_diag_gpu {
    char name[96];
    char pci_bus_id[32]; /* "0000:19:00.0" */
    int uva;             /* unified addressing */
    int vmm;             /* virtual memory management (cuMemCreate) */
    int vmm_fd;          /* VMM memory exported as a file descriptor */
    int memops64;        /* 64-bit stream memory operations */
    int host_va;         /* registered host memory at the host's address */
    int mps;             /* its contexts are MPS clients: 1, 0, -1 unknown */
} ipcp_diag_gpu_t;

typedef struct ipcp_diag_gpus {
    int driver_version; /* 13000 for CUDA 13.0; 0 when no driver said */
    int ndev;           /* visible GPUs, at most IPCP_DIAG_MAX_GPUS */
    ipcp_diag_gpu_t dev[IPCP_DIAG_MAX_GPUS];
    /* peer[a][b]: GPU a can reach GPU b's memory directly; 1 on the
     * diagonal. */
    unsigned char peer[IPCP_DIAG_MAX_GPUS][IPCP_DIAG_MAX_GPUS];
} ipcp_diag_gpus_t;

/* Loads the driver, initialises it and describes the visible GPUs without
 * creating a context.  IPCP_ERR_UNSUPPORTED, the reason in
 * ipcp_last_error(), when there is no driver, no GPU, or the library was
 * built without its CUDA backend; out->ndev is then 0. */
IPCP_API ipcp_status_t ipcp_diag_gpus(ipcp_diag_gpus_t *out);

/* The driver's entry point name (a base name, as cuGetProcAddress takes
 * it: "cuMemAlloc") with the ABI of CUDA version cuda_version, on the
 * legacy default stream; NULL when there is no driver or no such entry. */
IPCP_API void *ipcp_diag_cuda_proc(const char *name, int cuda_version);

/* A size as the IPCPIPE_* settings take it ("4096", "64K", "1M", "2G"):
 * IPCP_OK, or IPCP_ERR_INVALID with the reason in ipcp_last_error(). */
IPCP_API ipcp_status_t ipcp_diag_parse_size(const char *text, size_t *out);

#ifdef __cplusplus
}
#endif

#endif
