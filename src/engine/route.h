/* The receiver's choice of path for a matched RTS, as a table (route.c).
 *
 * What both sides offer is gathered once (ipcp__offer_t: the RTS's
 * flags, the receive, this process), then the routes are asked in order
 * of preference whether they can serve it: a pure question of the offer
 * and the settings, testable without a backend.  The first that can is
 * started; a start may still decline (mapping the sender's buffer or
 * reading its memory can fail, the kernel may forbid process_vm_readv),
 * and then the next route that can serve is tried.  The last route, the
 * sender's copy, serves everything.
 *
 * The route's index travels in the CTS, and the sender takes its own
 * step on that route's tx: both ends run the same table, which the
 * bootstrap's hello checks (ipcp__proto).
 *
 * A new path is a file with its route (serves, start, tx), its line in
 * route.c and its tests. */
#ifndef IPCP_ENGINE_ROUTE_H
#define IPCP_ENGINE_ROUTE_H

#include "engine/engine.h"

/* What the sender offered in its RTS and what the receive is, as seen
 * by the receiver when the two match. */
typedef struct ipcp__offer {
    uint64_t len;
    int src_type;            /* the sender's ipcp_mem_type_t */
    int dst_type;            /* the receive buffer's */
    unsigned src_map : 1;    /* RTS_SRC: its allocation can be mapped here */
    unsigned src_addr : 1;   /* RTS_SRC_ADDR: its address, to read */
    unsigned pvm_ok : 1;     /* RTS_PVM_OK: it may write us (writev) */
    unsigned reach : 1;      /* device: its GPU can write the buffer's */
    unsigned dst_shared : 1; /* the buffer lies in a shareable region */
    unsigned sync : 1;       /* a stream-ordered receive */
    unsigned one_cpu : 1;    /* this process may run on one CPU */
    unsigned no_bounce : 1;  /* RTS_NO_BOUNCE: it cannot map our ring */
    ipcp_path_t force;       /* IPCPIPE_PATH or the caller's */
} ipcp__offer_t;

/* The path forced on a transfer with tag from src_type to dst_type
 * memory: a forced bounce path is for device to device transfers, and
 * leaves the others (host messages beside them) to auto; the library's
 * own messages (negative tags: a barrier's) are never forced. */
static inline ipcp_path_t ipcp__force_for(ipcp_path_t force, int tag,
                                          int src_type, int dst_type)
{
    if (tag < 0 || (force == IPCP_PATH_BOUNCE &&
                    (src_type != IPCP_MEM_CUDA || dst_type != IPCP_MEM_CUDA)))
        return IPCP_PATH_AUTO;
    return force;
}

/* Whether a forced path lets a direct route take the transfer (auto, or
 * direct itself). */
static inline int ipcp__direct_allowed(ipcp_path_t force)
{
    return force == IPCP_PATH_AUTO || force == IPCP_PATH_DIRECT;
}

typedef struct ipcp__route {
    const char *name;
    /* Whether the route can serve the offer under cfg (no side effect). */
    int (*serves)(const ipcp__offer_t *o, const ipcp__config_t *cfg);
    /* Takes the transfer: 1, or 0 to decline it with the request
     * untouched (the next route that serves is tried; what it made on the
     * way, queues, peer access, stays for later transfers).  A failure
     * after it took the transfer is the request's (it completes with the
     * error). */
    int (*start)(ipcp_comm_t *comm, ipcp__peer_t *peer,
                 const ipcp__msg_rts_t *rts, ipcp_request_t *req,
                 const ipcp__offer_t *o);
    /* The sender's step on a CTS that start sent (its route field names
     * this route); fds came with it and are closed after.  NULL for a
     * route whose receiver copies alone: the sender then hears only the
     * end, a DRIVEN CTS. */
    void (*tx)(ipcp_comm_t *comm, ipcp__peer_t *peer, ipcp_request_t *req,
               const ipcp__msg_cts_t *cts, const int *fds, int nfds);
} ipcp__route_t;

/* The routes, in order of preference; NULL-terminated. */
extern const ipcp__route_t *const ipcp__routes[];

/* Adds a route ahead of the table's (tests: a path that lives in a test
 * program).  Both ends of a job must add the same.  -1 once a
 * communicator has started in this process (the numbers are fixed then),
 * or when the room for added routes is full. */
int ipcp__route_add(const ipcp__route_t *r);
/* A route's number in CTSs (added routes first, then the table's), and
 * the route of a number (NULL for none). */
uint32_t ipcp__route_id(const ipcp__route_t *r);
const ipcp__route_t *ipcp__route_by_id(uint32_t id);

/* The offer of rts against req (takes comm->mem_lock to look the
 * receive buffer up). */
void ipcp__offer_gather(ipcp_comm_t *comm, const ipcp__msg_rts_t *rts,
                        const ipcp_request_t *req, ipcp_path_t force,
                        ipcp__offer_t *o);
/* The first route of table from *i on that serves o under cfg (*i moves
 * past it); NULL when none does. */
const ipcp__route_t *ipcp__route_next(const ipcp__route_t *const *table,
                                      const ipcp__offer_t *o,
                                      const ipcp__config_t *cfg, size_t *i);
/* Starts the first route of table that serves o and takes the transfer;
 * returns it, or NULL when every one declined or none serves. */
const ipcp__route_t *ipcp__route_take(const ipcp__route_t *const *table,
                                      const ipcp__offer_t *o, ipcp_comm_t *comm,
                                      ipcp__peer_t *peer,
                                      const ipcp__msg_rts_t *rts,
                                      ipcp_request_t *req);

/* The sender's copy, decided (no side effect): direct into our buffer
 * (*mode IPCP_DST_MAPPED when it is shareable, IPCP_DST_PVM when the
 * sender may write us with process_vm_writev), through a ring in our
 * device memory (IPCP_DST_BOUNCE: device memory neither side shares) or
 * staged (0), and why (IPCP_WHY_*), a forced path obeyed; -1 when the
 * forced direct or bounce path cannot serve (*why says why). */
int ipcp__sent_choose(const ipcp__offer_t *o, const ipcp__config_t *cfg,
                      int shareable, int *mode, int *why);

#endif
