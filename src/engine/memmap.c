/* Importing a peer's region (MAP_REQ / MAP_REP): the owner's answer and
 * the mapping on our side, per queue set. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/time.h"
#include "engine/engine.h"
#include "engine/mem.h"

/* ---- Import (MAP_REQ / MAP_REP) ------------------------------------------ */

void ipcp__mem_import_cmd(ipcp_comm_t *comm, ipcp_request_t *req)
{
    ipcp__peer_t *peer = &comm->peers[req->peer];
    ipcp__msg_map_req_t m;
    if (ipcp__peer_closed(peer) || peer->bye) {
        ipcp__req_complete(req, IPCP_ERR_PEER_LOST, "the owner is gone");
        return;
    }
    memset(&m, 0, sizeof(m));
    m.hdr.type = IPCP_MSG_MAP_REQ;
    m.id = req->id = ++peer->next_id;
    m.reg_id = req->rmem->reg_id;
    ipcp_status_t st = ipcp__peer_post(comm, peer, &m, sizeof(m), NULL, 0);
    if (st != IPCP_OK) {
        ipcp__req_complete(req, st, ipcp__last_error());
        return;
    }
    ipcp__list_push_back(&peer->maps, &req->link);
}

void ipcp__mem_on_map_req(ipcp_comm_t *comm, ipcp__peer_t *peer,
                          const ipcp__msg_map_req_t *m)
{
    ipcp__msg_map_rep_t rep;
    int fds[IPCP_EXPORT_MAX_FDS], nfds = 0;
    ipcp__fault_point(IPCP_FAULT_MAP_REQUESTED);
    memset(&rep, 0, sizeof(rep));
    rep.hdr.type = IPCP_MSG_MAP_REP;
    rep.id = m->id;
    rep.reg_id = m->reg_id;
    ipcp__lock(&comm->mem_lock, IPCP_LOCK_MEM);
    ipcp__region_t *r = ipcp__region_find_id(comm, m->reg_id);
    if (!r || r->is_alloc) {
        rep.status = IPCP_ERR_NOT_REGISTERED;
        snprintf(rep.errmsg, sizeof(rep.errmsg),
                 "region %llu is not registered on rank %d (deregistered?)",
                 (unsigned long long)m->reg_id, comm->rank);
    } else {
        rep.status = IPCP_OK;
        rep.len = r->len;
        rep.addr = (uint64_t)(uintptr_t)r->ptr;
        rep.mem_type = (int32_t)r->attr.type;
        /* Without its descriptors it goes through the owner. */
        if (r->exportable &&
            (nfds = ipcp__region_fds(r, fds, IPCP_EXPORT_MAX_FDS)) >= 0) {
            rep.hdr.flags |= IPCP_MAP_HAS_EXP;
            rep.exp = r->exp;
            rep.offset = r->parent_off;
            if (nfds > 0)
                rep.hdr.flags |= IPCP_MAP_FD;
        }
        nfds = ipcp__max(nfds, 0);
        r->shared_with[peer->rank] = 1;
    }
    ipcp__unlock(&comm->mem_lock, IPCP_LOCK_MEM);
    ipcp__peer_post(comm, peer, &rep, sizeof(rep), fds, nfds);
}

int ipcp__pvm_allowed(ipcp_comm_t *comm, ipcp__peer_t *peer)
{
    uint64_t word = 0;
    if (comm->cfg->pvm == IPCP_PVM_OFF)
        return 0;
    if (peer->pvm_to >= 0)
        return peer->pvm_to;
    struct iovec local = {&word, sizeof(word)};
    struct iovec remote = {(void *)(uintptr_t)peer->probe_addr, sizeof(word)};
    ssize_t n = process_vm_readv(peer->pid, &local, 1, &remote, 1, 0);
    peer->pvm_to = n == (ssize_t)sizeof(word) && word == IPCP_BOOT_MAGIC;
    IPCP_INFO(IPCP_SUB_ENGINE, "process_vm_readv of rank %d (pid %d): %s",
              peer->rank, (int)peer->pid,
              peer->pvm_to ? "permitted"
              : n < 0      ? strerror(errno)
                           : "mismatch");
    return peer->pvm_to;
}

