/* Requests: their making, reuse and completion, and how commands reach
 * the progress thread (or run on the caller, ipcp__comm_submit_drive). */
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
#include "common/tls.h"
#include "common/util.h"
#include "engine/progress.h"

/* ---- Requests ------------------------------------------------------------ */

/* Freed requests are kept for reuse by the thread that freed them, up to
 * this many: a request is 2 KB, past what malloc keeps per thread, and its
 * calloc and free took 480 of the 1,800 instructions a small isend and its
 * wait cost (2 CPUs, 64 in flight).  1024 (2 MB at most, kept only by a
 * thread that freed that many; the progress thread, which frees requests
 * other threads made and makes few, keeps 128): with 128, windows of 8 B
 * past it paid a calloc, a free and page faults a request (malloc trims
 * the heap it grew): 256 in flight 0.035 GB/s, 512 0.022, against 0.092
 * with 64; with 1024, 0.084 at both (ranks bound to one CPU each, 2-CPU
 * VM).  Per thread rather than per communicator: a small message's own
 * calls then take no lock for it (a lock pair costs 15 ns in a process
 * with a second thread, on a 2-CPU VM, and each message took two).  None
 * under AddressSanitizer, which then sees a request used after its free. */
#ifndef IPCP_REQ_CACHE
#define IPCP_REQ_CACHE (IPCP_ASAN ? 0 : 1024)
#endif

#if IPCP_REQ_CACHE > 0
typedef struct ipcp__req_tcache {
    ipcp_request_t *head; /* linked through cache_next */
    unsigned n;
    unsigned cap; /* 0: IPCP_REQ_CACHE (ipcp__req_cache_cap) */
    int keyed;    /* emptied at the thread's exit (common/tls.h) */
} ipcp__req_tcache_t;

static _Thread_local ipcp__req_tcache_t ipcp__req_tc;

static void ipcp__req_tc_empty(void *arg)
{
    ipcp__req_tcache_t *tc = arg;
    while (tc->head) {
        ipcp_request_t *req = tc->head;
        tc->head = req->cache_next;
        free(req);
    }
    /* Closed: what the thread frees in later exit work goes to free(). */
    tc->n = IPCP_REQ_CACHE;
}

/* Keeps req in this thread's cache; 0 when it is full or cannot be
 * emptied at the thread's exit. */
static int ipcp__req_cache_put(ipcp_request_t *req)
{
    ipcp__req_tcache_t *tc = &ipcp__req_tc;
    if (tc->n >= (tc->cap ? tc->cap : IPCP_REQ_CACHE) ||
        ipcp__at_thread_exit(&tc->keyed, ipcp__req_tc_empty, tc) != 0)
        return 0;
    req->cache_next = tc->head;
    tc->head = req;
    tc->n++;
    return 1;
}

void ipcp__req_cache_cap(unsigned n)
{
    ipcp__req_tc.cap = n < 1 ? 1 : n > IPCP_REQ_CACHE ? IPCP_REQ_CACHE : n;
}

/* A request this thread freed, or NULL. */
static ipcp_request_t *ipcp__req_cache_get(void)
{
    ipcp__req_tcache_t *tc = &ipcp__req_tc;
    ipcp_request_t *req = tc->head;
    if (req) {
        tc->head = req->cache_next;
        tc->n--;
    }
    return req;
}
#else
void ipcp__req_cache_cap(unsigned n)
{
    (void)n;
}

static int ipcp__req_cache_put(ipcp_request_t *req)
{
    (void)req;
    return 0;
}

static ipcp_request_t *ipcp__req_cache_get(void)
{
    return NULL;
}
#endif

ipcp_request_t *ipcp__req_new(ipcp_comm_t *comm, int type)
{
    ipcp_request_t *req = ipcp__req_cache_get();
    if (req)
        ipcp__req_clear(req, comm->trace_on, req->xfer_clean);
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
    ipcp__list_init(&req->xfer.link);
    ipcp__trace_mark(req, IPCP_TM_CALL);
}

