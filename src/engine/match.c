/* Two-sided matching (in order per peer and tag) and eager messages (the
 * one-sided operations through the owner: onesided.c).  All of it runs
 * under comm->prog_lock (the progress thread, or a caller's turn), except
 * the callers' own way for small host messages (ipcp__match_fast,
 * ipcp__match_eager): a peer's posted and unexp lists are guarded by its
 * rx_lock. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/bufcache.h"
#include "engine/engine.h"
#include "engine/mbox_ring.h"
#include "engine/route.h"

static void ipcp__close_fds(int *fds, int nfds)
{
    for (int i = 0; i < nfds; i++)
        close(fds[i]);
}

/* A CTS that ends the sender's transfer: st (and msg, when st is an
 * error), with flags and path for a transfer the receiver copied. */
void ipcp__cts_end(ipcp_comm_t *comm, ipcp__peer_t *peer, uint64_t id,
                   uint32_t flags, int path, ipcp_status_t st, const char *msg)
{
    ipcp__msg_cts_t cts;
    memset(&cts, 0, sizeof(cts));
    cts.hdr.type = IPCP_MSG_CTS;
    cts.hdr.flags = flags;
    cts.status = st;
    cts.path = path;
    cts.id = id;
    if (st != IPCP_OK)
        snprintf(cts.errmsg, sizeof(cts.errmsg), "%.*s",
                 (int)sizeof(cts.errmsg) - 1, msg);
    ipcp__peer_post(comm, peer, &cts, sizeof(cts), NULL, 0);
}

/* Tells a sender that its transfer will not happen, and why. */
void ipcp__nack(ipcp_comm_t *comm, ipcp__peer_t *peer, uint64_t id,
                ipcp_status_t st, const char *msg)
{
    ipcp__cts_end(comm, peer, id, 0, 0, st, msg);
}

ipcp_request_t *ipcp__find_id(ipcp__list_t *list, uint64_t id)
{
    ipcp__list_t *e, *tmp;
    ipcp__list_for_each_safe(e, tmp, list)
    {
        ipcp_request_t *r = ipcp__list_entry(e, ipcp_request_t, link);
        if (r->id == id) {
            ipcp__list_del(e);
            return r;
        }
    }
    return NULL;
}

/* ---- Sending ------------------------------------------------------------ */

void ipcp__rts_fill(ipcp_comm_t *comm, ipcp__peer_t *peer, ipcp_request_t *req,
                    ipcp__msg_rts_t *rts)
{
    memset(rts, 0, offsetof(ipcp__msg_rts_t, errmsg));
    /* errmsg travels only with failures; its first byte keeps it a string. */
    rts->errmsg[0] = '\0';
    rts->hdr.type = IPCP_MSG_RTS;
    rts->tag = req->tag;
    rts->id = req->id = ++peer->next_id;
    rts->len = req->len;
    rts->src_type = (int32_t)req->attr.type;
    rts->src_device = req->attr.device;
    rts->src_qset = (uint32_t)ipcp__qset_index(&req->attr);
    if (req->attr.type == IPCP_MEM_HOST && ipcp__pvm_allowed(comm, peer))
        rts->hdr.flags |= IPCP_RTS_PVM_OK;
    /* Only where a receiver reads it (ipcp__stripe_choose: sizes it may
     * stripe), since the lists are walked. */
    if (req->attr.type == IPCP_MEM_CUDA && req->len >= IPCP_STRIPE_MIN_SIZE &&
        ipcp__peer_busy(peer, 1))
        rts->hdr.flags |= IPCP_RTS_PEER_RECV;
    if (req->attr.type == IPCP_MEM_CUDA && peer->no_bounce)
        rts->hdr.flags |= IPCP_RTS_NO_BOUNCE;
    if (req->attr.type == IPCP_MEM_CUDA && ipcp__dev(comm) &&
        comm->dev_ops->device_reach)
        rts->nreach = (uint32_t)comm->dev_ops->device_reach(
            ipcp__dev(comm), req->attr.device, rts->reach, IPCP_MAX_REACH);
}

/* Names region r (comm->mem_lock held) as rts's source, with its export
 * the first time this peer is offered it. */
