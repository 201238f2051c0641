/* The public API of stream-ordered transfers (ipcpipe_cuda.h). */
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cpu.h"
#include "common/time.h"
#include "api.h"
#include "engine/mem.h"
#include "engine/remote.h"
#include "engine/remote_order.h"
#include "ipcpipe_cuda.h"

/* ---- Stream-ordered (ipcpipe_cuda.h) ------------------------------------- */

/* Enqueues the user's half of the ordering on `stream`: mark the start,
 * then wait for done.  On failure nothing is left waiting on a flag. */
static ipcp_status_t ipcp__order_on_stream(ipcp_comm_t *comm, int device,
                                           ipcp_stream_t stream,
                                           ipcp__sync_t *e)
{
    const ipcp__backend_ops_t *ops = comm->dev_ops;
    ipcp__queue_t *uq;
    ipcp_status_t st =
        ops->queue_wrap(ipcp__dev(comm), device, (void *)stream, &uq);
    if (st != IPCP_OK) {
        ipcp__sync_put(e);
        return st;
    }
    st = ops->flag_write(uq, ipcp__sync_start(e), ipcp__sync_gen(e), NULL);
    if (st == IPCP_OK &&
        (st = ops->flag_wait(uq, ipcp__sync_done(e), ipcp__sync_gen(e), NULL,
                             NULL)) != IPCP_OK) {
        /* The start is enqueued but the wait is not: release our side;
         * the entry drains back to the pool once its start lands. */
        ipcp__sync_end(comm, e);
        ops->queue_destroy(uq);
        return st;
    }
    ops->queue_destroy(uq);
    if (st != IPCP_OK)
        ipcp__sync_put(e);
    return st;
}

static ipcp_status_t ipcp__post_on_stream(ipcp_comm_t *comm,
                                          ipcp_request_t *req,
                                          ipcp_stream_t stream,
                                          ipcp_request_t **out)
{
    const ipcp__backend_ops_t *ops;
    ipcp__backend_t *be;
    ipcp__sync_t *e;
    ipcp_status_t st;
    ipcp__handle_t h = 0;

    /* Before anything is enqueued; a failure below frees it with req. */
    if (out && (st = ipcp__handle_new_owned(IPCP_HANDLE_REQ, req, comm->handle,
                                            &h)) != IPCP_OK) {
        ipcp__req_free(req);
        return st;
    }
    req->handle = h;
    ipcp__mem_attr(comm, req->buf, req->len, &req->attr, &ops, &be);
    if ((st = ipcp__check_extent(req)) != IPCP_OK)
        ;
    else if (req->attr.type != IPCP_MEM_CUDA)
        st = ipcp__fail(IPCP_LOG_INFO, IPCP_SUB_API, IPCP_ERR_UNSUPPORTED,
                        "stream-ordered transfers need device memory; %p is "
                        "not (use ipcp_isend/ipcp_irecv for host memory)",
                        req->buf);
    else if (!comm->dev_ops->queue_wrap)
        st = ipcp__fail(IPCP_LOG_INFO, IPCP_SUB_API, IPCP_ERR_UNSUPPORTED,
                        "this CUDA backend cannot order on user streams");
    else if (comm->dev_ops->stream_check &&
             (st =
                  comm->dev_ops->stream_check(ipcp__dev(comm), req->attr.device,
                                              (void *)stream)) != IPCP_OK)
        ; /* before the lane numbers a message or a flag is taken */
    else if (req->type != IPCP_REQ_REMOTE && ipcp__lane_takes(comm, req)) {
        ipcp_request_t *posted;
        st = ipcp__lane_post(comm, req, (void *)stream, out ? &posted : NULL);
        if (st == IPCP_OK && out)
            *out = ipcp__hptr(h);
        return st;
    } else
        st = ipcp__sync_acquire(comm, req->attr.device, &e);
    if (st == IPCP_OK)
        st = ipcp__order_on_stream(comm, req->attr.device, stream, e);
    if (st != IPCP_OK) {
        ipcp__req_free(req);
        return st;
    }
    req->sync = e;
    req->user = out != NULL;
    if (req->type == IPCP_REQ_REMOTE)
        ipcp__remote_order_post(comm, req);
    else
        ipcp__comm_submit(comm, req);
    if (out)
        *out = ipcp__hptr(h);
    return IPCP_OK;
}

static ipcp_status_t ipcp__check_cuda(const ipcp_comm_t *comm_h,
                                      ipcp_comm_t **comm)
{
    IPCP_CHECK(ipcp__comm_get(comm_h, comm));
    if (!ipcp__dev_get(*comm, IPCP_LOG_INFO, "a stream-ordered transfer"))
        return IPCP_ERR_UNSUPPORTED;
    return IPCP_OK;
}

