/* The receiver's routes and their order (engine/route.h). */
#include <stdatomic.h>
#include <string.h>

#include "common/cpu.h"
#include "engine/route.h"
#include "engine/xfer.h"

/* accept.c: the sender copies (direct, staged, striped); and the same
 * with this process copying the first half meanwhile (IPCPIPE_SPLIT). */
extern const ipcp__route_t ipcp__route_sent;
extern const ipcp__route_t ipcp__route_split;
/* drive.c: this process copies, reading the sender's memory with
 * process_vm_readv, or out of its allocation mapped here. */
extern const ipcp__route_t ipcp__route_read;
extern const ipcp__route_t ipcp__route_map;

/* Preference: a split host transfer on one CPU (both processes copy),
 * then this process copying alone (no round trip before the copy, no
 * flags between the processes: by reading the sender's memory, else out
 * of its allocation mapped here), then the sender's copy. */
const ipcp__route_t *const ipcp__routes[] = {
    &ipcp__route_split,
    &ipcp__route_read,
    &ipcp__route_map,
    &ipcp__route_sent,
    NULL,
};

#define IPCP_ROUTES_ADDED_MAX 4
static const ipcp__route_t *ipcp__routes_added[IPCP_ROUTES_ADDED_MAX + 1];
static uint32_t ipcp__nroutes_added;
/* Set by the first ipcp__proto (a communicator's hello): from then on the
 * numbers are the protocol's, and an added route would shift them under
 * the peers (and under the progress threads that read the table). */
static atomic_int ipcp__routes_fixed;

int ipcp__route_add(const ipcp__route_t *r)
{
    if (atomic_load(&ipcp__routes_fixed) ||
        ipcp__nroutes_added == IPCP_ROUTES_ADDED_MAX)
        return -1;
    ipcp__routes_added[ipcp__nroutes_added++] = r;
    return 0;
}

uint32_t ipcp__route_id(const ipcp__route_t *r)
{
    uint32_t i;
    for (i = 0; i < ipcp__nroutes_added; i++)
        if (ipcp__routes_added[i] == r)
            return i;
    for (const ipcp__route_t *const *t = ipcp__routes; *t; t++, i++)
        if (*t == r)
            break;
    return i;
}

const ipcp__route_t *ipcp__route_by_id(uint32_t id)
{
    if (id < ipcp__nroutes_added)
        return ipcp__routes_added[id];
    id -= ipcp__nroutes_added;
    for (const ipcp__route_t *const *t = ipcp__routes; *t; t++, id--)
        if (id == 0)
            return *t;
    return NULL;
}

/* FNV-1a of the route names, each with its terminating 0, folded to 16
 * bits below the version. */
uint32_t ipcp__proto(void)
{
    uint32_t h = 2166136261u, i = 0;
    const ipcp__route_t *r;
    atomic_store(&ipcp__routes_fixed, 1);
    while ((r = ipcp__route_by_id(i++)))
        for (const char *c = r->name;; c++) {
            h = (h ^ (unsigned char)*c) * 16777619u;
            if (!*c)
                break;
        }
    return (uint32_t)IPCP_PROTO_VERSION << 16 | ((h >> 16) ^ (h & 0xffff));
}

