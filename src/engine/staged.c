/* The staged ring: how a transfer is cut into chunks over the ring's
 * slots, and the steps that enqueue them (all at once, or as slots free
 * up for a transfer larger than the ring). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/time.h"
#include "engine/xfer.h"
#include "engine/samegpu.h"
#include "engine/stripe.h"

/* Queues a staged transfer spreads its chunks over on a side with nq
 * queues (the receiver also computes it for the sender). */
int ipcp__staged_nq(const ipcp__chan_t *ch, int nq)
{
    int n = (int)(ch->nslots / ch->slots_per_queue);
    return ipcp__max(1, ipcp__min(n, nq));
}

int ipcp__staged_queues(const ipcp__chan_t *ch, const ipcp__qset_t *qs)
{
    return ipcp__staged_nq(ch, qs->n);
}

/* The queue (of nq) that copies ring chunk k on a side: by slot, so that
 * each slot is only ever filled, or emptied, by one queue of a side.  Any
 * assignment would do for the ring (a chunk waits only for earlier ones),
 * but this one keeps a slot's copies ordered inside the process: between
 * two queues the order would come from flags that pass through the peer,
 * which a thread checker does not see.  Consecutive chunks still take
 * turns over the queues. */
static uint64_t ipcp__staged_q(const ipcp__chan_t *ch, uint64_t k, uint64_t nq)
{
    return (k % ch->nslots) % nq;
}

/* Fills a transfer's error slot for the peer (the sequence number last,
 * with release order, so the peer never sees a number with a stale
 * status). */
void ipcp__err_report(ipcp__errslot_t *slot, uint64_t seq, ipcp__track_t *t)
{
    __atomic_store_n(&slot->status, (int64_t)atomic_load(&t->status),
                     __ATOMIC_RELAXED);
    __atomic_store_n(&slot->seq, seq, __ATOMIC_RELEASE);
}

/* Staged layout.  The pipeline of a transfer lasts about one chunk's copy
 * longer than its data takes (the receiver's first copy waits for the
 * sender's first; the sender's last ends before the receiver's): with
 * 16 MiB slots that is 6% of a 256 MiB transfer.  Transfers of at least 4
 * slots therefore start with chunks of 1/8, 1/4 and 1/2 slot and end with
 * the same in reverse, which leaves 1/8 slot of it.  Both sides compute the
 * same layout from the length and the slot size. */
#define IPCP_RAMP_STEPS 3
#define IPCP_RAMP_MIN   ((uint64_t)64 << 10)

/* The nominal chunk of a staged transfer: a slot, or for the staged part
 * of a striped transfer ipcp__stripe_unit (backend.h). */
uint64_t ipcp__staged_unit(uint64_t len, uint64_t slot, int striped)
{
    return striped ? ipcp__stripe_unit(len, slot) : slot;
}

/* Ramps are for whole-slot chunks: a striped transfer's staged part is
 * cut in few chunks on purpose (ipcp__stripe_unit), and a ring_slot of 0
 * (the bounce path on one GPU) has none. */
static int ipcp__staged_ramp(uint64_t len, uint64_t unit, uint64_t slot)
{
    return unit == slot && len >= 4 * unit &&
           (unit >> IPCP_RAMP_STEPS) >= IPCP_RAMP_MIN;
}

/* Ramp chunk i (0 smallest). */
static uint64_t ipcp__ramp_len(uint64_t slot, unsigned i)
{
    return slot >> (IPCP_RAMP_STEPS - i);
}

static uint64_t ipcp__ramp_sum(uint64_t slot)
{
    uint64_t sum = 0;
    for (unsigned i = 0; i < IPCP_RAMP_STEPS; i++)
        sum += ipcp__ramp_len(slot, i);
    return sum;
}

uint64_t ipcp__staged_nchunks(uint64_t len, uint64_t slot, uint64_t ring_slot)
{
    if (!ipcp__staged_ramp(len, slot, ring_slot))
        return ipcp__div_up(len, slot);
    return 2 * IPCP_RAMP_STEPS +
           ipcp__div_up(len - 2 * ipcp__ramp_sum(slot), slot);
}