static ipcp_status_t ipcp__twosided_on_stream(ipcp_comm_t *comm_h, int type,
                                              void *buf, size_t len, int peer,
                                              int tag, ipcp_stream_t stream,
                                              ipcp_request_t **out)
{
    ipcp_request_t *dummy;
    ipcp_comm_t *comm;
    IPCP_CHECK(ipcp__comm_get(comm_h, &comm));
    IPCP_CHECK(ipcp__check_xfer(comm, buf, len, peer, tag, out ? out : &dummy));
    int remote = ipcp__remote_route(comm, &peer);
    if (remote && !out && !comm->remote->ops->threads)
        return ipcp__fail(IPCP_LOG_INFO, IPCP_SUB_API, IPCP_ERR_UNSUPPORTED,
                          "rank %d is on another node, and ipcpipe's thread "
                          "may not call %s (not initialized with "
                          "MPI_THREAD_MULTIPLE): a stream-ordered transfer "
                          "with it needs a request to wait for or test, "
                          "which moves it on",
                          peer, comm->remote->ops->name);
    if (remote && tag > comm->remote->ops->tag_max)
        return ipcp__fail(IPCP_LOG_INFO, IPCP_SUB_API, IPCP_ERR_UNSUPPORTED,
                          "tag %d with rank %d (on another node): %s takes "
                          "tags up to %d",
                          tag, peer, comm->remote->ops->name,
                          comm->remote->ops->tag_max);
    IPCP_CHECK(ipcp__check_cuda(comm_h, &comm));
    ipcp_request_t *req = ipcp__twosided_req(comm, type, buf, len, peer, tag);
    if (!req)
        return IPCP_ERR_NOMEM;
    /* A rank on another node (peer stays its rank in the job): through
     * the transport once the stream gets there (engine/remote_order.h). */
    if (remote) {
        req->type = IPCP_REQ_REMOTE;
        req->remote_ordered = 1;
        req->remote_send = type == IPCP_REQ_SEND;
    }
    return ipcp__post_on_stream(comm, req, stream, out);
}

ipcp_status_t ipcp_isend_on_stream(ipcp_comm_t *comm_h, const void *buf,
                                   size_t len, int peer, int tag,
                                   ipcp_stream_t stream, ipcp_request_t **req)
{
    return ipcp__twosided_on_stream(comm_h, IPCP_REQ_SEND, (void *)buf, len,
                                    peer, tag, stream, req);
}

ipcp_status_t ipcp_irecv_on_stream(ipcp_comm_t *comm_h, void *buf, size_t len,
                                   int peer, int tag, ipcp_stream_t stream,
                                   ipcp_request_t **req)
{
    return ipcp__twosided_on_stream(comm_h, IPCP_REQ_RECV, buf, len, peer, tag,
                                    stream, req);
}

static ipcp_status_t ipcp__onesided_on_stream(ipcp_comm_t *comm_h, int type,
                                              void *buf, size_t len,
                                              ipcp_rmem_t *rm_h, size_t offset,
                                              ipcp_stream_t stream,
                                              ipcp_request_t **out)
{
    ipcp_comm_t *comm;
    ipcp_rmem_t *rm;
    IPCP_CHECK(ipcp__check_cuda(comm_h, &comm));
    IPCP_CHECK(
        ipcp__check_onesided(comm_h, buf, len, rm_h, offset, &comm, &rm));
    if (out && ipcp__misaligned(out, sizeof(void *)))
        return ipcp__bad_arg("request output pointer is misaligned");
    if (rm->remote)
        IPCP_CHECK(ipcp__remote_rma_ready(comm, type, rm->owner, out != NULL));
    ipcp_request_t *req = ipcp__onesided_req(comm, type, buf, len, rm, offset);
    if (!req)
        return IPCP_ERR_NOMEM;
    /* A region on another node: through the transport's one-sided calls
     * once the stream gets there (engine/remote_order.h). */
    if (rm->remote) {
        req->type = IPCP_REQ_REMOTE;
        req->remote_ordered = 1;
        req->remote_send = type == IPCP_REQ_PUT;
    }
    return ipcp__post_on_stream(comm, req, stream, out);
}

ipcp_status_t ipcp_iput_on_stream(ipcp_comm_t *comm_h, const void *src,
                                  size_t len, ipcp_rmem_t *dst, size_t offset,
                                  ipcp_stream_t stream, ipcp_request_t **req)
{
    return ipcp__onesided_on_stream(comm_h, IPCP_REQ_PUT, (void *)src, len, dst,
                                    offset, stream, req);
}

ipcp_status_t ipcp_iget_on_stream(ipcp_comm_t *comm_h, void *dst, size_t len,
                                  ipcp_rmem_t *src, size_t offset,
                                  ipcp_stream_t stream, ipcp_request_t **req)
{
    return ipcp__onesided_on_stream(comm_h, IPCP_REQ_GET, dst, len, src, offset,
                                    stream, req);
}
