/* Paths: the receiver chooses direct or staged, and each side enqueues its
 * half of the transfer on its queues.  Chunks are ordered only by the
 * queues and the flags in the channel's shared memory; no CPU waits per
 * chunk.
 *
 * Staged ring: chunk c (numbered per channel, the same on both sides) uses
 * slot c % S.  The sender waits until freed[s] reaches c / S (the chunk that
 * used the slot before is out), copies in, and sets full[s] to c / S + 1; the
 * receiver waits for that, copies out, and sets freed[s] to c / S + 1.
 * Every wait is for an earlier chunk, so any assignment of chunks to queues
 * that keeps each queue in chunk order cannot deadlock. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/time.h"
#include "engine/mem.h"
#include "engine/memreg.h"
#include "engine/xfer.h"
#include "engine/samegpu.h"
#include "engine/stripe.h"

int ipcp__qset_index(const ipcp__mem_attr_t *attr)
{
    if (attr->type == IPCP_MEM_CUDA && attr->device >= 0 &&
        attr->device < IPCP_MAX_DEVICES)
        return 1 + attr->device;
    return 0;
}

static void ipcp__backend_of(ipcp_comm_t *comm, const ipcp__mem_attr_t *attr,
                             const ipcp__backend_ops_t **ops,
                             ipcp__backend_t **be)
{
    if (attr->type == IPCP_MEM_CUDA && ipcp__dev(comm)) {
        *ops = comm->dev_ops;
        *be = ipcp__dev(comm);
    } else {
        *ops = comm->host_ops;
        *be = comm->host;
    }
}

/* Makes the channel's memory usable by the queue set's backend. */
static ipcp_status_t ipcp__qset_bind(ipcp__qset_t *qs, ipcp__chan_t *chan)
{
    if (!chan || qs->shm_handle || qs->ops->type == IPCP_MEM_HOST)
        return IPCP_OK;
    return qs->ops->shm_register(qs->be, chan->base, chan->size, qs->device,
                                 &qs->shm_handle);
}

static void ipcp__qset_destroy(ipcp__qset_t *qs, ipcp__chan_t *chan)
{
    for (int i = 0; i < qs->n; i++)
        if (qs->q[i])
            qs->ops->queue_destroy(qs->q[i]);
    if (qs->shm_handle)
        qs->ops->shm_unregister(qs->be, qs->shm_handle);
    (void)chan;
    free(qs);
}

ipcp_status_t ipcp__qset_get(ipcp_comm_t *comm, ipcp__peer_t *peer,
                             ipcp__dir_t *dir, const ipcp__mem_attr_t *attr,
                             ipcp__qset_t **out)
{
    int idx = ipcp__qset_index(attr);
    ipcp__qset_t *qs = dir->qsets[idx];
    ipcp_status_t st;

    (void)peer;
    if (qs) {
        *out = qs;
        return IPCP_OK;
    }
    qs = calloc(1, sizeof(*qs));
    if (!qs)
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_ENGINE, IPCP_ERR_NOMEM,
                          "no memory for a queue set");
    ipcp__backend_of(comm, attr, &qs->ops, &qs->be);
    qs->device = attr->type == IPCP_MEM_CUDA ? attr->device : -1;
    qs->n = comm->cfg->queues;
    if (!qs->n)
        qs->n = qs->ops->type == IPCP_MEM_HOST ? IPCP_HOST_QUEUES
                                               : IPCP_CUDA_QUEUES;
    for (int i = 0; i < qs->n; i++) {
        st = qs->ops->queue_create(qs->be, qs->device, &qs->q[i]);
        if (st != IPCP_OK) {
            qs->n = i;
            goto err_destroy;
        }
    }
    st = ipcp__qset_bind(qs, dir->chan);
    if (st != IPCP_OK)
        goto err_destroy;
    dir->qsets[idx] = qs;
    *out = qs;
    return IPCP_OK;
err_destroy:
    ipcp__qset_destroy(qs, dir->chan);
    return st;
}

/* ---- Channels ------------------------------------------------------------ */

static size_t ipcp__ctl_size(void)
{
    return ipcp__align_up(sizeof(ipcp__chan_ctl_t), IPCP_CHAN_SLOTS_ALIGN);
}

