/* The public API: argument checks, then dispatch to the engine. */
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
#include "engine/remote_xfer.h"
#include "ipcpipe_cuda.h"

void ipcp_alloc_params_init(ipcp_alloc_params_t *params)
{
    if (!params)
        return;
    memset(params, 0, sizeof(*params));
    params->struct_size = sizeof(*params);
    params->type = IPCP_MEM_HOST;
}

/* ---- Handles ----------------------------------------------------------- */

/* The public pointer types carry handle values (common/handle.h), never
 * addresses: every call resolves its handles before it touches an object,
 * so a stale, made-up or mistyped handle is an error, not a use after
 * free.  Names by handle type, with and without an article. */
static const char *const ipcp__hkind[IPCP_HANDLE_NTYPES] = {
    "handle", "communicator", "request", "registration", "imported region"};
static const char *const ipcp__ha[IPCP_HANDLE_NTYPES] = {
    "a handle", "a communicator", "a request", "a registration",
    "an imported region"};
/* What made a handle of each type stale. */
static const char *const ipcp__hgone[IPCP_HANDLE_NTYPES] = {
    "", "already finalized",
    "already completed and freed, or its communicator was finalized",
    "already deregistered, or its communicator was finalized",
    "already released, or its communicator was finalized"};

/* Why p is not a live handle of this type.  A stale communicator is
 * IPCP_ERR_STATE (finalized: what a second ipcp_finalize has always
 * returned); anything else is IPCP_ERR_INVALID. */
static ipcp_status_t ipcp__handle_fail(const void *p, unsigned type)
{
    ipcp__handle_t h = (uintptr_t)p;
    unsigned t = ipcp__handle_type(h);
    unsigned long long v = h;
    if (!h)
        return ipcp__fail(IPCP_LOG_INFO, IPCP_SUB_API, IPCP_ERR_INVALID,
                          "%s is NULL", ipcp__hkind[type]);
    if (t != type && t != 0 && t < IPCP_HANDLE_NTYPES && ipcp__handle_get(h, t))
        return ipcp__fail(IPCP_LOG_INFO, IPCP_SUB_API, IPCP_ERR_INVALID,
                          "0x%llx is %s handle, not %s handle", v, ipcp__ha[t],
                          ipcp__ha[type]);
    if (t == type && ipcp__handle_stale(h))
        return ipcp__fail(IPCP_LOG_INFO, IPCP_SUB_API,
                          type == IPCP_HANDLE_COMM ? IPCP_ERR_STATE
                                                   : IPCP_ERR_INVALID,
                          "%s handle 0x%llx is stale: %s", ipcp__hkind[type], v,
                          ipcp__hgone[type]);
    return ipcp__fail(IPCP_LOG_INFO, IPCP_SUB_API, IPCP_ERR_INVALID,
                      "0x%llx is not %s handle (not a value this library "
                      "issued)",
                      v, ipcp__ha[type]);
}

ipcp_status_t ipcp__comm_get(const ipcp_comm_t *h, ipcp_comm_t **comm)
{
    *comm = ipcp__handle_get((uintptr_t)h, IPCP_HANDLE_COMM);
    return ipcp__likely(*comm != NULL) ? IPCP_OK
                                       : ipcp__handle_fail(h, IPCP_HANDLE_COMM);
}

static ipcp_status_t ipcp__req_get(const ipcp_request_t *h,
                                   ipcp_request_t **req)
{
    *req = ipcp__handle_get((uintptr_t)h, IPCP_HANDLE_REQ);
    return ipcp__likely(*req != NULL) ? IPCP_OK
                                      : ipcp__handle_fail(h, IPCP_HANDLE_REQ);
}

ipcp_status_t ipcp__mem_get(const ipcp_mem_t *h, ipcp_mem_t **mem)
{
    *mem = ipcp__handle_get((uintptr_t)h, IPCP_HANDLE_MEM);
    return ipcp__likely(*mem != NULL) ? IPCP_OK
                                      : ipcp__handle_fail(h, IPCP_HANDLE_MEM);
}

ipcp_status_t ipcp__rmem_get(const ipcp_rmem_t *h, ipcp_rmem_t **rm)
{
    *rm = ipcp__handle_get((uintptr_t)h, IPCP_HANDLE_RMEM);
    return ipcp__likely(*rm != NULL) ? IPCP_OK
                                     : ipcp__handle_fail(h, IPCP_HANDLE_RMEM);
}

/* Releases a live handle that a call is about to free the object of.  Of
 * two threads releasing the same handle at once, the one that loses gets
 * the stale error here, before it touches the object the other frees. */
