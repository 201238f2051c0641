/* The process's handle table (handle.h): slots in chunks that are never
 * freed, a lock-free list of free slots, a few more kept by each thread,
 * and a mutex only to add a chunk. */
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "handle.h"
#include "status.h"
#include "tls.h"

#define IPCP_HANDLE_CHUNK     (1u << IPCP_HANDLE_CHUNK_BITS)
#define IPCP_HANDLE_INDEX_MAX (1u << IPCP_HANDLE_INDEX_BITS)

_Atomic(ipcp__hslot_t *) ipcp__hchunks[IPCP_HANDLE_CHUNKS];
_Atomic uint32_t ipcp__hslots;

/* Top of the free list: a count of its changes << 32 | (index + 1) of the
 * first free slot (0: empty).  The count makes a pop that read an old top
 * fail when that slot was popped and pushed back meanwhile (ABA). */
static _Atomic uint64_t ipcp__hfree;
static pthread_mutex_t ipcp__hgrow = PTHREAD_MUTEX_INITIALIZER;
/* Scatters first generations (ipcp__hgen0); set with the first chunk. */
static uint64_t ipcp__hseed;

static ipcp__hslot_t *ipcp__hslot_at(uint32_t i)
{
    ipcp__hslot_t *c = atomic_load_explicit(
        &ipcp__hchunks[i >> IPCP_HANDLE_CHUNK_BITS], memory_order_acquire);
    return &c[i & (IPCP_HANDLE_CHUNK - 1)];
}

static uint64_t ipcp__handle_make(uint64_t gen, uint32_t i, unsigned type)
{
    return gen << IPCP_HANDLE_GEN_SHIFT | (uint64_t)i << IPCP_HANDLE_TYPE_BITS |
           type;
}

/* Index + 1 of a free slot taken off the list, or 0 when it is empty. */
static uint32_t ipcp__hfree_pop(void)
{
    uint64_t old = atomic_load_explicit(&ipcp__hfree, memory_order_acquire);
    for (;;) {
        uint32_t top = (uint32_t)old;
        if (!top)
            return 0;
        /* The slot may be popped and reused by another thread meanwhile:
         * its next is then stale, and the count makes the swap fail. */
        uint32_t next = atomic_load_explicit(&ipcp__hslot_at(top - 1)->next,
                                             memory_order_relaxed);
        uint64_t nw = ((old >> 32) + 1) << 32 | next;
        if (atomic_compare_exchange_weak_explicit(&ipcp__hfree, &old, nw,
                                                  memory_order_acquire,
                                                  memory_order_acquire))
            return top;
    }
}

/* Pushes the chain of free slots first..last (indices + 1, linked through
 * next) onto the list. */
static void ipcp__hfree_push(uint32_t first, ipcp__hslot_t *last)
{
    uint64_t old = atomic_load_explicit(&ipcp__hfree, memory_order_relaxed);
    uint64_t nw;
    do {
        atomic_store_explicit(&last->next, (uint32_t)old, memory_order_relaxed);
        nw = ((old >> 32) + 1) << 32 | first;
    } while (!atomic_compare_exchange_weak_explicit(
        &ipcp__hfree, &old, nw, memory_order_release, memory_order_relaxed));
}

/* Free slots kept by the thread that freed them, up to this many, for its
 * next handles: a request's handle then costs one atomic write (its
 * release) instead of three (a compare-and-swap each for the pop, the
 * release and the push; ~7 ns each with a second thread in the process on
 * a 2-CPU VM).  Linked through next, as on the shared list; none of them
 * is on it, so no other thread reads their next. */
#define IPCP_HANDLE_TCACHE 64

typedef struct ipcp__htcache {
    uint32_t top; /* index + 1 of the first, 0: none */
    uint32_t n;
    int keyed; /* given back at the thread's exit (tls.h) */
} ipcp__htcache_t;

static _Thread_local ipcp__htcache_t ipcp__htc;

/* At the thread's exit: its slots go on the shared list. */
static void ipcp__htc_give_back(void *arg)
{
    ipcp__htcache_t *tc = arg;
    while (tc->top) {
        uint32_t i = tc->top - 1;
        ipcp__hslot_t *s = ipcp__hslot_at(i);
        tc->top = atomic_load_explicit(&s->next, memory_order_relaxed);
        ipcp__hfree_push(i + 1, s);
    }
    /* Closed: what the thread releases in later exit work goes on the
     * list. */
    tc->n = IPCP_HANDLE_TCACHE;
}

