/* Barrier through rank 0: every rank reports, rank 0 releases.  A rank can
 * be at most one epoch ahead of rank 0 (it needs rank 0's release to leave),
 * so rank 0 counts arrivals per epoch parity. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/time.h"
#include "engine/engine.h"

static void ipcp__barrier_send(ipcp_comm_t *comm, int to, int type,
                               uint64_t epoch)
{
    ipcp__msg_barrier_t m;
    memset(&m, 0, sizeof(m));
    m.hdr.type = (uint32_t)type;
    m.epoch = epoch;
    ipcp__peer_post(comm, &comm->peers[to], &m, sizeof(m), NULL, 0);
}

static void ipcp__barrier_done(ipcp_comm_t *comm, ipcp_status_t st,
                               const char *msg)
{
    ipcp_request_t *req = comm->bar_pending;
    comm->bar_pending = NULL;
    if (req)
        ipcp__req_complete(req, st, msg);
}

/* Rank 0: releases everyone once all have arrived. */
static void ipcp__barrier_try_release(ipcp_comm_t *comm)
{
    uint64_t e = comm->bar_epoch - 1;
    if (!comm->bar_pending || comm->bar_count[e & 1] < comm->size - 1)
        return;
    comm->bar_count[e & 1] = 0;
    ipcp__fault_point(IPCP_FAULT_BARRIER_ENTERED);
    for (int r = 1; r < comm->size; r++)
        ipcp__barrier_send(comm, r, IPCP_MSG_BARRIER_REL, e);
    ipcp__barrier_done(comm, IPCP_OK, NULL);
}

void ipcp__barrier_cmd(ipcp_comm_t *comm, ipcp_request_t *req)
{
    if (comm->bar_broken) {
        ipcp__req_complete(req, IPCP_ERR_STATE,
                           "an earlier barrier timed "
                           "out; barriers can no longer "
                           "be matched up on this "
                           "communicator");
        return;
    }
    if (comm->bar_pending) {
        ipcp__req_complete(req, IPCP_ERR_STATE,
                           "a barrier is already in "
                           "progress on this communicator");
        return;
    }
    for (int r = 0; r < comm->size; r++) {
        if (r != comm->rank && ipcp__peer_closed(&comm->peers[r])) {
            char msg[IPCP_ERRMSG_MAX];
            ipcp__req_complete(
                req, IPCP_ERR_PEER_LOST,
                ipcp__peer_gone(comm, &comm->peers[r], msg, sizeof(msg)));
            return;
        }
    }
    comm->bar_pending = req;
    comm->bar_deadline = ipcp__now_s() + comm->timeout_s;
    uint64_t e = comm->bar_epoch++;
    if (comm->size == 1) {
        ipcp__barrier_done(comm, IPCP_OK, NULL);
        return;
    }
    if (comm->rank == 0)
        ipcp__barrier_try_release(comm);
    else
        ipcp__barrier_send(comm, 0, IPCP_MSG_BARRIER, e);
    if (comm->rank != 0)
        ipcp__fault_point(IPCP_FAULT_BARRIER_ENTERED);
}

void ipcp__barrier_msg(ipcp_comm_t *comm, ipcp__peer_t *peer, int type,
                       uint64_t epoch)
{
    if (type == IPCP_MSG_BARRIER && comm->rank == 0) {
        /* A rank enters barriers one at a time, at most one ahead of us:
         * a second arrival for one epoch (or one from the future) would
         * release a barrier another rank has not reached. */
        if (epoch != comm->bar_seen[peer->rank] || epoch > comm->bar_epoch) {
            ipcp__peer_lost(comm, peer, "barrier message out of order");
            return;
        }
        comm->bar_count[epoch & 1]++;
        comm->bar_seen[peer->rank] = epoch + 1;
        ipcp__barrier_try_release(comm);
    } else if (type == IPCP_MSG_BARRIER_REL && peer->rank == 0 &&
               comm->bar_pending && epoch + 1 == comm->bar_epoch) {
        ipcp__barrier_done(comm, IPCP_OK, NULL);
    } else {
        IPCP_WARN(IPCP_SUB_ENGINE,
                  "unexpected barrier message %d (epoch %llu) "
                  "from rank %d",
                  type, (unsigned long long)epoch, peer->rank);
    }
}

void ipcp__barrier_fail(ipcp_comm_t *comm, const char *msg)
{
    ipcp__barrier_done(comm, IPCP_ERR_PEER_LOST, msg);
}

void ipcp__barrier_check(ipcp_comm_t *comm)
{
    char msg[IPCP_ERRMSG_MAX];
    size_t n = 0;
    if (!comm->bar_pending || ipcp__now_s() < comm->bar_deadline)
        return;
    if (comm->rank != 0) {
        snprintf(msg, sizeof(msg),
                 "barrier not released by rank 0 within "
                 "%.1f s",
                 comm->timeout_s);
    } else {
        n = (size_t)snprintf(msg, sizeof(msg),
                             "barrier timed out after %.1f "
                             "s waiting for rank",
                             comm->timeout_s);
        for (int r = 1; r < comm->size && n < sizeof(msg) - 8; r++)
            if (comm->bar_seen[r] != comm->bar_epoch)
                n += (size_t)snprintf(msg + n, sizeof(msg) - n, " %d", r);
    }
    /* Ranks now disagree on the epoch; later barriers would pair up
     * wrongly, so they fail instead. */
    comm->bar_broken = 1;
    ipcp__barrier_done(comm, IPCP_ERR_TIMEOUT, msg);
}
