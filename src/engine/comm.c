/* Communicator life cycle and the progress thread: commands from user
 * threads, finished transfers from backend threads, control messages from
 * peers, and peer loss. */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/time.h"
#include "common/cpu.h"
#include "engine/engine.h"

/* Messages are read into this buffer; uint64_t keeps it aligned for the
 * structs of proto.h. */
static _Thread_local uint64_t ipcp__rxbuf[IPCP_SOCK_MSG_MAX / 8];

/* ---- The communicator ---------------------------------------------------- */

/* The progress thread takes the communicator's locks on every turn of its
 * loop while device work is in flight, and a stream-ordered call takes them
 * between its driver calls.  A caller that sleeps on a held lock pays a
 * futex wake-up, which in the VMs we measured cost about 2 us a small
 * message (a call is about 3 us without it); a short spin first avoids
 * most of them, as the critical sections are far shorter than that. */
static void ipcp__mutex_init_spin(pthread_mutex_t *m)
{
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
#ifdef PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP
    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ADAPTIVE_NP);
#endif
    pthread_mutex_init(m, &a);
    pthread_mutexattr_destroy(&a);
}

static void ipcp__mutex_init_recursive(pthread_mutex_t *m)
{
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(m, &a);
    pthread_mutexattr_destroy(&a);
}

ipcp_status_t ipcp__comm_new(int rank, int size, const char *job,
                             double timeout_s, ipcp_comm_t **out)
{
    ipcp_comm_t *comm = calloc(1, sizeof(*comm));
    if (!comm)
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_INIT, IPCP_ERR_NOMEM,
                          "no memory for a communicator");
    comm->magic = IPCP_COMM_MAGIC;
    comm->rank = rank;
    comm->size = size;
    snprintf(comm->job, sizeof(comm->job), "%s", job);
    comm->job_hash = ipcp__fnv1a(comm->job, strlen(comm->job), IPCP_FNV_SEED);
    comm->timeout_s = timeout_s;
    comm->probe_word = IPCP_BOOT_MAGIC;
    comm->wake_fd = -1;
    ipcp__mutex_init_spin(&comm->lock);
    pthread_cond_init(&comm->cond, NULL);
    ipcp__mutex_init_spin(&comm->prog_lock);
    ipcp__mutex_init_spin(&comm->mem_lock);
    ipcp__mutex_init_spin(&comm->req_lock);
    ipcp__mutex_init_spin(&comm->sync_lock);
    ipcp__mutex_init_spin(&comm->lane_lock);
    pthread_mutex_init(&comm->dev_lock, NULL);
    ipcp__list_init(&comm->cmds);
    ipcp__list_init(&comm->dones);
    ipcp__list_init(&comm->staging);
    ipcp__list_init(&comm->watching);
    ipcp__list_init(&comm->reqs);
    ipcp__list_init(&comm->regions);
    ipcp__list_init(&comm->rmems);
    ipcp__list_init(&comm->deferred);
    ipcp__list_init(&comm->deregs);
    comm->peers = calloc((size_t)size, sizeof(*comm->peers));
    comm->bar_seen = calloc((size_t)size, sizeof(*comm->bar_seen));
    if (!comm->peers || !comm->bar_seen) {
        free(comm->peers);
        free(comm->bar_seen);
        free(comm);
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_INIT, IPCP_ERR_NOMEM,
                          "no memory for %d peers", size);
    }
    for (int r = 0; r < size; r++) {
        ipcp__peer_t *p = &comm->peers[r];
        p->rank = r;
        p->fd = -1;
        p->pvm_to = -1;
        p->remote_path = -1;
        p->out_wake = -1;
        p->closed = r == rank;
        ipcp__list_init(&p->txq);
        ipcp__list_init(&p->wait_cts);
        ipcp__list_init(&p->posted);
        ipcp__list_init(&p->unexp);
        ipcp__list_init(&p->gets);
        ipcp__list_init(&p->maps);
        ipcp__list_init(&p->active);
        ipcp__list_init(&p->imports);
        ipcp__list_init(&p->rexports);
        ipcp__mutex_init_recursive(&p->rx_lock);
        p->mbox_slots = ipcp__mbox_slots(size);
        ipcp__mutex_init_spin(&p->tx_lock);
    }
    *out = comm;
    return IPCP_OK;
}

void ipcp__comm_delete(ipcp_comm_t *comm)
{
    for (int r = 0; r < comm->size; r++) {
        free(comm->peers[r].lost_why);
        pthread_mutex_destroy(&comm->peers[r].rx_lock);
        pthread_mutex_destroy(&comm->peers[r].tx_lock);
    }
    pthread_mutex_destroy(&comm->lock);
    pthread_cond_destroy(&comm->cond);
    pthread_mutex_destroy(&comm->prog_lock);
    pthread_mutex_destroy(&comm->mem_lock);
    pthread_mutex_destroy(&comm->req_lock);
    while (comm->req_cache) {
        ipcp_request_t *req = comm->req_cache;
        comm->req_cache = req->cache_next;
        free(req);
    }
    pthread_mutex_destroy(&comm->sync_lock);
    pthread_mutex_destroy(&comm->lane_lock);
    pthread_mutex_destroy(&comm->dev_lock);
    free(comm->peers);
    free(comm->bar_seen);
    comm->magic = IPCP_DEAD_MAGIC;
    free(comm);
}

/* ---- Requests ------------------------------------------------------------ */

/* Freed requests are kept for reuse, up to this many: a request is 1.6 KB,
 * past what malloc keeps per thread, and its calloc and free took 480 of
 * the 1,800 instructions a small isend and its wait cost (2 CPUs, 64 in
 * flight).  None under AddressSanitizer, which then sees a request used
 * after its free. */
#if defined(__SANITIZE_ADDRESS__)
#define IPCP_REQ_CACHE 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define IPCP_REQ_CACHE 0
#endif
#endif
#ifndef IPCP_REQ_CACHE
#define IPCP_REQ_CACHE 256
#endif

ipcp_request_t *ipcp__req_new(ipcp_comm_t *comm, int type)
{
    ipcp_request_t *req = NULL;
    if (IPCP_REQ_CACHE) {
        pthread_mutex_lock(&comm->req_lock);
        if ((req = comm->req_cache)) {
            comm->req_cache = req->cache_next;
            comm->req_cached--;
        }
        pthread_mutex_unlock(&comm->req_lock);
    }
    if (req)
        memset(req, 0, sizeof(*req));
    else if (!(req = calloc(1, sizeof(*req))))
        return NULL;
    ipcp__req_init(comm, req, type);
    return req;
}