/* Index + 1 of a free slot of this thread's, or 0. */
static uint32_t ipcp__htc_pop(void)
{
    ipcp__htcache_t *tc = &ipcp__htc;
    uint32_t top = tc->top;
    if (top) {
        tc->top = atomic_load_explicit(&ipcp__hslot_at(top - 1)->next,
                                       memory_order_relaxed);
        tc->n--;
    }
    return top;
}

/* A slot just released goes to this thread's cache, else on the list. */
static void ipcp__htc_push(uint32_t i, ipcp__hslot_t *s)
{
    ipcp__htcache_t *tc = &ipcp__htc;
    if (tc->n < IPCP_HANDLE_TCACHE &&
        (tc->keyed ||
         ipcp__at_thread_exit(&tc->keyed, ipcp__htc_give_back, tc) == 0)) {
        atomic_store_explicit(&s->next, tc->top, memory_order_relaxed);
        tc->top = i + 1;
        tc->n++;
        return;
    }
    ipcp__hfree_push(i + 1, s);
}

/* A slot's first generation: scattered, so that a small or made-up value
 * is unlikely to name a live handle. */
static uint64_t ipcp__hgen0(uint32_t i)
{
    uint64_t z = ipcp__hseed + (uint64_t)i * 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return (z ^ (z >> 31)) >> IPCP_HANDLE_GEN_SHIFT;
}

/* Adds a chunk of slots (mutex held); returns index + 1 of one of them,
 * the others go on the free list. */
static ipcp_status_t ipcp__hgrow_locked(uint32_t *got)
{
    uint32_t n = atomic_load_explicit(&ipcp__hslots, memory_order_relaxed);
    if (n >= IPCP_HANDLE_INDEX_MAX)
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_API, IPCP_ERR_NOMEM,
                          "all %u handles of this process are in use "
                          "(requests not waited for, registrations, "
                          "imported regions, communicators)",
                          IPCP_HANDLE_INDEX_MAX);
    ipcp__hslot_t *c = calloc(IPCP_HANDLE_CHUNK, sizeof(*c));
    if (!c)
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_API, IPCP_ERR_NOMEM,
                          "no memory for %u more handles", IPCP_HANDLE_CHUNK);
    if (n == 0) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ipcp__hseed = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    }
    for (uint32_t k = 0; k < IPCP_HANDLE_CHUNK; k++) {
        atomic_init(&c[k].word,
                    ipcp__handle_make(ipcp__hgen0(n + k), n + k, 0));
        atomic_init(&c[k].obj, NULL);
        atomic_init(&c[k].next, k + 1 < IPCP_HANDLE_CHUNK ? n + k + 2 : 0);
        c[k].gen0_lo = (uint32_t)ipcp__hgen0(n + k);
    }
    atomic_store_explicit(&ipcp__hchunks[n >> IPCP_HANDLE_CHUNK_BITS], c,
                          memory_order_release);
    atomic_store_explicit(&ipcp__hslots, n + IPCP_HANDLE_CHUNK,
                          memory_order_release);
    ipcp__hfree_push(n + 2, &c[IPCP_HANDLE_CHUNK - 1]);
    *got = n + 1;
    return IPCP_OK;
}

ipcp_status_t ipcp__handle_new(unsigned type, void *obj, ipcp__handle_t *h)
{
    return ipcp__handle_new_owned(type, obj, 0, h);
}