static void ipcp__rts_offer(ipcp__peer_t *peer, ipcp_request_t *req,
                            ipcp__region_t *r, ipcp__msg_rts_t *rts,
                            ipcp__export_t *exp, int *fds, int *nfds)
{
    rts->hdr.flags |= IPCP_RTS_SRC;
    rts->src_region = r->id;
    rts->src_offset = (uint64_t)((char *)req->buf - (char *)r->ptr);
    if (r->shared_with[peer->rank])
        return;
    int n = ipcp__region_fds(r, fds + *nfds, IPCP_EXPORT_MAX_FDS);
    if (n < 0) { /* not offered: the receiver does not copy it */
        rts->hdr.flags &= ~(uint32_t)IPCP_RTS_SRC;
        return;
    }
    rts->hdr.flags |= IPCP_RTS_SRC_EXP;
    *exp = r->exp;
    if (n > 0) {
        *nfds += n;
        rts->hdr.flags |= IPCP_RTS_SRC_FD;
    }
    r->shared_with[peer->rank] = 1;
}

/* IPCPIPE_DRIVE: names the send buffer's allocation, so that the receiver
 * may copy out of it itself; its export (*exp, with SRC_EXP) goes along
 * the first time this peer is offered it (the fd, if any, in *fds).
 * Device memory (the user's cudaMalloc'd allocations are exported on
 * first use, as receive buffers are) and host memory from ipcp_mem_alloc;
 * other host memory by its address, for process_vm_readv (SRC_ADDR).  The
 * region is marked shared with the peer: the caller posts the RTS next (a
 * peer that misses it is lost).  One hold of mem_lock per send where the
 * region is known (every send after the first). */
static void ipcp__rts_source(ipcp_comm_t *comm, ipcp__peer_t *peer,
                             ipcp_request_t *req, ipcp__msg_rts_t *rts,
                             ipcp__export_t *exp, int *fds, int *nfds)
{
    if (comm->cfg->drive == IPCP_DRIVE_OFF || req->sync || !req->len)
        return;
    ipcp__lock(&comm->mem_lock, IPCP_LOCK_MEM);
    ipcp__region_t *r =
        ipcp__region_find_live(comm, req->buf, req->len, req->attr.buffer_id);
    if (r && r->exportable)
        ipcp__rts_offer(peer, req, r, rts, exp, fds, nfds);
    ipcp__unlock(&comm->mem_lock, IPCP_LOCK_MEM);
    if (!(rts->hdr.flags & IPCP_RTS_SRC) && req->attr.type == IPCP_MEM_HOST &&
        comm->cfg->pvm != IPCP_PVM_OFF) {
        rts->hdr.flags |= IPCP_RTS_SRC_ADDR;
        rts->src_offset = (uint64_t)(uintptr_t)req->buf;
    }
    if (r || req->attr.type != IPCP_MEM_CUDA)
        return;
    /* Touched by this thread only (ipcp__choose does the same). */
    if (!(r = ipcp__region_auto(comm, &req->attr, req->buf, req->len)))
        return;
    uint64_t id = r->id;
    /* Again under the lock: a user's thread may free the region. */
    ipcp__lock(&comm->mem_lock, IPCP_LOCK_MEM);
    if ((r = ipcp__region_find_id(comm, id)))
        ipcp__rts_offer(peer, req, r, rts, exp, fds, nfds);
    ipcp__unlock(&comm->mem_lock, IPCP_LOCK_MEM);
}

/* Posts an RTS for req (a send, a staged put, or the owner's reply to a
 * get) and parks req until the CTS.  offer: a two-sided send, which names
 * its buffer for the receiver (ipcp__rts_source). */
void ipcp__send_rts(ipcp_comm_t *comm, ipcp__peer_t *peer, ipcp_request_t *req,
                    ipcp__msg_rts_t *rts, int offer)
{
    ipcp__qset_t *qs;
    ipcp__export_t exp;
    int fds[IPCP_EXPORT_MAX_FDS], nfds = 0;
    ipcp_status_t st = ipcp__qset_get(comm, peer, &peer->tx, &req->attr, &qs);
    if (st != IPCP_OK) {
        ipcp__req_complete(req, st, ipcp__last_error());
        return;
    }
    rts->src_nq = (uint32_t)qs->n;
    if (offer)
        ipcp__rts_source(comm, peer, req, rts, &exp, fds, &nfds);
    int tail = (rts->hdr.flags & IPCP_RTS_SRC_EXP) != 0;
    st = ipcp__peer_postv(comm, peer, rts, sizeof(*rts), tail ? &exp : NULL,
                          tail ? sizeof(exp) : 0, fds, nfds);
    if (st != IPCP_OK) {
        ipcp__req_complete(req, st, ipcp__last_error());
        return;
    }
    /* The receiver may copy it and only tell us at the end: on 2 x H200
     * a sleeping sender learned it ~30 us after the receiver did.  Not
     * host memory (IPCPIPE_DRIVE=on): a receiver copies it at a few GB/s,
     * long past any window worth polling through. */
    if ((rts->hdr.flags & IPCP_RTS_SRC) && req->attr.type == IPCP_MEM_CUDA)
        ipcp__await_offer(comm, req);
    ipcp__list_push_back(&peer->wait_cts, &req->link);
    ipcp__fault_msg(IPCP_FAULT_RTS_POSTED, rts->tag);
}

