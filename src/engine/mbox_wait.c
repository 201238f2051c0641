/* The mailbox's callers that read their inboxes themselves, and the
 * progress thread's sleep beside them (mbox.c has the ring; the design is
 * described there and in docs/mailbox.md). */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/cpu.h"
#include "common/time.h"
#include "engine/engine.h"
#include "engine/mbox_ring.h"

/* ---- Callers that read ----------------------------------------------------
 */

int ipcp__mbox_head_eager(ipcp_comm_t *comm, ipcp__peer_t *peer, int tag,
                          void *buf, size_t cap, size_t *got)
{
    int bad = 0;
    uint64_t tail = peer->in_tail;
    size_t len, off;
    uint32_t kind;
    ipcp__msg_eager_t e;
    const ipcp__mbox_slot_t *s =
        ipcp__mbox_peek(peer, &tail, &len, &kind, &bad);
    /* Anything else, a malformed one included, is read the usual way. */
    if (!s || kind != IPCP_MBOX_DATA ||
        !ipcp__eager_parse(s->data, len, &e, &off) || e.tag != tag ||
        e.len > cap)
        return 0;
    if (!(e.hdr.flags & IPCP_EAGER_PIPE))
        ipcp__copy_small(buf, s->data + off, e.len);
    else if (ipcp__mbox_pipe_copy(comm, peer, buf, s->data, e.len) != 0)
        return 0; /* its writer stopped: the thread loses the peer */
    ipcp__mbox_clear_span(peer, tail, ipcp__mbox_span(len));
    ipcp__mbox_release(peer, tail + ipcp__mbox_span(len));
    peer->n_rx_fast++;
    *got = e.len;
    return 1;
}

/* Delivers the EAGER messages at the inbox's head that ipcp__match_eager
 * takes with caller (1, or IPCP_MATCH_POSTED), from the slots, which stay
 * ours until the tail moves, and gives their slots back at once, with one
 * ordered write (a seq_cst store each cost a receiver's message).  rx_lock
 * held.  Returns how many; *more: a record is left at the head (or a
 * malformed one: *bad). */
static int ipcp__mbox_deliver(ipcp_comm_t *comm, ipcp__peer_t *peer, int caller,
                              int *more, int *bad)
{
    int n = 0;
    uint64_t tail = peer->in_tail, taken = tail;
    ipcp__mbox_slot_t *s;
    size_t len;
    uint32_t kind;
    while ((s = ipcp__mbox_peek(peer, &tail, &len, &kind, bad))) {
        const ipcp__msg_hdr_t *h = (const void *)s->data;
        if (kind != IPCP_MBOX_DATA || len < sizeof(*h) ||
            h->type != IPCP_MSG_EAGER ||
            !ipcp__match_eager(comm, peer, s->data, len,
                               caller | IPCP_MATCH_RING))
            break;
        ipcp__mbox_clear_span(peer, tail, ipcp__mbox_span(len));
        tail += ipcp__mbox_span(len);
        n++;
    }
    if (tail != taken)
        ipcp__mbox_release(peer, tail);
    peer->n_rx_fast += (uint64_t)n;
    *more = s != NULL;
    return n;
}

int ipcp__mbox_drain_posted(ipcp_comm_t *comm, ipcp__peer_t *peer)
{
    int more, bad = 0;
    return ipcp__mbox_deliver(comm, peer, IPCP_MATCH_POSTED, &more, &bad);
}

/* Reads the EAGER messages at the head of the peer's inbox for a waiting
 * caller (rx_lock taken only if free: else the progress thread reads).
 * At anything else it stops, and wakes the progress thread if that sleeps
 * leaving the inbox to callers; *kicked remembers the slot it woke it
 * for.  Returns how many messages it took. */
