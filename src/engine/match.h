/* Matching: posted receives against what peers send, in order per peer
 * and tag (match.c). */
#ifndef IPCP_ENGINE_MATCH_H
#define IPCP_ENGINE_MATCH_H

#include "engine/comm.h"

void ipcp__match_cmd(ipcp_comm_t *comm, ipcp_request_t *req);
void ipcp__match_msg(ipcp_comm_t *comm, ipcp__peer_t *peer,
                     const unsigned char *msg, size_t len, int *fds, int nfds);
/* Answers an RTS with a CTS that ends the sender's transfer: st (msg with
 * an error), flags and path (a DRIVEN one: the receiver copied it). */
void ipcp__cts_end(ipcp_comm_t *comm, ipcp__peer_t *peer, uint64_t id,
                   uint32_t flags, int path, ipcp_status_t st, const char *msg);
/* Answers an RTS with a CTS that carries an error. */
void ipcp__nack(ipcp_comm_t *comm, ipcp__peer_t *peer, uint64_t id,
                ipcp_status_t st, const char *msg);
void ipcp__match_fail_peer(ipcp_comm_t *comm, ipcp__peer_t *peer,
                           ipcp_status_t st, const char *msg);
/* The caller's own way (no progress thread): a small host send written
 * into the peer's inbox, or a host receive matched or posted at once.
 * Returns 1 when it took req (a send is complete then), 0 when req must
 * go to the progress thread. */
int ipcp__match_fast(ipcp_comm_t *comm, ipcp_request_t *req);
/* Whether a receive with tag is posted for peer's messages: 0 none, 1 one
 * whose caller reads the inbox itself (watch), or rx_lock is taken, 2
 * another. */
int ipcp__match_posted(ipcp__peer_t *peer, int tag);
/* An eager message (IPCP_MSG_EAGER): to the first receive posted with its
 * tag, or kept.  caller: a waiting caller reads it, which leaves it (0)
 * when it would need the device or the message is malformed. */
int ipcp__match_eager(ipcp_comm_t *comm, ipcp__peer_t *peer,
                      const unsigned char *msg, size_t len, int caller);

/* Shared by two-sided matching (match.c) and the one-sided operations
 * through the owner (onesided.c). */
/* The request with this id in a list of requests, or NULL. */
ipcp_request_t *ipcp__find_id(ipcp__list_t *list, uint64_t id);
/* An RTS for req: its tag, length and what the sender offers. */
void ipcp__rts_fill(ipcp_comm_t *comm, ipcp__peer_t *peer, ipcp_request_t *req,
                    ipcp__msg_rts_t *rts);
/* Sends it (offer: the buffer is offered for the receiver to copy). */
void ipcp__send_rts(ipcp_comm_t *comm, ipcp__peer_t *peer, ipcp_request_t *req,
                    ipcp__msg_rts_t *rts, int offer);

/* onesided.c: the owner's side of a staged put (its RTS) and get (its
 * GET_REQ), the origin's of a get's reply, and the origin's starts. */
void ipcp__on_rts_put(ipcp_comm_t *comm, ipcp__peer_t *peer,
                      const ipcp__msg_rts_t *rts);
void ipcp__on_get_req(ipcp_comm_t *comm, ipcp__peer_t *peer,
                      const ipcp__msg_get_req_t *g);
void ipcp__on_rts_get_reply(ipcp_comm_t *comm, ipcp__peer_t *peer,
                            const ipcp__msg_rts_t *rts);
void ipcp__put_start(ipcp_comm_t *comm, ipcp__peer_t *peer,
                     ipcp_request_t *req);
void ipcp__get_start(ipcp_comm_t *comm, ipcp__peer_t *peer,
                     ipcp_request_t *req);

#endif
