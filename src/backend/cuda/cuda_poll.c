/* Completion of device work by polling events.  A stream callback (the
 * other way, IPCPIPE_CUDA_NOTIFY=callback) holds its stream until the
 * driver's callback thread has run it, so every transfer's end would stall
 * the copies queued behind it; an event recorded in the stream costs the
 * stream nothing, and one thread per backend polls the recorded events
 * while any are outstanding and sleeps when none are.
 *
 * The same thread watches flags in shared memory for waits only the CPU
 * needs (a receive that ends on the host): reading the flag there spares
 * a stream wait, an event and its query per transfer. */
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/cuda/cuda_backend.h"
#include "common/cpu.h"
#include "common/status.h"
#include "common/time.h"

/* cuMemcpyBatchAsync as CUDA 13 has it (no failIdx); older headers have
 * another form or none, and those builds copy one call each. */
#if CUDA_VERSION >= 13000
#include <cudaTypedefs.h>
typedef PFN_cuMemcpyBatchAsync_v13000 cuda_batch_fn;
#else
typedef void *cuda_batch_fn;
#endif

/* Notifies of one queue that the thread ends with one event at most, and
 * ops of a run at most (cuda_run_ops). */
#define CUDA_RUN_MAX 4
#define CUDA_RUN_OPS (2 * CUDA_RUN_MAX)

typedef struct cuda_pending {
    struct cuda_pending *next;
    CUevent ev;
    CUcontext ctx;
    int device;
    ipcp__track_t *t;  /* notify: the track; stamp: NULL */
    uint64_t *stamp;   /* stamp: where the host time goes */
    atomic_int *count; /* the queue's events not yet finished */
    /* Notifies handed over before t's, in order, that this event ends
     * too (ops of one queue enqueued together). */
    ipcp__track_t *also[CUDA_RUN_MAX - 1];
    int nalso;
} cuda_pending_t;

typedef struct cuda_watch {
    struct cuda_watch *next;
    const uint64_t *flag;
    uint64_t value;
    const atomic_int *abort;
    ipcp__track_t *t;
} cuda_watch_t;

/* A copy or a notify of an offload queue, for the poller to enqueue. */
typedef struct cuda_op {
    struct cuda_op *next;
    ipcp__queue_t *q;
    int notify; /* 1: a notify; 0: a copy of len bytes from src to dst */
    void *dst;
    const void *src;
    size_t len;
    ipcp__track_t *t;
} cuda_op_t;

struct ipcp__cuda_poller {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    cuda_pending_t *head, **tail; /* newly recorded, in order */
    cuda_pending_t *free;         /* spare records, events still created */
    cuda_watch_t *watches;        /* newly added flag watches */
    cuda_op_t *ops, **ops_tail;   /* to enqueue, in order */
    cuda_op_t *op_free;           /* spare ops */
    _Atomic uint64_t pushed;      /* handed over so far (any kind) */
    int stop;
    cuda_batch_fn batch; /* where the driver has it, else NULL */
};

/* Tells the thread something was handed over; called with p->lock held. */
static void cuda_poll_wake(ipcp__cuda_poller_t *p)
{
    atomic_fetch_add_explicit(&p->pushed, 1, memory_order_relaxed);
    pthread_cond_signal(&p->cond);
}

/* A stamp's event against its device's anchor (both recorded in one
 * context, as cuEventElapsedTime wants). */
static void cuda_poll_stamp_done(ipcp__backend_t *be, cuda_pending_t *e,
                                 CUresult r)
{
    float ms = 0;
    ipcp__cuda_dev_t *d = &be->dev[e->device];
    if (r == CUDA_SUCCESS &&
        IPCP_CU(cuEventElapsedTime)(&ms, d->anchor, e->ev) == CUDA_SUCCESS)
        *e->stamp = d->anchor_ns + (uint64_t)((double)ms * 1e6);
    else
        *e->stamp = 0;
    IPCP_CU(cuEventDestroy)(e->ev);
    atomic_fetch_sub_explicit(e->count, 1, memory_order_release);
    free(e);
}

