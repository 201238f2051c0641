/* One-sided operations that need the owner (staged put and get): the
 * control flow on both sides, on the progress thread. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/engine.h"

/* ---- One-sided through the owner ---------------------------------------- */

/* Looks up a region of ours that a peer named; on failure the message says
 * why and the status is returned. */
static ipcp_status_t ipcp__owner_region(ipcp_comm_t *comm, uint64_t id,
                                        uint64_t offset, uint64_t len,
                                        ipcp__region_t *out,
                                        ipcp__region_t **live, char *msg,
                                        size_t msglen)
{
    ipcp_status_t st = IPCP_OK;
    ipcp__lock(&comm->mem_lock, IPCP_LOCK_MEM);
    ipcp__region_t *r = ipcp__region_find_id(comm, id);
    /* Only registrations are targets: an allocation's record may go
     * (ipcp_mem_free) without waiting for anyone. */
    if (!r || r->is_alloc) {
        snprintf(msg, msglen, "region %llu is not registered on rank %d",
                 (unsigned long long)id, comm->rank);
        st = IPCP_ERR_NOT_REGISTERED;
    } else if (offset > r->len || len > r->len - offset) {
        snprintf(msg, msglen,
                 "range [%llu, +%llu) is outside region %llu of rank %d "
                 "(%zu bytes)",
                 (unsigned long long)offset, (unsigned long long)len,
                 (unsigned long long)id, comm->rank, r->len);
        st = IPCP_ERR_OUT_OF_RANGE;
    } else {
        *out = *r;
        /* Counted until the operation ends (ipcp__region_op_end): its
         * deregistration waits for it. */
        r->busy++;
        *live = r;
    }
    ipcp__unlock(&comm->mem_lock, IPCP_LOCK_MEM);
    return st;
}

static ipcp_request_t *ipcp__internal_req(ipcp_comm_t *comm, int peer,
                                          const ipcp__region_t *r,
                                          ipcp__region_t *live, uint64_t offset,
                                          uint64_t len)
{
    ipcp_request_t *req = ipcp__req_new(comm, IPCP_REQ_INTERNAL);
    if (!req) {
        ipcp__region_op_end(comm, live);
        return NULL;
    }
    req->region = live;
    req->user = 0;
    req->peer = peer;
    req->buf = (char *)r->ptr + offset;
    req->len = len;
    req->attr = r->attr;
    req->region_id = r->id;
    return req;
}

/* Owner: a peer puts into one of our regions through the ring. */
void ipcp__on_rts_put(ipcp_comm_t *comm, ipcp__peer_t *peer,
                      const ipcp__msg_rts_t *rts)
{
    char msg[IPCP_ERRMSG_MAX];
    ipcp__region_t r, *live;
    ipcp_status_t st = ipcp__owner_region(
        comm, rts->reg_id, rts->offset, rts->len, &r, &live, msg, sizeof(msg));
    if (st != IPCP_OK) {
        ipcp__nack(comm, peer, rts->id, st, msg);
        return;
    }
    ipcp_request_t *req =
        ipcp__internal_req(comm, peer->rank, &r, live, rts->offset, rts->len);
    if (!req) {
        ipcp__nack(comm, peer, rts->id, IPCP_ERR_NOMEM, "owner out of memory");
        return;
    }
    ipcp__xfer_accept(comm, peer, rts, req, IPCP_PATH_STAGED);
}

/* Owner: a peer wants a range of one of our regions. */
void ipcp__on_get_req(ipcp_comm_t *comm, ipcp__peer_t *peer,
                      const ipcp__msg_get_req_t *g)
{
    ipcp__msg_rts_t rts;
    ipcp__region_t r, *live;
    ipcp_request_t *req = NULL;
    ipcp_status_t st =
        ipcp__owner_region(comm, g->reg_id, g->offset, g->len, &r, &live,
                           rts.errmsg, sizeof(rts.errmsg));
    if (st == IPCP_OK) {
        req = ipcp__internal_req(comm, peer->rank, &r, live, g->offset, g->len);
        if (!req) {
            st = IPCP_ERR_NOMEM;
            snprintf(rts.errmsg, sizeof(rts.errmsg), "owner out of memory");
        }
    }
    if (st != IPCP_OK) {
        char reason[IPCP_ERRWIRE_MAX];
        memcpy(reason, rts.errmsg, sizeof(reason));
        memset(&rts, 0, sizeof(rts));
        rts.hdr.type = IPCP_MSG_RTS;
        rts.hdr.flags = IPCP_RTS_GET_REPLY;
        rts.get_id = g->id;
        rts.status = st;
        memcpy(rts.errmsg, reason, sizeof(reason));
        ipcp__peer_post(comm, peer, &rts, sizeof(rts), NULL, 0);
        return;
    }
    ipcp__rts_fill(comm, peer, req, &rts);
    rts.hdr.flags = IPCP_RTS_GET_REPLY;
    rts.get_id = g->id;
    rts.path = g->path;
    ipcp__send_rts(comm, peer, req, &rts, 0);
}

