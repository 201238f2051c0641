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
void ipcp__lock_wait_check(const pthread_mutex_t *m, int rank);
void ipcp__lock_note_held(const pthread_mutex_t *m, int rank);
void ipcp__lock_note_released(const pthread_mutex_t *m, int rank);
#else
static inline void ipcp__lock_wait_check(const pthread_mutex_t *m, int rank)
{
    (void)m;
    (void)rank;
}
static inline void ipcp__lock_note_held(const pthread_mutex_t *m, int rank)
{
    (void)m;
    (void)rank;
}
static inline void ipcp__lock_note_released(const pthread_mutex_t *m, int rank)
{
    (void)m;
    (void)rank;
}
#endif

static inline void ipcp__lock(pthread_mutex_t *m, int rank)
{
    ipcp__lock_wait_check(m, rank);
    pthread_mutex_lock(m);
    ipcp__lock_note_held(m, rank);
}

static inline int ipcp__trylock(pthread_mutex_t *m, int rank)
{
    int rc = pthread_mutex_trylock(m);
    if (rc == 0)
        ipcp__lock_note_held(m, rank);
    return rc;
}

static inline void ipcp__unlock(pthread_mutex_t *m, int rank)
{
    ipcp__lock_note_released(m, rank);
    pthread_mutex_unlock(m);
}

#endif
