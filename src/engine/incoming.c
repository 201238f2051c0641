/* What comes in to a turn of progress: control messages from peers
 * (dispatched by type), commands from user threads and the steps of
 * finalize's goodbye, finished transfers from backend threads.  The loop
 * that takes the turns is progress.c's. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/time.h"
#include "engine/progress.h"

/* ---- Incoming messages -------------------------------------------------- */

/* A peer's forced path; -1: not a path it can force. */
static int ipcp__on_path(ipcp__peer_t *peer, const unsigned char *msg,
                         size_t len)
{
    if (len < sizeof(ipcp__msg_path_t))
        return -1;
    int path = ((const ipcp__msg_path_t *)(const void *)msg)->path;
    if (!ipcp__path_forceable(path))
        return -1;
    __atomic_store_n(&peer->remote_path, path, __ATOMIC_RELEASE);
    return 0;
}

/* A peer's goodbye: what waits on it fails, naming its finalize. */
static void ipcp__on_bye(ipcp_comm_t *comm, ipcp__peer_t *peer)
{
    char why[64];
    if (comm->fin == IPCP_FIN_NONE)
        ipcp__fault_point(IPCP_FAULT_BYE_RECEIVED);
    peer->bye = 1;
    atomic_store(&peer->gone, 1);
    snprintf(why, sizeof(why), "rank %d finalized", peer->rank);
    ipcp__match_fail_peer(comm, peer, IPCP_ERR_PEER_LOST, why);
}

void ipcp__dispatch(ipcp_comm_t *comm, ipcp__peer_t *peer,
                    const unsigned char *msg, size_t len, int *fds, int nfds)
{
    const ipcp__msg_hdr_t *hdr = (const void *)msg;
    size_t need = 0;

    peer->heard_ns = ipcp__now_ns();
    if (len < sizeof(*hdr))
        goto bad;
    switch (hdr->type) {
    case IPCP_MSG_RTS:
    case IPCP_MSG_CTS:
    case IPCP_MSG_GET_REQ:
        ipcp__match_msg(comm, peer, msg, len, fds, nfds);
        return;
    case IPCP_MSG_EAGER:
        ipcp__match_eager(comm, peer, msg, len, 0);
        break;
    case IPCP_MSG_MAP_REQ:
        need = sizeof(ipcp__msg_map_req_t);
        if (len < need)
            goto bad;
        ipcp__mem_on_map_req(comm, peer, (const void *)msg);
        break;
    case IPCP_MSG_MAP_REP:
        if (len < sizeof(ipcp__msg_map_rep_t))
            goto bad;
        ipcp__mem_on_map_rep(comm, peer, (const void *)msg, fds, nfds);
        return;
    case IPCP_MSG_REG_GONE:
        if (len < sizeof(ipcp__msg_reg_gone_t))
            goto bad;
        ipcp__mem_on_reg_gone(comm, peer, (const void *)msg);
        break;
    case IPCP_MSG_PATH:
        if (ipcp__on_path(peer, msg, len) != 0)
            goto bad;
        break;
    case IPCP_MSG_LANE:
        ipcp__lane_on_msg(comm, peer, msg, len, fds, nfds);
        return;
    case IPCP_MSG_MBOX:
        ipcp__mbox_on_offer(comm, peer, msg, len, fds, nfds);
        return;
    case IPCP_MSG_SWITCH:
        __atomic_store_n(&peer->in_on, 1, __ATOMIC_RELEASE);
        break;
    case IPCP_MSG_PING: {
        ipcp__msg_hdr_t pong = {IPCP_MSG_PONG, 0};
        ipcp__peer_post(comm, peer, &pong, sizeof(pong), NULL, 0);
        break;
    }
    case IPCP_MSG_PONG: /* heard_ns is all it is for */
        break;
    case IPCP_MSG_BYE:
        ipcp__on_bye(comm, peer);
        break;
    default:
        goto bad;
    }
    for (int i = 0; i < nfds; i++)
        close(fds[i]);
    return;
bad:
    for (int i = 0; i < nfds; i++)
        close(fds[i]);
    char why[96];
    snprintf(why, sizeof(why), "malformed message (type %u, %zu bytes)",
             len >= sizeof(*hdr) ? hdr->type : 0u, len);
    ipcp__peer_lost(comm, peer, why);
}

