/* The public API's transfers: two-sided posting (the callers' own way for
 * small host messages, requests complete when posted, requests), and the
 * waits and tests of requests. */
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "common/cpu.h"
#include "common/time.h"
#include "engine/dev.h"
#include "engine/mem.h"
#include "engine/remote_xfer.h"

/* ---- Waiting ------------------------------------------------------------- */

/* Whether a caller waiting for req reads its peer's inbox as a watched
 * receive's caller does (ipcp__mbox_wait), beyond the receives it posted
 * itself: a send whose end comes in a message (the receiver's CTS or its
 * notice that it copied), in a process where the caller takes the turn
 * itself.  Counted among the inbox's waiters, it spares the peer a wake-up
 * of our thread per message (an eventfd write on the receiver's way, and
 * on one CPU a thread that competes with us): ranks bound to one CPU each
 * on a 2-CPU VM, 64 KiB half round trip 13.3 -> 11.3 us. */
static int ipcp__await_reads(ipcp_comm_t *comm, const ipcp_request_t *req)
{
    return req->type == IPCP_REQ_SEND &&
           __atomic_load_n(&comm->peers[req->peer].in_on, __ATOMIC_ACQUIRE) &&
           ipcp__comm_can_drive(comm);
}

/* Until req is done, or until `until` (ipcp__now_ns's clock; 0: no
 * limit); whether it is done. */
static int ipcp__await_here(ipcp_request_t *req, uint64_t until_ns)
{
    ipcp_comm_t *comm = req->comm;
    if (atomic_load_explicit(&req->done, memory_order_acquire))
        return 1;
    /* A short spin first: a transfer that is about to finish costs less
     * than a sleep and a wake-up.  While device transfers are in flight
     * (they end within milliseconds), or a device send's receiver may be
     * copying it, the spin goes on, up to a bound, whatever the request:
     * the progress thread that completes it polls then too. */
    uint64_t spin_ns = (uint64_t)comm->cfg->spin_us * 1000;
    /* A receive the caller posted itself: it reads the peer's inbox while
     * it spins (engine/mbox.c), its spin_ns all.  No clock read first: a
     * small message's answer often comes within the first looks, and a
     * read cost 17-28 ns on 2-CPU VMs (two of them per receive, with
     * mbox_wait's own). */
    if ((req->watch || ipcp__await_reads(comm, req)) && spin_ns) {
        ipcp__mbox_wait(comm, req, spin_ns);
        spin_ns = 0;
    }
    if (atomic_load_explicit(&req->done, memory_order_acquire))
        return 1;
    uint64_t t0 = ipcp__now_ns(), now = t0, until = t0 + spin_ns;
    if (until_ns && until > until_ns)
        until = until_ns;
    /* On one CPU no longer than spin_us: the threads that complete a
     * device transfer need that CPU (common/cpu.h). */
    uint64_t dev_ns = ipcp__one_cpu() ? 0 : IPCP_DEV_SPIN_NS;
    /* It moves the transfer on itself meanwhile where it may: no hand-off
     * to a thread that must first be scheduled (ipcp__comm_drive). */
    while (!atomic_load_explicit(&req->done, memory_order_acquire) &&
           (!until_ns || now < until_ns) &&
           (now < until || (now - t0 < dev_ns &&
                            (atomic_load_explicit(&comm->dev_inflight,
                                                  memory_order_relaxed) > 0 ||
                             ipcp__awaiting(comm, now))))) {
        if (!ipcp__comm_drive(comm))
            sched_yield();
        now = ipcp__now_ns();
    }
    ipcp__comm_undrive(comm);
    if (req->watch)
        ipcp__mbox_unwatch(comm, req);
    return ipcp__req_sleep(req, until_ns);
}

/* ipcp__await_here; where the job reaches other nodes and a transfer
 * with them runs, in slices of 20 us with a look at those between: they
 * move only in their process's calls, and the peer this request waits
 * for may be waiting for one of them (MPI's waits progress everything
 * too). */
static int ipcp__await(ipcp_request_t *req, uint64_t until_ns)
{
    if (!req->comm->remote || !ipcp__remote_busy())
        return ipcp__await_here(req, until_ns);
    for (;;) {
        uint64_t slice = ipcp__now_ns() + 20000;
        if (until_ns && until_ns < slice)
            slice = until_ns;
        if (ipcp__await_here(req, slice))
            return 1;
        ipcp__remote_kick();
        if (until_ns && ipcp__now_ns() >= until_ns)
            return 0;
    }
}

