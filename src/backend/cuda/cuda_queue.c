/* Queues are CUDA streams.  Chunks are ordered between processes by 64-bit
 * stream memory operations on flags in registered shared host memory, with
 * no CPU in the loop: a staged pipeline so driven moved 46.5-53 GB/s
 * (FACTS.md).
 *
 * Tracks.  An operation whose track has already failed when it is
 * enqueued is not enqueued; one that fails later cannot be skipped, since
 * the device runs what it was given.  A copy enqueued before a failure
 * therefore still runs (into memory that stays mapped until the engine's
 * notify has fired), and a flag write enqueued before it still lands. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/cuda/cuda_backend.h"
#include "common/cpu.h"
#include "common/status.h"
#include "common/util.h"

/* A destroy that waits longer than this says why, once, and goes on
 * waiting: a stream that never drains waits on a flag nobody will write. */
#define CUDA_DRAIN_WARN_S  10
#define CUDA_DRAIN_POLL_NS (100 * 1000)

static inline int cuda_skip(ipcp__track_t *t)
{
    return t && !ipcp__track_ok(t);
}

/* An offload queue's operations go through the poller in order: any other
 * enqueued here would pass copies still waiting there. */
static ipcp_status_t cuda_offload_only(const ipcp__queue_t *q)
{
    if (!q->offload)
        return IPCP_OK;
    return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_CUDA, IPCP_ERR_STATE,
                      "a queue of device %d whose copies the event thread "
                      "enqueues takes copies and notifies only",
                      q->device);
}

/* memops: the queue will take flag operations (a queue_user one takes
 * copies and notifies only, which every device runs). */
static ipcp_status_t cuda_queue_make(ipcp__backend_t *be, int device,
                                     int memops, ipcp__queue_t **out)
{
    ipcp__cuda_scope_t sc;
    ipcp_status_t st;

    if (device < 0 || device >= be->ndev)
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_CUDA, IPCP_ERR_INVALID,
                          "no CUDA queue for device %d (%d visible)", device,
                          be->ndev);
    if (memops && !be->dev[device].memops)
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_CUDA, IPCP_ERR_UNSUPPORTED,
                          "CUDA device %d cannot run 64-bit stream memory "
                          "operations (CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_"
                          "STREAM_MEM_OPS is 0), which CUDA queues need to "
                          "order chunks",
                          device);
    ipcp__queue_t *q = calloc(1, sizeof(*q));
    if (!q)
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_CUDA, IPCP_ERR_NOMEM,
                          "cannot allocate a CUDA queue");
    q->be = be;
    q->device = device;
    if ((st = ipcp__cuda_ctx(be, device, IPCP_LOG_ERROR, &q->ctx)) != IPCP_OK)
        goto free_queue;
    if ((st = ipcp__cuda_enter(be, device, IPCP_LOG_ERROR, &sc)) != IPCP_OK)
        goto free_queue;
    /* Non-blocking: the legacy default stream, which a user's code may be
     * using, must not serialize with our copies. */
    st = ipcp__cu_check(
        IPCP_CU(cuStreamCreate)(&q->stream, CU_STREAM_NON_BLOCKING),
        IPCP_LOG_ERROR, "cuStreamCreate(device %d)", device);
    ipcp__cuda_leave(&sc);
    if (st != IPCP_OK)
        goto free_queue;
    *out = q;
    return IPCP_OK;
free_queue:
    free(q);
    return st;
}

ipcp_status_t ipcp__cuda_queue_create(ipcp__backend_t *be, int device,
                                      ipcp__queue_t **out)
{
    return cuda_queue_make(be, device, 1, out);
}

/* Waits for the stream by polling, so that a stream stuck on a flag is
 * reported instead of hanging in silence. */
