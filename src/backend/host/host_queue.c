/* Host queues: one worker thread per queue runs the operations in the
 * order they were enqueued.  Operations are small structs kept by value in
 * a growable ring, so enqueueing (once per chunk) takes a mutex and copies
 * 48 bytes: no allocation, and a condition-variable signal only when the
 * worker is asleep.  A worker with the ring empty polls for IPCPIPE_SPIN_US
 * before it sleeps, unless its process has one CPU. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "backend/host/host.h"
#include "common/status.h"
#include "common/cpu.h"
#include "common/time.h"

/* Enough for a pipeline's chunks in flight; the ring doubles when full. */
#define HOST_RING_INIT 64

struct ipcp__queue {
    pthread_mutex_t lock; /* guards everything below but thread */
    pthread_cond_t wake;  /* the worker waits here for operations */
    ipcp__host_op_t *ring;
    size_t cap;                   /* a power of two */
    size_t head, tail;            /* operations [head, tail) are pending */
    int idle;                     /* the worker is waiting on wake */
    int stop;                     /* destroy asked the worker to finish */
    _Atomic uint64_t pushed;      /* operations enqueued so far */
    uint64_t spin_ns;             /* polled for before sleeping; 0: never */
    uint64_t joins;               /* joins that waited for this queue so far */
    ipcp__host_join_word_t *join; /* raised to each join's number */
    pthread_t thread;
};

/* Polls, without the lock, until an operation is enqueued after the
 * seen-th or spin_ns passed.  A sleeping worker costs the next enqueue a
 * futex wake-up and the operation the worker's wake-up: unbound on one
 * H200, a 64 KiB transfer's copies waited for them on every half round
 * trip (40-53 us against Open MPI's 11-13). */
static void host_queue_spin(ipcp__queue_t *q, uint64_t seen)
{
    uint64_t t0 = ipcp__now_ns();
    for (unsigned i = 1;
         atomic_load_explicit(&q->pushed, memory_order_relaxed) == seen; i++) {
        ipcp__cpu_pause();
        /* A clock read costs more than a look at the count. */
        if (!(i % 32) && ipcp__now_ns() - t0 >= q->spin_ns)
            return;
    }
}

/* Takes the next operation; returns 0 when stopped and drained. */
static int host_queue_next(ipcp__queue_t *q, ipcp__host_op_t *op)
{
    int spun = !q->spin_ns || ipcp__one_cpu();
    pthread_mutex_lock(&q->lock);
    while (q->head == q->tail && !q->stop) {
        if (!spun) {
            uint64_t seen =
                atomic_load_explicit(&q->pushed, memory_order_relaxed);
            pthread_mutex_unlock(&q->lock);
            host_queue_spin(q, seen);
            spun = 1;
            pthread_mutex_lock(&q->lock);
            continue;
        }
        q->idle = 1;
        pthread_cond_wait(&q->wake, &q->lock);
    }
    q->idle = 0;
    int have = q->head != q->tail;
    if (have) {
        *op = q->ring[q->head & (q->cap - 1)];
        q->head++;
    }
    pthread_mutex_unlock(&q->lock);
    return have;
}

static void *host_queue_main(void *arg)
{
    ipcp__queue_t *q = arg;
    ipcp__host_op_t op;
    while (host_queue_next(q, &op))
        ipcp__host_op_run(&op);
    return NULL;
}

/* Doubles the ring, keeping order.  Called with q->lock held; the worker
 * copies operations out under the lock, so none points into the ring. */
static int host_ring_grow(ipcp__queue_t *q)
{
    size_t n = q->tail - q->head;
    ipcp__host_op_t *r = malloc(2 * q->cap * sizeof(*r));
    if (!r)
        return -1;
    for (size_t i = 0; i < n; i++)
        r[i] = q->ring[(q->head + i) & (q->cap - 1)];
    free(q->ring);
    q->ring = r;
    q->cap *= 2;
    q->head = 0;
    q->tail = n;
    return 0;
}

/* Enqueues op with q->lock held; the lock is released on return. */
static ipcp_status_t host_enqueue_locked(ipcp__queue_t *q,
                                         const ipcp__host_op_t *op)
{
    if (q->tail - q->head == q->cap && host_ring_grow(q) != 0) {
        size_t cap = q->cap;
        pthread_mutex_unlock(&q->lock);
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_HOST, IPCP_ERR_NOMEM,
                          "cannot grow a host queue beyond %zu operations",
                          cap);
    }
    q->ring[q->tail & (q->cap - 1)] = *op;
    q->tail++;
    atomic_fetch_add_explicit(&q->pushed, 1, memory_order_relaxed);
    /* Only a sleeping worker needs the signal; clearing idle here spares
     * the rest of a burst the futex call. */
    int wake = q->idle;
    q->idle = 0;
    pthread_mutex_unlock(&q->lock);
    if (wake)
        pthread_cond_signal(&q->wake);
    return IPCP_OK;
}

/* Operations that end by themselves and call back nothing: a thread that
 * enqueues one may run it in the worker's place. */
