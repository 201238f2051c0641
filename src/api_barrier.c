/* ipcp_barrier among the ranks of this node, run by its caller: a
 * dissemination barrier (Hensgen, Finkel and Manber, 1988).  In round k
 * each rank sends to the rank 2^k after it and receives from the rank 2^k
 * before it; after ceil(log2(n)) rounds each rank has heard, through a
 * chain of messages, from every other since it entered.
 *
 * The messages are two-sided ones on IPCP_BAR_TAG (engine/proto.h), so
 * they go the mailbox's way where it runs: the caller writes its peer's
 * inbox and reads its own, and no thread stands between them.  Two ranks
 * meet in one message each way.  The barrier it replaces went through
 * both progress threads and rank 0, ~8 us a barrier on a 2-CPU VM, and
 * its eventfd writes woke threads that then spun on the ranks' cores.
 * Where the mailbox is off the same messages take the sockets.
 *
 * A rank sends each other rank at most one message a barrier (the
 * distances 2^k < n differ), and messages match in order per peer and
 * tag, so a peer's k-th message is its k-th barrier's; each carries its
 * barrier and round all the same, and one that says otherwise ends the
 * peer as a broken one. */
#include <stdio.h>

#include "api.h"
#include "common/time.h"
#include "engine/remote.h"

static double ipcp__bar_left(uint64_t until)
{
    uint64_t now = ipcp__now_ns();
    return now < until ? (double)(until - now) * 1e-9 : 0.0;
}

/* Ends peer (why: the reason; NULL: it is gone already) through the
 * progress thread, which owns the peer's state, and fails with why it is
 * gone. */
static ipcp_status_t ipcp__bar_drop(ipcp_comm_t *comm, int peer,
                                    const char *why)
{
    ipcp_request_t *req = ipcp__req_new(comm, IPCP_REQ_DROP);
    if (req) {
        req->peer = peer;
        snprintf(req->errmsg, sizeof(req->errmsg), "%s", why ? why : "");
    }
    return ipcp__cmd_wait(comm, req, 0);
}

/* Waits for h until `until` (ipcp__now_ns's clock).  IPCP_ERR_TIMEOUT
 * names the rank it waited for (recv: from it; else: its inbox). */
static ipcp_status_t ipcp__bar_wait(ipcp_comm_t *comm, ipcp_request_t *h,
                                    uint64_t until, int recv, int rank,
                                    ipcp_xfer_info_t *info)
{
    int done;
    ipcp_status_t st = ipcp_wait_for(h, ipcp__bar_left(until), &done, info);
    if (st != IPCP_IN_PROGRESS)
        return st;
    return ipcp__fail(IPCP_LOG_WARN, IPCP_SUB_API, IPCP_ERR_TIMEOUT,
                      recv ? "barrier timed out after %.1f s waiting for "
                             "rank %d"
                           : "barrier timed out after %.1f s: rank %d took "
                             "no message",
                      comm->timeout_s, ipcp__job_rank(comm, rank));
}

/* Round k of barrier e: its message to `to`, then the one from `from`.
 * *sent: the send's handle, waited for when the barrier ends. */
