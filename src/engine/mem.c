/* Memory: which backend owns a pointer, the registry of allocations and
 * registrations, and descriptors (importing a peer's region: memmap.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/heap.h"
#include "common/time.h"
#include "engine/engine.h"
#include "engine/mem.h"
#include "engine/remote.h"

/* Device memory was seen (comm->dev_used); read first, so that a call per
 * message does not write a line the progress thread reads. */
static void ipcp__dev_used(ipcp_comm_t *comm)
{
    if (!atomic_load_explicit(&comm->dev_used, memory_order_relaxed))
        atomic_store_explicit(&comm->dev_used, 1, memory_order_relaxed);
}

ipcp_status_t ipcp__mem_attr(ipcp_comm_t *comm, const void *ptr, size_t len,
                             ipcp__mem_attr_t *attr,
                             const ipcp__backend_ops_t **ops,
                             ipcp__backend_t **be)
{
    memset(attr, 0, sizeof(*attr));
    /* Inside one of our allocations the registry knows, without asking the
     * driver (a pointer query costs a microsecond or two, which small
     * stream-ordered messages pay on every call).  Not memory the user
     * allocated (auto regions): it may have been freed and reallocated.
     * An allocation the caller passes was counted before its pointer
     * reached the caller (the acquire pairs with the count's release). */
    ipcp__region_t *r = NULL;
    if (atomic_load_explicit(&comm->nregions, memory_order_acquire)) {
        ipcp__lock(&comm->mem_lock, IPCP_LOCK_MEM);
        r = ipcp__region_find_alloc(comm, ptr, len);
        if (r && r->is_auto)
            r = NULL;
        if (r) {
            *attr = r->attr;
            *ops = r->ops;
            *be = r->be;
        }
        ipcp__unlock(&comm->mem_lock, IPCP_LOCK_MEM);
    }
    if (r) {
        if (attr->type == IPCP_MEM_CUDA)
            ipcp__dev_used(comm);
        return IPCP_OK;
    }
    /* Not yet open: opened here if device memory can exist in this process
     * (engine/dev.c); otherwise the buffer is host memory, as is one in
     * the brk heap or the caller's stack where the backend's memory never
     * is (common/heap.h), which spares the driver's query. */
    int host = comm->dev_ops && comm->dev_ops->heap_free &&
               (ipcp__heap_holds(ptr, len) || ipcp__stack_holds(ptr, len));
    ipcp__backend_t *dev = host ? NULL : ipcp__dev_for_ptr(comm);
    if (dev && comm->dev_ops->owns(dev, ptr, attr)) {
        *ops = comm->dev_ops;
        *be = dev;
        ipcp__dev_used(comm);
        return IPCP_OK;
    }
    comm->host_ops->owns(comm->host, ptr, attr);
    attr->type = IPCP_MEM_HOST;
    attr->device = -1;
    *ops = comm->host_ops;
    *be = comm->host;
    return IPCP_OK;
}

/* The first allocation holding [ptr, ptr+len) that is not an auto region
 * of another identity than buffer_id (any, with all 1). */
static ipcp__region_t *ipcp__region_holding(ipcp_comm_t *comm, const void *ptr,
                                            size_t len, int all,
                                            uint64_t buffer_id)
{
    ipcp__list_t *e, *tmp;
    uintptr_t a = (uintptr_t)ptr;
    ipcp__list_for_each_safe(e, tmp, &comm->regions)
    {
        ipcp__region_t *r = ipcp__list_entry(e, ipcp__region_t, link);
        uintptr_t b = (uintptr_t)r->ptr;
        if (r->is_alloc && a >= b && a - b <= r->len &&
            len <= r->len - (a - b) &&
            (all || !r->is_auto || r->attr.buffer_id == buffer_id))
            return r;
    }
    return NULL;
}

ipcp__region_t *ipcp__region_find_alloc(ipcp_comm_t *comm, const void *ptr,
                                        size_t len)
{
    return ipcp__region_holding(comm, ptr, len, 1, 0);
}

ipcp__region_t *ipcp__region_find_live(ipcp_comm_t *comm, const void *ptr,
                                       size_t len, uint64_t buffer_id)
{
    /* An auto region of other memory, or of several pieces (whose
     * identity is theirs together, asked by ipcp__region_auto), is passed
     * over: another may be the buffer's. */
    return ipcp__region_holding(comm, ptr, len, 0, buffer_id);
}

