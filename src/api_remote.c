/* The public calls' side of peers on other nodes (engine/remote.h): the
 * job's ranks against this node's numbers, and transfers through the
 * transport, which progress in the calls that wait for them. */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "common/time.h"
#include "engine/memreg.h"
#include "engine/remote.h"
#include "engine/remote_order.h"
#include "engine/remote_xfer.h"

pthread_mutex_t ipcp__remote_lock = PTHREAD_MUTEX_INITIALIZER;

int ipcp__comm_me(const ipcp_comm_t *comm)
{
    return comm->remote ? comm->remote->rank : comm->rank;
}

int ipcp__comm_nranks(const ipcp_comm_t *comm)
{
    return comm->remote ? comm->remote->size : comm->size;
}

const char *ipcp__comm_job_name(const ipcp_comm_t *comm)
{
    return comm->remote->job;
}

int ipcp__remote_route(const ipcp_comm_t *comm, int *peer)
{
    if (!comm->remote)
        return 0;
    int l = comm->remote->local[*peer];
    if (l < 0)
        return 1;
    *peer = l;
    return 0;
}

/* The backend that owns buf: dev->ops NULL for host memory, which goes
 * to the transport as it is; device memory goes through its backend's
 * copies, or as it is where the transport reads device memory. */
static ipcp_status_t ipcp__remote_mem(ipcp_comm_t *comm, const void *buf,
                                      size_t len, ipcp__rx_dev_t *dev)
{
    ipcp__mem_attr_t attr;
    IPCP_CHECK(ipcp__mem_attr(comm, buf, len, &attr, &dev->ops, &dev->be));
    dev->device = attr.device;
    if (attr.type == IPCP_MEM_HOST)
        dev->ops = NULL;
    return IPCP_OK;
}

/* Moves every transfer with ranks elsewhere on until *xp ends (1; its
 * result in *st, *nbytes, the reason as last error; *xp freed and NULL)
 * or `until` (0; 0: no limit), or until finalize ended it (-1).  A few
 * thousand looks before each yield, as a blocking MPI call spins. */
static int ipcp__remote_spin(ipcp__rx_t **xp, ipcp__list_t *link,
                             ipcp_status_t *st, size_t *nbytes, uint64_t until)
{
    for (unsigned n = 1;; n++) {
        ipcp__remote_order_poll(NULL);
        pthread_mutex_lock(&ipcp__remote_lock);
        if (!*xp) {
            pthread_mutex_unlock(&ipcp__remote_lock);
            return -1;
        }
        ipcp__rx_progress(*xp);
        int end = ipcp__rx_ended(*xp);
        if (end) {
            *st = ipcp__rx_result(*xp, nbytes);
            ipcp__rx_free(*xp);
            *xp = NULL;
            if (link)
                ipcp__list_del(link);
        }
        pthread_mutex_unlock(&ipcp__remote_lock);
        if (end)
            return 1;
        if (until && ipcp__now_ns() >= until)
            return 0;
        if (n % 4096 == 0)
            sched_yield();
    }
}

/* Starts a transfer; req (may be NULL: a blocking call's) then counts
 * among those finalize ends, in the same hold of the lock. */
static ipcp_status_t ipcp__remote_start(ipcp_comm_t *comm, int send, void *buf,
                                        size_t len, int peer, int tag,
                                        ipcp__rx_t **x, ipcp_request_t *req)
{
    ipcp__rx_dev_t dev = {NULL, NULL, -1};
    IPCP_CHECK(ipcp__remote_mem(comm, buf, len, &dev));
    pthread_mutex_lock(&ipcp__remote_lock);
    ipcp_status_t st = ipcp__rx_start(comm->remote, send, buf, len, peer, tag,
                                      dev.ops ? &dev : NULL, x);
    if (st == IPCP_OK && req) {
        req->remote_op = *x;
        ipcp__list_push_back(&comm->remote->posted, &req->link);
    }
    pthread_mutex_unlock(&ipcp__remote_lock);
    return st;
}

ipcp_status_t ipcp__remote_blocking(ipcp_comm_t *comm, int type, void *buf,
                                    size_t len, int peer, int tag,
                                    ipcp_xfer_info_t *info)
{
    /* Set by the spin: a blocking call's transfer always ends there (finalize
     * ends it, it is freed here), the initial value only quiets a compiler. */
    ipcp_status_t st = IPCP_ERR_STATE;
    size_t nbytes = 0;
    ipcp__rx_t *x = NULL;
    IPCP_CHECK(ipcp__remote_start(comm, type == IPCP_REQ_SEND, buf, len, peer,
                                  tag, &x, NULL));
    ipcp__remote_spin(&x, NULL, &st, &nbytes, 0);
    if (info && st == IPCP_OK) {
        info->nbytes = nbytes;
        info->path = IPCP_PATH_REMOTE;
    }
    return st;
}

