/* What the files of the public API (api.c, api_mem.c, api_stream.c)
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

/* A one-sided call's arguments, with the communicator and the remote
 * region they name (api_mem.c). */
ipcp_status_t ipcp__check_onesided(const ipcp_comm_t *comm_h, const void *buf,
                                   size_t len, const ipcp_rmem_t *rm_h,
                                   size_t offset, ipcp_comm_t **comm_p,
                                   ipcp_rmem_t **rm_p);

#endif