ipcp__region_t *ipcp__region_find_id(ipcp_comm_t *comm, uint64_t id)
{
    ipcp__list_t *e, *tmp;
    ipcp__list_for_each_safe(e, tmp, &comm->regions)
    {
        ipcp__region_t *r = ipcp__list_entry(e, ipcp__region_t, link);
        if (r->id == id)
            return r;
    }
    return NULL;
}

/* ---- Allocation and registration --------------------------------------- */

static ipcp_status_t ipcp__region_add(ipcp_comm_t *comm, ipcp__region_t *r)
{
    r->shared_with = calloc((size_t)comm->size, 1);
    if (!r->shared_with)
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_ENGINE, IPCP_ERR_NOMEM,
                          "no memory for a region");
    ipcp__lock(&comm->mem_lock, IPCP_LOCK_MEM);
    r->id = ++comm->next_region_id;
    ipcp__list_push_back(&comm->regions, &r->link);
    if (!r->internal)
        atomic_fetch_add_explicit(&comm->nregions, 1, memory_order_release);
    ipcp__unlock(&comm->mem_lock, IPCP_LOCK_MEM);
    return IPCP_OK;
}

/* Tells the peers that hold a mapping that an allocation is gone.  Runs
 * on the progress thread; the request carries shared_with in scratch. */
void ipcp__mem_notify_cmd(ipcp_comm_t *comm, ipcp_request_t *req)
{
    const unsigned char *to = req->scratch;
    ipcp__msg_reg_gone_t m;
    memset(&m, 0, sizeof(m));
    m.hdr.type = IPCP_MSG_REG_GONE;
    m.reg_id = req->region_id;
    for (int r = 0; r < comm->size; r++)
        if (r != comm->rank && to && to[r] &&
            !ipcp__peer_closed(&comm->peers[r]))
            ipcp__peer_post(comm, &comm->peers[r], &m, sizeof(m), NULL, 0);
    ipcp__req_complete(req, IPCP_OK, NULL);
}

/* Removes an allocation's record from the registry and tells the peers
 * that mapped it (their mappings keep its memory). */
ipcp_status_t ipcp__region_retire(ipcp_comm_t *comm, ipcp__region_t *r)
{
    ipcp_request_t *req = ipcp__req_new(comm, IPCP_REQ_NOTIFY);
    ipcp__lock(&comm->mem_lock, IPCP_LOCK_MEM);
    ipcp__list_del(&r->link);
    if (!r->internal)
        atomic_fetch_sub_explicit(&comm->nregions, 1, memory_order_relaxed);
    ipcp__unlock(&comm->mem_lock, IPCP_LOCK_MEM);
    if (!req)
        return ipcp__fail(IPCP_LOG_WARN, IPCP_SUB_ENGINE, IPCP_ERR_NOMEM,
                          "region %llu freed, but peers could not be told",
                          (unsigned long long)r->id);
    req->user = 0;
    req->region_id = r->id;
    req->scratch = r->shared_with;
    r->shared_with = NULL;
    ipcp__comm_submit(comm, req);
    return IPCP_OK;
}

void ipcp__region_release(ipcp__region_t *r)
{
    if (r->exp_fd >= 0)
        close(r->exp_fd);
    r->exp_fd = -1;
    free(r->shared_with);
    r->shared_with = NULL;
}

