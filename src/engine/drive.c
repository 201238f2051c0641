#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/time.h"
#include "engine/route.h"
#include "engine/xfer.h"
#include "engine/samegpu.h"
#include "engine/stripe.h"

/* ---- Receiver-driven transfers (IPCPIPE_DRIVE) ------------------------- */

/* The receiver maps the sender's buffer and copies it itself: the direct
 * part with a queue on the sender's GPU (which pushes over the link, as
 * the sender would), the staged part out through that GPU's copies into
 * pinned memory of this process and in with a queue on our GPU, ordered
 * between the two queues inside this process.  Against the sender's copy
 * it saves the round trip before the copy starts (the CTS), the
 * sender's enqueue calls after it, and the done flags between the
 * processes: the transfer runs as one process's copy would (on 2 x H200 a
 * lab run of this layout between two processes matched the in-process
 * copy at every share: 256 MiB at 9% 626.9 us against 626.2).  The sender
 * learns the end from a DRIVEN CTS. */

/* The largest unit of a driven transfer's staged part. */
#define IPCP_DRIVE_UNIT_MAX ((uint64_t)16 << 20)

/* Whether this process may copy the transfer itself out of the sender's
 * allocation mapped here: the sender offered it (RTS_SRC); device to
 * device, its GPU can write the receive buffer's (its being visible here
 * is the start's to find out); host to host when both are host memory.
 * Stream-ordered receives keep the sender's copy (their end is a flag in
 * the user's stream). */
static int ipcp__map_serves(const ipcp__offer_t *o, const ipcp__config_t *cfg)
{
    return cfg->drive != IPCP_DRIVE_OFF && ipcp__direct_allowed(o->force) &&
           !o->sync && o->len && o->src_map && o->src_type == o->dst_type &&
           (o->dst_type == IPCP_MEM_HOST || o->reach);
}

/* The stage buffer of dir, made (and pinned for qs's backend, for every
 * device at once) on first use; NULL when it cannot be, or when it was
 * made for the other backend (host and device transfers from one peer
 * under IPCPIPE_DRIVE=on: the first keeps it). */
static void *ipcp__drive_stage(ipcp__dir_t *dir, const ipcp__qset_t *qs)
{
    if (dir->dstage)
        return dir->dstage_ops == qs->ops ? dir->dstage : NULL;
    void *p = mmap(NULL, IPCP_DRIVE_STAGE, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        IPCP_INFO(IPCP_SUB_ENGINE,
                  "no stage buffer for receiver-driven "
                  "striping (%zu bytes): %s",
                  IPCP_DRIVE_STAGE, strerror(errno));
        return NULL;
    }
    void *reg = NULL;
    if (qs->ops->type != IPCP_MEM_HOST &&
        qs->ops->shm_register(qs->be, p, IPCP_DRIVE_STAGE, qs->device, &reg) !=
            IPCP_OK) {
        IPCP_INFO(IPCP_SUB_ENGINE,
                  "no stage buffer for receiver-driven "
                  "striping: %s",
                  ipcp__last_error());
        munmap(p, IPCP_DRIVE_STAGE);
        return NULL;
    }
    dir->dstage = p;
    dir->dstage_reg = reg;
    dir->dstage_ops = qs->ops;
    dir->dstage_be = qs->be;
    return p;
}

/* Staged bytes of a driven transfer (0: none): IPCPIPE_STRIPE as for the
 * sender's copy, between two GPUs (or host memory at a fixed share), cut
 * to the stage buffer; w gets what the adapt needs to learn from it (see
 * ipcp__drive_watch).  qa copies out of the source, qb into the
 * receive buffer; the staged part takes a queue of each (two of one queue
 * set when they are the same: b is qb's), the direct part needs one more.
 * While an earlier staged part still runs, only one copied in by the same
 * queue b can be joined to it (the stage is the peer's, whatever the
 * receive buffer's device): others are not striped. */
static uint64_t ipcp__drive_split(ipcp_comm_t *comm, ipcp__peer_t *peer,
                                  const ipcp__msg_rts_t *rts,
                                  const ipcp_request_t *req, ipcp_path_t force,
                                  int src, const ipcp__qset_t *qa,
                                  const ipcp__qset_t *qb, ipcp__watch_t *w)
{
    double share = comm->cfg->stripe;
    uint64_t min = 0;
    ipcp__adapt_t *a = NULL;
    if (share < 0 || qa->n < (qa == qb ? 3 : 2) ||
        (peer->rx.dstage_busy && peer->rx.dstage_b != qb->q[qa == qb]))
        return 0;
    if (req->attr.type == IPCP_MEM_HOST) {
        if (share == 0)
            return 0;
    } else if (src == req->attr.device) {
        return 0; /* one GPU: both parts would share its memory */
    } else if (share == 0) {
        share = ipcp__stripe_auto_share(comm, peer, rts, req, force, 0, w, &min,
                                        &a);
    }
    uint64_t n = ipcp__stripe_bytes(rts->len, share, min);
    if (n > IPCP_DRIVE_STAGE - IPCP_DRIVE_FLAGS_LEN)
        n = IPCP_DRIVE_STAGE - IPCP_DRIVE_FLAGS_LEN;
    if (n && !ipcp__drive_stage(&peer->rx, qa))
        n = 0;
    ipcp__stripe_settle(a, w, n);
    return n;
}