/* req (NULL: no memory) as a transfer with a rank on another node, with
 * a handle of its own; freed when that fails. */
static ipcp_status_t ipcp__remote_req(ipcp_comm_t *comm, ipcp_request_t *req,
                                      ipcp__handle_t *h)
{
    if (!req)
        return IPCP_ERR_NOMEM;
    req->type = IPCP_REQ_REMOTE;
    ipcp_status_t st =
        ipcp__handle_new_owned(IPCP_HANDLE_REQ, req, comm->handle, h);
    if (st != IPCP_OK) {
        ipcp__req_free(req);
        return st;
    }
    req->handle = *h;
    return IPCP_OK;
}

ipcp_status_t ipcp__remote_post(ipcp_comm_t *comm, int type, void *buf,
                                size_t len, int peer, int tag,
                                ipcp_request_t **out)
{
    ipcp__handle_t h = 0;
    ipcp__rx_t *x = NULL;
    ipcp_request_t *req = ipcp__twosided_req(comm, type, buf, len, peer, tag);
    IPCP_CHECK(ipcp__remote_req(comm, req, &h));
    ipcp_status_t st = ipcp__remote_start(comm, type == IPCP_REQ_SEND, buf, len,
                                          peer, tag, &x, req);
    if (st != IPCP_OK) {
        ipcp__req_free(req);
        return st;
    }
    *out = ipcp__hptr(h);
    return IPCP_OK;
}

/* A stream-ordered request: every ordered transfer moves on (the one
 * before it on its stream may be any of them), and the others. */
static int ipcp__remote_poll_ordered(ipcp_request_t *req, uint64_t until)
{
    for (unsigned n = 1;; n++) {
        ipcp__remote_kick();
        if (atomic_load_explicit(&req->done, memory_order_acquire))
            return 1;
        if (until && ipcp__now_ns() >= until)
            return 0;
        if (n % 4096 == 0)
            sched_yield();
    }
}

/* A region of rank owner's (its number here, or the job's where remote). */
int ipcp__rmem_rank(const ipcp_rmem_t *rm)
{
    return rm->remote ? rm->owner : ipcp__job_rank(rm->comm, rm->owner);
}

void ipcp__remote_attach(ipcp_comm_t *comm, ipcp_mem_t *mem)
{
    ipcp__remote_t *rm = comm->remote;
    ipcp__region_t *r = &mem->region;
    mem->wide_addr = 0;
    if (!rm || !rm->ops->attach || !r->len ||
        (r->attr.type != IPCP_MEM_HOST && !rm->ops->device_mem))
        return;
    pthread_mutex_lock(&ipcp__remote_lock);
    ipcp_status_t st =
        rm->ops->attach(rm->ctx, r->ptr, r->len, &mem->wide_addr);
    pthread_mutex_unlock(&ipcp__remote_lock);
    if (st != IPCP_OK) {
        mem->wide_addr = 0;
        IPCP_INFO(IPCP_SUB_API,
                  "region %llu cannot be reached from other nodes: %s",
                  (unsigned long long)r->id, ipcp_last_error());
    }
}

void ipcp__remote_detach(ipcp_comm_t *comm, ipcp_mem_t *mem)
{
    ipcp__remote_t *rm = comm->remote;
    if (!rm || !mem->wide_addr)
        return;
    pthread_mutex_lock(&ipcp__remote_lock);
    rm->ops->detach(rm->ctx, mem->region.ptr);
    pthread_mutex_unlock(&ipcp__remote_lock);
    mem->wide_addr = 0;
}

ipcp_status_t ipcp__remote_rma_ready(const ipcp_comm_t *comm, int type,
                                     int owner, int with_req)
{
    const ipcp__remote_t *rm = comm->remote;
    const char *what = type == IPCP_REQ_PUT ? "put" : "get";
    if (!rm->ops->iput)
        return ipcp__fail(IPCP_LOG_INFO, IPCP_SUB_API, IPCP_ERR_UNSUPPORTED,
                          "a %s with rank %d (on another node): this job "
                          "has no one-sided access through %s "
                          "(IPCPIPE_REMOTE_RMA=off, or %s refused a window)",
                          what, owner, rm->ops->name, rm->ops->name);
    if (!with_req && !rm->ops->threads)
        return ipcp__fail(IPCP_LOG_INFO, IPCP_SUB_API, IPCP_ERR_UNSUPPORTED,
                          "a stream-ordered %s with rank %d (on another "
                          "node) needs a request to wait for or test, which "
                          "moves it on: ipcpipe's thread may not call %s (not "
                          "initialized with MPI_THREAD_MULTIPLE)",
                          what, owner, rm->ops->name);
    return IPCP_OK;
}

