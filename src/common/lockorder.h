/* The order of the communicator's locks, written once: a thread that holds
 * one of them takes only locks later in this list (a trylock, which cannot
 * wait, may take any).  Builds with IPCP_LOCK_CHECK (CMake option
 * IPCPIPE_LOCK_CHECK: on in Debug builds and in CI's sanitizer builds)
 * check every wait for a lock against the locks the thread holds and stop
 * the process, naming both, at the first out of order.  Other builds call
 * pthread directly. */
#ifndef IPCP_COMMON_LOCKORDER_H
#define IPCP_COMMON_LOCKORDER_H

#include <pthread.h>

#include "common/mutex.h"

typedef enum {
    IPCP_LOCK_DEV = 1, /* comm->dev_lock: opening the device backend */
    IPCP_LOCK_PROG,    /* comm->prog_lock: one turn of progress */
    IPCP_LOCK_RX,      /* peer->rx_lock: reading an inbox (recursive) */
    IPCP_LOCK_TX,      /* peer->tx_lock: writing an outbox */
    IPCP_LOCK_LANE,    /* comm->lane_lock: the small-message lanes */
    IPCP_LOCK_SYNC,    /* comm->sync_lock: stream-ordered entries */
    IPCP_LOCK_MEM,     /* comm->mem_lock: the memory registry */
    IPCP_LOCK_COMM,    /* comm->lock: commands, completions */
    IPCP_LOCK_RANKS
} ipcp__lock_rank_t;

#ifdef IPCP_LOCK_CHECK
void ipcp__lock_wait_check(const void *m, int rank);
void ipcp__lock_note_held(const void *m, int rank);
void ipcp__lock_note_released(const void *m, int rank);
#else
static inline void ipcp__lock_wait_check(const void *m, int rank)
{
    (void)m;
    (void)rank;
}
static inline void ipcp__lock_note_held(const void *m, int rank)
{
    (void)m;
    (void)rank;
}
static inline void ipcp__lock_note_released(const void *m, int rank)
{
    (void)m;
    (void)rank;
}
#endif

/* ipcp__lock, ipcp__trylock and ipcp__unlock of each kind of lock: a
 * pthread mutex, or one of common/mutex.h (plain or recursive). */
#define IPCP_LOCK_KIND_(T, name, lock_, try_, unlock_)                         \
    static inline void ipcp__lock_##name(T *m, int rank)                       \
    {                                                                          \
        ipcp__lock_wait_check(m, rank);                                        \
        lock_(m);                                                              \
        ipcp__lock_note_held(m, rank);                                         \
    }                                                                          \
    static inline int ipcp__trylock_##name(T *m, int rank)                     \
    {                                                                          \
        int rc = try_(m);                                                      \
        if (rc == 0)                                                           \
            ipcp__lock_note_held(m, rank);                                     \
        return rc;                                                             \
    }                                                                          \
    static inline void ipcp__unlock_##name(T *m, int rank)                     \
    {                                                                          \
        ipcp__lock_note_released(m, rank);                                     \
        unlock_(m);                                                            \
    }
IPCP_LOCK_KIND_(pthread_mutex_t, p, pthread_mutex_lock, pthread_mutex_trylock,
                pthread_mutex_unlock)
IPCP_LOCK_KIND_(ipcp__mutex_t, m, ipcp__mutex_lock, ipcp__mutex_trylock,
                ipcp__mutex_unlock)
IPCP_LOCK_KIND_(ipcp__rmutex_t, r, ipcp__rmutex_lock, ipcp__rmutex_trylock,
                ipcp__rmutex_unlock)
#undef IPCP_LOCK_KIND_

#define IPCP_LOCK_PICK_(m, op)                                                 \
    _Generic((m), pthread_mutex_t *                                            \
             : op##_p, ipcp__mutex_t *                                         \
             : op##_m, ipcp__rmutex_t *                                        \
             : op##_r)
#define ipcp__lock(m, rank)    IPCP_LOCK_PICK_(m, ipcp__lock)(m, rank)
#define ipcp__trylock(m, rank) IPCP_LOCK_PICK_(m, ipcp__trylock)(m, rank)
#define ipcp__unlock(m, rank)  IPCP_LOCK_PICK_(m, ipcp__unlock)(m, rank)

#endif
