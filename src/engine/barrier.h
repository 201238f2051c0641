/* Barriers (barrier.c). */
#ifndef IPCP_ENGINE_BARRIER_H
#define IPCP_ENGINE_BARRIER_H

#include "engine/comm.h"

void ipcp__barrier_cmd(ipcp_comm_t *comm, ipcp_request_t *req);
void ipcp__barrier_msg(ipcp_comm_t *comm, ipcp__peer_t *peer, int type,
                       uint64_t epoch);
void ipcp__barrier_fail(ipcp_comm_t *comm, const char *msg);
/* Fails a barrier whose deadline passed (progress loop). */
void ipcp__barrier_check(ipcp_comm_t *comm);

#endif