ipcp_status_t ipcp__remote_onesided(ipcp_comm_t *comm, int type, void *buf,
                                    size_t len, ipcp_rmem_t *rmem,
                                    size_t offset, ipcp_request_t **out)
{
    ipcp__remote_t *rm = comm->remote;
    ipcp__rx_dev_t dev = {NULL, NULL, -1};
    ipcp__handle_t h = 0;
    ipcp__rx_t *x = NULL;
    IPCP_CHECK(ipcp__remote_mem(comm, buf, len, &dev));
    IPCP_CHECK(ipcp__remote_rma_ready(comm, type, rmem->owner, 1));
    ipcp_request_t *req =
        ipcp__onesided_req(comm, type, buf, len, rmem, offset);
    IPCP_CHECK(ipcp__remote_req(comm, req, &h));
    pthread_mutex_lock(&ipcp__remote_lock);
    ipcp_status_t st =
        ipcp__rx_start_rma(rm, type == IPCP_REQ_PUT, buf, len, rmem->owner,
                           rmem->addr + offset, dev.ops ? &dev : NULL, &x);
    if (st == IPCP_OK) {
        req->remote_op = x;
        atomic_fetch_add(&rmem->busy, 1);
        ipcp__list_push_back(&rm->posted, &req->link);
    }
    pthread_mutex_unlock(&ipcp__remote_lock);
    if (st != IPCP_OK) {
        ipcp__req_free(req);
        return st;
    }
    *out = ipcp__hptr(h);
    return IPCP_OK;
}

/* A remote request ended: a one-sided one no longer keeps its region. */
static void ipcp__remote_done(ipcp_request_t *req, ipcp_status_t st,
                              const char *msg)
{
    if (req->rmem)
        atomic_fetch_sub(&req->rmem->busy, 1);
    /* The transport moved it: its xfer is as ipcp__req_init left it, which
     * spares the request's next use clearing it (ipcp__req_new). */
    req->xfer_clean = 1;
    ipcp__req_complete(req, st, msg);
}

int ipcp__remote_poll(ipcp_request_t *req, uint64_t until)
{
    ipcp_status_t st = IPCP_OK;
    size_t nbytes = 0;
    if (atomic_load_explicit(&req->done, memory_order_acquire))
        return 1;
    if (req->remote_ordered)
        return ipcp__remote_poll_ordered(req, until);
    int r = ipcp__remote_spin((ipcp__rx_t **)&req->remote_op, &req->link, &st,
                              &nbytes, until);
    if (r <= 0) /* not yet, or completed by finalize */
        return r < 0;
    req->nbytes = nbytes;
    req->path = IPCP_PATH_REMOTE;
    ipcp__remote_done(req, st, st == IPCP_OK ? NULL : ipcp_last_error());
    return 1;
}

int ipcp__remote_busy(void)
{
    return ipcp__rx_busy() || ipcp__remote_order_busy();
}

void ipcp__remote_kick(void)
{
    ipcp__remote_order_poll(NULL);
    pthread_mutex_lock(&ipcp__remote_lock);
    ipcp__rx_progress(NULL);
    pthread_mutex_unlock(&ipcp__remote_lock);
}

ipcp_status_t ipcp__remote_barrier(ipcp_comm_t *comm)
{
    ipcp__remote_t *rm = comm->remote;
    ipcp_status_t st;
    size_t nbytes = 0;
    void *op = NULL;
    /* Not held while it waits: other threads' transfers must go on, and
     * this one's move on while it waits (a peer may wait for them before
     * it reaches the barrier). */
    pthread_mutex_lock(&ipcp__remote_lock);
    st = rm->ops->ibarrier(rm->ctx, &op);
    pthread_mutex_unlock(&ipcp__remote_lock);
    for (unsigned n = 1; st == IPCP_OK && op; n++) {
        ipcp__remote_order_poll(NULL);
        pthread_mutex_lock(&ipcp__remote_lock);
        ipcp__rx_progress(NULL);
        if (rm->ops->test(rm->ctx, op, &st, &nbytes))
            op = NULL;
        pthread_mutex_unlock(&ipcp__remote_lock);
        if (n % 4096 == 0)
            sched_yield();
    }
    return st;
}

void ipcp__remote_end(ipcp_comm_t *comm)
{
    ipcp__remote_t *rm = comm->remote;
    ipcp__list_t *e;
    if (!rm)
        return;
    pthread_mutex_lock(&ipcp__remote_lock);
    /* Every transfer, a blocking call's too (it frees its own). */
    ipcp__rx_end_all(rm);
    ipcp__remote_order_end(comm);
    while ((e = ipcp__list_pop_front(&rm->posted))) {
        ipcp_request_t *req = ipcp__list_entry(e, ipcp_request_t, link);
        ipcp__rx_free(req->remote_op);
        req->remote_op = NULL;
        ipcp__remote_done(req, IPCP_ERR_STATE,
                          "finalized before its transfer with a rank on "
                          "another node ended");
    }
    /* Before the backends close: the slots are registered with them. */
    ipcp__rx_stage_free(rm);
    pthread_mutex_unlock(&ipcp__remote_lock);
}

