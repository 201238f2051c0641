/* The shared-memory mailbox (IPCPIPE_MAILBOX=on): control messages between
 * two progress threads through a ring in shared memory instead of the
 * socket.  A socket hop costs a send, the peer's next poll and a receive
 * (2.6-6 us each on the H200 machines, two per rendezvous); a ring slot is
 * seen by the peer's next look at memory.
 *
 * Each rank that wants it offers each peer an inbox at start: a memfd ring
 * and its progress thread's wake eventfd, in an MBOX message on the socket.
 * The peer maps it and, once nothing of its own waits for the socket, sends
 * SWITCH on the socket; every later message to us goes into the inbox.  A
 * message the ring cannot carry (descriptors, or longer than a slot) goes
 * on the socket first, with a marker in the inbox right after it, and the
 * reader takes socket messages only at markers: one order for both, with
 * no sequence numbers.  Before the reader blocks in poll it raises its
 * sleeping word and looks at the ring once more; a writer that sees the
 * word writes the eventfd.  A hang-up on the socket still means the peer
 * is gone, once the inbox is read to its end.
 *
 * Callers take a shorter way for small host messages: a sender writes an
 * EAGER message into the peer's inbox itself when nothing of ours waits
 * before it (tx_lock: one writer at a time), and a caller waiting for a
 * receive reads its inbox itself (rx_lock: one reader at a time), as long
 * as the message at its head is an EAGER one for host memory; anything else
 * stays for the progress thread, which it wakes.  While a caller reads an
 * inbox the progress thread may sleep without raising that inbox's sleeping
 * word (blind): writers then make no system call, and the caller that
 * leaves last raises the word for it. */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/bufcache.h"
#include "common/cpu.h"
#include "common/shm.h"
#include "common/time.h"
#include "engine/engine.h"
#include "engine/mbox_ring.h"

size_t ipcp__mbox_bytes(uint32_t slots)
{
    return sizeof(ipcp__mbox_ring_t) + slots * sizeof(ipcp__mbox_slot_t);
}

/* Powers of two (ipcp__mbox_index). */
#define IPCP_MBOX_SLOTS     2048
#define IPCP_MBOX_SLOTS_BIG 512
_Static_assert((IPCP_MBOX_SLOTS & (IPCP_MBOX_SLOTS - 1)) == 0 &&
                   (IPCP_MBOX_SLOTS_BIG & (IPCP_MBOX_SLOTS_BIG - 1)) == 0,
               "mailbox rings hold a power of two of slots");
/* A record's longest length in a ring of n slots: a quarter of the ring,
 * so several such messages fit at once, and in jobs of up to
 * IPCP_MBOX_BIG_JOB ranks a 64 KiB eager message with its header (an
 * eighth held 64 KiB - 16 B, and 48-64 KiB messages took the direct read
 * at a third of the rate they reach as records). */
#define IPCP_MBOX_MSG_MAX(n) ((size_t)(n) / 4 * IPCP_MBOX_SLOT - IPCP_MBOX_HDR)
_Static_assert(IPCP_MBOX_MSG_MAX(IPCP_MBOX_SLOTS) <= IPCP_RX_MAX &&
                   IPCP_SOCK_MSG_MAX <= IPCP_RX_MAX,
               "a turn's receive buffer holds any record and socket message");

/* The longest record of any kind: a pipelined EAGER message's
 * (IPCP_EAGER_PIPE) may fill three quarters of the ring, so that a 256 KiB
 * one fits in jobs of up to IPCP_MBOX_BIG_JOB ranks (the direct read's
 * process_vm_readv lost to Open MPI from 96 KiB to 256 KiB on ranks bound
 * to one CPU, docs/measured.md).  Every other record is a plain one. */
#define IPCP_MBOX_REC_MAX(n)                                                   \
    ((size_t)(n) / 4 * 3 * IPCP_MBOX_SLOT - IPCP_MBOX_HDR)

uint32_t ipcp__mbox_slots(int size)
{
    return size <= IPCP_MBOX_BIG_JOB ? IPCP_MBOX_SLOTS : IPCP_MBOX_SLOTS_BIG;
}

size_t ipcp__mbox_msg_max(const ipcp__peer_t *peer)
{
    return IPCP_MBOX_MSG_MAX(peer->mbox_slots);
}

size_t ipcp__mbox_rec_max(const ipcp__peer_t *peer)
{
    return IPCP_MBOX_REC_MAX(peer->mbox_slots);
}

/* The socket until the peer's inbox is on, which it then stays; from
 * then on whatever fits a record goes there, and the rest on the socket
 * (ipcp__mbox_send). */
