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
 * host memory, which the engine polls.
 *
 * Words: what must arrive together travels in one aligned 64-bit store,
 * the low 32 bits the payload and the high 32 bits the flag (uint32_t)(k +
 * 1), which tells the receiver that this word is message k's (a slot's
 * previous message carried k + 1 - nslots).  Up to words_max bytes
 * (IPCPIPE_SMALL_WORDS, at most IPCP_LANE_INLINE_MAX) a message is all such
 * words - the length in seq, the tag in tagw,
 * 4 data bytes in each word of the slot's words area - stored in any order
 * without a fence, and the receiver waits for each word's flag: no fence
 * between data and flag on either side (the sender's waited for NVLink's
 * answer, about a microsecond).
 * Larger messages store their bytes plainly into the data area and the tag
 * word, fence once, then seq; the receiver fences once after it sees seq.
 * Only flagged words are ever stored in the header and the words area: a
 * plain message's bytes there could pass for a later message's flags.
 * A flag has 32 bits, so a word last written 2^32 messages ago (or the
 * zeroed area, for message 2^32 - 1) would pass too: a slot's message of
 * every IPCP_LANE_REFRESH-th round, round 0 included, writes the whole
 * words area, padding with zeros.
 *
 * A slot: header (IPCP_LANE_HDR), words area (2 * IPCP_LANE_INLINE_MAX),
 * data area (IPCPIPE_SMALL rounded up to 64 bytes). */
#ifndef IPCP_BACKEND_LANE_ABI_H
#define IPCP_BACKEND_LANE_ABI_H

#include <stdint.h>

/* Bytes of a slot's header; data starts 64-byte aligned after it. */
#define IPCP_LANE_HDR 64
/* Messages of up to kargs.words_max bytes (IPCPIPE_SMALL_WORDS, at most
 * this) travel as flagged words (above), 8 bytes of words area for 4 of
 * data. */
#define IPCP_LANE_INLINE_MAX 512
#define IPCP_LANE_INLINE(len, a)                                               \
    ((a)->words_max > 0 && (uint64_t)(len) <= (a)->words_max)
#define IPCP_LANE_WORDS_OFF IPCP_LANE_HDR
#define IPCP_LANE_REFRESH   ((uint64_t)1 << 25) /* rounds; x 64 < 2^32 */
#define IPCP_LANE_DATA_OFF  (IPCP_LANE_HDR + 2 * IPCP_LANE_INLINE_MAX)
/* A word's flag and payload. */
#define IPCP_LANE_WORD(k, payload)                                             \
    ((uint64_t)(uint32_t)((k) + 1) << 32 | (uint32_t)(payload))
#define IPCP_LANE_WORD_FLAG(w) ((uint32_t)((w) >> 32))
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
    uint64_t seq;  /* IPCP_LANE_WORD(k, len): message k is in (inline:
                      its length is known, its other words may follow) */
    uint64_t tagw; /* IPCP_LANE_WORD(k, tag) */
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
    uint32_t slot_bytes; /* IPCP_LANE_DATA_OFF + data capacity, a multiple
                            of 64 */
    uint32_t words_max;  /* IPCPIPE_SMALL_WORDS, the same on both ranks */
} ipcp__lane_kargs_t;

#endif
