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
#include "engine/engine.h"
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
        *ops = comm->cuda_ops;
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
static ipcp_status_t ipcp__chan_create(ipcp_comm_t *comm, ipcp__dir_t *dir,
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
static ipcp_status_t ipcp__chan_import(ipcp_comm_t *comm, ipcp__dir_t *dir,
                                       const ipcp__export_t *exp, int fd)
{
    ipcp__chan_t *ch = calloc(1, sizeof(*ch));
    ipcp_status_t st;

    if (!ch)
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_ENGINE, IPCP_ERR_NOMEM,
                          "no memory for a channel");
    st = comm->host_ops->mem_import(comm->host, exp, fd, -1, &ch->base,
                                    &ch->handle);
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
        c->nslots < 1 || c->nslots > IPCP_MAX_SLOTS || c->slot_size == 0 ||
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
                       const ipcp__export_t *exp, int fd)
{
    ipcp__rexport_t *rx = ipcp__rexport_find(peer, id);
    if (!rx) {
        if (!(rx = calloc(1, sizeof(*rx))))
            return; /* an import of it then fails, and says why */
        rx->fd = -1;
        rx->id = id;
        ipcp__list_push_back(&peer->rexports, &rx->link);
    }
    if (rx->fd >= 0)
        close(rx->fd);
    rx->exp = *exp;
    rx->fd = fd >= 0 ? dup(fd) : -1;
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
        if (x->fd >= 0)
            close(x->fd);
        free(x);
    }
}