static void cuda_queue_drain(ipcp__queue_t *q)
{
    struct timespec ts = {0, CUDA_DRAIN_POLL_NS};
    double waited = 0;
    int warned = 0;
    CUresult r;
    while ((r = IPCP_CU(cuStreamQuery)(q->stream)) == CUDA_ERROR_NOT_READY) {
        nanosleep(&ts, NULL);
        waited += CUDA_DRAIN_POLL_NS * 1e-9;
        if (!warned && waited > CUDA_DRAIN_WARN_S) {
            IPCP_WARN(IPCP_SUB_CUDA,
                      "a stream of device %d still has work "
                      "after %d s; it is waiting for a flag (a peer that "
                      "stopped without being noticed?)",
                      q->device, CUDA_DRAIN_WARN_S);
            warned = 1;
        }
    }
    ipcp__cu_check(r, IPCP_LOG_WARN,
                   "cuStreamQuery(stream of device %d) "
                   "while destroying it",
                   q->device);
}

ipcp_status_t ipcp__cuda_stamp(ipcp__queue_t *q, uint64_t *ns)
{
    ipcp_status_t st = cuda_offload_only(q);
    if (st == IPCP_OK)
        st = ipcp__cuda_bind(q->be, q->ctx);
    if (st != IPCP_OK)
        return st;
    return ipcp__cuda_poll_stamp(q->be, q->ctx, q->device, q->stream,
                                 &q->polled, ns);
}

/* The legacy stream's query fails (CUDA_ERROR_STREAM_CAPTURE_IMPLICIT)
 * while another stream of the context captures in the global mode; that
 * is refused the same way, with the driver's reason. */
ipcp_status_t ipcp__cuda_stream_check(ipcp__backend_t *be, int device,
                                      void *native)
{
    ipcp__cuda_scope_t sc;
    CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
    ipcp_status_t st;
    if ((st = ipcp__cuda_enter(be, device, IPCP_LOG_ERROR, &sc)) != IPCP_OK)
        return st;
    CUresult r = IPCP_CU(cuStreamIsCapturing)((CUstream)native, &cs);
    ipcp__cuda_leave(&sc);
    if (r != CUDA_SUCCESS) {
        char err[160];
        return ipcp__fail(IPCP_LOG_INFO, IPCP_SUB_API, IPCP_ERR_UNSUPPORTED,
                          "stream %p of device %d cannot take a "
                          "stream-ordered transfer now (%s); if a graph is "
                          "being captured, enqueue it outside the capture",
                          native, device,
                          ipcp__cu_strerror(r, err, sizeof(err)));
    }
    if (cs != CU_STREAM_CAPTURE_STATUS_NONE)
        return ipcp__fail(IPCP_LOG_INFO, IPCP_SUB_API, IPCP_ERR_UNSUPPORTED,
                          "stream %p of device %d is capturing a CUDA graph "
                          "(%s): a stream-ordered transfer is one message "
                          "and cannot be captured; enqueue it outside the "
                          "capture",
                          native, device,
                          cs == CU_STREAM_CAPTURE_STATUS_ACTIVE
                              ? "capture active"
                              : "capture invalidated");
    return IPCP_OK;
}

ipcp_status_t ipcp__cuda_queue_wrap(ipcp__backend_t *be, int device,
                                    void *native, ipcp__queue_t **out)
{
    ipcp_status_t st;
    if (device < 0 || device >= be->ndev)
        return ipcp__fail(IPCP_LOG_INFO, IPCP_SUB_CUDA, IPCP_ERR_INVALID,
                          "no CUDA device %d (%d visible)", device, be->ndev);
    ipcp__queue_t *q = calloc(1, sizeof(*q));
    if (!q)
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_CUDA, IPCP_ERR_NOMEM,
                          "cannot allocate a CUDA queue");
    if ((st = ipcp__cuda_ctx(be, device, IPCP_LOG_ERROR, &q->ctx)) != IPCP_OK) {
        free(q);
        return st;
    }
    q->be = be;
    q->device = device;
    q->stream = (CUstream)native;
    q->wrapped = 1;
    *out = q;
    return IPCP_OK;
}

/* An event recorded in src and waited for by dst: dst goes on once src's
 * work so far is done, and neither waits on the CPU.  One event per source
 * queue serves every join: a wait takes the record made before it, so the
 * next record does not move it (a driven transfer joins once per staged
 * chunk, and creating and destroying an event each time cost two more
 * driver calls).  The queues may be of two devices (an event of one may be
 * waited for by another's stream); each call is made in its stream's
 * context. */