/* A done request's status, its info, and its message as the last error. */
static ipcp_status_t ipcp__req_result(const ipcp_request_t *req,
                                      ipcp_xfer_info_t *info)
{
    ipcp_status_t st = req->status;
    if (st == IPCP_OK && info) {
        info->nbytes = req->nbytes;
        info->path = req->path;
    }
    if (st != IPCP_OK)
        ipcp__set_last_error(req->errmsg);
    return st;
}

/* Waits for a request the caller owns; returns its status. */
ipcp_status_t ipcp__wait_req(ipcp_request_t *req, ipcp_xfer_info_t *info)
{
    ipcp__await(req, 0);
    ipcp_status_t st = ipcp__req_result(req, info);
    /* The caller released the handle (ipcp__claim_req; internal requests
     * have none): a second wait is refused even while the engine still
     * holds the request (a transfer that ended early). */
    ipcp__req_disown(req);
    return st;
}

ipcp_status_t ipcp__cmd_wait(ipcp_comm_t *comm, ipcp_request_t *req, int drive)
{
    if (!req)
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_API, IPCP_ERR_NOMEM,
                          "no memory for a request");
    if (drive)
        ipcp__comm_submit_drive(comm, req);
    else
        ipcp__comm_submit(comm, req);
    return ipcp__wait_req(req, NULL);
}

/* ---- Two-sided ----------------------------------------------------------- */

ipcp_status_t ipcp__check_xfer(const ipcp_comm_t *comm, const void *buf,
                               size_t len, int peer, int tag,
                               ipcp_request_t **req)
{
    if (!req || ipcp__misaligned(req, sizeof(void *)))
        return ipcp__bad_arg("request output pointer is NULL or misaligned");
    if (!buf && len)
        return ipcp__fail(IPCP_LOG_INFO, IPCP_SUB_API, IPCP_ERR_INVALID,
                          "buffer is NULL but length is %zu", len);
    if (peer < 0 || peer >= ipcp__comm_nranks(comm))
        return ipcp__fail(IPCP_LOG_INFO, IPCP_SUB_API, IPCP_ERR_INVALID,
                          "peer rank %d is out of range [0, %d)", peer,
                          ipcp__comm_nranks(comm));
    if (peer == ipcp__comm_me(comm))
        return ipcp__fail(IPCP_LOG_INFO, IPCP_SUB_API, IPCP_ERR_INVALID,
                          "peer rank %d is this rank (transfers to self are "
                          "not supported)",
                          peer);
    if (tag < 0)
        return ipcp__fail(IPCP_LOG_INFO, IPCP_SUB_API, IPCP_ERR_INVALID,
                          "tag %d is negative", tag);
    return IPCP_OK;
}

/* Whether a transfer's arguments are valid in a job of one node, told in
 * a few instructions: an error to describe, or a job over nodes, goes
 * ipcp__check_xfer's way (with ipcp__remote_route) instead. */
static int ipcp__xfer_plain(const ipcp_comm_t *comm, const void *buf,
                            size_t len, int peer, int tag,
                            ipcp_request_t *const *req)
{
    return !comm->remote && req &&
           ((uintptr_t)req & (sizeof(void *) - 1)) == 0 && (buf || !len) &&
           (unsigned)peer < (unsigned)comm->size && peer != comm->rank &&
           tag >= 0;
}

/* A device buffer must lie inside its allocation: a copy past its end
 * would fail on a queue, after the peer has been told to expect data. */
ipcp_status_t ipcp__check_extent(const ipcp_request_t *req)
{
    const ipcp__mem_attr_t *a = &req->attr;
    uintptr_t p = (uintptr_t)req->buf;
    if (a->type != IPCP_MEM_CUDA || !a->base || !a->size)
        return IPCP_OK;
    if (p < a->base || p - a->base > a->size ||
        req->len > a->size - (p - a->base))
        return ipcp__fail(IPCP_LOG_INFO, IPCP_SUB_API, IPCP_ERR_INVALID,
                          "%zu bytes at %p run past the end of their device "
                          "allocation (%zu bytes at %p)",
                          req->len, req->buf, a->size, (void *)a->base);
    return IPCP_OK;
}

/* Classifies the buffer, checks its extent, gives req its handle and
 * hands it to the engine. */
