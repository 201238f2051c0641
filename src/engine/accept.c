/* The receiver's side of a two-sided transfer: which path, and why, from
 * both sides' offers and the settings, then the CTS and its own half. */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/cpu.h"
#include "common/time.h"
#include "engine/memreg.h"
#include "engine/route.h"
#include "engine/xfer.h"
#include "engine/samegpu.h"
#include "engine/stripe.h"

/* ---- Receiver side ------------------------------------------------------- */

/* What a striped or split transfer adds to its reason. */
static void ipcp__choice_more(const ipcp__peer_t *peer, const ipcp__choice_t *c,
                              char *buf, size_t len)
{
    if (c->staged)
        snprintf(buf, len, "; %llu bytes staged at once",
                 (unsigned long long)c->staged);
    else if (c->head)
        snprintf(buf, len,
                 "; this process copies the first %llu bytes out of rank "
                 "%d's buffer meanwhile",
                 (unsigned long long)c->head, peer->rank);
}

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
    case IPCP_WHY_PVM_READ:
        n = snprintf(buf, len,
                     "this process reads it out of rank %d's memory with "
                     "process_vm_readv",
                     peer->rank);
        break;
    case IPCP_WHY_BOUNCE:
        n = snprintf(buf, len,
                     "neither buffer lies in a shareable allocation: "
                     "through a ring in device memory on GPU %d",
                     req->attr.device);
        break;
    case IPCP_WHY_NO_RING:
        n = snprintf(buf, len,
                     "neither buffer lies in a shareable allocation, and no "
                     "shareable ring could be made on GPU %d",
                     req->attr.device);
        break;
    case IPCP_WHY_RING_REFUSED:
        n = snprintf(buf, len,
                     "neither buffer lies in a shareable allocation, and "
                     "rank %d could not map a ring of this process before",
                     peer->rank);
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
    if (n >= 0 && (size_t)n < len)
        ipcp__choice_more(peer, c, buf + n, len - (size_t)n);
}

/* Device to device: may the sender's device write this buffer's device? */
int ipcp__reachable(ipcp_comm_t *comm, const ipcp__msg_rts_t *rts,
                    const ipcp_request_t *req)
{
    uint64_t mine;
    if (!ipcp__dev(comm) || !comm->dev_ops->device_reach ||
        comm->dev_ops->device_reach(ipcp__dev(comm), req->attr.device, &mine,
                                    1) != 1)
        return 0;
    for (uint32_t i = 0; i < rts->nreach && i < IPCP_MAX_REACH; i++)
        if (rts->reach[i] == mine)
            return 1;
    return 0;
}

/* The sender's copy: its path and why (-1: a forced direct path cannot
 * serve it, for that reason).  cudaMalloc'd memory the sender's GPU can
 * write is exported (legacy IPC) once per allocation here; auto regions
 * are only touched by this thread. */
static int ipcp__choose(ipcp_comm_t *comm, ipcp_request_t *req,
                        const ipcp__offer_t *o, ipcp__choice_t *ch)
{
    int found = 0, shareable = 0;
    ch->mode = 0;
    ch->src_type = o->src_type;
    ch->staged = 0;
    /* Looked up again, not taken from the offer: routes tried before may
     * have taken milliseconds, and the region is copied under the lock (a
     * user thread may free it meanwhile; it stays mapped on the peer's
     * side until the peer drops it, so a transfer already on its way
     * stays harmless).  A stale region made for the user's memory is not
     * found: ipcp__region_auto below replaces it. */
    ipcp__lock(&comm->mem_lock, IPCP_LOCK_MEM);
    ipcp__region_t *r =
        ipcp__region_find_live(comm, req->buf, req->len, req->attr.buffer_id);
    if (r) {
        found = 1;
        shareable = r->exportable;
        ch->region = *r;
    }
    ipcp__unlock(&comm->mem_lock, IPCP_LOCK_MEM);
    if (!found && o->dst_type == IPCP_MEM_CUDA &&
        o->src_type == IPCP_MEM_CUDA && o->reach) {
        r = ipcp__region_auto(comm, &req->attr, req->buf, req->len);
        if (r) {
            shareable = 1;
            ch->region = *r;
        }
    }
    int rc = ipcp__sent_choose(o, comm->cfg, shareable, &ch->mode, &ch->why);
    ch->path = ch->mode == IPCP_DST_BOUNCE ? IPCP_PATH_BOUNCE
               : ch->mode                  ? IPCP_PATH_DIRECT
                                           : IPCP_PATH_STAGED;
    return rc;
}

