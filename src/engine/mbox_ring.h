/* The mailbox's ring as both of its files see it (mbox.c: setting up,
 * writing, the progress thread's reading; mbox_wait.c: callers that read,
 * the progress thread's sleep): its layout and the reader's steps. */
#ifndef IPCP_ENGINE_MBOX_RING_H
#define IPCP_ENGINE_MBOX_RING_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "engine/engine.h"

/* A message takes as many slots as it needs, one after another, and never
 * wraps: where it would, a skip record fills the ring to its end first.
 * Small messages take one slot.  A record's first slot carries its
 * position in the writer's sequence, plus one, written last: the reader
 * polls the slot it expects next, not a shared head, and the writer reads
 * the reader's tail only when its last look at it says the ring is full.
 * So a small message costs each side one cache line from the other (the
 * slot), where a head and a tail cost each side three.  Slots a message
 * runs on into hold its bytes where a record's position would be: the
 * reader clears those words before it gives the slots back, so that no
 * byte of a message is ever taken for a record's position.  A ring is 512 KiB
 * in jobs of up to IPCP_MBOX_BIG_JOB ranks (records up to 128 KiB, so the
 * default 64 KiB eager size fits), 128 KiB in larger ones (32 KiB), where every
 * rank maps two per peer. */
#define IPCP_MBOX_SLOT    256 /* bytes of a slot, its words included */
#define IPCP_MBOX_BIG_JOB 16

enum {
    IPCP_MBOX_DATA = 0,   /* len bytes of message from data on */
    IPCP_MBOX_SOCKET = 1, /* the next message is on the socket */
    IPCP_MBOX_SKIP = 2,   /* len slots to the ring's end hold nothing */
};

typedef struct ipcp__mbox_ring {
    _Alignas(IPCP_CACHE_LINE) uint64_t tail;     /* reader: slots taken */
    _Alignas(IPCP_CACHE_LINE) uint32_t sleeping; /* IPCP_MBOX_AWAKE, ... */
} ipcp__mbox_ring_t;

/* The reader's sleeping word. */
enum {
    IPCP_MBOX_AWAKE = 0, /* its thread looks at the ring, or callers do */
    IPCP_MBOX_WAKE = 1,  /* its thread blocks: write the eventfd */
    /* Its thread blocks, and every receive of the reader that waits is
     * one whose caller reads the ring itself (on its wait or test): an
     * EAGER message a caller writes (ipcp__mbox_send_fast) wakes it only
     * to make room, once the ring is over half full.  Without this, a
     * receiver posting a window of receives had its thread woken for
     * each message that came between two of its waits: an eventfd write
     * each (a system call on the sender) and, on a rank bound to one
     * CPU, a switch to the thread and back on the receiver. */
    IPCP_MBOX_LAZY = 2,
};

typedef struct ipcp__mbox_slot {
    uint64_t seq;    /* the record's position + 1; written last */
    uint32_t len;    /* bytes of data (SKIP: slots) */
    uint32_t marker; /* IPCP_MBOX_* */
    unsigned char data[IPCP_MBOX_SLOT - 16]; /* and on into the next slots */
} ipcp__mbox_slot_t;

#define IPCP_MBOX_HDR offsetof(ipcp__mbox_slot_t, data)

/* Position i's slot index in a ring of slots, a power of two
 * (ipcp__mbox_slots): a mask, not a division (3-4 of them a message, each
 * tens of cycles, were a tenth of a small message's cost). */
static inline uint64_t ipcp__mbox_index(uint64_t i, uint64_t slots)
{
    return i & (slots - 1);
}

static inline ipcp__mbox_slot_t *ipcp__mbox_slot(void *ring, uint64_t slots,
                                                 uint64_t i)
{
    return (ipcp__mbox_slot_t *)((char *)ring + sizeof(ipcp__mbox_ring_t)) +
           ipcp__mbox_index(i, slots);
}

/* Slots a message of len bytes takes. */
static inline uint64_t ipcp__mbox_span(size_t len)
{
    return (IPCP_MBOX_HDR + len + IPCP_MBOX_SLOT - 1) / IPCP_MBOX_SLOT;
}

/* Whether a record waits at the reader's tail.  Without rx_lock: a caller
 * may take records meanwhile, and a tail that moved while we looked says
 * yes (look again) rather than no.  seq_cst: against the writer's
 * sleeping-word check (ipcp__mbox_unlock_wake). */