static void ipcp__attr_of(ipcp_comm_t *comm, const void *buf, size_t len,
                          ipcp__mem_attr_t *attr)
{
    const ipcp__backend_ops_t *ops;
    ipcp__backend_t *be;
    ipcp__mem_attr(comm, buf, len, attr, &ops, &be);
}

static void ipcp__classify(ipcp_comm_t *comm, ipcp_request_t *req)
{
    ipcp__attr_of(comm, req->buf, req->len, &req->attr);
}

/* ipcp__submit for a request whose buffer is classified already. */
static ipcp_status_t ipcp__submit_classified(ipcp_comm_t *comm,
                                             ipcp_request_t *req,
                                             ipcp_request_t **out)
{
    ipcp__handle_t h = 0;
    ipcp_status_t st = ipcp__check_extent(req);
    if (st == IPCP_OK)
        st = ipcp__handle_new_owned(IPCP_HANDLE_REQ, req, comm->handle, &h);
    if (st != IPCP_OK) {
        ipcp__req_free(req);
        return st;
    }
    req->handle = h;
    if (!ipcp__match_fast(comm, req))
        ipcp__comm_submit_drive(comm, req);
    *out = ipcp__hptr(h);
    return IPCP_OK;
}

static ipcp_status_t ipcp__submit(ipcp_comm_t *comm, ipcp_request_t *req,
                                  ipcp_request_t **out)
{
    ipcp__classify(comm, req);
    return ipcp__submit_classified(comm, req, out);
}

/* A new request for len bytes at buf; NULL, with the error, when there
 * is no memory for it. */
static ipcp_request_t *ipcp__req_for(ipcp_comm_t *comm, int type, void *buf,
                                     size_t len)
{
    ipcp_request_t *req = ipcp__req_new(comm, type);
    if (!req) {
        ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_API, IPCP_ERR_NOMEM,
                   "no memory for a request");
        return NULL;
    }
    req->buf = buf;
    req->len = len;
    return req;
}

ipcp_request_t *ipcp__twosided_req(ipcp_comm_t *comm, int type, void *buf,
                                   size_t len, int peer, int tag)
{
    ipcp_request_t *req = ipcp__req_for(comm, type, buf, len);
    if (!req)
        return NULL;
    req->peer = peer;
    req->tag = tag;
    return req;
}

/* A new one-sided request (not yet checked against the buffer's memory). */
ipcp_request_t *ipcp__onesided_req(ipcp_comm_t *comm, int type, void *buf,
                                   size_t len, ipcp_rmem_t *rm, size_t offset)
{
    ipcp_request_t *req = ipcp__req_for(comm, type, buf, len);
    if (!req)
        return NULL;
    req->peer = rm->owner;
    req->rmem = rm;
    req->offset = offset;
    /* One-sided operations follow the origin's path setting. */
    req->path = (ipcp_path_t)atomic_load(&comm->path);
    return req;
}

ipcp_status_t ipcp__post_onesided(ipcp_comm_t *comm, int type, void *buf,
                                  size_t len, ipcp_rmem_t *rm, size_t offset,
                                  ipcp_request_t **out)
{
    ipcp_request_t *req = ipcp__onesided_req(comm, type, buf, len, rm, offset);
    return req ? ipcp__submit(comm, req, out) : IPCP_ERR_NOMEM;
}

/* ---- Requests complete when posted --------------------------------------
 * An eager host send that its caller wrote into the peer's inbox has
 * nothing left to do: it gets a handle of its own type and no request
 * (no allocation, no finalize list, a wait that only releases the
 * handle).  The handle's object is the byte count + 1 (never NULL); the
 * communicator owns it, so that its finalize makes it stale as it makes
 * requests'.  The sender of the 8 B window ran ~1,000 instructions a
 * message with a request (callgrind). */

/* Whether a transfer of len bytes of this memory may complete when
 * posted: host memory, and for a send an eager size.  A traced one keeps
 * its request: the trace records requests. */
static int ipcp__now_ok(const ipcp_comm_t *comm, int type, size_t len)
{
    return !comm->trace_on && (type == IPCP_REQ_RECV || len <= comm->eager_max);
}

/* Whether buf is host memory, with *attr filled where the answer needed
 * it (*classified).  While no device memory can exist in the process the
 * answer costs no lookup: a small host message's classification was ~180
 * of its ~650 instructions in ipcp_isend (callgrind), for an answer that
 * only the request's way needs in full. */