static ipcp_status_t ipcp__bar_round(ipcp_comm_t *comm, uint64_t e, int k,
                                     int to, int from, uint64_t until,
                                     ipcp_request_t **sent)
{
    ipcp__bar_msg_t *out = &comm->bar_out[k], *in = &comm->bar_in[k];
    ipcp_request_t *h;
    ipcp_xfer_info_t info;
    char why[160];

    *out = (ipcp__bar_msg_t){e, (uint32_t)k, IPCP_BAR_MAGIC};
    /* The fault stage: rank 0 has sent nothing, another rank its first
     * message (tests/api/test_fault.c kills or stops either there). */
    if (k == 0 && comm->rank == 0)
        ipcp__fault_point(IPCP_FAULT_BARRIER_ENTERED);
    IPCP_CHECK(ipcp__post(comm, IPCP_REQ_SEND, out, sizeof(*out), to,
                          IPCP_BAR_TAG, sent));
    if (k == 0 && comm->rank != 0)
        ipcp__fault_point(IPCP_FAULT_BARRIER_ENTERED);
    IPCP_CHECK(ipcp__post(comm, IPCP_REQ_RECV, in, sizeof(*in), from,
                          IPCP_BAR_TAG, &h));
    ipcp_status_t st = ipcp__bar_wait(comm, h, until, 1, from, &info);
    if (st == IPCP_OK && info.nbytes == sizeof(*in) && in->epoch == e &&
        in->round == (uint32_t)k && in->magic == IPCP_BAR_MAGIC)
        return IPCP_OK;
    if (st != IPCP_OK && st != IPCP_ERR_TRUNCATED)
        return st;
    comm->bar_broken = 1;
    if (st == IPCP_OK)
        snprintf(why, sizeof(why),
                 "barrier message out of order (%zu bytes, barrier %llu "
                 "round %u; expected barrier %llu round %d)",
                 info.nbytes, (unsigned long long)in->epoch, in->round,
                 (unsigned long long)e, k);
    else
        snprintf(why, sizeof(why),
                 "barrier message out of order (more than %zu bytes)",
                 sizeof(*in));
    return ipcp__bar_drop(comm, from, why);
}

/* Until the commands this rank queued before (a send its progress thread
 * has yet to take up) have run, as they had when the barrier was one of
 * them: a buffer freed after a barrier is one the engine no longer reads
 * for an eager message (ipcpipe-bench frees its buffers so after a case
 * it gave up on).  Nothing is queued in the steady state. */
static ipcp_status_t ipcp__bar_fence(ipcp_comm_t *comm)
{
    if (!atomic_load(&comm->queued))
        return IPCP_OK;
    return ipcp__cmd_wait(comm, ipcp__req_new(comm, IPCP_REQ_FENCE), 1);
}

static ipcp_status_t ipcp__bar_run(ipcp_comm_t *comm)
{
    ipcp_request_t *sent[IPCP_BAR_ROUNDS];
    ipcp_status_t st = IPCP_OK;
    int n = comm->size, me = comm->rank, k = 0;
    uint64_t until = ipcp__now_ns() + (uint64_t)(comm->timeout_s * 1e9);

    IPCP_CHECK(ipcp__bar_fence(comm));
    for (int r = 0; r < n; r++)
        if (r != me && atomic_load(&comm->peers[r].gone))
            return ipcp__bar_drop(comm, r, NULL);
    uint64_t e = comm->bar_epoch++;
    for (int d = 1; d < n && st == IPCP_OK; d <<= 1, k++)
        st = ipcp__bar_round(comm, e, k, (me + d) % n, (me - d + n) % n, until,
                             &sent[k]);
    /* A failed round's sends stay (finalize reaps their handles): the
     * barrier is broken or a peer gone, and their messages stay where
     * they are. */
    for (int i = 0; i < k && st == IPCP_OK; i++)
        st = ipcp__bar_wait(comm, sent[i], until, 0, (me + (1 << i)) % n, NULL);
    /* Midway, for any cause but a lost peer (which later barriers meet
     * again at their start): the ranks' barriers no longer pair up. */
    if (st != IPCP_OK && st != IPCP_ERR_PEER_LOST)
        comm->bar_broken = 1;
    return st;
}

ipcp_status_t ipcp__barrier_here(ipcp_comm_t *comm)
{
    ipcp_status_t st;
    if (atomic_exchange(&comm->bar_busy, 1))
        return ipcp__fail(IPCP_LOG_INFO, IPCP_SUB_API, IPCP_ERR_STATE,
                          "a barrier is already in progress on this "
                          "communicator");
    if (comm->bar_broken)
        st = ipcp__fail(IPCP_LOG_INFO, IPCP_SUB_API, IPCP_ERR_STATE,
                        "an earlier barrier failed midway (timed out or "
                        "met a message out of order); barriers can no "
                        "longer be matched up on this communicator");
    else
        st = ipcp__bar_run(comm);
    atomic_store(&comm->bar_busy, 0);
    return st;
}
