/* The diagnostics API (ipcpipe_diag.h): the CUDA backend's view of the
 * GPUs and the driver's entry points for the tools, and the settings'
 * size syntax. */
#include <string.h>

#include "ipcpipe_diag.h"

#include "common/config.h"
#include "common/log.h"
#include "common/status.h"

#ifdef IPCP_HAVE_CUDA
#include "backend/cuda/cuda_driver.h"

_Static_assert(IPCP_DIAG_MAX_GPUS == IPCP_CU_MAX_DEVICES,
               "the diagnostics and the backend count GPUs alike");
#endif

ipcp_status_t ipcp_diag_gpus(ipcp_diag_gpus_t *out)
{
    if (!out)
        return ipcp__fail(IPCP_LOG_DEBUG, IPCP_SUB_API, IPCP_ERR_INVALID,
                          "ipcp_diag_gpus: out is NULL");
    memset(out, 0, sizeof(*out));
#ifdef IPCP_HAVE_CUDA
    ipcp__cu_probe_t p; /* about 6 KiB */
    ipcp_status_t st = ipcp__cu_probe(&p);
    out->driver_version = p.driver_version;
    if (st != IPCP_OK)
        return st;
    out->ndev = p.ndev;
    for (int d = 0; d < p.ndev; d++) {
        const ipcp__cu_dev_info_t *x = &p.dev[d];
        ipcp_diag_gpu_t *y = &out->dev[d];
        memcpy(y->name, x->name, sizeof(y->name));
        memcpy(y->pci_bus_id, x->pci_bus_id, sizeof(y->pci_bus_id));
        y->uva = x->uva;
        y->vmm = x->vmm;
        y->vmm_fd = x->vmm_fd;
        y->memops64 = x->memops64;
        y->host_va = x->host_va;
        y->mps = x->mps;
        for (int e = 0; e < p.ndev; e++)
            out->peer[d][e] = p.peer[d][e];
    }
    return IPCP_OK;
#else
    return ipcp__fail(IPCP_LOG_DEBUG, IPCP_SUB_API, IPCP_ERR_UNSUPPORTED,
                      "this ipcpipe was built without its CUDA backend");
#endif
}

void *ipcp_diag_cuda_proc(const char *name, int cuda_version)
{
#ifdef IPCP_HAVE_CUDA
    void *fn = name ? ipcp__cu_proc(name, cuda_version) : NULL;
    if (!fn && ipcp__cu_load() == IPCP_OK) /* else its reason stands */
        ipcp__fail(IPCP_LOG_DEBUG, IPCP_SUB_API, IPCP_ERR_UNSUPPORTED,
                   "the GPU driver has no %.60s of CUDA %d.%d",
                   name ? name : "(null)", cuda_version / 1000,
                   cuda_version % 1000 / 10);
    return fn;
#else
    ipcp__fail(IPCP_LOG_DEBUG, IPCP_SUB_API, IPCP_ERR_UNSUPPORTED,
               "this ipcpipe was built without its CUDA backend");
    (void)name;
    (void)cuda_version;
    return NULL;
#endif
}

ipcp_status_t ipcp_diag_parse_size(const char *text, size_t *out)
{
    if (!text || !out)
        return ipcp__fail(IPCP_LOG_DEBUG, IPCP_SUB_API, IPCP_ERR_INVALID,
                          "ipcp_diag_parse_size: NULL argument");
    if (ipcp__parse_size(text, out) < 0)
        return ipcp__fail(IPCP_LOG_DEBUG, IPCP_SUB_API, IPCP_ERR_INVALID,
                          "\"%.40s\" is no size (a number, with K, M or G)",
                          text);
    return IPCP_OK;
}