/* The peer's region id mapped for queues of attr's device and backend. */
static ipcp_status_t ipcp__import_get(ipcp_comm_t *comm, ipcp__peer_t *peer,
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
    imp = calloc(1, sizeof(*imp));
    if (!imp)
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_ENGINE, IPCP_ERR_NOMEM,
                          "no memory for an import");
    ipcp__backend_of(comm, attr, &imp->ops, &imp->be);
    st = imp->ops->mem_import(imp->be, &rx->exp, rx->fd, device, &imp->ptr,
                              &imp->handle);
    if (st != IPCP_OK) {
        free(imp);
        return st;
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
static unsigned ipcp__npieces(const ipcp_comm_t *comm, uint64_t len,
                              unsigned nq, int device)
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
static unsigned ipcp__direct_queue(uint64_t dseq, unsigned i, unsigned lo,
                                   unsigned nq)
{
    return lo + (unsigned)((dseq + i) % (nq - lo));
}

/* Piece i of n of len bytes: 4 KiB-aligned boundaries keep page-sized
 * copies whole. */
static void ipcp__piece(uint64_t len, unsigned n, unsigned i, uint64_t *off,
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
static void ipcp__xfer_begin(ipcp_comm_t *comm, ipcp__peer_t *peer,
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
    memset(&x->stage, 0, sizeof(x->stage)); /* no staged chunks */
    x->watch.on = 0;
    ipcp__track_init(&x->track, 1, ipcp__xfer_track_done, x);
    ipcp__list_push_back(&peer->active, &x->link);
}

static void ipcp__xfer_go(ipcp__xfer_t *x)
{
    if (x->req)
        ipcp__trace_mark(x->req, IPCP_TM_ENQ);
    ipcp__track_notify(&x->track);
}

/* Enqueue helpers: an enqueue failure fails the track (later ops skip). */
static void ipcp__enq_check(ipcp__track_t *t, ipcp_status_t st)
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
static void ipcp__fault_enq(ipcp__qset_t *qs, ipcp__queue_t *q,
                            ipcp__track_t *t, int stage)
{
    if (!ipcp__fault_armed(stage))
        return;
    if (qs->ops->call)
        ipcp__enq_check(
            t, qs->ops->call(q, ipcp__fault_in_queue, (void *)(intptr_t)stage));
    else
        ipcp__fault_hit(stage);
}

static void ipcp__enq_notify(ipcp__qset_t *qs, int q, ipcp__track_t *t)
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
static void ipcp__enq_end(ipcp_request_t *req, ipcp__qset_t *qs, unsigned mask)
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

/* Queues a staged transfer spreads its chunks over on a side with nq
 * queues (the receiver also computes it for the sender). */
static int ipcp__staged_nq(const ipcp__chan_t *ch, int nq)
{
    int n = (int)(ch->nslots / ch->slots_per_queue);
    return ipcp__max(1, ipcp__min(n, nq));
}

static int ipcp__staged_queues(const ipcp__chan_t *ch, const ipcp__qset_t *qs)
{
    return ipcp__staged_nq(ch, qs->n);
}

/* The queue (of nq) that copies ring chunk k on a side: by slot, so that
 * each slot is only ever filled, or emptied, by one queue of a side.  Any
 * assignment would do for the ring (a chunk waits only for earlier ones),
 * but this one keeps a slot's copies ordered inside the process: between
 * two queues the order would come from flags that pass through the peer,
 * which a thread checker does not see.  Consecutive chunks still take
 * turns over the queues. */
static uint64_t ipcp__staged_q(const ipcp__chan_t *ch, uint64_t k, uint64_t nq)
{
    return (k % ch->nslots) % nq;
}

/* Fills a transfer's error slot for the peer (the sequence number last,
 * with release order, so the peer never sees a number with a stale
 * status). */
void ipcp__err_report(ipcp__errslot_t *slot, uint64_t seq, ipcp__track_t *t)
{
    __atomic_store_n(&slot->status, (int64_t)atomic_load(&t->status),
                     __ATOMIC_RELAXED);
    __atomic_store_n(&slot->seq, seq, __ATOMIC_RELEASE);
}

/* Staged layout.  The pipeline of a transfer lasts about one chunk's copy
 * longer than its data takes (the receiver's first copy waits for the
 * sender's first; the sender's last ends before the receiver's): with
 * 16 MiB slots that is 6% of a 256 MiB transfer.  Transfers of at least 4
 * slots therefore start with chunks of 1/8, 1/4 and 1/2 slot and end with
 * the same in reverse, which leaves 1/8 slot of it.  Both sides compute the
 * same layout from the length and the slot size. */
#define IPCP_RAMP_STEPS 3
#define IPCP_RAMP_MIN   ((uint64_t)64 << 10)

/* The nominal chunk of a staged transfer: a slot, or for the staged part
 * of a striped transfer ipcp__stripe_unit (backend.h). */
static uint64_t ipcp__staged_unit(uint64_t len, uint64_t slot, int striped)
{
    return striped ? ipcp__stripe_unit(len, slot) : slot;
}

/* Ramps are for whole-slot chunks: a striped transfer's staged part is
 * cut in few chunks on purpose (ipcp__stripe_unit). */
static int ipcp__staged_ramp(uint64_t len, uint64_t unit, uint64_t slot)
{
    return unit == slot && len >= 4 * unit &&
           (unit >> IPCP_RAMP_STEPS) >= IPCP_RAMP_MIN;
}

/* Ramp chunk i (0 smallest). */
static uint64_t ipcp__ramp_len(uint64_t slot, unsigned i)
{
    return slot >> (IPCP_RAMP_STEPS - i);
}

static uint64_t ipcp__ramp_sum(uint64_t slot)
{
    uint64_t sum = 0;
    for (unsigned i = 0; i < IPCP_RAMP_STEPS; i++)
        sum += ipcp__ramp_len(slot, i);
    return sum;
}

static uint64_t ipcp__staged_nchunks(uint64_t len, uint64_t slot,
                                     uint64_t ring_slot)
{
    if (!ipcp__staged_ramp(len, slot, ring_slot))
        return ipcp__div_up(len, slot);
    return 2 * IPCP_RAMP_STEPS +
           ipcp__div_up(len - 2 * ipcp__ramp_sum(slot), slot);
}

/* Byte range of chunk c of a transfer of len bytes. */
static void ipcp__staged_chunk(uint64_t len, uint64_t slot, uint64_t ring_slot,
                               uint64_t nchunks, uint64_t c, uint64_t *off,
                               uint64_t *n)
{
    if (!ipcp__staged_ramp(len, slot, ring_slot)) {
        *off = c * slot;
        *n = ipcp__min(slot, len - *off);
        return;
    }
    uint64_t rs = ipcp__ramp_sum(slot), mid = nchunks - 2 * IPCP_RAMP_STEPS;
    if (c < IPCP_RAMP_STEPS) { /* head: 1/8, 1/4, 1/2 */
        *off = 0;
        for (unsigned i = 0; i < c; i++)
            *off += ipcp__ramp_len(slot, i);
        *n = ipcp__ramp_len(slot, (unsigned)c);
    } else if (c < IPCP_RAMP_STEPS + mid) { /* full slots, the last short */
        uint64_t m = c - IPCP_RAMP_STEPS;
        *off = rs + m * slot;
        *n = ipcp__min(slot, len - rs - *off);
    } else { /* tail: 1/2, 1/4, 1/8 */
        unsigned t = (unsigned)(c - IPCP_RAMP_STEPS - mid);
        *off = len - rs;
        for (unsigned i = 0; i < t; i++)
            *off += ipcp__ramp_len(slot, IPCP_RAMP_STEPS - 1 - i);
        *n = ipcp__ramp_len(slot, IPCP_RAMP_STEPS - 1 - t);
    }
}

/* Mask of the queues a staged transfer of nchunks from ring chunk base
 * uses (remote_done: also queue 0, where a put's sender waits at the
 * end). */
static unsigned ipcp__staged_mask(const ipcp__chan_t *ch,
                                  const ipcp__qset_t *qs, uint64_t base,
                                  uint64_t nchunks, int remote_done)
{
    uint64_t nq = (uint64_t)ipcp__staged_queues(ch, qs);
    unsigned m = remote_done ? 1u : 0u;
    for (uint64_t c = 0; c < nchunks && c < ch->nslots; c++)
        m |= 1u << ipcp__staged_q(ch, base + c, nq);
    return m;
}

/* Sets up one side's half of a staged transfer of len bytes at buf, ring
 * chunks base.. on (ipcp__stage_step enqueues it).  Per chunk c the sender
 * waits for its slot to be freed (generation c / S), copies in and marks
 * it full; the receiver waits for full, copies out and marks it freed. */
static void ipcp__stage_init(ipcp__xfer_t *x, ipcp__chan_t *ch, char *buf,
                             uint64_t len, uint64_t unit, uint64_t base,
                             int send, int remote_done, ipcp__errslot_t *slot,
                             uint64_t seq)
{
    x->stage = (ipcp__stage_t){
        .ch = ch,
        .buf = buf,
        .len = len,
        .unit = unit,
        .base = base,
        .nchunks = ipcp__staged_nchunks(len, unit, ch->slot_size),
        .send = send,
        .remote_done = remote_done,
        .slot = slot,
        .seq = seq};
}

/* Enqueues up to n more chunks of the stage on st->qs; returns 1 once all
 * of them and the marks and waits after them are in. */
static int ipcp__stage_step(ipcp__xfer_t *x, uint64_t n)
{
    ipcp__stage_t *st = &x->stage;
    ipcp__qset_t *qs = st->qs;
    ipcp__chan_t *ch = st->ch;
    ipcp__peer_t *peer = x->peer;
    ipcp__track_t *t = &x->track;
    ipcp__flag_t *wait = st->send ? ch->ctl->freed : ch->ctl->full;
    ipcp__flag_t *mark = st->send ? ch->ctl->full : ch->ctl->freed;
    uint64_t nq = (uint64_t)ipcp__staged_queues(ch, qs);
    uint64_t end = st->nchunks - st->next > n ? st->next + n : st->nchunks;
    __typeof__(qs->ops->flag_wait) ring_wait =
        qs->ops->flag_wait_ring ? qs->ops->flag_wait_ring : qs->ops->flag_wait;
    /* A chunk's mark goes into its queue with the wait of that queue's next
     * chunk, as one operation where the backend has one: the same order,
     * and less time between two copies. */
    for (uint64_t c = st->next; c < end; c++) {
        uint64_t g = (st->base + c) / ch->nslots,
                 s = (st->base + c) % ch->nslots;
        uint64_t off, len, qi = ipcp__staged_q(ch, st->base + c, nq);
        ipcp__staged_chunk(st->len, st->unit, ch->slot_size, st->nchunks, c,
                           &off, &len);
        char *sl = ch->slots + s * ch->slot_size;
        ipcp__queue_t *q = qs->q[qi];
        uint64_t *held = st->held[qi], held_v = st->held_v[qi];
        /* Not tied to the track: a failed transfer's waits still run, so
         * its marks keep their order with the marks of the transfers
         * around it on the other queues. */
        int paired = held && qs->ops->flag_write_wait;
        ipcp_status_t rc =
            paired ? qs->ops->flag_write_wait(q, held, held_v, &wait[s].v,
                                              st->send ? g : g + 1, &peer->lost)
                   : IPCP_OK;
        ipcp__enq_check(t, rc);
        if (!paired || rc != IPCP_OK) {
            /* One at a time, also when the pair could not be enqueued: a
             * failed transfer's mark must still go in (writing a flag's
             * value twice, or waiting twice, is harmless). */
            if (held)
                ipcp__enq_check(t, qs->ops->flag_write(q, held, held_v, NULL));
            ipcp__enq_check(t, ring_wait(q, &wait[s].v, st->send ? g : g + 1,
                                         &peer->lost, NULL));
        }
        ipcp__trace_piece(x, x->tbase + c, qs, (int)qi, len, 1);
        ipcp__enq_check(t,
                        qs->ops->copy(q, st->send ? sl : st->buf + off,
                                      st->send ? st->buf + off : sl, len, t));
        ipcp__trace_piece(x, x->tbase + c, qs, (int)qi, len, 0);
        ipcp__fault_enq(qs, q, t, IPCP_FAULT_STAGED_CHUNK);
        /* A failed transfer keeps the ring moving (its copies are skipped,
         * its marks are not), so the peer is never left waiting; a sender
         * says so in the error slot before any later mark. */
        if (st->slot && !st->reported && !ipcp__track_ok(t)) {
            ipcp__err_report(st->slot, st->seq, t);
            st->reported = 1;
        }
        st->held[qi] = &mark[s].v;
        st->held_v[qi] = g + 1;
    }
    st->next = end;
    if (end < st->nchunks)
        return 0;
    for (uint64_t qi = 0; qi < nq; qi++)
        if (st->held[qi])
            ipcp__enq_check(t, qs->ops->flag_write(qs->q[qi], st->held[qi],
                                                   st->held_v[qi], NULL));
    if (st->slot && !st->reported && !ipcp__track_ok(t))
        ipcp__err_report(st->slot, st->seq, t);
    /* A put's sender also waits, at the end, until the target has copied
     * out its last chunks (a put completes at the target): copy-out of
     * every earlier chunk is implied by our own later sends that reused
     * its slot. */
    uint64_t first = st->nchunks > ch->nslots ? st->nchunks - ch->nslots : 0;
    for (uint64_t c = first; st->remote_done && c < st->nchunks; c++) {
        uint64_t g = (st->base + c) / ch->nslots,
                 s = (st->base + c) % ch->nslots;
        ipcp__enq_check(t, ring_wait(qs->q[0], &ch->ctl->freed[s].v, g + 1,
                                     &peer->lost, NULL));
    }
    return 1;
}

/* Ends one side's enqueueing once its staged chunks are all in. */
static void ipcp__stage_done(ipcp__xfer_t *x)
{
    ipcp__enq_end(x->req, x->stage.qs, x->stage.mask);
    ipcp__xfer_go(x);
}

/* How long a receiver's chunks may wait to be enqueued: its first copy
 * cannot start before the sender's first chunk is copied out, which takes
 * at least that chunk at IPCP_STAGE_DEFER_RATE bytes per ns (pinned copies
 * ran at 50-55 GB/s on the H200 machines), and never more than
 * IPCP_STAGE_DEFER_MAX. */
#define IPCP_STAGE_DEFER_RATE 64
#define IPCP_STAGE_DEFER_MAX  ((uint64_t)100 * 1000)

/* One side of a transfer has everything but its staged chunks in the
 * queues of qs (mask: the queues of the rest).  A sender's first chunk
 * goes in now (the pipeline starts with it); its other chunks, and all of
 * a receiver's (whose first copy waits for the sender's first chunk to be
 * copied out), a chunk per turn of the progress loop, in the order the
 * transfers came (ipcp__stage_poll).  While our own send to the same peer
 * waits for its CTS, a receiver's chunks wait too, up to the time that
 * copy-out takes: both ways at once, enqueueing them first (a few driver
 * calls each) kept the CTS of our send unread for 20-25 us on H200s, and
 * its direct part unstarted. */
static void ipcp__stage_go(ipcp_comm_t *comm, ipcp__xfer_t *x, ipcp__qset_t *qs,
                           unsigned mask)
{
    ipcp__stage_t *st = &x->stage;
    st->qs = qs;
    st->mask = mask;
    if (st->nchunks)
        st->mask |= ipcp__staged_mask(st->ch, qs, st->base, st->nchunks,
                                      st->remote_done);
    if (!st->send && st->nchunks) {
        uint64_t off, len0;
        ipcp__staged_chunk(st->len, st->unit, st->ch->slot_size, st->nchunks, 0,
                           &off, &len0);
        st->due_ns = ipcp__now_ns() + ipcp__min(len0 / IPCP_STAGE_DEFER_RATE,
                                                IPCP_STAGE_DEFER_MAX);
    }
    if (st->nchunks == 0 || (st->send && ipcp__stage_step(x, 1))) {
        ipcp__stage_done(x);
        return;
    }
    qs->staging++;
    ipcp__list_push_back(&comm->staging, &st->link);
}

static void ipcp__stage_finish(ipcp__xfer_t *x)
{
    ipcp__list_del(&x->stage.link);
    x->stage.qs->staging--;
    ipcp__stage_done(x);
}

/* Enqueues every chunk the transfer still has to go, and ends its staging. */
static void ipcp__stage_drain(ipcp__xfer_t *x)
{
    ipcp__stage_step(x, UINT64_MAX);
    ipcp__stage_finish(x);
}

/* A receiver's chunks may wait while our own send to that peer waits for
 * its CTS, until st->due_ns (ipcp__stage_go).  *now: the clock, read once
 * a turn and only when needed. */
static int ipcp__stage_due(const ipcp__xfer_t *x, uint64_t *now)
{
    if (x->stage.send || ipcp__list_empty(&x->peer->wait_cts))
        return 1;
    if (!*now)
        *now = ipcp__now_ns();
    return *now >= x->stage.due_ns;
}

/* Enqueues one chunk of the first transfer whose chunks may go in now and
 * whose queue set has no earlier transfer still staging (ring order). */
int ipcp__stage_poll(ipcp_comm_t *comm)
{
    ipcp__qset_t *held[8];
    unsigned nheld = 0;
    uint64_t now = 0;

    for (ipcp__list_t *e = comm->staging.next; e != &comm->staging;
         e = e->next) {
        ipcp__xfer_t *x = ipcp__list_entry(e, ipcp__xfer_t, stage.link);
        unsigned i = 0;
        while (i < nheld && held[i] != x->stage.qs)
            i++;
        if (i == nheld && ipcp__stage_due(x, &now)) {
            if (ipcp__stage_step(x, 1))
                ipcp__stage_finish(x);
            return 1;
        }
        if (i == nheld) {
            if (nheld == sizeof(held) / sizeof(held[0]))
                break;
            held[nheld++] = x->stage.qs;
        }
    }
    return 0;
}

/* Before anything else goes into the queues of qs: the chunks of earlier
 * transfers still to go there go first (a ring's chunks must enter its
 * queues in ring order). */
static void ipcp__stage_flush(ipcp_comm_t *comm, ipcp__qset_t *qs)
{
    ipcp__list_t *e, *tmp;
    if (!qs->staging)
        return;
    ipcp__list_for_each_safe(e, tmp, &comm->staging)
    {
        ipcp__xfer_t *x = ipcp__list_entry(e, ipcp__xfer_t, stage.link);
        if (x->stage.qs == qs)
            ipcp__stage_drain(x);
    }
}

/* ---- Watching striped transfers (IPCPIPE_STRIPE_ADAPT) ------------------ */

static int ipcp__watch_reached(const uint64_t *flag, uint64_t value)
{
    return ipcp__flag_reached(__atomic_load_n(flag, __ATOMIC_ACQUIRE), value);
}

/* The communicator's memo of the pair src_id -> dst, or NULL. */
static ipcp__stripe_memo_t *ipcp__stripe_memo_find(ipcp_comm_t *comm,
                                                   uint64_t src_id, int dst)
{
    for (int i = 0; i < comm->nstripe_memo; i++)
        if (comm->stripe_memo[i].src_id == src_id &&
            comm->stripe_memo[i].dst == dst)
            return &comm->stripe_memo[i];
    return NULL;
}

/* Runs every turn of the progress loop while transfers are watched: the
 * clock is read only when an end is newly seen. */
void ipcp__stripe_watch(ipcp_comm_t *comm)
{
    ipcp__list_t *e, *tmp;
    uint64_t now = 0;
    ipcp__list_for_each_safe(e, tmp, &comm->watching)
    {
        ipcp__xfer_t *x = ipcp__list_entry(e, ipcp__xfer_t, watch.link);
        ipcp__watch_t *w = &x->watch;
        if (!w->t_direct) {
            unsigned i = 0;
            while (
                i < w->np &&
                ipcp__watch_reached(
                    &w->done[ipcp__direct_queue(w->dseq, i, w->lo_s, w->snq)].v,
                    w->dseq))
                i++;
            if (i == w->np)
                w->t_direct = now ? now : (now = ipcp__now_ns());
        }
        if (!w->t_staged && ipcp__watch_reached(w->last, w->last_v))
            w->t_staged = now ? now : (now = ipcp__now_ns());
        /* A driven transfer's flags are its own queues', raised after the
         * last copy of each: its data is in place. */
        if (w->t_direct && w->t_staged && x->drive_id)
            ipcp__xfer_end_early(x);
    }
}

void ipcp__stripe_watch_end(ipcp_comm_t *comm, ipcp__xfer_t *x, int ok)
{
    ipcp__watch_t *w = &x->watch;
    if (!w->on)
        return;
    w->on = 0;
    ipcp__list_del(&w->link);
    ipcp__stripe_memo_t *m =
        w->adapt ? ipcp__stripe_memo_find(comm, w->src_id, w->dst) : NULL;
    ipcp__adapt_t *a = m ? &m->adapt[w->both][w->cls] : NULL;
    /* Both parts have ended: one not seen yet ended by now.  Where neither
     * was seen (the thread was busy, or asleep: host queues do not keep it
     * spinning), which ended first is unknown. */
    int seen = (w->t_direct != 0) + (w->t_staged != 0);
    if (a && (!ok || !x->req || !seen))
        ipcp__adapt_forget(a);
    if (!ok || !x->req)
        return;
    uint64_t now = ipcp__now_ns();
    double td = (double)((w->t_direct ? w->t_direct : now) - w->t0) / 1e3;
    double ts = (double)((w->t_staged ? w->t_staged : now) - w->t0) / 1e3;
    /* An end not seen is only bounded: a staged part that ended before
     * that bound is not known to be early (the factor may rise on it). */
    double f = a && seen
                   ? ipcp__adapt_learn(a, td, w->t_direct || ts >= td ? ts : td)
                   : -1;
    /* The line is formatted only where it is written: this runs at the
     * end of every watched transfer. */
    if (!ipcp__log_enabled(IPCP_LOG_DEBUG, IPCP_SUB_ENGINE))
        return;
    char fs[48] = "";
    if (f >= 0)
        snprintf(fs, sizeof(fs), "; %s share factor of its size now %.3f",
                 w->both ? "both-ways" : "one-way", f);
    IPCP_DEBUG(IPCP_SUB_ENGINE,
               "striped transfer of %llu bytes from rank "
               "%d: direct part ended %s%.1f us after %s, staged part "
               "(%llu bytes) %s%.1f us%s",
               (unsigned long long)x->req->nbytes, x->peer->rank,
               w->t_direct ? "" : "by ", td,
               x->drive_id ? "this process began copying" : "the CTS",
               (unsigned long long)w->slen, w->t_staged ? "" : "by ", ts, fs);
}

void ipcp__stage_flush_all(ipcp_comm_t *comm)
{
    while (!ipcp__list_empty(&comm->staging))
        ipcp__stage_drain(
            ipcp__list_entry(comm->staging.next, ipcp__xfer_t, stage.link));
}

/* ---- Receiver side ------------------------------------------------------- */

/* Why the path was chosen, kept as what was seen: the sentence is only
 * written when it is logged or returned in an error (formatting it for
 * every transfer cost a few tenths of a microsecond before each CTS). */
enum {
    IPCP_WHY_KINDS,    /* source and destination memory differ */
    IPCP_WHY_NO_PEER,  /* the peer's GPU cannot reach this one */
    IPCP_WHY_MAPPED,   /* the buffer lies in a shareable allocation */
    IPCP_WHY_PVM,      /* process_vm_writev allowed */
    IPCP_WHY_UNSHARED, /* none of the above */
    IPCP_WHY_FORCED_STAGED,
    IPCP_WHY_DRIVEN, /* this process copies it (IPCPIPE_DRIVE) */
};

typedef struct ipcp__choice {
    ipcp_path_t path;
    int mode;              /* IPCP_DST_MAPPED or IPCP_DST_PVM */
    ipcp__region_t region; /* MAPPED: copy of the allocation */
    int why;               /* IPCP_WHY_* */
    int src_type;          /* the RTS's ipcp_mem_type_t */
    uint64_t staged;       /* striped: bytes staged at once */
} ipcp__choice_t;

static void ipcp__choice_why(const ipcp_comm_t *comm, const ipcp__peer_t *peer,
                             const ipcp_request_t *req, const ipcp__choice_t *c,
                             char *buf, size_t len)
{
    int n = 0;
    switch (c->why) {
    case IPCP_WHY_KINDS:
        n = snprintf(buf, len,
                     "source and destination are different kinds "
                     "of memory (%s to %s)",
                     c->src_type == IPCP_MEM_CUDA ? "cuda" : "host",
                     req->attr.type == IPCP_MEM_CUDA ? "cuda" : "host");
        break;
    case IPCP_WHY_NO_PEER:
        n = snprintf(buf, len,
                     "rank %d's GPU cannot access this GPU "
                     "directly (no peer access, or not visible to it)",
                     peer->rank);
        break;
    case IPCP_WHY_MAPPED:
        n = snprintf(buf, len,
                     "receive buffer lies in shareable allocation "
                     "%llu",
                     (unsigned long long)c->region.id);
        break;
    case IPCP_WHY_PVM:
        n = snprintf(buf, len,
                     "rank %d may write this process's memory with "
                     "process_vm_writev",
                     peer->rank);
        break;
    case IPCP_WHY_DRIVEN:
        n = snprintf(buf, len,
                     "this process copies it out of rank %d's "
                     "buffer, mapped here%s",
                     peer->rank,
                     c->src_type == IPCP_MEM_CUDA ? ", with queues on its GPU"
                                                  : "");
        break;
    case IPCP_WHY_UNSHARED:
        n = snprintf(buf, len,
                     "receive buffer is not shareable (not from "
                     "ipcp_mem_alloc%s)",
                     req->attr.type != IPCP_MEM_HOST ? ""
                     : comm->cfg->pvm == IPCP_PVM_OFF
                         ? "; IPCPIPE_PVM=off"
                         : "; process_vm_writev not permitted to the sender");
        break;
    default:
        n = snprintf(buf, len, "staged path forced");
        break;
    }
    if (c->staged && n >= 0 && (size_t)n < len)
        snprintf(buf + n, len - (size_t)n, "; %llu bytes staged at once",
                 (unsigned long long)c->staged);
}

/* Device to device: may the sender's device write this buffer's device? */
static int ipcp__reachable(ipcp_comm_t *comm, const ipcp__msg_rts_t *rts,
                           const ipcp_request_t *req)
{
    uint64_t mine;
    if (!ipcp__dev(comm) || !comm->cuda_ops->device_reach ||
        comm->cuda_ops->device_reach(ipcp__dev(comm), req->attr.device, &mine,
                                     1) != 1)
        return 0;
    for (uint32_t i = 0; i < rts->nreach && i < IPCP_MAX_REACH; i++)
        if (rts->reach[i] == mine)
            return 1;
    return 0;
}

static void ipcp__choose(ipcp_comm_t *comm, const ipcp__msg_rts_t *rts,
                         ipcp_request_t *req, ipcp__choice_t *ch)
{
    ipcp__region_t *r;
    /* The region is copied under the lock: a user thread may free it
     * meanwhile (it stays mapped on the peer's side until the peer drops
     * it, so a transfer already on its way stays harmless). */
    int found = 0, shareable = 0;
    ch->mode = 0;
    ch->src_type = rts->src_type;
    ch->staged = 0;
    pthread_mutex_lock(&comm->mem_lock);
    /* A stale region made for the user's memory: ipcp__region_auto below
     * replaces it. */
    r = ipcp__region_find_live(comm, req->buf, req->len, req->attr.buffer_id);
    if (r) {
        found = 1;
        shareable = r->exportable;
        ch->region = *r;
    }
    pthread_mutex_unlock(&comm->mem_lock);
    if (!found && req->attr.type == IPCP_MEM_CUDA &&
        rts->src_type == IPCP_MEM_CUDA && ipcp__reachable(comm, rts, req)) {
        /* cudaMalloc'd memory: exported (legacy IPC) once per allocation;
         * auto regions are only touched by this thread. */
        r = ipcp__region_auto(comm, &req->attr);
        if (r) {
            found = shareable = 1;
            ch->region = *r;
        }
    }
    if (rts->src_type != (int32_t)req->attr.type) {
        ch->why = IPCP_WHY_KINDS;
    } else if (req->attr.type == IPCP_MEM_CUDA &&
               !ipcp__reachable(comm, rts, req)) {
        ch->why = IPCP_WHY_NO_PEER;
    } else if (found && shareable) {
        ch->mode = IPCP_DST_MAPPED;
        ch->why = IPCP_WHY_MAPPED;
    } else if (req->attr.type == IPCP_MEM_HOST &&
               (rts->hdr.flags & IPCP_RTS_PVM_OK) &&
               comm->cfg->pvm != IPCP_PVM_OFF) {
        ch->mode = IPCP_DST_PVM;
        ch->why = IPCP_WHY_PVM;
    } else {
        ch->why = IPCP_WHY_UNSHARED;
    }
    ch->path = ch->mode ? IPCP_PATH_DIRECT : IPCP_PATH_STAGED;
}

static void ipcp__log_choice(ipcp_comm_t *comm, ipcp__peer_t *peer,
                             const ipcp_request_t *req, const ipcp__choice_t *c,
                             ipcp_path_t force)
{
    unsigned bit = 1u << (c->path * 3 + (unsigned)c->mode);
    int lvl = (peer->logged_paths & bit) ? IPCP_LOG_DEBUG : IPCP_LOG_INFO;
    peer->logged_paths |= bit;
    if (!ipcp__log_enabled(lvl, IPCP_SUB_ENGINE))
        return;
    char why[200];
    ipcp__choice_why(comm, peer, req, c, why, sizeof(why));
    IPCP_LOG(lvl, IPCP_SUB_ENGINE, "%zu bytes from rank %d: %s path%s (%s)",
             req->len, peer->rank, ipcp_path_name(c->path),
             force != IPCP_PATH_AUTO ? " (forced)" : "", why);
}

/* ---- Striping (receiver's decision) -------------------------------------- */

/* This process's ordinal of the device whose identity is id, or -1. */
static int ipcp__local_device(ipcp_comm_t *comm, uint64_t id)
{
    for (int d = 0; d < IPCP_MAX_DEVICES; d++) {
        uint64_t mine;
        if (comm->cuda_ops->device_reach(ipcp__dev(comm), d, &mine, 1) != 1)
            break;
        if (mine == id)
            return d;
    }
    return -1;
}

/* IPCPIPE_STRIPE=auto: the measured share and smallest size for the pair,
 * remembered per communicator (the measurement runs at most once per pair
 * and machine, the file keeps it). */
static ipcp__stripe_memo_t *ipcp__stripe_auto(ipcp_comm_t *comm,
                                              ipcp__peer_t *peer,
                                              uint64_t src_id, int dst)
{
    ipcp__stripe_memo_t *m = ipcp__stripe_memo_find(comm, src_id, dst);
    ipcp__stripe_entry_t e;
    int fresh = !m;
    if (m && m->measured)
        return m;
    if (fresh) {
        int i = comm->nstripe_memo;
        if (i == IPCP_STRIPE_MEMO) /* full: replace in turn (the file has it) */
            i = (int)(comm->stripe_memo_next++ % IPCP_STRIPE_MEMO);
        m = &comm->stripe_memo[i];
        m->src_id = src_id;
        m->dst = dst;
        for (unsigned b = 0; b < 2; b++)
            for (unsigned c = 0; c < IPCP_ADAPT_CLASSES; c++)
                ipcp__adapt_init(&m->adapt[b][c]);
        if (comm->nstripe_memo < IPCP_STRIPE_MEMO)
            comm->nstripe_memo = i + 1;
    }
    /* A measurement allocates and registers memory, which waits for every
     * stream of the context: with a user's stream waiting on us that never
     * ends (a stream-ordered receive of 8 MiB with no cache file hung the
     * benchmark).  Then only the file is read, once, and the transfers go
     * unstriped until one finds no stream waiting.  calibrating, raised
     * before the streams are counted, holds back stream-ordered calls made
     * meanwhile (ipcp__sync_acquire) until the measurement is over. */
    atomic_store(&comm->calibrating, 1);
    int waiting = ipcp__streams_wait(comm);
    if (waiting && !fresh) { /* the file was read already */
        atomic_store(&comm->calibrating, 0);
        return m;
    }
    memset(&m->e, 0, sizeof(m->e));
    m->measured = 1;
    int src = ipcp__local_device(comm, src_id);
    ipcp_status_t st;
    if (src < 0) {
        IPCP_INFO(IPCP_SUB_ENGINE,
                  "no striping from rank %d: its GPU is "
                  "not visible to this process, so the links cannot be "
                  "measured here",
                  peer->rank);
    } else if ((st = ipcp__stripe_tune(
                    comm->cfg, comm->cuda_ops, ipcp__dev(comm), src, dst,
                    waiting ? IPCP_TUNE_CACHED : IPCP_TUNE_AUTO, &e)) ==
               IPCP_OK) {
        m->e = e;
    } else if (waiting && st == IPCP_ERR_STATE) {
        m->measured = 0;
        IPCP_INFO(IPCP_SUB_ENGINE,
                  "striping from rank %d (GPU %d -> GPU "
                  "%d) not measured yet, and a stream of this process waits "
                  "on a transfer, so it is not measured now: unstriped until "
                  "a transfer finds no stream waiting (ipcpipe-bench --tune "
                  "measures it beforehand)",
                  peer->rank, src, dst);
    } else {
        IPCP_INFO(IPCP_SUB_ENGINE,
                  "no striping from rank %d (GPU %d -> "
                  "GPU %d): %s",
                  peer->rank, src, dst, ipcp__last_error());
    }
    atomic_store(&comm->calibrating, 0);
    return m;
}

/* Only transfers large enough to stripe count: a small message the other
 * way (a control receive posted ahead, as ipcpipe-bench's rank 1 posts one
 * for rank 0's verdict) loads no link for long, and counting it left every
 * 256 MiB transfer beside it unstriped.  Posted and waiting ones of any
 * memory (a host buffer may still be filled from the peer's GPU, over the
 * PCIe link a staged part uses), by their buffer's size; those in queues
 * of device memory, as before, by what they move. */
int ipcp__peer_busy(ipcp__peer_t *peer, int rx)
{
    ipcp__list_t *e, *tmp;
    ipcp__list_for_each_safe(e, tmp, rx ? &peer->posted : &peer->wait_cts)
    {
        if (ipcp__list_entry(e, ipcp_request_t, link)->len >=
            IPCP_STRIPE_MIN_SIZE)
            return 1;
    }
    ipcp__list_for_each_safe(e, tmp, &peer->active)
    {
        const ipcp__xfer_t *x = ipcp__list_entry(e, ipcp__xfer_t, link);
        if (x->rx == rx && x->dev && x->req &&
            x->req->nbytes >= IPCP_STRIPE_MIN_SIZE)
            return 1;
    }
    return 0;
}

_Static_assert(IPCP_ADAPT_CLASS0 == IPCP_STRIPE_MIN_SIZE,
               "adapt's first size class starts where auto striping does");

/* IPCPIPE_STRIPE=auto: the staged share of a transfer between two GPUs
 * (0: none) and *min, the smallest size it applies from on the path that
 * moves it: driven (the receiver copies, as the calibration did), or the
 * ring (ring = 1), which starts later whatever layout the pair was
 * measured in (a stream-ordered transfer takes the ring under
 * IPCPIPE_DRIVE too).  With IPCPIPE_STRIPE_ADAPT on, the share follows the
 * pair's adapt state (*a, which w then names), on either path, except for
 * driven transfers both ways (below).
 *
 * Below the smallest size a calibration picks, none is needed.  While both
 * directions run, each GPU's copy engines move NVLink traffic both ways
 * and both staged parts: on 2 x H200 the one-way share lost both ways at
 * 256 MiB (striped 605-632 GB/s against 738-741 direct), and fixed shares
 * from 9% lost at every size, while 7% gained from 512 MiB (793 / 762,
 * 1 GiB 810-815 / 771).  So both ways stripe from IPCP_STRIPE_BIDIR_MIN
 * only, at the share the calibration found both ways.  The sender says
 * whether it receives from us too: our own send may not be posted yet when
 * its RTS meets our receive (which left 655 against 741 at 256 MiB). */
static double ipcp__stripe_auto_share(ipcp_comm_t *comm, ipcp__peer_t *peer,
                                      const ipcp__msg_rts_t *rts,
                                      const ipcp_request_t *req,
                                      ipcp_path_t force, int ring,
                                      ipcp__watch_t *w, uint64_t *min,
                                      ipcp__adapt_t **a)
{
    if (force != IPCP_PATH_AUTO || rts->len < IPCP_STRIPE_MIN_SIZE)
        return 0;
    int both =
        ipcp__peer_busy(peer, 0) || (rts->hdr.flags & IPCP_RTS_PEER_RECV);
    if (both && rts->len < IPCP_STRIPE_BIDIR_MIN)
        return 0;
    ipcp__stripe_memo_t *m =
        ipcp__stripe_auto(comm, peer, rts->reach[0], req->attr.device);
    double share = ipcp__stripe_share(&m->e, rts->len, both);
    *min = ipcp__stripe_engine_min(m->e.min_size, ring ? IPCP_STRIPE_RING
                                                       : IPCP_STRIPE_DRIVEN);
    /* Driven both ways, the share stays the calibrated one and nothing is
     * watched (ipcp__xfer_drive): on 2 x H200 the adapt left 4 of 16 rounds
     * of 512 MiB / 1 GiB both ways at 91-97% of the copy engines (their
     * watched parts ending as usual, 1247-1264 us at 512 MiB, so the time
     * went elsewhere), and none of 10 with IPCPIPE_STRIPE_ADAPT=off
     * (105.9-108.1%; session 15, calls 1 and 8).  The price: no defence
     * against a loaded staged path both ways. */
    if (comm->cfg->stripe_adapt && share > 0 && rts->len >= *min &&
        (ring || !both)) {
        w->cls = ipcp__adapt_class(rts->len);
        double f = ipcp__adapt_next(&m->adapt[both][w->cls]);
        share *= f;
        /* A zero factor (the class is off, or a probe of another transfer
         * is in flight) teaches nothing, and must not end that probe. */
        if (f > 0) {
            *a = &m->adapt[both][w->cls];
            w->adapt = 1;
        }
    }
    w->both = both;
    w->src_id = m->src_id;
    w->dst = m->dst;
    return share;
}

/* A transfer given adapt state a (may be NULL) that stages n bytes after
 * all: with none, not striped, it has nothing to teach (a probe it took is
 * tried again later). */
static void ipcp__stripe_settle(ipcp__adapt_t *a, ipcp__watch_t *w, uint64_t n)
{
    if (a && !n) {
        ipcp__adapt_forget(a);
        w->adapt = 0;
    }
}

/* The bytes of a direct transfer (at the end of the buffer) that go
 * through the ring at the same time: 0 for none.  Both GPUs must differ
 * (on one GPU both parts would share its memory) and each side needs a
 * queue beside the staged ones for the direct part (*lo_s, *lo_r: the
 * first such queue of the sender and of this side).  Host memory has one
 * memory bus for both parts, so only a fixed share stripes it: that is
 * how the split itself is tested where there is no GPU.  w gets whether
 * the share is the calibrated one, and for which pair and direction. */
static uint64_t ipcp__stripe_choose(ipcp_comm_t *comm, ipcp__peer_t *peer,
                                    const ipcp__msg_rts_t *rts,
                                    const ipcp_request_t *req,
                                    const ipcp__choice_t *c, ipcp_path_t force,
                                    const ipcp__chan_t *ch,
                                    const ipcp__qset_t *qs, unsigned *lo_s,
                                    unsigned *lo_r, ipcp__watch_t *w)
{
    double share = comm->cfg->stripe;
    uint64_t min = 0, mine;
    unsigned snq = rts->src_nq ? rts->src_nq : 1;
    ipcp__adapt_t *a = NULL; /* IPCPIPE_STRIPE_ADAPT's state for this one */

    if (share < 0 || c->path != IPCP_PATH_DIRECT ||
        (rts->hdr.flags & (IPCP_RTS_PUT | IPCP_RTS_GET_REPLY)))
        return 0;
    if (rts->src_type == IPCP_MEM_HOST && req->attr.type == IPCP_MEM_HOST) {
        if (share == 0)
            return 0;
    } else if (!ipcp__dev(comm) || c->mode != IPCP_DST_MAPPED ||
               rts->src_type != IPCP_MEM_CUDA ||
               req->attr.type != IPCP_MEM_CUDA || rts->nreach < 1 ||
               comm->cuda_ops->device_reach(ipcp__dev(comm), req->attr.device,
                                            &mine, 1) != 1 ||
               mine == rts->reach[0]) {
        return 0;
    }
    unsigned ls = (unsigned)ipcp__staged_nq(ch, (int)snq);
    unsigned lr = (unsigned)ipcp__staged_queues(ch, qs);
    if (ls >= snq || lr >= (unsigned)qs->n)
        return 0;
    if (share == 0)
        share = ipcp__stripe_auto_share(comm, peer, rts, req, force, 1, w, &min,
                                        &a);
    uint64_t n = ipcp__stripe_bytes(rts->len, share, min);
    ipcp__stripe_settle(a, w, n);
    if (n) { /* the direct part's queues, clear of the staged ones */
        *lo_s = ls;
        *lo_r = lr;
    }
    return n;
}

/* ---- Receiver-driven transfers (IPCPIPE_DRIVE) ------------------------- */

/* The receiver maps the sender's buffer and copies it itself: the direct
 * part with a queue on the sender's GPU (which pushes over the link, as
 * the sender would), the staged part out through that GPU's copies into
 * pinned memory of this process and in with a queue on our GPU, ordered
 * between the two queues inside this process.  Against the sender's copy
 * it saves the round trip before the copy starts (the CTS), the
 * sender's enqueue calls after it, and the done flags between the
 * processes: the transfer runs as one process's copy would (on 2 x H200 a
 * lab run of this layout between two processes matched the in-process
 * copy at every share: 256 MiB at 9% 626.9 us against 626.2).  The sender
 * learns the end from a DRIVEN CTS. */

/* The largest unit of a driven transfer's staged part. */
#define IPCP_DRIVE_UNIT_MAX ((uint64_t)16 << 20)

/* Whether this process may copy the transfer itself; *src gets the local
 * ordinal of the sender's GPU (-1 for host memory).  The sender offered its
 * buffer (RTS_SRC); device to device, its GPU is visible here and can
 * write the receive buffer's GPU (or is that GPU); host to host only with
 * IPCPIPE_DRIVE=on.  Stream-ordered receives keep the sender's copy (their
 * end is a flag in the user's stream). */
static int ipcp__drive_ok(ipcp_comm_t *comm, const ipcp__msg_rts_t *rts,
                          const ipcp_request_t *req, ipcp_path_t force,
                          int *src)
{
    if (comm->cfg->drive == IPCP_DRIVE_OFF || force == IPCP_PATH_STAGED ||
        req->sync || !rts->len || !(rts->hdr.flags & IPCP_RTS_SRC) ||
        rts->src_type != (int32_t)req->attr.type)
        return 0;
    if (req->attr.type == IPCP_MEM_HOST) {
        *src = -1;
        return comm->cfg->drive == IPCP_DRIVE_ON;
    }
    if (!ipcp__dev(comm) || !comm->cuda_ops->device_reach || rts->nreach < 1)
        return 0;
    *src = ipcp__local_device(comm, rts->reach[0]);
    return *src >= 0 && ipcp__reachable(comm, rts, req);
}

/* The stage buffer of dir, made (and pinned for qs's backend, for every
 * device at once) on first use; NULL when it cannot be, or when it was
 * made for the other backend (host and device transfers from one peer
 * under IPCPIPE_DRIVE=on: the first keeps it). */
static void *ipcp__drive_stage(ipcp__dir_t *dir, const ipcp__qset_t *qs)
{
    if (dir->dstage)
        return dir->dstage_ops == qs->ops ? dir->dstage : NULL;
    void *p = mmap(NULL, IPCP_DRIVE_STAGE, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        IPCP_INFO(IPCP_SUB_ENGINE,
                  "no stage buffer for receiver-driven "
                  "striping (%zu bytes): %s",
                  IPCP_DRIVE_STAGE, strerror(errno));
        return NULL;
    }
    void *reg = NULL;
    if (qs->ops->type != IPCP_MEM_HOST &&
        qs->ops->shm_register(qs->be, p, IPCP_DRIVE_STAGE, qs->device, &reg) !=
            IPCP_OK) {
        IPCP_INFO(IPCP_SUB_ENGINE,
                  "no stage buffer for receiver-driven "
                  "striping: %s",
                  ipcp__last_error());
        munmap(p, IPCP_DRIVE_STAGE);
        return NULL;
    }
    dir->dstage = p;
    dir->dstage_reg = reg;
    dir->dstage_ops = qs->ops;
    dir->dstage_be = qs->be;
    return p;
}

/* Staged bytes of a driven transfer (0: none): IPCPIPE_STRIPE as for the
 * sender's copy, between two GPUs (or host memory at a fixed share), cut
 * to the stage buffer; w gets what the adapt needs to learn from it (see
 * ipcp__drive_watch).  qa copies out of the source, qb into the
 * receive buffer; the staged part takes a queue of each (two of one queue
 * set when they are the same: b is qb's), the direct part needs one more.
 * While an earlier staged part still runs, only one copied in by the same
 * queue b can be joined to it (the stage is the peer's, whatever the
 * receive buffer's device): others are not striped. */
static uint64_t ipcp__drive_split(ipcp_comm_t *comm, ipcp__peer_t *peer,
                                  const ipcp__msg_rts_t *rts,
                                  const ipcp_request_t *req, ipcp_path_t force,
                                  int src, const ipcp__qset_t *qa,
                                  const ipcp__qset_t *qb, ipcp__watch_t *w)
{
    double share = comm->cfg->stripe;
    uint64_t min = 0;
    ipcp__adapt_t *a = NULL;
    if (share < 0 || qa->n < (qa == qb ? 3 : 2) ||
        (peer->rx.dstage_busy && peer->rx.dstage_b != qb->q[qa == qb]))
        return 0;
    if (req->attr.type == IPCP_MEM_HOST) {
        if (share == 0)
            return 0;
    } else if (src == req->attr.device) {
        return 0; /* one GPU: both parts would share its memory */
    } else if (share == 0) {
        share = ipcp__stripe_auto_share(comm, peer, rts, req, force, 0, w, &min,
                                        &a);
    }
    uint64_t n = ipcp__stripe_bytes(rts->len, share, min);
    if (n > IPCP_DRIVE_STAGE - IPCP_DRIVE_FLAGS_LEN)
        n = IPCP_DRIVE_STAGE - IPCP_DRIVE_FLAGS_LEN;
    if (n && !ipcp__drive_stage(&peer->rx, qa))
        n = 0;
    ipcp__stripe_settle(a, w, n);
    return n;
}

/* Sets up what a driven transfer copies with: peer access of the sender's
 * GPU to ours, the queue sets of both devices (*qa the sender's GPU, *qb
 * the receive buffer's) and the sender's buffer mapped here (*imp, held).
 * 0 (logged) when the sender should copy instead. */
static int ipcp__drive_map(ipcp_comm_t *comm, ipcp__peer_t *peer,
                           const ipcp__msg_rts_t *rts, ipcp_request_t *req,
                           int src, ipcp__qset_t **qa, ipcp__qset_t **qb,
                           ipcp__import_t **imp)
{
    ipcp__mem_attr_t sa;
    memset(&sa, 0, sizeof(sa));
    sa.type = req->attr.type;
    sa.device = src;
    *imp = NULL;
    if ((src >= 0 && src != req->attr.device && comm->cuda_ops->device_link &&
         comm->cuda_ops->device_link(ipcp__dev(comm), src, req->attr.device) !=
             IPCP_OK) ||
        ipcp__qset_get(comm, peer, &peer->rx, &sa, qa) != IPCP_OK ||
        ipcp__qset_get(comm, peer, &peer->rx, &req->attr, qb) != IPCP_OK ||
        ipcp__import_get(comm, peer, rts->src_region, &sa, imp) != IPCP_OK) {
        IPCP_INFO(IPCP_SUB_ENGINE,
                  "cannot copy rank %d's buffer here, so "
                  "it copies: %s",
                  peer->rank, ipcp__last_error());
        return 0;
    }
    if (rts->src_offset > (*imp)->size ||
        rts->len > (*imp)->size - rts->src_offset) {
        IPCP_INFO(IPCP_SUB_ENGINE,
                  "rank %d's source lies outside its "
                  "allocation %llu as mapped here, so it copies",
                  peer->rank, (unsigned long long)rts->src_region);
        ipcp__import_put(comm, peer, *imp);
        return 0;
    }
    return 1;
}

/* The staged part of a driven transfer, [dlen, dlen + slen) of s and d:
 * out of the source on qa's first queue, into the buffer on qb's staged
 * queue once that has it, through the peer's stage buffer; trace pieces
 * from np on.  The stage is reused only after the copies in of an earlier
 * transfer still running are done (b's work so far); with none running,
 * no join: its five driver calls before the first copy out held the staged
 * part back by about 10 us against the direct part.  Returns the queues
 * used, of qa in *ma and of qb in *mb. */
static void ipcp__drive_staged(ipcp__xfer_t *x, ipcp__qset_t *qa,
                               ipcp__qset_t *qb, const char *s, char *d,
                               uint64_t dlen, uint64_t slen, unsigned np,
                               uint64_t nchunks, unsigned *ma, unsigned *mb)
{
    ipcp__dir_t *dir = &x->peer->rx;
    ipcp__track_t *t = &x->track;
    unsigned sb_q = qa == qb ? 1 : 0;
    ipcp__queue_t *a = qa->q[0], *b = qb->q[sb_q];
    uint64_t unit = ipcp__stripe_unit(slen, IPCP_DRIVE_UNIT_MAX);
    char *st = dir->dstage;
    __typeof__(qa->ops->join) join_a = qa->ops->join, join_b = qb->ops->join;
    if (dir->dstage_busy)
        ipcp__enq_check(t, join_a ? join_a(a, b) : IPCP_ERR_UNSUPPORTED);
    dir->dstage_busy++;
    dir->dstage_b = b;
    x->drive_staged = 1;
    /* Trace pieces: np + k the chunk's copy in, np + nchunks + k its copy
     * out; both past x->tbase, where a striped transfer's staged copies
     * begin. */
    for (uint64_t k = 0, off = 0; off < slen; k++, off += unit) {
        uint64_t n = ipcp__min(unit, slen - off);
        ipcp__trace_piece(x, np + nchunks + k, qa, 0, n, 1);
        ipcp__enq_check(t, qa->ops->copy(a, st + off, s + dlen + off, n, t));
        ipcp__trace_piece(x, np + nchunks + k, qa, 0, n, 0);
        ipcp__trace_piece_stage(x, np + nchunks + k, IPCP_STAGE_OUT);
        ipcp__enq_check(t, join_b ? join_b(b, a) : IPCP_ERR_UNSUPPORTED);
        ipcp__trace_piece(x, np + k, qb, (int)sb_q, n, 1);
        ipcp__enq_check(t, qb->ops->copy(b, d + dlen + off, st + off, n, t));
        ipcp__trace_piece(x, np + k, qb, (int)sb_q, n, 0);
        ipcp__trace_piece_stage(x, np + k, IPCP_STAGE_IN);
    }
    *ma |= 1u;
    *mb |= 1u << sb_q;
}

/* The flags in the last bytes of dir's stage buffer: a row of
 * IPCP_MAX_QUEUES per source queue set (two driven transfers from one peer
 * may copy out of two of its GPUs at once, each set's queues raising their
 * own in order), then one for the staged parts' ends (their copies in take
 * one queue at a time, see ipcp__drive_split).  Returns qa's row; *last
 * gets the staged parts' flag. */
#define IPCP_DRIVE_FLAGS_N (IPCP_MAX_QSETS * IPCP_MAX_QUEUES + 1)
_Static_assert(IPCP_DRIVE_FLAGS_N * sizeof(ipcp__flag_t) <=
                   IPCP_DRIVE_FLAGS_LEN,
               "a driven transfer's flags fit their place in the stage");
static ipcp__flag_t *ipcp__drive_flags(ipcp__dir_t *dir, const ipcp__qset_t *qa,
                                       ipcp__flag_t **last)
{
    ipcp__flag_t *f = (ipcp__flag_t *)((char *)dir->dstage + IPCP_DRIVE_STAGE -
                                       IPCP_DRIVE_FLAGS_LEN);
    ipcp__mem_attr_t sa = {.type = qa->ops->type, .device = qa->device};
    *last = f + IPCP_DRIVE_FLAGS_N - 1;
    return f + (size_t)ipcp__qset_index(&sa) * IPCP_MAX_QUEUES;
}

/* IPCPIPE_STRIPE_ADAPT: a striped driven transfer is watched as the
 * sender's copy is (ipcp__stripe_watch), from flags its own queues raise:
 * each queue of direct pieces after its last one, the staged part's queue
 * after its last copy in.  Raised after everything else is enqueued, so
 * that these calls (a stream memory operation each on GPUs) hold no copy
 * back.  Transfer seq raises seq: per queue they come in order, and the
 * staged parts of two running transfers copy in on one queue (see
 * ipcp__drive_split). */
static void ipcp__drive_watch(ipcp__xfer_t *x, ipcp__qset_t *qa,
                              ipcp__qset_t *qb, ipcp__watch_t *w, uint64_t seq,
                              unsigned np, unsigned lo, uint64_t slen)
{
    ipcp__flag_t *last;
    ipcp__flag_t *f = ipcp__drive_flags(&x->peer->rx, qa, &last);
    unsigned raised = 0;
    for (unsigned i = 0; i < np; i++) {
        unsigned qi = ipcp__direct_queue(seq, i, lo, (unsigned)qa->n);
        if (raised & (1u << qi))
            continue;
        raised |= 1u << qi;
        ipcp__enq_check(&x->track, qa->ops->flag_write(qa->q[qi], &f[qi].v, seq,
                                                       &x->track));
    }
    ipcp__enq_check(&x->track, qb->ops->flag_write(qb->q[qa == qb ? 1 : 0],
                                                   &last->v, seq, &x->track));
    w->done = f;
    w->dseq = seq;
    w->np = np;
    w->lo_s = lo;
    w->snq = (unsigned)qa->n;
    w->last = &last->v;
    w->last_v = seq;
    w->slen = slen;
    w->on = 1;
    x->watch = *w;
    ipcp__list_push_back(&x->comm->watching, &x->watch.link);
}

/* Takes the transfer when this process can copy it; returns 0 when the
 * sender should copy instead (what was set up on the way, queues,
 * mappings, peer access, stays for later transfers).  The direct part,
 * [0, dlen), goes in pieces on qa's queues from lo on (clear of the staged
 * part's). */
static int ipcp__xfer_drive(ipcp_comm_t *comm, ipcp__peer_t *peer,
                            const ipcp__msg_rts_t *rts, ipcp_request_t *req,
                            ipcp_path_t force)
{
    int src;
    ipcp__qset_t *qa, *qb;
    ipcp__import_t *imp;
    ipcp__choice_t c;

    if (!ipcp__drive_ok(comm, rts, req, force, &src) ||
        !ipcp__drive_map(comm, peer, rts, req, src, &qa, &qb, &imp))
        return 0;
    const char *s = (const char *)imp->ptr + rts->src_offset;
    char *d = req->buf;
    ipcp__watch_t w;
    memset(&w, 0, sizeof(w));
    uint64_t slen =
        ipcp__drive_split(comm, peer, rts, req, force, src, qa, qb, &w);
    uint64_t dlen = rts->len - slen;
    unsigned lo = slen ? (qa == qb ? 2u : 1u) : 0u;
    uint64_t nchunks =
        slen ? ipcp__div_up(slen, ipcp__stripe_unit(slen, IPCP_DRIVE_UNIT_MAX))
             : 0;
    unsigned np = dlen ? ipcp__npieces(comm, dlen, (unsigned)qa->n - lo,
                                       req->attr.type == IPCP_MEM_CUDA)
                       : 0;
    memset(&c, 0, sizeof(c));
    c.path = slen ? IPCP_PATH_STRIPED : IPCP_PATH_DIRECT;
    c.why = IPCP_WHY_DRIVEN;
    c.src_type = rts->src_type;
    c.staged = slen;
    ipcp__log_choice(comm, peer, req, &c, force);
    req->path = c.path;
    req->nbytes = rts->len;

    ipcp__stage_flush(comm, qa);
    ipcp__stage_flush(comm, qb);
    /* Traced: the direct pieces, the staged part's copies in (at tbase + k,
     * as the ring's receiving side traces chunk k), then its copies out
     * (ipcp__drive_staged). */
    ipcp__xfer_begin(comm, peer, req, 1, np + 2 * nchunks);
    ipcp__xfer_t *x = &req->xfer;
    x->tbase = np;
    x->import = imp;
    x->drive_id = rts->id;
    uint64_t seq = ++peer->rx.dseq; /* from 1: the watch's flags start at 0 */
    unsigned ma = 0, mb = 0;
    /* Not both ways under auto: see ipcp__stripe_auto_share. */
    int watched = comm->cfg->stripe_adapt && slen && np && !w.both;
    if (watched) /* both parts may start from the first copy on */
        w.t0 = ipcp__now_ns();
    for (unsigned i = 0; i < np; i++) {
        uint64_t off, n;
        int qi = (int)ipcp__direct_queue(seq, i, lo, (unsigned)qa->n);
        ipcp__piece(dlen, np, i, &off, &n);
        ipcp__trace_piece(x, i, qa, qi, n, 1);
        ipcp__enq_check(&x->track, qa->ops->copy(qa->q[qi], d + off, s + off, n,
                                                 &x->track));
        ipcp__trace_piece(x, i, qa, qi, n, 0);
        ma |= 1u << qi;
    }
    if (slen)
        ipcp__drive_staged(x, qa, qb, s, d, dlen, slen, np, nchunks, &ma, &mb);
    if (watched)
        ipcp__drive_watch(x, qa, qb, &w, seq, np, lo, slen);
    if (qa == qb) {
        ma |= mb;
        mb = 0;
    }
    /* qa's last: the next transfer from that GPU begins with a copy on
     * qa, and the calls leave its context current, so that copy needs no
     * cuCtxSetCurrent first (0.3-1.7 us on 2 x H200, median ~0.6). */
    for (int i = 0; i < qb->n; i++)
        if (mb & (1u << i))
            ipcp__enq_notify(qb, i, &x->track);
    for (int i = 0; i < qa->n; i++)
        if (ma & (1u << i))
            ipcp__enq_notify(qa, i, &x->track);
    ipcp__xfer_go(x);
    return 1;
}

/* ---- Receiver side, continued -------------------------------------------- */

static void ipcp__accept_fail(ipcp_comm_t *comm, ipcp__peer_t *peer,
                              const ipcp__msg_rts_t *rts, ipcp_request_t *req,
                              ipcp_status_t st, const char *msg)
{
    ipcp__nack(comm, peer, rts->id, st, msg);
    ipcp__req_complete(req, st, msg);
}

/* Where the sender writes a direct transfer: our mapped allocation (its
 * export on first use by this peer) or, for process_vm_writev, our
 * address. */
static void ipcp__cts_target(ipcp_comm_t *comm, ipcp__peer_t *peer,
                             ipcp_request_t *req, const ipcp__choice_t *c,
                             ipcp__msg_cts_t *cts, int *fds, int *nfds)
{
    cts->dst_mode = (uint32_t)c->mode;
    if (c->mode != IPCP_DST_MAPPED) {
        cts->dst_addr = (uint64_t)(uintptr_t)req->buf;
        return;
    }
    cts->dst_region = c->region.id;
    cts->dst_offset = (uint64_t)((char *)req->buf - (char *)c->region.ptr);
    pthread_mutex_lock(&comm->mem_lock);
    ipcp__region_t *r = ipcp__region_find_id(comm, c->region.id);
    if (r && !r->shared_with[peer->rank]) {
        cts->hdr.flags |= IPCP_CTS_HAS_EXP;
        cts->exp = r->exp;
        if (r->exp_fd >= 0) {
            int fd = dup(r->exp_fd);
            if (fd >= 0) {
                fds[(*nfds)++] = fd;
                cts->hdr.flags |= IPCP_CTS_MAP_FD;
            }
        }
        r->shared_with[peer->rank] = 1;
    }
    pthread_mutex_unlock(&comm->mem_lock);
}

/* Our half of a direct transfer: the done flags of the sender's np pieces
 * (its queues from lo_s on), watched by the backend when only the host
 * waits, else waited for in one of our queues (from lo_r on, clear of a
 * striped transfer's staged queues).  Returns the mask of our queues. */
static unsigned ipcp__rx_direct(ipcp__peer_t *peer, const ipcp__msg_rts_t *rts,
                                ipcp_request_t *req, ipcp__qset_t *qs,
                                uint64_t dseq, unsigned np, unsigned lo_s,
                                unsigned lo_r)
{
    ipcp__chan_t *ch = peer->rx.chan;
    ipcp__track_t *t = &req->xfer.track;
    unsigned snq = rts->src_nq ? rts->src_nq : 1;
    ipcp__flag_t *done = ch->ctl->done[rts->src_qset];

    unsigned first = 0; /* pieces from here on are waited for in a queue */
    if (!req->sync && qs->ops->flag_watch) {
        for (; first < np; first++) {
            atomic_fetch_add(&t->pending, 1);
            if (qs->ops->flag_watch(
                    qs->be, &done[ipcp__direct_queue(dseq, first, lo_s, snq)].v,
                    dseq, &peer->lost, t) != IPCP_OK) {
                atomic_fetch_sub(&t->pending, 1);
                break;
            }
        }
        if (first == np)
            return 0;
        /* Not taken (stream callbacks in use, or no memory): the rest
         * wait in a queue. */
    }
    int qi = (int)(lo_r + dseq % (uint64_t)((unsigned)qs->n - lo_r));
    for (unsigned i = first; i < np; i++)
        ipcp__enq_check(t, qs->ops->flag_wait(
                               qs->q[qi],
                               &done[ipcp__direct_queue(dseq, i, lo_s, snq)].v,
                               dseq, &peer->lost, t));
    return 1u << qi;
}

void ipcp__xfer_accept(ipcp_comm_t *comm, ipcp__peer_t *peer,
                       const ipcp__msg_rts_t *rts, ipcp_request_t *req,
                       ipcp_path_t force)
{
    ipcp__msg_cts_t cts;
    ipcp__choice_t c;
    ipcp__qset_t *qs;
    int fds[2], nfds = 0;
    ipcp_status_t st;

    ipcp__trace_mark(req, IPCP_TM_MEET);
    ipcp__fault_point(IPCP_FAULT_RTS_MATCHED);
    ipcp__samegpu_note(comm, peer, rts, req);
    if (ipcp__xfer_drive(comm, peer, rts, req, force))
        return;
    ipcp__choose(comm, rts, req, &c);
    if (force == IPCP_PATH_DIRECT && c.path != IPCP_PATH_DIRECT) {
        char msg[IPCP_ERRMSG_MAX], why[200];
        ipcp__choice_why(comm, peer, req, &c, why, sizeof(why));
        snprintf(msg, sizeof(msg),
                 "the direct path was forced but cannot "
                 "serve this transfer: %s",
                 why);
        ipcp__accept_fail(comm, peer, rts, req, IPCP_ERR_UNSUPPORTED, msg);
        return;
    }
    if (force == IPCP_PATH_STAGED && c.path != IPCP_PATH_STAGED) {
        c.path = IPCP_PATH_STAGED;
        c.mode = 0;
        c.why = IPCP_WHY_FORCED_STAGED;
    }
    /* Device slots once this process has used device memory, or the
     * sender does: a receiver that copies by itself makes no channel, so
     * the first transfer to make one may be a small host message, whose
     * 1 MiB slots then held every staged device transfer to 35-45 GB/s
     * (16 MiB slots: 49-53).  Host-only processes keep host slots. */
    st = ipcp__chan_create(
        comm, &peer->rx,
        atomic_load_explicit(&comm->dev_used, memory_order_relaxed) ||
            rts->src_type == IPCP_MEM_CUDA || req->attr.type == IPCP_MEM_CUDA);
    if (st == IPCP_OK)
        st = ipcp__qset_get(comm, peer, &peer->rx, &req->attr, &qs);
    if (st != IPCP_OK) {
        ipcp__accept_fail(comm, peer, rts, req, st, ipcp__last_error());
        return;
    }
    ipcp__chan_t *ch = peer->rx.chan;
    unsigned lo_s = 0, lo_r = 0;
    ipcp__watch_t wt = {0};
    uint64_t slen = c.path == IPCP_PATH_STAGED
                        ? rts->len
                        : ipcp__stripe_choose(comm, peer, rts, req, &c, force,
                                              ch, qs, &lo_s, &lo_r, &wt);
    uint64_t dlen = rts->len - slen;
    if (c.path == IPCP_PATH_DIRECT && slen) {
        c.path = IPCP_PATH_STRIPED;
        c.staged = slen;
    }
    ipcp__log_choice(comm, peer, req, &c, force);
    memset(&cts, 0, sizeof(cts));
    cts.hdr.type = IPCP_MSG_CTS;
    cts.status = IPCP_OK;
    cts.path = c.path;
    cts.id = rts->id;
    cts.len = rts->len;
    if (!ch->fd_sent) {
        cts.hdr.flags |= IPCP_CTS_CHAN_FD;
        cts.chan_exp = ch->exp;
        fds[nfds++] = ch->fd;
        ch->fd = -1; /* the message owns it now */
        ch->fd_sent = 1;
    }
    req->path = c.path;
    req->nbytes = rts->len;

    int direct = c.path != IPCP_PATH_STAGED;
    unsigned snq = rts->src_nq ? rts->src_nq : 1, np = 0, mask = 0;
    uint64_t unit = ipcp__staged_unit(slen, ch->slot_size, direct);
    uint64_t nchunks = ipcp__staged_nchunks(slen, unit, ch->slot_size);
    if (direct)
        np = ipcp__npieces(comm, dlen, snq - lo_s,
                           rts->src_type == IPCP_MEM_CUDA ||
                               req->attr.type == IPCP_MEM_CUDA);
    ipcp__xfer_begin(comm, peer, req, 1, nchunks);
    if (direct) {
        cts.dseq = ++ch->dseq[rts->src_qset];
        cts.npieces = np;
        cts.dq_lo = lo_s;
        ipcp__cts_target(comm, peer, req, &c, &cts, fds, &nfds);
        req->xfer.err_slot =
            &ch->ctl->derr[rts->src_qset][cts.dseq % IPCP_ERR_SLOTS];
        req->xfer.err_seq = cts.dseq;
    }
    if (!direct || slen) {
        cts.chunk_base = ch->seq;
        cts.stripe_len = direct ? slen : 0;
        ch->seq += nchunks;
        cts.sseq = ++ch->sseq;
        ipcp__errslot_t *slot = &ch->ctl->serr[cts.sseq % IPCP_ERR_SLOTS];
        if (direct) {
            req->xfer.err_slot2 = slot;
            req->xfer.err_seq2 = cts.sseq;
        } else {
            req->xfer.err_slot = slot;
            req->xfer.err_seq = cts.sseq;
        }
    }
    /* The CTS goes before our half is enqueued: our queues only wait on
     * flags the sender raises, in any order, and enqueueing a staged half
     * (three driver calls a chunk) held the sender back by about 0.1 ms on
     * H200s.  A loss on the way fails the transfer; the waits enqueued
     * after it see the flags it moved ahead. */
    int watched = comm->cfg->stripe_adapt && direct && slen && nchunks;
    if (watched) /* no part can start before the CTS */
        wt.t0 = ipcp__now_ns();
    if (ipcp__peer_post(comm, peer, &cts, sizeof(cts), fds, nfds) != IPCP_OK &&
        !peer->wr_broken)
        /* The sender would never write what our queues wait for; a loss
         * releases them and tells it (one whose writes broke is lost once
         * what it sent is read). */
        ipcp__peer_lost(comm, peer, "cannot send a CTS");
    ipcp__trace_mark(req, IPCP_TM_CTS);
    ipcp__fault_point(IPCP_FAULT_CTS_POSTED);
    ipcp__stage_flush(comm, qs);
    if (direct)
        mask |= ipcp__rx_direct(peer, rts, req, qs, cts.dseq, np, lo_s, lo_r);
    if (!direct || slen) {
        ipcp__stage_init(&req->xfer, ch, (char *)req->buf + dlen, slen, unit,
                         cts.chunk_base, 0, 0, NULL, 0);
    }
    if (watched) {
        /* Ends: every piece's done flag, and our mark of the last chunk. */
        uint64_t k = cts.chunk_base + nchunks - 1;
        wt.done = ch->ctl->done[rts->src_qset];
        wt.dseq = cts.dseq;
        wt.np = np;
        wt.lo_s = lo_s;
        wt.snq = snq;
        wt.last = &ch->ctl->freed[k % ch->nslots].v;
        wt.last_v = k / ch->nslots + 1;
        wt.slen = slen;
        wt.on = 1;
        req->xfer.watch = wt;
        ipcp__list_push_back(&comm->watching, &req->xfer.watch.link);
    }
    ipcp__stage_go(comm, &req->xfer, qs, mask);
}

/* ---- Sender side --------------------------------------------------------- */

/* Run in a queue's order between a process_vm_writev and the done flag it
 * releases the receiver with: such a copy can fail after it was queued
 * (the receiver's memory went away), and the receiver must fail too, not
 * complete with what arrived.  (Copies into shared mappings cannot fail
 * late; a device copy that does ends its context.) */
static void ipcp__tx_report_late(void *arg)
{
    ipcp__xfer_t *x = arg;
    if (!ipcp__track_ok(&x->track))
        ipcp__err_report(x->tx_slot, x->tx_seq, &x->track);
}

/* Our half of the direct part, [0, len) of the buffer: np pieces, each
 * copied and then marked in its queue's done flag.  Returns the mask of
 * the queues used. */
static unsigned ipcp__tx_direct(ipcp_comm_t *comm, ipcp__peer_t *peer,
                                ipcp_request_t *req, const ipcp__msg_cts_t *cts,
                                ipcp__qset_t *qs, int map_fd, uint64_t len)
{
    ipcp__track_t *t = &req->xfer.track;
    ipcp__chan_t *ch = peer->tx.chan;
    unsigned np = cts->npieces, mask = 0;
    int myq = ipcp__qset_index(&req->attr);
    char *dst = NULL;

    if (cts->dst_mode == IPCP_DST_MAPPED) {
        ipcp__import_t *imp = NULL;
        if (cts->hdr.flags & IPCP_CTS_HAS_EXP)
            ipcp__rexport_put(peer, cts->dst_region, &cts->exp, map_fd);
        ipcp_status_t st =
            ipcp__import_get(comm, peer, cts->dst_region, &req->attr, &imp);
        if (st == IPCP_OK) {
            req->xfer.import = imp;
            if (cts->dst_offset > imp->size ||
                req->len > imp->size - cts->dst_offset)
                ipcp__track_fail(t, IPCP_ERR_STATE,
                                 "target range is outside "
                                 "the peer's allocation");
            dst = (char *)imp->ptr + cts->dst_offset;
        } else {
            ipcp__track_fail(t, st, "%s", ipcp__last_error());
        }
    }
    req->xfer.tx_slot = &ch->ctl->derr[myq][cts->dseq % IPCP_ERR_SLOTS];
    req->xfer.tx_seq = cts->dseq;
    if (!ipcp__track_ok(t)) /* before the done flags release the peer */
        ipcp__err_report(req->xfer.tx_slot, cts->dseq, t);
    for (unsigned i = 0; i < np; i++) {
        uint64_t off, n;
        int qi =
            (int)ipcp__direct_queue(cts->dseq, i, cts->dq_lo, (unsigned)qs->n);
        ipcp__queue_t *q = qs->q[qi];
        ipcp__piece(len, np, i, &off, &n);
        ipcp__trace_piece(&req->xfer, i, qs, qi, n, 1);
        if (n && cts->dst_mode == IPCP_DST_MAPPED && dst)
            ipcp__enq_check(
                t, qs->ops->copy(q, dst + off, (char *)req->buf + off, n, t));
        else if (n && cts->dst_mode == IPCP_DST_PVM && qs->ops->rcopy)
            ipcp__enq_check(t, qs->ops->rcopy(q, peer->pid, cts->dst_addr + off,
                                              (char *)req->buf + off, n, 1, t));
        ipcp__trace_piece(&req->xfer, i, qs, qi, n, 0);
        if (n && cts->dst_mode == IPCP_DST_PVM && qs->ops->call)
            ipcp__enq_check(t,
                            qs->ops->call(q, ipcp__tx_report_late, &req->xfer));
        ipcp__fault_enq(qs, q, t, IPCP_FAULT_DATA_IN_PLACE);
        /* The done flag is written even after a failure so that the
         * receiver does not wait forever; the track carries the error. */
        ipcp__enq_check(t, qs->ops->flag_write(q, &ch->ctl->done[myq][qi].v,
                                               cts->dseq, NULL));
        mask |= 1u << qi;
    }
    return mask;
}

/* A CTS the sender cannot follow: the receiver would wait for flags nobody
 * writes, so the connection ends (which it sees). */
static const char *ipcp__cts_check(const ipcp__chan_t *ch,
                                   const ipcp__qset_t *qs,
                                   const ipcp_request_t *req,
                                   const ipcp__msg_cts_t *cts)
{
    int striped = cts->path == IPCP_PATH_STRIPED;
    int direct = striped || cts->path == IPCP_PATH_DIRECT;
    if (striped && (cts->stripe_len == 0 || cts->stripe_len >= req->len))
        return "bad striped split";
    if (direct && (cts->npieces < 1 || cts->dq_lo >= (unsigned)qs->n ||
                   cts->npieces > (unsigned)qs->n - cts->dq_lo))
        return "CTS asks for more pieces than the sender has queues";
    if ((!direct || striped) && cts->chunk_base != ch->seq)
        return "ring sequence mismatch";
    return NULL;
}

void ipcp__xfer_on_cts(ipcp_comm_t *comm, ipcp__peer_t *peer,
                       ipcp_request_t *req, const ipcp__msg_cts_t *cts,
                       int *fds, int nfds)
{
    int fi = 0, chan_fd = -1, map_fd = -1;
    ipcp__qset_t *qs;
    ipcp_status_t st = IPCP_OK;
    const char *bad;

    ipcp__trace_mark(req, IPCP_TM_MEET);
    ipcp__await_end(req); /* the sender's copies count as dev_inflight */
    if ((cts->hdr.flags & IPCP_CTS_CHAN_FD) && fi < nfds)
        chan_fd = fds[fi++];
    if ((cts->hdr.flags & IPCP_CTS_MAP_FD) && fi < nfds)
        map_fd = fds[fi++];
    if (cts->status != IPCP_OK) {
        char msg[IPCP_ERRMSG_MAX];
        snprintf(msg, sizeof(msg), "%.*s", IPCP_ERRWIRE_MAX - 1, cts->errmsg);
        ipcp__req_complete(req, ipcp__peer_status(cts->status), msg);
        goto out;
    }
    if (cts->hdr.flags & IPCP_CTS_DRIVEN) { /* the receiver copied it */
        if (cts->path < IPCP_PATH_DIRECT || cts->path > IPCP_PATH_LANE) {
            ipcp__req_complete(req, IPCP_ERR_STATE,
                               "the receiver reported an unknown path");
            goto out;
        }
        req->path = (ipcp_path_t)cts->path;
        req->nbytes = req->len;
        ipcp__trace_send_driven(comm, peer, req, req->path);
        ipcp__req_complete(req, IPCP_OK, NULL);
        goto out;
    }
    if (cts->hdr.flags & IPCP_CTS_CHAN_FD) {
        if (peer->tx.chan || chan_fd < 0)
            st = ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_ENGINE, IPCP_ERR_STATE,
                            "unexpected channel from rank %d", peer->rank);
        else
            st = ipcp__chan_import(comm, &peer->tx, &cts->chan_exp, chan_fd);
    } else if (!peer->tx.chan) {
        st = ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_ENGINE, IPCP_ERR_STATE,
                        "rank %d sent a CTS before its channel", peer->rank);
    }
    if (st == IPCP_OK)
        st = ipcp__qset_get(comm, peer, &peer->tx, &req->attr, &qs);
    if (st != IPCP_OK) {
        ipcp__req_complete(req, st, ipcp__last_error());
        ipcp__peer_lost(comm, peer, "channel set-up failed");
        goto out;
    }
    ipcp__chan_t *ch = peer->tx.chan;
    if ((bad = ipcp__cts_check(ch, qs, req, cts))) {
        ipcp__req_complete(req, IPCP_ERR_STATE, bad);
        ipcp__peer_lost(comm, peer, bad);
        goto out;
    }
    req->path = (ipcp_path_t)cts->path;
    req->nbytes = req->len;
    ipcp__fault_point(IPCP_FAULT_CTS_RECEIVED);
    int striped = cts->path == IPCP_PATH_STRIPED;
    int direct = striped || cts->path == IPCP_PATH_DIRECT;
    uint64_t slen = striped ? cts->stripe_len : direct ? 0 : req->len;
    uint64_t dlen = req->len - slen;
    uint64_t unit = ipcp__staged_unit(slen, ch->slot_size, striped);
    uint64_t nchunks = ipcp__staged_nchunks(slen, unit, ch->slot_size);
    unsigned np = direct ? cts->npieces : 0, mask = 0;

    ipcp__stage_flush(comm, qs);
    ipcp__xfer_begin(comm, peer, req, 0, np + nchunks);
    req->xfer.tbase = np;
    if (direct)
        mask |= ipcp__tx_direct(comm, peer, req, cts, qs, map_fd, dlen);
    if (!direct || striped) {
        ch->seq += nchunks;
        ipcp__stage_init(&req->xfer, ch, (char *)req->buf + dlen, slen, unit,
                         cts->chunk_base, 1, req->type == IPCP_REQ_PUT,
                         &ch->ctl->serr[cts->sseq % IPCP_ERR_SLOTS], cts->sseq);
    }
    ipcp__stage_go(comm, &req->xfer, qs, mask);
out:
    for (int i = 0; i < nfds; i++)
        close(fds[i]);
}