static void ipcp__rmem_map(ipcp_comm_t *comm, ipcp__peer_t *peer,
                           ipcp_rmem_t *rm, const ipcp__msg_map_rep_t *m,
                           const int *fds, int nfds)
{
    ipcp__mem_attr_t host = {.type = IPCP_MEM_HOST, .device = -1};
    ipcp__fds_close(&rm->fds);
    rm->mode = IPCP_RMEM_STAGED;
    if ((m->hdr.flags & IPCP_MAP_HAS_EXP) && m->offset <= m->exp.size &&
        m->len <= m->exp.size - m->offset) {
        rm->exp = m->exp;
        rm->map_off = m->offset;
        /* Without duplicates its mapping fails, and says why. */
        (void)ipcp__fds_dup(&rm->fds, fds, nfds);
        rm->mode = IPCP_RMEM_MAPPED;
        /* Host regions are mapped now, so that a bad export shows at once;
         * device regions wait for the device that will copy. */
        if (rm->type == IPCP_MEM_HOST && !ipcp__rmem_mapping(comm, rm, &host))
            rm->mode = IPCP_RMEM_STAGED;
    }
    if (rm->mode == IPCP_RMEM_STAGED && rm->type == IPCP_MEM_HOST &&
        ipcp__pvm_allowed(comm, peer))
        rm->mode = IPCP_RMEM_PVM;
}

void *ipcp__rmem_mapping(ipcp_comm_t *comm, ipcp_rmem_t *rm,
                         const ipcp__mem_attr_t *attr)
{
    int i = ipcp__qset_index(attr);
    const ipcp__backend_ops_t *ops = i ? comm->dev_ops : comm->host_ops;
    ipcp__backend_t *be = i ? ipcp__dev(comm) : comm->host;
    void *base;
    if (rm->mode != IPCP_RMEM_MAPPED || attr->type != rm->type)
        return NULL;
    if (rm->maps[i] || rm->map_failed[i])
        return rm->maps[i];
    if (!be || ops->mem_import(be, &rm->exp, rm->fds.fd, rm->fds.n,
                               i ? attr->device : -1, &base,
                               &rm->handles[i]) != IPCP_OK) {
        rm->map_failed[i] = 1;
        IPCP_INFO(IPCP_SUB_ENGINE,
                  "region %llu of rank %d cannot be mapped "
                  "for %s %d (%s); one-sided operations on it go through "
                  "the owner",
                  (unsigned long long)rm->reg_id, rm->owner,
                  i ? "device" : "host", i ? attr->device : 0,
                  be ? ipcp__last_error() : "no backend for its memory");
        return NULL;
    }
    /* An export of many pieces keeps no descriptors once mapped (dozens
     * for each region would exhaust the process's): another device's
     * mapping then fails, and its operations go through the owner. */
    if (rm->fds.n > 1)
        ipcp__fds_close(&rm->fds);
    rm->maps[i] = (char *)base + rm->map_off;
    return rm->maps[i];
}

void ipcp__mem_on_map_rep(ipcp_comm_t *comm, ipcp__peer_t *peer,
                          const ipcp__msg_map_rep_t *m, int *fds, int nfds)
{
    ipcp__list_t *e, *tmp;
    ipcp_request_t *req = NULL;
    int nmap = (m->hdr.flags & IPCP_MAP_FD) ? nfds : 0;

    ipcp__list_for_each_safe(e, tmp, &peer->maps)
    {
        ipcp_request_t *r = ipcp__list_entry(e, ipcp_request_t, link);
        if (r->id == m->id) {
            ipcp__list_del(e);
            req = r;
            break;
        }
    }
    if (!req) {
        IPCP_WARN(IPCP_SUB_ENGINE, "map reply from rank %d for nothing asked",
                  peer->rank);
    } else if (m->status != IPCP_OK) {
        char msg[IPCP_ERRMSG_MAX];
        snprintf(msg, sizeof(msg), "%.*s", IPCP_ERRWIRE_MAX - 1, m->errmsg);
        ipcp__req_complete(req, ipcp__peer_status(m->status), msg);
    } else if (m->len != req->rmem->len || m->addr != req->rmem->addr ||
               m->mem_type != (int32_t)req->rmem->type) {
        /* The checksum is no seal: anyone can recompute it.  The owner's
         * word is what counts. */
        char msg[IPCP_ERRMSG_MAX];
        snprintf(msg, sizeof(msg),
                 "descriptor does not match region %llu of rank %d (it "
                 "names %llu bytes of memory type %d at 0x%llx; the region "
                 "is %llu bytes of type %d at 0x%llx): forged or corrupted",
                 (unsigned long long)m->reg_id, peer->rank,
                 (unsigned long long)req->rmem->len, (int)req->rmem->type,
                 (unsigned long long)req->rmem->addr,
                 (unsigned long long)m->len, (int)m->mem_type,
                 (unsigned long long)m->addr);
        ipcp__req_complete(req, IPCP_ERR_BAD_DESCRIPTOR, msg);
    } else {
        ipcp__rmem_map(comm, peer, req->rmem, m, fds, nmap);
        ipcp__req_complete(req, IPCP_OK, NULL);
    }
    for (int i = 0; i < nfds; i++)
        close(fds[i]);
}