static int host_op_inlinable(const ipcp__host_op_t *op)
{
    return op->kind == IPCP_HOST_OP_COPY || op->kind == IPCP_HOST_OP_RCOPY ||
           op->kind == IPCP_HOST_OP_FLAG_WRITE ||
           op->kind == IPCP_HOST_OP_STAMP || op->kind == IPCP_HOST_OP_NOTIFY;
}

/* In a process bound to one CPU the worker adds nothing but two hand-offs
 * per operation, each a wake-up that waits its turn on that CPU: an
 * operation enqueued while the worker sleeps on an empty ring runs at once
 * in the enqueuing thread, under the lock, so that nothing enqueued after
 * it can pass it (64 KiB half round trip bound to one core of 2: 105 us
 * through the worker, 40 us so; NOTES).  A notify too: its track's
 * callback takes the engine's locks after the queue's, which no thread
 * holds while it enqueues (a receiver-driven copy ended 40 us after its
 * last byte when the worker had to wake for the notify alone). */
static ipcp_status_t host_enqueue(ipcp__queue_t *q, const ipcp__host_op_t *op)
{
    pthread_mutex_lock(&q->lock);
    if (q->idle && q->head == q->tail && host_op_inlinable(op) &&
        ipcp__one_cpu()) {
        ipcp__host_op_run(op);
        pthread_mutex_unlock(&q->lock);
        return IPCP_OK;
    }
    return host_enqueue_locked(q, op);
}

/* The worker runs with every signal blocked, so the application's
 * handlers run on its own threads and never interrupt a copy here. */
static int host_thread_start(ipcp__queue_t *q)
{
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&q->thread, NULL, host_queue_main, q);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc == 0)
        pthread_setname_np(q->thread, "ipcp-host-q");
    return rc;
}

ipcp_status_t ipcp__host_queue_create(ipcp__backend_t *be, int device,
                                      ipcp__queue_t **out)
{
    ipcp_status_t st;
    ipcp__queue_t *q = calloc(1, sizeof(*q));
    if (!q)
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_HOST, IPCP_ERR_NOMEM,
                          "cannot allocate a host queue");
    q->cap = HOST_RING_INIT;
    q->spin_ns = (uint64_t)be->cfg.spin_us * 1000;
    q->ring = malloc(q->cap * sizeof(*q->ring));
    q->join = calloc(1, sizeof(*q->join));
    if (q->join)
        atomic_init(&q->join->refs, 1);
    if (!q->ring || !q->join) {
        st = ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_HOST, IPCP_ERR_NOMEM,
                        "cannot allocate a host queue ring");
        goto free_queue;
    }
    pthread_mutex_init(&q->lock, NULL);
    pthread_cond_init(&q->wake, NULL);
    int rc = host_thread_start(q);
    if (rc != 0) {
        st = ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_HOST, IPCP_ERR_SYSTEM,
                        "cannot start a host queue thread: %s", strerror(rc));
        goto destroy_sync;
    }
    IPCP_DEBUG(IPCP_SUB_HOST, "queue %p created", (void *)q);
    *out = q;
    return IPCP_OK;

destroy_sync:
    pthread_cond_destroy(&q->wake);
    pthread_mutex_destroy(&q->lock);
free_queue:
    free(q->ring);
    free(q->join);
    free(q);
    return st;
}

void ipcp__host_queue_destroy(ipcp__queue_t *q)
{
    if (!q)
        return;
    pthread_mutex_lock(&q->lock);
    q->stop = 1;
    /* A polling worker looks at the count, not at stop. */
    atomic_fetch_add_explicit(&q->pushed, 1, memory_order_relaxed);
    pthread_mutex_unlock(&q->lock);
    pthread_cond_signal(&q->wake);
    /* The worker leaves only once the ring is empty. */
    pthread_join(q->thread, NULL);
    IPCP_DEBUG(IPCP_SUB_HOST, "queue %p destroyed after %zu operations",
               (void *)q, q->tail);
    pthread_cond_destroy(&q->wake);
    pthread_mutex_destroy(&q->lock);
    ipcp__host_join_word_put(q->join);
    free(q->ring);
    free(q);
}

void ipcp__host_join_word_put(ipcp__host_join_word_t *j)
{
    if (atomic_fetch_sub_explicit(&j->refs, 1, memory_order_acq_rel) == 1)
        free(j);
}

ipcp_status_t ipcp__host_copy(ipcp__queue_t *q, void *dst, const void *src,
                              size_t len, ipcp__track_t *t)
{
    /* Nothing to order: an empty copy has no effect a later op could see. */
    if (len == 0)
        return IPCP_OK;
    ipcp__host_op_t op = {.kind = IPCP_HOST_OP_COPY, .t = t};
    op.u.copy.dst = dst;
    op.u.copy.src = src;
    op.u.copy.len = len;
    return host_enqueue(q, &op);
}