void ipcp__req_free(ipcp_request_t *req)
{
    /* The last reference needs no atomic write: only a holder of one takes
     * another (ipcp__xfer_end_early), so with ours alone none can come. */
    if (atomic_load_explicit(&req->refs, memory_order_acquire) != 1 &&
        atomic_fetch_sub_explicit(&req->refs, 1, memory_order_acq_rel) > 1)
        return;
    /* Set only when a failure frees a request before its handle reached
     * the user; the owner's release (ipcp_wait, ipcp_test,
     * ipcp__req_disown) clears it otherwise. */
    ipcp__handle_free(req->handle);
    free(req->scratch);
    req->magic = IPCP_DEAD_MAGIC;
    if (!ipcp__req_cache_put(req))
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
ipcp__peer_t *ipcp__req_peer(ipcp_comm_t *comm, const ipcp_request_t *req)
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

static void ipcp__cmd_push(ipcp_comm_t *comm, ipcp_request_t *req)
{
    ipcp__peer_t *peer = ipcp__req_peer(comm, req);
    if (peer)
        atomic_fetch_add(&peer->pending, 1);
    ipcp__lock(&comm->lock, IPCP_LOCK_COMM);
    ipcp__list_push_back(&comm->cmds, &req->link);
    atomic_fetch_add(&comm->queued, 1);
    ipcp__unlock(&comm->lock, IPCP_LOCK_COMM);
}

void ipcp__comm_submit(ipcp_comm_t *comm, ipcp_request_t *req)
{
    ipcp__cmd_push(comm, req);
    ipcp__comm_wake(comm);
}

void ipcp__comm_submit_drive(ipcp_comm_t *comm, ipcp_request_t *req)
{
    ipcp__cmd_push(comm, req);
    /* A command left in the list (the turn was taken, or comm->lock was)
     * is the thread's. */
    if (!ipcp__comm_drive(comm) || atomic_load(&comm->queued))
        ipcp__comm_wake(comm);
    else
        ipcp__comm_undrive(comm);
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
        int internal =
            req->type == IPCP_REQ_INTERNAL || req->type == IPCP_REQ_LANE;
        if (st != IPCP_OK)
            IPCP_LOG(internal ? IPCP_LOG_INFO : IPCP_LOG_WARN, IPCP_SUB_ENGINE,
                     "%s failed: %s",
                     internal ? "internal operation"
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
    ipcp__lock(&comm->lock, IPCP_LOCK_COMM);
    pthread_cond_broadcast(&comm->cond);
    ipcp__unlock(&comm->lock, IPCP_LOCK_COMM);
}

int ipcp__req_sleep(ipcp_request_t *req, uint64_t until)
{
    ipcp_comm_t *comm = req->comm;
    struct timespec ts = {(time_t)(until / 1000000000u),
                          (long)(until % 1000000000u)};
    /* Most waits end spinning: then no lock. */
    if (atomic_load_explicit(&req->done, memory_order_acquire))
        return 1;
    /* Counted before done is looked at under the lock (ipcp__req_complete
     * broadcasts only to counted sleepers). */
    ipcp__lock(&comm->lock, IPCP_LOCK_COMM);
    atomic_fetch_add(&comm->sleepers, 1);
    while (!atomic_load(&req->done)) {
        if (!until)
            pthread_cond_wait(&comm->cond, &comm->lock);
        else if (pthread_cond_timedwait(&comm->cond, &comm->lock, &ts) ==
                 ETIMEDOUT)
            break;
    }
    atomic_fetch_sub(&comm->sleepers, 1);
    ipcp__unlock(&comm->lock, IPCP_LOCK_COMM);
    return atomic_load(&req->done);
}

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
    ipcp__lock(&comm->lock, IPCP_LOCK_COMM);
    ipcp__list_push_back(&comm->dones, &x->done_link);
    atomic_fetch_add(&comm->queued, 1);
    ipcp__unlock(&comm->lock, IPCP_LOCK_COMM);
    ipcp__comm_wake(comm);
}