ipcp_status_t ipcp__cuda_join(ipcp__queue_t *dst, ipcp__queue_t *src)
{
    ipcp_status_t st = cuda_offload_only(src);
    if (st == IPCP_OK)
        st = cuda_offload_only(dst);
    if (st == IPCP_OK)
        st = ipcp__cuda_bind(src->be, src->ctx);
    if (st != IPCP_OK)
        return st;
    if (!src->join_ev) {
        st = ipcp__cu_check(
            IPCP_CU(cuEventCreate)(&src->join_ev, CU_EVENT_DISABLE_TIMING),
            IPCP_LOG_ERROR, "cuEventCreate(device %d)", src->device);
        if (st != IPCP_OK) {
            src->join_ev = NULL;
            return st;
        }
    }
    st = ipcp__cu_check(IPCP_CU(cuEventRecord)(src->join_ev, src->stream),
                        IPCP_LOG_ERROR, "cuEventRecord(stream of device %d)",
                        src->device);
    if (st == IPCP_OK && dst->ctx != src->ctx && !dst->wrapped)
        st = ipcp__cuda_bind(dst->be, dst->ctx);
    if (st == IPCP_OK)
        st = ipcp__cu_check(
            IPCP_CU(cuStreamWaitEvent)(dst->stream, src->join_ev, 0),
            IPCP_LOG_ERROR, "cuStreamWaitEvent(stream of device %d)",
            dst->device);
    return st;
}

void ipcp__cuda_queue_destroy(ipcp__queue_t *q)
{
    ipcp__cuda_scope_t sc;
    if (!q)
        return;
    if (q->join_ev) /* freed by the driver once no wait needs it */
        IPCP_CU(cuEventDestroy)(q->join_ev);
    if (q->wrapped) {
        free(q);
        return;
    }
    /* What the poller has still to enqueue, first: then the stream holds
     * all of it. */
    if (q->offload)
        ipcp__cuda_poll_settle(q);
    if (ipcp__cuda_enter(q->be, q->device, IPCP_LOG_WARN, &sc) == IPCP_OK) {
        cuda_queue_drain(q);
        /* The stream is idle, so every event in it has completed; wait for
         * the poller to have delivered them (the engine counts on every
         * notification having happened once destroy returns). */
        ipcp__cuda_poll_settle(q);
        ipcp__cu_check(IPCP_CU(cuStreamDestroy)(q->stream), IPCP_LOG_WARN,
                       "cuStreamDestroy(stream of device %d)", q->device);
        ipcp__cuda_leave(&sc);
    }
    free(q);
}

/* Operations on a user's stream, and on our queues that the user's
 * threads use (queue_user), run on the user's thread: its current context
 * is pushed and popped around them, never replaced. */
static ipcp_status_t cuda_enter_q(ipcp__queue_t *q, ipcp__cuda_scope_t *sc)
{
    sc->pushed = 0;
    if (q->offload)
        return cuda_offload_only(q);
    if (q->wrapped || q->user)
        return ipcp__cuda_enter(q->be, q->device, IPCP_LOG_ERROR, sc);
    return ipcp__cuda_bind(q->be, q->ctx);
}

/* A copy costs the thread that enqueues it 2.3 us of driver time (64 KiB,
 * H200), and a thread in the driver does not move MPI on: 64 KiB x64
 * between two nodes on one H200, MPI with a stall that long on each side
 * per message ran at 0.71x its rate (5 us: 0.52x).  So where the process
 * has a CPU to spare the poller thread, which waits for the copies
 * anyway, makes the calls. */
ipcp_status_t ipcp__cuda_queue_user(ipcp__backend_t *be, int device,
                                    ipcp__queue_t **q)
{
    ipcp_status_t st = cuda_queue_make(be, device, 0, q);
    if (st != IPCP_OK)
        return st;
    (*q)->user = 1;
    int mode = be->cfg.remote_copies;
    (*q)->offload =
        be->poller && (mode == IPCP_COPIES_THREAD ||
                       (mode == IPCP_COPIES_AUTO && !ipcp__one_cpu()));
    return IPCP_OK;
}