size_t ipcp__mbox_carry_max(const ipcp__peer_t *peer)
{
    size_t rec = ipcp__mbox_msg_max(peer);
    return __atomic_load_n(&peer->out_on, __ATOMIC_ACQUIRE) &&
                   rec > IPCP_SOCK_MSG_MAX
               ? rec
               : IPCP_SOCK_MSG_MAX;
}

/* ---- Setting up ---------------------------------------------------------- */

void ipcp__mbox_offer(ipcp_comm_t *comm)
{
    if (comm->cfg->mailbox != IPCP_MBOX_ON)
        return;
    for (int r = 0; r < comm->size; r++) {
        ipcp__peer_t *p = &comm->peers[r];
        if (r == comm->rank || ipcp__peer_closed(p))
            continue;
        /* Sealed: the peer gets the fd, and a peer that could shrink the
         * file would make our next look at the ring a SIGBUS. */
        int fds[2] = {
            ipcp__memfd_sealed("ipcpipe-mbox", ipcp__mbox_bytes(p->mbox_slots)),
            -1};
        void *m = MAP_FAILED;
        /* Both sides map the ring populated: otherwise the first message
         * in each page pays a page fault (7-13 us on the H200 machines,
         * where the bench's short runs never finish a lap of the ring and
         * a CTS took 7-9 us to post, median, against 1.5-1.9 once
         * populated). */
        if (fds[0] >= 0)
            m = mmap(NULL, ipcp__mbox_bytes(p->mbox_slots),
                     PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fds[0],
                     0);
        if (m != MAP_FAILED)
            fds[1] = dup(comm->wake_fd);
        if (m == MAP_FAILED || fds[1] < 0) {
            /* The socket still works: say why and go on without. */
            IPCP_WARN(IPCP_SUB_ENGINE, "no mailbox from rank %d: %s", r,
                      strerror(errno));
            if (m != MAP_FAILED)
                munmap(m, ipcp__mbox_bytes(p->mbox_slots));
            if (fds[0] >= 0)
                close(fds[0]);
            continue;
        }
        p->inbox = m;
        ipcp__msg_mbox_t msg;
        memset(&msg, 0, sizeof(msg));
        msg.hdr.type = IPCP_MSG_MBOX;
        msg.size = ipcp__mbox_bytes(p->mbox_slots);
        msg.slots = p->mbox_slots;
        msg.slot = IPCP_MBOX_SLOT;
        /* The message owns both descriptors now. */
        ipcp__peer_post(comm, p, &msg, sizeof(msg), fds, 2);
    }
}

/* Writes SWITCH on the socket and turns the outbox on, once nothing of
 * ours waits for the socket (what waits there must arrive first). */
void ipcp__mbox_try_switch(ipcp_comm_t *comm, ipcp__peer_t *peer)
{
    if (!peer->outbox || peer->out_on || ipcp__peer_unwritten(peer) ||
        !ipcp__list_empty(&peer->txq))
        return;
    ipcp__msg_hdr_t sw = {IPCP_MSG_SWITCH, 0};
    ipcp_status_t st = ipcp__sock_send(peer->fd, &sw, sizeof(sw), NULL, 0, 1);
    if (st == IPCP_IN_PROGRESS)
        return; /* socket full: the next flush tries again */
    if (st != IPCP_OK) {
        ipcp__peer_wr_broken(comm, peer, ipcp__last_error());
        return;
    }
    __atomic_store_n(&peer->out_on, 1, __ATOMIC_RELEASE);
    IPCP_DEBUG(IPCP_SUB_ENGINE, "messages to rank %d go through its mailbox",
               peer->rank);
}

void ipcp__mbox_on_offer(ipcp_comm_t *comm, ipcp__peer_t *peer,
                         const unsigned char *msg, size_t len, int *fds,
                         int nfds)
{
    ipcp__msg_mbox_t m;
    const char *bad = NULL;
    void *ring = MAP_FAILED;
    if (len < sizeof(m) || nfds != 2)
        bad = "malformed mailbox offer";
    else {
        memcpy(&m, msg, sizeof(m));
        if (m.size != ipcp__mbox_bytes(peer->mbox_slots) ||
            m.slots != peer->mbox_slots || m.slot != IPCP_MBOX_SLOT ||
            peer->outbox)
            bad = "mailbox offer of another layout, or a second one";
        else if (ipcp__memfd_check(fds[0], ipcp__mbox_bytes(peer->mbox_slots),
                                   IPCP_LOG_DEBUG, IPCP_SUB_ENGINE,
                                   "a mailbox") != IPCP_OK ||
                 ipcp__eventfd_check(fds[1], IPCP_LOG_DEBUG, IPCP_SUB_ENGINE,
                                     "a mailbox") != IPCP_OK)
            bad = ipcp__last_error();
    }
    if (!bad) {
        ring =
            mmap(NULL, ipcp__mbox_bytes(peer->mbox_slots),
                 PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fds[0], 0);
        if (ring == MAP_FAILED) {
            /* Our side of the socket still works: keep using it. */
            IPCP_WARN(IPCP_SUB_ENGINE, "cannot map rank %d's mailbox: %s",
                      peer->rank, strerror(errno));
        }
    }
    for (int i = 0; i < nfds; i++)
        if (i != 1 || ring == MAP_FAILED)
            close(fds[i]);
    if (bad) {
        ipcp__peer_lost(comm, peer, bad);
        return;
    }
    if (ring == MAP_FAILED)
        return;
    peer->outbox = ring;
    peer->out_wake = fds[1];
    ipcp__mbox_try_switch(comm, peer);
}