static void ipcp__send_start(ipcp_comm_t *comm, ipcp__peer_t *peer,
                             ipcp_request_t *req)
{
    ipcp__msg_eager_t e = {{IPCP_MSG_EAGER, 0}, req->tag, (uint32_t)req->len};

    /* Small host messages travel as one EAGER message: no ring, no round
     * trip.  Only to a receiver known to leave the path to us: one that
     * forces a path gets that path, even for one byte. */
    if (req->attr.type == IPCP_MEM_HOST && req->len <= comm->eager_max &&
        sizeof(e) + req->len <= ipcp__mbox_carry_max(peer) &&
        ipcp__force_for(peer->remote_path, req->tag, IPCP_MEM_HOST,
                        IPCP_MEM_HOST) == IPCP_PATH_AUTO) {
        ipcp_status_t st = ipcp__peer_postv(comm, peer, &e, sizeof(e), req->buf,
                                            req->len, NULL, 0);
        req->path = IPCP_PATH_EAGER;
        req->nbytes = req->len;
        int tag = req->tag; /* req may be freed once complete */
        ipcp__req_complete(req, st, st == IPCP_OK ? NULL : ipcp__last_error());
        ipcp__fault_msg(IPCP_FAULT_RTS_POSTED, tag);
        return;
    }
    ipcp__msg_rts_t rts;
    ipcp__rts_fill(comm, peer, req, &rts);
    ipcp__send_rts(comm, peer, req, &rts, 1);
}

/* ---- Receiving ---------------------------------------------------------- */

/* Into the receive's buffer; a caller's own way only ever meets host
 * buffers here (ipcp__match_eager). */
static void ipcp__deliver_eager(ipcp_comm_t *comm, ipcp__peer_t *peer,
                                ipcp_request_t *req, const unsigned char *data,
                                size_t len)
{
    ipcp__fault_msg(IPCP_FAULT_RTS_MATCHED, req->tag);
    if (len && req->attr.type != IPCP_MEM_HOST) {
        /* A host sender cannot know the receive buffer is device memory:
         * the bytes go in with one copy on the receiver's queue. */
        ipcp__xfer_eager_to_device(comm, peer, req, data, len);
        return;
    }
    if (len && data != req->buf) /* a pipelined one's are there */
        memcpy(req->buf, data, len);
    req->path = IPCP_PATH_EAGER;
    req->nbytes = len;
    req->xfer_clean = !req->sync;
    ipcp__req_complete(req, IPCP_OK, NULL);
}

/* 1 when a message of len bytes does not fit the receive: msg says so. */
static int ipcp__truncated(const ipcp_comm_t *comm, const ipcp__peer_t *peer,
                           const ipcp_request_t *req, int tag, uint64_t len,
                           char *msg, size_t cap)
{
    if (len <= req->len)
        return 0;
    snprintf(msg, cap,
             "message from rank %d (tag %d) has %llu bytes but the receive "
             "buffer of rank %d has %zu",
             peer->rank, tag, (unsigned long long)len, comm->rank, req->len);
    IPCP_INFO(IPCP_SUB_ENGINE, "%s", msg);
    return 1;
}

/* A receive met its RTS. */
static void ipcp__recv_matched(ipcp_comm_t *comm, ipcp__peer_t *peer,
                               ipcp_request_t *req, const ipcp__msg_rts_t *rts,
                               const unsigned char *eager)
{
    char msg[IPCP_ERRMSG_MAX];
    if (ipcp__truncated(comm, peer, req, rts->tag, rts->len, msg,
                        sizeof(msg))) {
        if (!(rts->hdr.flags & IPCP_RTS_EAGER))
            ipcp__nack(comm, peer, rts->id, IPCP_ERR_TRUNCATED, msg);
        ipcp__req_complete(req, IPCP_ERR_TRUNCATED, msg);
        return;
    }
    if (rts->hdr.flags & IPCP_RTS_EAGER) {
        ipcp__deliver_eager(comm, peer, req, eager, rts->len);
        return;
    }
    if (ipcp__peer_closed(peer)) {
        char gone[IPCP_ERRMSG_MAX];
        ipcp__req_complete(req, IPCP_ERR_PEER_LOST,
                           ipcp__peer_gone(comm, peer, gone, sizeof(gone)));
        return;
    }
    ipcp__xfer_accept(comm, peer, rts, req, atomic_load(&comm->path));
}

