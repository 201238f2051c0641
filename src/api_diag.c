/* The diagnostics API (ipcpipe_diag.h): the CUDA backend's view of the
 * GPUs and the driver's entry points for the tools, the striping
 * calibration, and the settings' size syntax. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "ipcpipe_diag.h"

#include "common/config.h"
#include "common/log.h"
#include "common/pcitopo.h"
#include "common/status.h"
#include "engine/stripe.h"

#ifdef IPCP_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_driver.h"

_Static_assert(IPCP_DIAG_MAX_GPUS == IPCP_CU_MAX_DEVICES,
               "the diagnostics and the backend count GPUs alike");
_Static_assert(sizeof(((ipcp_diag_gpu_t *)0)->name) ==
                       sizeof(((ipcp__cu_dev_info_t *)0)->name) &&
                   sizeof(((ipcp_diag_gpu_t *)0)->pci_bus_id) ==
                       sizeof(((ipcp__cu_dev_info_t *)0)->pci_bus_id) &&
                   sizeof(((ipcp_diag_gpu_t *)0)->uuid) ==
                       sizeof(((ipcp__cu_dev_info_t *)0)->uuid),
               "a GPU's name, bus id and UUID are copied whole");
#endif

#ifndef IPCP_HAVE_CUDA
static ipcp_status_t diag_no_cuda(void)
{
    return ipcp__fail(IPCP_LOG_DEBUG, IPCP_SUB_API, IPCP_ERR_UNSUPPORTED,
                      "this ipcpipe was built without its CUDA backend");
}
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
        memcpy(y->uuid, x->uuid, sizeof(y->uuid));
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
    return diag_no_cuda();
#endif
}

void *ipcp_diag_cuda_proc(const char *name, int cuda_version)
{
    if (!name) {
        ipcp__fail(IPCP_LOG_DEBUG, IPCP_SUB_API, IPCP_ERR_INVALID,
                   "ipcp_diag_cuda_proc: name is NULL");
        return NULL;
    }
#ifdef IPCP_HAVE_CUDA
    void *fn = ipcp__cu_proc(name, cuda_version);
    if (!fn && ipcp__cu_load() == IPCP_OK) /* else its reason stands */
        ipcp__fail(IPCP_LOG_DEBUG, IPCP_SUB_API, IPCP_ERR_UNSUPPORTED,
                   "the GPU driver has no %.60s of CUDA %d.%d", name,
                   cuda_version / 1000, cuda_version % 1000 / 10);
    return fn;
#else
    diag_no_cuda();
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

/* ---- Striping ---------------------------------------------------------- */

/* The settings' part of out; IPCP_OK or the settings' error. */
static ipcp_status_t diag_stripe_settings(const ipcp__config_t **cfg,
                                          ipcp_diag_stripe_t *out)
{
    memset(out, 0, sizeof(*out));
    ipcp_status_t st = ipcp__config_get(cfg);
    if (st != IPCP_OK)
        return st;
    out->driven = ipcp__stripe_layout(*cfg) == IPCP_STRIPE_DRIVEN;
    out->adapt = (*cfg)->stripe_adapt;
    /* The path as the engine makes it (its buffer), then copied. */
    char path[IPCP_DIR_MAX];
    ipcp__stripe_cache_path(*cfg, path, sizeof(path));
    snprintf(out->file, sizeof(out->file), "%s", path);
    if ((*cfg)->stripe < 0) {
        out->state = IPCP_DIAG_STRIPE_OFF;
    } else if ((*cfg)->stripe > 0) {
        out->state = IPCP_DIAG_STRIPE_FIXED;
        out->fixed_share = (*cfg)->stripe;
    } else {
        out->state = IPCP_DIAG_STRIPE_UNMEASURED;
    }
    return IPCP_OK;
}

static void diag_stripe_entry(const ipcp__stripe_entry_t *e,
                              ipcp_diag_stripe_t *out)
{
    out->state = IPCP_DIAG_STRIPE_MEASURED;
    out->share = e->share;
    out->share_large = e->share_large;
    out->share_bidir = e->share_bidir;
    out->size = e->size;
    out->size_large = e->size_large;
    out->min_size = e->min_size;
    out->from_size = ipcp__stripe_engine_min(e->min_size, e->layout);
    out->direct_gbs = e->direct_gbs;
    out->staged_gbs = e->staged_gbs;
    out->striped_gbs = e->striped_gbs;
    out->measured = e->time;
}

ipcp_status_t ipcp_diag_stripe_lookup(const char *src_uuid,
                                      const char *dst_uuid, int driver_version,
                                      ipcp_diag_stripe_t *out)
{
    const ipcp__config_t *cfg;
    char host[IPCP_STRIPE_HOST_MAX];
    ipcp__stripe_entry_t key, e;
    if (!out)
        return ipcp__fail(IPCP_LOG_DEBUG, IPCP_SUB_API, IPCP_ERR_INVALID,
                          "ipcp_diag_stripe_lookup: out is NULL");
    ipcp_status_t st = diag_stripe_settings(&cfg, out);
    if (st != IPCP_OK || out->state != IPCP_DIAG_STRIPE_UNMEASURED ||
        !src_uuid || !dst_uuid)
        return st;
    memset(&key, 0, sizeof(key));
    snprintf(key.src, sizeof(key.src), "%s", src_uuid);
    snprintf(key.dst, sizeof(key.dst), "%s", dst_uuid);
    key.layout = ipcp__stripe_layout(cfg);
    key.driver = driver_version;
    ipcp__stripe_host_id(host, sizeof(host));
    switch (ipcp__stripe_cache_load(out->file, host, &key, &e, out->why,
                                    sizeof(out->why))) {
    case IPCP_STRIPE_HIT:
        diag_stripe_entry(&e, out);
        break;
    case IPCP_STRIPE_MISS:
        break; /* UNMEASURED, why says where it looked */
    default:
        out->state = IPCP_DIAG_STRIPE_IGNORED;
        break;
    }
    return IPCP_OK;
}