void ipcp__xfer_eager_to_device(ipcp_comm_t *comm, ipcp__peer_t *peer,
                                ipcp_request_t *req, const void *data,
                                size_t len)
{
    ipcp__qset_t *qs;
    ipcp_status_t st = ipcp__qset_get(comm, peer, &peer->rx, &req->attr, &qs);
    if (st == IPCP_OK && !(req->scratch = malloc(len)))
        st = ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_ENGINE, IPCP_ERR_NOMEM,
                        "no memory for %zu eager bytes", len);
    if (st != IPCP_OK) {
        ipcp__req_complete(req, st, ipcp__last_error());
        return;
    }
    ipcp__stage_flush(comm, qs);
    /* The message buffer is reused as soon as we return: copy it first. */
    memcpy(req->scratch, data, len);
    req->path = IPCP_PATH_EAGER;
    req->nbytes = len;
    ipcp__xfer_begin(comm, peer, req, 1, 1);
    ipcp__trace_piece(&req->xfer, 0, qs, 0, len, 1);
    ipcp__enq_check(
        &req->xfer.track,
        qs->ops->copy(qs->q[0], req->buf, req->scratch, len, &req->xfer.track));
    ipcp__trace_piece(&req->xfer, 0, qs, 0, len, 0);
    ipcp__enq_end(req, qs, 1u);
    ipcp__xfer_go(&req->xfer);
}

