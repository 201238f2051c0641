/* Opening the device backend on first use.
 *
 * Opening CUDA costs cuInit (about 0.1 s on an H200 machine) and a thread,
 * which a job that moves host memory only should not pay in ipcp_init.  So
 * the backend opens at the first call that needs it: a device allocation,
 * a stream-ordered call, or a buffer that may be device memory.  A buffer
 * of unknown kind may be device memory only when the backend's present()
 * says memory of its kind can exist in this process (CUDA: libcuda.so.1 is
 * loaded, by the user's runtime or a framework); by then cuInit is cheap.
 *
 * No peer's message needs it: a device source offered to a host buffer
 * goes through the staged path, whose device copies are the sender's, and
 * a peer's lane block waits until this rank makes its own (engine/lane.c). */
#include <stdio.h>

#include "common/time.h"
#include "engine/engine.h"

static int ipcp__dev_state(ipcp_comm_t *comm)
{
    return atomic_load_explicit(&comm->dev_state, memory_order_acquire);
}

/* Under dev_lock: opens the backend once; a failure is kept for good. */
static void ipcp__dev_open_locked(ipcp_comm_t *comm, const char *why)
{
    const ipcp__backend_ops_t *ops = comm->dev_ops;
    ipcp__backend_t *be = NULL;
    uint64_t t0 = ipcp__now_ns();
    ipcp_status_t st = ops->open(comm->cfg, &be);
    double ms = (double)(ipcp__now_ns() - t0) / 1e6;
    if (st == IPCP_OK) {
        __atomic_store_n(&comm->dev_be, be, __ATOMIC_RELEASE);
        atomic_store_explicit(&comm->dev_state, IPCP_DEV_OPEN,
                              memory_order_release);
        /* Callers take no more turns: what one left for a turn of its own
         * (a record it kicked without waking the thread) is the thread's
         * now. */
        if (comm->thread_started)
            ipcp__comm_wake(comm);
        IPCP_INFO(IPCP_SUB_INIT, "%s backend opened for %s in %.1f ms",
                  ops->name, why, ms);
        return;
    }
    snprintf(comm->dev_err, sizeof(comm->dev_err), "%s", ipcp__last_error());
    atomic_store_explicit(&comm->dev_state, IPCP_DEV_FAILED,
                          memory_order_release);
    IPCP_INFO(IPCP_SUB_INIT, "%s backend not used (asked for %s; %.1f ms): %s",
              ops->name, why, ms, comm->dev_err);
}

ipcp__backend_t *ipcp__dev_get(ipcp_comm_t *comm, int level, const char *why)
{
    ipcp__backend_t *be = ipcp__dev(comm);
    if (ipcp__likely(be != NULL))
        return be;
    if (!comm->dev_ops) {
        ipcp__fail(level, IPCP_SUB_API, IPCP_ERR_UNSUPPORTED,
                   "%s needs the CUDA backend, which is not available (not "
                   "built in, or IPCPIPE_CUDA=off)",
                   why);
        return NULL;
    }
    ipcp__lock(&comm->dev_lock, IPCP_LOCK_DEV);
    if (ipcp__dev_state(comm) == IPCP_DEV_CLOSED)
        ipcp__dev_open_locked(comm, why);
    be = ipcp__dev(comm);
    if (!be)
        ipcp__fail(level, IPCP_SUB_API, IPCP_ERR_UNSUPPORTED,
                   "%s needs the CUDA backend, which is not available in "
                   "this process: %s",
                   why, comm->dev_err);
    ipcp__unlock(&comm->dev_lock, IPCP_LOCK_DEV);
    return be;
}

/* Whether the backend cannot open for a pointer: there is none, it
 * failed, or memory of its kind cannot exist in this process yet. */
static int ipcp__dev_unwanted(ipcp_comm_t *comm)
{
    return !comm->dev_ops || ipcp__dev_state(comm) == IPCP_DEV_FAILED ||
           (comm->dev_ops->present && !comm->dev_ops->present());
}

ipcp__backend_t *ipcp__dev_for_ptr(ipcp_comm_t *comm)
{
    ipcp__backend_t *be = ipcp__dev(comm);
    if (ipcp__likely(be != NULL) || ipcp__dev_unwanted(comm))
        return be;
    return ipcp__dev_get(comm, IPCP_LOG_DEBUG,
                         "a buffer that may be device "
                         "memory");
}

int ipcp__dev_absent(ipcp_comm_t *comm)
{
    return !ipcp__dev(comm) && ipcp__dev_unwanted(comm);
}

int ipcp__dev_possible(ipcp_comm_t *comm)
{
    return comm->dev_ops && ipcp__dev_state(comm) != IPCP_DEV_FAILED;
}
