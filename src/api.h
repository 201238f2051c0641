/* What the files of the public API (api.c, api_mem.c, api_barrier.c, ...)
 * share: handle lookups, argument checks and the way requests go in. */
#ifndef IPCP_API_H
#define IPCP_API_H

#include "engine/engine.h"

/* Returns the status of expr when it is not IPCP_OK. */
#define IPCP_CHECK(expr)                                                       \
    do {                                                                       \
        ipcp_status_t ipcp_st_ = (expr);                                       \
        if (ipcp_st_ != IPCP_OK)                                               \
            return ipcp_st_;                                                   \
    } while (0)

/* The live objects behind public handles (IPCP_ERR_INVALID otherwise). */
ipcp_status_t ipcp__comm_get(const ipcp_comm_t *h, ipcp_comm_t **comm);
ipcp_status_t ipcp__mem_get(const ipcp_mem_t *h, ipcp_mem_t **mem);
ipcp_status_t ipcp__rmem_get(const ipcp_rmem_t *h, ipcp_rmem_t **rm);
ipcp_status_t ipcp__req_get(const ipcp_request_t *h, ipcp_request_t **req);
/* Why p is not a live handle of this type, as the call's error. */
ipcp_status_t ipcp__handle_fail(const void *p, unsigned type);
/* Releases a request's handle so that no second wait or test takes it. */
ipcp_status_t ipcp__handle_claim(const void *p, unsigned type);
/* The public pointer that carries handle h. */
void *ipcp__hptr(ipcp__handle_t h);
/* Argument checks: an output pointer's alignment, and the error every
 * bad argument gets (its message names what was wrong). */
int ipcp__misaligned(const void *p, size_t align);
ipcp_status_t ipcp__bad_arg(const char *what);
/* Waits for a request the caller owns; its status, and its info. */
ipcp_status_t ipcp__wait_req(ipcp_request_t *req, ipcp_xfer_info_t *info);
/* Hands an internal command to the engine (the caller runs it when it may,
 * with drive) and waits for it; req NULL (ipcp__req_new found no memory)
 * fails with IPCP_ERR_NOMEM. */
ipcp_status_t ipcp__cmd_wait(ipcp_comm_t *comm, ipcp_request_t *req, int drive);
/* A two-sided call's arguments, and a request's buffer against what the
 * memory registry knows of it. */
ipcp_status_t ipcp__check_xfer(const ipcp_comm_t *comm, const void *buf,
                               size_t len, int peer, int tag,
                               ipcp_request_t **req);
ipcp_status_t ipcp__check_extent(const ipcp_request_t *req);
/* Requests made and filled in for the engine (NULL: no memory). */
ipcp_request_t *ipcp__twosided_req(ipcp_comm_t *comm, int type, void *buf,
                                   size_t len, int peer, int tag);
ipcp_request_t *ipcp__onesided_req(ipcp_comm_t *comm, int type, void *buf,
                                   size_t len, ipcp_rmem_t *rm, size_t offset);
/* A one-sided request handed to the engine. */
ipcp_status_t ipcp__post_onesided(ipcp_comm_t *comm, int type, void *buf,
                                  size_t len, ipcp_rmem_t *rm, size_t offset,
                                  ipcp_request_t **out);

/* A two-sided transfer (peer: its number here): complete when posted
 * where the mailbox takes it at once, else a request handed to the
 * engine. */
ipcp_status_t ipcp__post(ipcp_comm_t *comm, int type, void *buf, size_t len,
                         int peer, int tag, ipcp_request_t **out);

/* The barrier of this node's ranks (api_barrier.c). */
ipcp_status_t ipcp__barrier_here(ipcp_comm_t *comm);

/* Ranks of a job that spans nodes (api_remote.c; engine/remote.h): this
 * rank and the job's size as the user sees them (the job's rank of a
 * number here: ipcp__job_rank); whether peer (a rank of the job) is on
 * another node, else *peer becomes its number here. */
int ipcp__comm_me(const ipcp_comm_t *comm);
int ipcp__comm_nranks(const ipcp_comm_t *comm);
/* The name of a job that spans nodes (comm->remote set). */
const char *ipcp__comm_job_name(const ipcp_comm_t *comm);
int ipcp__remote_route(const ipcp_comm_t *comm, int *peer);
/* A send or receive (type) with a rank on another node, through the
 * transport. */
ipcp_status_t ipcp__remote_post(ipcp_comm_t *comm, int type, void *buf,
                                size_t len, int peer, int tag,
                                ipcp_request_t **out);
/* The same, waiting for its end (no request made). */
ipcp_status_t ipcp__remote_blocking(ipcp_comm_t *comm, int type, void *buf,
                                    size_t len, int peer, int tag,
                                    ipcp_xfer_info_t *info);
/* Whether a put or get (type) with a region of rank owner on another node
 * can run: the transport has one-sided calls, and a transfer without a
 * request (with_req 0: a stream-ordered one) can move on without its
 * caller (the transport may be called from ipcpipe's thread). */
ipcp_status_t ipcp__remote_rma_ready(const ipcp_comm_t *comm, int type,
                                     int owner, int with_req);
/* A put or get (type) with a region on another node (rmem->remote). */
ipcp_status_t ipcp__remote_onesided(ipcp_comm_t *comm, int type, void *buf,
                                    size_t len, ipcp_rmem_t *rmem,
                                    size_t offset, ipcp_request_t **out);
/* A registration made reachable from other nodes where the job's
 * transport can (mem->wide_addr), and no longer. */
void ipcp__remote_attach(ipcp_comm_t *comm, ipcp_mem_t *mem);
void ipcp__remote_detach(ipcp_comm_t *comm, ipcp_mem_t *mem);
/* The job's rank of an imported region's owner. */
int ipcp__rmem_rank(const ipcp_rmem_t *rm);
/* Moves the transport on until req (IPCP_REQ_REMOTE) ends, or `until`
 * (0: no limit); whether it ended. */
int ipcp__remote_poll(ipcp_request_t *req, uint64_t until);
ipcp_status_t ipcp__remote_barrier(ipcp_comm_t *comm);
/* Moves the running transfers with other nodes on, once (stream-ordered
 * ones too). */
void ipcp__remote_kick(void);
/* Whether any transfer with another node waits or runs (read without the
 * lock). */
int ipcp__remote_busy(void);
/* Finalize: ends what runs through the transport, then (once the
 * communicator is gone) closes it. */
void ipcp__remote_end(ipcp_comm_t *comm);
void ipcp__remote_free(struct ipcp__remote *rm);

/* A one-sided call's arguments, with the communicator and the remote
 * region they name (api_mem.c). */
ipcp_status_t ipcp__check_onesided(const ipcp_comm_t *comm_h, const void *buf,
                                   size_t len, const ipcp_rmem_t *rm_h,
                                   size_t offset, ipcp_comm_t **comm_p,
                                   ipcp_rmem_t **rm_p);

#endif
