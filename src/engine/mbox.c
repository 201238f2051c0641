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
 * Only the progress threads touch the rings: one writer and one reader per
 * ring. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/shm.h"
#include "engine/engine.h"

#define IPCP_MBOX_SLOTS 64
#define IPCP_MBOX_SLOT 1024 /* bytes of a slot, its words included */

typedef struct ipcp__mbox_ring {
    _Alignas(IPCP_CACHE_LINE) uint64_t head; /* writer: messages written */
    _Alignas(IPCP_CACHE_LINE) uint64_t tail; /* reader: messages taken */
    _Alignas(IPCP_CACHE_LINE) uint32_t sleeping; /* reader may block */
} ipcp__mbox_ring_t;

typedef struct ipcp__mbox_slot {
    uint32_t len;    /* bytes of data */
    uint32_t marker; /* 1: the next message is on the socket */
    unsigned char data[IPCP_MBOX_SLOT - 8];
} ipcp__mbox_slot_t;

#define IPCP_MBOX_SIZE \
    (sizeof(ipcp__mbox_ring_t) + IPCP_MBOX_SLOTS * sizeof(ipcp__mbox_slot_t))

static ipcp__mbox_slot_t *ipcp__mbox_slot(void *ring, uint64_t i)
{
    return (ipcp__mbox_slot_t *)((char *)ring + sizeof(ipcp__mbox_ring_t)) +
           i % IPCP_MBOX_SLOTS;
}

/* ---- Setting up ----------------------------------------------------------- */

void ipcp__mbox_offer(ipcp_comm_t *comm)
{
    if (comm->cfg->mailbox != IPCP_MBOX_ON)
        return;
    for (int r = 0; r < comm->size; r++) {
        ipcp__peer_t *p = &comm->peers[r];
        if (r == comm->rank || p->closed)
            continue;
        /* Sealed: the peer gets the fd, and a peer that could shrink the
         * file would make our next look at the ring a SIGBUS. */
        int fds[2] = {ipcp__memfd_sealed("ipcpipe-mbox", IPCP_MBOX_SIZE), -1};
        void *m = MAP_FAILED;
        /* Both sides map the ring populated: otherwise the first message
         * in each page pays a page fault (7-13 us on the H200 machines,
         * where the bench's short runs never finish a lap of the ring and
         * a CTS took 7-9 us to post, median, against 1.5-1.9 once
         * populated). */
        if (fds[0] >= 0)
            m = mmap(NULL, IPCP_MBOX_SIZE, PROT_READ | PROT_WRITE,
                     MAP_SHARED | MAP_POPULATE, fds[0], 0);
        if (m != MAP_FAILED)
            fds[1] = dup(comm->wake_fd);
        if (m == MAP_FAILED || fds[1] < 0) {
            /* The socket still works: say why and go on without. */
            IPCP_WARN(IPCP_SUB_ENGINE, "no mailbox from rank %d: %s", r,
                      strerror(errno));
            if (m != MAP_FAILED)
                munmap(m, IPCP_MBOX_SIZE);
            if (fds[0] >= 0)
                close(fds[0]);
            continue;
        }
        p->inbox = m;
        ipcp__msg_mbox_t msg;
        memset(&msg, 0, sizeof(msg));
        msg.hdr.type = IPCP_MSG_MBOX;
        msg.size = IPCP_MBOX_SIZE;
        msg.slots = IPCP_MBOX_SLOTS;
        msg.slot = IPCP_MBOX_SLOT;
        /* The message owns both descriptors now. */
        ipcp__peer_post(comm, p, &msg, sizeof(msg), fds, 2);
    }
}

/* Writes SWITCH on the socket and turns the outbox on, once nothing of
 * ours waits for the socket (what waits there must arrive first). */