/* The owner's answer to our REG_GONE: that peer is done with it. */
static void ipcp__mem_on_reg_ack(ipcp_comm_t *comm, ipcp__peer_t *peer,
                                 uint64_t reg_id)
{
    ipcp__list_t *e, *tmp;
    ipcp__list_for_each_safe(e, tmp, &comm->deregs)
    {
        ipcp_request_t *req = ipcp__list_entry(e, ipcp_request_t, link);
        unsigned char *ask = req->scratch;
        if (req->region_id == reg_id && ask)
            ask[peer->rank] = 0;
    }
}

void ipcp__mem_on_reg_gone(ipcp_comm_t *comm, ipcp__peer_t *peer,
                           const ipcp__msg_reg_gone_t *m)
{
    ipcp__list_t *e, *tmp;
    if (m->hdr.flags & IPCP_REG_GONE_ACK) {
        ipcp__mem_on_reg_ack(comm, peer, m->reg_id);
        return;
    }
    ipcp__lock(&comm->mem_lock, IPCP_LOCK_MEM);
    ipcp__list_for_each_safe(e, tmp, &comm->rmems)
    {
        ipcp_rmem_t *rm = ipcp__list_entry(e, ipcp_rmem_t, link);
        /* A region of a rank elsewhere is no peer's here (its owner is
         * the job's rank, not a number of this node). */
        if (!rm->remote && rm->owner == peer->rank && rm->reg_id == m->reg_id)
            atomic_store(&rm->valid, 0);
    }
    /* Operations already under way end first; new ones were refused from
     * the moment valid dropped (they start on this thread). */
    int answer = (m->hdr.flags & IPCP_REG_GONE_ASK) &&
                 !ipcp__rmem_busy(comm, peer->rank, m->reg_id, 1);
    ipcp__unlock(&comm->mem_lock, IPCP_LOCK_MEM);
    if (answer)
        ipcp__reg_gone_answer(comm, peer, m->reg_id);
    ipcp__list_for_each_safe(e, tmp, &peer->imports)
    {
        ipcp__import_t *imp = ipcp__list_entry(e, ipcp__import_t, link);
        if (imp->id != m->reg_id)
            continue;
        ipcp__list_del(e);
        imp->stale = 1;
        ipcp__import_put(comm, peer, imp);
    }
    ipcp__rexport_drop(peer, m->reg_id);
}

void ipcp__rmem_unmap(ipcp_rmem_t *rm)
{
    ipcp_comm_t *comm = rm->comm;
    for (int i = 0; i < IPCP_MAX_QSETS; i++) {
        if (rm->handles[i])
            (i ? comm->dev_ops : comm->host_ops)
                ->mem_unimport(i ? ipcp__dev(comm) : comm->host,
                               rm->handles[i]);
        rm->handles[i] = NULL;
        rm->maps[i] = NULL;
    }
    ipcp__fds_close(&rm->fds);
}

void ipcp__mem_cleanup(ipcp_comm_t *comm)
{
    ipcp__list_t *e;
    while ((e = ipcp__list_pop_front(&comm->rmems))) {
        ipcp_rmem_t *rm = ipcp__list_entry(e, ipcp_rmem_t, link);
        ipcp__rmem_unmap(rm);
        ipcp__handle_free(rm->handle);
        rm->magic = IPCP_DEAD_MAGIC;
        free(rm);
    }
    for (int p = 0; p < comm->size; p++) {
        ipcp__peer_t *peer = &comm->peers[p];
        while ((e = ipcp__list_pop_front(&peer->imports)))
            ipcp__import_put(comm, peer,
                             ipcp__list_entry(e, ipcp__import_t, link));
        ipcp__rexport_drop(peer, 0);
    }
    while ((e = ipcp__list_pop_front(&comm->regions))) {
        ipcp__region_t *r = ipcp__list_entry(e, ipcp__region_t, link);
        if (!r->internal)
            atomic_fetch_sub_explicit(&comm->nregions, 1, memory_order_relaxed);
        ipcp__region_release(r);
        if (r->is_alloc) {
            if (!r->is_auto)
                r->ops->mem_free(r->be, r->handle);
            free(r);
        } else {
            ipcp_mem_t *mem = ipcp__container_of(r, ipcp_mem_t, region);
            ipcp__handle_free(mem->handle);
            mem->magic = IPCP_DEAD_MAGIC;
            free(mem);
        }
    }
}
