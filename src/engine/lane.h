/* The small-message lane between GPUs (lane.c). */
#ifndef IPCP_ENGINE_LANE_H
#define IPCP_ENGINE_LANE_H

#include "engine/comm.h"

/* Whether a stream-ordered send or receive (a CUDA buffer, attr filled)
 * goes through the small-message lane. */
int ipcp__lane_takes(const ipcp_comm_t *comm, const ipcp_request_t *req);
/* With IPCPIPE_SMALL set: makes this rank's lanes with every peer on
 * device, unless made already (user thread; at ipcp_mem_alloc and
 * ipcp_mem_register of device memory).  Loading kernels synchronizes the
 * context under CUDA's lazy loading, which must not happen while a user's
 * stream waits for the peer. */
void ipcp__lane_preload(ipcp_comm_t *comm, int device);
/* Launches its kernel on the user's stream (user thread).  Takes req: on
 * success it is in the lane's list (out set) or freed (out NULL); on
 * failure freed. */
ipcp_status_t ipcp__lane_post(ipcp_comm_t *comm, ipcp_request_t *req,
                              void *stream, ipcp_request_t **out);
/* Progress thread: a peer's LANE message; our LANE command; completions. */
void ipcp__lane_on_msg(ipcp_comm_t *comm, ipcp__peer_t *peer, const void *msg,
                       size_t len, int *fds, int nfds);
void ipcp__lane_cmd(ipcp_comm_t *comm, ipcp_request_t *req);
int ipcp__lane_poll(ipcp_comm_t *comm);
/* The peer is gone: kernels waiting on it leave, their requests fail. */
void ipcp__lane_abort(ipcp_comm_t *comm, int peer, ipcp_status_t st,
                      const char *msg);
/* Teardown: waits (bounded) for every lane kernel, completes what is left
 * and frees the lanes. */
void ipcp__lane_teardown(ipcp_comm_t *comm);

#endif