/* Returns how many messages it handled. */
int ipcp__peer_read(ipcp_comm_t *comm, ipcp__peer_t *peer)
{
    int fds[IPCP_SOCK_MAX_FDS];
    int nfds, n = 0;
    size_t len;

    while (!ipcp__peer_closed(peer)) {
        ipcp_status_t st =
            ipcp__sock_recv(peer->fd, comm->rxbuf, IPCP_RX_MAX, &len, fds,
                            IPCP_SOCK_MAX_FDS, &nfds, 0);
        if (st == IPCP_IN_PROGRESS)
            return n;
        if (st != IPCP_OK) {
            ipcp__peer_lost(comm, peer,
                            peer->bye ? "finalized" : ipcp__last_error());
            return n + 1;
        }
        ipcp__dispatch(comm, peer, (const unsigned char *)comm->rxbuf, len, fds,
                       nfds);
        n++;
        /* After SWITCH the socket is read at the inbox's markers only. */
        if (peer->in_on)
            return n;
    }
    return n;
}

int ipcp__peer_read_inbox(ipcp_comm_t *comm, ipcp__peer_t *peer)
{
    return ipcp__mbox_read(comm, peer, ipcp__dispatch, comm->rxbuf,
                           IPCP_RX_MAX);
}

/* ---- Commands and completions ------------------------------------------ */

/* Finalize's one transition (ipcp__fin_t): to a later state only, with
 * its request on the way in (NONE -> HELD or SAID), kept through HELD ->
 * SAID, and completed with st on the way out (SAID -> DONE).  Each wait
 * gets its own timeout. */
static int ipcp__fin_to(ipcp_comm_t *comm, ipcp__fin_t to, ipcp_request_t *req,
                        ipcp_status_t st, const char *msg)
{
    if (to <= comm->fin) { /* one finalize a communicator: cannot happen */
        if (req)
            ipcp__req_complete(req, IPCP_ERR_STATE,
                               "finalize is under way or done already");
        return -1;
    }
    comm->fin = to;
    if (req)
        comm->fin_req = req;
    if (to == IPCP_FIN_DONE) {
        ipcp__req_complete(comm->fin_req, st, msg);
        comm->fin_req = NULL;
        return 0;
    }
    comm->fin_deadline = ipcp__now_s() + comm->timeout_s;
    return 0;
}

/* Goodbye to every peer.  The trace part goes out before: rank 0 merges
 * the parts once every peer has said it. */
static void ipcp__bye_send(ipcp_comm_t *comm, ipcp_request_t *req)
{
    if (ipcp__fin_to(comm, IPCP_FIN_SAID, req, IPCP_OK, NULL) < 0)
        return;
    ipcp__trace_flush(comm);
    for (int r = 0; r < comm->size; r++) {
        ipcp__msg_hdr_t bye = {IPCP_MSG_BYE, 0};
        if (r != comm->rank && !ipcp__peer_closed(&comm->peers[r]))
            ipcp__peer_post(comm, &comm->peers[r], &bye, sizeof(bye), NULL, 0);
    }
    ipcp__fault_point(IPCP_FAULT_BYE_SENT);
}

static void ipcp__run_cmd(ipcp_comm_t *comm, ipcp_request_t *req)
{
    switch (req->type) {
    case IPCP_REQ_SEND:
    case IPCP_REQ_RECV:
    case IPCP_REQ_PUT:
    case IPCP_REQ_GET:
        /* Stream-ordered: started by ipcp__sync_poll once its stream got
         * there. */
        if (req->sync && !ipcp__sync_started(req->sync))
            ipcp__list_push_back(&comm->deferred, &req->link);
        else
            ipcp__match_cmd(comm, req);
        break;
    case IPCP_REQ_DROP:
        ipcp__peer_drop_cmd(comm, req);
        break;
    case IPCP_REQ_FENCE:
        ipcp__req_complete(req, IPCP_OK, NULL);
        break;
    case IPCP_REQ_IMPORT:
        ipcp__mem_import_cmd(comm, req);
        break;
    case IPCP_REQ_NOTIFY:
        ipcp__mem_notify_cmd(comm, req);
        break;
    case IPCP_REQ_DEREG:
        ipcp__mem_dereg_cmd(comm, req);
        break;
    case IPCP_REQ_LANE:
        ipcp__lane_cmd(comm, req);
        break;
    case IPCP_REQ_PATH:
        ipcp__comm_announce_path(comm);
        ipcp__req_complete(req, IPCP_OK, NULL);
        break;
    case IPCP_REQ_BYE:
        /* Transfers whose requests ended early end first (their trace
         * events, their releases): ipcp__check_bye sends it then. */
        if (comm->early_live)
            ipcp__fin_to(comm, IPCP_FIN_HELD, req, IPCP_OK, NULL);
        else
            ipcp__bye_send(comm, req);
        break;
    default:
        ipcp__req_complete(req, IPCP_ERR_STATE, "unknown command");
    }
}