/* The oldest message kept with req's tag (rx_lock held). */
/* n_unexp moved by d (rx_lock held: one writer at a time). */
static void ipcp__unexp_count(ipcp__peer_t *peer, int d)
{
    unsigned n = atomic_load_explicit(&peer->n_unexp, memory_order_relaxed);
    atomic_store_explicit(&peer->n_unexp, n + (unsigned)d,
                          memory_order_relaxed);
}

/* Takes u off the list of kept messages (rx_lock held). */
static void ipcp__unexp_del(ipcp__peer_t *peer, ipcp__unexp_t *u)
{
    ipcp__list_del(&u->link);
    ipcp__unexp_count(peer, -1);
}

static ipcp__unexp_t *ipcp__unexp_find(ipcp__peer_t *peer, int tag)
{
    ipcp__list_t *e, *tmp;
    ipcp__list_for_each_safe(e, tmp, &peer->unexp)
    {
        ipcp__unexp_t *u = ipcp__list_entry(e, ipcp__unexp_t, link);
        if (u->rts.tag == tag)
            return u;
    }
    return NULL;
}

/* rx_lock held. */
static void ipcp__unexp_match(ipcp_comm_t *comm, ipcp__peer_t *peer,
                              ipcp_request_t *req, ipcp__unexp_t *u)
{
    ipcp__unexp_del(peer, u);
    ipcp__recv_matched(comm, peer, req, &u->rts, u->eager);
    ipcp__buf_free(u->eager);
    free(u);
}

/* A receive into peer->posted, and out of it (rx_lock held); n_posted
 * counts them for the progress thread, which looks without the lock. */
static void ipcp__posted_add(ipcp_comm_t *comm, ipcp__peer_t *peer,
                             ipcp_request_t *req)
{
    ipcp__list_push_back(&peer->posted, &req->link);
    req->in_posted = 1;
    /* Written under rx_lock only: no atomic add needed. */
    atomic_store_explicit(
        &peer->n_posted,
        atomic_load_explicit(&peer->n_posted, memory_order_relaxed) + 1,
        memory_order_relaxed);
    if (!req->watch) {
        atomic_fetch_add(&peer->n_posted_thread, 1);
        /* Posted by a caller's own turn (ipcp__comm_drive) while the
         * thread sleeps lazy: nothing else would turn the word. */
        ipcp__mbox_thread_needed(comm, peer);
    }
}

static void ipcp__posted_del(ipcp__peer_t *peer, ipcp_request_t *req)
{
    ipcp__list_del(&req->link);
    req->in_posted = 0;
    atomic_store_explicit(
        &peer->n_posted,
        atomic_load_explicit(&peer->n_posted, memory_order_relaxed) - 1,
        memory_order_relaxed);
    if (!req->watch)
        atomic_fetch_sub(&peer->n_posted_thread, 1);
}

static void ipcp__recv_post(ipcp_comm_t *comm, ipcp__peer_t *peer,
                            ipcp_request_t *req)
{
    ipcp__lock(&peer->rx_lock, IPCP_LOCK_RX);
    ipcp__unexp_t *u = ipcp__unexp_find(peer, req->tag);
    if (u) {
        ipcp__unexp_match(comm, peer, req, u);
    } else if (ipcp__peer_closed(peer) || peer->bye) {
        char msg[IPCP_ERRMSG_MAX];
        ipcp__req_complete(req, IPCP_ERR_PEER_LOST,
                           ipcp__peer_gone(comm, peer, msg, sizeof(msg)));
    } else {
        ipcp__posted_add(comm, peer, req);
    }
    ipcp__unlock(&peer->rx_lock, IPCP_LOCK_RX);
}

/* The oldest receive posted with tag (rx_lock held). */
static ipcp_request_t *ipcp__posted_find(ipcp__peer_t *peer, int tag)
{
    ipcp__list_t *e, *tmp;
    ipcp__list_for_each_safe(e, tmp, &peer->posted)
    {
        ipcp_request_t *r = ipcp__list_entry(e, ipcp_request_t, link);
        if (r->tag == tag)
            return r;
    }
    return NULL;
}

