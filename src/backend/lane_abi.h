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
 * the tag into the peer's inbox, then the slot's word (k + 1) << 32 | len;
 * the receiver's kernel spins on that word in its own memory, copies out
 * and stores k / nslots + 1 into the sender's credit word.  Every kernel
 * ends with one store of its outcome into a completion record in pinned
 * host memory, which the engine polls.  Single 64-bit stores carry what
 * must arrive together, so that each side fences once per message. */
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
    uint64_t seq; /* (uint32_t)(k + 1) << 32 | len, once message k is in */
    int32_t tag;  /* stored with the data, before seq */
    uint32_t pad;
} ipcp__lane_hdr_t;

/* A completion record (pinned host memory, one per message in flight):
 * done = IPCP_LANE_DONE(k, outcome, value), value the length moved (the
 * length that did not fit for IPCP_LANE_TRUNC); IPCP_LANE_TAG leaves the
 * tag it found in info, stored before done. */
typedef struct ipcp__lane_rec {
    uint64_t done;
    uint64_t info;
} ipcp__lane_rec_t;

#define IPCP_LANE_SEQ_MASK ((((uint64_t)1) << 40) - 1)
#define IPCP_LANE_DONE(k, outcome, value)                                      \
    ((((uint64_t)(k) + 1) & IPCP_LANE_SEQ_MASK) << 24 |                        \
     (uint64_t)((outcome)&0xf) << 20 | (uint64_t)((value)&0xfffff))
#define IPCP_LANE_DONE_SEQ(d)     ((d) >> 24)
#define IPCP_LANE_DONE_OUTCOME(d) ((unsigned)((d) >> 20) & 0xfu)
#define IPCP_LANE_DONE_VALUE(d)   ((uint32_t)(d)&0xfffffu)

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