static ipcp_status_t cuda_copy_in(ipcp__queue_t *q, void *dst, const void *src,
                                  size_t len)
{
    return ipcp__cu_check(IPCP_CU(cuMemcpyAsync)((CUdeviceptr)(uintptr_t)dst,
                                                 (CUdeviceptr)(uintptr_t)src,
                                                 len, q->stream),
                          IPCP_LOG_ERROR,
                          "cuMemcpyAsync(dst %p, src %p, %zu bytes, stream of "
                          "device %d)",
                          dst, src, len, q->device);
}

ipcp_status_t ipcp__cuda_copy_here(ipcp__queue_t *q, void *dst, const void *src,
                                   size_t len)
{
    ipcp_status_t st = ipcp__cuda_bind(q->be, q->ctx);
    return st == IPCP_OK ? cuda_copy_in(q, dst, src, len) : st;
}

/* With unified addressing one call serves device to device (peer
 * included), device to registered host and host to device. */
ipcp_status_t ipcp__cuda_copy(ipcp__queue_t *q, void *dst, const void *src,
                              size_t len, ipcp__track_t *t)
{
    ipcp__cuda_scope_t sc;
    if (len == 0 || cuda_skip(t))
        return IPCP_OK;
    if (q->offload)
        return ipcp__cuda_poll_op(q, 0, dst, src, len, t);
    ipcp_status_t st = cuda_enter_q(q, &sc);
    if (st != IPCP_OK)
        return st;
    st = cuda_copy_in(q, dst, src, len);
    ipcp__cuda_leave(&sc);
    return st;
}

/* The default flags put a memory fence before the write (like
 * __threadfence_system, scoped to the stream), so the data of earlier
 * copies is visible to whoever sees the flag. */
/* A wait is often followed by device work reading what a peer GPU wrote
 * into our memory (a direct transfer): where the device can, the wait also
 * flushes remote writes, so that they are visible to that work. */
static unsigned cuda_wait_flags(const ipcp__queue_t *q, int flush)
{
    unsigned f = CU_STREAM_WAIT_VALUE_GEQ;
    if (flush && q->be->dev[q->device].flush)
        f |= CU_STREAM_WAIT_VALUE_FLUSH;
    return f;
}

/* One stream memory operation on a flag: a write of value, or (wait) a
 * wait for flag >= value, flushing remote writes with flush. */
static ipcp_status_t cuda_flag_op(ipcp__queue_t *q, uint64_t *flag,
                                  uint64_t value, ipcp__track_t *t, int wait,
                                  int flush)
{
    ipcp__cuda_scope_t sc;
    if (cuda_skip(t))
        return IPCP_OK;
    ipcp_status_t st = cuda_enter_q(q, &sc);
    if (st != IPCP_OK)
        return st;
    CUdeviceptr a = ipcp__cuda_dev_addr(flag);
    CUresult r = wait ? IPCP_CU(cuStreamWaitValue64)(q->stream, a, value,
                                                     cuda_wait_flags(q, flush))
                      : IPCP_CU(cuStreamWriteValue64)(
                            q->stream, a, value, CU_STREAM_WRITE_VALUE_DEFAULT);
    st = ipcp__cu_check(
        r, IPCP_LOG_ERROR, "%s(flag %p %s %llu, stream of device %d)",
        wait ? "cuStreamWaitValue64" : "cuStreamWriteValue64", (void *)flag,
        wait ? ">=" : ":=", (unsigned long long)value, q->device);
    ipcp__cuda_leave(&sc);
    return st;
}

ipcp_status_t ipcp__cuda_flag_write(ipcp__queue_t *q, uint64_t *flag,
                                    uint64_t value, ipcp__track_t *t)
{
    return cuda_flag_op(q, flag, value, t, 0, 0);
}

/* GEQ is the cyclic comparison of backend.h.  abort is not looked at: a
 * device cannot see it, and the engine releases such waits by moving the
 * flags ahead. */