/* Keeps a message no receive waits for yet (rx_lock held); NULL: no
 * memory (the caller decides what that means). */
static ipcp__unexp_t *ipcp__unexp_keep(ipcp__peer_t *peer,
                                       const unsigned char *eager, size_t len)
{
    ipcp__unexp_t *u = calloc(1, sizeof(*u));
    if (!u || (eager && len && !(u->eager = ipcp__buf_alloc(len)))) {
        free(u);
        return NULL;
    }
    if (eager && len)
        memcpy(u->eager, eager, len);
    ipcp__list_push_back(&peer->unexp, &u->link);
    ipcp__unexp_count(peer, 1);
    return u;
}

static void ipcp__on_rts_twosided(ipcp_comm_t *comm, ipcp__peer_t *peer,
                                  const ipcp__msg_rts_t *rts)
{
    ipcp__lock(&peer->rx_lock, IPCP_LOCK_RX);
    ipcp_request_t *r = ipcp__posted_find(peer, rts->tag);
    ipcp__unexp_t *u = NULL;
    if (r) {
        ipcp__posted_del(peer, r);
        ipcp__recv_matched(comm, peer, r, rts, NULL);
    } else if ((u = ipcp__unexp_keep(peer, NULL, 0))) {
        u->rts = *rts;
    }
    ipcp__unlock(&peer->rx_lock, IPCP_LOCK_RX);
    if (!r && !u)
        ipcp__peer_lost(comm, peer, "no memory for an unexpected message");
}

/* ---- The callers' own way ----------------------------------------------- */

int ipcp__match_posted(ipcp__peer_t *peer, int tag)
{
    /* Taken: a caller posts or reads, as for a watch receive.  The
     * progress thread asks on its turns and never waits for a caller. */
    if (ipcp__trylock(&peer->rx_lock, IPCP_LOCK_RX) != 0)
        return 1;
    const ipcp_request_t *r = ipcp__posted_find(peer, tag);
    int posted = !r ? 0 : r->watch ? 1 : 2;
    ipcp__unlock(&peer->rx_lock, IPCP_LOCK_RX);
    return posted;
}

int ipcp__match_eager(ipcp_comm_t *comm, ipcp__peer_t *peer,
                      const unsigned char *msg, size_t len, int caller)
{
    ipcp__msg_eager_t e;
    size_t off;
    int ring = caller & IPCP_MATCH_RING;
    caller &= ~IPCP_MATCH_RING;
    if (!ipcp__eager_parse(msg, len, &e, &off) ||
        ((e.hdr.flags & IPCP_EAGER_PIPE) && !ring)) {
        if (!caller)
            ipcp__peer_lost(comm, peer, "malformed eager message");
        return !caller;
    }
    const unsigned char *data = msg + off;
    unsigned char *own = NULL;
    int nomem = 0;
    char why[IPCP_ERRMSG_MAX];
    ipcp__lock(&peer->rx_lock, IPCP_LOCK_RX);
    ipcp_request_t *r = ipcp__posted_find(peer, e.tag);
    ipcp__unexp_t *u = NULL;
    if ((r && caller && r->attr.type != IPCP_MEM_HOST) ||
        (!r && caller == IPCP_MATCH_POSTED)) {
        ipcp__unlock(&peer->rx_lock, IPCP_LOCK_RX);
        return 0; /* the progress thread copies it to the device */
    }
    if ((e.hdr.flags & IPCP_EAGER_PIPE) &&
        !(data =
              ipcp__mbox_pipe_take(comm, peer, r, msg, e.len, &own, &nomem))) {
        ipcp__unlock(&peer->rx_lock, IPCP_LOCK_RX);
        ipcp__buf_free(own);
        if (!caller)
            ipcp__peer_lost(comm, peer,
                            nomem ? "no memory for an unexpected message"
                                  : "it stopped writing a message");
        return !caller;
    }
    if (r) {
        ipcp__posted_del(peer, r);
        if (ipcp__truncated(comm, peer, r, e.tag, e.len, why, sizeof(why)))
            ipcp__req_complete(r, IPCP_ERR_TRUNCATED, why);
        else
            ipcp__deliver_eager(comm, peer, r, data, e.len);
    } else if (own) { /* a pipelined message's bytes, kept as they are */
        if ((u = ipcp__unexp_keep(peer, NULL, 0))) {
            u->eager = own;
            own = NULL;
        }
    } else {
        u = ipcp__unexp_keep(peer, data, e.len);
    }
    if (u) {
        u->rts.hdr.type = IPCP_MSG_RTS;
        u->rts.hdr.flags = IPCP_RTS_EAGER;
        u->rts.tag = e.tag;
        u->rts.len = e.len;
    }
    ipcp__unlock(&peer->rx_lock, IPCP_LOCK_RX);
    ipcp__buf_free(own);
    if (!r && !u) {
        if (caller)
            return 0;
        ipcp__peer_lost(comm, peer, "no memory for an unexpected message");
    }
    return 1;
}