ipcp_status_t ipcp__src_copy(ipcp__qset_t *qs, int qi, const ipcp__peer_t *peer,
                             const ipcp__msg_rts_t *rts,
                             const ipcp__import_t *imp, char *dst, uint64_t off,
                             uint64_t n, ipcp__track_t *t)
{
    if (imp)
        return qs->ops->copy(qs->q[qi], dst + off,
                             (const char *)imp->ptr + rts->src_offset + off, n,
                             t);
    if (!qs->ops->rcopy)
        return IPCP_ERR_UNSUPPORTED;
    return qs->ops->rcopy(qs->q[qi], peer->pid, rts->src_offset + off,
                          dst + off, n, 0, t);
}

/* The end of x's work on the queues of qs in mask. */
static void ipcp__drive_notify(ipcp__xfer_t *x, ipcp__qset_t *qs, unsigned mask)
{
    for (int i = 0; i < qs->n; i++)
        if (mask & (1u << i))
            ipcp__enq_notify(qs, i, &x->track);
}

/* Host memory the sender could not share (not from ipcp_mem_alloc), sent
 * by its address (RTS_SRC_ADDR) into a receive buffer that is no shareable
 * allocation either (else the sender copies into its mapping, with no
 * system call): this process reads it with process_vm_readv, in pieces on
 * its queues, where the kernel lets it (ipcp__pvm_allowed).  As for a
 * mapped source, the read starts at the match, with no round trip before
 * it, and the sender learns the end from a DRIVEN CTS; a source address
 * the sender lied about can only fail the read (EFAULT), never touch this
 * process's memory but the receive buffer.  Not under a fixed
 * IPCPIPE_STRIPE share, which the sender's copy stripes (tests). */
static int ipcp__read_serves(const ipcp__offer_t *o, const ipcp__config_t *cfg)
{
    return cfg->drive != IPCP_DRIVE_OFF && cfg->pvm != IPCP_PVM_OFF &&
           cfg->stripe <= 0 && ipcp__direct_allowed(o->force) && !o->sync &&
           o->len && o->src_addr && o->src_type == IPCP_MEM_HOST &&
           o->dst_type == IPCP_MEM_HOST && !o->dst_shared;
}

/* Declined where the kernel forbids the read, or the queues cannot read. */
static int ipcp__read_start(ipcp_comm_t *comm, ipcp__peer_t *peer,
                            const ipcp__msg_rts_t *rts, ipcp_request_t *req,
                            const ipcp__offer_t *o)
{
    ipcp__qset_t *qs;
    ipcp_path_t force = o->force;
    if (!ipcp__pvm_allowed(comm, peer) ||
        ipcp__qset_get(comm, peer, &peer->rx, &req->attr, &qs) != IPCP_OK ||
        !qs->ops->rcopy)
        return 0;
    unsigned np = ipcp__npieces(comm, rts->len, (unsigned)qs->n, 0);
    ipcp__choice_t c;
    memset(&c, 0, sizeof(c));
    c.path = IPCP_PATH_DIRECT;
    c.why = IPCP_WHY_PVM_READ;
    c.src_type = rts->src_type;
    ipcp__log_choice(comm, peer, req, &c, force);
    req->path = c.path;
    req->nbytes = rts->len;

    ipcp__stage_flush(comm, qs);
    ipcp__xfer_begin(comm, peer, req, 1, np);
    ipcp__xfer_t *x = &req->xfer;
    x->tbase = np;
    x->drive_id = rts->id;
    uint64_t seq = ++peer->rx.dseq;
    unsigned mask = 0;
    char *d = req->buf;
    for (unsigned i = 0; i < np; i++) {
        uint64_t off, n;
        int qi = (int)ipcp__direct_queue(seq, i, 0, (unsigned)qs->n);
        ipcp__piece(rts->len, np, i, &off, &n);
        ipcp__trace_piece(x, i, qs, qi, n, 1);
        ipcp__enq_check(&x->track, ipcp__src_copy(qs, qi, peer, rts, NULL, d,
                                                  off, n, &x->track));
        ipcp__trace_piece(x, i, qs, qi, n, 0);
        mask |= 1u << qi;
    }
    ipcp__drive_notify(x, qs, mask);
    ipcp__xfer_go(x);
    return 1;
}

