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
    "handle",       "communicator",    "request",
    "registration", "imported region", "request"};
static const char *const ipcp__ha[IPCP_HANDLE_NTYPES] = {
    "a handle",       "a communicator",     "a request",
    "a registration", "an imported region", "a request"};
/* What made a handle of each type stale. */
static const char *const ipcp__hgone[IPCP_HANDLE_NTYPES] = {
    "",
    "already finalized",
    "already completed and freed, or its communicator was finalized",
    "already deregistered, or its communicator was finalized",
    "already released, or its communicator was finalized",
    "already completed and freed, or its communicator was finalized"};

/* Why p is not a live handle of this type.  A stale communicator is
 * IPCP_ERR_STATE (finalized: what a second ipcp_finalize has always
 * returned); anything else is IPCP_ERR_INVALID. */
ipcp_status_t ipcp__handle_fail(const void *p, unsigned type)
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

ipcp_status_t ipcp__req_get(const ipcp_request_t *h, ipcp_request_t **req)
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
    return ipcp__cmd_wait(comm, ipcp__req_new(comm, IPCP_REQ_PATH), 0);
}

ipcp_status_t ipcp_barrier(ipcp_comm_t *comm_h)
{
    ipcp_comm_t *comm;
    IPCP_CHECK(ipcp__comm_get(comm_h, &comm));
    IPCP_CHECK(ipcp__barrier_here(comm));
    return comm->remote ? ipcp__remote_barrier(comm) : IPCP_OK;
}