static int ipcp__is_host(ipcp_comm_t *comm, const void *buf, size_t len,
                         ipcp__mem_attr_t *attr, int *classified)
{
    *classified = !ipcp__dev_absent(comm);
    if (!*classified)
        return 1;
    ipcp__attr_of(comm, buf, len, attr);
    return attr->type == IPCP_MEM_HOST;
}

static void ipcp__eager_info(ipcp_xfer_info_t *info, size_t len)
{
    if (info) {
        info->nbytes = len;
        info->path = IPCP_PATH_EAGER;
    }
}

/* A send the inbox takes, or a receive whose message came already, done
 * at once: *out is then a completed request's handle.  IPCP_IN_PROGRESS:
 * it must go the way of requests. */
static ipcp_status_t ipcp__post_now(ipcp_comm_t *comm, int type, void *buf,
                                    size_t len, int peer, int tag,
                                    ipcp_request_t **out)
{
    ipcp__handle_t h;
    size_t got = len;
    if (type == IPCP_REQ_RECV && !ipcp__recv_maybe(comm, peer))
        return IPCP_IN_PROGRESS;
    /* The handle first: once the message moved, nothing may fail. */
    IPCP_CHECK(ipcp__handle_new_owned(
        IPCP_HANDLE_DONE, (void *)(uintptr_t)(len + 1), comm->handle, &h));
    if (type == IPCP_REQ_SEND
            ? !ipcp__send_now(comm, peer, buf, len, tag)
            : !ipcp__recv_now(comm, peer, buf, len, tag, &got)) {
        ipcp__handle_release(h);
        return IPCP_IN_PROGRESS;
    }
    if (got != len)
        ipcp__handle_rebind(h, (void *)(uintptr_t)(got + 1));
    *out = ipcp__hptr(h);
    return IPCP_OK;
}

/* ipcp_wait of a request that completed when posted: releases its handle
 * (one release wins, as ipcp__claim_req's) and writes info. */
static ipcp_status_t ipcp__done_claim(const ipcp_request_t *req_h,
                                      ipcp_xfer_info_t *info)
{
    void *v;
    if (!ipcp__handle_take((uintptr_t)req_h, IPCP_HANDLE_DONE, &v))
        return ipcp__handle_fail(req_h, IPCP_HANDLE_DONE);
    ipcp__eager_info(info, (size_t)((uintptr_t)v - 1));
    return IPCP_OK;
}

static int ipcp__is_done(const ipcp_request_t *req_h)
{
    return ipcp__handle_type((uintptr_t)req_h) == IPCP_HANDLE_DONE;
}

ipcp_status_t ipcp__post(ipcp_comm_t *comm, int type, void *buf, size_t len,
                         int peer, int tag, ipcp_request_t **out)
{
    ipcp__mem_attr_t attr;
    int classified;
    if (ipcp__is_host(comm, buf, len, &attr, &classified) &&
        ipcp__now_ok(comm, type, len)) {
        ipcp_status_t st = ipcp__post_now(comm, type, buf, len, peer, tag, out);
        if (st != IPCP_IN_PROGRESS)
            return st;
    }
    ipcp_request_t *req = ipcp__twosided_req(comm, type, buf, len, peer, tag);
    if (!req)
        return IPCP_ERR_NOMEM;
    if (classified)
        req->attr = attr;
    else
        ipcp__classify(comm, req);
    return ipcp__submit_classified(comm, req, out);
}

ipcp_status_t ipcp_isend(ipcp_comm_t *comm_h, const void *buf, size_t len,
                         int peer, int tag, ipcp_request_t **req)
{
    ipcp_comm_t *comm;
    IPCP_CHECK(ipcp__comm_get(comm_h, &comm));
    if (!ipcp__xfer_plain(comm, buf, len, peer, tag, req)) {
        IPCP_CHECK(ipcp__check_xfer(comm, buf, len, peer, tag, req));
        if (ipcp__remote_route(comm, &peer))
            return ipcp__remote_post(comm, IPCP_REQ_SEND, (void *)buf, len,
                                     peer, tag, req);
    }
    return ipcp__post(comm, IPCP_REQ_SEND, (void *)buf, len, peer, tag, req);
}

