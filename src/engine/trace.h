/* Tracing of transfers (trace.c). */
#ifndef IPCP_ENGINE_TRACE_H
#define IPCP_ENGINE_TRACE_H

#include "engine/comm.h"

void ipcp__trace_open(ipcp_comm_t *comm);
void ipcp__trace_prepare(ipcp_comm_t *comm, ipcp__xfer_t *x, size_t n);
void ipcp__trace_mark(ipcp_request_t *req, int mark);
void ipcp__trace_piece(ipcp__xfer_t *x, size_t i, ipcp__qset_t *qs, int qi,
                       uint64_t bytes, int before);
/* Piece i is one half of a driven staged part's chunk (IPCP_STAGE_*). */
void ipcp__trace_piece_stage(ipcp__xfer_t *x, size_t i, int half);
void ipcp__trace_xfer(ipcp_comm_t *comm, ipcp__xfer_t *x, int rx, int path);
/* A send the receiver copied (IPCPIPE_DRIVE), ended by its last message:
 * the protocol's marks on one span from the call (no copies of ours). */
void ipcp__trace_send_driven(ipcp_comm_t *comm, ipcp__peer_t *peer,
                             ipcp_request_t *req, int path);
void ipcp__trace_flush(ipcp_comm_t *comm);
void ipcp__trace_merge(ipcp_comm_t *comm);
void ipcp__trace_close(ipcp_comm_t *comm);

#endif