void ipcp__log_choice(ipcp_comm_t *comm, ipcp__peer_t *peer,
                      const ipcp_request_t *req, const ipcp__choice_t *c,
                      ipcp_path_t force)
{
    /* Split host transfers have bits of their own, from 24 on. */
    unsigned bit = 1u << (c->head ? 24u + (unsigned)c->mode
                                  : (unsigned)c->path * 3 + (unsigned)c->mode);
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

/* ---- Receiver side, continued -------------------------------------------- */

static void ipcp__accept_fail(ipcp_comm_t *comm, ipcp__peer_t *peer,
                              const ipcp__msg_rts_t *rts, ipcp_request_t *req,
                              ipcp_status_t st, const char *msg)
{
    ipcp__nack(comm, peer, rts->id, st, msg);
    ipcp__req_complete(req, st, msg);
}

/* Where the sender writes: our mapped allocation (its export on first use
 * by this peer), at `at` (the receive buffer, or the bounce path's ring),
 * or, for process_vm_writev, our address. */
static void ipcp__cts_target(ipcp_comm_t *comm, ipcp__peer_t *peer,
                             const void *at, const ipcp__choice_t *c,
                             ipcp__msg_cts_t *cts, int *fds, int *nfds)
{
    cts->dst_mode =
        c->mode == IPCP_DST_BOUNCE ? IPCP_DST_MAPPED : (uint32_t)c->mode;
    if (cts->dst_mode != IPCP_DST_MAPPED) {
        cts->dst_addr = (uint64_t)(uintptr_t)at;
        return;
    }
    cts->dst_region = c->region.id;
    cts->dst_offset = (uint64_t)((const char *)at - (char *)c->region.ptr);
    ipcp__lock(&comm->mem_lock, IPCP_LOCK_MEM);
    ipcp__region_t *r = ipcp__region_find_id(comm, c->region.id);
    /* Without its descriptors (none left in this process?) the export
     * is not sent: the sender's import fails and says so, this transfer
     * fails, and the next one offers it again. */
    int n = r && !r->shared_with[peer->rank]
                ? ipcp__region_fds(r, fds + *nfds, IPCP_EXPORT_MAX_FDS)
                : -1;
    if (n >= 0) {
        cts->hdr.flags |= IPCP_CTS_HAS_EXP;
        cts->exp = r->exp;
        if (n > 0) {
            *nfds += n;
            cts->hdr.flags |= IPCP_CTS_MAP_FD;
        }
        r->shared_with[peer->rank] = 1;
    }
    ipcp__unlock(&comm->mem_lock, IPCP_LOCK_MEM);
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

/* The path, checked against a forced one; 0 when it cannot serve the
 * transfer (failed here). */
static int ipcp__accept_path(ipcp_comm_t *comm, ipcp__peer_t *peer,
                             const ipcp__msg_rts_t *rts, ipcp_request_t *req,
                             const ipcp__offer_t *o, ipcp__choice_t *c)
{
    if (ipcp__choose(comm, req, o, c) < 0) {
        char msg[IPCP_ERRMSG_MAX], why[200];
        ipcp__choice_why(comm, peer, req, c, why, sizeof(why));
        snprintf(msg, sizeof(msg),
                 "the %s path was forced but cannot "
                 "serve this transfer: %s",
                 ipcp_path_name(o->force), why);
        ipcp__accept_fail(comm, peer, rts, req, IPCP_ERR_UNSUPPORTED, msg);
        return 0;
    }
    return 1;
}

/* The receiving channel and queues; 0 when they cannot be made (failed
 * here).  Device slots once this process has used device memory, or the
 * sender does: a receiver that copies by itself makes no channel, so the
 * first transfer to make one may be a small host message, whose 1 MiB
 * slots then held every staged device transfer to 35-45 GB/s (16 MiB
 * slots: 49-53).  Host-only processes keep host slots. */
static int ipcp__accept_queues(ipcp_comm_t *comm, ipcp__peer_t *peer,
                               const ipcp__msg_rts_t *rts, ipcp_request_t *req,
                               ipcp__qset_t **qs)
{
    ipcp_status_t st = ipcp__chan_create(
        comm, &peer->rx,
        atomic_load_explicit(&comm->dev_used, memory_order_relaxed) ||
            rts->src_type == IPCP_MEM_CUDA || req->attr.type == IPCP_MEM_CUDA);
    if (st == IPCP_OK)
        st = ipcp__qset_get(comm, peer, &peer->rx, &req->attr, qs);
    if (st != IPCP_OK)
        ipcp__accept_fail(comm, peer, rts, req, st, ipcp__last_error());
    return st == IPCP_OK;
}

/* The bounce path's slots.  Between GPUs, the channel's.  On one GPU,
 * where the two processes' copies take turns in the GPU's time slices
 * (without MPS) and each hand-over of a chunk between them waits for one,
 * IPCP_BOUNCE_SAMEGPU_CHUNK (unless IPCPIPE_CHUNK sets the size), whole
 * from the first chunk: on one H200 256 MiB went at 212 GB/s through
 * 64 MiB slots after ramp chunks of 8, 16 and 32 MiB, and at 456 GB/s in
 * two chunks of 128 MiB. */
static uint64_t ipcp__bounce_slot(ipcp_comm_t *comm, ipcp__peer_t *peer,
                                  int same)
{
    if (comm->cfg->chunk || !same)
        return peer->rx.chan->slot_size;
    return IPCP_BOUNCE_SAMEGPU_CHUNK;
}

/* Whether both copies of a bounce on one GPU go in as their flags are met
 * (ipcp__stage_ready): where the two processes take turns in the GPU's
 * time slices, without MPS (or where MPS is unknown). */
static int ipcp__bounce_gate(ipcp_comm_t *comm, int device)
{
    const ipcp__backend_ops_t *ops = comm->dev_ops;
    return !ops->device_mps || ops->device_mps(ipcp__dev(comm), device) != 1;
}

/* The bounce path's ring on the receive buffer's GPU (pl->region), made on
 * first use; where it cannot be, the transfer goes staged, or fails when
 * the bounce path was forced (0: failed here). */
static int ipcp__accept_ring(ipcp_comm_t *comm, ipcp__peer_t *peer,
                             const ipcp__msg_rts_t *rts, ipcp_request_t *req,
                             const ipcp__offer_t *o, ipcp__choice_t *c)
{
    if (c->path != IPCP_PATH_BOUNCE)
        return 1;
    int same = ipcp__samegpu(comm, rts, req);
    if (ipcp__chan_ring(comm, &peer->rx, req->attr.device,
                        ipcp__bounce_slot(comm, peer, same), &c->ring,
                        &c->region.id) == 0) {
        c->region.ptr = c->ring.slots;
        c->ring.no_ramp = same;
        c->ring.gate = same && ipcp__bounce_gate(comm, req->attr.device);
        return 1;
    }
    c->why = IPCP_WHY_NO_RING;
    if (o->force == IPCP_PATH_BOUNCE) {
        char msg[IPCP_ERRMSG_MAX], why[200];
        ipcp__choice_why(comm, peer, req, c, why, sizeof(why));
        snprintf(msg, sizeof(msg), "the bounce path was forced: %s (%s)", why,
                 ipcp__last_error());
        ipcp__accept_fail(comm, peer, rts, req, IPCP_ERR_UNSUPPORTED, msg);
        return 0;
    }
    c->path = IPCP_PATH_STAGED;
    c->mode = 0;
    return 1;
}

/* How the transfer is cut: the direct part's pieces over the sender's
 * queues from lo_s, the staged part (all of a staged transfer, the share
 * of a striped one) in ring chunks. */
static void ipcp__accept_plan(ipcp_comm_t *comm, ipcp__peer_t *peer,
                              const ipcp__msg_rts_t *rts, ipcp_request_t *req,
                              ipcp_path_t force, ipcp__qset_t *qs,
                              ipcp__plan_t *pl)
{
    ipcp__chan_t *ch = peer->rx.chan;
    int whole =
        pl->c.path == IPCP_PATH_STAGED || pl->c.path == IPCP_PATH_BOUNCE;
    pl->slen =
        whole ? rts->len
              : ipcp__stripe_choose(comm, peer, rts, req, &pl->c, force, ch, qs,
                                    &pl->lo_s, &pl->lo_r, &pl->watch);
    pl->dlen = rts->len - pl->slen;
    if (pl->c.path == IPCP_PATH_DIRECT && pl->slen) {
        pl->c.path = IPCP_PATH_STRIPED;
        pl->c.staged = pl->slen;
    }
    pl->direct = !whole;
    pl->snq = rts->src_nq ? rts->src_nq : 1;
    const ipcp__ring_t *ring =
        pl->c.path == IPCP_PATH_BOUNCE ? &pl->c.ring : NULL;
    pl->unit =
        ipcp__staged_unit(pl->slen, ipcp__ring_slot(ch, ring), pl->direct);
    pl->nchunks =
        ipcp__staged_nchunks(pl->slen, pl->unit, ipcp__ring_ramp(ch, ring));
    if (pl->direct)
        pl->np = ipcp__npieces(comm, pl->dlen, pl->snq - pl->lo_s,
                               rts->src_type == IPCP_MEM_CUDA ||
                                   req->attr.type == IPCP_MEM_CUDA);
}

/* The CTS for a plan: the channel's descriptor on its first use, the
 * direct part's target and sequence, the staged part's first chunk; the
 * error slots our side reads at the end. */
static void ipcp__accept_cts(ipcp_comm_t *comm, ipcp__peer_t *peer,
                             const ipcp__msg_rts_t *rts, ipcp_request_t *req,
                             const ipcp__plan_t *pl, ipcp__msg_cts_t *cts,
                             int *fds, int *nfds)
{
    ipcp__chan_t *ch = peer->rx.chan;
    memset(cts, 0, sizeof(*cts));
    cts->hdr.type = IPCP_MSG_CTS;
    cts->status = IPCP_OK;
    cts->path = pl->c.path;
    cts->id = rts->id;
    cts->len = rts->len;
    if (!ch->fd_sent) {
        cts->hdr.flags |= IPCP_CTS_CHAN_FD;
        cts->chan_exp = ch->exp;
        fds[(*nfds)++] = ch->fd;
        ch->fd = -1; /* the message owns it now */
        ch->fd_sent = 1;
    }
    if (pl->direct) {
        cts->dseq = ++ch->dseq[rts->src_qset];
        cts->npieces = pl->np;
        cts->dq_lo = pl->lo_s;
        ipcp__cts_target(comm, peer, req->buf, &pl->c, cts, fds, nfds);
        req->xfer.err_slot =
            &ch->ctl->derr[rts->src_qset][cts->dseq % IPCP_ERR_SLOTS];
        req->xfer.err_seq = cts->dseq;
    }
    if (pl->c.path == IPCP_PATH_BOUNCE) {
        ipcp__cts_target(comm, peer, pl->c.ring.slots, &pl->c, cts, fds, nfds);
        cts->ring_slot = pl->c.ring.slot_size;
        if (pl->c.ring.no_ramp)
            cts->hdr.flags |= IPCP_CTS_NO_RAMP;
        if (pl->c.ring.gate)
            cts->hdr.flags |= IPCP_CTS_GATE;
    }
    if (!pl->direct || pl->slen) {
        cts->chunk_base = ch->seq;
        cts->stripe_len = pl->direct ? pl->slen : 0;
        ch->seq += pl->nchunks;
        cts->sseq = ++ch->sseq;
        ipcp__errslot_t *slot = &ch->ctl->serr[cts->sseq % IPCP_ERR_SLOTS];
        if (pl->direct) {
            req->xfer.err_slot2 = slot;
            req->xfer.err_seq2 = cts->sseq;
        } else {
            req->xfer.err_slot = slot;
            req->xfer.err_seq = cts->sseq;
        }
    }
}

/* A striped transfer's two ends, watched: every piece's done flag, and
 * our mark of the last chunk. */
static void ipcp__accept_watch(ipcp_comm_t *comm, ipcp__peer_t *peer,
                               const ipcp__msg_rts_t *rts, ipcp_request_t *req,
                               ipcp__plan_t *pl, const ipcp__msg_cts_t *cts)
{
    ipcp__chan_t *ch = peer->rx.chan;
    ipcp__watch_t *wt = &pl->watch;
    uint64_t k = cts->chunk_base + pl->nchunks - 1;
    wt->done = ch->ctl->done[rts->src_qset];
    wt->dseq = cts->dseq;
    wt->np = pl->np;
    wt->lo_s = pl->lo_s;
    wt->snq = pl->snq;
    wt->last = &ch->ctl->freed[k % ch->nslots].v;
    wt->last_v = k / ch->nslots + 1;
    wt->slen = pl->slen;
    wt->on = 1;
    req->xfer.watch = *wt;
    ipcp__list_push_back(&comm->watching, &req->xfer.watch.link);
}

/* IPCPIPE_SPLIT: how many bytes at the start this process copies itself
 * out of the sender's buffer while the sender writes the rest (0: none).
 * Host to host, from cfg->split bytes, into a process bound to one CPU:
 * alone it would copy at one core's speed while the sender's core waits
 * (256 MiB bound to one core each on an H200 machine: 6.7 GB/s, against
 * 12.6 unbound), and the sender must have offered its buffer. */
static uint64_t ipcp__split_head(const ipcp__offer_t *o,
                                 const ipcp__config_t *cfg)
{
    if (!cfg->split || o->len < cfg->split || cfg->drive == IPCP_DRIVE_OFF ||
        cfg->stripe > 0 || !ipcp__direct_allowed(o->force) || o->sync ||
        o->dst_type != IPCP_MEM_HOST || o->src_type != IPCP_MEM_HOST ||
        !(o->src_map || o->src_addr) || !o->one_cpu)
        return 0;
    return (o->len / 2) & ~(uint64_t)4095; /* 0 below 8 KiB */
}

/* Whether this process can read the first head bytes of the sender's
 * buffer: its allocation mapped here (*imp, held), or process_vm_readv. */
static int ipcp__split_source(ipcp_comm_t *comm, ipcp__peer_t *peer,
                              const ipcp__msg_rts_t *rts, uint64_t head,
                              ipcp__import_t **imp)
{
    ipcp__mem_attr_t sa;
    *imp = NULL;
    if (!(rts->hdr.flags & IPCP_RTS_SRC))
        return comm->cfg->pvm != IPCP_PVM_OFF && ipcp__pvm_allowed(comm, peer);
    memset(&sa, 0, sizeof(sa));
    sa.type = IPCP_MEM_HOST;
    sa.device = -1;
    if (ipcp__import_get(comm, peer, rts->src_region, &sa, imp) != IPCP_OK)
        return 0;
    if (rts->src_offset > (*imp)->size ||
        head > (*imp)->size - rts->src_offset) {
        ipcp__import_put(comm, peer, *imp);
        *imp = NULL;
        return 0;
    }
    return 1;
}

static void ipcp__split_head_nop(ipcp__track_t *t)
{
    (void)t;
}

/* Our half of a SPLIT transfer, [0, head): enqueued on the queue whose
 * wait for the sender's done flags follows it (ipcp__rx_direct), so the
 * transfer ends when both halves have; the sender's send ends at our
 * DRIVEN CTS (drive_id), once nothing of ours reads its buffer.  Its
 * status is its own track's (x->head, read at the end): a failed read of
 * ours must not end the waits for the sender's half, which is still being
 * written into the receive buffer. */
static unsigned ipcp__split_copy(ipcp__peer_t *peer, const ipcp__msg_rts_t *rts,
                                 ipcp_request_t *req, ipcp__qset_t *qs,
                                 const ipcp__plan_t *pl, uint64_t dseq,
                                 ipcp__import_t *imp)
{
    ipcp__xfer_t *x = &req->xfer;
    int qi = (int)(pl->lo_r + dseq % (uint64_t)((unsigned)qs->n - pl->lo_r));
    uint64_t head = pl->c.head;
    x->drive_id = rts->id;
    x->import = imp;
    ipcp__track_init(&x->head, 1, ipcp__split_head_nop, x);
    x->split_head = 1;
    ipcp__enq_check(&x->head, ipcp__src_copy(qs, qi, peer, rts, imp, req->buf,
                                             0, head, &x->head));
    return 1u << qi;
}

extern const ipcp__route_t ipcp__route_sent;
extern const ipcp__route_t ipcp__route_split;

/* The sender's copy (route: the one whose tx the sender runs), with our
 * copy of the first head bytes meanwhile when head is not 0 (himp: the sender's
 * allocation mapped here for it, or NULL to read with process_vm_readv). */
static void ipcp__sent_run(const ipcp__route_t *route, ipcp_comm_t *comm,
                           ipcp__peer_t *peer, const ipcp__msg_rts_t *rts,
                           ipcp_request_t *req, const ipcp__offer_t *o,
                           uint64_t head, ipcp__import_t *himp)
{
    ipcp__msg_cts_t cts;
    ipcp__plan_t pl;
    ipcp__qset_t *qs;
    int fds[IPCP_MSG_MAX_FDS], nfds = 0;
    unsigned mask = 0;
    ipcp_path_t force = o->force;

    memset(&pl, 0, sizeof(pl));
    if (!ipcp__accept_path(comm, peer, rts, req, o, &pl.c) ||
        !ipcp__accept_queues(comm, peer, rts, req, &qs) ||
        !ipcp__accept_ring(comm, peer, rts, req, o, &pl.c)) {
        if (himp)
            ipcp__import_put(comm, peer, himp);
        return;
    }
    ipcp__accept_plan(comm, peer, rts, req, force, qs, &pl);
    if (head && (pl.c.path != IPCP_PATH_DIRECT || pl.slen)) {
        if (himp) /* the sender copies it all */
            ipcp__import_put(comm, peer, himp);
        himp = NULL;
        head = 0;
    }
    if (head) {
        pl.c.head = head;
        pl.dlen = rts->len - head;
        pl.np = ipcp__npieces(comm, pl.dlen, pl.snq - pl.lo_s, 0);
    }
    ipcp__log_choice(comm, peer, req, &pl.c, force);
    req->path = pl.c.path;
    req->nbytes = rts->len;
    ipcp__xfer_begin(comm, peer, req, 1, pl.nchunks);
    ipcp__accept_cts(comm, peer, rts, req, &pl, &cts, fds, &nfds);
    cts.route = ipcp__route_id(route);
    if (head) {
        cts.hdr.flags |= IPCP_CTS_SPLIT;
        cts.head_len = head;
    }
    /* The CTS goes before our half is enqueued: our queues only wait on
     * flags the sender raises, in any order, and enqueueing a staged half
     * (three driver calls a chunk) held the sender back by about 0.1 ms on
     * H200s.  A loss on the way fails the transfer; the waits enqueued
     * after it see the flags it moved ahead. */
    int watched = comm->cfg->stripe_adapt && pl.direct && pl.slen && pl.nchunks;
    if (watched) /* no part can start before the CTS */
        pl.watch.t0 = ipcp__now_ns();
    /* Marked before it goes: marked after the post, the sender could see
     * it first (a CI run on 2 CPUs: the sender's median 16 us before the
     * mark, tools.bench.trace). */
    ipcp__trace_mark(req, IPCP_TM_CTS);
    if (ipcp__peer_post(comm, peer, &cts, sizeof(cts), fds, nfds) != IPCP_OK &&
        peer->link != IPCP_PEER_BROKEN)
        /* The sender would never write what our queues wait for; a loss
         * releases them and tells it (one whose writes broke is lost once
         * what it sent is read). */
        ipcp__peer_lost(comm, peer, "cannot send a CTS");
    ipcp__fault_point(IPCP_FAULT_CTS_POSTED);
    ipcp__stage_flush(comm, qs);
    if (head)
        mask |= ipcp__split_copy(peer, rts, req, qs, &pl, cts.dseq, himp);
    if (pl.direct)
        mask |= ipcp__rx_direct(peer, rts, req, qs, cts.dseq, pl.np, pl.lo_s,
                                pl.lo_r);
    if (!pl.direct || pl.slen)
        ipcp__stage_init(&req->xfer, peer->rx.chan,
                         pl.c.path == IPCP_PATH_BOUNCE ? &pl.c.ring : NULL,
                         (char *)req->buf + pl.dlen, pl.slen, pl.unit,
                         cts.chunk_base, 0, 0, NULL, 0);
    if (watched)
        ipcp__accept_watch(comm, peer, rts, req, &pl, &cts);
    ipcp__stage_go(comm, &req->xfer, qs, mask);
}

static int ipcp__sent_serves(const ipcp__offer_t *o, const ipcp__config_t *cfg)
{
    (void)o;
    (void)cfg;
    return 1;
}

static int ipcp__sent_start(ipcp_comm_t *comm, ipcp__peer_t *peer,
                            const ipcp__msg_rts_t *rts, ipcp_request_t *req,
                            const ipcp__offer_t *o)
{
    ipcp__sent_run(&ipcp__route_sent, comm, peer, rts, req, o, 0, NULL);
    return 1;
}

const ipcp__route_t ipcp__route_sent = {
    .name = "sent",
    .serves = ipcp__sent_serves,
    .start = ipcp__sent_start,
    .tx = ipcp__xfer_tx_sent,
};

static int ipcp__split_serves(const ipcp__offer_t *o, const ipcp__config_t *cfg)
{
    return ipcp__split_head(o, cfg) != 0;
}

/* Declined when this process cannot read the sender's buffer. */
static int ipcp__split_start(ipcp_comm_t *comm, ipcp__peer_t *peer,
                             const ipcp__msg_rts_t *rts, ipcp_request_t *req,
                             const ipcp__offer_t *o)
{
    ipcp__import_t *himp = NULL;
    uint64_t head = ipcp__split_head(o, comm->cfg);
    if (!ipcp__split_source(comm, peer, rts, head, &himp))
        return 0;
    ipcp__sent_run(&ipcp__route_split, comm, peer, rts, req, o, head, himp);
    return 1;
}

const ipcp__route_t ipcp__route_split = {
    .name = "split",
    .serves = ipcp__split_serves,
    .start = ipcp__split_start,
    .tx = ipcp__xfer_tx_sent,
};

void ipcp__xfer_accept(ipcp_comm_t *comm, ipcp__peer_t *peer,
                       const ipcp__msg_rts_t *rts, ipcp_request_t *req,
                       ipcp_path_t force)
{
    ipcp__offer_t o;

    ipcp__req_xfer_ready(req);
    ipcp__trace_mark(req, IPCP_TM_MEET);
    ipcp__fault_msg(IPCP_FAULT_RTS_MATCHED, rts->tag);
    ipcp__samegpu_note(comm, peer, rts, req);
    ipcp__offer_gather(comm, rts, req, force, &o);
    /* The last route, the sender's copy, takes everything. */
    const ipcp__route_t *r =
        ipcp__route_take(ipcp__routes, &o, comm, peer, rts, req);
    assert(r);
    (void)r;
}