/* Byte range of chunk c of a transfer of len bytes. */
static void ipcp__staged_chunk(uint64_t len, uint64_t slot, uint64_t ring_slot,
                               uint64_t nchunks, uint64_t c, uint64_t *off,
                               uint64_t *n)
{
    if (!ipcp__staged_ramp(len, slot, ring_slot)) {
        *off = c * slot;
        *n = ipcp__min(slot, len - *off);
        return;
    }
    uint64_t rs = ipcp__ramp_sum(slot), mid = nchunks - 2 * IPCP_RAMP_STEPS;
    if (c < IPCP_RAMP_STEPS) { /* head: 1/8, 1/4, 1/2 */
        *off = 0;
        for (unsigned i = 0; i < c; i++)
            *off += ipcp__ramp_len(slot, i);
        *n = ipcp__ramp_len(slot, (unsigned)c);
    } else if (c < IPCP_RAMP_STEPS + mid) { /* full slots, the last short */
        uint64_t m = c - IPCP_RAMP_STEPS;
        *off = rs + m * slot;
        *n = ipcp__min(slot, len - rs - *off);
    } else { /* tail: 1/2, 1/4, 1/8 */
        unsigned t = (unsigned)(c - IPCP_RAMP_STEPS - mid);
        *off = len - rs;
        for (unsigned i = 0; i < t; i++)
            *off += ipcp__ramp_len(slot, IPCP_RAMP_STEPS - 1 - i);
        *n = ipcp__ramp_len(slot, IPCP_RAMP_STEPS - 1 - t);
    }
}

/* Mask of the queues a staged transfer of nchunks from ring chunk base
 * uses (remote_done: also queue 0, where a put's sender waits at the
 * end). */
static unsigned ipcp__staged_mask(const ipcp__chan_t *ch,
                                  const ipcp__qset_t *qs, uint64_t base,
                                  uint64_t nchunks, int remote_done)
{
    uint64_t nq = (uint64_t)ipcp__staged_queues(ch, qs);
    unsigned m = remote_done ? 1u : 0u;
    for (uint64_t c = 0; c < nchunks && c < ch->nslots; c++)
        m |= 1u << ipcp__staged_q(ch, base + c, nq);
    return m;
}

/* Sets up one side's half of a staged transfer of len bytes at buf, ring
 * chunks base.. on (ipcp__stage_step enqueues it), through the channel's
 * slots or, when ring is not NULL, through as many slots, of its size,
 * elsewhere (the bounce path's ring in device memory: the flags, and
 * the chunks' numbers, are the channel's either way).  That ring lies in
 * the receiver's device memory, where the sender's GPU writes: the
 * receiver's waits flush remote writes before its copies read them.  Per chunk
 * c the sender waits for its slot to be freed (generation c / S), copies in and
 * marks it full; the receiver waits for full, copies out and marks it freed. */
void ipcp__stage_init(ipcp__xfer_t *x, ipcp__chan_t *ch,
                      const ipcp__ring_t *ring, char *buf, uint64_t len,
                      uint64_t unit, uint64_t base, int send, int remote_done,
                      ipcp__errslot_t *slot, uint64_t seq)
{
    uint64_t rs = ipcp__ring_ramp(ch, ring);
    x->stage = (ipcp__stage_t){.ch = ch,
                               .slots = ring ? ring->slots : ch->slots,
                               .slot_size = ipcp__ring_slot(ch, ring),
                               .ramp_slot = rs,
                               .gate = ring && ring->gate,
                               .flush = ring && !send,
                               .buf = buf,
                               .len = len,
                               .unit = unit,
                               .base = base,
                               .nchunks = ipcp__staged_nchunks(len, unit, rs),
                               .send = send,
                               .remote_done = remote_done,
                               .slot = slot,
                               .seq = seq};
}