/* A request that completed on the caller's own way: nobody waits on it
 * yet, so no lock and no wake-up. */
static void ipcp__done_eager(ipcp_request_t *req, size_t nbytes)
{
    req->path = IPCP_PATH_EAGER;
    req->nbytes = nbytes;
    req->xfer_clean = 1;
    req->status = IPCP_OK;
    atomic_store_explicit(&req->done, 1, memory_order_release);
}

int ipcp__send_now(ipcp_comm_t *comm, int rank, const void *buf, size_t len,
                   int tag)
{
    ipcp__peer_t *peer = &comm->peers[rank];
    ipcp__msg_eager_t e = {{IPCP_MSG_EAGER, 0}, tag, (uint32_t)len};
    if (len > comm->eager_max ||
        ipcp__force_for(__atomic_load_n(&peer->remote_path, __ATOMIC_ACQUIRE),
                        tag, IPCP_MEM_HOST, IPCP_MEM_HOST) != IPCP_PATH_AUTO)
        return 0;
    /* Longer ones pipelined, the receiver copying each step while we
     * write the next (two copies on two CPUs at once, where the direct
     * read is one slower copy). */
    if (len <= IPCP_MBOX_PLAIN_MAX &&
                sizeof(e) + len <= ipcp__mbox_msg_max(peer)
            ? ipcp__mbox_send_fast(peer, &e, sizeof(e), buf, len) != IPCP_OK
            : ipcp__mbox_send_pipe(peer, tag, buf, len) != IPCP_OK)
        return 0;
    ipcp__fault_msg(IPCP_FAULT_RTS_POSTED, tag);
    return 1;
}

/* A small host send, written by the caller into the peer's inbox. */
static int ipcp__send_fast(ipcp_comm_t *comm, ipcp_request_t *req)
{
    if (!ipcp__send_now(comm, req->peer, req->buf, req->len, req->tag))
        return 0;
    ipcp__done_eager(req, req->len);
    return 1;
}

/* With nothing kept for tag (rx_lock held): the message at the inbox's
 * head, when it is an eager one for tag that fits, straight into buf
 * unless a receive posted earlier asks for that tag (it matches first).
 * A receive posted after its message came costs no request, no posted
 * list and no second look at the inbox. */
static int ipcp__recv_head(ipcp_comm_t *comm, ipcp__peer_t *peer, int tag,
                           void *buf, size_t cap, size_t *got)
{
    if (ipcp__posted_find(peer, tag) ||
        !ipcp__mbox_head_eager(comm, peer, tag, buf, cap, got))
        return 0;
    ipcp__fault_msg(IPCP_FAULT_RTS_MATCHED, tag);
    return 1;
}

int ipcp__recv_maybe(ipcp_comm_t *comm, int rank)
{
    ipcp__peer_t *peer = &comm->peers[rank];
    return __atomic_load_n(&peer->in_on, __ATOMIC_ACQUIRE) &&
           (atomic_load_explicit(&peer->n_unexp, memory_order_relaxed) ||
            ipcp__mbox_ready(peer));
}

/* The first kept message for tag, when it is an eager one that fits,
 * into buf (rx_lock held). */
static int ipcp__recv_kept(ipcp__peer_t *peer, ipcp__unexp_t *u, void *buf,
                           size_t cap, size_t *got)
{
    if (!(u->rts.hdr.flags & IPCP_RTS_EAGER) || u->rts.len > cap)
        return 0;
    ipcp__fault_msg(IPCP_FAULT_RTS_MATCHED, u->rts.tag);
    if (u->rts.len)
        memcpy(buf, u->eager, u->rts.len);
    *got = u->rts.len;
    ipcp__unexp_del(peer, u);
    ipcp__buf_free(u->eager);
    free(u);
    return 1;
}