void ipcp__on_rts_get_reply(ipcp_comm_t *comm, ipcp__peer_t *peer,
                            const ipcp__msg_rts_t *rts)
{
    ipcp_request_t *req = ipcp__find_id(&peer->gets, rts->get_id);
    if (!req) {
        ipcp__peer_lost(comm, peer, "reply to an unknown get");
        return;
    }
    if (rts->status != IPCP_OK) {
        char msg[IPCP_ERRMSG_MAX];
        snprintf(msg, sizeof(msg), "%.*s", IPCP_ERRWIRE_MAX - 1, rts->errmsg);
        ipcp__req_complete(req, ipcp__peer_status(rts->status), msg);
        return;
    }
    /* The data lands in the get's buffer: a longer reply would be written
     * past its end. */
    if (rts->len != req->len) {
        char msg[IPCP_ERRMSG_MAX];
        snprintf(msg, sizeof(msg),
                 "rank %d answered a get of %zu bytes "
                 "with %llu",
                 peer->rank, req->len, (unsigned long long)rts->len);
        ipcp__req_complete(req, IPCP_ERR_STATE, msg);
        ipcp__peer_lost(comm, peer, "get reply of another length");
        return;
    }
    ipcp__xfer_accept(comm, peer, rts, req, IPCP_PATH_STAGED);
}

/* One-sided operations go direct when this side can reach the region on
 * its own: mapped for the local buffer's kind and device, or written with
 * process_vm_writev between host buffers; else through the owner. */
static int ipcp__onesided_direct_ok(ipcp_comm_t *comm, ipcp_request_t *req)
{
    ipcp_rmem_t *rm = req->rmem;
    if (req->path == IPCP_PATH_STAGED)
        return 0;
    if (rm->mode == IPCP_RMEM_PVM)
        return req->attr.type == IPCP_MEM_HOST;
    return ipcp__rmem_mapping(comm, rm, &req->attr) != NULL;
}

void ipcp__put_start(ipcp_comm_t *comm, ipcp__peer_t *peer, ipcp_request_t *req)
{
    ipcp_rmem_t *rm = req->rmem;
    ipcp__msg_rts_t rts;

    if (ipcp__onesided_direct_ok(comm, req)) {
        ipcp__xfer_onesided_direct(comm, req);
        return;
    }
    ipcp__rts_fill(comm, peer, req, &rts);
    rts.hdr.flags = IPCP_RTS_PUT;
    rts.reg_id = rm->reg_id;
    rts.offset = req->offset;
    rts.path = IPCP_PATH_STAGED;
    ipcp__send_rts(comm, peer, req, &rts, 0);
}

void ipcp__get_start(ipcp_comm_t *comm, ipcp__peer_t *peer, ipcp_request_t *req)
{
    ipcp_rmem_t *rm = req->rmem;
    ipcp__msg_get_req_t g;

    if (ipcp__onesided_direct_ok(comm, req)) {
        ipcp__xfer_onesided_direct(comm, req);
        return;
    }
    memset(&g, 0, sizeof(g));
    g.hdr.type = IPCP_MSG_GET_REQ;
    g.id = req->id = ++peer->next_id;
    g.reg_id = rm->reg_id;
    g.offset = req->offset;
    g.len = req->len;
    g.path = IPCP_PATH_STAGED;
    ipcp_status_t st = ipcp__peer_post(comm, peer, &g, sizeof(g), NULL, 0);
    if (st != IPCP_OK) {
        ipcp__req_complete(req, st, ipcp__last_error());
        return;
    }
    ipcp__list_push_back(&peer->gets, &req->link);
    ipcp__fault_point(IPCP_FAULT_GET_POSTED);
}
