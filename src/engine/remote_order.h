/* Stream-ordered transfers with ranks on other nodes (ipcpipe_cuda.h's
 * calls where the peer is elsewhere).  The user's stream writes the
 * request's start flag and waits for its done flag (engine/sync.h), as
 * for a peer on this node; once the start is seen the transfer runs as
 * a plain one through the transport (engine/remote_xfer.h), and its end
 * writes done.  Seeing the start and moving the transfer on happen where
 * transfers with other nodes progress: in the calls that wait for and
 * test them (any of the process's), and also on the communicator's
 * progress thread where the transport may be called from any thread at
 * any time (remote.h: threads; MPI_THREAD_MULTIPLE), so that a stream
 * synchronization alone then sees the transfer end. */
#ifndef IPCP_ENGINE_REMOTE_ORDER_H
#define IPCP_ENGINE_REMOTE_ORDER_H

#include "engine/comm.h"

/* Adds req (device memory, req->sync enqueued on the user's stream,
 * req->peer a rank of the job on another node). */
void ipcp__remote_order_post(ipcp_comm_t *comm, ipcp_request_t *req);
/* Starts the transfers whose streams got there and moves the started
 * ones on, of comm (NULL: every communicator's); returns how many ended.
 * Takes ipcp__remote_lock. */
int ipcp__remote_order_poll(ipcp_comm_t *only);
/* Whether any such transfer waits or runs (read without the lock). */
int ipcp__remote_order_busy(void);
/* Whether comm's progress thread moves its ordered transfers on: some
 * wait or run and its transport may be called from that thread. */
int ipcp__remote_order_driven(ipcp_comm_t *comm);
/* Finalize (under ipcp__remote_lock, after ipcp__rx_end_all): comm's
 * ordered transfers end with IPCP_ERR_STATE, their streams released. */
void ipcp__remote_order_end(ipcp_comm_t *comm);

#endif