/* Returns how many commands and completions it ran. */
int ipcp__drain(ipcp_comm_t *comm)
{
    ipcp__list_t cmds, dones, *e;
    int n = 0;

    /* Not waiting for a user's thread that holds the lock: it is mostly
     * one that posts, whose unlock would then have to wake us.  -1: the
     * loop comes back without sleeping (the eventfd that announced a
     * command may have been read already). */
    /* Nor taking it while nothing is queued: a spinning thread's turns
     * would take its line from the callers that complete their own
     * requests under it (on one H200, 8 B windows ran 3x slower unbound
     * than bound). */
    if (!atomic_load(&comm->queued))
        return 0;
    if (ipcp__trylock(&comm->lock, IPCP_LOCK_COMM) != 0)
        return -1;
    ipcp__list_move_all(&cmds, &comm->cmds);
    ipcp__list_move_all(&dones, &comm->dones);
    atomic_store(&comm->queued, 0);
    ipcp__unlock(&comm->lock, IPCP_LOCK_COMM);
    /* Completions first: they free slots and mappings that new commands
     * may want. */
    while ((e = ipcp__list_pop_front(&dones)) && ++n)
        ipcp__run_done(comm, ipcp__list_entry(e, ipcp__xfer_t, done_link));
    while ((e = ipcp__list_pop_front(&cmds)) && ++n) {
        ipcp_request_t *req = ipcp__list_entry(e, ipcp_request_t, link);
        ipcp__peer_t *peer = ipcp__req_peer(comm, req); /* req may end */
        ipcp__run_cmd(comm, req);
        if (peer)
            atomic_fetch_sub(&peer->pending, 1);
    }
    return n;
}

void ipcp__check_bye(ipcp_comm_t *comm)
{
    int waiting = 0;
    /* A held goodbye goes once the early-ended transfers are done, or at
     * the timeout: a track that never ends must not hang finalize. */
    if (comm->fin == IPCP_FIN_HELD &&
        (!comm->early_live || ipcp__now_s() >= comm->fin_deadline)) {
        if (comm->early_live)
            IPCP_WARN(IPCP_SUB_ENGINE,
                      "finalizing with %d transfer(s) "
                      "whose receives ended still running",
                      comm->early_live);
        ipcp__bye_send(comm, NULL);
    }
    if (comm->fin != IPCP_FIN_SAID)
        return;
    for (int r = 0; r < comm->size; r++)
        if (r != comm->rank && !ipcp__peer_closed(&comm->peers[r]) &&
            !comm->peers[r].bye)
            waiting++;
    if (waiting && ipcp__now_s() < comm->fin_deadline)
        return;
    ipcp__trace_merge(comm);
    ipcp__fin_to(comm, IPCP_FIN_DONE, NULL,
                 waiting ? IPCP_ERR_TIMEOUT : IPCP_OK,
                 waiting ? "peers did not finalize in time" : NULL);
}

void ipcp__comm_announce_path(ipcp_comm_t *comm)
{
    ipcp__msg_path_t m;
    memset(&m, 0, sizeof(m));
    m.hdr.type = IPCP_MSG_PATH;
    m.path = atomic_load(&comm->path);
    for (int r = 0; r < comm->size; r++)
        if (r != comm->rank && !ipcp__peer_closed(&comm->peers[r]))
            ipcp__peer_post(comm, &comm->peers[r], &m, sizeof(m), NULL, 0);
}