static void cuda_poll_finish(ipcp__cuda_poller_t *p, cuda_pending_t *e,
                             CUresult r)
{
    for (int i = 0; i <= e->nalso; i++) {
        ipcp__track_t *t = i < e->nalso ? e->also[i] : e->t;
        if (r != CUDA_SUCCESS) {
            const char *name = ipcp__cu_errname_nocall(r);
            ipcp__track_fail(t, IPCP_ERR_CUDA,
                             "an operation on a CUDA stream of device %d "
                             "failed: %s (CUresult %d)",
                             e->device, name ? name : "unknown error", (int)r);
        }
        ipcp__track_notify(t);
    }
    if (r != CUDA_SUCCESS) {
        IPCP_CU(cuEventDestroy)(e->ev);
        e->ev = NULL;
    }
    /* Last: the queue may be destroyed as soon as this reaches 0. */
    atomic_fetch_sub_explicit(e->count, 1, memory_order_release);
    pthread_mutex_lock(&p->lock);
    e->next = p->free;
    p->free = e;
    pthread_mutex_unlock(&p->lock);
}

/* Queues a pass holds back at most; past that it holds back every queue. */
#define CUDA_POLL_HELD 64

/* Whether an earlier event of e's queue was found not ready in this pass.
 * One queue's events end in order, but the GPU may pass an earlier one and
 * a later one between two queries of a pass: ending the later one first (a
 * notify, whose transfer may then end and free its trace stamps) before
 * the earlier one (a stamp written into them) would write freed memory. */
static int cuda_poll_held(const cuda_pending_t *e,
                          const atomic_int *const *held, int nheld)
{
    if (nheld > CUDA_POLL_HELD)
        return 1;
    for (int i = 0; i < nheld; i++)
        if (held[i] == e->count)
            return 1;
    return 0;
}

/* One pass over the outstanding events, in order; returns what is left. */
static cuda_pending_t *cuda_poll_pass(ipcp__cuda_poller_t *p,
                                      ipcp__backend_t *be, cuda_pending_t *list)
{
    cuda_pending_t *keep = NULL, **kt = &keep;
    const atomic_int *held[CUDA_POLL_HELD];
    int nheld = 0;
    while (list) {
        cuda_pending_t *e = list;
        list = e->next;
        CUresult r = CUDA_ERROR_NOT_READY;
        if (!cuda_poll_held(e, held, nheld)) {
            ipcp__cuda_bind(be, e->ctx);
            r = IPCP_CU(cuEventQuery)(e->ev);
            if (r == CUDA_ERROR_NOT_READY) {
                if (nheld < CUDA_POLL_HELD)
                    held[nheld] = e->count;
                nheld++;
            }
        }
        if (r == CUDA_ERROR_NOT_READY) {
            e->next = NULL;
            *kt = e;
            kt = &e->next;
            continue;
        }
        if (e->stamp)
            cuda_poll_stamp_done(be, e, r);
        else
            cuda_poll_finish(p, e, r);
    }
    return keep;
}

/* One pass over the flag watches; returns what is left.  With stop set
 * (the backend closes) the rest fail rather than wait forever. */
static cuda_watch_t *cuda_watch_pass(cuda_watch_t *list, int stop)
{
    cuda_watch_t *keep = NULL;
    while (list) {
        cuda_watch_t *w = list;
        list = w->next;
        uint64_t v = __atomic_load_n(w->flag, __ATOMIC_ACQUIRE);
        int lost =
            w->abort ? atomic_load_explicit(w->abort, memory_order_acquire) : 0;
        if ((int64_t)(v - w->value) < 0 && !lost && !stop) {
            w->next = keep;
            keep = w;
            continue;
        }
        if ((int64_t)(v - w->value) < 0) {
            if (lost)
                ipcp__track_fail(w->t, (ipcp_status_t)lost,
                                 "the peer was lost while this rank waited "
                                 "for its data");
            else
                ipcp__track_fail(w->t, IPCP_ERR_STATE,
                                 "the CUDA backend closed while a transfer "
                                 "was still waiting for its peer");
        }
        ipcp__track_notify(w->t);
        free(w);
    }
    return keep;
}

/* A notify whose event could not be recorded: t fails, and is notified
 * once the stream has nothing left to run (a failed context's stream
 * answers at once). */