ipcp_status_t ipcp__handle_new_owned(unsigned type, void *obj, uint64_t owner,
                                     ipcp__handle_t *h)
{
    uint32_t top = ipcp__htc_pop();
    if (!top)
        top = ipcp__hfree_pop();
    if (!top) {
        ipcp_status_t st = IPCP_OK;
        pthread_mutex_lock(&ipcp__hgrow);
        /* Another thread may have added a chunk while this one waited. */
        if (!(top = ipcp__hfree_pop()))
            st = ipcp__hgrow_locked(&top);
        pthread_mutex_unlock(&ipcp__hgrow);
        if (st != IPCP_OK)
            return st;
    }
    ipcp__hslot_t *s = ipcp__hslot_at(top - 1);
    uint64_t free_word = atomic_load_explicit(&s->word, memory_order_relaxed);
    /* Release: a lookup that reads this obj and then the word again sees
     * the free that came before it (ipcp__handle_get). */
    atomic_store_explicit(&s->owner, owner, memory_order_relaxed);
    atomic_store_explicit(&s->obj, obj, memory_order_release);
    *h = free_word | type;
    atomic_store_explicit(&s->word, *h, memory_order_release);
    return IPCP_OK;
}

/* Releases h in its slot s (h's type not 0). */
static int ipcp__hslot_release(ipcp__hslot_t *s, ipcp__handle_t h)
{
    uint32_t i = ipcp__handle_index(h);
    uint64_t gen = ((h >> IPCP_HANDLE_GEN_SHIFT) + 1) &
                   (((uint64_t)1 << IPCP_HANDLE_GEN_BITS) - 1);
    uint64_t expect = h;
    /* Only the free that changes the word puts the slot on the list, so a
     * second free of the same handle does nothing. */
    if (!atomic_compare_exchange_strong_explicit(
            &s->word, &expect, ipcp__handle_make(gen, i, 0),
            memory_order_release, memory_order_relaxed))
        return 0;
    /* A slot whose generations came full circle would issue its first
     * values again: it is retired instead (24 bytes lost every 2^36 frees
     * of one slot), so that no handle value is ever issued twice. */
    if ((uint32_t)gen != s->gen0_lo || gen != ipcp__hgen0(i))
        ipcp__htc_push(i, s);
    return 1;
}

int ipcp__handle_release(ipcp__handle_t h)
{
    ipcp__hslot_t *s = ipcp__handle_slot(h);
    if (!ipcp__handle_type(h) || !s)
        return 0;
    return ipcp__hslot_release(s, h);
}

int ipcp__handle_take(ipcp__handle_t h, unsigned type, void **obj)
{
    ipcp__hslot_t *s = ipcp__handle_slot(h);
    if (ipcp__handle_type(h) != type || !type || !s ||
        atomic_load_explicit(&s->word, memory_order_acquire) != h)
        return 0;
    /* h's object: obj is written anew only after a release of h, which
     * would make ours fail (a value is never issued twice). */
    void *o = atomic_load_explicit(&s->obj, memory_order_relaxed);
    if (!ipcp__hslot_release(s, h))
        return 0;
    *obj = o;
    return 1;
}

void ipcp__handle_reap(unsigned type, uint64_t owner,
                       void (*fn)(void *obj, void *arg), void *arg)
{
    uint32_t n = atomic_load_explicit(&ipcp__hslots, memory_order_acquire);
    for (uint32_t i = 0; i < n; i++) {
        ipcp__hslot_t *s = ipcp__hslot_at(i);
        uint64_t w = atomic_load_explicit(&s->word, memory_order_acquire);
        if (ipcp__handle_type(w) != type ||
            atomic_load_explicit(&s->owner, memory_order_relaxed) != owner)
            continue;
        /* Read before the release: the slot may be reused right after.
         * Owner and obj were written before the word (release) and are
         * rewritten only after a release of w, which would make ours
         * fail: when ours wins, both were w's. */
        void *obj = atomic_load_explicit(&s->obj, memory_order_relaxed);
        if (ipcp__handle_free(w))
            fn(obj, arg);
    }
}

int ipcp__handle_stale(ipcp__handle_t h)
{
    ipcp__hslot_t *s = ipcp__handle_slot(h);
    if (!s)
        return 0;
    const uint64_t mask = ((uint64_t)1 << IPCP_HANDLE_GEN_BITS) - 1;
    uint64_t now = atomic_load_explicit(&s->word, memory_order_acquire) >>
                   IPCP_HANDLE_GEN_SHIFT;
    uint64_t ahead = (now - (h >> IPCP_HANDLE_GEN_SHIFT)) & mask;
    /* Issued generations are behind the slot's; within half the range a
     * value ahead of it was never issued. */
    return ahead != 0 && ahead < ((uint64_t)1 << (IPCP_HANDLE_GEN_BITS - 1));
}
