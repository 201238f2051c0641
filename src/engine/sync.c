/* Stream-ordered operations (ipcpipe_cuda.h): each one borrows a pair of
 * flags in pinned host memory.  At the call the user's stream gets "write
 * start = gen" and "wait until done >= gen".  The progress thread starts
 * the operation only once it sees start reach gen (so our in-order queues
 * never wait on a user's stream, and operations start in the order their
 * streams reach them); the transfer's last queue writes done.
 *
 * Values only grow (each use of an entry takes the next generation), so a
 * user's stream still waiting for an older use is released by a newer one.
 * An entry goes back to the pool only once its start has landed: otherwise
 * a late start write of an old use could land after a newer one and move
 * the flag back.  An operation that ends before its start was seen (a
 * failure, finalize) releases the user's stream from the CPU and leaves its
 * entry draining until the start lands. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/engine.h"

#define IPCP_SYNC_ENTRIES 1024

struct ipcp__sync {
    ipcp__sync_t *next_free; /* the pool, or the draining list */
    ipcp__flag_t *start;
    ipcp__flag_t *done;
    uint64_t gen;
    int device;
    ipcp_comm_t *comm;
};

static ipcp_status_t ipcp__sync_pool(ipcp_comm_t *comm)
{
    size_t size = (size_t)IPCP_SYNC_ENTRIES * 2 * sizeof(ipcp__flag_t);
    ipcp_status_t st;
    if (comm->sync_mem)
        return IPCP_OK;
    st = comm->host_ops->mem_alloc(comm->host, size, -1, &comm->sync_mem,
                                   &comm->sync_handle);
    if (st != IPCP_OK)
        return st;
    comm->sync_entries = calloc(IPCP_SYNC_ENTRIES, sizeof(ipcp__sync_t));
    if (!comm->sync_entries) {
        comm->host_ops->mem_free(comm->host, comm->sync_handle);
        comm->sync_mem = NULL;
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_ENGINE, IPCP_ERR_NOMEM,
                          "no memory for stream-ordering flags");
    }
    comm->sync_size = size;
    ipcp__flag_t *f = comm->sync_mem;
    for (int i = IPCP_SYNC_ENTRIES - 1; i >= 0; i--) {
        ipcp__sync_t *e = &comm->sync_entries[i];
        e->start = &f[2 * i];
        e->done = &f[2 * i + 1];
        e->comm = comm;
        e->next_free = comm->sync_free;
        comm->sync_free = e;
    }
    return IPCP_OK;
}

/* The flags must be visible to streams of `device`. */
static ipcp_status_t ipcp__sync_register(ipcp_comm_t *comm, int device)
{
    if (device < 0 || device >= IPCP_MAX_DEVICES)
        return ipcp__fail(IPCP_LOG_INFO, IPCP_SUB_API, IPCP_ERR_INVALID,
                          "device %d out of range", device);
    if (comm->sync_reg[device])
        return IPCP_OK;
    return comm->dev_ops->shm_register(ipcp__dev(comm), comm->sync_mem,
                                       comm->sync_size, device,
                                       &comm->sync_reg[device]);
}

ipcp_status_t ipcp__sync_acquire(ipcp_comm_t *comm, int device,
                                 ipcp__sync_t **out)
{
    ipcp_status_t st;
    ipcp__lock(&comm->sync_lock, IPCP_LOCK_SYNC);
    st = ipcp__sync_pool(comm);
    if (st == IPCP_OK)
        st = ipcp__sync_register(comm, device);
    ipcp__sync_t *e = st == IPCP_OK ? comm->sync_free : NULL;
    if (e) {
        comm->sync_free = e->next_free;
        atomic_fetch_add(&comm->sync_held, 1); /* seq_cst: see below */
        e->gen++;
        e->device = device;
    } else if (st == IPCP_OK) {
        st = ipcp__fail(IPCP_LOG_WARN, IPCP_SUB_API, IPCP_ERR_NOMEM,
                        "more than %d stream-ordered operations in flight",
                        IPCP_SYNC_ENTRIES);
    }
    ipcp__unlock(&comm->sync_lock, IPCP_LOCK_SYNC);
    if (st != IPCP_OK)
        return st;
    /* A striping measurement that began before sync_held rose (the
     * progress thread raises calibrating, then reads sync_held) must end
     * before this operation's wait enters the user's stream: it waits for
     * the context's streams.  Once per pair of GPUs, about a second. */
    while (atomic_load(&comm->calibrating))
        usleep(100);
    *out = e;
    return IPCP_OK;
}