ipcp_status_t ipcp__cuda_flag_wait(ipcp__queue_t *q, uint64_t *flag,
                                   uint64_t value, const atomic_int *abort,
                                   ipcp__track_t *t)
{
    (void)abort;
    return cuda_flag_op(q, flag, value, t, 1, 1);
}

ipcp_status_t ipcp__cuda_flag_wait_ring(ipcp__queue_t *q, uint64_t *flag,
                                        uint64_t value, const atomic_int *abort,
                                        ipcp__track_t *t)
{
    (void)abort;
    return cuda_flag_op(q, flag, value, t, 1, 0);
}

/* One batch of two stream memory operations: between 16 MiB pinned
 * copies, a write and a wait cost 4.9-6.8 us more than the copies alone,
 * the same pair as one batch 3.1-3.6 us (H200, one process).  The batch's
 * operations run in their order; the write keeps the default fence. */
ipcp_status_t ipcp__cuda_flag_write_wait(ipcp__queue_t *q, uint64_t *wflag,
                                         uint64_t wvalue, uint64_t *flag,
                                         uint64_t value,
                                         const atomic_int *abort)
{
    ipcp__cuda_scope_t sc;
    CUstreamBatchMemOpParams p[2];
    (void)abort;
    ipcp_status_t st = cuda_enter_q(q, &sc);
    if (st != IPCP_OK)
        return st;
    memset(p, 0, sizeof(p));
    p[0].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
    p[0].writeValue.address = ipcp__cuda_dev_addr(wflag);
    p[0].writeValue.value64 = wvalue;
    p[0].writeValue.flags = CU_STREAM_WRITE_VALUE_DEFAULT;
    p[1].waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_64;
    p[1].waitValue.address = ipcp__cuda_dev_addr(flag);
    p[1].waitValue.value64 = value;
    p[1].waitValue.flags = cuda_wait_flags(q, 0);
    st = ipcp__cu_check(IPCP_CU(cuStreamBatchMemOp)(q->stream, 2, p, 0),
                        IPCP_LOG_ERROR,
                        "cuStreamBatchMemOp(flag %p := %llu, flag %p >= %llu, "
                        "stream of device %d)",
                        (void *)wflag, (unsigned long long)wvalue, (void *)flag,
                        (unsigned long long)value, q->device);
    ipcp__cuda_leave(&sc);
    return st;
}

/* Runs on a driver thread and must not call CUDA.  A failed stream passes
 * its error here, which fails the track before it completes. */
static void CUDA_CB cuda_notify_cb(CUstream stream, CUresult status, void *arg)
{
    ipcp__track_t *t = arg;
    (void)stream;
    if (status != CUDA_SUCCESS) {
        const char *name = ipcp__cu_errname_nocall(status);
        ipcp__track_fail(t, IPCP_ERR_CUDA,
                         "an operation on a CUDA stream failed: %s (CUresult "
                         "%d); the device's context cannot be used again in "
                         "this process",
                         name ? name : "unknown error", (int)status);
    }
    ipcp__track_notify(t);
}

/* cuStreamAddCallback rather than cuLaunchHostFunc: a host function is not
 * called at all once the context has failed, which would leave the
 * engine's request waiting forever; a callback is called with the error. */
ipcp_status_t ipcp__cuda_notify(ipcp__queue_t *q, ipcp__track_t *t)
{
    ipcp__cuda_scope_t sc;
    if (q->offload)
        return ipcp__cuda_poll_op(q, 1, NULL, NULL, 0, t);
    ipcp_status_t st = cuda_enter_q(q, &sc);
    if (st != IPCP_OK)
        return st;
    if (q->be->poller)
        st = ipcp__cuda_poll_notify(q->be, q->ctx, q->device, q->stream,
                                    &q->polled, t);
    else
        st = ipcp__cu_check(
            IPCP_CU(cuStreamAddCallback)(q->stream, cuda_notify_cb, t, 0),
            IPCP_LOG_ERROR, "cuStreamAddCallback(stream of device %d)",
            q->device);
    ipcp__cuda_leave(&sc);
    return st;
}
