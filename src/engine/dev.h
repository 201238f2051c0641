/* The device backend, opened on first use (dev.c). */
#ifndef IPCP_ENGINE_DEV_H
#define IPCP_ENGINE_DEV_H

#include "engine/comm.h"

/* Where the device backend stands (comm->dev_state). */
enum { IPCP_DEV_CLOSED = 0, IPCP_DEV_OPEN = 1, IPCP_DEV_FAILED = 2 };

/* The device backend's instance if it is open, else NULL (any thread). */
static inline ipcp__backend_t *ipcp__dev(ipcp_comm_t *comm)
{
    return __atomic_load_n(&comm->dev_be, __ATOMIC_ACQUIRE);
}
/* The device backend's instance, opened now if it is not yet (once per
 * communicator, whichever thread comes first); NULL when there is none or
 * it cannot open here, with the reason as last error (logged once, at the
 * level of `level`).  why names the use, for the log.  No lock held. */
ipcp__backend_t *ipcp__dev_get(ipcp_comm_t *comm, int level, const char *why);
/* As ipcp__dev_get for a pointer of unknown kind: opens the backend only
 * if memory of its kind can exist in this process (its ops' present). */
ipcp__backend_t *ipcp__dev_for_ptr(ipcp_comm_t *comm);
/* Whether no buffer can be device memory now: the backend is not open,
 * and ipcp__dev_for_ptr would not open it.  No lock, no driver call: a
 * small host message asks it on every call. */
int ipcp__dev_absent(ipcp_comm_t *comm);
/* Whether the device backend is open or may still open (a peer's lane
 * waits for us then, rather than being told we have none). */
int ipcp__dev_possible(ipcp_comm_t *comm);

#endif