/* After a transfer's last chunk: the marks still held go in, a failure
 * is reported, and a put's sender also waits until the target has copied
 * out its last chunks (a put completes at the target): copy-out of every
 * earlier chunk is implied by our own later sends that reused its slot. */
static void ipcp__stage_end(ipcp__xfer_t *x, uint64_t nq)
{
    ipcp__stage_t *st = &x->stage;
    ipcp__qset_t *qs = st->qs;
    ipcp__chan_t *ch = st->ch;
    ipcp__track_t *t = &x->track;
    __typeof__(qs->ops->flag_wait) ring_wait =
        qs->ops->flag_wait_ring ? qs->ops->flag_wait_ring : qs->ops->flag_wait;
    for (uint64_t qi = 0; qi < nq; qi++)
        if (st->held[qi])
            ipcp__enq_check(t, qs->ops->flag_write(qs->q[qi], st->held[qi],
                                                   st->held_v[qi], NULL));
    if (st->slot && !st->reported && !ipcp__track_ok(t))
        ipcp__err_report(st->slot, st->seq, t);
    uint64_t first = st->nchunks > ch->nslots ? st->nchunks - ch->nslots : 0;
    for (uint64_t c = first; st->remote_done && c < st->nchunks; c++) {
        uint64_t g = (st->base + c) / ch->nslots,
                 s = (st->base + c) % ch->nslots;
        ipcp__enq_check(t, ring_wait(qs->q[0], &ch->ctl->freed[s].v, g + 1,
                                     &x->peer->lost, NULL));
    }
}

/* Enqueues up to n more chunks of the stage on st->qs; returns 1 once all
 * of them and the marks and waits after them are in. */
static int ipcp__stage_step(ipcp__xfer_t *x, uint64_t n)
{
    ipcp__stage_t *st = &x->stage;
    ipcp__qset_t *qs = st->qs;
    ipcp__chan_t *ch = st->ch;
    ipcp__peer_t *peer = x->peer;
    ipcp__track_t *t = &x->track;
    ipcp__flag_t *wait = st->send ? ch->ctl->freed : ch->ctl->full;
    ipcp__flag_t *mark = st->send ? ch->ctl->full : ch->ctl->freed;
    uint64_t nq = (uint64_t)ipcp__staged_queues(ch, qs);
    uint64_t end = st->nchunks - st->next > n ? st->next + n : st->nchunks;
    __typeof__(qs->ops->flag_wait) ring_wait =
        qs->ops->flag_wait_ring && !st->flush ? qs->ops->flag_wait_ring
                                              : qs->ops->flag_wait;
    /* A chunk's mark goes into its queue with the wait of that queue's next
     * chunk, as one operation where the backend has one: the same order,
     * and less time between two copies. */
    for (uint64_t c = st->next; c < end; c++) {
        uint64_t g = (st->base + c) / ch->nslots,
                 s = (st->base + c) % ch->nslots;
        uint64_t off, len, qi = ipcp__staged_q(ch, st->base + c, nq);
        ipcp__staged_chunk(st->len, st->unit, st->ramp_slot, st->nchunks, c,
                           &off, &len);
        char *sl = st->slots + s * st->slot_size;
        ipcp__queue_t *q = qs->q[qi];
        uint64_t *held = st->held[qi], held_v = st->held_v[qi];
        /* Not tied to the track: a failed transfer's waits still run, so
         * its marks keep their order with the marks of the transfers
         * around it on the other queues. */
        int paired = held && qs->ops->flag_write_wait && !st->flush;
        ipcp_status_t rc =
            paired ? qs->ops->flag_write_wait(q, held, held_v, &wait[s].v,
                                              st->send ? g : g + 1, &peer->lost)
                   : IPCP_OK;
        ipcp__enq_check(t, rc);
        if (!paired || rc != IPCP_OK) {
            /* One at a time, also when the pair could not be enqueued: a
             * failed transfer's mark must still go in (writing a flag's
             * value twice, or waiting twice, is harmless). */
            if (held)
                ipcp__enq_check(t, qs->ops->flag_write(q, held, held_v, NULL));
            ipcp__enq_check(t, ring_wait(q, &wait[s].v, st->send ? g : g + 1,
                                         &peer->lost, NULL));
        }
        ipcp__trace_piece(x, x->tbase + c, qs, (int)qi, len, 1);
        ipcp__enq_check(t,
                        qs->ops->copy(q, st->send ? sl : st->buf + off,
                                      st->send ? st->buf + off : sl, len, t));
        ipcp__trace_piece(x, x->tbase + c, qs, (int)qi, len, 0);
        ipcp__fault_enq(qs, q, t, IPCP_FAULT_STAGED_CHUNK);
        /* A failed transfer keeps the ring moving (its copies are skipped,
         * its marks are not), so the peer is never left waiting; a sender
         * says so in the error slot before any later mark. */
        if (st->slot && !st->reported && !ipcp__track_ok(t)) {
            ipcp__err_report(st->slot, st->seq, t);
            st->reported = 1;
        }
        st->held[qi] = &mark[s].v;
        st->held_v[qi] = g + 1;
        /* A gated stage holds no mark: the peer's next chunk may wait for
         * it before our next one can go in. */
        if (st->gate) {
            ipcp__enq_check(
                t, qs->ops->flag_write(q, st->held[qi], st->held_v[qi], NULL));
            st->held[qi] = NULL;
        }
    }
    st->next = end;
    if (end < st->nchunks)
        return 0;
    ipcp__stage_end(x, nq);
    return 1;
}