const ipcp__route_t ipcp__route_read = {
    .name = "read",
    .serves = ipcp__read_serves,
    .start = ipcp__read_start,
};

/* Sets up what a driven transfer copies with: peer access of the sender's
 * GPU to ours, the queue sets of both devices (*qa the sender's GPU, *qb
 * the receive buffer's) and the sender's buffer mapped here (*imp, held).
 * 0 (logged) when the sender should copy instead. */
static int ipcp__drive_map(ipcp_comm_t *comm, ipcp__peer_t *peer,
                           const ipcp__msg_rts_t *rts, ipcp_request_t *req,
                           int src, ipcp__qset_t **qa, ipcp__qset_t **qb,
                           ipcp__import_t **imp)
{
    ipcp__mem_attr_t sa;
    memset(&sa, 0, sizeof(sa));
    sa.type = req->attr.type;
    sa.device = src;
    *imp = NULL;
    /* The copy runs on the sender's GPU and writes our buffer: peer
     * access, and (VMM memory another allocator mapped) access its
     * mapping grants that GPU. */
    if ((src >= 0 && src != req->attr.device && comm->dev_ops->device_link &&
         comm->dev_ops->device_link(ipcp__dev(comm), src, req->attr.device) !=
             IPCP_OK) ||
        (src >= 0 && src != req->attr.device && comm->dev_ops->mem_access &&
         comm->dev_ops->mem_access(ipcp__dev(comm), req->buf, req->len, src) !=
             IPCP_OK) ||
        ipcp__qset_get(comm, peer, &peer->rx, &sa, qa) != IPCP_OK ||
        ipcp__qset_get(comm, peer, &peer->rx, &req->attr, qb) != IPCP_OK ||
        ipcp__import_get(comm, peer, rts->src_region, &sa, imp) != IPCP_OK) {
        IPCP_INFO(IPCP_SUB_ENGINE,
                  "cannot copy rank %d's buffer here, so "
                  "it copies: %s",
                  peer->rank, ipcp__last_error());
        return 0;
    }
    if (rts->src_offset > (*imp)->size ||
        rts->len > (*imp)->size - rts->src_offset) {
        IPCP_INFO(IPCP_SUB_ENGINE,
                  "rank %d's source lies outside its "
                  "allocation %llu as mapped here, so it copies",
                  peer->rank, (unsigned long long)rts->src_region);
        ipcp__import_put(comm, peer, *imp);
        return 0;
    }
    return 1;
}

/* The staged part of a driven transfer, [dlen, dlen + slen) of s and d:
 * out of the source on qa's first queue, into the buffer on qb's staged
 * queue once that has it, through the peer's stage buffer; trace pieces
 * from np on.  The stage is reused only after the copies in of an earlier
 * transfer still running are done (b's work so far); with none running,
 * no join: its five driver calls before the first copy out held the staged
 * part back by about 10 us against the direct part.  Returns the queues
 * used, of qa in *ma and of qb in *mb. */
static void ipcp__drive_staged(ipcp__xfer_t *x, ipcp__qset_t *qa,
                               ipcp__qset_t *qb, const char *s, char *d,
                               uint64_t dlen, uint64_t slen, unsigned np,
                               uint64_t nchunks, unsigned *ma, unsigned *mb)
{
    ipcp__dir_t *dir = &x->peer->rx;
    ipcp__track_t *t = &x->track;
    unsigned sb_q = qa == qb ? 1 : 0;
    ipcp__queue_t *a = qa->q[0], *b = qb->q[sb_q];
    uint64_t unit = ipcp__stripe_unit(slen, IPCP_DRIVE_UNIT_MAX);
    char *st = dir->dstage;
    __typeof__(qa->ops->join) join_a = qa->ops->join, join_b = qb->ops->join;
    if (dir->dstage_busy)
        ipcp__enq_check(t, join_a ? join_a(a, b) : IPCP_ERR_UNSUPPORTED);
    dir->dstage_busy++;
    dir->dstage_b = b;
    x->drive_staged = 1;
    /* Trace pieces: np + k the chunk's copy in, np + nchunks + k its copy
     * out; both past x->tbase, where a striped transfer's staged copies
     * begin. */
    for (uint64_t k = 0, off = 0; off < slen; k++, off += unit) {
        uint64_t n = ipcp__min(unit, slen - off);
        ipcp__trace_piece(x, np + nchunks + k, qa, 0, n, 1);
        ipcp__enq_check(t, qa->ops->copy(a, st + off, s + dlen + off, n, t));
        ipcp__trace_piece(x, np + nchunks + k, qa, 0, n, 0);
        ipcp__trace_piece_stage(x, np + nchunks + k, IPCP_STAGE_OUT);
        ipcp__enq_check(t, join_b ? join_b(b, a) : IPCP_ERR_UNSUPPORTED);
        ipcp__trace_piece(x, np + k, qb, (int)sb_q, n, 1);
        ipcp__enq_check(t, qb->ops->copy(b, d + dlen + off, st + off, n, t));
        ipcp__trace_piece(x, np + k, qb, (int)sb_q, n, 0);
        ipcp__trace_piece_stage(x, np + k, IPCP_STAGE_IN);
    }
    *ma |= 1u;
    *mb |= 1u << sb_q;
}

