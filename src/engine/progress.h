/* What the communicator's own files share and nothing else calls: comm.c
 * (making and teardown), req.c (requests), peer.c (messages to peers,
 * loss, keepalive), incoming.c (what a turn takes in) and progress.c
 * (the progress thread and callers' turns).  Everything here runs under
 * comm->prog_lock: on the progress thread, in a caller's turn, or in the
 * teardown after the thread. */
#ifndef IPCPIPE_ENGINE_PROGRESS_H
#define IPCPIPE_ENGINE_PROGRESS_H

#include "engine/engine.h"

/* The peer a request is for (NULL: none, or the request names no peer). */
ipcp__peer_t *ipcp__req_peer(ipcp_comm_t *comm, const ipcp_request_t *req);
/* Sends what waits in the peer's queue, as far as the socket or the
 * mailbox takes it. */
void ipcp__peer_flush(ipcp_comm_t *comm, ipcp__peer_t *peer);
/* Declares lost the peers whose writes broke longer ago than allowed. */
void ipcp__wr_expire(ipcp_comm_t *comm, uint64_t now);
/* How often the keepalive looks at the peers, and the look itself. */
uint64_t ipcp__ka_step_ns(const ipcp_comm_t *comm);
void ipcp__keepalive(ipcp_comm_t *comm, uint64_t now);
/* Ends a finished transfer: its request, its imports, its trace. */
void ipcp__run_done(ipcp_comm_t *comm, ipcp__xfer_t *x);
/* Tells the sender of a receiver-driven transfer that it ended. */
void ipcp__drive_end(ipcp_comm_t *comm, ipcp__peer_t *peer, uint64_t id,
                     ipcp_path_t path, ipcp_status_t st, const char *msg);
/* A turn's reading of a peer: its socket (what it holds now), and its
 * inbox in the mailbox; how many messages each handled (a peer found
 * lost counts as one). */
int ipcp__peer_read(ipcp_comm_t *comm, ipcp__peer_t *peer);
int ipcp__peer_read_inbox(ipcp_comm_t *comm, ipcp__peer_t *peer);
/* Runs the commands user threads queued and ends the transfers backend
 * threads finished; how many, or -1 when a user thread held the lock (the
 * loop then comes back without sleeping). */
int ipcp__drain(ipcp_comm_t *comm);
/* Finalize's goodbye: a held one sent once the transfers whose receives
 * ended early are done, and finalize ended once every peer said its own
 * or is gone (each at the deadline at the latest). */
void ipcp__check_bye(ipcp_comm_t *comm);

#endif