int ipcp__recv_now(ipcp_comm_t *comm, int rank, void *buf, size_t cap, int tag,
                   size_t *got)
{
    ipcp__peer_t *peer = &comm->peers[rank];
    int took = 0;
    if (!__atomic_load_n(&peer->in_on, __ATOMIC_ACQUIRE))
        return 0;
    ipcp__lock(&peer->rx_lock, IPCP_LOCK_RX);
    if (!atomic_load(&peer->pending) && !atomic_load(&peer->gone)) {
        ipcp__unexp_t *u = ipcp__unexp_find(peer, tag);
        /* Receives posted before take what came first, as their waits
         * would: then the next message may be this one's. */
        if (!u && ipcp__posted_find(peer, tag))
            ipcp__mbox_drain_posted(comm, peer);
        took = u ? ipcp__recv_kept(peer, u, buf, cap, got)
                 : ipcp__recv_head(comm, peer, tag, buf, cap, got);
    }
    ipcp__unlock(&peer->rx_lock, IPCP_LOCK_RX);
    return took;
}

/* A host receive matched against what came, or posted, by the caller.
 * Only once our earlier commands to the peer ran: receives match in the
 * order they were posted. */
static int ipcp__recv_fast(ipcp_comm_t *comm, ipcp_request_t *req)
{
    ipcp__peer_t *peer = &comm->peers[req->peer];
    int took = 0;
    size_t got;
    if (!__atomic_load_n(&peer->in_on, __ATOMIC_ACQUIRE))
        return 0; /* nothing for the caller to read */
    ipcp__lock(&peer->rx_lock, IPCP_LOCK_RX);
    if (!atomic_load(&peer->pending) && !atomic_load(&peer->gone)) {
        ipcp__unexp_t *u = ipcp__unexp_find(peer, req->tag);
        if (!u &&
            ipcp__recv_head(comm, peer, req->tag, req->buf, req->len, &got)) {
            ipcp__done_eager(req, got);
            took = 1;
        } else if (!u) {
            req->watch = 1;
            ipcp__posted_add(comm, peer, req);
            took = 1;
        } else if (u->rts.hdr.flags & IPCP_RTS_EAGER) {
            ipcp__unexp_match(comm, peer, req, u);
            took = 1;
        }
    }
    peer->n_rx_refused += !took;
    ipcp__unlock(&peer->rx_lock, IPCP_LOCK_RX);
    if (took)
        ipcp__trace_mark(req, IPCP_TM_START);
    return took;
}

int ipcp__match_fast(ipcp_comm_t *comm, ipcp_request_t *req)
{
    if (req->sync || req->attr.type != IPCP_MEM_HOST)
        return 0;
    if (req->type == IPCP_REQ_SEND)
        return ipcp__send_fast(comm, req);
    if (req->type == IPCP_REQ_RECV)
        return ipcp__recv_fast(comm, req);
    return 0;
}

/* ---- Entry points ------------------------------------------------------- */

void ipcp__match_cmd(ipcp_comm_t *comm, ipcp_request_t *req)
{
    ipcp__peer_t *peer = &comm->peers[req->peer];

    ipcp__trace_mark(req, IPCP_TM_START);
    if (req->type == IPCP_REQ_RECV) {
        ipcp__recv_post(comm, peer, req);
        return;
    }
    if (ipcp__peer_closed(peer) || peer->bye) {
        char msg[IPCP_ERRMSG_MAX];
        ipcp__req_complete(req, IPCP_ERR_PEER_LOST,
                           ipcp__peer_gone(comm, peer, msg, sizeof(msg)));
        return;
    }
    if ((req->type == IPCP_REQ_PUT || req->type == IPCP_REQ_GET) &&
        !atomic_load(&req->rmem->valid)) {
        char msg[128];
        snprintf(msg, sizeof(msg), "rank %d deregistered region %llu",
                 peer->rank, (unsigned long long)req->rmem->reg_id);
        ipcp__req_complete(req, IPCP_ERR_NOT_REGISTERED, msg);
        return;
    }
    switch (req->type) {
    case IPCP_REQ_SEND:
        ipcp__send_start(comm, peer, req);
        break;
    case IPCP_REQ_PUT:
        ipcp__put_start(comm, peer, req);
        break;
    case IPCP_REQ_GET:
        ipcp__get_start(comm, peer, req);
        break;
    }
}