ipcp_status_t ipcp_irecv(ipcp_comm_t *comm_h, void *buf, size_t len, int peer,
                         int tag, ipcp_request_t **req)
{
    ipcp_comm_t *comm;
    IPCP_CHECK(ipcp__comm_get(comm_h, &comm));
    if (!ipcp__xfer_plain(comm, buf, len, peer, tag, req)) {
        IPCP_CHECK(ipcp__check_xfer(comm, buf, len, peer, tag, req));
        if (ipcp__remote_route(comm, &peer))
            return ipcp__remote_post(comm, IPCP_REQ_RECV, buf, len, peer, tag,
                                     req);
    }
    return ipcp__post(comm, IPCP_REQ_RECV, buf, len, peer, tag, req);
}

/* A blocking send or receive.  An eager send the inbox takes is complete
 * when it left; a receive, or a send that must wait, of host memory the
 * mailbox takes goes the caller's own way with its request on its stack:
 * no allocation, handle or finalize list (engine/mbox.c).  Anything else
 * goes the way of requests, with the buffer classified once. */
static ipcp_status_t ipcp__blocking(ipcp_comm_t *comm_h, int type, void *buf,
                                    size_t len, int peer, int tag,
                                    ipcp_xfer_info_t *info)
{
    ipcp_comm_t *comm;
    ipcp_request_t *out, req;
    IPCP_CHECK(ipcp__comm_get(comm_h, &comm));
    if (!ipcp__xfer_plain(comm, buf, len, peer, tag, &out)) {
        IPCP_CHECK(ipcp__check_xfer(comm, buf, len, peer, tag, &out));
        if (ipcp__remote_route(comm, &peer))
            return ipcp__remote_blocking(comm, type, buf, len, peer, tag, info);
    }
    ipcp__mem_attr_t attr;
    int classified;
    if (ipcp__is_host(comm, buf, len, &attr, &classified) &&
        type == IPCP_REQ_SEND && ipcp__now_ok(comm, type, len) &&
        ipcp__send_now(comm, peer, buf, len, tag)) {
        ipcp__eager_info(info, len);
        return IPCP_OK;
    }
    if (!classified)
        ipcp__attr_of(comm, buf, len, &attr);
    ipcp__req_clear(&req, comm->trace_on, 1);
    req.xfer_unset = 1;
    ipcp__req_init(comm, &req, type);
    req.on_stack = 1;
    req.buf = buf;
    req.len = len;
    req.peer = peer;
    req.tag = tag;
    req.attr = attr;
    if (req.attr.type == IPCP_MEM_HOST && ipcp__match_fast(comm, &req)) {
        ipcp__await(&req, 0);
        return ipcp__req_result(&req, info);
    }
    ipcp_request_t *heap = ipcp__twosided_req(comm, type, buf, len, peer, tag);
    if (!heap)
        return IPCP_ERR_NOMEM;
    heap->attr = req.attr;
    IPCP_CHECK(ipcp__submit_classified(comm, heap, &out));
    return ipcp_wait(out, info);
}

ipcp_status_t ipcp_send(ipcp_comm_t *comm_h, const void *buf, size_t len,
                        int peer, int tag)
{
    return ipcp__blocking(comm_h, IPCP_REQ_SEND, (void *)buf, len, peer, tag,
                          NULL);
}

ipcp_status_t ipcp_recv(ipcp_comm_t *comm_h, void *buf, size_t len, int peer,
                        int tag, ipcp_xfer_info_t *info)
{
    return ipcp__blocking(comm_h, IPCP_REQ_RECV, buf, len, peer, tag, info);
}

/* The request's handle is released before the wait, so that a second
 * wait or test of it, even on another thread meanwhile, is refused. */
static ipcp_status_t ipcp__claim_req(const ipcp_request_t *req_h,
                                     ipcp_request_t *req)
{
    IPCP_CHECK(ipcp__handle_claim(req_h, IPCP_HANDLE_REQ));
    req->handle = 0;
    return IPCP_OK;
}

ipcp_status_t ipcp_wait(ipcp_request_t *req_h, ipcp_xfer_info_t *info)
{
    ipcp_request_t *req;
    if (ipcp__is_done(req_h))
        return ipcp__done_claim(req_h, info);
    IPCP_CHECK(ipcp__req_get(req_h, &req));
    IPCP_CHECK(ipcp__claim_req(req_h, req));
    if (req->type == IPCP_REQ_REMOTE)
        ipcp__remote_poll(req, 0);
    return ipcp__wait_req(req, info);
}

/* The request of req_h for ipcp_test and ipcp_wait_for, once done is
 * checked; *req NULL: a request complete when posted. */