void ipcp__remote_free(ipcp__remote_t *rm)
{
    if (!rm)
        return;
    pthread_mutex_lock(&ipcp__remote_lock);
    rm->ops->close(rm->ctx);
    pthread_mutex_unlock(&ipcp__remote_lock);
    free(rm->local);
    free(rm->global);
    free(rm->seq);
    free(rm->held);
    free(rm);
}

/* Every number here named by exactly one rank of the job, this rank's
 * by it. */
static ipcp_status_t ipcp__remote_check(const ipcp_comm_t *comm, int rank,
                                        int size, const int *local)
{
    if (size < comm->size || rank < 0 || rank >= size || !local)
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_INIT, IPCP_ERR_INVALID,
                          "a job of %d ranks (this one %d) cannot hold the "
                          "%d ranks of this node",
                          size, rank, comm->size);
    unsigned char *seen = calloc((size_t)comm->size, 1);
    int bad = !seen || local[rank] != comm->rank;
    for (int r = 0; r < size && !bad; r++) {
        bad = local[r] < -1 || local[r] >= comm->size ||
              (local[r] >= 0 && seen[local[r]]++);
    }
    for (int i = 0; i < comm->size && !bad; i++)
        bad = !seen[i];
    free(seen);
    if (bad)
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_INIT, IPCP_ERR_INVALID,
                          "the job's map does not name each of this node's "
                          "%d ranks once, this one (%d) as number %d",
                          comm->size, rank, comm->rank);
    return IPCP_OK;
}

ipcp_status_t ipcp__comm_remote(ipcp_comm_t *comm_h, const char *job, int rank,
                                int size, const int *local,
                                const ipcp__remote_ops_t *ops, void *ctx)
{
    ipcp_comm_t *comm;
    ipcp__remote_t *rm = NULL;
    ipcp_status_t st = ipcp__comm_get(comm_h, &comm);
    if (st == IPCP_OK && comm->remote)
        st = ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_INIT, IPCP_ERR_STATE,
                        "the communicator reaches other nodes already");
    if (st == IPCP_OK)
        st = ipcp__remote_check(comm, rank, size, local);
    if (st == IPCP_OK &&
        (!(rm = calloc(1, sizeof(*rm))) ||
         !(rm->local = malloc(sizeof(int) * (size_t)size)) ||
         !(rm->global = malloc(sizeof(int) * (size_t)comm->size)) ||
         !(rm->seq = calloc((size_t)size, sizeof(uint32_t))) ||
         !(rm->held = malloc(sizeof(ipcp__list_t) * (size_t)size))))
        st = ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_INIT, IPCP_ERR_NOMEM,
                        "no memory for the map of a job of %d ranks", size);
    if (st != IPCP_OK) {
        if (rm) {
            free(rm->local);
            free(rm->global);
            free(rm->seq);
            free(rm->held);
            free(rm);
        }
        pthread_mutex_lock(&ipcp__remote_lock);
        ops->close(ctx);
        pthread_mutex_unlock(&ipcp__remote_lock);
        return st;
    }
    rm->ops = ops;
    rm->ctx = ctx;
    snprintf(rm->job, sizeof(rm->job), "%s", job ? job : comm->job);
    rm->rank = rank;
    rm->size = size;
    memcpy(rm->local, local, sizeof(int) * (size_t)size);
    for (int r = 0; r < size; r++)
        ipcp__list_init(&rm->held[r]);
    for (int r = 0; r < size; r++)
        if (local[r] >= 0)
            rm->global[local[r]] = r;
    ipcp__list_init(&rm->posted);
    ipcp__list_init(&rm->slots);
    ipcp__list_init(&rm->queues);
    ipcp__list_init(&rm->rooms);
    ipcp__list_init(&rm->asking);
    ipcp__list_init(&rm->spare);
    ipcp__list_init(&rm->xfers);
    /* Whole pages: a receiver refuses other piece sizes. */
    rm->chunk = comm->cfg->remote_chunk & ~(size_t)4095;
    rm->inline_max = comm->cfg->remote_inline;
    comm->remote = rm;
    IPCP_INFO(IPCP_SUB_INIT,
              "rank %d of %d: %d ranks on this node (here rank %d), the "
              "others through %s",
              rank, size, comm->size, comm->rank, ops->name);
    return IPCP_OK;
}
