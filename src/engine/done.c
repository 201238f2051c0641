/* A transfer's end: its status from both sides (its track, the error
 * slots the peer writes, our half of a split receive), what it held
 * given back, and its request completed (progress thread). */
#include <stdio.h>

#include "engine/progress.h"
#include "engine/remote.h"

/* The sender's verdict on a transfer we received, from its error slot:
 * IPCP_OK unless the slot holds this transfer's number. */
static ipcp_status_t ipcp__err_slot_check(const ipcp__xfer_t *x,
                                          const ipcp__errslot_t *slot,
                                          uint64_t seq, char *msg, size_t len)
{
    if (!slot || __atomic_load_n(&slot->seq, __ATOMIC_ACQUIRE) != seq)
        return IPCP_OK;
    ipcp_status_t st =
        ipcp__peer_status(__atomic_load_n(&slot->status, __ATOMIC_RELAXED));
    snprintf(msg, len,
             "rank %d could not write this transfer (%s on its "
             "side)",
             x->peer->rank, ipcp_strerror(st));
    return st;
}

/* Ends the sender's side of a transfer this process copied (a DRIVEN
 * CTS): its buffer is free again, and it learns how the copy went. */
void ipcp__drive_end(ipcp_comm_t *comm, ipcp__peer_t *peer, uint64_t id,
                     ipcp_path_t path, ipcp_status_t st, const char *msg)
{
    char why[IPCP_ERRWIRE_MAX] = "";
    if (ipcp__peer_closed(peer))
        return;
    ipcp__fault_point(IPCP_FAULT_DATA_IN_PLACE);
    if (st != IPCP_OK) /* formatted only for a failure: it runs per transfer */
        snprintf(why, sizeof(why),
                 "rank %d could not copy this transfer out "
                 "of our buffer: %.120s",
                 comm->rank, msg);
    ipcp__cts_end(comm, peer, id, IPCP_CTS_DRIVEN, path, st, why);
}

/* A finished transfer's status beyond its own track's (st): what the
 * peer's side wrote in the error slots, our half of a SPLIT receive (its
 * track ends here); msg gets the reason, *gone whether it was the peer's
 * loss. */
static ipcp_status_t ipcp__done_status(ipcp__xfer_t *x, ipcp_status_t st,
                                       char *msg, size_t len, int *gone)
{
    if (st == IPCP_OK)
        st = ipcp__err_slot_check(x, x->err_slot, x->err_seq, msg, len);
    if (st == IPCP_OK) /* a striped transfer's staged part */
        st = ipcp__err_slot_check(x, x->err_slot2, x->err_seq2, msg, len);
    if (x->split_head) { /* our half of a SPLIT receive */
        if (st == IPCP_OK && !ipcp__track_ok(&x->head)) {
            st = atomic_load(&x->head.status);
            *gone = st == IPCP_ERR_PEER_LOST;
            ipcp__track_errmsg(&x->head, msg, len);
        }
        ipcp__track_destroy(&x->head);
        x->split_head = 0;
    }
    return st;
}

void ipcp__run_done(ipcp_comm_t *comm, ipcp__xfer_t *x)
{
    char msg[IPCP_ERRMSG_MAX] = "";
    ipcp_status_t st = atomic_load(&x->track.status);
    /* Found here, not reported by the peer: a copy out of its memory that
     * met no such process. */
    int gone = st == IPCP_ERR_PEER_LOST;

    ipcp__list_del(&x->link);
    if (x->dev)
        atomic_fetch_sub_explicit(&comm->dev_inflight, 1, memory_order_relaxed);
    st = ipcp__done_status(x, st, msg, sizeof(msg), &gone);
    ipcp__stripe_watch_end(comm, x, st == IPCP_OK);
    if (x->import)
        ipcp__import_put(comm, x->peer, x->import);
    x->import = NULL;
    if (comm->trace_on)
        ipcp__trace_xfer(comm, x, x->rx, x->req->path);
    if (st != IPCP_OK && !msg[0])
        ipcp__track_errmsg(&x->track, msg, sizeof(msg));
    ipcp__track_destroy(&x->track);
    /* A failed one may have ended before its copies (a notify that could
     * not be enqueued ends its track at once): it stays counted, and later
     * ones keep joining its queue.  One whose data was seen in place
     * (early) ended after its copies. */
    int early = x->early;
    if (x->drive_staged && (st == IPCP_OK || early))
        x->peer->rx.dstage_busy--;
    /* Read before the request completes: its owner may free it then. */
    uint64_t drive_id = x->drive_id;
    ipcp__peer_t *peer = x->peer;
    ipcp_request_t *req = x->req;
    ipcp_path_t path = req->path;
    /* Not busy before the request ends (its caller may release the
     * imported region then), but the owner hears of it after: an owner
     * told that its region is free may tell our caller, who must then
     * find the operation ended. */
    int owner = -1, answer = 0;
    uint64_t reg_id = 0;
    if (x->rmem_busy)
        answer = ipcp__rmem_op_end(comm, x->rmem_busy, &owner, &reg_id);
    x->rmem_busy = NULL;
    if (gone && !ipcp__peer_closed(peer)) {
        /* Its memory said so first (process_vm_readv/writev: no such
         * process), before its socket did: the same loss for every call. */
        char why[IPCP_ERRMSG_MAX];
        snprintf(why, sizeof(why), "%s", msg);
        ipcp__peer_lost(comm, peer, why);
        snprintf(msg, sizeof(msg), "peer rank %d (pid %d) was lost: %.200s",
                 ipcp__job_rank(comm, peer->rank), (int)peer->pid, why);
    }
    if (!early)
        ipcp__req_complete(req, st, msg);
    if (answer)
        ipcp__rmem_answer(comm, owner, reg_id);
    else if (st != IPCP_OK && early) /* after its data was in place: mostly
                                      * the peer gone after its send
                                      * returned */
        IPCP_LOG(peer->bye ? IPCP_LOG_INFO : IPCP_LOG_WARN, IPCP_SUB_ENGINE,
                 "a transfer from rank %d failed after its data was in "
                 "place (its receive had ended well): %s",
                 peer->rank, msg);
    /* After our own caller is told: the receive's end is what is waited
     * for (and timed); the sender's buffer is free a moment later. */
    if (drive_id && !early) /* else ipcp__xfer_end_early sent it */
        ipcp__drive_end(comm, peer, drive_id, path, st, msg);
    if (early) {
        ipcp__req_free(req); /* the engine's reference */
        comm->early_live--;
    }
}