/* ipcp__mem_alloc, and the library's own allocations (internal). */
static ipcp_status_t ipcp__mem_alloc_as(ipcp_comm_t *comm, size_t len,
                                        ipcp_mem_type_t type, int device,
                                        int internal, void **ptr)
{
    const ipcp__backend_ops_t *ops = comm->host_ops;
    ipcp__backend_t *be = comm->host;
    ipcp_status_t st;

    if (type == IPCP_MEM_CUDA) {
        if (!(be = ipcp__dev_get(comm, IPCP_LOG_INFO, "a device allocation")))
            return IPCP_ERR_UNSUPPORTED;
        ops = comm->dev_ops;
    }
    ipcp__region_t *r = calloc(1, sizeof(*r));
    if (!r)
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_API, IPCP_ERR_NOMEM,
                          "no memory for an allocation record");
    r->exp_fd = -1;
    r->is_alloc = 1;
    r->internal = internal;
    r->ops = ops;
    r->be = be;
    st = ops->mem_alloc(be, len, device, &r->ptr, &r->handle);
    if (st != IPCP_OK)
        goto err_free;
    r->len = len;
    ops->owns(be, r->ptr, &r->attr);
    r->attr.type = type;
    r->attr.device = type == IPCP_MEM_CUDA ? device : -1;
    if (type == IPCP_MEM_CUDA) {
        ipcp__dev_used(comm);
        if (!internal)
            ipcp__lane_preload(comm, device);
    }
    st = ops->mem_export(be, r->handle, r->ptr, len, &r->exp, &r->exp_fd);
    r->exportable = st == IPCP_OK;
    if (!r->exportable)
        IPCP_INFO(IPCP_SUB_ENGINE,
                  "allocation of %zu bytes cannot be shared: "
                  "%s",
                  len, ipcp__last_error());
    st = ipcp__region_add(comm, r);
    if (st != IPCP_OK)
        goto err_mem;
    *ptr = r->ptr;
    return IPCP_OK;
err_mem:
    ipcp__region_release(r);
    ops->mem_free(be, r->handle);
err_free:
    free(r);
    return st;
}

ipcp_status_t ipcp__mem_alloc(ipcp_comm_t *comm, size_t len,
                              ipcp_mem_type_t type, int device, void **ptr)
{
    return ipcp__mem_alloc_as(comm, len, type, device, 0, ptr);
}

ipcp_status_t ipcp__mem_alloc_internal(ipcp_comm_t *comm, size_t len,
                                       int device, void **ptr)
{
    return ipcp__mem_alloc_as(comm, len, IPCP_MEM_CUDA, device, 1, ptr);
}

ipcp_status_t ipcp__mem_free(ipcp_comm_t *comm, void *ptr)
{
    ipcp__region_t *r = NULL;
    ipcp__list_t *e, *tmp;
    ipcp__lock(&comm->mem_lock, IPCP_LOCK_MEM);
    ipcp__list_for_each_safe(e, tmp, &comm->regions)
    {
        ipcp__region_t *x = ipcp__list_entry(e, ipcp__region_t, link);
        if (x->is_alloc && !x->is_auto && x->ptr == ptr)
            r = x;
    }
    ipcp__unlock(&comm->mem_lock, IPCP_LOCK_MEM);
    if (!r)
        return ipcp__fail(IPCP_LOG_INFO, IPCP_SUB_API, IPCP_ERR_INVALID,
                          "%p was not returned by ipcp_mem_alloc (or was "
                          "freed already)",
                          ptr);
    ipcp_status_t st = ipcp__region_retire(comm, r);
    ipcp__region_release(r);
    r->ops->mem_free(r->be, r->handle);
    free(r);
    return st;
}

int ipcp__region_fds(const ipcp__region_t *r, int *fds, int max)
{
    if (r->exp_fd >= 0) {
        if (max < 1 || (fds[0] = dup(r->exp_fd)) < 0) {
            ipcp__fail(IPCP_LOG_WARN, IPCP_SUB_ENGINE, IPCP_ERR_SYSTEM,
                       "cannot duplicate the descriptor of region %llu: %s",
                       (unsigned long long)r->id,
                       max < 1 ? "no room" : strerror(errno));
            return -1;
        }
        return 1;
    }
    if (!r->ops->mem_share)
        return 0;
    /* A registration inside another region shares that one's export. */
    return r->ops->mem_share(r->be, (char *)r->ptr - r->parent_off, &r->exp,
                             fds, max);
}

/* Whether an auto region at the address of a buffer whose first piece is
 * attr's no longer shows the memory there now: another allocation took a
 * piece's place (single piece: attr's buffer id; several: their
 * identity, asked again). */
static int ipcp__auto_stale(ipcp_comm_t *comm, const ipcp__region_t *r,
                            const ipcp__mem_attr_t *attr)
{
    uintptr_t b;
    size_t n;
    uint64_t id;
    size_t piece = attr->map_size ? attr->map_size : attr->size;
    if (r->len == piece)
        return r->attr.buffer_id != attr->buffer_id;
    return !comm->dev_ops->mem_span ||
           !comm->dev_ops->mem_span(ipcp__dev(comm), r->ptr, r->len, &b, &n,
                                    &id) ||
           b != (uintptr_t)r->ptr || n != r->len || id != r->attr.buffer_id;
}