/* Whether the next chunk of a gated stage may go in: the flag its queue
 * would wait for is met already (read by the host), so that the device
 * never holds a queue of this process blocked on the peer's work.  Two
 * processes on one GPU without MPS take turns in its time slices, and a
 * blocked queue kept the GPU from the other's copies (the bounce path on
 * one H200: 64 MiB at 153 GB/s with the waits on the device).  A lost
 * peer's flags are moved far ahead, which meets them. */
static int ipcp__stage_ready(const ipcp__xfer_t *x)
{
    const ipcp__stage_t *st = &x->stage;
    if (!st->gate || st->next >= st->nchunks)
        return 1;
    const ipcp__chan_t *ch = st->ch;
    uint64_t k = st->base + st->next, g = k / ch->nslots, s = k % ch->nslots;
    const uint64_t *flag =
        st->send ? &ch->ctl->freed[s].v : &ch->ctl->full[s].v;
    uint64_t want = st->send ? g : g + 1;
    return (int64_t)(__atomic_load_n(flag, __ATOMIC_ACQUIRE) - want) >= 0;
}

/* Ends one side's enqueueing once its staged chunks are all in. */
static void ipcp__stage_done(ipcp__xfer_t *x)
{
    ipcp__enq_end(x->req, x->stage.qs, x->stage.mask);
    ipcp__xfer_go(x);
}

/* How long a receiver's chunks may wait to be enqueued: its first copy
 * cannot start before the sender's first chunk is copied out, which takes
 * at least that chunk at IPCP_STAGE_DEFER_RATE bytes per ns (pinned copies
 * ran at 50-55 GB/s on the H200 machines), and never more than
 * IPCP_STAGE_DEFER_MAX. */
#define IPCP_STAGE_DEFER_RATE 64
#define IPCP_STAGE_DEFER_MAX  ((uint64_t)100 * 1000)

/* One side of a transfer has everything but its staged chunks in the
 * queues of qs (mask: the queues of the rest).  A sender's first chunk
 * goes in now (the pipeline starts with it); its other chunks, and all of
 * a receiver's (whose first copy waits for the sender's first chunk to be
 * copied out), a chunk per turn of the progress loop, in the order the
 * transfers came (ipcp__stage_poll).  While our own send to the same peer
 * waits for its CTS, a receiver's chunks wait too, up to the time that
 * copy-out takes: both ways at once, enqueueing them first (a few driver
 * calls each) kept the CTS of our send unread for 20-25 us on H200s, and
 * its direct part unstarted. */