/* The flags in the last bytes of dir's stage buffer: a row of
 * IPCP_MAX_QUEUES per source queue set (two driven transfers from one peer
 * may copy out of two of its GPUs at once, each set's queues raising their
 * own in order), then one for the staged parts' ends (their copies in take
 * one queue at a time, see ipcp__drive_split).  Returns qa's row; *last
 * gets the staged parts' flag. */
#define IPCP_DRIVE_FLAGS_N (IPCP_MAX_QSETS * IPCP_MAX_QUEUES + 1)
_Static_assert(IPCP_DRIVE_FLAGS_N * sizeof(ipcp__flag_t) <=
                   IPCP_DRIVE_FLAGS_LEN,
               "a driven transfer's flags fit their place in the stage");
static ipcp__flag_t *ipcp__drive_flags(ipcp__dir_t *dir, const ipcp__qset_t *qa,
                                       ipcp__flag_t **last)
{
    ipcp__flag_t *f = (ipcp__flag_t *)((char *)dir->dstage + IPCP_DRIVE_STAGE -
                                       IPCP_DRIVE_FLAGS_LEN);
    ipcp__mem_attr_t sa = {.type = qa->ops->type, .device = qa->device};
    *last = f + IPCP_DRIVE_FLAGS_N - 1;
    return f + (size_t)ipcp__qset_index(&sa) * IPCP_MAX_QUEUES;
}

/* IPCPIPE_STRIPE_ADAPT: a striped driven transfer is watched as the
 * sender's copy is (ipcp__stripe_watch), from flags its own queues raise:
 * each queue of direct pieces after its last one, the staged part's queue
 * after its last copy in.  Raised after everything else is enqueued, so
 * that these calls (a stream memory operation each on GPUs) hold no copy
 * back.  Transfer seq raises seq: per queue they come in order, and the
 * staged parts of two running transfers copy in on one queue (see
 * ipcp__drive_split). */
static void ipcp__drive_watch(ipcp__xfer_t *x, ipcp__qset_t *qa,
                              ipcp__qset_t *qb, ipcp__watch_t *w, uint64_t seq,
                              unsigned np, unsigned lo, uint64_t slen)
{
    ipcp__flag_t *last;
    ipcp__flag_t *f = ipcp__drive_flags(&x->peer->rx, qa, &last);
    unsigned raised = 0;
    for (unsigned i = 0; i < np; i++) {
        unsigned qi = ipcp__direct_queue(seq, i, lo, (unsigned)qa->n);
        if (raised & (1u << qi))
            continue;
        raised |= 1u << qi;
        ipcp__enq_check(&x->track, qa->ops->flag_write(qa->q[qi], &f[qi].v, seq,
                                                       &x->track));
    }
    ipcp__enq_check(&x->track, qb->ops->flag_write(qb->q[qa == qb ? 1 : 0],
                                                   &last->v, seq, &x->track));
    w->done = f;
    w->dseq = seq;
    w->np = np;
    w->lo_s = lo;
    w->snq = (unsigned)qa->n;
    w->last = &last->v;
    w->last_v = seq;
    w->slen = slen;
    w->on = 1;
    x->watch = *w;
    ipcp__list_push_back(&x->comm->watching, &x->watch.link);
}

/* The direct part of a driven transfer, [0, dlen) of s into d, in np
 * pieces on qa's queues from lo on; returns the mask of those used. */