static ipcp_status_t ipcp__chan_bind_all(ipcp__dir_t *dir)
{
    for (int i = 0; i < IPCP_MAX_QSETS; i++) {
        if (!dir->qsets[i])
            continue;
        ipcp_status_t st = ipcp__qset_bind(dir->qsets[i], dir->chan);
        if (st != IPCP_OK)
            return st;
    }
    return IPCP_OK;
}

/* Receiver: creates the channel of data coming from peer. */
ipcp_status_t ipcp__chan_create(ipcp_comm_t *comm, ipcp__dir_t *dir,
                                int device_mem)
{
    const ipcp__config_t *cfg = comm->cfg;
    ipcp__chan_t *ch;
    ipcp__export_t exp;
    ipcp_status_t st;

    if (dir->chan)
        return IPCP_OK;
    ch = calloc(1, sizeof(*ch));
    if (!ch)
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_ENGINE, IPCP_ERR_NOMEM,
                          "no memory for a channel");
    /* Device memory wants large slots (copy engines reach full speed only
     * on MiB-sized copies), host memory slots that stay in cache while they
     * are copied out; the channel is made once, by the first transfer. */
    ch->slot_size = cfg->chunk
                        ? cfg->chunk
                        : (device_mem ? IPCP_CUDA_CHUNK : IPCP_HOST_CHUNK);
    ch->nslots = (uint32_t)(cfg->slots ? cfg->slots
                                       : (device_mem ? IPCP_CUDA_SLOTS
                                                     : IPCP_HOST_SLOTS));
    ch->size = ipcp__ctl_size() + (size_t)ch->nslots * ch->slot_size;
    ch->created = 1;
    st = comm->host_ops->mem_alloc(comm->host, ch->size, -1, &ch->base,
                                   &ch->handle);
    if (st != IPCP_OK)
        goto err_free;
    st = comm->host_ops->mem_export(comm->host, ch->handle, ch->base, ch->size,
                                    &exp, &ch->fd);
    if (st != IPCP_OK)
        goto err_mem;
    ch->ctl = ch->base;
    ch->ctl->size = ch->size;
    ch->ctl->nslots = ch->nslots;
    ch->ctl->slot_size = ch->slot_size;
    ch->ctl->slots_offset = ipcp__ctl_size();
    ch->slots_per_queue =
        (uint32_t)(cfg->slots_per_queue ? cfg->slots_per_queue
                                        : IPCP_SLOTS_PER_QUEUE);
    ch->ctl->slots_per_queue = ch->slots_per_queue;
    ch->ctl->version = IPCP_CHAN_VERSION;
    ch->ctl->magic = IPCP_CHAN_MAGIC;
    ch->slots = (char *)ch->base + ipcp__ctl_size();
    ch->exp = exp;
    dir->chan = ch;
    return ipcp__chan_bind_all(dir);
err_mem:
    comm->host_ops->mem_free(comm->host, ch->handle);
err_free:
    free(ch);
    return st;
}

/* Sender: maps the channel the receiver created and checks its header. */
ipcp_status_t ipcp__chan_import(ipcp_comm_t *comm, ipcp__dir_t *dir,
                                const ipcp__export_t *exp, int fd)
{
    ipcp__chan_t *ch = calloc(1, sizeof(*ch));
    ipcp_status_t st;

    if (!ch)
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_ENGINE, IPCP_ERR_NOMEM,
                          "no memory for a channel");
    st = comm->host_ops->mem_import(comm->host, exp, &fd, fd >= 0, -1,
                                    &ch->base, &ch->handle);
    if (st != IPCP_OK) {
        free(ch);
        return st;
    }
    ch->ctl = ch->base;
    ch->size = exp->size;
    ch->fd = -1;
    const ipcp__chan_ctl_t *c = ch->ctl;
    if (exp->size < ipcp__ctl_size() || c->magic != IPCP_CHAN_MAGIC ||
        c->version != IPCP_CHAN_VERSION || c->size != exp->size ||
        c->nslots < 1 || c->nslots > IPCP_MAX_SLOTS ||
        c->slot_size < IPCP_RING_SLOT_MIN ||
        c->slots_offset != ipcp__ctl_size() || c->slots_per_queue < 1 ||
        c->slots_per_queue > IPCP_MAX_SLOTS ||
        c->slot_size > (c->size - c->slots_offset) / c->nslots) {
        comm->host_ops->mem_unimport(comm->host, ch->handle);
        free(ch);
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_ENGINE, IPCP_ERR_STATE,
                          "the peer's channel header is not valid");
    }
    ch->nslots = (uint32_t)c->nslots;
    ch->slot_size = c->slot_size;
    ch->slots = (char *)ch->base + c->slots_offset;
    ch->slots_per_queue = (uint32_t)c->slots_per_queue;
    dir->chan = ch;
    return ipcp__chan_bind_all(dir);
}