static int ipcp__mbox_read_fast(ipcp_comm_t *comm, ipcp__peer_t *peer,
                                uint64_t *kicked)
{
    int more, bad = 0;
    if (!ipcp__mbox_ready(peer) ||
        ipcp__trylock(&peer->rx_lock, IPCP_LOCK_RX) != 0)
        return 0;
    /* Under the lock: the progress thread may have read on meanwhile. */
    int n = ipcp__mbox_deliver(comm, peer, 1, &more, &bad);
    uint64_t tail = peer->in_tail;
    /* Raised under rx_lock, which the thread holds when it lowers it and
     * reads: a raise after its read would stay up for a record long gone
     * (and keep the thread reading beside the caller). */
    int kick = (more || bad) && *kicked != tail + 1;
    if (kick) {
        *kicked = tail + 1;
        atomic_store(&peer->kick, 1);
    }
    ipcp__unlock(&peer->rx_lock, IPCP_LOCK_RX);
    /* Left for the progress thread, which may sleep blind (see
     * ipcp__mbox_sleep: it looks at the head after raising blind). */
    /* Not when the caller takes the turn itself next (its wait loop, and
     * ipcp_test, drive at a kick): a wake-up would only make the thread
     * compete for the turn, and on one CPU for the CPU.  A waiting caller
     * that leaves first wakes the thread then (ipcp__mbox_leave). */
    if (kick && atomic_load(&peer->blind) && !ipcp__comm_can_drive(comm))
        ipcp__comm_wake(comm);
    return n;
}

/* Whether the records from the inbox's tail on hold one the progress
 * thread must read while the ring is lazy: anything but an EAGER message
 * (which its caller reads), or more than half a ring of them (their writer
 * needs room).  Each record is looked at once (lazy_seen: how far they
 * were EAGER ones); bytes the peer may rewrite only make it wake us or
 * not for its own messages.  Without rx_lock. */
static int ipcp__mbox_lazy_wants(ipcp__peer_t *peer)
{
    uint64_t slots = peer->mbox_slots;
    uint64_t tail = __atomic_load_n(&peer->in_tail, __ATOMIC_SEQ_CST);
    uint64_t at = atomic_load_explicit(&peer->lazy_seen, memory_order_relaxed);
    if (at < tail)
        at = tail;
    for (;;) {
        if (at - tail > slots / 2)
            return 1;
        const ipcp__mbox_slot_t *s = ipcp__mbox_slot(peer->inbox, slots, at);
        /* Not written yet, or taken and written over: no more to see. */
        if (__atomic_load_n(&s->seq, __ATOMIC_SEQ_CST) != at + 1)
            break;
        uint32_t kind = __atomic_load_n(&s->marker, __ATOMIC_RELAXED);
        uint32_t len = __atomic_load_n(&s->len, __ATOMIC_RELAXED);
        uint64_t room = slots - ipcp__mbox_index(at, slots);
        if (kind == IPCP_MBOX_SKIP && len && len <= room) {
            at += len;
            continue;
        }
        ipcp__msg_hdr_t h;
        if (kind != IPCP_MBOX_DATA || len < sizeof(h) ||
            len > ipcp__mbox_rec_max(peer) || ipcp__mbox_span(len) > room)
            return 1;
        memcpy(&h, s->data, sizeof(h));
        if (h.type != IPCP_MSG_EAGER)
            return 1;
        at += ipcp__mbox_span(len);
    }
    atomic_store_explicit(&peer->lazy_seen, at, memory_order_relaxed);
    return 0;
}

/* Turns a LAZY word into WAKE; returns 1 when this call did.  Looked at
 * first: a compare-and-swap takes the writer's line even when it fails. */