void ipcp__mbox_close(ipcp__peer_t *peer)
{
    if (peer->inbox || peer->outbox)
        IPCP_DEBUG(IPCP_SUB_ENGINE,
                   "mailbox with rank %d: sent %llu by callers, %llu by the "
                   "thread (%llu callers' sends left to it), %llu wake-ups; "
                   "read %llu by callers, %llu by the thread; %llu receives "
                   "left to the thread",
                   peer->rank, (unsigned long long)peer->n_tx_fast,
                   (unsigned long long)peer->n_tx_thread,
                   (unsigned long long)peer->n_tx_refused,
                   (unsigned long long)peer->n_wakes,
                   (unsigned long long)peer->n_rx_fast,
                   (unsigned long long)peer->n_rx_thread,
                   (unsigned long long)peer->n_rx_refused);
    if (peer->inbox)
        munmap(peer->inbox, ipcp__mbox_bytes(peer->mbox_slots));
    if (peer->outbox)
        munmap(peer->outbox, ipcp__mbox_bytes(peer->mbox_slots));
    if (peer->out_wake >= 0)
        close(peer->out_wake);
    peer->inbox = peer->outbox = NULL;
    peer->out_head = peer->out_tail = peer->in_tail = 0;
    peer->out_wake = -1;
    peer->in_on = peer->out_on = 0;
}

/* ---- Writing ------------------------------------------------------------- */

/* Whether a lazy reader must come for room (tx_lock held): the ring is
 * over half full, and we did not wake it for that in the last eighth of a
 * ring (it may leave fresh messages for their callers a while).  The
 * reader's tail is looked at once an eighth of a ring at most: it moves
 * with every message a receiver takes, and a sender running ahead keeps
 * the ring over half full as its last look saw it. */
static int ipcp__mbox_lazy_full(ipcp__peer_t *peer)
{
    ipcp__mbox_ring_t *ring = peer->outbox;
    uint64_t slots = peer->mbox_slots;
    if (peer->out_head - peer->out_tail <= slots / 2 ||
        peer->out_head - peer->out_lazy_look < slots / 8)
        return 0;
    peer->out_lazy_look = peer->out_head;
    peer->out_tail = __atomic_load_n(&ring->tail, __ATOMIC_ACQUIRE);
    return peer->out_head - peer->out_tail > slots / 2 &&
           peer->out_head -
                   __atomic_load_n(&peer->out_lazy_woke, __ATOMIC_RELAXED) >=
               slots / 8;
}

/* A publish's due wake of a reader that sleeps lazily: any record of the
 * thread's; a caller's EAGER message only when the ring needs room, noted
 * then as the head the wake was for (never 0 after a publish). */
#define IPCP_MBOX_DUE_ALWAYS UINT64_MAX

/* Publishes the record written at slot s, position at, n slots (tx_lock
 * held); the reader may take it from now on.  Returns the wake that is
 * due if the reader sleeps lazily (0: none), for ipcp__mbox_unlock_wake,
 * which the caller calls next.  eager: a caller's EAGER message. */
