/* Peers: messages to them, their loss, and the keepalive that finds a
 * peer that stopped answering. */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/bufcache.h"
#include "common/time.h"
#include "engine/remote.h"
#include "common/cpu.h"
#include "engine/progress.h"

/* ---- Outgoing messages -------------------------------------------------- */

static void ipcp__txmsg_free(ipcp__txmsg_t *m)
{
    for (int i = 0; i < m->nfds; i++)
        close(m->fds[i]);
    ipcp__buf_free(m);
}

void ipcp__peer_flush(ipcp_comm_t *comm, ipcp__peer_t *peer)
{
    ipcp__list_t *e;
    while (!ipcp__peer_closed(peer) && (e = peer->txq.next) != &peer->txq) {
        ipcp__txmsg_t *m = ipcp__list_entry(e, ipcp__txmsg_t, link);
        ipcp_status_t st =
            peer->out_on
                ? ipcp__mbox_send(peer, m->data, m->len, m->fds, m->nfds)
                : ipcp__sock_send(peer->fd, m->data, m->len, m->fds, m->nfds,
                                  1);
        if (st == IPCP_IN_PROGRESS)
            return; /* socket or mailbox full: the loop comes back */
        if (st != IPCP_OK) {
            ipcp__peer_wr_broken(comm, peer, ipcp__last_error());
            return;
        }
        ipcp__list_del(e);
        ipcp__txmsg_free(m);
        atomic_fetch_sub(&peer->backlog, 1);
    }
    /* An offered mailbox is taken once nothing waits for the socket. */
    ipcp__mbox_try_switch(comm, peer);
}

/* A message for a peer that is gone, or whose writes broke: the failure,
 * naming it and why. */
static ipcp_status_t ipcp__peer_unwritable(const ipcp_comm_t *comm,
                                           const ipcp__peer_t *peer)
{
    char gone[IPCP_ERRMSG_MAX];
    return ipcp__fail(IPCP_LOG_DEBUG, IPCP_SUB_ENGINE, IPCP_ERR_PEER_LOST, "%s",
                      ipcp__peer_gone(comm, peer, gone, sizeof(gone)));
}

ipcp_status_t ipcp__peer_post(ipcp_comm_t *comm, ipcp__peer_t *peer,
                              const void *msg, size_t len, const int *fds,
                              int nfds)
{
    return ipcp__peer_postv(comm, peer, msg, len, NULL, 0, fds, nfds);
}

ipcp_status_t ipcp__peer_postv(ipcp_comm_t *comm, ipcp__peer_t *peer,
                               const void *msg, size_t len, const void *tail,
                               size_t tail_len, const int *fds, int nfds)
{
    ipcp__txmsg_t *m;
    if (ipcp__peer_unwritten(peer)) {
        for (int i = 0; i < nfds; i++)
            close(fds[i]);
        return ipcp__peer_unwritable(comm, peer);
    }
    m = ipcp__buf_alloc(sizeof(*m) + len + tail_len);
    if (!m) {
        for (int i = 0; i < nfds; i++)
            close(fds[i]);
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_ENGINE, IPCP_ERR_NOMEM,
                          "no memory for a %zu-byte message", len + tail_len);
    }
    m->len = len + tail_len;
    m->nfds = nfds;
    for (int i = 0; i < nfds; i++)
        m->fds[i] = fds[i];
    memcpy(m->data, msg, len);
    if (tail_len)
        memcpy(m->data + len, tail, tail_len);
    atomic_fetch_add(&peer->backlog, 1);
    ipcp__list_push_back(&peer->txq, &m->link);
    ipcp__peer_flush(comm, peer);
    /* The send may have found the peer dead: callers must not park a
     * request on a peer whose lists were already failed, nor one that
     * waits for an answer to a message that never left. */
    if (ipcp__peer_unwritten(peer))
        return ipcp__peer_unwritable(comm, peer);
    return IPCP_OK;
}

/* ---- Peer loss ---------------------------------------------------------- */

int ipcp__peer_to(ipcp_comm_t *comm, ipcp__peer_t *peer, ipcp__peer_link_t to)
{
    ipcp__peer_link_t from = peer->link;
    if (to <= from)
        return 0;
    if (from == IPCP_PEER_BROKEN)
        comm->wr_broken--;
    if (to == IPCP_PEER_BROKEN)
        comm->wr_broken++;
    peer->link = to;
    return 1;
}

/* How long a peer whose writes broke stays before it is lost, when its
 * socket does not end.  A dead peer's socket ends at once; a live one (a
 * write that failed for another reason) reads the end of ours and closes
 * its side within a turn of its loop. */
#define IPCP_WR_LOST_NS ((uint64_t)100 * 1000 * 1000)