/* ---- One-sided without the owner --------------------------------------- */

void ipcp__xfer_onesided_direct(ipcp_comm_t *comm, ipcp_request_t *req)
{
    ipcp__peer_t *peer = &comm->peers[req->peer];
    ipcp_rmem_t *rm = req->rmem;
    int put = req->type == IPCP_REQ_PUT;
    ipcp__qset_t *qs;
    ipcp_status_t st = ipcp__qset_get(comm, peer, put ? &peer->tx : &peer->rx,
                                      &req->attr, &qs);
    if (st != IPCP_OK) {
        ipcp__req_complete(req, st, ipcp__last_error());
        return;
    }
    ipcp__stage_flush(comm, qs);
    unsigned np = ipcp__npieces(comm, req->len, (unsigned)qs->n,
                                req->attr.type == IPCP_MEM_CUDA ||
                                    rm->type == IPCP_MEM_CUDA);
    ipcp__track_t *t = &req->xfer.track;
    unsigned mask = 0;
    req->path = IPCP_PATH_DIRECT;
    req->nbytes = req->len;
    ipcp__xfer_begin(comm, peer, req, !put, np);
    /* Until it ends, the owner's deregistration waits for it. */
    atomic_fetch_add(&rm->busy, 1);
    req->xfer.rmem_busy = rm;
    unsigned base = qs->next++ % (unsigned)qs->n;
    for (unsigned i = 0; i < np; i++) {
        uint64_t off, n;
        int qi = (int)((base + i) % (unsigned)qs->n);
        ipcp__piece(req->len, np, i, &off, &n);
        char *local = (char *)req->buf + off;
        ipcp__trace_piece(&req->xfer, i, qs, qi, n, 1);
        if (n && rm->mode == IPCP_RMEM_MAPPED) {
            char *remote = (char *)ipcp__rmem_mapping(comm, rm, &req->attr) +
                           req->offset + off;
            ipcp__enq_check(t, qs->ops->copy(qs->q[qi], put ? remote : local,
                                             put ? local : remote, n, t));
        } else if (n) {
            ipcp__enq_check(
                t, qs->ops->rcopy ? qs->ops->rcopy(qs->q[qi], peer->pid,
                                                   rm->addr + req->offset + off,
                                                   local, n, put, t)
                                  : IPCP_ERR_UNSUPPORTED);
        }
        ipcp__trace_piece(&req->xfer, i, qs, qi, n, 0);
        mask |= 1u << qi;
    }
    ipcp__enq_end(req, qs, mask);
    ipcp__xfer_go(&req->xfer);
    ipcp__fault_point(IPCP_FAULT_ONESIDED_ENQUEUED);
}