static void cuda_op_unrecorded(ipcp__queue_t *q, ipcp__track_t *t)
{
    CUresult r;
    ipcp__track_fail(t, IPCP_ERR_CUDA,
                     "cannot record a CUDA event in a stream of device %d: "
                     "%s",
                     q->device, ipcp_last_error());
    while ((r = IPCP_CU(cuStreamQuery)(q->stream)) == CUDA_ERROR_NOT_READY)
        ipcp__relax(1);
    ipcp__track_notify(t);
    atomic_fetch_sub_explicit(&q->polled, 1, memory_order_release);
}

/* Ops a look enqueues before it polls the outstanding events again.  A
 * copy costs this thread ~2.3 us in the driver: handed a window of 64
 * copies of 64 KiB at once, it saw the first one end only after it had
 * enqueued all (a median of 190 us after the call, one H100), so
 * transfers with other nodes waited that long for MPI's first message.
 * A build may set it (a large value: every op first, as before). */
#ifndef CUDA_OPS_PER_LOOK
#define CUDA_OPS_PER_LOOK CUDA_RUN_OPS
#endif
/* The longest copy of a run whose notifies share one event: a notify
 * then ends once the (at most 3) copies after it in the run ended too,
 * a few microseconds each at this length, about what an event costs
 * this thread in the driver (~2.7 us).  A build may set 0 (one event a
 * notify, one call a copy). */
#ifndef CUDA_RUN_BYTES
#define CUDA_RUN_BYTES ((size_t)128 << 10)
#endif

static void cuda_op_failed(const cuda_op_t *o, ipcp_status_t st)
{
    if (o->t)
        ipcp__track_fail(o->t, st, "%s", ipcp_last_error());
}

/* Whether two of the n copies overlap where one writes: a batch gives
 * its copies no order, so such copies go one call each. */
static int cuda_copies_overlap(const CUdeviceptr *dst, const CUdeviceptr *src,
                               const size_t *len, int n)
{
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            if (i != j &&
                ((dst[i] < dst[j] + len[j] && dst[j] < dst[i] + len[i]) ||
                 (dst[i] < src[j] + len[j] && src[j] < dst[i] + len[i])))
                return 1;
    return 0;
}

/* The n copies in one cuMemcpyBatchAsync: 0 when that cannot be (no
 * such call, fewer than two, overlapping copies) or the call failed, and
 * then none of them was enqueued by it. */
static int cuda_batch(ipcp__cuda_poller_t *p, ipcp__queue_t *q,
                      CUdeviceptr *dst, CUdeviceptr *src, size_t *len, int n)
{
#if CUDA_VERSION >= 13000
    size_t at = 0;
    CUmemcpyAttributes a;
    if (n < 2 || !p->batch || cuda_copies_overlap(dst, src, len, n) ||
        ipcp__cuda_bind(q->be, q->ctx) != IPCP_OK)
        return 0;
    memset(&a, 0, sizeof(a));
    a.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
    return ipcp__cu_check(
               p->batch(dst, src, len, (size_t)n, &a, &at, 1, q->stream),
               IPCP_LOG_DEBUG,
               "cuMemcpyBatchAsync(%d copies, stream of device %d)", n,
               q->device) == IPCP_OK;
#else
    (void)p, (void)q, (void)dst, (void)src, (void)len, (void)n;
    return 0;
#endif
}

/* The copies among the ops from run up to stop (all of one queue): in
 * one call where there are several and the driver batches, else (or
 * where that call failed) one call each; a copy whose track failed is
 * left out. */
static void cuda_run_copies(ipcp__cuda_poller_t *p, cuda_op_t *run,
                            const cuda_op_t *stop)
{
    ipcp__queue_t *q = run->q;
    CUdeviceptr dst[CUDA_RUN_OPS], src[CUDA_RUN_OPS];
    size_t len[CUDA_RUN_OPS];
    cuda_op_t *of[CUDA_RUN_OPS], *o;
    int n = 0;
    ipcp_status_t st;
    for (o = run; o != stop; o = o->next)
        if (!o->notify && (!o->t || ipcp__track_ok(o->t))) {
            dst[n] = (CUdeviceptr)(uintptr_t)o->dst;
            src[n] = (CUdeviceptr)(uintptr_t)o->src;
            len[n] = o->len;
            of[n++] = o;
        }
    if (!cuda_batch(p, q, dst, src, len, n))
        for (int i = 0; i < n; i++)
            if ((!of[i]->t || ipcp__track_ok(of[i]->t)) &&
                (st = ipcp__cuda_copy_here(q, of[i]->dst, of[i]->src,
                                           of[i]->len)) != IPCP_OK)
                cuda_op_failed(of[i], st);
    for (o = run; o != stop; o = o->next)
        if (!o->notify)
            atomic_fetch_sub_explicit(&q->polled, 1, memory_order_release);
}

