/* Stream-ordered operations (sync.c). */
#ifndef IPCP_ENGINE_SYNC_H
#define IPCP_ENGINE_SYNC_H

#include "engine/comm.h"

ipcp_status_t ipcp__sync_acquire(ipcp_comm_t *comm, int device,
                                 ipcp__sync_t **e);
void ipcp__sync_put(ipcp__sync_t *e);
uint64_t *ipcp__sync_start(ipcp__sync_t *e);
uint64_t *ipcp__sync_done(ipcp__sync_t *e);
uint64_t ipcp__sync_gen(const ipcp__sync_t *e);
int ipcp__sync_started(const ipcp__sync_t *e);
/* The operation ended (any thread): releases the user's stream and the
 * entry (at once, or once its start lands). */
void ipcp__sync_end(ipcp_comm_t *comm, ipcp__sync_t *e);
/* Progress thread: starts deferred operations whose stream got there. */
int ipcp__sync_poll(ipcp_comm_t *comm);
int ipcp__sync_pending(ipcp_comm_t *comm);
/* Whether a user's stream of this process may be waiting on a flag the
 * progress thread writes: a stream-ordered operation or a small-message
 * lane kernel in flight.  The driver calls that synchronize a context
 * (memory allocation and registration, module loading) must not run then:
 * they would wait for that stream, and it for us. */
int ipcp__streams_wait(ipcp_comm_t *comm);
void ipcp__sync_cleanup(ipcp_comm_t *comm);

/* Whether this rank also moves data with the peer in one direction:
 * receives (rx = 1: posted and not matched, or in queues) or sends (rx = 0:
 * waiting for a CTS, or in queues) of at least IPCP_STRIPE_MIN_SIZE bytes,
 * those in queues of device memory only.  Progress thread. */
int ipcp__peer_busy(ipcp__peer_t *peer, int rx);
/* A device send offered its buffer (an RTS with IPCP_RTS_SRC): the sender
 * polls until its CTS comes, at most IPCPIPE_SPIN_US plus as long as the
 * receiver's copy would take at IPCP_AWAIT_BYTES_PER_NS, from the offer.
 * ipcp__await_end when the CTS came (or the send ended otherwise;
 * ipcp__req_complete calls it).  Progress thread only. */
void ipcp__await_offer(ipcp_comm_t *comm, ipcp_request_t *req);
void ipcp__await_end(ipcp_request_t *req);
/* Whether an offered send may end at any moment (now: ipcp__now_ns). */
static inline int ipcp__awaiting(ipcp_comm_t *comm, uint64_t now)
{
    return atomic_load_explicit(&comm->offers, memory_order_relaxed) > 0 &&
           now < atomic_load_explicit(&comm->await_until, memory_order_relaxed);
}

#endif