#ifdef IPCP_HAVE_CUDA
/* The backend ipcp_diag_stripe_tune measures with, open until
 * ipcp_diag_release. */
static pthread_mutex_t diag_lock = PTHREAD_MUTEX_INITIALIZER;
static ipcp__backend_t *diag_be;
#endif

#ifdef IPCP_HAVE_CUDA
/* diag_be's opening: diag_lock held; its first failure is kept. */
static ipcp_status_t diag_open_locked(const ipcp__config_t *cfg)
{
    static ipcp_status_t failed = IPCP_OK;
    static char why[IPCP_ERRMSG_MAX];
    if (diag_be)
        return IPCP_OK;
    if (failed != IPCP_OK)
        return ipcp__fail(IPCP_LOG_DEBUG, IPCP_SUB_API, failed, "%s", why);
    ipcp_status_t st = ipcp__cuda_backend_ops.open(cfg, &diag_be);
    if (st != IPCP_OK) {
        failed = st;
        snprintf(why, sizeof(why), "%s", ipcp_last_error());
        diag_be = NULL;
    }
    return st;
}
#endif

ipcp_status_t ipcp_diag_stripe_open(void)
{
    const ipcp__config_t *cfg;
    ipcp_status_t st = ipcp__config_get(&cfg);
    if (st != IPCP_OK)
        return st;
#ifdef IPCP_HAVE_CUDA
    pthread_mutex_lock(&diag_lock);
    st = diag_open_locked(cfg);
    pthread_mutex_unlock(&diag_lock);
    return st;
#else
    return diag_no_cuda();
#endif
}

ipcp_status_t ipcp_diag_stripe_tune(int src, int dst, ipcp_diag_stripe_t *out)
{
    const ipcp__config_t *cfg;
    if (!out)
        return ipcp__fail(IPCP_LOG_DEBUG, IPCP_SUB_API, IPCP_ERR_INVALID,
                          "ipcp_diag_stripe_tune: out is NULL");
    ipcp_status_t st = diag_stripe_settings(&cfg, out);
    if (st != IPCP_OK)
        return st;
#ifdef IPCP_HAVE_CUDA
    const ipcp__backend_ops_t *ops = &ipcp__cuda_backend_ops;
    ipcp__stripe_entry_t e;
    pthread_mutex_lock(&diag_lock);
    st = diag_open_locked(cfg);
    if (st == IPCP_OK && (src < 0 || dst < 0 || src >= diag_be->ndev ||
                          dst >= diag_be->ndev || src == dst))
        st = ipcp__fail(IPCP_LOG_DEBUG, IPCP_SUB_API, IPCP_ERR_UNSUPPORTED,
                        "no pair of GPUs %d -> %d (%d visible)", src, dst,
                        diag_be->ndev);
    else if (st == IPCP_OK && !diag_be->peer[src][dst])
        st = ipcp__fail(IPCP_LOG_DEBUG, IPCP_SUB_API, IPCP_ERR_UNSUPPORTED,
                        "GPU %d cannot reach GPU %d directly: nothing to "
                        "stripe with",
                        src, dst);
    else if (st == IPCP_OK)
        st =
            ipcp__stripe_tune(cfg, ops, diag_be, src, dst, IPCP_TUNE_FORCE, &e);
    pthread_mutex_unlock(&diag_lock);
    if (st == IPCP_OK)
        diag_stripe_entry(&e, out);
    return st;
#else
    (void)src;
    (void)dst;
    return diag_no_cuda();
#endif
}

void ipcp_diag_release(void)
{
#ifdef IPCP_HAVE_CUDA
    pthread_mutex_lock(&diag_lock);
    if (diag_be)
        ipcp__cuda_backend_ops.close(diag_be);
    diag_be = NULL;
    pthread_mutex_unlock(&diag_lock);
#endif
}

/* ---- PCI topology ------------------------------------------------------ */

ipcp_status_t ipcp_diag_pci(const char *bus_id, ipcp_diag_pci_t *out)
{
    if (!bus_id || !out)
        return ipcp__fail(IPCP_LOG_DEBUG, IPCP_SUB_API, IPCP_ERR_INVALID,
                          "ipcp_diag_pci: NULL argument");
    return ipcp__pci_read("/sys", bus_id, out);
}

ipcp_diag_link_t ipcp_diag_pci_link(const ipcp_diag_pci_t *a,
                                    const ipcp_diag_pci_t *b)
{
    if (!a || !b)
        return IPCP_DIAG_LINK_UNKNOWN;
    return ipcp__pci_link(a, b);
}

const char *ipcp_diag_link_name(ipcp_diag_link_t link)
{
    static const char *const names[] = {"self", "switch", "host-bridge",
                                        "node", "system", "unknown"};
    return (unsigned)link < sizeof(names) / sizeof(names[0]) ? names[link]
                                                             : "unknown";
}
