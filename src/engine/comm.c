/* The communicator: its making, and its teardown once the progress
 * thread has stopped. */
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
#include "common/cpu.h"
#include "engine/progress.h"

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
    /* Timed sleeps (ipcp_wait_for) count on the monotonic clock. */
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&comm->cond, &ca);
    pthread_condattr_destroy(&ca);
    ipcp__mutex_init_spin(&comm->prog_lock);
    ipcp__mutex_init_spin(&comm->mem_lock);
    ipcp__mutex_init_spin(&comm->sync_lock);
    ipcp__mutex_init_spin(&comm->lane_lock);
    pthread_mutex_init(&comm->dev_lock, NULL);
    ipcp__list_init(&comm->cmds);
    ipcp__list_init(&comm->dones);
    ipcp__list_init(&comm->staging);
    ipcp__list_init(&comm->watching);
    ipcp__list_init(&comm->regions);
    ipcp__list_init(&comm->rmems);
    ipcp__list_init(&comm->deferred);
    ipcp__list_init(&comm->deregs);
    comm->peers = calloc((size_t)size, sizeof(*comm->peers));
    comm->rxbuf = malloc(IPCP_RX_MAX);
    if (!comm->peers || !comm->rxbuf) {
        free(comm->peers);
        free(comm->rxbuf);
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
        p->link = r == rank ? IPCP_PEER_CLOSED : IPCP_PEER_OPEN;
        ipcp__list_init(&p->txq);
        ipcp__list_init(&p->wait_cts);
        ipcp__list_init(&p->posted);
        ipcp__list_init(&p->unexp);
        ipcp__list_init(&p->gets);
        ipcp__list_init(&p->maps);
        ipcp__list_init(&p->active);
        ipcp__list_init(&p->imports);
        ipcp__list_init(&p->rexports);
        ipcp__rmutex_init(&p->rx_lock);
        p->mbox_slots = ipcp__mbox_slots(size);
        ipcp__mutex_init(&p->tx_lock);
    }
    *out = comm;
    return IPCP_OK;
}

void ipcp__comm_delete(ipcp_comm_t *comm)
{
    for (int r = 0; r < comm->size; r++)
        free(comm->peers[r].lost_why);
    pthread_mutex_destroy(&comm->lock);
    pthread_cond_destroy(&comm->cond);
    pthread_mutex_destroy(&comm->prog_lock);
    pthread_mutex_destroy(&comm->mem_lock);
    pthread_mutex_destroy(&comm->sync_lock);
    pthread_mutex_destroy(&comm->lane_lock);
    pthread_mutex_destroy(&comm->dev_lock);
    free(comm->peers);
    free(comm->rxbuf);
    comm->magic = IPCP_DEAD_MAGIC;
    free(comm);
}

/* The time since *t0 in ms, and *t0 moved to now (teardown's log). */
static double ipcp__lap_ms(uint64_t *t0)
{
    uint64_t now = ipcp__now_ns(), d = now - *t0;
    *t0 = now;
    return (double)d / 1e6;
}

/* Every peer is let go (leaving is not a loss), and every transfer is let
 * finish: flag watches are in no queue that destroying waits for, and the
 * loss moved their flags ahead, so this takes microseconds.  Then the
 * channels they read may be unmapped. */
static void ipcp__teardown_transfers(ipcp_comm_t *comm)
{
    ipcp__list_t *e;
    for (int r = 0; r < comm->size; r++) {
        ipcp__peer_t *p = &comm->peers[r];
        if (r != comm->rank && !ipcp__peer_closed(p)) {
            p->bye = 1;
            ipcp__peer_lost(comm, p, "finalizing");
        }
    }
    double until = ipcp__now_s() + comm->cfg->timeout_s;
    for (;;) {
        int active = 0;
        ipcp__list_t tmp;
        ipcp__lock(&comm->lock,
                   IPCP_LOCK_COMM); /* backend threads push under it */
        ipcp__list_move_all(&tmp, &comm->dones);
        ipcp__unlock(&comm->lock, IPCP_LOCK_COMM);
        while ((e = ipcp__list_pop_front(&tmp)))
            ipcp__run_done(comm, ipcp__list_entry(e, ipcp__xfer_t, done_link));
        for (int r = 0; r < comm->size; r++)
            active |=
                r != comm->rank && !ipcp__list_empty(&comm->peers[r].active);
        if (!active || ipcp__now_s() > until)
            break;
        usleep(100);
    }
}

/* After the thread stopped: aborts what is left, drains the queues, and
 * frees every request, channel and mapping.  Single-threaded from here on,
 * except for backend threads finishing their last operations. */
/* ipcp__handle_reap's callback: a request whose handle the user still
 * held (released by the reap; disowning it again changes nothing). */
static void ipcp__req_reap(void *req, void *arg)
{
    (void)arg;
    ipcp__req_disown(req);
}

/* The same for a request that completed when posted: its handle is all
 * there is. */
static void ipcp__done_reap(void *v, void *arg)
{
    (void)v;
    (void)arg;
}

void ipcp__comm_teardown(ipcp_comm_t *comm)
{
    ipcp__list_t *e;
    uint64_t t = ipcp__now_ns();
    double ms[4];

    ipcp__teardown_transfers(comm);
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
    ipcp__handle_reap(IPCP_HANDLE_REQ, comm->handle, ipcp__req_reap, NULL);
    ipcp__handle_reap(IPCP_HANDLE_DONE, comm->handle, ipcp__done_reap, NULL);
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
            ipcp__buf_free(u->eager);
            free(u);
        }
    }
    ipcp__buf_trim();
    ipcp__trace_close(comm);
    if (comm->wake_fd >= 0)
        close(comm->wake_fd);
    comm->wake_fd = -1;
}