void ipcp__peer_wr_broken(ipcp_comm_t *comm, ipcp__peer_t *peer,
                          const char *why)
{
    ipcp__list_t *e;
    if (!ipcp__peer_to(comm, peer, IPCP_PEER_BROKEN))
        return;
    /* A peer that died may have sent what a request here waits for (a
     * barrier's release, an eager message) just before: it lies unread in
     * our inbox or socket, and the loss would fail that request.  The loss
     * comes from the end of the socket instead, read after the inbox
     * (ipcp__progress_main), or after IPCP_WR_LOST_NS. */
    peer->wr_lost_ns = ipcp__now_ns() + IPCP_WR_LOST_NS;
    free(peer->lost_why);
    peer->lost_why = strdup(why); /* NULL: the loss names the end instead */
    atomic_store(&peer->gone, 1); /* callers write to it no more */
    shutdown(peer->fd, SHUT_WR);
    while ((e = ipcp__list_pop_front(&peer->txq))) {
        ipcp__txmsg_free(ipcp__list_entry(e, ipcp__txmsg_t, link));
        atomic_fetch_sub(&peer->backlog, 1);
    }
    IPCP_DEBUG(IPCP_SUB_ENGINE,
               "cannot write to rank %d (%s): lost once what it sent is read",
               peer->rank, why);
}

/* Peers whose writes broke and whose socket did not end in time. */
void ipcp__wr_expire(ipcp_comm_t *comm, uint64_t now)
{
    for (int r = 0; r < comm->size && comm->wr_broken; r++) {
        ipcp__peer_t *p = &comm->peers[r];
        if (p->link == IPCP_PEER_BROKEN && now >= p->wr_lost_ns)
            ipcp__peer_lost(comm, p,
                            "its socket did not end after a write failed");
    }
}

void ipcp__peer_lost(ipcp_comm_t *comm, ipcp__peer_t *peer, const char *why)
{
    char msg[IPCP_ERRMSG_MAX];
    ipcp__list_t *e, *tmp;

    int broken = peer->link == IPCP_PEER_BROKEN;
    if (!ipcp__peer_to(comm, peer, IPCP_PEER_CLOSED))
        return;
    atomic_store(&peer->gone, 1);
    /* A failed write was the first sign: it is the reason. */
    if (broken && peer->lost_why)
        why = peer->lost_why;
    /* When the loss is declared here (a protocol error) the peer is alive:
     * end the connection so that it sees the loss too. */
    shutdown(peer->fd, SHUT_RDWR);
    if (peer->bye)
        snprintf(msg, sizeof(msg), "rank %d (pid %d) finalized",
                 ipcp__job_rank(comm, peer->rank), (int)peer->pid);
    else
        snprintf(msg, sizeof(msg), "peer rank %d (pid %d) was lost: %s",
                 ipcp__job_rank(comm, peer->rank), (int)peer->pid, why);
    if (!peer->bye || !ipcp__list_empty(&peer->active))
        IPCP_WARN(IPCP_SUB_ENGINE, "%s", msg);
    if (why != peer->lost_why) {
        free(peer->lost_why);
        peer->lost_why = strdup(why); /* NULL: later calls say less */
    }
    while ((e = ipcp__list_pop_front(&peer->txq))) {
        ipcp__txmsg_free(ipcp__list_entry(e, ipcp__txmsg_t, link));
        atomic_fetch_sub(&peer->backlog, 1);
    }
    ipcp__match_fail_peer(comm, peer, IPCP_ERR_PEER_LOST, msg);
    ipcp__list_for_each_safe(e, tmp, &peer->active)
    {
        ipcp__xfer_t *x = ipcp__list_entry(e, ipcp__xfer_t, link);
        ipcp__track_fail(&x->track, IPCP_ERR_PEER_LOST, "%s", msg);
        if (x->split_wait) { /* no DRIVEN CTS will come */
            x->split_wait = 0;
            ipcp__track_notify(&x->track);
        }
    }
    /* The word that stops host queues' waits only now: a wait that saw it
     * first would fail its transfer with its own message, which does not
     * name the peer (seen once on CI under ASan). */
    atomic_store(&peer->lost, IPCP_ERR_PEER_LOST);
    ipcp__xfer_release_waits(comm, peer);
    ipcp__lane_abort(comm, peer->rank, IPCP_ERR_PEER_LOST, msg);
}

void ipcp__peer_drop_cmd(ipcp_comm_t *comm, ipcp_request_t *req)
{
    char why[IPCP_ERRMSG_MAX], msg[IPCP_ERRMSG_MAX];
    ipcp__peer_t *peer = &comm->peers[req->peer];
    snprintf(why, sizeof(why), "%s", req->errmsg);
    if (why[0] && !ipcp__peer_closed(peer))
        ipcp__peer_lost(comm, peer, why);
    ipcp__req_complete(req, IPCP_ERR_PEER_LOST,
                       ipcp__peer_gone(comm, peer, msg, sizeof(msg)));
}

const char *ipcp__peer_gone(const ipcp_comm_t *comm, const ipcp__peer_t *peer,
                            char *buf, size_t len)
{
    /* The rank the caller knows: the communicator's, in a job of several
     * nodes (the core numbers this node's ranks from 0). */
    int rank = ipcp__job_rank(comm, peer->rank);
    if (peer->bye)
        snprintf(buf, len, "rank %d finalized", rank);
    else
        snprintf(
            buf, len, "rank %d is gone%s%s%s", rank, peer->lost_why ? " (" : "",
            peer->lost_why ? peer->lost_why : "", peer->lost_why ? ")" : "");
    return buf;
}

