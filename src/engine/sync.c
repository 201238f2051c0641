/* Stream-ordered operations (ipcpipe_cuda.h): each one borrows a pair of
 * flags in pinned host memory.  The user's stream writes `start` = gen
 * when its earlier work is done and waits for `done` >= gen; the
 * transfer's queues wait for `start` before their work and write `done`
 * after it.
 *
 * Values only grow (each use of an entry takes the next generation), so a
 * user's stream still waiting for an older use is released by a newer one.
 * An entry goes back to the pool only once its `start` has been consumed by
 * a queue of ours: otherwise a late `start` write of an old use could land
 * after a newer one and move the flag back.  An operation that fails before
 * any of its work was enqueued therefore sends its entry through the
 * device's sync queue (wait for start, write done) on the way back. */
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"

#define IPCP_SYNC_ENTRIES 1024

struct ipcp__sync {
    ipcp__sync_t *next_free;
    ipcp__flag_t *start;
    ipcp__flag_t *done;
    uint64_t gen;
    int device;
    ipcp_comm_t *comm;
    ipcp__track_t track; /* failure path through the sync queue */
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
    return comm->cuda_ops->shm_register(comm->cuda, comm->sync_mem,
                                        comm->sync_size, device,
                                        &comm->sync_reg[device]);
}

ipcp_status_t ipcp__sync_acquire(ipcp_comm_t *comm, int device,
                                 ipcp__sync_t **out)
{
    ipcp_status_t st;
    pthread_mutex_lock(&comm->sync_lock);
    st = ipcp__sync_pool(comm);
    if (st == IPCP_OK)
        st = ipcp__sync_register(comm, device);
    ipcp__sync_t *e = st == IPCP_OK ? comm->sync_free : NULL;
    if (e) {
        comm->sync_free = e->next_free;
        e->gen++;
        e->device = device;
    } else if (st == IPCP_OK) {
        st = ipcp__fail(IPCP_LOG_WARN, IPCP_SUB_API, IPCP_ERR_NOMEM,
                        "more than %d stream-ordered operations in flight",
                        IPCP_SYNC_ENTRIES);
    }
    pthread_mutex_unlock(&comm->sync_lock);
    if (st == IPCP_OK)
        *out = e;
    return st;
}

/* Back to the pool; only once `start` was consumed (see the top). */
void ipcp__sync_put(ipcp__sync_t *e)
{
    ipcp_comm_t *comm = e->comm;
    pthread_mutex_lock(&comm->sync_lock);
    e->next_free = comm->sync_free;
    comm->sync_free = e;
    pthread_mutex_unlock(&comm->sync_lock);
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

static void ipcp__sync_drained(ipcp__track_t *t)
{
    ipcp__sync_t *e = t->arg;
    ipcp__track_destroy(t);
    ipcp__sync_put(e);
}

/* Progress thread: the operation failed before any of its work was
 * enqueued.  The device's sync queue waits for the user's `start`, writes
 * `done` (releasing the user's stream) and then returns the entry. */
void ipcp__sync_abandon(ipcp_comm_t *comm, ipcp__sync_t *e)
{
    int d = e->device;
    ipcp_status_t st = IPCP_OK;
    if (!comm->sync_q[d])
        st = comm->cuda_ops->queue_create(comm->cuda, d, &comm->sync_q[d]);
    if (st != IPCP_OK) {
        /* Without a queue the entry cannot come back safely: release the
         * user's stream from the CPU and leave the entry out of the pool. */
        __atomic_store_n(&e->done->v, e->gen, __ATOMIC_RELEASE);
        return;
    }
    ipcp__queue_t *q = comm->sync_q[d];
    ipcp__track_init(&e->track, 1, ipcp__sync_drained, e);
    comm->cuda_ops->flag_wait(q, &e->start->v, e->gen, NULL, NULL);
    comm->cuda_ops->flag_write(q, &e->done->v, e->gen, NULL);
    if (comm->cuda_ops->notify(q, &e->track) != IPCP_OK) {
        __atomic_store_n(&e->done->v, e->gen, __ATOMIC_RELEASE);
        ipcp__track_destroy(&e->track);
    }
}

void ipcp__sync_cleanup(ipcp_comm_t *comm)
{
    for (int d = 0; d < IPCP_MAX_DEVICES; d++) {
        if (comm->sync_q[d])
            comm->cuda_ops->queue_destroy(comm->sync_q[d]);
        comm->sync_q[d] = NULL;
    }
    for (int d = 0; d < IPCP_MAX_DEVICES; d++) {
        if (comm->sync_reg[d])
            comm->cuda_ops->shm_unregister(comm->cuda, comm->sync_reg[d]);
        comm->sync_reg[d] = NULL;
    }
    if (comm->sync_mem)
        comm->host_ops->mem_free(comm->host, comm->sync_handle);
    comm->sync_mem = NULL;
    free(comm->sync_entries);
    comm->sync_entries = NULL;
    comm->sync_free = NULL;
}