/* The auto region of [base, +size) with identity id, or NULL; one that
 * is stale is retired on the way (auto regions are only touched by the
 * progress thread, so none goes away meanwhile). */
static ipcp__region_t *ipcp__auto_find(ipcp_comm_t *comm,
                                       const ipcp__mem_attr_t *attr,
                                       uintptr_t base, size_t size, uint64_t id)
{
    ipcp__region_t *r, *found = NULL, *old[8];
    ipcp__list_t *e, *tmp;
    int nold = 0;
    ipcp__lock(&comm->mem_lock, IPCP_LOCK_MEM);
    ipcp__list_for_each_safe(e, tmp, &comm->regions)
    {
        r = ipcp__list_entry(e, ipcp__region_t, link);
        if (!r->is_auto || (uintptr_t)r->ptr != base)
            continue;
        if (r->attr.buffer_id == id && r->len == size)
            found = r;
        else if (nold < (int)ipcp__array_size(old))
            old[nold++] = r; /* maybe freed and reallocated here */
    }
    ipcp__unlock(&comm->mem_lock, IPCP_LOCK_MEM);
    for (int i = 0; i < nold; i++) {
        if (!ipcp__auto_stale(comm, old[i], attr))
            continue;
        ipcp__region_retire(comm, old[i]);
        ipcp__region_release(old[i]);
        free(old[i]);
    }
    return found;
}

ipcp__region_t *ipcp__region_auto(ipcp_comm_t *comm,
                                  const ipcp__mem_attr_t *attr, const void *buf,
                                  size_t len)
{
    ipcp__region_t *r;
    const ipcp__backend_ops_t *ops = comm->dev_ops;
    ipcp__backend_t *dev = ipcp__dev(comm);
    uintptr_t b = (uintptr_t)buf;
    uintptr_t base = attr->map_size ? attr->map_base : attr->base;
    size_t size = attr->map_size ? attr->map_size : attr->size;
    uint64_t id = attr->buffer_id;

    if (!dev || !base || !size)
        return NULL;
    if ((b < base || b - base > size || len > size - (b - base)) &&
        (!ops->mem_span || !ops->mem_span(dev, buf, len, &base, &size, &id))) {
        /* Across allocations that cannot be shared as pieces; debug only:
         * it is asked again at every transfer of the buffer. */
        IPCP_DEBUG(IPCP_SUB_ENGINE,
                   "device buffer [%p, +%zu) spans more than its allocation "
                   "[%#llx, +%zu): using the staged path",
                   buf, len, (unsigned long long)base, size);
        return NULL;
    }
    if ((r = ipcp__auto_find(comm, attr, base, size, id)))
        return r;
    if (!(r = calloc(1, sizeof(*r))))
        return NULL;
    r->exp_fd = -1;
    r->is_alloc = r->is_auto = 1;
    r->ptr = (void *)base;
    r->len = size;
    r->attr = *attr;
    r->attr.buffer_id = id;
    r->ops = ops;
    r->be = dev;
    if (ops->mem_export(dev, NULL, r->ptr, r->len, &r->exp, &r->exp_fd) !=
        IPCP_OK) {
        int first = !atomic_exchange(&comm->unshared_said, 1);
        IPCP_LOG(first ? IPCP_LOG_INFO : IPCP_LOG_DEBUG, IPCP_SUB_ENGINE,
                 "device buffer cannot be shared with other processes, so "
                 "no peer copies it directly (the bounce ring or the "
                 "staged path carries it): %s%s",
                 ipcp__last_error(),
                 first ? " (later ones of this process at debug level)" : "");
        free(r);
        return NULL;
    }
    r->exportable = 1;
    if (ipcp__region_add(comm, r) != IPCP_OK) {
        ipcp__region_release(r);
        free(r);
        return NULL;
    }
    return r;
}