static inline int ipcp__mbox_ready(const ipcp__peer_t *peer)
{
    uint64_t t = __atomic_load_n(&peer->in_tail, __ATOMIC_SEQ_CST);
    const ipcp__mbox_slot_t *s =
        ipcp__mbox_slot(peer->inbox, peer->mbox_slots, t);
    return __atomic_load_n(&s->seq, __ATOMIC_SEQ_CST) == t + 1 ||
           __atomic_load_n(&peer->in_tail, __ATOMIC_SEQ_CST) != t;
}

/* ---- Reading ------------------------------------------------------------- */

/* The EAGER message of len bytes at msg (a plain one, or a pipelined
 * one's header: IPCP_EAGER_PIPE): its header in *e and the offset of its
 * bytes in *off; 0 when it is no EAGER message or its lengths disagree. */
static inline int ipcp__eager_parse(const unsigned char *msg, size_t len,
                                    ipcp__msg_eager_t *e, size_t *off)
{
    if (len < sizeof(*e))
        return 0;
    memcpy(e, msg, sizeof(*e));
    *off =
        e->hdr.flags & IPCP_EAGER_PIPE ? sizeof(ipcp__msg_pipe_t) : sizeof(*e);
    return e->hdr.type == IPCP_MSG_EAGER && len >= *off && len - *off == e->len;
}

/* The reader's tail moves to tail: the slots before it are the writer's
 * again (rx_lock held). */
static inline void ipcp__mbox_release(ipcp__peer_t *peer, uint64_t tail)
{
    ipcp__mbox_ring_t *ring = peer->inbox;
    __atomic_store_n(&peer->in_tail, tail, __ATOMIC_SEQ_CST);
    __atomic_store_n(&ring->tail, tail, __ATOMIC_RELEASE);
}

/* Before the span slots of the record at tail go back to the writer: the
 * words where the slots after the first would carry a position are
 * cleared (they hold the message's bytes).  rx_lock held. */
static inline void ipcp__mbox_clear_span(ipcp__peer_t *peer, uint64_t tail,
                                         uint64_t span)
{
    for (uint64_t i = 1; i < span; i++)
        __atomic_store_n(
            &ipcp__mbox_slot(peer->inbox, peer->mbox_slots, tail + i)->seq, 0,
            __ATOMIC_RELAXED);
}

/* Gives the span slots of the record at *tail back to the writer, once its
 * bytes are copied out (rx_lock held). */
static inline void ipcp__mbox_take(ipcp__peer_t *peer, uint64_t *tail,
                                   uint64_t span)
{
    ipcp__mbox_clear_span(peer, *tail, span);
    *tail += span;
    ipcp__mbox_release(peer, *tail);
}

/* The next message from *tail on (skip records passed over, *tail moved
 * past them), with its bytes and kind read once: the peer may be hostile
 * and write them meanwhile.  NULL: none yet, or *bad (a record that leaves
 * its bounds or has no kind of ours).  rx_lock held. */
static inline ipcp__mbox_slot_t *ipcp__mbox_peek(ipcp__peer_t *peer,
                                                 uint64_t *tail, size_t *len,
                                                 uint32_t *kind, int *bad)
{
    uint64_t slots = peer->mbox_slots;
    for (;;) {
        ipcp__mbox_slot_t *s = ipcp__mbox_slot(peer->inbox, slots, *tail);
        uint64_t room = slots - ipcp__mbox_index(*tail, slots);
        if (__atomic_load_n(&s->seq, __ATOMIC_ACQUIRE) != *tail + 1)
            return NULL;
        uint32_t n = __atomic_load_n(&s->len, __ATOMIC_RELAXED);
        *kind = __atomic_load_n(&s->marker, __ATOMIC_RELAXED);
        *len = *kind == IPCP_MBOX_DATA ? n : 0;
        if (*kind == IPCP_MBOX_SKIP && n && n <= room) {
            /* Passed for good: the message after it may not be written
             * yet, and a skip left at the tail would look like work. */
            *tail += n;
            ipcp__mbox_release(peer, *tail);
            continue;
        }
        if (*kind == IPCP_MBOX_SOCKET ||
            (*kind == IPCP_MBOX_DATA && n <= ipcp__mbox_rec_max(peer) &&
             ipcp__mbox_span(n) <= room))
            return s;
        *bad = 1;
        return NULL;
    }
}

#endif
