/* What the rest of the engine calls of the paths (xfer.c, accept.c,
 * send.c, staged.c, share.c, drive.c; their shared parts: xfer.h). */
#ifndef IPCP_ENGINE_PATHS_H
#define IPCP_ENGINE_PATHS_H

#include "engine/comm.h"

/* The protocol both ends of a connection must share: IPCP_PROTO_VERSION
 * and the names of the routes in order (a hash), for the bootstrap's
 * hello (route.c).  No route can be added after the first call. */
uint32_t ipcp__proto(void);

/* Receiver side: chooses the path for a matched RTS, enqueues its half and
 * answers with a CTS.  dst/attr describe where the data lands. */
void ipcp__xfer_accept(ipcp_comm_t *comm, ipcp__peer_t *peer,
                       const ipcp__msg_rts_t *rts, ipcp_request_t *req,
                       ipcp_path_t force);
/* Sender side: the DRIVEN CTS that ends a SPLIT send whose own half is
 * under way or done (1), else 0. */
int ipcp__split_end(ipcp_comm_t *comm, ipcp__peer_t *peer,
                    const ipcp__msg_cts_t *cts);
/* Sender side: runs its half on a CTS (the step of the route the CTS
 * names); closes fds. */
void ipcp__xfer_on_cts(ipcp_comm_t *comm, ipcp__peer_t *peer,
                       ipcp_request_t *req, const ipcp__msg_cts_t *cts,
                       int *fds, int nfds);
/* The sender's step of the sent and split routes (ipcp__route_t tx). */
void ipcp__xfer_tx_sent(ipcp_comm_t *comm, ipcp__peer_t *peer,
                        ipcp_request_t *req, const ipcp__msg_cts_t *cts,
                        const int *fds, int nfds);

#endif