ipcp_status_t ipcp__mem_register(ipcp_comm_t *comm, void *buf, size_t len,
                                 ipcp_mem_t *mem)
{
    ipcp__region_t *r = &mem->region;
    const ipcp__backend_ops_t *ops;
    ipcp__backend_t *be;

    r->exp_fd = -1;
    ipcp__mem_attr(comm, buf, len, &r->attr, &ops, &be);
    r->ops = ops;
    r->be = be;
    r->ptr = buf;
    r->len = len;
    ipcp__lock(&comm->mem_lock, IPCP_LOCK_MEM);
    ipcp__region_t *a =
        ipcp__region_find_live(comm, buf, len, r->attr.buffer_id);
    if (a && a->exportable) {
        /* Inside one of our allocations: peers map the allocation. */
        r->exportable = 1;
        r->exp = a->exp;
        r->parent_off = (size_t)((char *)buf - (char *)a->ptr);
        if (a->exp_fd >= 0)
            r->exp_fd = dup(a->exp_fd);
    }
    ipcp__unlock(&comm->mem_lock, IPCP_LOCK_MEM);
    if (r->attr.type == IPCP_MEM_CUDA)
        ipcp__lane_preload(comm, r->attr.device);
    if (!r->exportable && ops->type != IPCP_MEM_HOST &&
        ops->mem_export(be, NULL, buf, len, &r->exp, &r->exp_fd) == IPCP_OK) {
        /* Device memory the user allocated (legacy IPC of its allocation). */
        r->exportable = 1;
        r->parent_off = 0;
    }
    return ipcp__region_add(comm, r);
}

ipcp_status_t ipcp__mem_deregister(ipcp_comm_t *comm, ipcp_mem_t *mem,
                                   ipcp_request_t **out)
{
    ipcp__region_t *r = &mem->region;
    ipcp_request_t *req = ipcp__req_new(comm, IPCP_REQ_DEREG);
    if (!req)
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_ENGINE, IPCP_ERR_NOMEM,
                          "no memory to deregister region %llu (it stays "
                          "registered)",
                          (unsigned long long)r->id);
    ipcp__lock(&comm->mem_lock, IPCP_LOCK_MEM);
    ipcp__list_del(&r->link);
    atomic_fetch_sub_explicit(&comm->nregions, 1, memory_order_relaxed);
    ipcp__unlock(&comm->mem_lock, IPCP_LOCK_MEM);
    req->region = r;
    req->region_id = r->id;
    req->scratch = r->shared_with; /* who must answer; the request's now */
    r->shared_with = NULL;
    ipcp__comm_submit(comm, req);
    *out = req;
    return IPCP_OK;
}

/* ---- Deregistration -------------------------------------------------------
 * A peer that imported a registration may write it on its own (mapped, or
 * with process_vm_writev at its address), and our own progress thread may
 * be copying into it for a peer (one-sided operations through the owner).
 * Once the caller of ipcp_mem_deregister has it back the memory may be
 * freed and reused, so the call waits until none of that is in flight:
 * each peer that imported it answers REG_GONE once its operations on it
 * have ended (and refuses new ones), and our own count goes to zero.  A
 * peer that does not answer within the timeout is cut off (a stopped
 * process could still write when it resumes: the caller learns of it by
 * IPCP_ERR_TIMEOUT). */

void ipcp__mem_dereg_cmd(ipcp_comm_t *comm, ipcp_request_t *req)
{
    unsigned char *ask = req->scratch;
    ipcp__msg_reg_gone_t m;
    memset(&m, 0, sizeof(m));
    m.hdr.type = IPCP_MSG_REG_GONE;
    m.reg_id = req->region_id;
    for (int r = 0; r < comm->size; r++) {
        ipcp__peer_t *p = &comm->peers[r];
        int want = ask && ask[r];
        if (r == comm->rank || ipcp__peer_closed(p))
            continue;
        /* Every peer hears of it (a descriptor may be on its way to one
         * that has not imported it yet); those that mapped it answer. */
        m.hdr.flags = want ? IPCP_REG_GONE_ASK : 0;
        if (ipcp__peer_post(comm, p, &m, sizeof(m), NULL, 0) != IPCP_OK && ask)
            ask[r] = 0;
    }
    req->deadline = ipcp__now_s() + comm->timeout_s;
    ipcp__list_push_back(&comm->deregs, &req->link);
    ipcp__mem_dereg_poll(comm);
}