ipcp_status_t ipcp__host_rcopy(ipcp__queue_t *q, pid_t pid, uint64_t remote,
                               void *local, size_t len, int write,
                               ipcp__track_t *t)
{
    if (len == 0)
        return IPCP_OK;
    if (pid <= 0)
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_HOST, IPCP_ERR_INVALID,
                          "remote copy to invalid pid %d", (int)pid);
    ipcp__host_op_t op = {.kind = IPCP_HOST_OP_RCOPY, .t = t};
    op.u.rcopy.local = local;
    op.u.rcopy.remote = remote;
    op.u.rcopy.len = len;
    op.u.rcopy.pid = pid;
    op.u.rcopy.write = write;
    return host_enqueue(q, &op);
}

/* Futexes need 4-byte alignment and a 64-bit atomic needs 8; a misaligned
 * flag is the engine's bug, reported here rather than as EINVAL later. */
static ipcp_status_t host_flag_check(const uint64_t *flag)
{
    if (!flag || ((uintptr_t)flag & 7))
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_HOST, IPCP_ERR_INVALID,
                          "flag %p is not an 8-byte-aligned word",
                          (const void *)flag);
    return IPCP_OK;
}

ipcp_status_t ipcp__host_flag_write(ipcp__queue_t *q, uint64_t *flag,
                                    uint64_t value, ipcp__track_t *t)
{
    ipcp_status_t st = host_flag_check(flag);
    if (st != IPCP_OK)
        return st;
    ipcp__host_op_t op = {.kind = IPCP_HOST_OP_FLAG_WRITE, .t = t};
    op.u.flag.flag = flag;
    op.u.flag.value = value;
    return host_enqueue(q, &op);
}

ipcp_status_t ipcp__host_flag_wait(ipcp__queue_t *q, uint64_t *flag,
                                   uint64_t value, const atomic_int *abort,
                                   ipcp__track_t *t)
{
    ipcp_status_t st = host_flag_check(flag);
    if (st != IPCP_OK)
        return st;
    ipcp__host_op_t op = {.kind = IPCP_HOST_OP_FLAG_WAIT, .t = t};
    op.u.flag.flag = flag;
    op.u.flag.value = value;
    op.u.flag.abort = abort;
    return host_enqueue(q, &op);
}

/* Two operations in the queue, as the engine would enqueue them: the host
 * gains nothing from a batch, and the engine's pairing of a chunk's mark
 * with the next wait is tested through it. */
ipcp_status_t ipcp__host_flag_write_wait(ipcp__queue_t *q, uint64_t *wflag,
                                         uint64_t wvalue, uint64_t *flag,
                                         uint64_t value,
                                         const atomic_int *abort)
{
    ipcp_status_t st = ipcp__host_flag_write(q, wflag, wvalue, NULL);
    return st != IPCP_OK ? st
                         : ipcp__host_flag_wait(q, flag, value, abort, NULL);
}

ipcp_status_t ipcp__host_call(ipcp__queue_t *q, void (*fn)(void *arg),
                              void *arg)
{
    ipcp__host_op_t op = {.kind = IPCP_HOST_OP_CALL};
    op.u.call.fn = fn;
    op.u.call.arg = arg;
    return host_enqueue(q, &op);
}

ipcp_status_t ipcp__host_stamp(ipcp__queue_t *q, uint64_t *ns)
{
    ipcp__host_op_t op = {.kind = IPCP_HOST_OP_STAMP, .u.stamp = ns};
    return host_enqueue(q, &op);
}

ipcp_status_t ipcp__host_notify(ipcp__queue_t *q, ipcp__track_t *t)
{
    if (!t)
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_HOST, IPCP_ERR_INVALID,
                          "notify without a track");
    ipcp__host_op_t op = {.kind = IPCP_HOST_OP_NOTIFY, .t = t};
    return host_enqueue(q, &op);
}

/* src raises its join word to the join's number once everything before
 * it has run, and dst waits for that number (a flag write wakes the
 * waiter).  The number is taken and its write enqueued under src's lock,
 * so that the word only grows in queue order.  The wait holds a reference
 * on the word: src may be destroyed before dst runs it. */
ipcp_status_t ipcp__host_join(ipcp__queue_t *dst, ipcp__queue_t *src)
{
    if (dst == src)
        return IPCP_OK;
    ipcp__host_op_t op = {.kind = IPCP_HOST_OP_FLAG_WRITE};
    pthread_mutex_lock(&src->lock);
    uint64_t v = ++src->joins;
    op.u.flag.flag = &src->join->word;
    op.u.flag.value = v;
    atomic_fetch_add_explicit(&src->join->refs, 1, memory_order_relaxed);
    ipcp__host_op_t w = {.kind = IPCP_HOST_OP_JOIN_WAIT};
    w.u.join.j = src->join;
    w.u.join.value = v;
    ipcp_status_t st = host_enqueue_locked(src, &op);
    if (st == IPCP_OK)
        st = host_enqueue(dst, &w);
    if (st != IPCP_OK)
        ipcp__host_join_word_put(w.u.join.j);
    return st;
}
