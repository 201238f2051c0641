/* The host backend: memory any process of the machine can map (memfd),
 * and queues that are worker threads.  This file holds the instance, the
 * pointer query and the function table. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/host/host.h"
#include "common/status.h"

static ipcp_status_t host_open(const ipcp__config_t *cfg, ipcp__backend_t **out)
{
    ipcp__backend_t *be = calloc(1, sizeof(*be));
    if (!be)
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_HOST, IPCP_ERR_NOMEM,
                          "cannot allocate the host backend");
    if (cfg)
        be->cfg = *cfg;
    long page = sysconf(_SC_PAGESIZE);
    be->page = page > 0 ? (size_t)page : 4096;
    pthread_mutex_init(&be->lock, NULL);
    ipcp__list_init(&be->allocs);
    be->next_id = 1;
    IPCP_DEBUG(IPCP_SUB_HOST, "host backend open, page size %zu", be->page);
    *out = be;
    return IPCP_OK;
}

static void host_close(ipcp__backend_t *be)
{
    if (!be)
        return;
    ipcp__host_mem_release_all(be);
    pthread_mutex_destroy(&be->lock);
    free(be);
}

/* The engine asks the device backends first, so every pointer that reaches
 * here is host memory; the registry only adds the allocation bounds, which
 * let the engine export a pointer into the middle of one. */
static int host_owns(ipcp__backend_t *be, const void *ptr,
                     ipcp__mem_attr_t *attr)
{
    uintptr_t p = (uintptr_t)ptr;
    ipcp__list_t *pos, *tmp;

    memset(attr, 0, sizeof(*attr));
    attr->type = IPCP_MEM_HOST;
    attr->device = -1;
    /* Plain memory of a process with no allocation of ours: no lock. */
    if (!atomic_load_explicit(&be->nallocs, memory_order_acquire))
        return 1;
    pthread_mutex_lock(&be->lock);
    ipcp__list_for_each_safe(pos, tmp, &be->allocs)
    {
        ipcp__host_alloc_t *a = ipcp__list_entry(pos, ipcp__host_alloc_t, link);
        uintptr_t base = (uintptr_t)a->ptr;
        if (p >= base && p - base < a->len) {
            attr->base = base;
            attr->size = a->len;
            attr->buffer_id = a->id;
            break;
        }
    }
    pthread_mutex_unlock(&be->lock);
    return 1;
}

/* Plain host memory is usable by worker threads as it is. */
static ipcp_status_t host_shm_register(ipcp__backend_t *be, void *ptr,
                                       size_t len, int device, void **handle)
{
    *handle = NULL;
    return IPCP_OK;
}

static void host_shm_unregister(ipcp__backend_t *be, void *handle)
{
}

const ipcp__backend_ops_t ipcp__host_backend_ops = {
    .name = "host",
    .type = IPCP_MEM_HOST,
    .open = host_open,
    .close = host_close,
    .owns = host_owns,
    .mem_alloc = ipcp__host_mem_alloc,
    .mem_free = ipcp__host_mem_free,
    .mem_export = ipcp__host_mem_export,
    .mem_import = ipcp__host_mem_import,
    .mem_unimport = ipcp__host_mem_unimport,
    .shm_register = host_shm_register,
    .shm_unregister = host_shm_unregister,
    .queue_create = ipcp__host_queue_create,
    .queue_destroy = ipcp__host_queue_destroy,
    .copy = ipcp__host_copy,
    .rcopy = ipcp__host_rcopy,
    .flag_write = ipcp__host_flag_write,
    .flag_wait = ipcp__host_flag_wait,
    .join = ipcp__host_join,
    .flag_write_wait = ipcp__host_flag_write_wait,
    .notify = ipcp__host_notify,
    .stamp = ipcp__host_stamp,
    .call = ipcp__host_call,
};