/* Peers that still owe an answer (a lost one owes none). */
static int ipcp__dereg_owed(ipcp_comm_t *comm, const unsigned char *ask,
                            int cut)
{
    int n = 0;
    for (int r = 0; ask && r < comm->size; r++) {
        if (!ask[r] || ipcp__peer_closed(&comm->peers[r]))
            continue;
        n++;
        if (cut)
            ipcp__peer_lost(comm, &comm->peers[r],
                            "it did not confirm in time that it stopped "
                            "using a region being deregistered");
    }
    return n;
}

int ipcp__mem_dereg_poll(ipcp_comm_t *comm)
{
    ipcp__list_t *e, *tmp;
    double now = -1;
    ipcp__list_for_each_safe(e, tmp, &comm->deregs)
    {
        ipcp_request_t *req = ipcp__list_entry(e, ipcp_request_t, link);
        ipcp__lock(&comm->mem_lock, IPCP_LOCK_MEM);
        int busy = req->region->busy;
        ipcp__unlock(&comm->mem_lock, IPCP_LOCK_MEM);
        int owed = ipcp__dereg_owed(comm, req->scratch, 0);
        if (!busy && !owed) {
            ipcp__list_del(e);
            ipcp__req_complete(req, IPCP_OK, NULL);
            continue;
        }
        if (now < 0)
            now = ipcp__now_s();
        if (now < req->deadline)
            continue;
        char msg[IPCP_ERRMSG_MAX];
        snprintf(msg, sizeof(msg),
                 "region %llu: %d peer(s) did not confirm within %.1f s "
                 "that they stopped using it (now cut off), %d operation(s) "
                 "of this rank on it still running",
                 (unsigned long long)req->region_id, owed, comm->timeout_s,
                 busy);
        ipcp__dereg_owed(comm, req->scratch, 1);
        ipcp__list_del(e);
        ipcp__req_complete(req, IPCP_ERR_TIMEOUT, msg);
    }
    return !ipcp__list_empty(&comm->deregs);
}

void ipcp__region_op_end(ipcp_comm_t *comm, ipcp__region_t *r)
{
    ipcp__lock(&comm->mem_lock, IPCP_LOCK_MEM);
    r->busy--;
    ipcp__unlock(&comm->mem_lock, IPCP_LOCK_MEM);
}

/* The owner asked (REG_GONE with ASK) and every operation of ours on the
 * region has ended: say so.  Not under comm->mem_lock (a failed post
 * declares the peer lost, which takes it). */
void ipcp__reg_gone_answer(ipcp_comm_t *comm, ipcp__peer_t *peer,
                           uint64_t reg_id)
{
    ipcp__msg_reg_gone_t m;
    memset(&m, 0, sizeof(m));
    m.hdr.type = IPCP_MSG_REG_GONE;
    m.hdr.flags = IPCP_REG_GONE_ACK;
    m.reg_id = reg_id;
    ipcp__peer_post(comm, peer, &m, sizeof(m), NULL, 0);
}

/* Sums the operations in flight on every import of (owner, reg_id); with
 * owe, marks the busy ones as owing the owner an answer. */
int ipcp__rmem_busy(ipcp_comm_t *comm, int owner, uint64_t reg_id, int owe)
{
    ipcp__list_t *e, *tmp;
    int busy = 0;
    ipcp__list_for_each_safe(e, tmp, &comm->rmems)
    {
        ipcp_rmem_t *rm = ipcp__list_entry(e, ipcp_rmem_t, link);
        if (rm->remote || rm->owner != owner || rm->reg_id != reg_id)
            continue;
        int b = atomic_load(&rm->busy);
        busy += b;
        rm->ack_owed = owe && b ? 1 : owe ? 0 : rm->ack_owed;
    }
    return busy;
}

int ipcp__rmem_op_end(ipcp_comm_t *comm, ipcp_rmem_t *rm, int *owner,
                      uint64_t *reg_id)
{
    int answer = 0;
    ipcp__lock(&comm->mem_lock, IPCP_LOCK_MEM);
    if (atomic_fetch_sub(&rm->busy, 1) == 1 && rm->ack_owed) {
        rm->ack_owed = 0;
        answer = !ipcp__rmem_busy(comm, rm->owner, rm->reg_id, 0);
    }
    *owner = rm->owner;
    *reg_id = rm->reg_id;
    ipcp__unlock(&comm->mem_lock, IPCP_LOCK_MEM);
    return answer;
}

