/* Fault injection for tests (IPCPIPE_FAULT=stage:action[:n]): the process
 * sends itself SIGKILL or SIGSTOP when it reaches a protocol stage for the
 * n-th time, so that a test can check what its peer sees when a rank dies
 * or hangs at exactly that step.  Unset, a fault point costs one compare of
 * a cached word with a constant. */
#ifndef IPCP_COMMON_FAULT_H
#define IPCP_COMMON_FAULT_H

#include <stddef.h>

/* Protocol steps, named for what has just happened on this rank. */
typedef enum {
    IPCP_FAULT_NONE = 0,
    IPCP_FAULT_RTS_POSTED,        /* a sender's RTS (or an eager message, a
                                     put's RTS, a get's reply) was queued */
    IPCP_FAULT_GET_POSTED,        /* a get's request went to the owner */
    IPCP_FAULT_RTS_MATCHED,       /* a receiver (a put's owner, a get's origin)
                                     met an RTS, before it answers */
    IPCP_FAULT_CTS_POSTED,        /* the receiver's CTS was queued, its half of
                                     the copies not enqueued yet */
    IPCP_FAULT_CTS_RECEIVED,      /* a sender got its CTS, before it copies */
    IPCP_FAULT_STAGED_CHUNK,      /* one side of a staged transfer enqueued a
                                     chunk (n counts chunks) */
    IPCP_FAULT_DATA_IN_PLACE,     /* every byte is written, the done flag (the
                                     sender's copies) or the done message (a
                                     receiver that copied itself) not yet */
    IPCP_FAULT_ONESIDED_ENQUEUED, /* an origin enqueued a put or get that
                                     needs no owner */
    IPCP_FAULT_MAP_REQUESTED,     /* an owner got an import's MAP_REQ, before
                                     it answers */
    IPCP_FAULT_BARRIER_ENTERED,   /* inside a barrier: rank 0 before its
                                     first message, another rank after it */
    IPCP_FAULT_BYE_SENT,          /* finalize queued its goodbyes */
    IPCP_FAULT_BYE_RECEIVED,      /* a peer's goodbye came, ours not yet sent */
    IPCP_FAULT_NSTAGES
} ipcp__fault_stage_t;

enum { IPCP_FAULT_KILL = 0, IPCP_FAULT_STOP = 1 };

typedef struct ipcp__fault {
    int stage;      /* ipcp__fault_stage_t; NONE: unset */
    int action;     /* IPCP_FAULT_KILL or IPCP_FAULT_STOP */
    unsigned count; /* fires at the count-th time the stage is reached */
} ipcp__fault_t;

/* The armed stage (NONE when unset); written once when the settings are
 * loaded. */
extern int ipcp__fault_stage;

/* Parses "stage:action[:n]" (n >= 1, default 1); 0, or -1 when bad. */
int ipcp__fault_parse(const char *s, ipcp__fault_t *out);
/* Arms f (from the settings). */
void ipcp__fault_arm(const ipcp__fault_t *f);
/* Lists the stage names into buf, separated by '|'. */
void ipcp__fault_names(char *buf, size_t len);
/* The stage was reached: counts, and fires at the armed count. */
void ipcp__fault_hit(int stage);

static inline void ipcp__fault_point(int stage)
{
    if (__builtin_expect(
            __atomic_load_n(&ipcp__fault_stage, __ATOMIC_RELAXED) == stage, 0))
        ipcp__fault_hit(stage);
}

/* Whether stage is armed (for points that must enqueue something to be
 * reached in a queue's order). */
static inline int ipcp__fault_armed(int stage)
{
    return __builtin_expect(
        __atomic_load_n(&ipcp__fault_stage, __ATOMIC_RELAXED) == stage, 0);
}

#endif