void ipcp__mbox_try_switch(ipcp_comm_t *comm, ipcp__peer_t *peer)
{
    if (!peer->outbox || peer->out_on || peer->closed || peer->wr_broken ||
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
    peer->out_on = 1;
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
        if (m.size != IPCP_MBOX_SIZE || m.slots != IPCP_MBOX_SLOTS ||
            m.slot != IPCP_MBOX_SLOT || peer->outbox)
            bad = "mailbox offer of another layout, or a second one";
        else if (ipcp__memfd_check(fds[0], IPCP_MBOX_SIZE, IPCP_LOG_DEBUG,
                                   IPCP_SUB_ENGINE, "a mailbox") != IPCP_OK ||
                 ipcp__eventfd_check(fds[1], IPCP_LOG_DEBUG, IPCP_SUB_ENGINE,
                                     "a mailbox") != IPCP_OK)
            bad = ipcp__last_error();
    }
    if (!bad) {
        ring = mmap(NULL, IPCP_MBOX_SIZE, PROT_READ | PROT_WRITE,
                    MAP_SHARED | MAP_POPULATE, fds[0], 0);
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
    if (peer->inbox)
        munmap(peer->inbox, IPCP_MBOX_SIZE);
    if (peer->outbox)
        munmap(peer->outbox, IPCP_MBOX_SIZE);
    if (peer->out_wake >= 0)
        close(peer->out_wake);
    peer->inbox = peer->outbox = NULL;
    peer->out_wake = -1;
    peer->in_on = peer->out_on = 0;
}

/* ---- Writing -------------------------------------------------------------- */

ipcp_status_t ipcp__mbox_send(ipcp__peer_t *peer, const void *data,
                              size_t len, const int *fds, int nfds)
{
    ipcp__mbox_ring_t *ring = peer->outbox;
    uint64_t head = ring->head;
    if (head - __atomic_load_n(&ring->tail, __ATOMIC_ACQUIRE) >=
        IPCP_MBOX_SLOTS)
        return IPCP_IN_PROGRESS; /* full: the reader frees slots soon */
    ipcp__mbox_slot_t *s = ipcp__mbox_slot(ring, head);
    if (nfds || len > sizeof(s->data)) {
        /* The message first, then its marker: when the reader sees the
         * marker the message is in its socket already. */
        ipcp_status_t st = ipcp__sock_send(peer->fd, data, len, fds, nfds, 1);
        if (st != IPCP_OK)
            return st;
        s->len = 0;
        s->marker = 1;
    } else {
        memcpy(s->data, data, len);
        s->len = (uint32_t)len;
        s->marker = 0;
    }
    /* Against the reader's sleeping word: it raises the word, then looks
     * at head; we publish head, then look at the word.  All four in one
     * total order (seq_cst): one of us sees the other. */
    __atomic_store_n(&ring->head, head + 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&ring->sleeping, __ATOMIC_SEQ_CST)) {
        uint64_t one = 1;
        if (write(peer->out_wake, &one, sizeof(one)) < 0 && errno != EAGAIN)
            IPCP_WARN(IPCP_SUB_ENGINE, "waking rank %d: %s", peer->rank,
                      strerror(errno));
    }
    return IPCP_OK;
}

/* ---- Reading -------------------------------------------------------------- */

/* Reads what the peer put in our inbox, in order; returns how many
 * messages it handled.  dispatch handles one message (socket messages keep
 * their descriptors). */
int ipcp__mbox_read(ipcp_comm_t *comm, ipcp__peer_t *peer,
                    void (*dispatch)(ipcp_comm_t *, ipcp__peer_t *,
                                     const unsigned char *, size_t, int *,
                                     int),
                    void *buf, size_t cap)
{
    ipcp__mbox_ring_t *ring = peer->inbox;
    int n = 0;
    if (!peer->in_on || !ring)
        return 0;
    uint64_t tail = ring->tail;
    uint64_t head = __atomic_load_n(&ring->head, __ATOMIC_ACQUIRE);
    while (tail != head && !peer->closed) {
        ipcp__mbox_slot_t *s = ipcp__mbox_slot(ring, tail);
        size_t len = s->len;
        int marker = s->marker != 0;
        int fds[IPCP_SOCK_MAX_FDS], nfds = 0;
        if (len > sizeof(s->data) || len > cap) {
            ipcp__peer_lost(comm, peer, "malformed mailbox slot");
            return n + 1;
        }
        if (!marker)
            memcpy(buf, s->data, len);
        /* The slot is ours no longer once tail moves: copied out first. */
        __atomic_store_n(&ring->tail, ++tail, __ATOMIC_RELEASE);
        if (marker) {
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
    return n;
}

/* Before the progress thread blocks: raises the sleeping word of every
 * inbox in use; returns 1 if a message came meanwhile (do not block). */
int ipcp__mbox_sleep(ipcp_comm_t *comm)
{
    int pending = 0;
    for (int r = 0; r < comm->size; r++) {
        ipcp__peer_t *p = &comm->peers[r];
        ipcp__mbox_ring_t *ring = p->inbox;
        if (!p->in_on || !ring || p->closed)
            continue;
        __atomic_store_n(&ring->sleeping, 1, __ATOMIC_SEQ_CST);
        if (__atomic_load_n(&ring->head, __ATOMIC_SEQ_CST) != ring->tail)
            pending = 1;
    }
    return pending;
}

void ipcp__mbox_awake(ipcp_comm_t *comm)
{
    for (int r = 0; r < comm->size; r++) {
        ipcp__mbox_ring_t *ring = comm->peers[r].inbox;
        if (comm->peers[r].in_on && ring)
            __atomic_store_n(&ring->sleeping, 0, __ATOMIC_RELAXED);
    }
}