ipcp_status_t ipcp__handle_claim(const void *p, unsigned type)
{
    return ipcp__handle_free((uintptr_t)p) ? IPCP_OK
                                           : ipcp__handle_fail(p, type);
}

/* The value a caller gets for an object's handle. */
void *ipcp__hptr(ipcp__handle_t h)
{
    return (void *)(uintptr_t)h;
}

int ipcp__misaligned(const void *p, size_t align)
{
    return ((uintptr_t)p & (align - 1)) != 0;
}

ipcp_status_t ipcp__bad_arg(const char *what)
{
    return ipcp__fail(IPCP_LOG_INFO, IPCP_SUB_API, IPCP_ERR_INVALID, "%s",
                      what);
}

/* ---- Init and finalize --------------------------------------------------- */

const ipcp__backend_ops_t *ipcp__device_backend_for_tests;

/* The device backends built in; the engine asks the one chosen through its
 * table (what it can do: the functions it fills) and never by name. */
static const ipcp__backend_ops_t *const ipcp__device_backends[] = {
#ifdef IPCP_HAVE_CUDA
    &ipcp__cuda_backend_ops,
#endif
    NULL,
};

/* The host backend opens now; the device backend is only chosen here (the
 * first built in, or a test's, unless IPCPIPE_CUDA=off) and opens on first
 * use (engine/dev.c), so that a job that moves host memory only never
 * initializes a device. */
static ipcp_status_t ipcp__open_backends(ipcp_comm_t *comm)
{
    const ipcp__backend_ops_t *dev = ipcp__device_backend_for_tests;
    uint64_t t0 = ipcp__now_ns();
    comm->host_ops = &ipcp__host_backend_ops;
    IPCP_CHECK(comm->host_ops->open(comm->cfg, &comm->host));
    IPCP_DEBUG(IPCP_SUB_INIT, "host backend opened in %.2f ms",
               (double)(ipcp__now_ns() - t0) / 1e6);
    if (!dev)
        dev = ipcp__device_backends[0];
    if (dev && comm->cfg->cuda != IPCP_CUDA_OFF)
        comm->dev_ops = dev;
    /* The small-message lane is for device memory only: a job that sets it
     * pays the device's start here, so that its blocks are made and
     * exchanged in the order they were before the device opened on first
     * use (under compute-sanitizer, lane kernels between two processes of
     * one GPU hung and reported writes out of bounds otherwise; without
     * it the lane's tests passed either way). */
    if (comm->dev_ops && comm->cfg->small > 0)
        (void)ipcp__dev_get(comm, IPCP_LOG_INFO,
                            "the small-message lane (IPCPIPE_SMALL)");
    return IPCP_OK;
}

static void ipcp__comm_free(ipcp_comm_t *comm)
{
    for (int r = 0; r < comm->size; r++)
        if (comm->peers[r].fd >= 0)
            close(comm->peers[r].fd);
    if (comm->boot)
        ipcp__boot_destroy(comm->boot);
    /* Closing would free memory that lane kernels still queued behind a
     * user's work will touch (ipcp__lane_teardown warned). */
    if (ipcp__dev(comm) && !comm->lane_leaked) {
        uint64_t t0 = ipcp__now_ns();
        comm->dev_ops->close(ipcp__dev(comm));
        IPCP_DEBUG(IPCP_SUB_INIT, "%s backend closed in %.2f ms",
                   comm->dev_ops->name, (double)(ipcp__now_ns() - t0) / 1e6);
    }
    if (comm->host && !comm->lane_leaked)
        comm->host_ops->close(comm->host);
    ipcp__comm_delete(comm);
}