/* Makes the bounce path's ring of dir's channel on device (slot
 * ring_slot[idx], set by the caller): 0, or -1 when it cannot be made or
 * shared (the last error says why). */
static int ipcp__chan_ring_make(ipcp_comm_t *comm, ipcp__dir_t *dir, int idx,
                                int device, size_t len)
{
    int shared = 0;
    if (ipcp__mem_alloc_internal(comm, len, device, &dir->ring[idx]) !=
        IPCP_OK) {
        dir->ring[idx] = NULL;
        return -1;
    }
    ipcp__lock(&comm->mem_lock, IPCP_LOCK_MEM);
    const ipcp__region_t *r =
        ipcp__region_find_alloc(comm, dir->ring[idx], len);
    if (r && r->exportable) {
        dir->ring_id[idx] = r->id;
        shared = 1;
    }
    ipcp__unlock(&comm->mem_lock, IPCP_LOCK_MEM);
    if (shared)
        return 0;
    ipcp__fail(IPCP_LOG_INFO, IPCP_SUB_ENGINE, IPCP_ERR_UNSUPPORTED,
               "the bounce ring on GPU %d cannot be shared", device);
    ipcp__mem_free(comm, dir->ring[idx]);
    dir->ring[idx] = NULL;
    return -1;
}

/* Receiver, the bounce path: the ring of dir's channel in device memory
 * on `device`, as many slots as the channel of slot_size bytes (fewer
 * where that would pass IPCP_BOUNCE_RING_MAX), made on first use (a ring
 * made before keeps its slots); *ring its slots, *id its region's number.
 * 0, or -1 when it cannot be made or shared (logged once; the transfers
 * go staged). */
int ipcp__chan_ring(ipcp_comm_t *comm, ipcp__dir_t *dir, int device,
                    uint64_t slot_size, ipcp__ring_t *ring, uint64_t *id)
{
    ipcp__mem_attr_t a = {.type = IPCP_MEM_CUDA, .device = device};
    int idx = ipcp__qset_index(&a);
    if (dir->ring_failed[idx])
        return ipcp__fail(IPCP_LOG_DEBUG, IPCP_SUB_ENGINE, IPCP_ERR_UNSUPPORTED,
                          "no ring could be made on GPU %d before", device),
               -1;
    if (!dir->ring[idx]) {
        dir->ring_slot[idx] = ipcp__min(
            slot_size, (IPCP_BOUNCE_RING_MAX / dir->chan->nslots) & ~4095ull);
        size_t len = (size_t)dir->chan->nslots * dir->ring_slot[idx];
        if (ipcp__chan_ring_make(comm, dir, idx, device, len) != 0) {
            dir->ring_failed[idx] = 1;
            IPCP_INFO(IPCP_SUB_ENGINE,
                      "no ring of %zu bytes in device memory on GPU %d (%s): "
                      "buffers that cannot be shared go staged",
                      len, device, ipcp__last_error());
            return -1;
        }
    }
    ring->slots = dir->ring[idx];
    ring->slot_size = dir->ring_slot[idx];
    *id = dir->ring_id[idx];
    return 0;
}

void ipcp__dir_destroy(ipcp_comm_t *comm, ipcp__dir_t *dir)
{
    for (int i = 0; i < IPCP_MAX_QSETS; i++) {
        if (dir->qsets[i])
            ipcp__qset_destroy(dir->qsets[i], dir->chan);
        dir->qsets[i] = NULL;
    }
    /* The queues that copied through it are drained now. */
    if (dir->dstage_reg)
        dir->dstage_ops->shm_unregister(dir->dstage_be, dir->dstage_reg);
    if (dir->dstage)
        munmap(dir->dstage, IPCP_DRIVE_STAGE);
    dir->dstage = dir->dstage_reg = NULL;
    ipcp__chan_t *ch = dir->chan;
    if (!ch)
        return;
    if (ch->fd >= 0)
        close(ch->fd);
    if (ch->created)
        comm->host_ops->mem_free(comm->host, ch->handle);
    else
        comm->host_ops->mem_unimport(comm->host, ch->handle);
    free(ch);
    dir->chan = NULL;
}