static unsigned ipcp__drive_direct(ipcp__xfer_t *x, ipcp__qset_t *qa,
                                   const char *s, char *d, uint64_t dlen,
                                   unsigned np, uint64_t seq, unsigned lo)
{
    unsigned mask = 0;
    for (unsigned i = 0; i < np; i++) {
        uint64_t off, n;
        int qi = (int)ipcp__direct_queue(seq, i, lo, (unsigned)qa->n);
        ipcp__piece(dlen, np, i, &off, &n);
        ipcp__trace_piece(x, i, qa, qi, n, 1);
        ipcp__enq_check(&x->track, qa->ops->copy(qa->q[qi], d + off, s + off, n,
                                                 &x->track));
        ipcp__trace_piece(x, i, qa, qi, n, 0);
        mask |= 1u << qi;
    }
    return mask;
}

/* Takes the transfer when this process can copy it; declines when the
 * sender should copy instead (what was set up on the way, queues,
 * mappings, peer access, stays for later transfers): the sender's GPU is
 * not visible here, or mapping fails.  The direct part, [0, dlen), goes
 * in pieces on qa's queues from lo on (clear of the staged part's). */
static int ipcp__map_start(ipcp_comm_t *comm, ipcp__peer_t *peer,
                           const ipcp__msg_rts_t *rts, ipcp_request_t *req,
                           const ipcp__offer_t *o)
{
    int src = -1; /* the sender's GPU, local ordinal; -1: host memory */
    ipcp__qset_t *qa, *qb;
    ipcp__import_t *imp;
    ipcp__choice_t c;
    ipcp_path_t force = o->force;

    if (o->dst_type != IPCP_MEM_HOST &&
        (src = ipcp__local_device(comm, rts->reach[0])) < 0)
        return 0;
    if (!ipcp__drive_map(comm, peer, rts, req, src, &qa, &qb, &imp))
        return 0;
    const char *s = (const char *)imp->ptr + rts->src_offset;
    char *d = req->buf;
    ipcp__watch_t w;
    memset(&w, 0, sizeof(w));
    uint64_t slen =
        ipcp__drive_split(comm, peer, rts, req, force, src, qa, qb, &w);
    uint64_t dlen = rts->len - slen;
    unsigned lo = slen ? (qa == qb ? 2u : 1u) : 0u;
    uint64_t nchunks =
        slen ? ipcp__div_up(slen, ipcp__stripe_unit(slen, IPCP_DRIVE_UNIT_MAX))
             : 0;
    unsigned np = dlen ? ipcp__npieces(comm, dlen, (unsigned)qa->n - lo,
                                       req->attr.type == IPCP_MEM_CUDA)
                       : 0;
    memset(&c, 0, sizeof(c));
    c.path = slen ? IPCP_PATH_STRIPED : IPCP_PATH_DIRECT;
    c.why = IPCP_WHY_DRIVEN;
    c.src_type = rts->src_type;
    c.staged = slen;
    ipcp__log_choice(comm, peer, req, &c, force);
    req->path = c.path;
    req->nbytes = rts->len;

    ipcp__stage_flush(comm, qa);
    ipcp__stage_flush(comm, qb);
    /* Traced: the direct pieces, the staged part's copies in (at tbase + k,
     * as the ring's receiving side traces chunk k), then its copies out
     * (ipcp__drive_staged). */
    ipcp__xfer_begin(comm, peer, req, 1, np + 2 * nchunks);
    ipcp__xfer_t *x = &req->xfer;
    x->tbase = np;
    x->import = imp;
    x->drive_id = rts->id;
    uint64_t seq = ++peer->rx.dseq; /* from 1: the watch's flags start at 0 */
    unsigned mb = 0;
    /* Not both ways under auto: see ipcp__stripe_auto_share. */
    int watched = comm->cfg->stripe_adapt && slen && np && !w.both;
    if (watched) /* both parts may start from the first copy on */
        w.t0 = ipcp__now_ns();
    unsigned ma = ipcp__drive_direct(x, qa, s, d, dlen, np, seq, lo);
    if (slen)
        ipcp__drive_staged(x, qa, qb, s, d, dlen, slen, np, nchunks, &ma, &mb);
    if (watched)
        ipcp__drive_watch(x, qa, qb, &w, seq, np, lo, slen);
    if (qa == qb) {
        ma |= mb;
        mb = 0;
    }
    /* qa's last: the next transfer from that GPU begins with a copy on
     * qa, and the calls leave its context current, so that copy needs no
     * cuCtxSetCurrent first (0.3-1.7 us on 2 x H200, median ~0.6). */
    ipcp__drive_notify(x, qb, mb);
    ipcp__drive_notify(x, qa, ma);
    ipcp__xfer_go(x);
    return 1;
}

const ipcp__route_t ipcp__route_map = {
    .name = "map",
    .serves = ipcp__map_serves,
    .start = ipcp__map_start,
};