static uint64_t ipcp__mbox_publish(ipcp__peer_t *peer, ipcp__mbox_slot_t *s,
                                   uint64_t at, uint64_t n, int eager)
{
    ipcp__mbox_ring_t *ring = peer->outbox;
    /* Release, not seq_cst: see ipcp__mbox_unlock_wake. */
    __atomic_store_n(&s->seq, at + 1, __ATOMIC_RELEASE);
    peer->out_head = at + n;
    /* A run of one-slot records (nothing came from the peer since our
     * last one): the line of the record after next is taken for writing
     * now (PREFETCHW), while the caller goes on, so that its store does not
     * stall the unlock's locked instruction waiting for the reader's core
     * to give the line up.  Ranks bound on the 2-CPU VM, 8 B windows
     * 0.037-0.042 -> 0.079-0.094 GB/s (Open MPI ~0.07).  Not the next
     * record's line, which a reader that caught up polls, and not between
     * messages that answer each other, where the reader polls it by then
     * (8 B half round trip 0.38-0.41 -> 0.48-0.50 us either way).  Nor
     * when that slot may hold a record the reader has not read (a full
     * ring; out_tail, as of the last look, is never ahead of the reader):
     * taking the line from under it halved a sender running ahead with
     * the ring full (ranks bound on the H100 machine: 92-96 -> 192 ns a
     * message).  Else the next slot's line is fetched to be read. */
    uint64_t rx = __atomic_load_n(&peer->in_tail, __ATOMIC_RELAXED);
    if (n == 1 && rx == peer->out_rx_seen &&
        at + 2 < peer->out_tail + peer->mbox_slots)
        ipcp__prefetch_write(ipcp__mbox_slot(ring, peer->mbox_slots, at + 2));
    else
        __builtin_prefetch(ipcp__mbox_slot(ring, peer->mbox_slots, at + n), 1);
    peer->out_rx_seen = rx;
    if (!eager)
        return IPCP_MBOX_DUE_ALWAYS;
    /* The word read early only picks when the room is worth a look. */
    return __atomic_load_n(&ring->sleeping, __ATOMIC_RELAXED) ==
                       IPCP_MBOX_LAZY &&
                   ipcp__mbox_lazy_full(peer)
               ? peer->out_head
               : 0;
}

/* Wakes the reader when its thread sleeps on the inbox (WAKE), or sleeps
 * lazily and `due` says so.
 *
 * Against the reader's sleeping word (it raises the word, then looks at
 * the slots from its tail on; we publish, then look at the word) the
 * publish's store must come before our look: see ipcp__mbox_unlock_wake,
 * and a writer that keeps tx_lock fences (ipcp__mbox_send_pipe). */
static void ipcp__mbox_wake(ipcp__peer_t *peer, uint64_t due)
{
    ipcp__mbox_ring_t *ring = peer->outbox;
    uint32_t word = __atomic_load_n(&ring->sleeping, __ATOMIC_SEQ_CST);
    if (word != IPCP_MBOX_WAKE && (word != IPCP_MBOX_LAZY || !due))
        return;
    if (word == IPCP_MBOX_LAZY && due != IPCP_MBOX_DUE_ALWAYS)
        __atomic_store_n(&peer->out_lazy_woke, due, __ATOMIC_RELAXED);
    uint64_t one = 1;
    __atomic_fetch_add(&peer->n_wakes, 1, __ATOMIC_RELAXED);
    if (write(peer->out_wake, &one, sizeof(one)) < 0 && errno != EAGAIN)
        IPCP_WARN(IPCP_SUB_ENGINE, "waking rank %d: %s", peer->rank,
                  strerror(errno));
}

/* Lets tx_lock go after a publish, then wakes the reader (above).  The
 * unlock's exchange (seq_cst, common/mutex.h) orders the publish's store
 * before the look at the word on x86-64 (a locked instruction drains the
 * stores) and AArch64 (the store-release and the load-acquire are ordered
 * anyway), where a seq_cst store of seq cost one locked instruction more
 * a message: the 8 B window (2-CPU VM) went from 68 to 61 ns a message.
 * (C11 itself does not promise this of an exchange on another location:
 * every writer must come through here, or fence.) */
static void ipcp__mbox_unlock_wake(ipcp__peer_t *peer, uint64_t due)
{
    ipcp__unlock(&peer->tx_lock, IPCP_LOCK_TX);
    ipcp__mbox_wake(peer, due);
}

/* Room for n slots (tx_lock held): the first one's slot index, after a
 * skip record where they would wrap; NULL when full (the reader frees
 * slots soon).  The skip record goes first, alone, as soon as its own room
 * is free: reserved only together with the record, a skip and a record
 * over half a ring could never fit from some heads (a 256 KiB pipelined
 * one at slot 1024 of 2048). */
static ipcp__mbox_slot_t *ipcp__mbox_reserve(ipcp__peer_t *peer, uint64_t n,
                                             uint64_t *at)
{
    ipcp__mbox_ring_t *ring = peer->outbox;
    uint64_t slots = peer->mbox_slots, head = peer->out_head, pad = 0;
    if (ipcp__mbox_index(head, slots) + n > slots)
        pad = slots - ipcp__mbox_index(head, slots);
    if (head + pad + n - peer->out_tail > slots)
        peer->out_tail = __atomic_load_n(&ring->tail, __ATOMIC_ACQUIRE);
    if (pad && head + pad - peer->out_tail <= slots) {
        ipcp__mbox_slot_t *s = ipcp__mbox_slot(ring, slots, head);
        s->len = (uint32_t)pad;
        s->marker = IPCP_MBOX_SKIP;
        /* The reader may pass it before the message is written. */
        __atomic_store_n(&s->seq, head + 1, __ATOMIC_RELEASE);
        peer->out_head = head += pad;
        pad = 0;
    }
    if (pad || head + n - peer->out_tail > slots)
        return NULL;
    *at = head;
    return ipcp__mbox_slot(ring, slots, head);
}