/* A lost peer writes no more flags: move the ones this side waits on far
 * ahead so that waits executed by a device (which cannot see peer->lost)
 * finish; their tracks have failed, so nothing is copied.  Only ours: when
 * the loss is declared here (a protocol error) the peer may still be
 * running, and must not see its own waits released (it learns of the loss
 * from the socket).  We wait on `full` and `done` of the channel we receive
 * on, and on `freed` of the one we send on. */
void ipcp__xfer_release_waits(ipcp_comm_t *comm, ipcp__peer_t *peer)
{
    ipcp__chan_ctl_t *rx = peer->rx.chan ? peer->rx.chan->ctl : NULL;
    ipcp__chan_ctl_t *tx = peer->tx.chan ? peer->tx.chan->ctl : NULL;
    (void)comm;
    for (int s = 0; s < IPCP_MAX_SLOTS; s++) {
        if (rx)
            __atomic_fetch_add(&rx->full[s].v, 1ull << 62, __ATOMIC_RELEASE);
        if (tx)
            __atomic_fetch_add(&tx->freed[s].v, 1ull << 62, __ATOMIC_RELEASE);
    }
    for (int q = 0; rx && q < IPCP_MAX_QSETS; q++)
        for (int j = 0; j < IPCP_MAX_QUEUES; j++)
            __atomic_fetch_add(&rx->done[q][j].v, 1ull << 62, __ATOMIC_RELEASE);
}

/* ---- Imported targets (two-sided direct) -------------------------------- */

void ipcp__import_put(ipcp_comm_t *comm, ipcp__peer_t *peer,
                      ipcp__import_t *imp)
{
    (void)comm;
    (void)peer;
    if (--imp->refs > 0)
        return;
    imp->ops->mem_unimport(imp->be, imp->handle);
    free(imp);
}

static ipcp__rexport_t *ipcp__rexport_find(ipcp__peer_t *peer, uint64_t id)
{
    ipcp__list_t *e, *tmp;
    ipcp__list_for_each_safe(e, tmp, &peer->rexports)
    {
        ipcp__rexport_t *x = ipcp__list_entry(e, ipcp__rexport_t, link);
        if (x->id == id)
            return x;
    }
    return NULL;
}

/* The peer's export of a region, kept as it came (with a duplicate of its
 * fd) so that a mapping can be made for another local device later: the
 * peer sends it once (with the CTS of a target, or the RTS of a source).
 * Region ids are the peer's, one space for both. */
void ipcp__rexport_put(ipcp__peer_t *peer, uint64_t id,
                       const ipcp__export_t *exp, const int *fds, int nfds)
{
    ipcp__rexport_t *rx = ipcp__rexport_find(peer, id);
    if (!rx) {
        if (!(rx = calloc(1, sizeof(*rx))))
            return; /* an import of it then fails, and says why */
        rx->id = id;
        ipcp__list_push_back(&peer->rexports, &rx->link);
    }
    rx->exp = *exp;
    rx->spent = 0;
    /* Too many, or no duplicates: its import fails, and says why. */
    (void)ipcp__fds_dup(&rx->fds, fds, nfds);
}

void ipcp__rexport_drop(ipcp__peer_t *peer, uint64_t id)
{
    ipcp__list_t *e, *tmp;
    ipcp__list_for_each_safe(e, tmp, &peer->rexports)
    {
        ipcp__rexport_t *x = ipcp__list_entry(e, ipcp__rexport_t, link);
        if (id && x->id != id)
            continue;
        ipcp__list_del(e);
        ipcp__fds_close(&x->fds);
        free(x);
    }
}