static ipcp_status_t cuda_poll_notify_run(ipcp__backend_t *be, CUcontext ctx,
                                          int device, CUstream stream,
                                          atomic_int *count,
                                          ipcp__track_t *const *t, int n);

/* The notifies among the ops from run up to stop (all of one queue): one
 * event after the last, which ends the others too (they take no count of
 * their own, so each op's goes once it is recorded). */
static void cuda_run_notifies(ipcp__backend_t *be, cuda_op_t *run,
                              const cuda_op_t *stop)
{
    ipcp__queue_t *q = run->q;
    ipcp__track_t *t[CUDA_RUN_MAX];
    int n = 0;
    for (const cuda_op_t *o = run; o != stop; o = o->next)
        if (o->notify)
            t[n++] = o->t;
    if (!n)
        return;
    ipcp_status_t st = ipcp__cuda_bind(be, q->ctx);
    if (st == IPCP_OK)
        st = cuda_poll_notify_run(be, q->ctx, q->device, q->stream, &q->polled,
                                  t, n);
    for (int i = 0; i < n; i++)
        if (st != IPCP_OK)
            cuda_op_unrecorded(q, t[i]);
        else
            atomic_fetch_sub_explicit(&q->polled, 1, memory_order_release);
}

/* The run of ops that starts at o: o alone, or where o is a short copy
 * or a notify, the ops after it of the same queue while they are too,
 * up to CUDA_RUN_MAX notifies and CUDA_RUN_OPS ops in all. */
static cuda_op_t *cuda_run_end(cuda_op_t *o)
{
    int notes = 0, n = CUDA_RUN_OPS;
    cuda_op_t *e = o;
    while (CUDA_RUN_BYTES && e && n-- > 0 && e->q == o->q &&
           notes < CUDA_RUN_MAX && (e->notify || e->len <= CUDA_RUN_BYTES)) {
        notes += e->notify;
        e = e->next;
    }
    return e == o ? o->next : e;
}

/* Enqueues the ops a look took (cuda_ops_take), in order.  A run of one queue's
 * short copies and notifies goes as its copies, in one call where the driver
 * batches, then one event that ends its notifies (a copy's failure fails its
 * track); other ops go one by one, a notify as an event of its own. */
static void cuda_run_ops(ipcp__cuda_poller_t *p, ipcp__backend_t *be,
                         cuda_op_t *ops)
{
    cuda_op_t *o = ops, *last = NULL;
    while (o) {
        cuda_op_t *stop = cuda_run_end(o);
        cuda_run_copies(p, o, stop);
        cuda_run_notifies(be, o, stop);
        for (; o != stop; o = o->next)
            last = o;
    }
    pthread_mutex_lock(&p->lock);
    last->next = p->op_free;
    p->op_free = ops;
    pthread_mutex_unlock(&p->lock);
}

/* Takes up to CUDA_OPS_PER_LOOK of the ops handed over, in order, off
 * p->ops (called with p->lock held); the rest wait for the next look. */
static cuda_op_t *cuda_ops_take(ipcp__cuda_poller_t *p)
{
    cuda_op_t *ops = p->ops, **t = &ops;
    for (int n = 0; *t && n < CUDA_OPS_PER_LOOK; n++)
        t = &(*t)->next;
    p->ops = *t;
    *t = NULL;
    if (!p->ops)
        p->ops_tail = &p->ops;
    return ops;
}

void ipcp__cuda_poll_settle(ipcp__queue_t *q)
{
    struct timespec ts = {0, 20 * 1000};
    while (atomic_load_explicit(&q->polled, memory_order_acquire) > 0)
        nanosleep(&ts, NULL);
}