void ipcp__req_init(ipcp_comm_t *comm, ipcp_request_t *req, int type)
{
    req->magic = IPCP_REQ_MAGIC;
    req->comm = comm;
    req->type = type;
    req->user = 1;
    req->path = IPCP_PATH_AUTO;
    atomic_init(&req->refs, 1);
    ipcp__list_init(&req->link);
    ipcp__list_init(&req->all_link);
    ipcp__list_init(&req->xfer.link);
    ipcp__trace_mark(req, IPCP_TM_CALL);
}

void ipcp__req_free(ipcp_request_t *req)
{
    if (atomic_fetch_sub_explicit(&req->refs, 1, memory_order_acq_rel) > 1)
        return;
    /* Set only when a failure frees a request before its handle reached
     * the user; the owner's release (ipcp_wait, ipcp_test,
     * ipcp__req_disown) clears it otherwise. */
    ipcp__handle_free(req->handle);
    free(req->scratch);
    req->magic = IPCP_DEAD_MAGIC;
    ipcp_comm_t *comm = req->comm;
    if (IPCP_REQ_CACHE) {
        pthread_mutex_lock(&comm->req_lock);
        if (comm->req_cached < IPCP_REQ_CACHE) {
            req->cache_next = comm->req_cache;
            comm->req_cache = req;
            comm->req_cached++;
            req = NULL;
        }
        pthread_mutex_unlock(&comm->req_lock);
    }
    free(req);
}

void ipcp__req_disown(ipcp_request_t *req)
{
    ipcp__handle_free(req->handle);
    req->handle = 0; /* before the reference goes: the engine may free */
    ipcp__req_free(req);
}