/* The peer's region id mapped for queues of attr's device and backend. */
ipcp_status_t ipcp__import_get(ipcp_comm_t *comm, ipcp__peer_t *peer,
                               uint64_t id, const ipcp__mem_attr_t *attr,
                               ipcp__import_t **out)
{
    ipcp__list_t *e, *tmp;
    ipcp__import_t *imp;
    ipcp_status_t st;

    int device = attr->type == IPCP_MEM_CUDA ? attr->device : -1;
    ipcp__rexport_t *rx = ipcp__rexport_find(peer, id);
    /* Keyed by the local device too: a mapping belongs to the context of
     * the device that opened it, and copies issued by another device's
     * streams through it would be cross-context copies. */
    ipcp__list_for_each_safe(e, tmp, &peer->imports)
    {
        imp = ipcp__list_entry(e, ipcp__import_t, link);
        if (imp->id == id && imp->device == device) {
            imp->refs++;
            *out = imp;
            return IPCP_OK;
        }
    }
    if (!rx)
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_ENGINE, IPCP_ERR_STATE,
                          "rank %d named region %llu, whose export never "
                          "came",
                          peer->rank, (unsigned long long)id);
    if (rx->spent)
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_ENGINE, IPCP_ERR_UNSUPPORTED,
                          "rank %d's region %llu is mapped for device %d "
                          "only: its descriptors (one for each of its "
                          "allocations) were not kept for another device",
                          peer->rank, (unsigned long long)id, rx->spent - 2);
    imp = calloc(1, sizeof(*imp));
    if (!imp)
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_ENGINE, IPCP_ERR_NOMEM,
                          "no memory for an import");
    ipcp__backend_of(comm, attr, &imp->ops, &imp->be);
    st = imp->ops->mem_import(imp->be, &rx->exp, rx->fds.fd, rx->fds.n, device,
                              &imp->ptr, &imp->handle);
    if (st != IPCP_OK) {
        free(imp);
        return st;
    }
    /* An export of many pieces keeps nothing open: the mapping holds its
     * memory, and dozens of descriptors kept for each region would exhaust
     * the process's (another device of ours then cannot map it). */
    if (rx->fds.n > 1) {
        ipcp__fds_close(&rx->fds);
        rx->spent = device + 2;
    }
    imp->id = id;
    imp->device = device;
    imp->size = rx->exp.size;
    imp->refs = 2; /* the cache's and this transfer's */
    ipcp__list_push_back(&peer->imports, &imp->link);
    *out = imp;
    return IPCP_OK;
}

/* ---- Enqueueing ---------------------------------------------------------- */

/* Pieces of a direct transfer.  Host copies run on worker threads, so
 * pieces on several queues copy in parallel; a GPU's copies of one
 * direction all go through one copy engine, which runs concurrent copies
 * one after the other (measured: 4 pieces of 64 MiB on 4 streams ran
 * back to back), so there a split only adds gaps and per-copy costs. */
unsigned ipcp__npieces(const ipcp_comm_t *comm, uint64_t len, unsigned nq,
                       int device)
{
    uint64_t piece = comm->cfg->piece ? comm->cfg->piece
                     : device         ? IPCP_PIECE_DEVICE
                                      : IPCP_PIECE_HOST;
    uint64_t n = len / piece;
    if (n < 1)
        n = 1;
    return (unsigned)(n < nq ? n : nq);
}

/* The sender's queue of piece i of direct transfer dseq: queues lo..nq-1
 * take the pieces in turn, starting at dseq's, and each writes its own
 * done flag.  Consecutive transfers start on different queues, so that
 * transfers of one piece each still overlap; each queue's flag only grows,
 * since a sender takes CTSs in dseq order.  lo is 0, or past the queues
 * the staged part of a striped transfer uses.  Both sides compute it. */
unsigned ipcp__direct_queue(uint64_t dseq, unsigned i, unsigned lo, unsigned nq)
{
    return lo + (unsigned)((dseq + i) % (nq - lo));
}

/* Piece i of n of len bytes: 4 KiB-aligned boundaries keep page-sized
 * copies whole. */
void ipcp__piece(uint64_t len, unsigned n, unsigned i, uint64_t *off,
                 uint64_t *plen)
{
    uint64_t per = ipcp__align_up(ipcp__div_up(len, n), 4096);
    uint64_t a = ipcp__min((uint64_t)i * per, len);
    uint64_t b = ipcp__min(a + per, len);
    *off = a;
    *plen = b - a;
}