void ipcp__offer_gather(ipcp_comm_t *comm, const ipcp__msg_rts_t *rts,
                        const ipcp_request_t *req, ipcp_path_t force,
                        ipcp__offer_t *o)
{
    memset(o, 0, sizeof(*o));
    o->len = rts->len;
    o->src_type = rts->src_type;
    o->dst_type = (int)req->attr.type;
    o->src_map = (rts->hdr.flags & IPCP_RTS_SRC) != 0;
    o->src_addr = (rts->hdr.flags & IPCP_RTS_SRC_ADDR) != 0;
    o->pvm_ok = (rts->hdr.flags & IPCP_RTS_PVM_OK) != 0;
    o->no_bounce = (rts->hdr.flags & IPCP_RTS_NO_BOUNCE) != 0;
    o->sync = req->sync != 0;
    o->one_cpu = ipcp__one_cpu() != 0;
    o->force = ipcp__force_for(force, rts->tag, o->src_type, o->dst_type);
    if (o->src_type == IPCP_MEM_CUDA && o->dst_type == IPCP_MEM_CUDA)
        o->reach = ipcp__reachable(comm, rts, req) != 0;
    /* A stale region made for the user's memory is not found (the sent
     * route's ipcp__region_auto replaces it). */
    ipcp__lock(&comm->mem_lock, IPCP_LOCK_MEM);
    ipcp__region_t *r =
        ipcp__region_find_live(comm, req->buf, req->len, req->attr.buffer_id);
    o->dst_shared = r && r->exportable;
    ipcp__unlock(&comm->mem_lock, IPCP_LOCK_MEM);
}

const ipcp__route_t *ipcp__route_next(const ipcp__route_t *const *table,
                                      const ipcp__offer_t *o,
                                      const ipcp__config_t *cfg, size_t *i)
{
    for (; table[*i]; (*i)++)
        if (table[*i]->serves(o, cfg))
            return table[(*i)++];
    return NULL;
}

const ipcp__route_t *ipcp__route_take(const ipcp__route_t *const *table,
                                      const ipcp__offer_t *o, ipcp_comm_t *comm,
                                      ipcp__peer_t *peer,
                                      const ipcp__msg_rts_t *rts,
                                      ipcp_request_t *req)
{
    size_t i = 0;
    const ipcp__route_t *r;
    if (table == ipcp__routes && ipcp__nroutes_added &&
        (r = ipcp__route_take(ipcp__routes_added, o, comm, peer, rts, req)))
        return r;
    while ((r = ipcp__route_next(table, o, comm->cfg, &i)))
        if (r->start(comm, peer, rts, req, o))
            return r;
    return NULL;
}

int ipcp__sent_choose(const ipcp__offer_t *o, const ipcp__config_t *cfg,
                      int shareable, int *mode, int *why)
{
    *mode = 0;
    if (o->src_type != o->dst_type) {
        *why = IPCP_WHY_KINDS;
    } else if (o->dst_type == IPCP_MEM_CUDA && !o->reach) {
        *why = IPCP_WHY_NO_PEER;
    } else if (shareable && o->force != IPCP_PATH_BOUNCE) {
        *mode = IPCP_DST_MAPPED;
        *why = IPCP_WHY_MAPPED;
    } else if (o->dst_type == IPCP_MEM_HOST && o->pvm_ok &&
               cfg->pvm != IPCP_PVM_OFF) {
        *mode = IPCP_DST_PVM;
        *why = IPCP_WHY_PVM;
    } else if (o->dst_type == IPCP_MEM_CUDA &&
               (o->force == IPCP_PATH_AUTO || o->force == IPCP_PATH_BOUNCE)) {
        /* Neither buffer shared (the sender's would have been read by the
         * map route): a ring in our device memory still keeps the data
         * off the host, where the sender can map it. */
        *mode = o->no_bounce ? 0 : IPCP_DST_BOUNCE;
        *why = o->no_bounce ? IPCP_WHY_RING_REFUSED : IPCP_WHY_BOUNCE;
    } else {
        *why = IPCP_WHY_UNSHARED;
    }
    if (o->force == IPCP_PATH_DIRECT && *mode != IPCP_DST_MAPPED &&
        *mode != IPCP_DST_PVM)
        return -1;
    if (o->force == IPCP_PATH_BOUNCE && *mode != IPCP_DST_BOUNCE)
        return -1;
    if (o->force == IPCP_PATH_STAGED && *mode) {
        *mode = 0;
        *why = IPCP_WHY_FORCED_STAGED;
    }
    return 0;
}