/* ---- Keepalive ---------------------------------------------------------- */

/* A peer that is stopped (SIGSTOP, a debugger) or hung keeps its socket
 * open and never raises the flags our queues wait for, so nothing else
 * would end a request that waits on it.  While one does, a peer silent for
 * a quarter of the timeout is pinged (its progress thread answers, whatever
 * its application does), and one that answered nothing for
 * IPCP_KA_LOST_SHARE of the timeout, the ping having had half of it, is
 * lost: the wait ends within the timeout of the peer's last message (the
 * ping's age keeps a progress thread that was itself held up, by a long
 * driver call, from declaring a live peer lost).  An
 * unmatched receive from a peer that answers waits as long as it likes. */
#define IPCP_KA_LOST_SHARE 0.75
/* Peers are checked every timeout / IPCP_KA_STEPS, at most every
 * IPCP_KA_STEP_MAX_NS. */
#define IPCP_KA_STEPS       50
#define IPCP_KA_STEP_MAX_NS ((uint64_t)100 * 1000 * 1000)

/* Whether a request waits on the peer: a transfer, an import, a receive
 * (a barrier's too), or finalize that waits for its goodbye. */
static int ipcp__peer_awaited(const ipcp_comm_t *comm, ipcp__peer_t *p)
{
    if (comm->fin == IPCP_FIN_SAID)
        return 1;
    if (!ipcp__list_empty(&p->wait_cts) || !ipcp__list_empty(&p->gets) ||
        !ipcp__list_empty(&p->maps) || !ipcp__list_empty(&p->active))
        return 1;
    /* Callers post receives too (ipcp__match_fast).  Not under rx_lock:
     * while no request waits this runs on every turn, and a spinning
     * thread would take the lock's line from a caller reading its inbox. */
    return atomic_load_explicit(&p->n_posted, memory_order_relaxed) > 0;
}

uint64_t ipcp__ka_step_ns(const ipcp_comm_t *comm)
{
    uint64_t step = (uint64_t)(comm->timeout_s * 1e9 / IPCP_KA_STEPS);
    if (step > IPCP_KA_STEP_MAX_NS)
        step = IPCP_KA_STEP_MAX_NS;
    return step < 1000000 ? 1000000 : step;
}

/* One peer a request waits on: ping it, or declare it lost. */
static void ipcp__ka_check(ipcp_comm_t *comm, ipcp__peer_t *p, uint64_t now)
{
    uint64_t t_ns = (uint64_t)(comm->timeout_s * 1e9);
    uint64_t heard = p->heard_ns;
    uint64_t quiet = now > heard ? now - heard : 0;
    if (p->ping_ns > heard && now - p->ping_ns >= t_ns / 2 &&
        quiet >= (uint64_t)(IPCP_KA_LOST_SHARE * (double)t_ns)) {
        char why[160];
        snprintf(why, sizeof(why),
                 "it did not answer for %.1f s: stopped "
                 "or hung (IPCPIPE_TIMEOUT %.1f s)",
                 (double)quiet * 1e-9, comm->timeout_s);
        ipcp__peer_lost(comm, p, why);
        return;
    }
    /* One ping at a time: the channel loses nothing, and the first one's
     * age is what tells a silent peer from our own late turn. */
    if (p->ping_ns <= heard && quiet >= t_ns / 4) {
        ipcp__msg_hdr_t ping = {IPCP_MSG_PING, 0};
        p->ping_ns = now;
        ipcp__peer_post(comm, p, &ping, sizeof(ping), NULL, 0);
    }
}

/* Progress loop: checks the peers that requests wait on, every step. */
void ipcp__keepalive(ipcp_comm_t *comm, uint64_t now)
{
    /* Every turn while no request waits on a peer, so that the first one
     * to wait is seen at once (the loop then sleeps a step at most). */
    if (now < comm->ka_next && comm->ka_awaited)
        return;
    comm->ka_next = now + ipcp__ka_step_ns(comm);
    comm->ka_awaited = 0;
    for (int r = 0; r < comm->size; r++) {
        ipcp__peer_t *p = &comm->peers[r];
        if (r == comm->rank || ipcp__peer_closed(p))
            continue;
        /* Callers that take messages from the inbox do not stamp
         * heard_ns (a clock read each cost an 8 B window ~5% of the
         * receiver's time, 2-CPU VM): its tail moved since the last step,
         * so the peer was heard within it. */
        uint64_t tail = __atomic_load_n(&p->in_tail, __ATOMIC_RELAXED);
        if (tail != p->ka_tail) {
            p->ka_tail = tail;
            if (now > p->heard_ns)
                p->heard_ns = now;
        }
        if (p->bye || !ipcp__peer_awaited(comm, p))
            continue;
        comm->ka_awaited = 1;
        ipcp__ka_check(comm, p, now);
    }
}

int ipcp__job_rank(const ipcp_comm_t *comm, int here)
{
    if (!comm->remote || here < 0 || here >= comm->size)
        return here;
    return comm->remote->global[here];
}