ipcp_status_t ipcp__cuda_poll_op(ipcp__queue_t *q, int notify, void *dst,
                                 const void *src, size_t len, ipcp__track_t *t)
{
    ipcp__cuda_poller_t *p = q->be->poller;
    pthread_mutex_lock(&p->lock);
    cuda_op_t *o = p->op_free;
    if (o)
        p->op_free = o->next;
    pthread_mutex_unlock(&p->lock);
    if (!o && !(o = malloc(sizeof(*o)))) {
        /* The caller takes the failure as the op's end (ipcp__rx_copy
         * destroys the track of a copy handed over just before): nothing
         * of q's may stay with the poller then. */
        ipcp__cuda_poll_settle(q);
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_CUDA, IPCP_ERR_NOMEM,
                          "no memory for a copy of device %d", q->device);
    }
    o->next = NULL;
    o->q = q;
    o->notify = notify;
    o->dst = dst;
    o->src = src;
    o->len = len;
    o->t = t;
    atomic_fetch_add_explicit(&q->polled, 1, memory_order_relaxed);
    pthread_mutex_lock(&p->lock);
    *p->ops_tail = o;
    p->ops_tail = &o->next;
    cuda_poll_wake(p);
    pthread_mutex_unlock(&p->lock);
    return IPCP_OK;
}

/* Polls, without the lock, until something is handed over after the
 * seen-th or spin_ns passed.  Asleep, the thread costs the next handover
 * a futex wake-up and it its own wake-up (tens of microseconds on a
 * virtual machine), which a copy to stage waits for. */
static void cuda_poll_spin(ipcp__cuda_poller_t *p, uint64_t seen,
                           uint64_t spin_ns)
{
    uint64_t t0 = ipcp__now_ns();
    for (unsigned i = 1;
         atomic_load_explicit(&p->pushed, memory_order_relaxed) == seen; i++) {
        ipcp__cpu_pause();
        if (!(i % 32) && ipcp__now_ns() - t0 >= spin_ns)
            return;
    }
}

static void *cuda_poll_main(void *arg)
{
    ipcp__backend_t *be = arg;
    ipcp__cuda_poller_t *p = be->poller;
    cuda_pending_t *out = NULL, **ot = &out;
    cuda_watch_t *wl = NULL;
    /* IPCPIPE_SPIN_US after the last work, where a CPU is to spare. */
    uint64_t spin_ns = ipcp__one_cpu() ? 0 : (uint64_t)be->cfg.spin_us * 1000;
    int spun = 1;

    pthread_mutex_lock(&p->lock);
    for (;;) {
        while (!p->head && !p->ops && !p->watches && !out && !wl && !p->stop) {
            if (!spun && spin_ns) {
                uint64_t seen =
                    atomic_load_explicit(&p->pushed, memory_order_relaxed);
                pthread_mutex_unlock(&p->lock);
                cuda_poll_spin(p, seen, spin_ns);
                spun = 1;
                pthread_mutex_lock(&p->lock);
                continue;
            }
            pthread_cond_wait(&p->cond, &p->lock);
        }
        spun = 0;
        if (p->head) { /* take the new ones, keeping recording order */
            *ot = p->head;
            p->head = NULL;
            p->tail = &p->head;
        }
        cuda_op_t *ops = cuda_ops_take(p);
        int more = p->ops != NULL;
        while (p->watches) { /* order does not matter among watches */
            cuda_watch_t *w = p->watches;
            p->watches = w->next;
            w->next = wl;
            wl = w;
        }
        int stop = p->stop;
        if (!out && !wl && !ops && stop)
            break;
        pthread_mutex_unlock(&p->lock);
        if (ops)
            cuda_run_ops(p, be, ops);
        out = cuda_poll_pass(p, be, out);
        for (ot = &out; *ot; ot = &(*ot)->next)
            ;
        /* Events all done first: a watch left at stop has no writer. */
        wl = cuda_watch_pass(wl, stop && !out);
        if ((out || wl) && !more)
            ipcp__relax(1); /* the device's work is what it waits for */
        pthread_mutex_lock(&p->lock);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

ipcp_status_t ipcp__cuda_flag_watch(ipcp__backend_t *be, uint64_t *flag,
                                    uint64_t value, const atomic_int *abort,
                                    ipcp__track_t *t)
{
    ipcp__cuda_poller_t *p = be->poller;
    if (!p)
        return ipcp__fail(IPCP_LOG_DEBUG, IPCP_SUB_CUDA, IPCP_ERR_UNSUPPORTED,
                          "flag watches need IPCPIPE_CUDA_NOTIFY=event");
    cuda_watch_t *w = malloc(sizeof(*w));
    if (!w)
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_CUDA, IPCP_ERR_NOMEM,
                          "no memory for a flag watch");
    w->flag = flag;
    w->value = value;
    w->abort = abort;
    w->t = t;
    pthread_mutex_lock(&p->lock);
    w->next = p->watches;
    p->watches = w;
    cuda_poll_wake(p);
    pthread_mutex_unlock(&p->lock);
    return IPCP_OK;
}

ipcp_status_t ipcp__cuda_poller_start(ipcp__backend_t *be)
{
    ipcp__cuda_poller_t *p = calloc(1, sizeof(*p));
    if (!p)
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_CUDA, IPCP_ERR_NOMEM,
                          "cannot allocate the CUDA event poller");
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->cond, NULL);
    p->tail = &p->head;
    p->ops_tail = &p->ops;
