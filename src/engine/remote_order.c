/* Stream-ordered transfers with ranks on other nodes (remote_order.h). */
#include "engine/engine.h"
#include "engine/remote_order.h"
#include "engine/remote_xfer.h"

/* Every comm's ordered transfers, in the order they were posted (under
 * ipcp__remote_lock).  Each request's link sits here from its post to
 * its end. */
static ipcp__list_t order_list = {&order_list, &order_list}; /* prev, next */
static atomic_int order_n; /* its length, read without the lock */

static void order_count(ipcp_comm_t *comm, int d)
{
    atomic_fetch_add_explicit(&order_n, d, memory_order_relaxed);
    atomic_fetch_add_explicit(&comm->remote_ordered, d, memory_order_release);
}

void ipcp__remote_order_post(ipcp_comm_t *comm, ipcp_request_t *req)
{
    static atomic_int said;
    if (!comm->remote->ops->threads && !atomic_exchange(&said, 1))
        IPCP_INFO(IPCP_SUB_API,
                  "stream-ordered transfers with ranks on other nodes move "
                  "on only in ipcpipe's calls (%s may not be called from "
                  "ipcpipe's thread): wait for or test their requests "
                  "before waiting for their streams",
                  comm->remote->ops->name);
    if (req->rmem) /* the region stays while the put or get may run */
        atomic_fetch_add(&req->rmem->busy, 1);
    pthread_mutex_lock(&ipcp__remote_lock);
    req->remote_op = NULL;
    ipcp__list_push_back(&order_list, &req->link);
    order_count(comm, 1);
    pthread_mutex_unlock(&ipcp__remote_lock);
    /* An idle thread sleeps in poll() for up to a keepalive step; the
     * start lands in host memory without waking it. */
    if (comm->remote->ops->threads)
        ipcp__comm_wake(comm);
}

/* The request's transfer ended with st (its reason the last error): out
 * of the list, and done; its user's stream goes on (ipcp__req_complete
 * writes the done flag). */
static void order_end(ipcp_request_t *req, ipcp_status_t st, size_t nbytes)
{
    ipcp__list_del(&req->link);
    order_count(req->comm, -1);
    if (req->rmem)
        atomic_fetch_sub(&req->rmem->busy, 1);
    req->nbytes = nbytes;
    req->path = IPCP_PATH_REMOTE;
    ipcp__req_complete(req, st, st == IPCP_OK ? NULL : ipcp_last_error());
}

/* Starts req's transfer once its stream got there: the stream's earlier
 * work (which wrote a send's buffer) has ended by then.  0 while the
 * stream has not; -1 when it could not start (req ended). */
static int order_start(ipcp_request_t *req)
{
    ipcp_comm_t *comm = req->comm;
    if (!ipcp__sync_started(req->sync))
        return 0;
    ipcp__rx_dev_t dev = {comm->dev_ops, ipcp__dev(comm), req->attr.device};
    ipcp__rx_t *x = NULL;
    ipcp_status_t st =
        req->rmem ? ipcp__rx_start_rma(comm->remote, req->remote_send, req->buf,
                                       req->len, req->rmem->owner,
                                       req->rmem->addr + req->offset, &dev, &x)
                  : ipcp__rx_start(comm->remote, req->remote_send, req->buf,
                                   req->len, req->peer, req->tag, &dev, &x);
    if (st != IPCP_OK) {
        order_end(req, st, 0);
        return -1;
    }
    req->sync_armed = 1;
    req->remote_op = x;
    return 1;
}

int ipcp__remote_order_poll(ipcp_comm_t *only)
{
    ipcp__list_t *l, *tmp;
    int n = 0;
    if (!atomic_load_explicit(&order_n, memory_order_relaxed))
        return 0;
    pthread_mutex_lock(&ipcp__remote_lock);
    ipcp__list_for_each_safe(l, tmp, &order_list)
    {
        ipcp_request_t *req = ipcp__list_entry(l, ipcp_request_t, link);
        if (only && req->comm != only)
            continue;
        if (!req->remote_op && order_start(req) <= 0)
            continue;
        ipcp__rx_t *x = req->remote_op;
        ipcp__rx_progress(x);
        if (!ipcp__rx_ended(x))
            continue;
        size_t nbytes = 0;
        ipcp_status_t st = ipcp__rx_result(x, &nbytes);
        ipcp__rx_free(x);
        req->remote_op = NULL;
        order_end(req, st, nbytes);
        n++;
    }
    pthread_mutex_unlock(&ipcp__remote_lock);
    return n;
}

int ipcp__remote_order_busy(void)
{
    return atomic_load_explicit(&order_n, memory_order_relaxed) != 0;
}

int ipcp__remote_order_driven(ipcp_comm_t *comm)
{
    return atomic_load_explicit(&comm->remote_ordered, memory_order_acquire) >
               0 &&
           comm->remote->ops->threads;
}

void ipcp__remote_order_end(ipcp_comm_t *comm)
{
    ipcp__list_t *l, *tmp;
    ipcp__list_for_each_safe(l, tmp, &order_list)
    {
        ipcp_request_t *req = ipcp__list_entry(l, ipcp_request_t, link);
        if (req->comm != comm)
            continue;
        /* Its transfer was ended by ipcp__rx_end_all already, unless it
         * had ended by itself (its result stands). */
        ipcp__rx_t *x = req->remote_op;
        size_t nbytes = 0;
        ipcp_status_t st = IPCP_ERR_STATE;
        if (x && ipcp__rx_ended(x) && ipcp__rx_result(x, &nbytes) == IPCP_OK)
            st = IPCP_OK;
        ipcp__rx_free(x);
        req->remote_op = NULL;
        if (st != IPCP_OK)
            ipcp__set_last_error("finalized before its stream-ordered "
                                 "transfer with a rank on another node "
                                 "ended");
        order_end(req, st, nbytes);
    }
}
