/* The sender's side: its half of the transfer once the CTS names the
 * target, and one-sided operations on memory it maps itself. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/time.h"
#include "engine/route.h"
#include "engine/xfer.h"
#include "engine/samegpu.h"
#include "engine/stripe.h"

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

/* The receiver's allocation the CTS names (its export, when it came
 * with it, kept for later), mapped here for the transfer: the address of
 * the CTS's offset in it, with need bytes from there; NULL with the track
 * failed when it cannot be. */
static char *ipcp__tx_target(ipcp_comm_t *comm, ipcp__peer_t *peer,
                             ipcp_request_t *req, const ipcp__msg_cts_t *cts,
                             const int *map_fds, int nmap, uint64_t need)
{
    ipcp__track_t *t = &req->xfer.track;
    ipcp__import_t *imp = NULL;
    if (cts->hdr.flags & IPCP_CTS_HAS_EXP)
        ipcp__rexport_put(peer, cts->dst_region, &cts->exp, map_fds, nmap);
    ipcp_status_t st =
        ipcp__import_get(comm, peer, cts->dst_region, &req->attr, &imp);
    if (st != IPCP_OK) {
        ipcp__track_fail(t, st, "%s", ipcp__last_error());
        return NULL;
    }
    req->xfer.import = imp;
    if (cts->dst_offset > imp->size || need > imp->size - cts->dst_offset) {
        ipcp__track_fail(t, IPCP_ERR_STATE,
                         "target range is outside the peer's allocation");
        return NULL;
    }
    return (char *)imp->ptr + cts->dst_offset;
}

/* Our half of the direct part, [base, base + len) of the buffer: np
 * pieces, each copied and then marked in its queue's done flag.  Returns
 * the mask of the queues used. */
static unsigned ipcp__tx_direct(ipcp_comm_t *comm, ipcp__peer_t *peer,
                                ipcp_request_t *req, const ipcp__msg_cts_t *cts,
                                ipcp__qset_t *qs, const int *map_fds, int nmap,
                                uint64_t base, uint64_t len)
{
    ipcp__track_t *t = &req->xfer.track;
    ipcp__chan_t *ch = peer->tx.chan;
    unsigned np = cts->npieces, mask = 0;
    int myq = ipcp__qset_index(&req->attr);
    char *dst = NULL;

    if (cts->dst_mode == IPCP_DST_MAPPED)
        dst = ipcp__tx_target(comm, peer, req, cts, map_fds, nmap, req->len);
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
        off += base;
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
    if (cts->path == IPCP_PATH_BOUNCE &&
        (req->attr.type != IPCP_MEM_CUDA || cts->dst_mode != IPCP_DST_MAPPED ||
         cts->ring_slot < IPCP_RING_SLOT_MIN ||
         cts->ring_slot > IPCP_RING_SLOT_MAX))
        return "bad bounce ring";
    if ((cts->hdr.flags & IPCP_CTS_SPLIT) &&
        (cts->path != IPCP_PATH_DIRECT || req->attr.type != IPCP_MEM_HOST ||
         cts->head_len == 0 || cts->head_len >= req->len))
        return "bad split";
    if ((!direct || striped) && cts->chunk_base != ch->seq)
        return "ring sequence mismatch";
    return NULL;
}

/* The sending channel (imported from the CTS on its first use) and the
 * queue set of the CTS's transfer, checked against it; NULL when either
 * fails (req completed, the peer lost: it would never be written). */
static ipcp__qset_t *ipcp__cts_qset(ipcp_comm_t *comm, ipcp__peer_t *peer,
                                    ipcp_request_t *req,
                                    const ipcp__msg_cts_t *cts, int chan_fd)
{
    ipcp_status_t st = IPCP_OK;
    ipcp__qset_t *qs = NULL;
    const char *bad;
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
        return NULL;
    }
    if ((bad = ipcp__cts_check(peer->tx.chan, qs, req, cts))) {
        ipcp__req_complete(req, IPCP_ERR_STATE, bad);
        ipcp__peer_lost(comm, peer, bad);
        return NULL;
    }
    return qs;
}

void ipcp__xfer_on_cts(ipcp_comm_t *comm, ipcp__peer_t *peer,
                       ipcp_request_t *req, const ipcp__msg_cts_t *cts,
                       int *fds, int nfds)
{
    const ipcp__route_t *r;

    ipcp__trace_mark(req, IPCP_TM_MEET);
    ipcp__await_end(req); /* the sender's copies count as dev_inflight */
    if (cts->status != IPCP_OK) {
        char msg[IPCP_ERRMSG_MAX];
        snprintf(msg, sizeof(msg), "%.*s", IPCP_ERRWIRE_MAX - 1, cts->errmsg);
        ipcp__req_complete(req, ipcp__peer_status(cts->status), msg);
    } else if (cts->hdr.flags & IPCP_CTS_DRIVEN) { /* the receiver copied */
        if (cts->path < IPCP_PATH_DIRECT || cts->path > IPCP_PATH_LANE) {
            ipcp__req_complete(req, IPCP_ERR_STATE,
                               "the receiver reported an unknown path");
        } else {
            req->path = (ipcp_path_t)cts->path;
            req->nbytes = req->len;
            ipcp__trace_send_driven(comm, peer, req, req->path);
            ipcp__req_complete(req, IPCP_OK, NULL);
        }
    } else if (!(r = ipcp__route_by_id(cts->route)) || !r->tx) {
        /* It waits for what we would never do. */
        ipcp__req_complete(req, IPCP_ERR_STATE,
                           "CTS names no route with a sender's step");
        ipcp__peer_lost(comm, peer, "CTS names no route with a sender's step");
    } else {
        r->tx(comm, peer, req, cts, fds, nfds);
    }
    for (int i = 0; i < nfds; i++)
        close(fds[i]);
}