static ipcp_status_t ipcp__resolve(const ipcp_comm_params_t *params,
                                   const ipcp__config_t *cfg,
                                   ipcp__boot_params_t *bp, ipcp_path_t *path)
{
    ipcp_comm_params_t p;
    ipcp__boot_origin_t origin;

    ipcp_comm_params_init(&p);
    if (params) {
        if (params->struct_size < offsetof(ipcp_comm_params_t, rank) ||
            params->struct_size > sizeof(p))
            return ipcp__bad_arg("params->struct_size is not the size of an "
                                 "ipcp_comm_params_t (call "
                                 "ipcp_comm_params_init)");
        memcpy(&p, params, params->struct_size);
    }
    if (!ipcp__path_forceable(p.path))
        return ipcp__bad_arg("params->path must be AUTO, DIRECT, STAGED or "
                             "BOUNCE");
    /* NaN compares false with everything: it would pass for "not set". */
    if (!isfinite(p.timeout_s) || p.timeout_s > 1e9)
        return ipcp__fail(IPCP_LOG_INFO, IPCP_SUB_API, IPCP_ERR_INVALID,
                          "params->timeout_s is %g: a finite number of "
                          "seconds (<= 0 for IPCPIPE_TIMEOUT) is needed",
                          p.timeout_s);
    IPCP_CHECK(ipcp__boot_resolve(
        cfg, p.rank, p.size, p.job_id,
        p.timeout_s > 0 ? p.timeout_s : cfg->timeout_s, bp, &origin));
    snprintf(bp->dir, sizeof(bp->dir), "%s", cfg->dir);
    *path =
        p.path != IPCP_PATH_AUTO ? p.path : ipcp__path_of_setting(cfg->path);
    IPCP_INFO(IPCP_SUB_INIT,
              "rank %d (from %s) of %d (from %s), job '%s' "
              "(from %s)",
              bp->rank, origin.rank_from, bp->size, origin.size_from, bp->job,
              origin.job_from);
    return IPCP_OK;
}

ipcp_status_t ipcp_init(const ipcp_comm_params_t *params, ipcp_comm_t **out)
{
    const ipcp__config_t *cfg;
    ipcp__boot_params_t bp;
    ipcp_comm_t *comm = NULL;
    ipcp_path_t path = IPCP_PATH_AUTO;
    ipcp_status_t st;
    uint64_t t0 = ipcp__now_ns();

    if (!out || ipcp__misaligned(out, sizeof(void *)))
        return ipcp__bad_arg("comm output pointer is NULL or misaligned");
    IPCP_CHECK(ipcp__config_get(&cfg));
    memset(&bp, 0, sizeof(bp));
    IPCP_CHECK(ipcp__resolve(params, cfg, &bp, &path));
    /* Before anything is allocated per rank: a job too large for the
     * descriptor limit is refused at once. */
    IPCP_CHECK(ipcp__boot_check(&bp));
    IPCP_CHECK(ipcp__comm_new(bp.rank, bp.size, bp.job, bp.timeout_s, &comm));
    comm->cfg = cfg;
    atomic_init(&comm->path, path);
    comm->eager_max = cfg->eager;
    ipcp__trace_open(comm);
    bp.probe_addr = (uint64_t)(uintptr_t)&comm->probe_word;
    bp.proto = ipcp__proto();
    ipcp__log_set_rank(bp.rank);
    st = ipcp__boot_connect(&bp, &comm->boot);
    if (st != IPCP_OK)
        goto err_free;
    IPCP_DEBUG(IPCP_SUB_INIT,
               "bootstrap done %.1f ms into init (it waits "
               "for every rank)",
               (double)(ipcp__now_ns() - t0) / 1e6);
    for (int r = 0; r < comm->size; r++) {
        ipcp__peer_t *p = &comm->peers[r];
        p->fd = comm->boot->peers[r].fd;
        p->pid = comm->boot->peers[r].pid;
        p->probe_addr = comm->boot->peers[r].probe_addr;
        comm->boot->peers[r].fd = -1; /* the engine owns the sockets now */
    }
    st = ipcp__open_backends(comm);
    if (st != IPCP_OK)
        goto err_free;
    st = ipcp__comm_start(comm); /* the peers' engines started too */
    if (st != IPCP_OK)
        goto err_stop;
    st = ipcp__handle_new(IPCP_HANDLE_COMM, comm, &comm->handle);
    if (st != IPCP_OK)
        goto err_stop;
    IPCP_INFO(IPCP_SUB_INIT,
              "rank %d of %d ready in %.1f ms (job '%s', "
              "cuda %s)",
              comm->rank, comm->size, (double)(ipcp__now_ns() - t0) / 1e6,
              comm->job, comm->dev_ops ? "on first use" : "off");
    *out = ipcp__hptr(comm->handle);
    return IPCP_OK;
err_stop:
    ipcp__comm_stop(comm);
    ipcp__comm_teardown(comm);
err_free:
    ipcp__comm_free(comm);
    return st;
}

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