void ipcp__comm_wake(ipcp_comm_t *comm)
{
    uint64_t one = 1;
    /* An eventfd write only fails when the counter would overflow, which
     * means the thread has plenty of wake-ups pending already. */
    if (write(comm->wake_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
        IPCP_WARN(IPCP_SUB_ENGINE, "eventfd write: %s", strerror(errno));
}

/* Requests that talk to one peer: counted in its pending until they ran,
 * so that a caller's own way does not overtake them (ipcp__match_fast). */
static ipcp__peer_t *ipcp__req_peer(ipcp_comm_t *comm,
                                    const ipcp_request_t *req)
{
    switch (req->type) {
    case IPCP_REQ_SEND:
    case IPCP_REQ_RECV:
    case IPCP_REQ_PUT:
    case IPCP_REQ_GET:
        return &comm->peers[req->peer];
    }
    return NULL;
}

/* A user request the caller's own way took: listed for finalize, as a
 * submitted one is. */
void ipcp__comm_track(ipcp_comm_t *comm, ipcp_request_t *req)
{
    pthread_mutex_lock(&comm->lock);
    ipcp__list_push_back(&comm->reqs, &req->all_link);
    pthread_mutex_unlock(&comm->lock);
}

static void ipcp__cmd_push(ipcp_comm_t *comm, ipcp_request_t *req)
{
    ipcp__peer_t *peer = ipcp__req_peer(comm, req);
    if (peer)
        atomic_fetch_add(&peer->pending, 1);
    pthread_mutex_lock(&comm->lock);
    if (req->user)
        ipcp__list_push_back(&comm->reqs, &req->all_link);
    ipcp__list_push_back(&comm->cmds, &req->link);
    atomic_fetch_add(&comm->queued, 1);
    pthread_mutex_unlock(&comm->lock);
}

void ipcp__comm_submit(ipcp_comm_t *comm, ipcp_request_t *req)
{
    ipcp__cmd_push(comm, req);
    ipcp__comm_wake(comm);
}

void ipcp__await_offer(ipcp_comm_t *comm, ipcp_request_t *req)
{
    /* IPCPIPE_SPIN_US=0 is how a user asks for no busy polling. */
    if (!comm->cfg->spin_us || req->offered)
        return;
    req->await_until = ipcp__now_ns() + (uint64_t)comm->cfg->spin_us * 1000 +
                       (uint64_t)req->len / IPCP_AWAIT_BYTES_PER_NS;
    req->offered = 1;
    if (req->await_until >
        atomic_load_explicit(&comm->await_until, memory_order_relaxed))
        atomic_store_explicit(&comm->await_until, req->await_until,
                              memory_order_relaxed);
    atomic_fetch_add_explicit(&comm->offers, 1, memory_order_relaxed);
}

/* The window is the latest of the offered sends still waiting for their
 * CTS (each in its peer's wait_cts): a send whose receive is posted late
 * must not keep the sender polling after the others have ended. */
void ipcp__await_end(ipcp_request_t *req)
{
    if (!req->offered)
        return;
    ipcp_comm_t *comm = req->comm;
    req->offered = 0;
    if (atomic_fetch_sub_explicit(&comm->offers, 1, memory_order_relaxed) <=
            1 ||
        req->await_until <
            atomic_load_explicit(&comm->await_until, memory_order_relaxed))
        return;
    uint64_t until = 0;
    for (int r = 0; r < comm->size; r++) {
        ipcp__list_t *e, *tmp;
        ipcp__list_for_each_safe(e, tmp, &comm->peers[r].wait_cts)
        {
            ipcp_request_t *o = ipcp__list_entry(e, ipcp_request_t, link);
            if (o->offered && o->await_until > until)
                until = o->await_until;
        }
    }
    atomic_store_explicit(&comm->await_until, until, memory_order_relaxed);
}

void ipcp__req_complete(ipcp_request_t *req, ipcp_status_t st, const char *msg)
{
    ipcp_comm_t *comm = req->comm;
    ipcp__await_end(req);
    if (req->type == IPCP_REQ_INTERNAL && req->region) {
        ipcp__region_op_end(comm, req->region); /* a deregistration waits */
        req->region = NULL;
    }
    if (req->sync) {
        ipcp__sync_end(comm, req->sync);
        req->sync = NULL;
    }
    if (!req->user) {
        if (st != IPCP_OK)
            IPCP_LOG(req->type == IPCP_REQ_INTERNAL ? IPCP_LOG_INFO
                                                    : IPCP_LOG_WARN,
                     IPCP_SUB_ENGINE, "%s failed: %s",
                     req->type == IPCP_REQ_INTERNAL
                         ? "internal operation"
                         : "stream-ordered operation without a request",
                     msg ? msg : "");
        ipcp__req_free(req);
        return;
    }
    req->status = st;
    if (st == IPCP_OK)
        req->errmsg[0] = '\0';
    else
        snprintf(req->errmsg, sizeof(req->errmsg), "%s",
                 msg ? msg : ipcp_status_desc(st));
    /* Against ipcp__await: it counts itself a sleeper, then looks at done;
     * we raise done, then look at the sleepers (both seq_cst: one of us
     * sees the other).  A caller that spins costs no lock or broadcast
     * (on 2 CPUs, 670 instructions of 1,700 a small receive took). */
    atomic_store(&req->done, 1);
    if (!atomic_load(&comm->sleepers))
        return;
    pthread_mutex_lock(&comm->lock);
    pthread_cond_broadcast(&comm->cond);
    pthread_mutex_unlock(&comm->lock);
}

void ipcp__req_sleep(ipcp_request_t *req)
{
    ipcp_comm_t *comm = req->comm;
    /* Counted before done is looked at under the lock (ipcp__req_complete
     * broadcasts only to counted sleepers). */
    pthread_mutex_lock(&comm->lock);
    atomic_fetch_add(&comm->sleepers, 1);
    while (!atomic_load(&req->done))
        pthread_cond_wait(&comm->cond, &comm->lock);
    atomic_fetch_sub(&comm->sleepers, 1);
    pthread_mutex_unlock(&comm->lock);
}

static void ipcp__drive_end(ipcp_comm_t *comm, ipcp__peer_t *peer, uint64_t id,
                            ipcp_path_t path, ipcp_status_t st,
                            const char *msg);

/* A user's receive waits for the data only: once every queue of the
 * transfer has raised its flag after its last copy (a failed copy skips
 * the writes after it), the notifies behind the flags and their way back
 * through the event poller and comm->dones add only time (a trace on 2 x
 * H200 put 3 us between the last copy's end and the track's, 3 more to
 * the progress thread's end of it, at 256 MiB).  Stream-ordered requests
 * end in their stream; a send that offered its buffer ends at its CTS. */
void ipcp__xfer_end_early(ipcp__xfer_t *x)
{
    ipcp_request_t *req = x->req;
    if (x->early || !req || !req->user || req->sync || req->offered ||
        req->on_stack || !ipcp__track_ok(&x->track))
        return;
    x->early = 1;
    x->comm->early_live++;
    atomic_fetch_add_explicit(&req->refs, 1, memory_order_relaxed);
    ipcp__req_complete(req, IPCP_OK, NULL);
    /* Every read of the sender's buffer is done too (the copies out of it
     * come before the flags): its end goes now, on this thread, so that
     * no goodbye of ours can overtake it. */
    if (x->drive_id)
        ipcp__drive_end(x->comm, x->peer, x->drive_id, req->path, IPCP_OK,
                        NULL);
}

void ipcp__xfer_track_done(ipcp__track_t *t)
{
    ipcp__xfer_t *x = t->arg;
    ipcp_comm_t *comm = x->comm;
    if (x->req)
        ipcp__trace_mark(x->req, IPCP_TM_DONE);
    pthread_mutex_lock(&comm->lock);
    ipcp__list_push_back(&comm->dones, &x->done_link);
    atomic_fetch_add(&comm->queued, 1);
    pthread_mutex_unlock(&comm->lock);
    ipcp__comm_wake(comm);
}

/* ---- Outgoing messages -------------------------------------------------- */

static void ipcp__txmsg_free(ipcp__txmsg_t *m)
{
    for (int i = 0; i < m->nfds; i++)
        close(m->fds[i]);
    free(m);
}

static void ipcp__peer_flush(ipcp_comm_t *comm, ipcp__peer_t *peer)
{
    ipcp__list_t *e;
    while (!peer->closed && (e = peer->txq.next) != &peer->txq) {
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
static ipcp_status_t ipcp__peer_unwritable(const ipcp__peer_t *peer)
{
    char gone[IPCP_ERRMSG_MAX];
    return ipcp__fail(IPCP_LOG_DEBUG, IPCP_SUB_ENGINE, IPCP_ERR_PEER_LOST, "%s",
                      ipcp__peer_gone(peer, gone, sizeof(gone)));
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
    if (peer->closed || peer->wr_broken) {
        for (int i = 0; i < nfds; i++)
            close(fds[i]);
        return ipcp__peer_unwritable(peer);
    }
    m = malloc(sizeof(*m) + len + tail_len);
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
    if (peer->closed || peer->wr_broken)
        return ipcp__peer_unwritable(peer);
    return IPCP_OK;
}

/* ---- Peer loss ---------------------------------------------------------- */

/* How long a peer whose writes broke stays before it is lost, when its
 * socket does not end.  A dead peer's socket ends at once; a live one (a
 * write that failed for another reason) reads the end of ours and closes
 * its side within a turn of its loop. */
#define IPCP_WR_LOST_NS ((uint64_t)100 * 1000 * 1000)

void ipcp__peer_wr_broken(ipcp_comm_t *comm, ipcp__peer_t *peer,
                          const char *why)
{
    ipcp__list_t *e;
    if (peer->closed || peer->wr_broken)
        return;
    /* A peer that died may have sent what a request here waits for (a
     * barrier's release, an eager message) just before: it lies unread in
     * our inbox or socket, and the loss would fail that request.  The loss
     * comes from the end of the socket instead, read after the inbox
     * (ipcp__progress_main), or after IPCP_WR_LOST_NS. */
    peer->wr_broken = 1;
    peer->wr_lost_ns = ipcp__now_ns() + IPCP_WR_LOST_NS;
    comm->wr_broken++;
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
static void ipcp__wr_expire(ipcp_comm_t *comm, uint64_t now)
{
    for (int r = 0; r < comm->size && comm->wr_broken; r++) {
        ipcp__peer_t *p = &comm->peers[r];
        if (p->wr_broken && !p->closed && now >= p->wr_lost_ns)
            ipcp__peer_lost(comm, p,
                            "its socket did not end after a write failed");
    }
}

void ipcp__peer_lost(ipcp_comm_t *comm, ipcp__peer_t *peer, const char *why)
{
    char msg[IPCP_ERRMSG_MAX];
    ipcp__list_t *e, *tmp;

    if (peer->closed)
        return;
    peer->closed = 1;
    atomic_store(&peer->gone, 1);
    /* A failed write was the first sign: it is the reason. */
    if (peer->wr_broken) {
        comm->wr_broken--;
        if (peer->lost_why)
            why = peer->lost_why;
    }
    /* When the loss is declared here (a protocol error) the peer is alive:
     * end the connection so that it sees the loss too. */
    shutdown(peer->fd, SHUT_RDWR);
    if (peer->bye)
        snprintf(msg, sizeof(msg), "rank %d (pid %d) finalized", peer->rank,
                 (int)peer->pid);
    else
        snprintf(msg, sizeof(msg), "peer rank %d (pid %d) was lost: %s",
                 peer->rank, (int)peer->pid, why);
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
    }
    /* The word that stops host queues' waits only now: a wait that saw it
     * first would fail its transfer with its own message, which does not
     * name the peer (seen once on CI under ASan). */
    atomic_store(&peer->lost, IPCP_ERR_PEER_LOST);
    ipcp__xfer_release_waits(comm, peer);
    ipcp__lane_abort(comm, peer->rank, IPCP_ERR_PEER_LOST, msg);
    if (comm->bar_pending)
        ipcp__barrier_fail(comm, msg);
}

const char *ipcp__peer_gone(const ipcp__peer_t *peer, char *buf, size_t len)
{
    if (peer->bye)
        snprintf(buf, len, "rank %d finalized", peer->rank);
    else
        snprintf(buf, len, "rank %d is gone%s%s%s", peer->rank,
                 peer->lost_why ? " (" : "",
                 peer->lost_why ? peer->lost_why : "",
                 peer->lost_why ? ")" : "");
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

/* Whether a request waits on the peer: a transfer, an import, a barrier
 * that needs its message, or finalize that waits for its goodbye. */
static int ipcp__peer_awaited(const ipcp_comm_t *comm, ipcp__peer_t *p)
{
    if (comm->bye_req ||
        (comm->bar_pending &&
         (comm->rank ? p->rank == 0
                     : comm->bar_seen[p->rank] != comm->bar_epoch)))
        return 1;
    if (!ipcp__list_empty(&p->wait_cts) || !ipcp__list_empty(&p->gets) ||
        !ipcp__list_empty(&p->maps) || !ipcp__list_empty(&p->active))
        return 1;
    /* Callers post receives too (ipcp__match_fast).  Not under rx_lock:
     * while no request waits this runs on every turn, and a spinning
     * thread would take the lock's line from a caller reading its inbox. */
    return atomic_load_explicit(&p->n_posted, memory_order_relaxed) > 0;
}

static uint64_t ipcp__ka_step_ns(const ipcp_comm_t *comm)
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
    /* Callers that read the inbox stamp it too: once, and maybe later
     * than now. */
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
static void ipcp__keepalive(ipcp_comm_t *comm, uint64_t now)
{
    /* Every turn while no request waits on a peer, so that the first one
     * to wait is seen at once (the loop then sleeps a step at most). */
    if (now < comm->ka_next && comm->ka_awaited)
        return;
    comm->ka_next = now + ipcp__ka_step_ns(comm);
    comm->ka_awaited = 0;
    for (int r = 0; r < comm->size; r++) {
        ipcp__peer_t *p = &comm->peers[r];
        if (r == comm->rank || p->closed || p->bye ||
            !ipcp__peer_awaited(comm, p))
            continue;
        comm->ka_awaited = 1;
        ipcp__ka_check(comm, p, now);
    }
}

/* ---- Incoming messages -------------------------------------------------- */

void ipcp__dispatch(ipcp_comm_t *comm, ipcp__peer_t *peer,
                    const unsigned char *msg, size_t len, int *fds, int nfds)
{
    const ipcp__msg_hdr_t *hdr = (const void *)msg;
    size_t need = 0;

    peer->heard_ns = ipcp__now_ns();
    if (len < sizeof(*hdr))
        goto bad;
    switch (hdr->type) {
    case IPCP_MSG_RTS:
    case IPCP_MSG_CTS:
    case IPCP_MSG_GET_REQ:
        ipcp__match_msg(comm, peer, msg, len, fds, nfds);
        return;
    case IPCP_MSG_EAGER:
        ipcp__match_eager(comm, peer, msg, len, 0);
        break;
    case IPCP_MSG_MAP_REQ:
        need = sizeof(ipcp__msg_map_req_t);
        if (len < need)
            goto bad;
        ipcp__mem_on_map_req(comm, peer, (const void *)msg);
        break;
    case IPCP_MSG_MAP_REP:
        if (len < sizeof(ipcp__msg_map_rep_t))
            goto bad;
        ipcp__mem_on_map_rep(comm, peer, (const void *)msg, fds, nfds);
        return;
    case IPCP_MSG_REG_GONE:
        if (len < sizeof(ipcp__msg_reg_gone_t))
            goto bad;
        ipcp__mem_on_reg_gone(comm, peer, (const void *)msg);
        break;
    case IPCP_MSG_BARRIER:
    case IPCP_MSG_BARRIER_REL:
        if (len < sizeof(ipcp__msg_barrier_t))
            goto bad;
        ipcp__barrier_msg(
            comm, peer, (int)hdr->type,
            ((const ipcp__msg_barrier_t *)(const void *)msg)->epoch);
        break;
    case IPCP_MSG_PATH:
        if (len < sizeof(ipcp__msg_path_t))
            goto bad;
        {
            int path = ((const ipcp__msg_path_t *)(const void *)msg)->path;
            if (path < IPCP_PATH_AUTO || path > IPCP_PATH_STAGED)
                goto bad; /* a path it cannot force */
            __atomic_store_n(&peer->remote_path, path, __ATOMIC_RELEASE);
            break;
        }
    case IPCP_MSG_LANE:
        ipcp__lane_on_msg(comm, peer, msg, len, fds, nfds);
        return;
    case IPCP_MSG_MBOX:
        ipcp__mbox_on_offer(comm, peer, msg, len, fds, nfds);
        return;
    case IPCP_MSG_SWITCH:
        __atomic_store_n(&peer->in_on, 1, __ATOMIC_RELEASE);
        break;
    case IPCP_MSG_PING: {
        ipcp__msg_hdr_t pong = {IPCP_MSG_PONG, 0};
        ipcp__peer_post(comm, peer, &pong, sizeof(pong), NULL, 0);
        break;
    }
    case IPCP_MSG_PONG: /* heard_ns is all it is for */
        break;
    case IPCP_MSG_BYE:
        if (!comm->bye_req && !comm->bye_held)
            ipcp__fault_point(IPCP_FAULT_BYE_RECEIVED);
        peer->bye = 1;
        atomic_store(&peer->gone, 1);
        {
            char why[64];
            snprintf(why, sizeof(why), "rank %d finalized", peer->rank);
            ipcp__match_fail_peer(comm, peer, IPCP_ERR_PEER_LOST, why);
        }
        break;
    default:
        goto bad;
    }
    for (int i = 0; i < nfds; i++)
        close(fds[i]);
    return;
bad:
    for (int i = 0; i < nfds; i++)
        close(fds[i]);
    {
        char why[96];
        snprintf(why, sizeof(why), "malformed message (type %u, %zu bytes)",
                 len >= sizeof(*hdr) ? hdr->type : 0u, len);
        ipcp__peer_lost(comm, peer, why);
    }
}

/* Returns how many messages it handled. */
static int ipcp__peer_read(ipcp_comm_t *comm, ipcp__peer_t *peer)
{
    int fds[IPCP_SOCK_MAX_FDS];
    int nfds, n = 0;
    size_t len;

    while (!peer->closed) {
        ipcp_status_t st =
            ipcp__sock_recv(peer->fd, ipcp__rxbuf, sizeof(ipcp__rxbuf), &len,
                            fds, IPCP_SOCK_MAX_FDS, &nfds, 0);
        if (st == IPCP_IN_PROGRESS)
            return n;
        if (st != IPCP_OK) {
            ipcp__peer_lost(comm, peer,
                            peer->bye ? "finalized" : ipcp__last_error());
            return n + 1;
        }
        ipcp__dispatch(comm, peer, (const unsigned char *)ipcp__rxbuf, len, fds,
                       nfds);
        n++;
        /* After SWITCH the socket is read at the inbox's markers only. */
        if (peer->in_on)
            return n;
    }
    return n;
}

static int ipcp__peer_read_inbox(ipcp_comm_t *comm, ipcp__peer_t *peer)
{
    return ipcp__mbox_read(comm, peer, ipcp__dispatch, ipcp__rxbuf,
                           sizeof(ipcp__rxbuf));
}

/* ---- Commands and completions ------------------------------------------ */

/* Goodbye to every peer.  The trace part goes out before: rank 0 merges
 * the parts once every peer has said it. */
static void ipcp__bye_send(ipcp_comm_t *comm, ipcp_request_t *req)
{
    ipcp__trace_flush(comm);
    comm->bye_req = req;
    for (int r = 0; r < comm->size; r++) {
        ipcp__msg_hdr_t bye = {IPCP_MSG_BYE, 0};
        if (r != comm->rank && !comm->peers[r].closed)
            ipcp__peer_post(comm, &comm->peers[r], &bye, sizeof(bye), NULL, 0);
    }
    comm->bye_deadline = ipcp__now_s() + comm->timeout_s;
    ipcp__fault_point(IPCP_FAULT_BYE_SENT);
}

static void ipcp__run_cmd(ipcp_comm_t *comm, ipcp_request_t *req)
{
    switch (req->type) {
    case IPCP_REQ_SEND:
    case IPCP_REQ_RECV:
    case IPCP_REQ_PUT:
    case IPCP_REQ_GET:
        /* Stream-ordered: started by ipcp__sync_poll once its stream got
         * there. */
        if (req->sync && !ipcp__sync_started(req->sync))
            ipcp__list_push_back(&comm->deferred, &req->link);
        else
            ipcp__match_cmd(comm, req);
        break;
    case IPCP_REQ_BARRIER:
        ipcp__barrier_cmd(comm, req);
        break;
    case IPCP_REQ_IMPORT:
        ipcp__mem_import_cmd(comm, req);
        break;
    case IPCP_REQ_NOTIFY:
        ipcp__mem_notify_cmd(comm, req);
        break;
    case IPCP_REQ_DEREG:
        ipcp__mem_dereg_cmd(comm, req);
        break;
    case IPCP_REQ_LANE:
        ipcp__lane_cmd(comm, req);
        break;
    case IPCP_REQ_PATH:
        ipcp__comm_announce_path(comm);
        ipcp__req_complete(req, IPCP_OK, NULL);
        break;
    case IPCP_REQ_BYE:
        /* Transfers whose requests ended early end first (their trace
         * events, their releases): ipcp__check_bye sends it then. */
        if (comm->early_live) {
            comm->bye_held = req;
            comm->bye_deadline = ipcp__now_s() + comm->timeout_s;
            break;
        }
        ipcp__bye_send(comm, req);
        break;
    default:
        ipcp__req_complete(req, IPCP_ERR_STATE, "unknown command");
    }
}

/* The sender's verdict on a transfer we received, from its error slot:
 * IPCP_OK unless the slot holds this transfer's number. */
static ipcp_status_t ipcp__err_slot_check(const ipcp__xfer_t *x,
                                          const ipcp__errslot_t *slot,
                                          uint64_t seq, char *msg, size_t len)
{
    if (!slot || __atomic_load_n(&slot->seq, __ATOMIC_ACQUIRE) != seq)
        return IPCP_OK;
    ipcp_status_t st =
        ipcp__peer_status(__atomic_load_n(&slot->status, __ATOMIC_RELAXED));
    snprintf(msg, len,
             "rank %d could not write this transfer (%s on its "
             "side)",
             x->peer->rank, ipcp_strerror(st));
    return st;
}

/* Ends the sender's side of a transfer this process copied (a DRIVEN
 * CTS): its buffer is free again, and it learns how the copy went. */
static void ipcp__drive_end(ipcp_comm_t *comm, ipcp__peer_t *peer, uint64_t id,
                            ipcp_path_t path, ipcp_status_t st, const char *msg)
{
    char why[IPCP_ERRWIRE_MAX] = "";
    if (peer->closed)
        return;
    ipcp__fault_point(IPCP_FAULT_DATA_IN_PLACE);
    if (st != IPCP_OK) /* formatted only for a failure: it runs per transfer */
        snprintf(why, sizeof(why),
                 "rank %d could not copy this transfer out "
                 "of our buffer: %.120s",
                 comm->rank, msg);
    ipcp__cts_end(comm, peer, id, IPCP_CTS_DRIVEN, path, st, why);
}

static void ipcp__run_done(ipcp_comm_t *comm, ipcp__xfer_t *x)
{
    char msg[IPCP_ERRMSG_MAX] = "";
    ipcp_status_t st = atomic_load(&x->track.status);

    ipcp__list_del(&x->link);
    if (x->dev)
        atomic_fetch_sub_explicit(&comm->dev_inflight, 1, memory_order_relaxed);
    if (st == IPCP_OK)
        st = ipcp__err_slot_check(x, x->err_slot, x->err_seq, msg, sizeof(msg));
    if (st == IPCP_OK) /* a striped transfer's staged part */
        st = ipcp__err_slot_check(x, x->err_slot2, x->err_seq2, msg,
                                  sizeof(msg));
    ipcp__stripe_watch_end(comm, x, st == IPCP_OK);
    if (x->import)
        ipcp__import_put(comm, x->peer, x->import);
    x->import = NULL;
    if (comm->trace_on)
        ipcp__trace_xfer(comm, x, x->rx, x->req->path);
    if (st != IPCP_OK && !msg[0])
        ipcp__track_errmsg(&x->track, msg, sizeof(msg));
    ipcp__track_destroy(&x->track);
    /* A failed one may have ended before its copies (a notify that could
     * not be enqueued ends its track at once): it stays counted, and later
     * ones keep joining its queue.  One whose data was seen in place
     * (early) ended after its copies. */
    int early = x->early;
    if (x->drive_staged && (st == IPCP_OK || early))
        x->peer->rx.dstage_busy--;
    /* Read before the request completes: its owner may free it then. */
    uint64_t drive_id = x->drive_id;
    ipcp__peer_t *peer = x->peer;
    ipcp_request_t *req = x->req;
    ipcp_path_t path = req->path;
    /* Not busy before the request ends (its caller may release the
     * imported region then), but the owner hears of it after: an owner
     * told that its region is free may tell our caller, who must then
     * find the operation ended. */
    int owner = -1, answer = 0;
    uint64_t reg_id = 0;
    if (x->rmem_busy)
        answer = ipcp__rmem_op_end(comm, x->rmem_busy, &owner, &reg_id);
    x->rmem_busy = NULL;
    if (!early)
        ipcp__req_complete(req, st, msg);
    if (answer)
        ipcp__rmem_answer(comm, owner, reg_id);
    else if (st != IPCP_OK) /* after its data was in place: mostly the
                             * peer gone after its send returned */
        IPCP_LOG(peer->bye ? IPCP_LOG_INFO : IPCP_LOG_WARN, IPCP_SUB_ENGINE,
                 "a transfer from rank %d failed after its data was in "
                 "place (its receive had ended well): %s",
                 peer->rank, msg);
    /* After our own caller is told: the receive's end is what is waited
     * for (and timed); the sender's buffer is free a moment later. */
    if (drive_id && !early) /* else ipcp__xfer_end_early sent it */
        ipcp__drive_end(comm, peer, drive_id, path, st, msg);
    if (early) {
        ipcp__req_free(req); /* the engine's reference */
        comm->early_live--;
    }
}

/* Returns how many commands and completions it ran. */
static int ipcp__drain(ipcp_comm_t *comm)
{
    ipcp__list_t cmds, dones, *e;
    int n = 0;

    /* Not waiting for a user's thread that holds the lock: it is mostly
     * one that posts, whose unlock would then have to wake us.  -1: the
     * loop comes back without sleeping (the eventfd that announced a
     * command may have been read already). */
    /* Nor taking it while nothing is queued: a spinning thread's turns
     * would take its line from the callers that complete their own
     * requests under it (on one H200, 8 B windows ran 3x slower unbound
     * than bound). */
    if (!atomic_load(&comm->queued))
        return 0;
    if (pthread_mutex_trylock(&comm->lock) != 0)
        return -1;
    ipcp__list_move_all(&cmds, &comm->cmds);
    ipcp__list_move_all(&dones, &comm->dones);
    atomic_store(&comm->queued, 0);
    pthread_mutex_unlock(&comm->lock);
    /* Completions first: they free slots and mappings that new commands
     * may want. */
    while ((e = ipcp__list_pop_front(&dones)) && ++n)
        ipcp__run_done(comm, ipcp__list_entry(e, ipcp__xfer_t, done_link));
    while ((e = ipcp__list_pop_front(&cmds)) && ++n) {
        ipcp_request_t *req = ipcp__list_entry(e, ipcp_request_t, link);
        ipcp__peer_t *peer = ipcp__req_peer(comm, req); /* req may end */
        ipcp__run_cmd(comm, req);
        if (peer)
            atomic_fetch_sub(&peer->pending, 1);
    }
    return n;
}

static void ipcp__check_bye(ipcp_comm_t *comm)
{
    int waiting = 0;
    /* A held goodbye goes once the early-ended transfers are done, or at
     * the timeout: a track that never ends must not hang finalize. */
    if (comm->bye_held &&
        (!comm->early_live || ipcp__now_s() >= comm->bye_deadline)) {
        ipcp_request_t *bye = comm->bye_held;
        if (comm->early_live)
            IPCP_WARN(IPCP_SUB_ENGINE,
                      "finalizing with %d transfer(s) "
                      "whose receives ended still running",
                      comm->early_live);
        comm->bye_held = NULL;
        ipcp__bye_send(comm, bye);
    }
    if (!comm->bye_req)
        return;
    for (int r = 0; r < comm->size; r++)
        if (r != comm->rank && !comm->peers[r].closed && !comm->peers[r].bye)
            waiting++;
    if (waiting && ipcp__now_s() < comm->bye_deadline)
        return;
    ipcp__trace_merge(comm);
    ipcp__req_complete(comm->bye_req, waiting ? IPCP_ERR_TIMEOUT : IPCP_OK,
                       waiting ? "peers did not finalize in time" : NULL);
    comm->bye_req = NULL;
}

void ipcp__comm_announce_path(ipcp_comm_t *comm)
{
    ipcp__msg_path_t m;
    memset(&m, 0, sizeof(m));
    m.hdr.type = IPCP_MSG_PATH;
    m.path = atomic_load(&comm->path);
    for (int r = 0; r < comm->size; r++)
        if (r != comm->rank && !comm->peers[r].closed)
            ipcp__peer_post(comm, &comm->peers[r], &m, sizeof(m), NULL, 0);
}

/* While the thread spins and every live peer's messages come through its
 * inbox (nothing queued for a socket), the sockets carry only hang-ups and
 * messages announced by markers in the inbox, and commands and completions
 * show in comm's lists without the eventfd: poll() (0.2-0.3 us on the
 * H200 machines) then runs only every IPCP_POLL_GAP_NS, which is how late
 * a hang-up may be seen. */
#define IPCP_POLL_GAP_NS 20000

static int ipcp__poll_skippable(const ipcp_comm_t *comm)
{
    for (int r = 0; r < comm->size; r++) {
        const ipcp__peer_t *p = &comm->peers[r];
        if (r != comm->rank && !p->closed &&
            (!p->in_on || !ipcp__list_empty(&p->txq)))
            return 0;
    }
    return 1;
}

/* Whether the device has work we wait for: then a thread of the driver
 * (or a caller in a stream synchronization) may spin without yielding.
 * Host copy workers yield (futex waits), and there yielding measured
 * better: staged 8 B bound to one CPU 22-24 us a half round trip
 * yielding, 98-100 us sleeping. */
static int ipcp__dev_work(ipcp_comm_t *comm)
{
    return ipcp__sync_pending(comm) ||
           atomic_load_explicit(&comm->dev_inflight, memory_order_relaxed) >
               0 ||
           atomic_load_explicit(&comm->lane_reqs, memory_order_relaxed) > 0;
}

static void *ipcp__progress_main(void *arg)
{
    ipcp_comm_t *comm = arg;
    struct pollfd *pfd = calloc((size_t)comm->size + 1, sizeof(*pfd));
    int *idx = calloc((size_t)comm->size + 1, sizeof(*idx));

    if (!pfd || !idx) {
        IPCP_ERROR(IPCP_SUB_ENGINE, "no memory for the progress thread");
        free(pfd);
        free(idx);
        return NULL;
    }
    ipcp__log_set_rank(comm->rank);
    pthread_mutex_lock(&comm->prog_lock);
    ipcp__comm_announce_path(comm);
    ipcp__mbox_offer(comm);
    pthread_mutex_unlock(&comm->prog_lock);
    /* After any activity the thread polls without sleeping for spin_us:
     * the next message of a transfer usually follows within microseconds,
     * and a sleep and wake-up costs several of them per hop. */
    uint64_t spin_ns = (uint64_t)comm->cfg->spin_us * 1000, last_busy = 0;
    uint64_t last_poll = 0;
    int missed = 0; /* the last drain found comm->lock taken */
    while (!atomic_load(&comm->stop)) {
        int n = 0;
        pthread_mutex_lock(&comm->prog_lock);
        pfd[n].fd = comm->wake_fd;
        pfd[n++].events = POLLIN;
        for (int r = 0; r < comm->size; r++) {
            ipcp__peer_t *p = &comm->peers[r];
            if (r == comm->rank || p->closed)
                continue;
            pfd[n].fd = p->fd;
            /* Once the peer switched, its messages are in the inbox (the
             * socket is read at markers); a hang-up still shows. */
            pfd[n].events = p->in_on ? 0 : POLLIN;
            if (!ipcp__list_empty(&p->txq))
                pfd[n].events |= POLLOUT;
            idx[n++] = r;
        }
        int timeout_ms = comm->bye_req || comm->bye_held || comm->bar_pending ||
                                 comm->wr_broken ||
                                 !ipcp__list_empty(&comm->deregs)
                             ? 50
                             : 1000;
        /* Not only while a request is known to wait on a peer: callers
         * post receives themselves without waking us (engine/mbox.c), and
         * the keepalive must see them within a step (a stopped peer was
         * found up to a second late: 2.0 s with IPCPIPE_TIMEOUT=2). */
        if (timeout_ms > (int)(ipcp__ka_step_ns(comm) / 1000000))
            timeout_ms = (int)(ipcp__ka_step_ns(comm) / 1000000);
        /* Starts of stream-ordered operations land in host memory without
         * waking us, and device transfers end within milliseconds: poll
         * while either is awaited. */
        uint64_t now = ipcp__now_ns(); /* one clock read a turn */
        int spinning =
            missed || now - last_busy < spin_ns ||
            !ipcp__list_empty(&comm->staging) || ipcp__sync_pending(comm) ||
            atomic_load_explicit(&comm->dev_inflight, memory_order_relaxed) >
                0 ||
            ipcp__awaiting(comm, now) ||
            atomic_load_explicit(&comm->lane_reqs, memory_order_relaxed) > 0;
        /* Before blocking, the inboxes' sleeping words go up (and come
         * down after): writers then wake us through the eventfd. */
        if (spinning || ipcp__mbox_sleep(comm))
            timeout_ms = 0;
        int ready = 0;
        if (!spinning || missed || now - last_poll >= IPCP_POLL_GAP_NS ||
            !ipcp__poll_skippable(comm)) {
            /* Callers may take turns meanwhile (ipcp__comm_drive). */
            pthread_mutex_unlock(&comm->prog_lock);
            ready = poll(pfd, (nfds_t)n, timeout_ms);
            pthread_mutex_lock(&comm->prog_lock);
            last_poll = now;
        }
        if (!spinning)
            ipcp__mbox_awake(comm);
        if (ready < 0 && errno != EINTR) {
            IPCP_ERROR(IPCP_SUB_ENGINE, "poll: %s", strerror(errno));
            break;
        }
        if (ready > 0 && (pfd[0].revents & POLLIN)) {
            uint64_t v;
            if (read(comm->wake_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
                IPCP_WARN(IPCP_SUB_ENGINE, "eventfd read: %s", strerror(errno));
        }
        int busy = ipcp__drain(comm);
        missed = busy < 0;
        busy = missed ? 1 : busy;
        busy += ipcp__sync_poll(comm);
        busy += ipcp__lane_poll(comm);
        for (int i = 1; i < n; i++) {
            ipcp__peer_t *p = &comm->peers[idx[i]];
            short ev = ready > 0 ? pfd[i].revents : 0;
            /* The inbox first: what the peer wrote before it hung up. */
            busy += ipcp__peer_read_inbox(comm, p);
            if (ev & (POLLIN | POLLHUP | POLLERR))
                busy += ipcp__peer_read(comm, p);
            if (ev & POLLOUT)
                ipcp__peer_flush(comm, p);
        }
        /* After the messages: a chunk of a transfer still being staged. */
        busy += ipcp__stage_poll(comm);
        if (!ipcp__list_empty(&comm->watching))
            ipcp__stripe_watch(comm);
        if (busy)
            last_busy = ipcp__now_ns();
        int dev_work = !busy && spinning && ipcp__dev_work(comm);
        ipcp__check_bye(comm);
        ipcp__barrier_check(comm);
        if (!ipcp__list_empty(&comm->deregs))
            ipcp__mem_dereg_poll(comm);
        ipcp__keepalive(comm, ipcp__now_ns());
        if (comm->wr_broken)
            ipcp__wr_expire(comm, ipcp__now_ns());
        pthread_mutex_unlock(&comm->prog_lock);
        if (!busy && spinning)
            /* Not a pause loop: on 2 x H200 one (and in waiting callers)
             * left striped 256 MiB transfers about 0.5% slower.  On one
             * CPU, a sleep while other threads have work (common/cpu.h). */
            ipcp__relax(dev_work);
    }
    /* Chunks still to enqueue go in: their peer waits for them, and the
     * teardown waits for the transfers they belong to. */
    pthread_mutex_lock(&comm->prog_lock);
    ipcp__stage_flush_all(comm);
    pthread_mutex_unlock(&comm->prog_lock);
    free(pfd);
    free(idx);
    return NULL;
}

/* A caller's turn: what moves messages and transfers on (commands and
 * completions, the inboxes, queued messages, chunks still to stage),
 * without the socket poll, the keepalive or the goodbye, which stay the
 * thread's.  Only in a process without the device backend: a turn may
 * make driver calls, which bind contexts to the thread that makes them,
 * and a caller's thread must keep its own.  On one CPU this is what
 * keeps a transfer off the other threads (64 KiB half round trip, ranks
 * bound to one core each of 2: 105-123 us through the threads, 30-35 us
 * with this and the host queues' inline copies). */
int ipcp__comm_drive(ipcp_comm_t *comm)
{
    if (atomic_load_explicit(&comm->dev_state, memory_order_acquire) ==
            IPCP_DEV_OPEN ||
        atomic_load_explicit(&comm->stop, memory_order_relaxed) ||
        pthread_mutex_trylock(&comm->prog_lock) != 0)
        return 0;
    /* The open may have happened since the look above. */
    if (atomic_load_explicit(&comm->dev_state, memory_order_acquire) ==
        IPCP_DEV_OPEN) {
        pthread_mutex_unlock(&comm->prog_lock);
        return 0;
    }
    int busy = ipcp__drain(comm);
    busy = busy < 0 ? 0 : busy;
    for (int r = 0; r < comm->size; r++) {
        ipcp__peer_t *p = &comm->peers[r];
        if (r == comm->rank || p->closed)
            continue;
        busy += ipcp__peer_read_inbox(comm, p);
        if (!ipcp__list_empty(&p->txq))
            ipcp__peer_flush(comm, p);
    }
    busy += ipcp__stage_poll(comm);
    if (!ipcp__list_empty(&comm->watching))
        ipcp__stripe_watch(comm);
    pthread_mutex_unlock(&comm->prog_lock);
    return busy;
}

void ipcp__comm_submit_drive(ipcp_comm_t *comm, ipcp_request_t *req)
{
    ipcp__cmd_push(comm, req);
    /* A command left in the list (the turn was taken, or comm->lock was)
     * is the thread's. */
    if (!ipcp__comm_drive(comm) || atomic_load(&comm->queued))
        ipcp__comm_wake(comm);
}

ipcp_status_t ipcp__comm_start(ipcp_comm_t *comm)
{
    comm->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (comm->wake_fd < 0)
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_ENGINE, IPCP_ERR_SYSTEM,
                          "eventfd: %s", strerror(errno));
    int rc = pthread_create(&comm->thread, NULL, ipcp__progress_main, comm);
    if (rc != 0) {
        close(comm->wake_fd);
        comm->wake_fd = -1;
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_ENGINE, IPCP_ERR_SYSTEM,
                          "cannot start the progress thread: %s", strerror(rc));
    }
    comm->thread_started = 1;
    return IPCP_OK;
}

void ipcp__comm_stop(ipcp_comm_t *comm)
{
    if (comm->thread_started) {
        atomic_store(&comm->stop, 1);
        ipcp__comm_wake(comm);
        pthread_join(comm->thread, NULL);
        comm->thread_started = 0;
    }
}

/* After the thread stopped: aborts what is left, drains the queues, and
 * frees every request, channel and mapping.  Single-threaded from here on,
 * except for backend threads finishing their last operations. */
/* The time since *t0 in ms, and *t0 moved to now (teardown's log). */
static double ipcp__lap_ms(uint64_t *t0)
{
    uint64_t now = ipcp__now_ns(), d = now - *t0;
    *t0 = now;
    return (double)d / 1e6;
}

void ipcp__comm_teardown(ipcp_comm_t *comm)
{
    ipcp__list_t *e;
    uint64_t t = ipcp__now_ns();
    double ms[4];

    for (int r = 0; r < comm->size; r++) {
        ipcp__peer_t *p = &comm->peers[r];
        if (r == comm->rank)
            continue;
        if (!p->closed) {
            p->bye = 1; /* leaving is not a loss */
            ipcp__peer_lost(comm, p, "finalizing");
        }
    }
    /* Flag watches are in no queue that destroying waits for: let every
     * transfer finish (the loss moved their flags ahead, so this takes
     * microseconds) before the channels they read are unmapped. */
    double until = ipcp__now_s() + comm->cfg->timeout_s;
    for (;;) {
        int active = 0;
        ipcp__list_t tmp;
        pthread_mutex_lock(&comm->lock); /* backend threads push under it */
        ipcp__list_move_all(&tmp, &comm->dones);
        pthread_mutex_unlock(&comm->lock);
        while ((e = ipcp__list_pop_front(&tmp)))
            ipcp__run_done(comm, ipcp__list_entry(e, ipcp__xfer_t, done_link));
        for (int r = 0; r < comm->size; r++)
            active |=
                r != comm->rank && !ipcp__list_empty(&comm->peers[r].active);
        if (!active || ipcp__now_s() > until)
            break;
        usleep(100);
    }
    ms[0] = ipcp__lap_ms(&t);
    for (int r = 0; r < comm->size; r++) {
        if (r == comm->rank)
            continue;
        ipcp__dir_destroy(comm, &comm->peers[r].tx);
        ipcp__dir_destroy(comm, &comm->peers[r].rx);
        ipcp__mbox_close(&comm->peers[r]);
    }
    ms[1] = ipcp__lap_ms(&t);
    /* The queues are drained: every finished transfer is in dones. */
    while ((e = ipcp__list_pop_front(&comm->dones)))
        ipcp__run_done(comm, ipcp__list_entry(e, ipcp__xfer_t, done_link));
    /* Never started: complete them, which releases their streams. */
    while ((e = ipcp__list_pop_front(&comm->deferred)))
        ipcp__req_complete(ipcp__list_entry(e, ipcp_request_t, link),
                           IPCP_ERR_STATE,
                           "finalized before its stream "
                           "reached it");
    while ((e = ipcp__list_pop_front(&comm->cmds)))
        ipcp__req_complete(ipcp__list_entry(e, ipcp_request_t, link),
                           IPCP_ERR_STATE, "finalized before it started");
    ipcp__lane_teardown(comm);
    ms[2] = ipcp__lap_ms(&t);
    /* Their handles go stale here even where a transfer outlived the
     * wait above and keeps its request. */
    while ((e = ipcp__list_pop_front(&comm->reqs)))
        ipcp__req_disown(ipcp__list_entry(e, ipcp_request_t, all_link));
    ipcp__mem_cleanup(comm);
    if (ipcp__dev(comm))
        ipcp__sync_cleanup(comm);
    ms[3] = ipcp__lap_ms(&t);
    IPCP_DEBUG(IPCP_SUB_ENGINE,
               "teardown: transfers ended %.2f ms, channels "
               "and queues %.2f ms, lanes %.2f ms, memory %.2f ms",
               ms[0], ms[1], ms[2], ms[3]);
    for (int r = 0; r < comm->size; r++) {
        ipcp__peer_t *p = &comm->peers[r];
        while ((e = ipcp__list_pop_front(&p->unexp))) {
            ipcp__unexp_t *u = ipcp__list_entry(e, ipcp__unexp_t, link);
            free(u->eager);
            free(u);
        }
    }
    ipcp__trace_close(comm);
    if (comm->wake_fd >= 0)
        close(comm->wake_fd);
    comm->wake_fd = -1;
}