static int ipcp__mbox_unlazy(ipcp__mbox_ring_t *ring)
{
    uint32_t word = IPCP_MBOX_LAZY;
    return __atomic_load_n(&ring->sleeping, __ATOMIC_SEQ_CST) ==
               IPCP_MBOX_LAZY &&
           __atomic_compare_exchange_n(&ring->sleeping, &word, IPCP_MBOX_WAKE,
                                       0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
}

/* Raises the inbox's sleeping word before the progress thread blocks
 * unwatched: LAZY while every receive of ours waiting for the peer is read
 * by its caller, else WAKE.  Returns 1 when a record the thread must read
 * is there already (it may have come before the word went up). */
static int ipcp__mbox_raise(ipcp__peer_t *peer)
{
    ipcp__mbox_ring_t *ring = peer->inbox;
    int lazy = !atomic_load(&peer->n_posted_thread);
    uint32_t want = lazy ? IPCP_MBOX_LAZY : IPCP_MBOX_WAKE;
    /* The writer reads the word after each message: written only when it
     * changes, it stays in the writer's cache through a window of waits.
     * Read seq_cst: the store it shows then comes before our looks below
     * in the total order, as a store of ours would. */
    if (__atomic_load_n(&ring->sleeping, __ATOMIC_SEQ_CST) != want)
        __atomic_store_n(&ring->sleeping, want, __ATOMIC_SEQ_CST);
    /* Against ipcp__mbox_thread_needed: it counts a receive, then looks at
     * the word; we set the word, then look at the count (seq_cst). */
    if (lazy && atomic_load(&peer->n_posted_thread)) {
        ipcp__mbox_unlazy(ring);
        lazy = 0;
    }
    if (!ipcp__mbox_ready(peer))
        return 0;
    return !lazy || ipcp__mbox_lazy_wants(peer);
}

void ipcp__mbox_thread_needed(ipcp_comm_t *comm, ipcp__peer_t *peer)
{
    ipcp__mbox_ring_t *ring = peer->inbox;
    if (!__atomic_load_n(&peer->in_on, __ATOMIC_ACQUIRE) || !ring)
        return; /* no inbox: the socket wakes the thread */
    /* Seq_cst, after the count went up: a raise that comes later sees the
     * count. */
    if (ipcp__mbox_unlazy(ring) && ipcp__mbox_ready(peer))
        ipcp__comm_wake(comm);
}

/* The last caller to leave an inbox the progress thread sleeps blind on
 * raises its sleeping word (writers wake the thread from then on) and
 * wakes the thread itself for what came before. */
static void ipcp__mbox_leave(ipcp_comm_t *comm, ipcp__peer_t *peer)
{
    if (atomic_fetch_sub(&peer->waiters, 1) != 1 || !atomic_load(&peer->blind))
        return;
    /* Also for an EAGER record a caller refused (kick), which a lazy word
     * does not count. */
    if (ipcp__mbox_raise(peer) ||
        (atomic_load(&peer->kick) && ipcp__mbox_ready(peer)))
        ipcp__comm_wake(comm);
}

/* The first caller to read an inbox the progress thread sleeps blind on
 * lowers its sleeping word, which the last one raised when it left:
 * writers then make no system call while a caller reads (a ping-pong
 * leaves and enters between every two messages). */
static void ipcp__mbox_enter(ipcp__peer_t *peer)
{
    ipcp__mbox_ring_t *ring = peer->inbox;
    /* A lazy word stays: the writers wake nobody for the eager messages we
     * read, and the last caller out would raise it again. */
    if (atomic_fetch_add(&peer->waiters, 1) == 0 && atomic_load(&peer->blind) &&
        __atomic_load_n(&ring->sleeping, __ATOMIC_RELAXED) != IPCP_MBOX_LAZY)
        __atomic_store_n(&ring->sleeping, IPCP_MBOX_AWAKE, __ATOMIC_SEQ_CST);
}

/* How long a caller on one CPU polls its inbox before it lets the other
 * threads of its process in (sched_yield) every few looks.  A peer's answer
 * usually lands sooner, and a yield is a system call: yielding from the
 * first look made the eager 8 B half round trip 1.3-1.4 us with ranks bound
 * to one core each (0.5-0.6 unbound) on a 2-CPU VM. */
#define IPCP_MBOX_YIELD_NS 5000

void ipcp__mbox_unwatch(ipcp_comm_t *comm, ipcp_request_t *req)
{
    ipcp__peer_t *peer = &comm->peers[req->peer];
    int thread = 0;
    if (atomic_load_explicit(&req->done, memory_order_acquire))
        return;
    ipcp__lock(&peer->rx_lock, IPCP_LOCK_RX);
    if (req->watch && req->in_posted) {
        atomic_fetch_add(&peer->n_posted_thread, 1);
        thread = 1;
    }
    req->watch = 0;
    ipcp__unlock(&peer->rx_lock, IPCP_LOCK_RX);
    if (thread)
        ipcp__mbox_thread_needed(comm, peer);
}

void ipcp__mbox_wait(ipcp_comm_t *comm, ipcp_request_t *req, uint64_t spin_ns)
{
    ipcp__peer_t *peer = &comm->peers[req->peer];
    /* The clock is first read after 64 looks (t0 = 0 until then): the
     * spin lasts those looks longer, a fraction of a microsecond. */
    uint64_t t0 = 0, kicked = 0;
    /* On one CPU, threads of ours that may complete it need that CPU now
     * and then; the peer's messages come from another one. */
    int one = ipcp__one_cpu(), yield = 0;
    ipcp__mbox_enter(peer);
    for (unsigned i = 1;
         !atomic_load_explicit(&req->done, memory_order_acquire); i++) {
        if (ipcp__mbox_read_fast(comm, peer, &kicked))
            continue;
        /* What it left for the thread (an RTS, a CTS), and the transfers
         * whose queues ended (the copies of the receive it waits for):
         * taken here where the caller may (ipcp__comm_drive), not after a
         * hand-off to a thread that must first wake (unbound on one H200,
         * a 64 KiB half round trip took 32-49 us, Open MPI's 11-13).  On
         * one CPU too: there the thread would run only once this caller
         * yields, IPCP_MBOX_YIELD_NS later (ranks bound to one CPU each
         * of a 2-CPU VM, direct 8 KiB half round trip 12.1 -> 3.0 us). */
        /* And chunks still to stage, messages waiting for room: the
         * thread may block in poll() meanwhile (ipcp__comm_undrive wakes
         * it for what is left when the caller stops). */
        if ((atomic_load_explicit(&peer->kick, memory_order_relaxed) ||
             atomic_load_explicit(&comm->queued, memory_order_relaxed) ||
             atomic_load_explicit(&comm->nstaging, memory_order_relaxed) ||
             atomic_load_explicit(&peer->backlog, memory_order_relaxed)) &&
            ipcp__comm_drive(comm))
            continue;
        if (yield && !(i % 16))
            sched_yield();
        else
            ipcp__cpu_pause();
        /* A clock read costs more than a look at the ring. */
        if (!(i % 64)) {
            uint64_t now = ipcp__now_ns();
            if (!t0)
                t0 = now;
            if (now - t0 >= spin_ns)
                break;
            yield = one && now - t0 >= IPCP_MBOX_YIELD_NS;
        }
    }
    /* It sleeps now: the thread reads its message at once. */
    ipcp__mbox_unwatch(comm, req);
    ipcp__mbox_leave(comm, peer);
    ipcp__comm_undrive(comm);
}

void ipcp__mbox_poll(ipcp_comm_t *comm, ipcp_request_t *req)
{
    ipcp__mbox_read_fast(comm, &comm->peers[req->peer], &req->polled);
}

/* ---- The progress thread's sleep ----------------------------------------- */

/* The message at the inbox's head is left to its caller while it is an
 * eager one that came less than spin_us ago, for which no receive is
 * posted yet or the first is one its caller reads itself (watch).  On one
 * H200 the thread, spinning after a barrier, took 64 776 of 66 000
 * messages of a window the caller was still posting receives for (8 B:
 * 0.0066 GB/s, Open MPI 0.08).  Read at once: a message for a receive
 * posted the thread's way, or whose caller stopped spinning (ipcp__mbox_wait
 * clears watch then: with the thread waiting too, each side slept through
 * the other's message, 65 us a half round trip); past that time, any. */
uint64_t ipcp__mbox_fresh_eager(const ipcp_comm_t *comm, ipcp__peer_t *peer)
{
    uint64_t tail = __atomic_load_n(&peer->in_tail, __ATOMIC_ACQUIRE);
    const ipcp__mbox_slot_t *s =
        ipcp__mbox_slot(peer->inbox, peer->mbox_slots, tail);
    if (__atomic_load_n(&s->seq, __ATOMIC_ACQUIRE) != tail + 1)
        return 0; /* a skip record, or a caller took it */
    uint32_t kind = __atomic_load_n(&s->marker, __ATOMIC_RELAXED);
    uint32_t len = __atomic_load_n(&s->len, __ATOMIC_RELAXED);
    ipcp__msg_eager_t e;
    memcpy(&e, s->data, sizeof(e));
    if (kind != IPCP_MBOX_DATA || len < sizeof(e) ||
        e.hdr.type != IPCP_MSG_EAGER || !comm->cfg->spin_us)
        return 0;
    uint64_t now = ipcp__now_ns();
    if (peer->eager_tail != tail + 1) {
        peer->eager_tail = tail + 1;
        peer->eager_ns = now;
    }
    uint64_t spin = (uint64_t)comm->cfg->spin_us * 1000;
    if (now - peer->eager_ns >= spin)
        return 0;
    /* The posted receives are looked at only when one is the thread's: a
     * try of rx_lock on every turn takes the lock's line from the caller
     * posting or reading (on 16 CPUs unbound). */
    return !atomic_load(&peer->n_posted_thread) ||
                   ipcp__match_posted(peer, e.tag) != 2
               ? spin - (now - peer->eager_ns)
               : 0;
}

/* Before the progress thread blocks: raises the sleeping word of every
 * inbox in use, except those callers read (blind: a caller that meets a
 * message for us, or leaves last, wakes us); returns 1 if a message came
 * meanwhile (do not block).  Not for a fresh eager message at the head,
 * which its caller reads (ipcp__mbox_fresh_eager; the thread would only
 * look at it): *look_ns says when it goes stale.  Polling it meanwhile,
 * the thread of a receiver whose sender ran ahead (the ring over half
 * full, each receive taking its message at the head as it was posted)
 * looked at the ring and rewrote the sleeping word all the time: 8 B
 * windows, unbound on the H100 machine, 600-900 ns a message against
 * Open MPI's 134 and 150-290 with ranks bound. */
int ipcp__mbox_sleep(ipcp_comm_t *comm, uint64_t *look_ns)
{
    int pending = 0;
    *look_ns = 0;
    for (int r = 0; r < comm->size; r++) {
        ipcp__peer_t *p = &comm->peers[r];
        ipcp__mbox_ring_t *ring = p->inbox;
        if (!p->in_on || !ring || ipcp__peer_closed(p))
            continue;
        /* Against ipcp__mbox_leave and ipcp__mbox_read_fast: blind goes up
         * before waiters and the head are looked at, and they look at
         * blind after waiters went down or the head moved (seq_cst). */
        atomic_store(&p->blind, 1);
        if (!atomic_load(&p->waiters) && ipcp__mbox_raise(p)) {
            /* Not with a receive posted the thread's way: one posted
             * while we looked (its rx_lock held) may be for the head,
             * and a WAKE word is not turned again for it. */
            uint64_t fresh =
                atomic_load(&p->kick) || atomic_load(&p->n_posted_thread)
                    ? 0
                    : ipcp__mbox_fresh_eager(comm, p);
            if (!fresh)
                pending = 1;
            else if (!*look_ns || fresh < *look_ns)
                *look_ns = fresh;
        }
        /* What callers read is theirs, unless one left it for us (a
         * record it refused: one it could not keep, or a malformed one). */
        if (ipcp__mbox_ready(p) && atomic_load(&p->kick))
            pending = 1;
    }
    return pending;
}

void ipcp__mbox_awake(ipcp_comm_t *comm)
{
    for (int r = 0; r < comm->size; r++) {
        ipcp__peer_t *p = &comm->peers[r];
        ipcp__mbox_ring_t *ring = p->inbox;
        if (p->in_on && ring) {
            atomic_store(&p->blind, 0);
            __atomic_store_n(&ring->sleeping, 0, __ATOMIC_RELAXED);
        }
    }
}