ipcp_status_t ipcp_finalize(ipcp_comm_t *comm_h)
{
    ipcp_comm_t *comm;
    IPCP_CHECK(ipcp__comm_get(comm_h, &comm));
    /* Stale from here on; teardown makes the handles of its requests,
     * registrations and imported regions stale as it frees them. */
    IPCP_CHECK(ipcp__handle_claim(comm_h, IPCP_HANDLE_COMM));
    ipcp_status_t st = IPCP_OK;
    uint64_t t0 = ipcp__now_ns();
    struct ipcp__remote *remote = comm->remote;
    ipcp__remote_end(comm);
    ipcp_request_t *bye = ipcp__req_new(comm, IPCP_REQ_BYE);
    char msg[IPCP_ERRMSG_MAX] = "";
    if (bye) {
        ipcp__comm_submit(comm, bye);
        /* Freed regardless; the caller learns that some peer did not say
         * goodbye in time. */
        if ((st = ipcp__wait_req(bye, NULL)) != IPCP_OK) {
            snprintf(msg, sizeof(msg), "%s", ipcp_last_error());
            IPCP_WARN(IPCP_SUB_INIT, "finalize: %s", msg);
        }
    }
    /* Each step's time at debug level: the goodbye waits for the slowest
     * peer; the rest is this process's own cost. */
    uint64_t t1 = ipcp__now_ns();
    ipcp__comm_stop(comm);
    uint64_t t2 = ipcp__now_ns();
    ipcp__comm_teardown(comm);
    uint64_t t3 = ipcp__now_ns();
    ipcp__comm_free(comm);
    ipcp__remote_free(remote);
    IPCP_DEBUG(IPCP_SUB_INIT,
               "finalize: goodbye %.2f ms, progress thread "
               "%.2f ms, teardown %.2f ms, backends %.2f ms",
               (double)(t1 - t0) / 1e6, (double)(t2 - t1) / 1e6,
               (double)(t3 - t2) / 1e6, (double)(ipcp__now_ns() - t3) / 1e6);
    if (st != IPCP_OK)
        ipcp__set_last_error(msg);
    return st;
}

int ipcp_comm_rank(const ipcp_comm_t *comm_h)
{
    ipcp_comm_t *comm;
    return ipcp__comm_get(comm_h, &comm) == IPCP_OK ? ipcp__comm_me(comm) : -1;
}

int ipcp_comm_size(const ipcp_comm_t *comm_h)
{
    ipcp_comm_t *comm;
    return ipcp__comm_get(comm_h, &comm) == IPCP_OK ? ipcp__comm_nranks(comm)
                                                    : -1;
}

const char *ipcp_comm_job(const ipcp_comm_t *comm_h)
{
    ipcp_comm_t *comm;
    if (ipcp__comm_get(comm_h, &comm) != IPCP_OK)
        return "";
    return comm->remote ? ipcp__comm_job_name(comm) : comm->job;
}

ipcp_status_t ipcp_comm_set_path(ipcp_comm_t *comm_h, ipcp_path_t path)
{
    ipcp_comm_t *comm;
    IPCP_CHECK(ipcp__comm_get(comm_h, &comm));
    if (!ipcp__path_forceable(path))
        return ipcp__bad_arg("path must be IPCP_PATH_AUTO, IPCP_PATH_DIRECT, "
                             "IPCP_PATH_STAGED or IPCP_PATH_BOUNCE");
    atomic_store(&comm->path, path);
    /* Peers learn it before anything this thread sends them later, since
     * the announcement is queued ahead on the same ordered sockets. */
    ipcp_request_t *req = ipcp__req_new(comm, IPCP_REQ_PATH);
    if (!req)
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_API, IPCP_ERR_NOMEM,
                          "no memory for a request");
    ipcp__comm_submit(comm, req);
    return ipcp__wait_req(req, NULL);
}

ipcp_status_t ipcp_barrier(ipcp_comm_t *comm_h)
{
    ipcp_comm_t *comm;
    IPCP_CHECK(ipcp__comm_get(comm_h, &comm));
    ipcp_request_t *req = ipcp__req_new(comm, IPCP_REQ_BARRIER);
    if (!req)
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_API, IPCP_ERR_NOMEM,
                          "no memory for a request");
    ipcp__comm_submit(comm, req);
    IPCP_CHECK(ipcp__wait_req(req, NULL));
    return comm->remote ? ipcp__remote_barrier(comm) : IPCP_OK;
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
static void ipcp__classify(ipcp_comm_t *comm, ipcp_request_t *req)
{
    const ipcp__backend_ops_t *ops;
    ipcp__backend_t *be;
    ipcp__mem_attr(comm, req->buf, req->len, &req->attr, &ops, &be);
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

ipcp_request_t *ipcp__twosided_req(ipcp_comm_t *comm, int type, void *buf,
                                   size_t len, int peer, int tag)
{
    ipcp_request_t *req = ipcp__req_new(comm, type);
    if (!req) {
        ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_API, IPCP_ERR_NOMEM,
                   "no memory for a request");
        return NULL;
    }
    req->buf = buf;
    req->len = len;
    req->peer = peer;
    req->tag = tag;
    return req;
}