/* Starts tracking; one guard reference keeps the track open while ops are
 * being enqueued, dropped by ipcp__xfer_go.  Each notify (and flag watch)
 * adds its own reference as it is enqueued. */
void ipcp__xfer_begin(ipcp_comm_t *comm, ipcp__peer_t *peer,
                      ipcp_request_t *req, int rx, size_t npieces)
{
    ipcp__xfer_t *x = &req->xfer;
    x->comm = comm;
    x->peer = peer;
    x->req = req;
    x->import = NULL;
    x->rx = rx;
    x->dev = req->attr.type == IPCP_MEM_CUDA;
    if (x->dev)
        atomic_fetch_add_explicit(&comm->dev_inflight, 1, memory_order_relaxed);
    ipcp__trace_prepare(comm, x, npieces);
    x->tbase = 0;
    x->err_slot2 = NULL;
    x->err_seq2 = 0;
    x->drive_id = 0;
    x->drive_staged = 0;
    x->early = 0;
    x->split_wait = 0;
    x->split_head = 0;
    memset(&x->stage, 0, sizeof(x->stage)); /* no staged chunks */
    x->watch.on = 0;
    ipcp__track_init(&x->track, 1, ipcp__xfer_track_done, x);
    ipcp__list_push_back(&peer->active, &x->link);
}

void ipcp__xfer_go(ipcp__xfer_t *x)
{
    if (x->req)
        ipcp__trace_mark(x->req, IPCP_TM_ENQ);
    ipcp__track_notify(&x->track);
}

/* Enqueue helpers: an enqueue failure fails the track (later ops skip). */
void ipcp__enq_check(ipcp__track_t *t, ipcp_status_t st)
{
    if (st != IPCP_OK)
        ipcp__track_fail(t, st, "cannot enqueue: %s", ipcp__last_error());
}

static void ipcp__fault_in_queue(void *arg)
{
    ipcp__fault_point((int)(intptr_t)arg);
}

/* IPCPIPE_FAULT at a stage a queue reaches (a copy done): through the
 * queue's order where the backend can call back, else at once. */
void ipcp__fault_enq(ipcp__qset_t *qs, ipcp__queue_t *q, ipcp__track_t *t,
                     int stage)
{
    if (!ipcp__fault_armed(stage))
        return;
    if (qs->ops->call)
        ipcp__enq_check(
            t, qs->ops->call(q, ipcp__fault_in_queue, (void *)(intptr_t)stage));
    else
        ipcp__fault_hit(stage);
}

void ipcp__enq_notify(ipcp__qset_t *qs, int q, ipcp__track_t *t)
{
    atomic_fetch_add_explicit(&t->pending, 1, memory_order_relaxed);
    if (qs->ops->notify(qs->q[q], t) != IPCP_OK) {
        ipcp__track_fail(t, IPCP_ERR_NOMEM, "cannot enqueue: %s",
                         ipcp__last_error());
        ipcp__track_notify(t);
    }
}

/* Ends the enqueueing of one side of a transfer whose operations went to
 * the queues in mask (bit i: queue i): a notify behind each.
 *
 * Stream-ordered operations (engine/sync.c) start only once the progress
 * thread has seen the user's stream reach them (so our in-order queues
 * never wait on a user's stream).  At the end the user's stream goes on
 * once all of the transfer's queues are done: the lowest queue joins the
 * others, then writes `done` (also after a failure, so that the user's
 * stream is not held forever); an empty ordered transfer uses queue 0. */
void ipcp__enq_end(ipcp_request_t *req, ipcp__qset_t *qs, unsigned mask)
{
    ipcp__track_t *t = &req->xfer.track;
    if (req->sync) {
        if (!mask)
            mask = 1;
        int first = __builtin_ctz(mask);
        for (int i = first + 1; i < qs->n; i++)
            if (mask & (1u << i))
                ipcp__enq_check(t, qs->ops->join
                                       ? qs->ops->join(qs->q[first], qs->q[i])
                                       : IPCP_ERR_UNSUPPORTED);
        ipcp__enq_check(
            t, qs->ops->flag_write(qs->q[first], ipcp__sync_done(req->sync),
                                   ipcp__sync_gen(req->sync), NULL));
    }
    for (int i = 0; i < qs->n; i++)
        if (mask & (1u << i))
            ipcp__enq_notify(qs, i, t);
}
