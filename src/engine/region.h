/* Memory the engine knows: local regions (allocations, registrations)
 * and the public objects behind ipcp_mem_t and ipcp_rmem_t. */
#ifndef IPCP_ENGINE_REGION_H
#define IPCP_ENGINE_REGION_H

#include "engine/base.h"
#include "common/handle.h"

/* A local region: an ipcp_mem_alloc allocation or a registration. */
struct ipcp__region {
    ipcp__list_t link;
    uint64_t id;
    int is_alloc;
    int is_auto;  /* device memory the user allocated, exported by
                     the library when first received into */
    int internal; /* the library's own (the bounce path's rings): not
                     counted in nregions, no lane made for it */
    void *ptr;
    size_t len;
    ipcp__mem_attr_t attr;
    const ipcp__backend_ops_t *ops;
    ipcp__backend_t *be;
    void *handle; /* backend allocation (is_alloc) */
    int exportable;
    ipcp__export_t exp;     /* describes ptr..ptr+len (or the alloc) */
    int exp_fd;             /* owned, -1 if none */
    ipcp__region_t *parent; /* registration inside an allocation */
    size_t parent_off;
    unsigned char *shared_with; /* [size]: peers holding a mapping */
    int busy; /* owner-side operations on it in flight (under mem_lock) */
};

struct ipcp_mem {
    uint64_t magic;
    ipcp_comm_t *comm;
    ipcp__handle_t handle;
    ipcp__region_t region;
    /* Its address for ranks on other nodes (attached by the job's
     * transport, engine/remote.h), 0: they cannot reach it. */
    uint64_t wide_addr;
};

enum { IPCP_RMEM_MAPPED = 1, IPCP_RMEM_PVM, IPCP_RMEM_STAGED };

struct ipcp_rmem {
    uint64_t magic;
    ipcp_comm_t *comm;
    ipcp__handle_t handle;
    ipcp__list_t link; /* comm->rmems */
    int owner;         /* its number here; the job's rank where remote */
    int remote; /* on another node: puts and gets through the transport */
    uint64_t reg_id;
    size_t len;
    uint64_t addr; /* owner's address of the region */
    ipcp_mem_type_t type;
    int mode;
    /* MAPPED: the owner's export, mapped lazily for each local queue set
     * (index 0 host, 1 + d device d) on the progress thread, since device
     * memory must be mapped in the context of the device that copies. */
    ipcp__export_t exp;
    ipcp__fds_t fds; /* owned duplicates of those that came */
    size_t map_off;  /* of the region in the export */
    void *maps[IPCP_MAX_QSETS];
    void *handles[IPCP_MAX_QSETS];
    unsigned char map_failed[IPCP_MAX_QSETS];
    atomic_int valid;
    /* One-sided operations of this process on the region in flight (the
     * progress thread counts; ipcp_rmem_release reads), and whether the
     * owner waits for them to end (REG_GONE asked for an answer). */
    atomic_int busy;
    int ack_owed;
};

#endif