static ipcp_status_t ipcp__test_get(const ipcp_request_t *req_h, int *done,
                                    ipcp_request_t **req)
{
    *req = NULL;
    if (!ipcp__is_done(req_h))
        IPCP_CHECK(ipcp__req_get(req_h, req));
    return done ? IPCP_OK : ipcp__bad_arg("done is NULL");
}

/* ipcp_test and ipcp_wait_for of a request complete when posted. */
static ipcp_status_t ipcp__done_test(const ipcp_request_t *req_h, int *done,
                                     ipcp_xfer_info_t *info)
{
    IPCP_CHECK(ipcp__done_claim(req_h, info));
    *done = 1;
    return IPCP_OK;
}

ipcp_status_t ipcp_wait_for(ipcp_request_t *req_h, double timeout_s, int *done,
                            ipcp_xfer_info_t *info)
{
    ipcp_request_t *req;
    IPCP_CHECK(ipcp__test_get(req_h, done, &req));
    /* NaN compares false with everything. */
    if (!(timeout_s >= 0) || timeout_s > 1e9)
        return ipcp__fail(IPCP_LOG_INFO, IPCP_SUB_API, IPCP_ERR_INVALID,
                          "timeout_s is %g: 0 to 1e9 seconds", timeout_s);
    if (!req)
        return ipcp__done_test(req_h, done, info);
    uint64_t until = ipcp__now_ns() + (uint64_t)(timeout_s * 1e9);
    if (req->type == IPCP_REQ_REMOTE
            ? !ipcp__remote_poll(req, until ? until : 1)
            : !ipcp__await(req, until ? until : 1)) {
        *done = 0;
        return IPCP_IN_PROGRESS;
    }
    IPCP_CHECK(ipcp__claim_req(req_h, req));
    *done = 1;
    return ipcp__wait_req(req, info);
}

/* Whether ipcp_test takes a turn for req (see there).  A receive whose
 * caller reads the inbox (watch) has just read it: a turn has work only
 * when commands or completions are queued, a record was left for the
 * thread, chunks are still to stage or messages wait for room.  Anything
 * else (a send waiting for its CTS, a barrier) may wait for a record in
 * an inbox nobody else reads now: a turn every test. */
static int ipcp__test_drives(const ipcp_request_t *req)
{
    ipcp_comm_t *comm = req->comm;
    int done = atomic_load_explicit(&req->done, memory_order_acquire);
    if (!req->watch)
        return !done;
    /* A record its poll refused (kick, raised without a wake-up since a
     * turn was to take it): taken now even when the request is done. */
    const ipcp__peer_t *peer = &comm->peers[req->peer];
    if (atomic_load_explicit(&peer->kick, memory_order_relaxed))
        return 1;
    return !done &&
           (atomic_load_explicit(&comm->queued, memory_order_relaxed) ||
            atomic_load_explicit(&comm->nstaging, memory_order_relaxed) ||
            atomic_load_explicit(&peer->backlog, memory_order_relaxed));
}

ipcp_status_t ipcp_test(ipcp_request_t *req_h, int *done,
                        ipcp_xfer_info_t *info)
{
    ipcp_request_t *req;
    IPCP_CHECK(ipcp__test_get(req_h, done, &req));
    if (!req)
        return ipcp__done_test(req_h, done, info);
    if (req->type == IPCP_REQ_REMOTE)
        ipcp__remote_poll(req, 1);
    else if (req->comm->remote && ipcp__remote_busy())
        ipcp__remote_kick();
    /* A receive its caller posted itself: its message is the caller's to
     * read, and the progress thread leaves it for spin_us (a loop of tests
     * would see each message that late). */
    if (req->watch && !atomic_load_explicit(&req->done, memory_order_acquire))
        ipcp__mbox_poll(req->comm, req);
    /* Then a turn of progress where the caller may take it, as MPI's tests
     * progress: a loop of tests moves transfers on without the thread.
     * For a receive its caller reads, only when a turn has work
     * (ipcp__test_drives): an idle one would still take prog_lock and the
     * lines of every inbox from the thread and the writers, at every test
     * of a loop. */
    if (ipcp__test_drives(req)) {
        ipcp__comm_drive(req->comm);
        ipcp__comm_undrive(req->comm);
    }
    if (!atomic_load_explicit(&req->done, memory_order_acquire)) {
        *done = 0;
        return IPCP_IN_PROGRESS;
    }
    IPCP_CHECK(ipcp__claim_req(req_h, req));
    *done = 1;
    return ipcp__wait_req(req, info);
}