ipcp_status_t ipcp__mbox_send(ipcp__peer_t *peer, const void *data, size_t len,
                              const int *fds, int nfds)
{
    ipcp_status_t st = IPCP_IN_PROGRESS;
    int inline_ok = !nfds && len <= ipcp__mbox_msg_max(peer);
    uint64_t at, n = inline_ok ? ipcp__mbox_span(len) : 1;
    ipcp__lock(&peer->tx_lock, IPCP_LOCK_TX);
    ipcp__mbox_slot_t *s = ipcp__mbox_reserve(peer, n, &at);
    if (s && !inline_ok) {
        /* The message first, then its marker: when the reader sees the
         * marker the message is in its socket already. */
        st = ipcp__sock_send(peer->fd, data, len, fds, nfds, 1);
        s->len = 0;
        s->marker = IPCP_MBOX_SOCKET;
    } else if (s) {
        memcpy(s->data, data, len);
        s->len = (uint32_t)len;
        s->marker = IPCP_MBOX_DATA;
        st = IPCP_OK;
    }
    if (st != IPCP_OK) {
        ipcp__unlock(&peer->tx_lock, IPCP_LOCK_TX);
        return st;
    }
    uint64_t due = ipcp__mbox_publish(peer, s, at, n, 0);
    peer->n_tx_thread++;
    ipcp__mbox_unlock_wake(peer, due);
    return st;
}

/* Bytes a pipelined record's writer copies between two raises of its fill
 * word: the reader copies a step behind it. */
#define IPCP_PIPE_STEP (16u << 10)
/* How long a caller waits for room for its record before the message
 * takes the progress thread's way (a pipelined one a rendezvous): the
 * reader frees a record's room once it copied it out, some tens of
 * microseconds. */
#define IPCP_ROOM_NS 1000000
/* How long a caller waits for room before it wakes the reader's thread
 * if that sleeps lazily (a receive not posted yet, or not waited for): a
 * reader that copies frees a record's room sooner. */
#define IPCP_ROOM_WAKE_NS 50000
/* How long a reader waits for a pipelined record's next bytes before it
 * also asks whether the writer's process is still there. */
#define IPCP_PIPE_HUP_NS 1000000

/* One look's pause of a caller that waits for the peer's process (room,
 * or a record's bytes): pause, and on one CPU yield now and then once
 * 64 looks passed (the threads of ours that share it may be the ones that
 * make room).  Returns the time since the wait began (*t0: when the 64th
 * look was; 0 before it). */
static uint64_t ipcp__pipe_pause(uint64_t *t0, unsigned i, int one)
{
    if (one && *t0 && !(i % 16))
        sched_yield();
    else
        ipcp__cpu_pause();
    if (i % 64)
        return 0;
    uint64_t now = ipcp__now_ns();
    if (!*t0)
        *t0 = now;
    return now - *t0;
}

/* Room for a caller's record of n slots: tx_lock held and the first
 * slot returned (*at: its position), or NULL with tx_lock let go when the
 * record must take the progress thread's way (IPCP_IN_PROGRESS): the
 * outbox is not on, our commands or the thread's messages wait before it
 * (their order is the peer's matching order), the peer is gone, or room
 * did not come in IPCP_ROOM_NS.  A full ring is waited for unlocked: the
 * peer's reader frees it as it copies (its thread too, for a receive not
 * posted yet, at most IPCPIPE_SPIN_US after the message came).  Left to
 * the thread at once, a full window of 64 KiB messages went ~half through
 * it (each then copied twice and queued behind the rest): unbound on the
 * H100 machine 4.5-4.8 GB/s against Open MPI's 8.4-8.7. */