ipcp_status_t ipcp__post(ipcp_comm_t *comm, int type, void *buf, size_t len,
                         int peer, int tag, ipcp_request_t **out)
{
    ipcp_request_t *req = ipcp__twosided_req(comm, type, buf, len, peer, tag);
    return req ? ipcp__submit(comm, req, out) : IPCP_ERR_NOMEM;
}

/* A new one-sided request (not yet checked against the buffer's memory). */
ipcp_request_t *ipcp__onesided_req(ipcp_comm_t *comm, int type, void *buf,
                                   size_t len, ipcp_rmem_t *rm, size_t offset)
{
    ipcp_request_t *req = ipcp__req_new(comm, type);
    if (!req) {
        ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_API, IPCP_ERR_NOMEM,
                   "no memory for a request");
        return NULL;
    }
    req->buf = buf;
    req->len = len;
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

ipcp_status_t ipcp_isend(ipcp_comm_t *comm_h, const void *buf, size_t len,
                         int peer, int tag, ipcp_request_t **req)
{
    ipcp_comm_t *comm;
    IPCP_CHECK(ipcp__comm_get(comm_h, &comm));
    IPCP_CHECK(ipcp__check_xfer(comm, buf, len, peer, tag, req));
    if (ipcp__remote_route(comm, &peer))
        return ipcp__remote_post(comm, IPCP_REQ_SEND, (void *)buf, len, peer,
                                 tag, req);
    return ipcp__post(comm, IPCP_REQ_SEND, (void *)buf, len, peer, tag, req);
}

ipcp_status_t ipcp_irecv(ipcp_comm_t *comm_h, void *buf, size_t len, int peer,
                         int tag, ipcp_request_t **req)
{
    ipcp_comm_t *comm;
    IPCP_CHECK(ipcp__comm_get(comm_h, &comm));
    IPCP_CHECK(ipcp__check_xfer(comm, buf, len, peer, tag, req));
    if (ipcp__remote_route(comm, &peer))
        return ipcp__remote_post(comm, IPCP_REQ_RECV, buf, len, peer, tag, req);
    return ipcp__post(comm, IPCP_REQ_RECV, buf, len, peer, tag, req);
}

/* A blocking send or receive.  Host memory the mailbox takes goes the
 * caller's own way with its request on its stack: no allocation, handle
 * or finalize list (engine/mbox.c).  Anything else goes the way of
 * requests, with the buffer classified once. */
static ipcp_status_t ipcp__blocking(ipcp_comm_t *comm_h, int type, void *buf,
                                    size_t len, int peer, int tag,
                                    ipcp_xfer_info_t *info)
{
    ipcp_comm_t *comm;
    ipcp_request_t *out, req;
    IPCP_CHECK(ipcp__comm_get(comm_h, &comm));
    IPCP_CHECK(ipcp__check_xfer(comm, buf, len, peer, tag, &out));
    if (ipcp__remote_route(comm, &peer))
        return ipcp__remote_blocking(comm, type, buf, len, peer, tag, info);
    ipcp__req_clear(&req, comm->trace_on, 1);
    req.xfer_unset = 1;
    ipcp__req_init(comm, &req, type);
    req.on_stack = 1;
    req.buf = buf;
    req.len = len;
    req.peer = peer;
    req.tag = tag;
    ipcp__classify(comm, &req);
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
    IPCP_CHECK(ipcp__req_get(req_h, &req));
    IPCP_CHECK(ipcp__claim_req(req_h, req));
    if (req->type == IPCP_REQ_REMOTE)
        ipcp__remote_poll(req, 0);
    return ipcp__wait_req(req, info);
}

ipcp_status_t ipcp_wait_for(ipcp_request_t *req_h, double timeout_s, int *done,
                            ipcp_xfer_info_t *info)
{
    ipcp_request_t *req;
    IPCP_CHECK(ipcp__req_get(req_h, &req));
    if (!done)
        return ipcp__bad_arg("done is NULL");
    /* NaN compares false with everything. */
    if (!(timeout_s >= 0) || timeout_s > 1e9)
        return ipcp__fail(IPCP_LOG_INFO, IPCP_SUB_API, IPCP_ERR_INVALID,
                          "timeout_s is %g: 0 to 1e9 seconds", timeout_s);
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
    IPCP_CHECK(ipcp__req_get(req_h, &req));
    if (!done)
        return ipcp__bad_arg("done is NULL");
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