void ipcp__rmem_answer(ipcp_comm_t *comm, int owner, uint64_t reg_id)
{
    ipcp__reg_gone_answer(comm, &comm->peers[owner], reg_id);
}

/* ---- Descriptors --------------------------------------------------------- */

#define IPCP_DESC_MAGIC   0x6373656470637069ULL /* "ipcpdesc" */
#define IPCP_DESC_VERSION 2

typedef struct ipcp__desc {
    uint64_t magic;
    uint32_t version;
    uint32_t size;
    uint64_t job_hash;
    int32_t owner;
    int32_t owner_pid;
    uint64_t reg_id;
    uint64_t len;
    uint64_t addr;
    int32_t type;
    int32_t device;
    /* For ranks on other nodes (a job of ipcp_init_mpi): the whole job's
     * name hashed, the owner's rank in it, the region's address there
     * (0: not reachable from other nodes). */
    uint64_t wide_hash;
    int32_t wide_rank;
    int32_t pad;
    uint64_t wide_addr;
    uint64_t checksum; /* FNV-1a of everything above */
} ipcp__desc_t;

/* The hash of the whole job's name (the node's where it is the job). */
static uint64_t ipcp__wide_hash(const ipcp_comm_t *comm)
{
    const char *job = comm->remote ? comm->remote->job : comm->job;
    return ipcp__fnv1a(job, strlen(job), IPCP_FNV_SEED);
}

_Static_assert(sizeof(ipcp__desc_t) <= IPCP_DESC_MAX, "descriptor size");

ipcp_status_t ipcp__mem_pack(const ipcp_mem_t *mem, void *out, size_t cap,
                             size_t *len)
{
    const ipcp_comm_t *comm = mem->comm;
    ipcp__desc_t d;
    if (cap < sizeof(d))
        return ipcp__fail(IPCP_LOG_INFO, IPCP_SUB_API, IPCP_ERR_INVALID,
                          "descriptor needs %zu bytes, buffer has %zu",
                          sizeof(d), cap);
    memset(&d, 0, sizeof(d));
    d.magic = IPCP_DESC_MAGIC;
    d.version = IPCP_DESC_VERSION;
    d.size = sizeof(d);
    d.job_hash = comm->job_hash;
    d.owner = comm->rank;
    d.owner_pid = (int32_t)getpid();
    d.reg_id = mem->region.id;
    d.len = mem->region.len;
    d.addr = (uint64_t)(uintptr_t)mem->region.ptr;
    d.type = (int32_t)mem->region.attr.type;
    d.device = mem->region.attr.device;
    d.wide_hash = ipcp__wide_hash(comm);
    d.wide_rank = comm->remote ? comm->remote->rank : comm->rank;
    d.wide_addr = mem->wide_addr;
    d.checksum =
        ipcp__fnv1a(&d, offsetof(ipcp__desc_t, checksum), IPCP_FNV_SEED);
    memcpy(out, &d, sizeof(d));
    *len = sizeof(d);
    return IPCP_OK;
}

/* A descriptor of this job's rank on another node (*remote 1), or
 * IPCP_ERR_BAD_DESCRIPTOR. */
static ipcp_status_t ipcp__desc_wide(const ipcp_comm_t *comm,
                                     const ipcp__desc_t *d, int *remote)
{
    const ipcp__remote_t *rm = comm->remote;
    if (!rm || d->wide_hash != ipcp__wide_hash(comm))
        return ipcp__fail(IPCP_LOG_INFO, IPCP_SUB_API, IPCP_ERR_BAD_DESCRIPTOR,
                          "descriptor comes from another job (this is job "
                          "'%s')",
                          rm ? rm->job : comm->job);
    if (d->wide_rank < 0 || d->wide_rank >= rm->size ||
        rm->local[d->wide_rank] >= 0)
        return ipcp__fail(IPCP_LOG_INFO, IPCP_SUB_API, IPCP_ERR_BAD_DESCRIPTOR,
                          "descriptor owner rank %d is not a rank on another "
                          "node of this job of %d",
                          d->wide_rank, rm->size);
    *remote = 1;
    return IPCP_OK;
}

/* Checks a descriptor without trusting any of it; *remote: 1 when its
 * owner is a rank on another node. */