static ipcp__mbox_slot_t *ipcp__mbox_room(ipcp__peer_t *peer, uint64_t n,
                                          uint64_t *at)
{
    ipcp__mbox_slot_t *s;
    uint64_t t0 = 0, waited = 0;
    /* outbox is set before out_on goes up (release). */
    if (!__atomic_load_n(&peer->out_on, __ATOMIC_ACQUIRE))
        return NULL;
    for (unsigned i = 1, woke = 0;; i++) {
        ipcp__lock(&peer->tx_lock, IPCP_LOCK_TX);
        int refused = atomic_load(&peer->pending) ||
                      atomic_load(&peer->backlog) || atomic_load(&peer->gone);
        if (!refused && (s = ipcp__mbox_reserve(peer, n, at)))
            return s;
        if (refused || waited >= IPCP_ROOM_NS) {
            peer->n_tx_refused++;
            ipcp__unlock(&peer->tx_lock, IPCP_LOCK_TX);
            return NULL;
        }
        /* A reader's thread that sleeps lazily is woken for room only
         * once the wait lasts (IPCP_ROOM_WAKE_NS). */
        uint64_t due =
            !woke && waited >= IPCP_ROOM_WAKE_NS ? peer->out_head : 0;
        ipcp__unlock(&peer->tx_lock, IPCP_LOCK_TX);
        if (due) {
            woke = 1;
            ipcp__mbox_wake(peer, due);
        }
        uint64_t w = ipcp__pipe_pause(&t0, i, ipcp__one_cpu());
        if (w)
            waited = w;
    }
}

ipcp_status_t ipcp__mbox_send_fast(ipcp__peer_t *peer, const void *hdr,
                                   size_t hlen, const void *data, size_t len)
{
    uint64_t at, n = ipcp__mbox_span(hlen + len);
    ipcp__mbox_slot_t *s = ipcp__mbox_room(peer, n, &at);
    if (!s)
        return IPCP_IN_PROGRESS;
    ipcp__copy_small(s->data, hdr, hlen);
    ipcp__copy_small(s->data + hlen, data, len);
    s->len = (uint32_t)(hlen + len);
    s->marker = IPCP_MBOX_DATA;
    uint64_t due = ipcp__mbox_publish(peer, s, at, n, 1);
    peer->n_tx_fast++;
    ipcp__mbox_unlock_wake(peer, due);
    return IPCP_OK;
}

ipcp_status_t ipcp__mbox_send_pipe(ipcp__peer_t *peer, int tag,
                                   const void *data, size_t len)
{
    ipcp__msg_pipe_t h;
    uint64_t at, n = ipcp__mbox_span(sizeof(h) + len);
    ipcp__mbox_slot_t *s;
    if (sizeof(h) + len > ipcp__mbox_rec_max(peer) ||
        !(s = ipcp__mbox_room(peer, n, &at)))
        return IPCP_IN_PROGRESS;
    /* The record is the reader's to copy once its first step is in: it
     * copies each step while we write the next. */
    unsigned char *rec = (unsigned char *)s + IPCP_MBOX_HDR;
    size_t off = ipcp__min(len, (size_t)IPCP_PIPE_STEP);
    memset(&h, 0, sizeof(h));
    h.e.hdr.type = IPCP_MSG_EAGER;
    h.e.hdr.flags = IPCP_EAGER_PIPE;
    h.e.tag = tag;
    h.e.len = (uint32_t)len;
    h.fill = off;
    memcpy(rec, &h, sizeof(h));
    memcpy(rec + sizeof(h), data, off);
    s->len = (uint32_t)(sizeof(h) + len);
    s->marker = IPCP_MBOX_DATA;
    /* Its due wake is not asked for (below): nor the look at the tail it
     * takes (ipcp__mbox_lazy_full), which the next message would skip. */
    ipcp__mbox_publish(peer, s, at, n, 0);
    /* Woken now, not at the end; the fence is the unlock's exchange's
     * (ipcp__mbox_unlock_wake).  Only a thread that sleeps on the inbox:
     * a lazy one leaves the record to the receive's caller, and the rule
     * that wakes it for room once the ring is half full would wake it for
     * every record over half a ring (a 256 KiB half round trip on ranks
     * bound to one CPU each took 40 us, 128 KiB 9.5). */
    atomic_thread_fence(memory_order_seq_cst);
    ipcp__mbox_wake(peer, 0);
    uint64_t *fill =
        (uint64_t *)(void *)(rec + offsetof(ipcp__msg_pipe_t, fill));
    while (off < len) {
        size_t k = ipcp__min(len - off, (size_t)IPCP_PIPE_STEP);
        memcpy(rec + sizeof(h) + off, (const char *)data + off, k);
        off += k;
        __atomic_store_n(fill, (uint64_t)off, __ATOMIC_RELEASE);
    }
    peer->n_tx_fast++;
    ipcp__unlock(&peer->tx_lock, IPCP_LOCK_TX);
    return IPCP_OK;
}

/* ---- Reading ------------------------------------------------------------- */

/* Whether the peer's process hung up its socket (it ended). */
static int ipcp__peer_hup(const ipcp__peer_t *peer)
{
    struct pollfd pfd = {peer->fd, 0, 0};
    return poll(&pfd, 1, 0) == 1 && (pfd.revents & (POLLHUP | POLLERR));
}

