/* A mutex of one word, for the locks that a small message takes on every
 * call (a peer's inbox and outbox): a compare-and-swap takes it and a swap
 * gives it back while nobody waits, where glibc's pthread_mutex_lock and
 * unlock of an adaptive or recursive mutex cost ~75 instructions together
 * a message on each side (callgrind, the 8 B window).  A thread that finds
 * it held spins a little (not on one CPU: the holder needs that CPU), then
 * sleeps in the kernel (futex) until the holder gives it back.
 *
 * The recursive kind keeps its owner and depth beside the word: the
 * progress thread may meet a peer's loss while it reads that peer's
 * inbox.  Not for condition variables (those keep pthread mutexes). */
#ifndef IPCP_COMMON_MUTEX_H
#define IPCP_COMMON_MUTEX_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

typedef struct ipcp__mutex {
    /* 0 free, 1 held, 2 held and a thread may sleep on it */
    _Atomic uint32_t word;
} ipcp__mutex_t;

typedef struct ipcp__rmutex {
    ipcp__mutex_t m;
    _Atomic uintptr_t owner; /* pthread_self() of the holder, 0 none */
    unsigned depth;          /* the holder's: how many times it took it */
} ipcp__rmutex_t;

/* Contended halves (mutex.c). */
void ipcp__mutex_wait(ipcp__mutex_t *m);
void ipcp__mutex_wake(ipcp__mutex_t *m);

static inline void ipcp__mutex_init(ipcp__mutex_t *m)
{
    atomic_init(&m->word, 0);
}

/* 0 when taken, else nonzero (as pthread_mutex_trylock). */
static inline int ipcp__mutex_trylock(ipcp__mutex_t *m)
{
    uint32_t free_ = 0;
    return !atomic_compare_exchange_strong_explicit(
        &m->word, &free_, 1, memory_order_acquire, memory_order_relaxed);
}

static inline void ipcp__mutex_lock(ipcp__mutex_t *m)
{
    if (ipcp__mutex_trylock(m))
        ipcp__mutex_wait(m);
}

/* seq_cst: the mailbox's writer counts on the exchange to order its
 * stores before the lock's release before its loads after it
 * (engine/mbox.c); it costs nothing more than a release one on x86. */
static inline void ipcp__mutex_unlock(ipcp__mutex_t *m)
{
    if (atomic_exchange_explicit(&m->word, 0, memory_order_seq_cst) == 2)
        ipcp__mutex_wake(m);
}

static inline void ipcp__rmutex_init(ipcp__rmutex_t *r)
{
    ipcp__mutex_init(&r->m);
    atomic_init(&r->owner, 0);
    r->depth = 0;
}

/* Whether the calling thread holds r (then only it changes owner). */
static inline int ipcp__rmutex_mine(ipcp__rmutex_t *r, uintptr_t me)
{
    return atomic_load_explicit(&r->owner, memory_order_relaxed) == me;
}

static inline void ipcp__rmutex_lock(ipcp__rmutex_t *r)
{
    uintptr_t me = (uintptr_t)pthread_self();
    if (!ipcp__rmutex_mine(r, me)) {
        ipcp__mutex_lock(&r->m);
        atomic_store_explicit(&r->owner, me, memory_order_relaxed);
    }
    r->depth++;
}

static inline int ipcp__rmutex_trylock(ipcp__rmutex_t *r)
{
    uintptr_t me = (uintptr_t)pthread_self();
    if (!ipcp__rmutex_mine(r, me)) {
        if (ipcp__mutex_trylock(&r->m))
            return 1;
        atomic_store_explicit(&r->owner, me, memory_order_relaxed);
    }
    r->depth++;
    return 0;
}

static inline void ipcp__rmutex_unlock(ipcp__rmutex_t *r)
{
    if (--r->depth)
        return;
    atomic_store_explicit(&r->owner, 0, memory_order_relaxed);
    ipcp__mutex_unlock(&r->m);
}

#endif