/* Into the free list, out of sync_held's count (sync_lock held). */
static void ipcp__sync_free_locked(ipcp_comm_t *comm, ipcp__sync_t *e)
{
    e->next_free = comm->sync_free;
    comm->sync_free = e;
    atomic_fetch_sub_explicit(&comm->sync_held, 1, memory_order_relaxed);
}

/* Back to the pool; only once `start` was consumed (see the top). */
void ipcp__sync_put(ipcp__sync_t *e)
{
    ipcp_comm_t *comm = e->comm;
    ipcp__lock(&comm->sync_lock, IPCP_LOCK_SYNC);
    ipcp__sync_free_locked(comm, e);
    ipcp__unlock(&comm->sync_lock, IPCP_LOCK_SYNC);
}

uint64_t *ipcp__sync_start(ipcp__sync_t *e)
{
    return &e->start->v;
}

uint64_t *ipcp__sync_done(ipcp__sync_t *e)
{
    return &e->done->v;
}

uint64_t ipcp__sync_gen(const ipcp__sync_t *e)
{
    return e->gen;
}

/* Whether the user's stream has reached the operation (cyclic compare, as
 * the stream memory operations make). */
int ipcp__sync_started(const ipcp__sync_t *e)
{
    return ipcp__flag_reached(__atomic_load_n(&e->start->v, __ATOMIC_ACQUIRE),
                              e->gen);
}

/* The operation ended.  done is written from the CPU too: harmless when
 * our queue wrote it already, and it releases the user's stream when the
 * operation failed before any work of it was enqueued. */
void ipcp__sync_end(ipcp_comm_t *comm, ipcp__sync_t *e)
{
    __atomic_store_n(&e->done->v, e->gen, __ATOMIC_RELEASE);
    if (ipcp__sync_started(e)) {
        ipcp__sync_put(e);
        return;
    }
    ipcp__lock(&comm->sync_lock, IPCP_LOCK_SYNC);
    e->next_free = comm->sync_draining;
    comm->sync_draining = e;
    ipcp__unlock(&comm->sync_lock, IPCP_LOCK_SYNC);
}

/* Progress thread: operations whose stream got there start; entries whose
 * start landed go back to the pool.  Returns how many things moved. */
int ipcp__sync_poll(ipcp_comm_t *comm)
{
    ipcp__list_t *l, *tmp;
    int n = 0;
    ipcp__list_for_each_safe(l, tmp, &comm->deferred)
    {
        ipcp_request_t *req = ipcp__list_entry(l, ipcp_request_t, link);
        if (!ipcp__sync_started(req->sync))
            continue;
        ipcp__list_del(l);
        req->sync_armed = 1;
        ipcp__match_cmd(comm, req);
        n++;
    }
    ipcp__lock(&comm->sync_lock, IPCP_LOCK_SYNC);
    for (ipcp__sync_t **pp = &comm->sync_draining, *e; (e = *pp);) {
        if (!ipcp__sync_started(e)) {
            pp = &e->next_free;
            continue;
        }
        *pp = e->next_free;
        ipcp__sync_free_locked(comm, e);
        n++;
    }
    ipcp__unlock(&comm->sync_lock, IPCP_LOCK_SYNC);
    return n;
}

int ipcp__sync_pending(ipcp_comm_t *comm)
{
    return !ipcp__list_empty(&comm->deferred) || comm->sync_draining;
}

int ipcp__streams_wait(ipcp_comm_t *comm)
{
    return atomic_load(&comm->sync_held) > 0 ||
           atomic_load(&comm->lane_reqs) > 0;
}

void ipcp__sync_cleanup(ipcp_comm_t *comm)
{
    for (int d = 0; d < IPCP_MAX_DEVICES; d++) {
        if (comm->sync_reg[d])
            comm->dev_ops->shm_unregister(ipcp__dev(comm), comm->sync_reg[d]);
        comm->sync_reg[d] = NULL;
    }
    if (comm->sync_mem)
        comm->host_ops->mem_free(comm->host, comm->sync_handle);
    comm->sync_mem = NULL;
    free(comm->sync_entries);
    comm->sync_entries = NULL;
    comm->sync_free = NULL;
    comm->sync_draining = NULL;
}