static ipcp_status_t ipcp__desc_check(const ipcp_comm_t *comm, const void *buf,
                                      size_t len, ipcp__desc_t *d, int *remote)
{
    *remote = 0;
    if (len != sizeof(*d))
        return ipcp__fail(IPCP_LOG_INFO, IPCP_SUB_API, IPCP_ERR_BAD_DESCRIPTOR,
                          "descriptor has %zu bytes, expected %zu "
                          "(truncated or not a descriptor)",
                          len, sizeof(*d));
    memcpy(d, buf, sizeof(*d));
    if (d->magic != IPCP_DESC_MAGIC || d->version != IPCP_DESC_VERSION ||
        d->size != sizeof(*d))
        return ipcp__fail(IPCP_LOG_INFO, IPCP_SUB_API, IPCP_ERR_BAD_DESCRIPTOR,
                          "not an ipcpipe descriptor of version %d",
                          IPCP_DESC_VERSION);
    if (d->checksum !=
        ipcp__fnv1a(d, offsetof(ipcp__desc_t, checksum), IPCP_FNV_SEED))
        return ipcp__fail(IPCP_LOG_INFO, IPCP_SUB_API, IPCP_ERR_BAD_DESCRIPTOR,
                          "descriptor checksum mismatch (corrupted)");
    if (d->type != IPCP_MEM_HOST && d->type != IPCP_MEM_CUDA)
        return ipcp__fail(IPCP_LOG_INFO, IPCP_SUB_API, IPCP_ERR_BAD_DESCRIPTOR,
                          "descriptor has an unknown memory type %d", d->type);
    if (d->job_hash != comm->job_hash)
        return ipcp__desc_wide(comm, d, remote);
    if (d->owner < 0 || d->owner >= comm->size || d->owner == comm->rank)
        return ipcp__fail(IPCP_LOG_INFO, IPCP_SUB_API, IPCP_ERR_BAD_DESCRIPTOR,
                          "descriptor owner rank %d is not a peer of rank %d "
                          "(size %d)",
                          d->owner, comm->rank, comm->size);
    if (d->owner_pid != comm->peers[d->owner].pid)
        return ipcp__fail(IPCP_LOG_INFO, IPCP_SUB_API, IPCP_ERR_BAD_DESCRIPTOR,
                          "descriptor names pid %d for rank %d, which is pid "
                          "%d",
                          d->owner_pid, d->owner,
                          (int)comm->peers[d->owner].pid);
    return IPCP_OK;
}

ipcp_status_t ipcp__rmem_prepare(ipcp_comm_t *comm, const void *desc,
                                 size_t len, ipcp_rmem_t *rm)
{
    ipcp__desc_t d;
    int remote;
    memset(&d, 0, sizeof(d));
    ipcp_status_t st = ipcp__desc_check(comm, desc, len, &d, &remote);
    if (st != IPCP_OK)
        return st;
    if (remote && d.wide_addr && d.wide_addr + d.len < d.wide_addr)
        return ipcp__fail(IPCP_LOG_INFO, IPCP_SUB_API, IPCP_ERR_BAD_DESCRIPTOR,
                          "descriptor's region of rank %d wraps past the end "
                          "of its memory",
                          d.wide_rank);
    if (remote && !d.wide_addr)
        return ipcp__fail(IPCP_LOG_INFO, IPCP_SUB_API, IPCP_ERR_UNSUPPORTED,
                          "rank %d's region %llu (%s memory) cannot be "
                          "reached from another node: %s",
                          d.wide_rank, (unsigned long long)d.reg_id,
                          d.type == IPCP_MEM_CUDA ? "device" : "host",
                          d.type == IPCP_MEM_CUDA
                              ? "MPI there does not read device memory"
                              : "its job has no MPI window (IPCPIPE_REMOTE_RMA="
                                "off, or MPI made none; Open MPI over UCX "
                                "without a UCX network: OMPI_MCA_osc=pt2pt)");
    rm->remote = remote;
    rm->owner = remote ? d.wide_rank : d.owner;
    rm->addr = remote ? d.wide_addr : d.addr;
    rm->reg_id = d.reg_id;
    rm->len = d.len;
    rm->type = (ipcp_mem_type_t)d.type;
    return IPCP_OK;
}
