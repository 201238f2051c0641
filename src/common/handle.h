/* Generation-checked handles: what the public API hands out in place of
 * pointers to communicators, requests, registrations and imported regions.
 *
 * One table per process.  A handle names a slot (index), the kind of object
 * (type) and the slot's generation when it was issued; freeing the handle
 * moves the slot to the next generation, so a handle kept after its object
 * was freed no longer resolves, even once the slot holds a newer object.
 * Slots live in chunks that are never freed, so that resolving a stale or
 * made-up handle reads only memory the table owns.
 *
 * Value: generation (36 bits) << 28 | index (24 bits) << 4 | type (4 bits).
 * Types are 1..5, so a handle is never 0 (NULL), and a pointer to anything
 * aligned to 8 bytes has no valid type. */
#ifndef IPCP_COMMON_HANDLE_H
#define IPCP_COMMON_HANDLE_H

#include <stdatomic.h>
#include <stdint.h>

#include "ipcpipe.h"

typedef uint64_t ipcp__handle_t;
_Static_assert(sizeof(void *) == sizeof(ipcp__handle_t),
               "the public pointer types carry handle values");

enum {
    IPCP_HANDLE_COMM = 1,
    IPCP_HANDLE_REQ = 2,
    IPCP_HANDLE_MEM = 3,
    IPCP_HANDLE_RMEM = 4,
    /* A request that completed when it was posted: no object, the handle
     * alone (its obj a value the API reads, never a pointer). */
    IPCP_HANDLE_DONE = 5,
    IPCP_HANDLE_NTYPES = 6 /* one past the last type */
};

#define IPCP_HANDLE_TYPE_BITS  4
#define IPCP_HANDLE_INDEX_BITS 24
#define IPCP_HANDLE_GEN_SHIFT  (IPCP_HANDLE_TYPE_BITS + IPCP_HANDLE_INDEX_BITS)
/* 2^this frees bring a slot's generation full circle: it is retired. */
#define IPCP_HANDLE_GEN_BITS (64 - IPCP_HANDLE_GEN_SHIFT)
/* Slots are added this many at a time, up to 2^IPCP_HANDLE_INDEX_BITS. */
#define IPCP_HANDLE_CHUNK_BITS 10
#define IPCP_HANDLE_CHUNKS                                                     \
    (1u << (IPCP_HANDLE_INDEX_BITS - IPCP_HANDLE_CHUNK_BITS))

typedef struct ipcp__hslot {
    /* The handle that is live in this slot; once freed, the next
     * generation's value with type 0 (which no handle has). */
    _Atomic uint64_t word;
    _Atomic(void *) obj;
    _Atomic uint64_t owner; /* what obj belongs to (ipcp__handle_reap) */
    _Atomic uint32_t next;  /* free list: index + 1 of the next, 0 last */
    /* The low bits of the slot's first generation, so that a release
     * tells whether the slot came full circle with one compare. */
    uint32_t gen0_lo;
} ipcp__hslot_t;

extern _Atomic(ipcp__hslot_t *) ipcp__hchunks[IPCP_HANDLE_CHUNKS];
extern _Atomic uint32_t ipcp__hslots; /* slots made so far */

static inline unsigned ipcp__handle_type(ipcp__handle_t h)
{
    return (unsigned)(h & ((1u << IPCP_HANDLE_TYPE_BITS) - 1));
}

static inline uint32_t ipcp__handle_index(ipcp__handle_t h)
{
    return (uint32_t)(h >> IPCP_HANDLE_TYPE_BITS) &
           ((1u << IPCP_HANDLE_INDEX_BITS) - 1);
}

/* The slot of h, or NULL when its index was never handed out. */
static inline ipcp__hslot_t *ipcp__handle_slot(ipcp__handle_t h)
{
    uint32_t i = ipcp__handle_index(h);
    if (i >= atomic_load_explicit(&ipcp__hslots, memory_order_acquire))
        return NULL;
    ipcp__hslot_t *c = atomic_load_explicit(
        &ipcp__hchunks[i >> IPCP_HANDLE_CHUNK_BITS], memory_order_relaxed);
    return &c[i & ((1u << IPCP_HANDLE_CHUNK_BITS) - 1)];
}

/* The object of a live handle of this type, else NULL.  No lock: a few
 * loads, so that every call can afford it.  A handle freed while this runs
 * resolves to NULL, never to the object that took its slot; the object
 * itself stays the caller's to keep alive (the API's lifetime rules). */
static inline void *ipcp__handle_get(ipcp__handle_t h, unsigned type)
{
    if (ipcp__handle_type(h) != type)
        return NULL;
    ipcp__hslot_t *s = ipcp__handle_slot(h);
    if (!s || atomic_load_explicit(&s->word, memory_order_acquire) != h)
        return NULL;
    void *obj = atomic_load_explicit(&s->obj, memory_order_relaxed);
    /* Pairs with the release store of obj in ipcp__handle_new: had obj
     * been replaced, the word that follows shows the free before it. */
    atomic_thread_fence(memory_order_acquire);
    if (atomic_load_explicit(&s->word, memory_order_relaxed) != h)
        return NULL;
    return obj;
}

/* A new handle of this type for obj (type 1..5, obj not NULL). */
ipcp_status_t ipcp__handle_new(unsigned type, void *obj, ipcp__handle_t *h);
/* The same, for an object that belongs to owner (a communicator's handle
 * value: never 0, never issued twice), which ipcp__handle_reap finds it
 * by.  A request's handle is all that lists it for its communicator's
 * finalize: no list to join and leave under a lock on every message. */
ipcp_status_t ipcp__handle_new_owned(unsigned type, void *obj, uint64_t owner,
                                     ipcp__handle_t *h);
/* Gives a live handle that no other thread knows yet another object
 * (obj not NULL): the value a call settles after it made the handle. */
static inline void ipcp__handle_rebind(ipcp__handle_t h, void *obj)
{
    ipcp__hslot_t *s = ipcp__handle_slot(h);
    atomic_store_explicit(&s->obj, obj, memory_order_release);
}
/* Releases every live handle of this type and owner, and calls fn with
 * the object of each handle it released.  One release wins against any
 * other of the same handle (ipcp__handle_free): a handle released by
 * another thread meanwhile is skipped.  Reads every slot made so far (a
 * finalize's cost, not a message's). */
void ipcp__handle_reap(unsigned type, uint64_t owner,
                       void (*fn)(void *obj, void *arg), void *arg);
/* Makes h stale and its slot reusable (in a later generation; a slot
 * whose generations all were used is retired, so a value is never issued
 * twice).  Returns 1 when this call released h, 0 when h was not live (0,
 * already released, or released by another thread at the same moment):
 * of two threads releasing one handle, exactly one gets 1.  0 costs no
 * call: every small message's request is freed with no handle left (its
 * owner's wait released it). */
int ipcp__handle_release(ipcp__handle_t h);
/* ipcp__handle_release of a handle of this type that gives *obj its
 * object: 1 when this call released it, else 0 (*obj untouched).  One
 * look at the slot where a lookup and a release take two. */
int ipcp__handle_take(ipcp__handle_t h, unsigned type, void **obj);
static inline int ipcp__handle_free(ipcp__handle_t h)
{
    return h ? ipcp__handle_release(h) : 0;
}
/* Whether h was issued and has been freed since (its slot moved to a later
 * generation), as opposed to a value never issued. */
int ipcp__handle_stale(ipcp__handle_t h);

#endif
