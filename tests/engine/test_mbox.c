/* The mailbox ring (engine/mbox.c) in one process: a fake peer whose
 * outbox is its own inbox, written with the callers' send and read with
 * the progress thread's read, with every message checked.
 *
 *   laps   messages of one, two and three slots with random bytes, over
 *          several laps of the ring (skip records at its end), the ring
 *          filled to refusal and drained each time
 *   stale  a message's bytes where a later record's position would be,
 *          planted to read as the record the reader expects after the
 *          next lap: the reader must clear them, or it takes them for a
 *          message nobody sent
 *   pipe   a writer thread sends pipelined records (over 64 KiB, their
 *          bytes written in steps after the record is published) while
 *          the reader copies them out as they fill, into kept messages:
 *          every byte checked, under ThreadSanitizer too */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "common/config.h"
#include "common/bufcache.h"
#include "engine/engine.h"
#include "testutil.h"

#define MAXLEN 1024

static ipcp__config_t cfg;
static ipcp_comm_t comm;
static ipcp__peer_t peers[2];
static void *ring;
static size_t ring_bytes;

/* What was sent and not yet read, in order. */
static struct {
    unsigned char data[MAXLEN];
    size_t len;
} sent[4096];
static unsigned nsent, nread;

static void fake_peer(void)
{
    memset(&cfg, 0, sizeof(cfg));
    memset(&comm, 0, sizeof(comm));
    memset(peers, 0, sizeof(peers));
    comm.cfg = &cfg; /* spin_us 0: the reader takes messages at once */
    comm.size = 2;
    comm.peers = peers;
    ipcp__peer_t *p = &peers[1];
    p->rank = 1;
    p->mbox_slots = ipcp__mbox_slots(2);
    ring_bytes = ipcp__mbox_bytes(p->mbox_slots);
    ring = mmap(NULL, ring_bytes, PROT_READ | PROT_WRITE,
                MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    T_CHECK(ring != MAP_FAILED);
    p->inbox = p->outbox = ring;
    p->in_on = p->out_on = 1;
    p->out_wake = -1;
    p->fd = -1;
    ipcp__list_init(&p->posted);
    ipcp__list_init(&p->unexp);
    ipcp__rmutex_init(&p->rx_lock);
    ipcp__mutex_init(&p->tx_lock);
}

static void fake_peer_end(void)
{
    munmap(ring, ring_bytes);
}

static void on_msg(ipcp_comm_t *c, ipcp__peer_t *p, const unsigned char *msg,
                   size_t len, int *fds, int nfds)
{
    (void)c;
    (void)p;
    (void)fds;
    T_EQ_INT(nfds, 0);
    if (nread == nsent)
        T_FAIL("message %u of %zu bytes read, but only %u were sent", nread,
               len, nsent);
    unsigned i = nread++ % 4096;
    if (len != sent[i].len || memcmp(msg, sent[i].data, len) != 0)
        T_FAIL("message %u: %zu bytes read, %zu sent, or other bytes",
               nread - 1, len, sent[i].len);
}

/* Sends len bytes (the first 8 of them as the header); 0 when full. */
static int send_msg(const unsigned char *data, size_t len)
{
    if (ipcp__mbox_send_fast(&peers[1], data, 8, data + 8, len - 8) != IPCP_OK)
        return 0;
    unsigned i = nsent++ % 4096;
    memcpy(sent[i].data, data, len);
    sent[i].len = len;
    return 1;
}

static void drain(void)
{
    static unsigned char buf[IPCP_RX_MAX];
    while (ipcp__mbox_read(&comm, &peers[1], on_msg, buf, sizeof(buf)) > 0)
        ;
    T_EQ_INT(nread, nsent);
}

static void case_laps(void)
{
    unsigned char m[MAXLEN];
    uint64_t slots = 0;
    fake_peer();
    srand(7);
    /* Lengths whose records take one, two and three slots. */
    static const size_t lens[] = {8, 100, 240, 241, 400, 496, 497, 700};
    for (int round = 0; slots < 5 * (uint64_t)peers[1].mbox_slots; round++) {
        int refused = 0;
        while (!refused) {
            size_t len = lens[rand() % 8];
            for (size_t k = 0; k < len; k++)
                m[k] = (unsigned char)rand();
            refused = !send_msg(m, len);
            if (!refused)
                slots += (16 + len + 255) / 256;
        }
        T_CHECK(nsent > nread); /* refused only with something in it */
        drain();
    }
    fake_peer_end();
}

static void case_stale(void)
{
    unsigned char m[MAXLEN];
    uint64_t n = ipcp__mbox_slots(2);
    fake_peer();
    /* One lap of two-slot records (16 + 400 bytes): record i is at
     * position 2i, its second slot at 2i + 1, whose first 16 bytes are
     * bytes 240..255 of the message.  Planted there: position
     * 2i + 1 + n, plus one, then a length of 8 and the kind of a message,
     * the record the reader expects at 2i + 1 + n after one more lap. */
    for (uint64_t i = 0; i < n / 2; i++) {
        memset(m, (int)(i & 0xff), 400);
        uint64_t seq = 2 * i + 1 + n + 1;
        uint32_t len = 8, kind = 0;
        memcpy(m + 240, &seq, 8);
        memcpy(m + 248, &len, 4);
        memcpy(m + 252, &kind, 4);
        T_CHECK(send_msg(m, 400));
        if (i % 64 == 63)
            drain();
    }
    drain();
    /* Position n: one one-slot message moves the records of the next lap
     * to odd positions, where the planted words lie. */
    memset(m, 0xab, 8);
    T_CHECK(send_msg(m, 8));
    drain();
    T_EQ_INT(nread, n / 2 + 1);
    /* And the ring still works from there on. */
    for (int i = 0; i < 100; i++) {
        memset(m, i, 300);
        T_CHECK(send_msg(m, 300));
    }
    drain();
    fake_peer_end();
}

/* Pipelined messages: lengths from just over a plain record to the
 * largest, byte k of message i a function of both. */
#define PIPE_MSGS 200
static size_t pipe_len(int i)
{
    static const size_t lens[] = {(64 << 10) + 1, 96 << 10, (128 << 10) + 5,
                                  200 << 10, 256 << 10};
    return lens[i % 5];
}

static unsigned char pipe_byte(int i, size_t k)
{
    return (unsigned char)(k * 131u + (size_t)i * 7u + (k >> 12));
}

/* Message i (of len bytes) into the ring; its status. */
static ipcp_status_t pipe_send(int i, size_t len)
{
    static unsigned char m[256 << 10];
    for (size_t k = 0; k < len; k++)
        m[k] = pipe_byte(i, k);
    return ipcp__mbox_send_pipe(&peers[1], 9, m, len);
}

static void *pipe_writer(void *arg)
{
    (void)arg;
    /* Full for a millisecond: the reader is behind; again. */
    for (int i = 0; i < PIPE_MSGS; i++)
        while (pipe_send(i, pipe_len(i)) != IPCP_OK)
            ;
    return NULL;
}

/* Reads what came; checks the messages kept, message *got on, against
 * len (0: pipe_len). */
static void pipe_drain(int *got, size_t len)
{
    static unsigned char buf[IPCP_RX_MAX];
    ipcp__mbox_read(&comm, &peers[1], on_msg, buf, sizeof(buf));
    ipcp__list_t *e;
    while ((e = ipcp__list_pop_front(&peers[1].unexp))) {
        ipcp__unexp_t *u = ipcp__list_entry(e, ipcp__unexp_t, link);
        T_CHECK(u->rts.hdr.flags & IPCP_RTS_EAGER);
        T_EQ_INT(u->rts.tag, 9);
        T_EQ_U64(u->rts.len, len ? len : pipe_len(*got));
        for (size_t k = 0; k < u->rts.len; k++)
            if (u->eager[k] != pipe_byte(*got, k))
                T_FAIL("message %d, byte %zu: %u, sent %u", *got, k,
                       u->eager[k], pipe_byte(*got, k));
        ipcp__buf_free(u->eager);
        free(u);
        (*got)++;
    }
}

static void case_pipe(void)
{
    pthread_t th;
    int got = 0, tries = 0;
    fake_peer();
    comm.timeout_s = 60;
    T_CHECK(pipe_len(0) > IPCP_MBOX_PLAIN_MAX);
    T_CHECK(sizeof(ipcp__msg_pipe_t) + pipe_len(4) <=
            ipcp__mbox_rec_max(&peers[1]));
    /* A record of 1024 slots, then one of 1025 from slot 1024 of 2048:
     * it must wait for the skip to the ring's end to be read (the first
     * try), and then fit from the start. */
    T_EQ_INT(pipe_send(0, 262104), IPCP_OK);
    pipe_drain(&got, 262104);
    while (pipe_send(1, 256 << 10) != IPCP_OK) {
        if (++tries == 3)
            T_FAIL("a 256 KiB record after one of 1024 slots never fit");
        pipe_drain(&got, 0);
    }
    pipe_drain(&got, 256 << 10);
    T_EQ_INT(got, 2);
    got = 0;
    T_EQ_INT(pthread_create(&th, NULL, pipe_writer, NULL), 0);
    while (got < PIPE_MSGS)
        pipe_drain(&got, 0);
    T_EQ_INT(pthread_join(th, NULL), 0);
    T_EQ_INT(nread, 0); /* nothing went the plain way */
    fake_peer_end();
}

typedef struct mbox_case {
    const char *name;
    void (*fn)(void);
} mbox_case_t;

int main(int argc, char **argv)
{
    static const mbox_case_t cases[] = {
        {"laps", case_laps},
        {"stale", case_stale},
        {"pipe", case_pipe},
    };
    int rc, i = t_pick_case(argc, argv, cases, sizeof(cases) / sizeof(cases[0]),
                            sizeof(cases[0]), &rc);
    if (i < 0)
        return rc;
    cases[i].fn();
    return 0;
}
