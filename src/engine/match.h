/* Matching: posted receives against what peers send, in order per peer
 * and tag (match.c). */
#ifndef IPCP_ENGINE_MATCH_H
#define IPCP_ENGINE_MATCH_H

#include "engine/comm.h"

/* A fault stage (common/fault.h) of a two-sided message with tag: the
 * library's own messages (negative tags: a barrier's) are none of the
 * stages IPCPIPE_FAULT counts, which are those of users' transfers. */
static inline void ipcp__fault_msg(int stage, int tag)
{
    if (tag >= 0)
        ipcp__fault_point(stage);
}

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
/* An eager send of len host bytes written by the caller into rank's inbox
 * (the way of ipcp__match_fast for a send, with no request): 1 when it
 * left, and then it is complete; 0 when it must go the way of requests
 * (too large for the eager size or the slots, a forced path, commands to
 * the peer still queued, no room). */
int ipcp__send_now(ipcp_comm_t *comm, int rank, const void *buf, size_t len,
                   int tag);
/* A host receive of up to cap bytes taken at once by the caller (no
 * request): the first message kept for tag, else the one at the head of
 * rank's inbox when it has tag and no receive posted earlier asks for
 * tag, when that message is an eager one that fits.  1 when taken (*got
 * bytes in buf): complete; 0 when it must go the way of requests. */
int ipcp__recv_now(ipcp_comm_t *comm, int rank, void *buf, size_t cap, int tag,
                   size_t *got);
/* Whether rank has a message kept or a record at its inbox's head (a
 * look without a lock: ipcp__recv_now may still decline).  Asked before
 * ipcp__recv_now, which does not look again. */
int ipcp__recv_maybe(ipcp_comm_t *comm, int rank);
/* Whether a receive with tag is posted for peer's messages: 0 none, 1 one
 * whose caller reads the inbox itself (watch), or rx_lock is taken, 2
 * another. */
int ipcp__match_posted(ipcp__peer_t *peer, int tag);
/* An eager message (IPCP_MSG_EAGER): to the first receive posted with its
 * tag, or kept.  caller: a waiting caller reads it, which leaves it (0)
 * when it would need the device or the message is malformed;
 * IPCP_MATCH_POSTED: a caller that leaves it also when no receive is
 * posted for it. */
#define IPCP_MATCH_POSTED 2
/* With IPCP_MATCH_RING (or-ed into caller): msg is a record in the peer's
 * inbox, where alone a pipelined one (IPCP_EAGER_PIPE) may be; anywhere
 * else (a socket message, a copy) one is malformed: its fill word would
 * never move. */
#define IPCP_MATCH_RING 4
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