static void ipcp__on_rts(ipcp_comm_t *comm, ipcp__peer_t *peer,
                         const unsigned char *msg, size_t len)
{
    ipcp__msg_rts_t rts;
    if (len < sizeof(rts)) {
        ipcp__peer_lost(comm, peer, "short RTS");
        return;
    }
    memcpy(&rts, msg, sizeof(rts));
    /* Eager bytes come as EAGER messages; RTS_EAGER is only the form a
     * kept one takes here. */
    size_t tail = rts.hdr.flags & IPCP_RTS_SRC_EXP
                      ? sizeof(ipcp__export_t)
                      : 0; /* kept by ipcp__match_msg */
    if ((rts.hdr.flags & IPCP_RTS_EAGER) || len != sizeof(rts) + tail ||
        rts.src_qset >= IPCP_MAX_QSETS || rts.src_nq > IPCP_MAX_QUEUES) {
        ipcp__peer_lost(comm, peer, "malformed RTS");
        return;
    }
    if (rts.hdr.flags & IPCP_RTS_GET_REPLY)
        ipcp__on_rts_get_reply(comm, peer, &rts);
    else if (rts.hdr.flags & IPCP_RTS_PUT)
        ipcp__on_rts_put(comm, peer, &rts);
    else
        ipcp__on_rts_twosided(comm, peer, &rts);
}

void ipcp__match_msg(ipcp_comm_t *comm, ipcp__peer_t *peer,
                     const unsigned char *msg, size_t len, int *fds, int nfds)
{
    const ipcp__msg_hdr_t *hdr = (const void *)msg;
    switch (hdr->type) {
    case IPCP_MSG_RTS:
        /* A source's export is kept as it comes: the RTS may wait for its
         * receive, and the sender offers it once. */
        if (len == sizeof(ipcp__msg_rts_t) + sizeof(ipcp__export_t)) {
            ipcp__msg_rts_t rts;
            ipcp__export_t exp;
            memcpy(&rts, msg, sizeof(rts));
            memcpy(&exp, msg + sizeof(rts), sizeof(exp));
            if ((rts.hdr.flags & IPCP_RTS_SRC_EXP) &&
                (!(rts.hdr.flags & IPCP_RTS_SRC_FD) || nfds > 0))
                ipcp__rexport_put(peer, rts.src_region, &exp, fds, nfds);
        }
        ipcp__close_fds(fds, nfds);
        ipcp__on_rts(comm, peer, msg, len);
        return;
    case IPCP_MSG_GET_REQ:
        ipcp__close_fds(fds, nfds);
        if (len < sizeof(ipcp__msg_get_req_t)) {
            ipcp__peer_lost(comm, peer, "short GET_REQ");
            return;
        }
        ipcp__on_get_req(comm, peer, (const void *)msg);
        return;
    case IPCP_MSG_CTS: {
        if (len < sizeof(ipcp__msg_cts_t)) {
            ipcp__close_fds(fds, nfds);
            ipcp__peer_lost(comm, peer, "short CTS");
            return;
        }
        const ipcp__msg_cts_t *cts = (const void *)msg;
        ipcp_request_t *req = ipcp__find_id(&peer->wait_cts, cts->id);
        if (!req && ipcp__split_end(comm, peer, cts)) {
            ipcp__close_fds(fds, nfds);
            return;
        }
        if (!req) {
            ipcp__close_fds(fds, nfds);
            ipcp__peer_lost(comm, peer, "CTS for an unknown transfer");
            return;
        }
        ipcp__xfer_on_cts(comm, peer, req, cts, fds, nfds);
        return;
    }
    }
    ipcp__close_fds(fds, nfds);
}

static void ipcp__fail_list(ipcp__list_t *list, ipcp_status_t st,
                            const char *msg)
{
    ipcp__list_t *e;
    while ((e = ipcp__list_pop_front(list)))
        ipcp__req_complete(ipcp__list_entry(e, ipcp_request_t, link), st, msg);
}

void ipcp__match_fail_peer(ipcp_comm_t *comm, ipcp__peer_t *peer,
                           ipcp_status_t st, const char *msg)
{
    (void)comm;
    ipcp__fail_list(&peer->wait_cts, st, msg);
    ipcp__lock(&peer->rx_lock, IPCP_LOCK_RX);
    ipcp__list_t *e, *tmp;
    ipcp__list_for_each_safe(e, tmp, &peer->posted)
        ipcp__list_entry(e, ipcp_request_t, link)
            ->in_posted = 0;
    ipcp__fail_list(&peer->posted, st, msg);
    atomic_store_explicit(&peer->n_posted, 0, memory_order_relaxed);
    atomic_store(&peer->n_posted_thread, 0);
    ipcp__unlock(&peer->rx_lock, IPCP_LOCK_RX);
    ipcp__fail_list(&peer->gets, st, msg);
    ipcp__fail_list(&peer->maps, st, msg);
}