#if CUDA_VERSION >= 13000
    if (CUDA_RUN_BYTES && be->driver_version >= 13000)
        p->batch = (cuda_batch_fn)ipcp__cu_proc("cuMemcpyBatchAsync", 13000);
#endif
    be->poller = p;
    int rc = pthread_create(&p->thread, NULL, cuda_poll_main, be);
    if (rc != 0) {
        be->poller = NULL;
        pthread_cond_destroy(&p->cond);
        pthread_mutex_destroy(&p->lock);
        free(p);
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_CUDA, IPCP_ERR_SYSTEM,
                          "cannot start the CUDA event poller: error %d", rc);
    }
    pthread_setname_np(p->thread, "ipcp-cuda-poll");
    return IPCP_OK;
}

/* After every queue is destroyed: the outstanding events have all
 * completed, so the thread drains them and ends. */
void ipcp__cuda_poller_stop(ipcp__backend_t *be)
{
    ipcp__cuda_poller_t *p = be->poller;
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    p->stop = 1;
    cuda_poll_wake(p);
    pthread_mutex_unlock(&p->lock);
    pthread_join(p->thread, NULL);
    while (p->free) {
        cuda_pending_t *e = p->free;
        p->free = e->next;
        if (e->ev) {
            ipcp__cuda_bind(be, e->ctx);
            IPCP_CU(cuEventDestroy)(e->ev);
        }
        free(e);
    }
    while (p->op_free) {
        cuda_op_t *o = p->op_free;
        p->op_free = o->next;
        free(o);
    }
    pthread_cond_destroy(&p->cond);
    pthread_mutex_destroy(&p->lock);
    free(p);
    be->poller = NULL;
}

/* A spare record whose event belongs to ctx, or a new one. */
static cuda_pending_t *cuda_poll_get(ipcp__cuda_poller_t *p, CUcontext ctx,
                                     int device)
{
    cuda_pending_t *e, **pp;
    pthread_mutex_lock(&p->lock);
    for (pp = &p->free; (e = *pp); pp = &e->next)
        if (e->ctx == ctx && e->ev)
            break;
    if (e)
        *pp = e->next;
    pthread_mutex_unlock(&p->lock);
    if (e)
        return e;
    e = calloc(1, sizeof(*e));
    if (!e)
        return NULL;
    /* Timing off: such events are cheaper to record and to query. */
    if (IPCP_CU(cuEventCreate)(&e->ev, CU_EVENT_DISABLE_TIMING) !=
        CUDA_SUCCESS) {
        free(e);
        return NULL;
    }
    e->ctx = ctx;
    e->device = device;
    return e;
}

/* Hands a recorded event to the poller thread; *count (its queue's) is
 * raised now and lowered once the poller is done with it. */
static void cuda_poll_push(ipcp__cuda_poller_t *p, cuda_pending_t *e,
                           atomic_int *count)
{
    e->count = count;
    e->next = NULL;
    atomic_fetch_add_explicit(count, 1, memory_order_relaxed);
    pthread_mutex_lock(&p->lock);
    *p->tail = e;
    p->tail = &e->next;
    cuda_poll_wake(p);
    pthread_mutex_unlock(&p->lock);
}