/* How long a reader gives one pipelined record, from its first look: a
 * quarter of the timeout, so that a peer stopped in the middle of one
 * (or one that writes a byte now and then) costs our thread, which
 * answers the keepalive, less than the peers' patience with us (they
 * give up after three quarters of it, engine/peer.c). */
#define IPCP_PIPE_SHARE 4

int ipcp__mbox_pipe_copy(ipcp_comm_t *comm, ipcp__peer_t *peer, void *dst,
                         const unsigned char *rec, size_t len)
{
    const uint64_t *fillp =
        (const uint64_t *)(const void *)(rec +
                                         offsetof(ipcp__msg_pipe_t, fill));
    const unsigned char *src = rec + sizeof(ipcp__msg_pipe_t);
    uint64_t t0 = 0, start = ipcp__now_ns();
    uint64_t limit = (uint64_t)(comm->timeout_s * 1e9 / IPCP_PIPE_SHARE);
    size_t done = 0;
    int one = ipcp__one_cpu(), stop = 0;
    for (unsigned i = 1; done < len && !atomic_load(&peer->pipe_dead); i++) {
        /* The writer's word: never past the record, whatever it says. */
        uint64_t fill = __atomic_load_n(fillp, __ATOMIC_ACQUIRE);
        if (fill > len)
            fill = len;
        if (fill > done) {
            if (dst)
                memcpy((char *)dst + done, src + done, fill - done);
            done = fill;
            t0 = 0;
            i = 0;
            stop = done < len && ipcp__now_ns() - start >= limit;
        } else if (ipcp__pipe_pause(&t0, i, one) >= IPCP_PIPE_HUP_NS) {
            /* The writer writes without a pause unless its process
             * stopped: one that ended hung up (what it wrote before is
             * there), a peer declared lost is not waited for, a live one
             * that stalls gets its share of the timeout. */
            stop = atomic_load(&peer->lost) ||
                   ipcp__now_ns() - start >= limit ||
                   (ipcp__peer_hup(peer) &&
                    __atomic_load_n(fillp, __ATOMIC_ACQUIRE) <= done);
        }
        if (stop) {
            IPCP_INFO(IPCP_SUB_ENGINE,
                      "rank %d stopped writing a message of %zu bytes at "
                      "byte %zu",
                      peer->rank, len, done);
            atomic_store(&peer->pipe_dead, 1);
        }
    }
    return done == len ? 0 : -1;
}

const unsigned char *ipcp__mbox_pipe_take(ipcp_comm_t *comm, ipcp__peer_t *peer,
                                          ipcp_request_t *r,
                                          const unsigned char *msg, size_t len,
                                          unsigned char **own, int *nomem)
{
    if (r && r->attr.type == IPCP_MEM_HOST && len <= r->len)
        return ipcp__mbox_pipe_copy(comm, peer, r->buf, msg, len) == 0 ? r->buf
                                                                       : NULL;
    /* Truncated ones are only waited for: their slots go back whole. */
    int keep = !r || len <= r->len;
    if (keep && len && !(*own = ipcp__buf_alloc(len))) {
        *nomem = 1;
        return NULL;
    }
    if (ipcp__mbox_pipe_copy(comm, peer, keep ? *own : NULL, msg, len) != 0)
        return NULL;
    return keep && len ? *own : msg;
}

/* Whether a caller waits for the inbox: one that reads it while it waits
 * for a receive, or one blocked on rx_lock (posting a receive). */
static int ipcp__mbox_callers_wait(ipcp__peer_t *peer)
{
    return atomic_load_explicit(&peer->waiters, memory_order_relaxed) ||
           atomic_load_explicit(&peer->rx_lock.m.word, memory_order_relaxed) ==
               2;
}

/* yield: the thread's read, which stops after an EAGER record when a
 * caller waits (ipcp__mbox_callers_wait).  Read to the ring's end, a
 * full ring of 8 B messages held rx_lock for ~2 ms: the waiting caller's
 * spin (IPCPIPE_SPIN_US) ran out, its receive became the thread's, and
 * from then on the thread read every message (1.0-1.9 us each against
 * ~0.2 where callers read them; a sender running ahead, 2-CPU VM). */