void ipcp__stage_go(ipcp_comm_t *comm, ipcp__xfer_t *x, ipcp__qset_t *qs,
                    unsigned mask)
{
    ipcp__stage_t *st = &x->stage;
    st->qs = qs;
    st->mask = mask;
    if (st->nchunks)
        st->mask |= ipcp__staged_mask(st->ch, qs, st->base, st->nchunks,
                                      st->remote_done);
    if (!st->send && st->nchunks) {
        uint64_t off, len0;
        ipcp__staged_chunk(st->len, st->unit, st->ramp_slot, st->nchunks, 0,
                           &off, &len0);
        st->due_ns = ipcp__now_ns() + ipcp__min(len0 / IPCP_STAGE_DEFER_RATE,
                                                IPCP_STAGE_DEFER_MAX);
    }
    if (st->nchunks == 0 ||
        (st->send && ipcp__stage_ready(x) && ipcp__stage_step(x, 1))) {
        ipcp__stage_done(x);
        return;
    }
    qs->staging++;
    ipcp__list_push_back(&comm->staging, &st->link);
    atomic_fetch_add_explicit(&comm->nstaging, 1, memory_order_relaxed);
}

static void ipcp__stage_finish(ipcp__xfer_t *x)
{
    ipcp__list_del(&x->stage.link);
    x->stage.qs->staging--;
    atomic_fetch_sub_explicit(&x->comm->nstaging, 1, memory_order_relaxed);
    ipcp__stage_done(x);
}

/* Enqueues every chunk the transfer still has to go, and ends its staging. */
static void ipcp__stage_drain(ipcp__xfer_t *x)
{
    ipcp__stage_step(x, UINT64_MAX);
    ipcp__stage_finish(x);
}

/* A receiver's chunks may wait while our own send to that peer waits for
 * its CTS, until st->due_ns (ipcp__stage_go).  *now: the clock, read once
 * a turn and only when needed. */
static int ipcp__stage_due(const ipcp__xfer_t *x, uint64_t *now)
{
    if (x->stage.send || ipcp__list_empty(&x->peer->wait_cts))
        return 1;
    if (!*now)
        *now = ipcp__now_ns();
    return *now >= x->stage.due_ns;
}

/* Enqueues one chunk of the first transfer whose chunks may go in now and
 * whose queue set has no earlier transfer still staging (ring order). */
int ipcp__stage_poll(ipcp_comm_t *comm)
{
    ipcp__qset_t *held[8];
    unsigned nheld = 0;
    uint64_t now = 0;

    for (ipcp__list_t *e = comm->staging.next; e != &comm->staging;
         e = e->next) {
        ipcp__xfer_t *x = ipcp__list_entry(e, ipcp__xfer_t, stage.link);
        unsigned i = 0;
        while (i < nheld && held[i] != x->stage.qs)
            i++;
        if (i == nheld && ipcp__stage_due(x, &now) && ipcp__stage_ready(x)) {
            if (ipcp__stage_step(x, 1))
                ipcp__stage_finish(x);
            return 1;
        }
        if (i == nheld) {
            if (nheld == sizeof(held) / sizeof(held[0]))
                break;
            held[nheld++] = x->stage.qs;
        }
    }
    return 0;
}

/* Before anything else goes into the queues of qs: the chunks of earlier
 * transfers still to go there go first (a ring's chunks must enter its
 * queues in ring order). */
void ipcp__stage_flush(ipcp_comm_t *comm, ipcp__qset_t *qs)
{
    ipcp__list_t *e, *tmp;
    if (!qs->staging)
        return;
    ipcp__list_for_each_safe(e, tmp, &comm->staging)
    {
        ipcp__xfer_t *x = ipcp__list_entry(e, ipcp__xfer_t, stage.link);
        if (x->stage.qs == qs)
            ipcp__stage_drain(x);
    }
}

void ipcp__stage_flush_all(ipcp_comm_t *comm)
{
    while (!ipcp__list_empty(&comm->staging))
        ipcp__stage_drain(
            ipcp__list_entry(comm->staging.next, ipcp__xfer_t, stage.link));
}