/* One event in stream that notifies t[0..n) in order once it completes
 * (n up to CUDA_RUN_MAX); *count is raised once. */
static ipcp_status_t cuda_poll_notify_run(ipcp__backend_t *be, CUcontext ctx,
                                          int device, CUstream stream,
                                          atomic_int *count,
                                          ipcp__track_t *const *t, int n)
{
    ipcp__cuda_poller_t *p = be->poller;
    cuda_pending_t *e = cuda_poll_get(p, ctx, device);
    if (!e)
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_CUDA, IPCP_ERR_CUDA,
                          "cannot create a CUDA event for device %d", device);
    ipcp_status_t st =
        ipcp__cu_check(IPCP_CU(cuEventRecord)(e->ev, stream), IPCP_LOG_ERROR,
                       "cuEventRecord(stream of device %d)", device);
    if (st != IPCP_OK) {
        IPCP_CU(cuEventDestroy)(e->ev);
        free(e);
        return st;
    }
    e->t = t[n - 1];
    e->nalso = n - 1;
    for (int i = 0; i < n - 1; i++)
        e->also[i] = t[i];
    e->stamp = NULL;
    cuda_poll_push(p, e, count);
    return IPCP_OK;
}

ipcp_status_t ipcp__cuda_poll_notify(ipcp__backend_t *be, CUcontext ctx,
                                     int device, CUstream stream,
                                     atomic_int *count, ipcp__track_t *t)
{
    return cuda_poll_notify_run(be, ctx, device, stream, count, &t, 1);
}

/* The anchor of a device: an event on its legacy stream, waited for once,
 * and the host time right after (a few microseconds late at most). */
static ipcp_status_t cuda_anchor(ipcp__backend_t *be, int device)
{
    ipcp__cuda_dev_t *d = &be->dev[device];
    if (d->anchor)
        return IPCP_OK;
    CUevent ev;
    ipcp_status_t st = ipcp__cu_check(IPCP_CU(cuEventCreate)(&ev, 0),
                                      IPCP_LOG_WARN, "cuEventCreate(timing)");
    if (st != IPCP_OK)
        return st;
    st = ipcp__cu_check(IPCP_CU(cuEventRecord)(ev, NULL), IPCP_LOG_WARN,
                        "cuEventRecord(anchor)");
    if (st == IPCP_OK)
        st = ipcp__cu_check(IPCP_CU(cuEventSynchronize)(ev), IPCP_LOG_WARN,
                            "cuEventSynchronize(anchor)");
    if (st != IPCP_OK) {
        IPCP_CU(cuEventDestroy)(ev);
        return st;
    }
    d->anchor_ns = ipcp__now_ns();
    d->anchor = ev;
    return IPCP_OK;
}

ipcp_status_t ipcp__cuda_poll_stamp(ipcp__backend_t *be, CUcontext ctx,
                                    int device, CUstream stream,
                                    atomic_int *count, uint64_t *ns)
{
    ipcp__cuda_poller_t *p = be->poller;
    ipcp_status_t st;
    if (!p)
        return ipcp__fail(IPCP_LOG_INFO, IPCP_SUB_CUDA, IPCP_ERR_UNSUPPORTED,
                          "stamps need IPCPIPE_CUDA_NOTIFY=event");
    if ((st = cuda_anchor(be, device)) != IPCP_OK)
        return st;
    cuda_pending_t *e = calloc(1, sizeof(*e));
    if (!e)
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_CUDA, IPCP_ERR_NOMEM,
                          "no memory for a stamp");
    st = ipcp__cu_check(IPCP_CU(cuEventCreate)(&e->ev, 0), IPCP_LOG_ERROR,
                        "cuEventCreate(timing)");
    if (st == IPCP_OK)
        st = ipcp__cu_check(IPCP_CU(cuEventRecord)(e->ev, stream),
                            IPCP_LOG_ERROR, "cuEventRecord(stamp)");
    if (st != IPCP_OK) {
        if (e->ev)
            IPCP_CU(cuEventDestroy)(e->ev);
        free(e);
        return st;
    }
    e->ctx = ctx;
    e->device = device;
    e->stamp = ns;
    cuda_poll_push(p, e, count);
    return IPCP_OK;
}
