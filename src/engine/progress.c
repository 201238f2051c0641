/* Progress: the progress thread's loop and the turns waiting callers
 * take in its place (ipcp__comm_drive).  What a turn takes in (peers'
 * messages, commands, completions) is incoming.c's; a transfer's end is
 * done.c's. */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/time.h"
#include "common/cpu.h"
#include "engine/progress.h"
#include "engine/remote_order.h"

/* While the thread spins and every live peer's messages come through its
 * inbox, and ours go through its ring (what waits for room there waits
 * for the ring's tail, not for the socket), the sockets carry only
 * hang-ups and messages announced by markers in the inbox, and commands
 * and completions show in comm's lists without the eventfd: poll()
 * (0.2-0.3 us on the H200 machines) then runs only every
 * IPCP_POLL_GAP_NS, which is how late a hang-up may be seen. */
#define IPCP_POLL_GAP_NS 20000

static int ipcp__poll_skippable(const ipcp_comm_t *comm)
{
    for (int r = 0; r < comm->size; r++) {
        const ipcp__peer_t *p = &comm->peers[r];
        if (r != comm->rank && !ipcp__peer_closed(p) &&
            (!p->in_on || (!p->out_on && !ipcp__list_empty(&p->txq))))
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

/* Why a turn of the thread polled without blocking (the first reason
 * found), and what ended a blocking one: counted for the debug log's line
 * at the thread's end, which says what keeps the thread awake. */
enum {
    IPCP_SPIN_MISSED,   /* the last drain found comm->lock taken */
    IPCP_SPIN_RING,     /* a queue waits for room in a peer's ring */
    IPCP_SPIN_BUSY,     /* within spin_us of the last activity */
    IPCP_SPIN_STAGING,  /* chunks wait to be staged */
    IPCP_SPIN_SYNC,     /* stream-ordered operations to watch */
    IPCP_SPIN_DEVICE,   /* device transfers in flight */
    IPCP_SPIN_AWAITING, /* an offered device send may end */
    IPCP_SPIN_LANE,     /* small-message lane requests */
    IPCP_SPIN_REMOTE,   /* stream-ordered transfers with other nodes */
    IPCP_SPIN_WHYS
};
static const char *const ipcp__spin_why[IPCP_SPIN_WHYS] = {
    "lock missed", "ring room", "after activity", "staging",     "stream order",
    "device",      "offer",     "lane",           "remote order"};

typedef struct ipcp__loop_stats {
    uint64_t turns, busy, spins[IPCP_SPIN_WHYS];
    /* blocking ppoll() calls: how many, how many until a fresh message's
     * look (ipcp__mbox_sleep), and what ended them */
    uint64_t blocks, looks, timeouts, woken, sockets;
} ipcp__loop_stats_t;

/* The thread's state from one turn to the next. */
typedef struct ipcp__loop {
    struct pollfd *pfd; /* [0]: the eventfd; then one per live peer */
    int *idx;           /* pfd[i] is peer idx[i]'s socket */
    int n;
    uint64_t spin_ns;   /* how long it polls on after activity */
    uint64_t last_busy; /* when a turn last did something */
    uint64_t last_poll; /* when it last called poll() */
    int missed;         /* the last drain found comm->lock taken */
    int ring_wait;      /* a peer's queue waits for room in its ring */
    ipcp__loop_stats_t st;
} ipcp__loop_t;

/* What poll() watches: the eventfd, and each live peer's socket. */
static void ipcp__loop_fds(ipcp_comm_t *comm, ipcp__loop_t *lp)
{
    int n = 0;
    lp->pfd[n].fd = comm->wake_fd;
    lp->pfd[n++].events = POLLIN;
    lp->ring_wait = 0;
    for (int r = 0; r < comm->size; r++) {
        ipcp__peer_t *p = &comm->peers[r];
        if (r == comm->rank || ipcp__peer_closed(p))
            continue;
        lp->pfd[n].fd = p->fd;
        /* Once the peer switched, its messages are in the inbox (the
         * socket is read at markers); a hang-up still shows. */
        lp->pfd[n].events = p->in_on ? 0 : POLLIN;
        /* A queue waiting for ring room: the thread spins (it looks at
         * the ring's tail each turn, ipcp__turn_peer; poll() would return
         * at once, the socket taking more).  One waiting for a full
         * socket may block. */
        if (!ipcp__list_empty(&p->txq)) {
            lp->pfd[n].events |= POLLOUT;
            lp->ring_wait |= p->out_on;
        }
        lp->idx[n++] = r;
    }
    lp->n = n;
}

/* How long poll() may block when nothing is awaited. */
static int ipcp__loop_timeout(const ipcp_comm_t *comm)
{
    int timeout_ms = comm->fin == IPCP_FIN_HELD || comm->fin == IPCP_FIN_SAID ||
                             comm->wr_broken || !ipcp__list_empty(&comm->deregs)
                         ? 50
                         : 1000;
    /* Not only while a request is known to wait on a peer: callers post
     * receives themselves without waking us (engine/mbox.c), and the
     * keepalive must see them within a step (a stopped peer was found up
     * to a second late: 2.0 s with IPCPIPE_TIMEOUT=2). */
    if (timeout_ms > (int)(ipcp__ka_step_ns(comm) / 1000000))
        timeout_ms = (int)(ipcp__ka_step_ns(comm) / 1000000);
    return timeout_ms;
}

/* Whether the thread polls without blocking this turn; the first reason
 * found (IPCP_SPIN_*, in this order) is counted for the debug line.
 * Starts of stream-ordered operations land in host memory without waking
 * us, and device transfers end within milliseconds: it polls while either
 * is awaited. */
static int ipcp__loop_spinning(ipcp_comm_t *comm, ipcp__loop_t *lp,
                               uint64_t now)
{
    int why =
        lp->missed                          ? IPCP_SPIN_MISSED
        : lp->ring_wait                     ? IPCP_SPIN_RING
        : now - lp->last_busy < lp->spin_ns ? IPCP_SPIN_BUSY
        : !ipcp__list_empty(&comm->staging) ? IPCP_SPIN_STAGING
        : ipcp__sync_pending(comm)          ? IPCP_SPIN_SYNC
        : atomic_load_explicit(&comm->dev_inflight, memory_order_relaxed) > 0
            ? IPCP_SPIN_DEVICE
        : ipcp__awaiting(comm, now) ? IPCP_SPIN_AWAITING
        : atomic_load_explicit(&comm->lane_reqs, memory_order_relaxed) > 0
            ? IPCP_SPIN_LANE
        : ipcp__remote_order_driven(comm) ? IPCP_SPIN_REMOTE
                                          : IPCP_SPIN_WHYS;
    lp->st.turns++;
    if (why == IPCP_SPIN_WHYS)
        return 0;
    lp->st.spins[why]++;
    return 1;
}

/* Polls the sockets and the eventfd unless the turn may skip it; returns
 * how many are ready, -1 on a poll() error. */
static int ipcp__loop_wait(ipcp_comm_t *comm, ipcp__loop_t *lp, int spinning,
                           uint64_t now)
{
    uint64_t timeout_ns = (uint64_t)ipcp__loop_timeout(comm) * 1000000;
    /* Before blocking, the inboxes' sleeping words go up (and come down
     * after): writers then wake us through the eventfd. */
    uint64_t look_ns = 0;
    int look = 0;
    if (spinning || ipcp__mbox_sleep(comm, &look_ns))
        timeout_ns = 0;
    else if (look_ns && look_ns < timeout_ns)
        timeout_ns = look_ns, look = 1;
    int ready = 0;
    if (!spinning || lp->missed || now - lp->last_poll >= IPCP_POLL_GAP_NS ||
        !ipcp__poll_skippable(comm)) {
        struct timespec ts = {(time_t)(timeout_ns / 1000000000),
                              (long)(timeout_ns % 1000000000)};
        /* Callers may take turns meanwhile (ipcp__comm_drive). */
        atomic_store(&comm->thread_blocks, timeout_ns != 0);
        ipcp__unlock(&comm->prog_lock, IPCP_LOCK_PROG);
        ready = ppoll(lp->pfd, (nfds_t)lp->n, &ts, NULL);
        ipcp__lock(&comm->prog_lock, IPCP_LOCK_PROG);
        atomic_store(&comm->thread_blocks, 0);
        lp->last_poll = now;
        if (timeout_ns) {
            lp->st.blocks++;
            lp->st.looks += look;
            lp->st.timeouts += ready == 0;
            lp->st.woken += ready > 0 && (lp->pfd[0].revents & POLLIN);
            lp->st.sockets +=
                ready > 1 || (ready == 1 && !(lp->pfd[0].revents & POLLIN));
        }
    }
    if (!spinning)
        ipcp__mbox_awake(comm);
    if (ready < 0 && errno != EINTR) {
        IPCP_ERROR(IPCP_SUB_ENGINE, "poll: %s", strerror(errno));
        return -1;
    }
    if (ready > 0 && (lp->pfd[0].revents & POLLIN)) {
        uint64_t v;
        if (read(comm->wake_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
            IPCP_WARN(IPCP_SUB_ENGINE, "eventfd read: %s", strerror(errno));
    }
    return ready < 0 ? 0 : ready;
}

/* One peer's part of a turn: its inbox first, then its socket where poll()
 * found it readable, then what waits to go to it.  After a hang-up the
 * inbox is read to its end whoever else reads it: what the peer wrote
 * before it went stands, and a receive whose caller reads the inbox (a
 * barrier's) would otherwise fail with its message in place, or a
 * marker's socket message be read before the records ahead of it. */
static int ipcp__turn_peer(ipcp_comm_t *comm, ipcp__peer_t *p, short ev)
{
    int busy = ev & (POLLHUP | POLLERR)
                   ? ipcp__mbox_read_all(comm, p, ipcp__dispatch, comm->rxbuf,
                                         IPCP_RX_MAX)
                   : ipcp__peer_read_inbox(comm, p);
    if (ev & (POLLIN | POLLHUP | POLLERR))
        busy += ipcp__peer_read(comm, p);
    /* A queue for the ring, each turn: room shows in its tail. */
    if ((ev & POLLOUT) || (p->out_on && !ipcp__list_empty(&p->txq)))
        ipcp__peer_flush(comm, p);
    return busy;
}

/* The part of a turn that moves transfers on: commands and completions,
 * the peers' messages, chunks still to stage, the striped parts watched.
 * lp: the thread's turn, with the sockets poll() found ready and the
 * device's completions; NULL: a caller's, which flushes any queue that
 * waits.  Returns how much it did (-1 from the drain counts 1; lp->missed
 * remembers it). */
static int ipcp__turn_move(ipcp_comm_t *comm, ipcp__loop_t *lp, int ready)
{
    int busy = ipcp__drain(comm);
    if (lp) {
        lp->missed = busy < 0;
        busy = lp->missed ? 1 : busy;
        busy += ipcp__sync_poll(comm);
        busy += ipcp__lane_poll(comm);
        if (ipcp__remote_order_driven(comm))
            busy += ipcp__remote_order_poll(comm);
        for (int i = 1; i < lp->n; i++)
            busy += ipcp__turn_peer(comm, &comm->peers[lp->idx[i]],
                                    ready > 0 ? lp->pfd[i].revents : 0);
    } else {
        busy = busy < 0 ? 0 : busy;
        for (int r = 0; r < comm->size; r++) {
            ipcp__peer_t *p = &comm->peers[r];
            if (r != comm->rank && !ipcp__peer_closed(p))
                busy += ipcp__turn_peer(
                    comm, p, ipcp__list_empty(&p->txq) ? 0 : POLLOUT);
        }
    }
    /* After the messages: a chunk of a transfer still being staged. */
    busy += ipcp__stage_poll(comm);
    if (!ipcp__list_empty(&comm->watching))
        ipcp__stripe_watch(comm);
    return busy;
}

/* The thread's chores after the messages: finalize, deregistrations
 * waiting, the keepalive, broken writes. */
static void ipcp__turn_chores(ipcp_comm_t *comm)
{
    ipcp__check_bye(comm);
    if (!ipcp__list_empty(&comm->deregs))
        ipcp__mem_dereg_poll(comm);
    ipcp__keepalive(comm, ipcp__now_ns());
    if (comm->wr_broken)
        ipcp__wr_expire(comm, ipcp__now_ns());
}

/* One turn of the thread; returns -1 when poll() failed. */
static int ipcp__loop_turn(ipcp_comm_t *comm, ipcp__loop_t *lp)
{
    ipcp__lock(&comm->prog_lock, IPCP_LOCK_PROG);
    ipcp__loop_fds(comm, lp);
    uint64_t now = ipcp__now_ns(); /* one clock read a turn */
    int spinning = ipcp__loop_spinning(comm, lp, now);
    int ready = ipcp__loop_wait(comm, lp, spinning, now);
    if (ready < 0) {
        ipcp__unlock(&comm->prog_lock, IPCP_LOCK_PROG);
        return -1;
    }
    int busy = ipcp__turn_move(comm, lp, ready);
    if (busy) {
        lp->last_busy = ipcp__now_ns();
        lp->st.busy++;
    }
    int dev_work = !busy && spinning && ipcp__dev_work(comm);
    ipcp__turn_chores(comm);
    ipcp__unlock(&comm->prog_lock, IPCP_LOCK_PROG);
    if (!busy && spinning)
        /* Not a pause loop: on 2 x H200 one (and in waiting callers) left
         * striped 256 MiB transfers about 0.5% slower.  On one CPU, a
         * sleep while other threads have work (common/cpu.h). */
        ipcp__relax(dev_work);
    return 0;
}

/* The debug log's account of the thread's turns (see ipcp__loop_stats_t). */
static void ipcp__loop_report(const ipcp__loop_stats_t *st)
{
    char why[320] = "";
    size_t n = 0;
    struct rusage ru;
    if (getrusage(RUSAGE_THREAD, &ru) != 0)
        memset(&ru, 0, sizeof(ru));
    for (int i = 0; i < IPCP_SPIN_WHYS && n < sizeof(why); i++)
        if (st->spins[i])
            n += (size_t)snprintf(why + n, sizeof(why) - n, "%s%s %llu",
                                  n ? ", " : "", ipcp__spin_why[i],
                                  (unsigned long long)st->spins[i]);
    IPCP_DEBUG(IPCP_SUB_ENGINE,
               "progress thread: %llu turns, %llu did something; blocked "
               "%llu times, %llu of them until a look at a fresh message "
               "(ended by the timeout %llu, a wake-up %llu, a socket %llu); "
               "turns that polled on, by the first reason: %s; CPU %.1f ms, "
               "switches %ld voluntary, %ld not",
               (unsigned long long)st->turns, (unsigned long long)st->busy,
               (unsigned long long)st->blocks, (unsigned long long)st->looks,
               (unsigned long long)st->timeouts, (unsigned long long)st->woken,
               (unsigned long long)st->sockets, n ? why : "none",
               (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
                   (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3,
               ru.ru_nvcsw, ru.ru_nivcsw);
}

static void *ipcp__progress_main(void *arg)
{
    ipcp_comm_t *comm = arg;
    ipcp__loop_t lp;
    memset(&lp, 0, sizeof(lp));
    lp.pfd = calloc((size_t)comm->size + 1, sizeof(*lp.pfd));
    lp.idx = calloc((size_t)comm->size + 1, sizeof(*lp.idx));
    if (!lp.pfd || !lp.idx) {
        IPCP_ERROR(IPCP_SUB_ENGINE, "no memory for the progress thread");
        goto out;
    }
    ipcp__log_set_rank(comm->rank);
    /* It frees requests callers made (stream-ordered calls without one,
     * transfers that ended early) and makes few: kept, they would only
     * hold memory. */
    ipcp__req_cache_cap(128);
    ipcp__lock(&comm->prog_lock, IPCP_LOCK_PROG);
    ipcp__comm_announce_path(comm);
    ipcp__mbox_offer(comm);
    ipcp__unlock(&comm->prog_lock, IPCP_LOCK_PROG);
    /* After any activity the thread polls without sleeping for spin_us:
     * the next message of a transfer usually follows within microseconds,
     * and a sleep and wake-up costs several of them per hop. */
    lp.spin_ns = (uint64_t)comm->cfg->spin_us * 1000;
    while (!atomic_load(&comm->stop))
        if (ipcp__loop_turn(comm, &lp) < 0)
            break;
    /* Chunks still to enqueue go in: their peer waits for them, and the
     * teardown waits for the transfers they belong to. */
    ipcp__lock(&comm->prog_lock, IPCP_LOCK_PROG);
    ipcp__stage_flush_all(comm);
    ipcp__unlock(&comm->prog_lock, IPCP_LOCK_PROG);
    ipcp__loop_report(&lp.st);
out:
    free(lp.pfd);
    free(lp.idx);
    return NULL;
}

/* Callers take turns only in a process without the device backend (see
 * ipcp__comm_drive). */
int ipcp__comm_can_drive(const ipcp_comm_t *comm)
{
    return atomic_load_explicit(&comm->dev_state, memory_order_acquire) !=
           IPCP_DEV_OPEN;
}

/* What a caller's turn may leave that only further turns move on: chunks
 * still to stage, messages waiting for room in a peer's ring or socket
 * (whose POLLOUT a blocked thread does not watch for).  prog_lock. */
static int ipcp__turn_left(const ipcp_comm_t *comm)
{
    if (atomic_load_explicit(&comm->nstaging, memory_order_relaxed))
        return 1;
    for (int r = 0; r < comm->size; r++)
        if (!ipcp__list_empty(&comm->peers[r].txq))
            return 1;
    return 0;
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
    if (!ipcp__comm_can_drive(comm) ||
        atomic_load_explicit(&comm->stop, memory_order_relaxed) ||
        ipcp__trylock(&comm->prog_lock, IPCP_LOCK_PROG) != 0)
        return 0;
    /* The open may have happened since the look above. */
    int busy = 0;
    if (atomic_load_explicit(&comm->dev_state, memory_order_acquire) !=
        IPCP_DEV_OPEN)
        busy = ipcp__turn_move(comm, NULL, 0);
    /* For the caller's ipcp__comm_undrive: the caller moves such work on
     * itself while it takes turns (no wake-up for the thread to compete
     * with it, on one CPU for the CPU).  Only while the thread blocks:
     * else it looks at that work itself before it blocks. */
    atomic_store(&comm->turn_left,
                 atomic_load(&comm->thread_blocks) && ipcp__turn_left(comm));
    ipcp__unlock(&comm->prog_lock, IPCP_LOCK_PROG);
    return busy;
}

void ipcp__comm_undrive(ipcp_comm_t *comm)
{
    /* Against the thread: it raises thread_blocks under prog_lock after
     * looking at the work (staging, queues) a turn leaves, and lowers it
     * under prog_lock after poll(); the turn stores turn_left under
     * prog_lock.  A turn before the thread's look leaves work it sees; a
     * turn during its poll() sees thread_blocks up here (seq_cst).  A
     * stale turn_left costs a spurious wake-up at most. */
    if (atomic_load(&comm->turn_left) && atomic_load(&comm->thread_blocks)) {
        atomic_store(&comm->turn_left, 0);
        ipcp__comm_wake(comm);
    }
}

/* Until every peer's PATH has come (the first message its thread sends):
 * before it, a small send to that peer could not go eager (only a peer
 * known to leave the path to us gets eager messages), and a blocking one
 * then waited for its receive: two sends before the receiver's first
 * receive hung, ranks on a loaded 2-CPU VM.  Bounded by the timeout; a
 * peer lost meanwhile ends it. */
static ipcp_status_t ipcp__comm_await_paths(ipcp_comm_t *comm)
{
    uint64_t t0 = ipcp__now_ns();
    uint64_t limit = (uint64_t)(comm->cfg->timeout_s * 1e9);
    for (int r = 0; r < comm->size; r++) {
        ipcp__peer_t *p = &comm->peers[r];
        if (r == comm->rank)
            continue;
        while (__atomic_load_n(&p->remote_path, __ATOMIC_ACQUIRE) < 0) {
            if (atomic_load(&p->lost))
                return ipcp__fail(
                    IPCP_LOG_WARN, IPCP_SUB_INIT, IPCP_ERR_PEER_LOST,
                    "rank %d was lost while the ranks started", r);
            if (ipcp__now_ns() - t0 > limit)
                return ipcp__fail(IPCP_LOG_WARN, IPCP_SUB_INIT,
                                  IPCP_ERR_TIMEOUT,
                                  "rank %d did not start its engine within "
                                  "%.1f s of joining",
                                  r, comm->cfg->timeout_s);
            usleep(20);
        }
    }
    return IPCP_OK;
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
    pthread_setname_np(comm->thread, "ipcp-progress");
    comm->thread_started = 1;
    ipcp_status_t st = ipcp__comm_await_paths(comm);
    if (st != IPCP_OK)
        ipcp__comm_stop(comm);
    return st;
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
