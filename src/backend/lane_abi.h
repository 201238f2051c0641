/* The small-message lane's memory layout and kernel arguments, shared by the
 * engine (engine/lane.c), the CUDA backend and its kernels
 * (backend/cuda/lane_kernels.cu).  Plain integers only: this header is read
 * by nvcc's C++ as well as by C11.
 *
 * Each rank of a pair that uses the lane has a block of its GPU's memory,
 * mapped by the peer: `nslots` inbox slots for the messages the peer sends
 * it (a header then the data), then `nslots` credit words for the messages
 * it sends the peer.  Message k of a direction uses slot k % nslots: the
 * sender's kernel waits until its credit word for the slot reached
 * k / nslots (the slot's previous message was consumed), stores the data and
 * the header into the peer's inbox, then the slot's sequence number k + 1;
 * the receiver's kernel spins on that number in its own memory, copies out
 * and stores k / nslots + 1 into the sender's credit word.  Every kernel
 * ends by writing its outcome and then k + 1 into a completion record in
 * pinned host memory, which the engine polls. */
#ifndef IPCP_BACKEND_LANE_ABI_H
#define IPCP_BACKEND_LANE_ABI_H

#include <stdint.h>

/* Bytes of a slot's header; data starts 64-byte aligned after it. */
#define IPCP_LANE_HDR 64
/* peer_word value when the peer's block cannot be used here. */
#define IPCP_LANE_BROKEN (~(uint64_t)0)

/* Outcome codes (high 32 bits of a record's info; the low 32 bits carry
 * the length received, the tag found or the length that did not fit). */
enum {
    IPCP_LANE_OK = 0,
    IPCP_LANE_ABORTED = 1,  /* the abort word was set (peer lost, finalize) */
    IPCP_LANE_TAG = 2,      /* receive: the message had another tag */
    IPCP_LANE_TRUNC = 3,    /* receive: the message was larger */
    IPCP_LANE_UNUSABLE = 4, /* the peer's block could not be mapped here */
};

enum { IPCP_LANE_SEND = 0, IPCP_LANE_RECV = 1 };

typedef struct ipcp__lane_hdr {
    uint64_t seq; /* k + 1 once message k is in the slot */
    uint32_t len;
    int32_t tag;
} ipcp__lane_hdr_t;

/* A completion record (pinned host memory, one per message in flight). */
typedef struct ipcp__lane_rec {
    uint64_t done; /* k + 1, written last */
    uint64_t info; /* outcome << 32 | value */
} ipcp__lane_rec_t;

/* One kernel's arguments, passed by value.  Addresses are device
 * addresses in the launching process. */
typedef struct ipcp__lane_kargs {
    uint64_t buf;       /* send: source; receive: destination */
    uint64_t len;       /* send: bytes; receive: capacity */
    uint64_t k;         /* message number in this direction */
    uint64_t local;     /* this rank's block */
    uint64_t remote;    /* the peer's block as mapped here; 0: not yet, read
                           peer_word */
    uint64_t peer_word; /* host word: the peer's block once mapped */
    uint64_t abort;     /* host word: non-zero makes waiting kernels leave */
    uint64_t rec;       /* host completion record, 0: none */
    int32_t tag;
    uint32_t nslots;
    uint32_t slot_bytes; /* header + data capacity, a multiple of 64 */
    uint32_t pad;
} ipcp__lane_kargs_t;

#endif