/* The sent and split routes' step: our copies of the direct part into the
 * target the CTS names, the staged part through the ring. */
void ipcp__xfer_tx_sent(ipcp_comm_t *comm, ipcp__peer_t *peer,
                        ipcp_request_t *req, const ipcp__msg_cts_t *cts,
                        const int *fds, int nfds)
{
    int fi = 0, chan_fd = -1, nmap = 0;
    ipcp__qset_t *qs;

    if ((cts->hdr.flags & IPCP_CTS_CHAN_FD) && fi < nfds)
        chan_fd = fds[fi++];
    if (cts->hdr.flags & IPCP_CTS_MAP_FD) /* the target's, all the rest */
        nmap = nfds - fi;
    if (!(qs = ipcp__cts_qset(comm, peer, req, cts, chan_fd)))
        return;
    ipcp__chan_t *ch = peer->tx.chan;
    req->path = (ipcp_path_t)cts->path;
    req->nbytes = req->len;
    ipcp__fault_point(IPCP_FAULT_CTS_RECEIVED);
    int striped = cts->path == IPCP_PATH_STRIPED;
    int direct = striped || cts->path == IPCP_PATH_DIRECT;
    uint64_t slen = striped ? cts->stripe_len : direct ? 0 : req->len;
    uint64_t head = (cts->hdr.flags & IPCP_CTS_SPLIT) ? cts->head_len : 0;
    uint64_t dlen = req->len - slen - head;
    /* The bounce path's ring, as the CTS describes it (its slots mapped
     * below): as many slots as the channel's. */
    ipcp__ring_t ring = {ch->slots, cts->ring_slot,
                         (cts->hdr.flags & IPCP_CTS_NO_RAMP) != 0,
                         (cts->hdr.flags & IPCP_CTS_GATE) != 0};
    const ipcp__ring_t *rp = cts->path == IPCP_PATH_BOUNCE ? &ring : NULL;
    uint64_t unit = ipcp__staged_unit(slen, ipcp__ring_slot(ch, rp), striped);
    uint64_t nchunks =
        ipcp__staged_nchunks(slen, unit, ipcp__ring_ramp(ch, rp));
    unsigned np = direct ? cts->npieces : 0, mask = 0;

    ipcp__stage_flush(comm, qs);
    ipcp__xfer_begin(comm, peer, req, 0, np + nchunks);
    req->xfer.tbase = np;
    if (head) { /* the receiver reads [0, head) until its DRIVEN CTS */
        atomic_fetch_add(&req->xfer.track.pending, 1);
        req->xfer.split_wait = 1;
    }
    if (direct)
        mask |= ipcp__tx_direct(comm, peer, req, cts, qs, fds + fi, nmap, head,
                                dlen);
    if (!direct || striped) {
        /* Where the ring cannot be mapped the track has failed: the
         * chunks' marks still go in, their copies do not. */
        char *slots = rp ? ipcp__tx_target(comm, peer, req, cts, fds + fi, nmap,
                                           ch->nslots * ring.slot_size)
                         : NULL;
        if (slots)
            ring.slots = slots;
        else if (rp) /* later transfers go staged (RTS_NO_BOUNCE) */
            peer->no_bounce = 1;
        ch->seq += nchunks;
        ipcp__stage_init(&req->xfer, ch, rp, (char *)req->buf + dlen, slen,
                         unit, cts->chunk_base, 1, req->type == IPCP_REQ_PUT,
                         &ch->ctl->serr[cts->sseq % IPCP_ERR_SLOTS], cts->sseq);
    }
    ipcp__stage_go(comm, &req->xfer, qs, mask);
}

int ipcp__split_end(ipcp_comm_t *comm, ipcp__peer_t *peer,
                    const ipcp__msg_cts_t *cts)
{
    ipcp__list_t *e, *tmp;
    (void)comm;
    if (!(cts->hdr.flags & IPCP_CTS_DRIVEN))
        return 0;
    ipcp__list_for_each_safe(e, tmp, &peer->active)
    {
        ipcp__xfer_t *x = ipcp__list_entry(e, ipcp__xfer_t, link);
        if (x->rx || !x->split_wait || !x->req || x->req->id != cts->id)
            continue;
        x->split_wait = 0;
        if (cts->status != IPCP_OK)
            ipcp__track_fail(&x->track, ipcp__peer_status(cts->status), "%.*s",
                             IPCP_ERRWIRE_MAX - 1, cts->errmsg);
        ipcp__track_notify(&x->track);
        return 1;
    }
    return 0;
}

void ipcp__xfer_eager_to_device(ipcp_comm_t *comm, ipcp__peer_t *peer,
                                ipcp_request_t *req, const void *data,
                                size_t len)
{
    ipcp__qset_t *qs;
    ipcp__req_xfer_ready(req);
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
