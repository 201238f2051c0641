/* One transfer with a rank on another node, over a transport
 * (engine/remote.h), for host and device memory alike.
 *
 * Every message is one message of the transport on channel 0 under the
 * user's tag.  A short message (past IPCP_RX_HEAD bytes, up to
 * IPCP_RX_INLINE) is its bytes alone: one contiguous message, which MPI
 * moves as it moves its own.  Any other is a header of at most
 * IPCP_RX_HEAD bytes: its length, and either its bytes (up to
 * IPCP_RX_COPY, copied behind it) or the number under which its pieces
 * follow on channel 1, in order, each of the header's piece size; the
 * receiver tells the two apart by the length that came.  A receive
 * posted at once offers IPCP_RX_INLINE bytes: in place when a host
 * buffer holds that many (a header landing there is read, and the bytes
 * it covered are put back), else in room of the job's (what is too long
 * for the buffer is dropped there), device memory through a pinned slot.
 * Where the transport can say a message's length first (improbe), a
 * host receive of 8 KiB up to IPCP_RX_INLINE asks it and takes the
 * message where it fits; one of its peer and tag posted after it waits
 * for it (remote_xfer.c: rx_ask).  A long message's
 * header tells the receiver the length before it takes any piece, so
 * each side picks its own way: host memory gives and takes the pieces in
 * place; device memory moves through a few pinned host slots of the
 * transfer's, the device-to-host copy of piece i+1 running while the
 * transport carries piece i (and the host-to-device copies likewise on
 * the far side), unless the transport reads device memory itself.  A
 * message longer than the receive is drained and nothing is written
 * (IPCP_ERR_TRUNCATED).
 *
 * Transfers progress only in the calls below, all made under
 * ipcp__remote_lock; ipcp__rx_progress moves the running transfers of
 * the process on in turn while any is waited for, so that one waiting
 * for its peer never blocks the transfer that peer waits for. */
#ifndef IPCP_ENGINE_REMOTE_XFER_H
#define IPCP_ENGINE_REMOTE_XFER_H

#include "backend/backend.h"
#include "engine/remote.h"

/* The longest short message (a multiple of 4096): what every receive
 * offers; a sender of host memory sends its bytes alone up to
 * IPCPIPE_REMOTE_INLINE (at most this). */
#define IPCP_RX_INLINE 65536
/* The longest header, with the bytes copied behind it (up to
 * IPCP_RX_COPY: cheaper than a message of their own there); a message on
 * channel 0 of more bytes is a short message's bytes alone, and one of
 * IPCP_RX_COPY to IPCP_RX_HEAD bytes goes in pieces. */
#define IPCP_RX_HEAD 256
#define IPCP_RX_COPY (IPCP_RX_HEAD - 24)

typedef struct ipcp__rx ipcp__rx_t;

/* The backend that owns a device buffer (NULL for host memory). */
typedef struct ipcp__rx_dev {
    const ipcp__backend_ops_t *ops;
    ipcp__backend_t *be;
    int device;
} ipcp__rx_dev_t;

/* Starts a send (send 1: len bytes at buf) or a receive (up to len) with
 * peer, a rank of the job on another node. */
ipcp_status_t ipcp__rx_start(ipcp__remote_t *rm, int send, void *buf,
                             size_t len, int peer, int tag,
                             const ipcp__rx_dev_t *dev, ipcp__rx_t **out);
/* Starts a put (put 1: len bytes at buf to address addr of rank peer's
 * memory, attached by its transport) or a get (from there into buf),
 * through the transport's one-sided calls (ops->iput, ops->iget; set).
 * Device memory (dev set) goes through pinned slots where the transport
 * does not read it: a put's pieces copied out before each put, a get's
 * copied in after each get. */
ipcp_status_t ipcp__rx_start_rma(ipcp__remote_t *rm, int put, void *buf,
                                 size_t len, int peer, uint64_t addr,
                                 const ipcp__rx_dev_t *dev, ipcp__rx_t **out);
/* Moves x (may be NULL) on, and a few other running transfers in turn,
 * so that all move on while any is waited for. */
void ipcp__rx_progress(ipcp__rx_t *x);
/* 1 once x ended; then *nbytes (bytes received) and its status, the
 * reason of a failure as last error. */
int ipcp__rx_ended(const ipcp__rx_t *x);
ipcp_status_t ipcp__rx_result(const ipcp__rx_t *x, size_t *nbytes);
/* Ends x at finalize: its transport operations cancelled, its copies
 * waited for; the buffer is not touched after this returns. */
void ipcp__rx_cancel(ipcp__rx_t *x);
void ipcp__rx_free(ipcp__rx_t *x);
/* Whether any transfer runs (read without the lock: for the waits of
 * this node's transfers, which then move these on too). */
int ipcp__rx_busy(void);
/* Cancels every transfer of rm (ipcp__rx_cancel), and forgets them: each
 * is still freed by whoever started it. */
void ipcp__rx_end_all(ipcp__remote_t *rm);
/* Frees rm's slots, queues and rooms (no transfer of rm runs). */
void ipcp__rx_stage_free(ipcp__remote_t *rm);

#endif