static int ipcp__mbox_read_locked(ipcp_comm_t *comm, ipcp__peer_t *peer,
                                  void (*dispatch)(ipcp_comm_t *,
                                                   ipcp__peer_t *,
                                                   const unsigned char *,
                                                   size_t, int *, int),
                                  void *buf, size_t cap, int yield)
{
    int n = 0, bad = 0;
    uint64_t tail = peer->in_tail;
    ipcp__mbox_slot_t *s;
    size_t len;
    uint32_t kind;
    while (!ipcp__peer_closed(peer) &&
           (s = ipcp__mbox_peek(peer, &tail, &len, &kind, &bad))) {
        int fds[IPCP_SOCK_MAX_FDS], nfds = 0;
        ipcp__msg_eager_t e;
        size_t off;
        if (kind == IPCP_MBOX_DATA &&
            ipcp__eager_parse(s->data, len, &e, &off)) {
            /* Read where it is, its slots given back after: one copy into
             * the receive (or the kept buffer), not two through the
             * turn's buffer (unbound windows of 16-128 KiB, which the
             * thread reads when the receives are posted first: ~4.5 GB/s,
             * where callers that read them reach 10-11), and for a
             * pipelined one ipcp__match_eager waits for its bytes. */
            peer->heard_ns = ipcp__now_ns();
            ipcp__match_eager(comm, peer, s->data, len, IPCP_MATCH_RING);
            if (ipcp__peer_closed(peer))
                return n + 1; /* its writer stopped */
            ipcp__mbox_take(peer, &tail, ipcp__mbox_span(len));
            n++;
            if (yield && ipcp__mbox_callers_wait(peer))
                break;
            continue;
        }
        if (len > cap) {
            bad = 1;
            break;
        }
        if (kind == IPCP_MBOX_DATA)
            memcpy(buf, s->data, len);
        /* The slots are ours no longer once tail moves: copied out
         * first. */
        ipcp__mbox_take(peer, &tail,
                        kind == IPCP_MBOX_DATA ? ipcp__mbox_span(len) : 1);
        if (kind == IPCP_MBOX_SOCKET) {
            ipcp_status_t st = ipcp__sock_recv(peer->fd, buf, cap, &len, fds,
                                               IPCP_SOCK_MAX_FDS, &nfds, 0);
            if (st != IPCP_OK) {
                ipcp__peer_lost(comm, peer,
                                st == IPCP_IN_PROGRESS
                                    ? "a mailbox marker without its message"
                                    : ipcp__last_error());
                return n + 1;
            }
        }
        dispatch(comm, peer, buf, len, fds, nfds);
        n++;
    }
    if (bad) {
        ipcp__peer_lost(comm, peer, "malformed mailbox slot");
        n++;
    }
    return n;
}

/* The thread's read under rx_lock (yield: see ipcp__mbox_read_locked). */
static int ipcp__mbox_read_turn(ipcp_comm_t *comm, ipcp__peer_t *peer,
                                void (*dispatch)(ipcp_comm_t *, ipcp__peer_t *,
                                                 const unsigned char *, size_t,
                                                 int *, int),
                                void *buf, size_t cap, int yield)
{
    if (!peer->in_on || !peer->inbox)
        return 0;
    ipcp__lock(&peer->rx_lock, IPCP_LOCK_RX);
    atomic_store(&peer->kick, 0); /* under the lock: see read_fast */
    int n = ipcp__mbox_read_locked(comm, peer, dispatch, buf, cap, yield);
    peer->n_rx_thread += (uint64_t)n;
    ipcp__unlock(&peer->rx_lock, IPCP_LOCK_RX);
    return n;
}

/* Reads what the peer put in our inbox, in order; returns how many
 * messages it handled.  dispatch handles one message (socket messages keep
 * their descriptors). */

int ipcp__mbox_read(ipcp_comm_t *comm, ipcp__peer_t *peer,
                    void (*dispatch)(ipcp_comm_t *, ipcp__peer_t *,
                                     const unsigned char *, size_t, int *, int),
                    void *buf, size_t cap)
{
    if (!peer->in_on || !peer->inbox)
        return 0;
    /* A caller reads it (ipcp__mbox_wait), and says when a message is for
     * us: two readers would take turns at the lock, and the thread's
     * completion is the slower way (on one H200 it took the messages
     * first: 1.7 us a half round trip instead of 0.9).  Asked before the
     * ring is looked at: a look pulls the line the writer writes next into
     * a third cache while the caller reads it. */
    if (atomic_load_explicit(&peer->waiters, memory_order_relaxed) &&
        !atomic_load(&peer->kick))
        return 0;
    if (!ipcp__mbox_ready(peer))
        return 0;
    if (!atomic_load(&peer->kick) && ipcp__mbox_fresh_eager(comm, peer) > 0)
        return 0;
    return ipcp__mbox_read_turn(comm, peer, dispatch, buf, cap, 1);
}

int ipcp__mbox_read_all(ipcp_comm_t *comm, ipcp__peer_t *peer,
                        void (*dispatch)(ipcp_comm_t *, ipcp__peer_t *,
                                         const unsigned char *, size_t, int *,
                                         int),
                        void *buf, size_t cap)
{
    return ipcp__mbox_read_turn(comm, peer, dispatch, buf, cap, 0);
}
