/* A peer that breaks the protocol on purpose must not crash a rank, make a
 * call return a status outside ipcp_status_t, or steer its writes outside
 * the memory it was given.
 *
 *   test_api_hostile --case mbox_empty|mbox_file|mbox_shrink|cts_status
 *   test_api_hostile --case cts_route|cts_fds
 *   test_api_hostile --case mbox_forged_kind|mbox_forged_len|mbox_forged_skip
 *   test_api_hostile --case mbox_last_words|mbox_pipe_hup|mbox_pipe_stall
 *   test_api_hostile --case mbox_pipe_socket
 *   test_api_hostile --case bar_forged|bar_long (3 ranks: rank 1 fake,
 *                    rank 2 late)
 *   test_api_hostile --case desc_addr|dereg_inflight [--path auto|staged]
 *   test_api_hostile --case fsize|nan_timeout|misspelt|trace_full|log_file
 *   test_api_hostile --case huge_job
 *
 * In the mbox_* and cts_* cases rank 1 is a fake peer: it joins the
 * job through the real bootstrap and then speaks the engine's raw protocol
 * on its socket (engine/proto.h), while rank 0 is an ordinary rank.  In the
 * others both ranks are ordinary and rank 0 misuses what rank 1 gave it.
 * The last four run one process under a hostile environment (limits,
 * settings, a trace file that cannot be written): test_hostile_env.c. */
#include "apitest.h"
#include "test_hostile_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "engine/paths.h"
#include "engine/route.h"
#include "common/config.h"
#include "common/time.h"
#include "engine/proto.h"

enum { TAG_DATA = 5, TAG_DESC = 6, TAG_GO = 7, TAG_DONE = 8 };

static char none; /* where empty control messages "land" */

static uint64_t probe_word = IPCP_BOOT_MAGIC;

/* ---- The fake peer ------------------------------------------------------- */

/* Joins the job as this rank through the real rendezvous and announces
 * the path it leaves to its peers (auto), as every engine does first (an
 * honest rank's ipcp_init waits for it); returns the socket to rank 0. */
static int fake_join(ipcp__boot_t **boot)
{
    ipcp__msg_path_t pm;
    const ipcp__config_t *cfg;
    ipcp__boot_params_t bp;
    ipcp__boot_origin_t o;
    T_OK(ipcp__config_get(&cfg));
    T_OK(ipcp__boot_resolve(cfg, -1, -1, NULL, cfg->timeout_s, &bp, &o));
    snprintf(bp.dir, sizeof(bp.dir), "%s", cfg->dir);
    bp.probe_addr = (uint64_t)(uintptr_t)&probe_word;
    bp.proto = ipcp__proto();
    T_OK(ipcp__boot_connect(&bp, boot));
    t_rank = bp.rank;
    memset(&pm, 0, sizeof(pm));
    pm.hdr.type = IPCP_MSG_PATH;
    pm.path = IPCP_PATH_AUTO;
    for (int r = 0; r < (*boot)->size; r++)
        if (r != t_rank)
            T_OK(ipcp__sock_send((*boot)->peers[r].fd, &pm, sizeof(pm), NULL, 0,
                                 0));
    return (*boot)->peers[0].fd;
}

/* Reads rank 0's messages until one of type `want` (its length returned,
 * the message in buf; the fds of the others are closed); 0 when rank 0
 * closed the connection first. */
static size_t fake_read_until(int fd, uint32_t want, void *buf, size_t cap,
                              int *fds, int *nfds)
{
    for (;;) {
        size_t len = 0;
        int n = 0;
        ipcp_status_t st = ipcp__sock_recv(fd, buf, cap, &len, fds,
                                           IPCP_SOCK_MAX_FDS, &n, 20.0);
        if (st == IPCP_ERR_PEER_LOST)
            return 0;
        T_OK(st);
        const ipcp__msg_hdr_t *h = buf;
        if (len >= sizeof(*h) && h->type == want) {
            *nfds = n;
            return len;
        }
        for (int i = 0; i < n; i++)
            close(fds[i]);
    }
}

/* Answers rank 0's next RTS with a CTS of the given status, route and
 * message, as a receiver would (nothing else in it). */
static void fake_answer_rts(int fd, int32_t status, uint32_t route,
                            const char *errmsg)
{
    static unsigned char buf[IPCP_SOCK_MSG_MAX];
    int fds[IPCP_SOCK_MAX_FDS], nfds = 0;
    T_CHECK(fake_read_until(fd, IPCP_MSG_RTS, buf, sizeof(buf), fds, &nfds) >
            0);
    const ipcp__msg_rts_t *rts = (const void *)buf;
    ipcp__msg_cts_t cts;
    memset(&cts, 0, sizeof(cts));
    cts.hdr.type = IPCP_MSG_CTS;
    cts.id = rts->id;
    cts.len = rts->len;
    cts.status = status;
    cts.path = status == IPCP_OK ? IPCP_PATH_DIRECT : 0;
    cts.route = route;
    snprintf(cts.errmsg, sizeof(cts.errmsg), "%s", errmsg);
    T_OK(ipcp__sock_send(fd, &cts, sizeof(cts), NULL, 0, 0));
}

/* The number of the route whose sender copies ("sent"). */
static uint32_t sent_route(void)
{
    const ipcp__route_t *r;
    for (uint32_t id = 0; (r = ipcp__route_by_id(id)); id++)
        if (strcmp(r->name, "sent") == 0)
            return id;
    T_FAIL("no route named \"sent\"");
}

/* Answers rank 0's next RTS with a CTS of the sent route that brings the
 * most descriptors a message may carry, as a channel's and a target's,
 * none of them what it claims (empty memfds). */
static void fake_answer_rts_fds(int fd)
{
    static unsigned char buf[IPCP_SOCK_MSG_MAX];
    int fds[IPCP_SOCK_MAX_FDS], nfds = 0;
    T_CHECK(fake_read_until(fd, IPCP_MSG_RTS, buf, sizeof(buf), fds, &nfds) >
            0);
    for (int i = 0; i < nfds; i++)
        close(fds[i]);
    const ipcp__msg_rts_t *rts = (const void *)buf;
    ipcp__msg_cts_t cts;
    memset(&cts, 0, sizeof(cts));
    cts.hdr.type = IPCP_MSG_CTS;
    cts.hdr.flags = IPCP_CTS_CHAN_FD | IPCP_CTS_HAS_EXP | IPCP_CTS_MAP_FD;
    cts.id = rts->id;
    cts.len = rts->len;
    cts.status = IPCP_OK;
    cts.path = IPCP_PATH_DIRECT;
    cts.npieces = 1;
    cts.dst_mode = 1;
    cts.route = sent_route();
    cts.chan_exp.kind = IPCP_EXPORT_HOST_MEMFD;
    cts.chan_exp.size = 1 << 20;
    cts.exp = cts.chan_exp;
    for (int i = 0; i < IPCP_SOCK_MAX_FDS; i++)
        T_CHECK((fds[i] = memfd_create("fake", MFD_CLOEXEC)) >= 0);
    T_OK(ipcp__sock_send(fd, &cts, sizeof(cts), fds, IPCP_SOCK_MAX_FDS, 0));
    for (int i = 0; i < IPCP_SOCK_MAX_FDS; i++)
        close(fds[i]);
}

/* Until rank 0 says goodbye (answered) or closes the connection. */
static void fake_bye(int fd)
{
    static uint64_t buf[IPCP_SOCK_MSG_MAX / 8];
    int fds[IPCP_SOCK_MAX_FDS], n;
    if (fake_read_until(fd, IPCP_MSG_BYE, buf, sizeof(buf), fds, &n) > 0) {
        ipcp__msg_hdr_t bye = {IPCP_MSG_BYE, 0};
        ipcp__sock_send(fd, &bye, sizeof(bye), NULL, 0, 0);
        for (int i = 0; i < n; i++)
            close(fds[i]);
    }
}

/* Offers rank 0 a mailbox that is not one: an empty memfd without seals,
 * or an empty regular file.  Mapping either and writing a message into it
 * is SIGBUS. */
static void fake_offer_mailbox(int fd, int file)
{
    ipcp__msg_mbox_t m;
    int fds[2];
    if (file) {
        fds[0] = open("/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
        if (fds[0] < 0)
            T_FAIL("O_TMPFILE in /tmp: %s", strerror(errno));
    } else {
        fds[0] = memfd_create("fake-mbox", MFD_CLOEXEC);
    }
    fds[1] = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    T_CHECK(fds[0] >= 0 && fds[1] >= 0);
    memset(&m, 0, sizeof(m));
    m.hdr.type = IPCP_MSG_MBOX;
    /* The layout rank 0 expects in a job of two: 2048 slots of 256 bytes
     * after two lines (engine/mbox.c), so that what is refused is the
     * file itself. */
    m.size = 2 * IPCP_CACHE_LINE + 2048 * 256;
    m.slots = 2048;
    m.slot = 256;
    T_OK(ipcp__sock_send(fd, &m, sizeof(m), fds, 2, 0));
    close(fds[0]);
    close(fds[1]);
}

/* Rank 0's inbox for us, mapped (*size bytes of *slots slots), from its
 * offer; fds[0] and fds[1] are its memfd and eventfd. */
static unsigned char *fake_inbox_take(int fd, size_t *size, uint32_t *slots,
                                      int fds[IPCP_SOCK_MAX_FDS])
{
    static uint64_t buf[IPCP_SOCK_MSG_MAX / 8];
    int nfds;
    T_CHECK(fake_read_until(fd, IPCP_MSG_MBOX, buf, sizeof(buf), fds, &nfds) >
            0);
    T_EQ_INT(nfds, 2);
    const ipcp__msg_mbox_t *m = (const void *)buf;
    *size = m->size;
    *slots = m->slots;
    unsigned char *ring =
        mmap(NULL, *size, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
    T_CHECK(ring != MAP_FAILED);
    return ring;
}

/* Publishes the record written into slot 0 of the inbox (its position + 1
 * goes last), turns rank 0 to its inbox, and lets the inbox go. */
static void fake_inbox_publish(int fd, unsigned char *ring, size_t size,
                               const int fds[IPCP_SOCK_MAX_FDS])
{
    __atomic_store_n((uint64_t *)(void *)(ring + 2 * IPCP_CACHE_LINE), 1,
                     __ATOMIC_SEQ_CST);
    ipcp__msg_hdr_t sw = {IPCP_MSG_SWITCH, 0};
    T_OK(ipcp__sock_send(fd, &sw, sizeof(sw), NULL, 0, 0));
    munmap(ring, size);
    close(fds[0]);
    close(fds[1]);
}

/* Takes rank 0's inbox for us, writes a record into it that no writer of
 * the engine would (what: kind, a record of no kind the engine writes;
 * len, a message longer than any; skip, a skip record past the ring's
 * end), publishes it at the first position, and then turns rank 0 to its
 * inbox. */
static void fake_forge_inbox(int fd, const char *what)
{
    int fds[IPCP_SOCK_MAX_FDS];
    size_t size;
    uint32_t slots;
    unsigned char *ring = fake_inbox_take(fd, &size, &slots, fds);
    /* After the tail's and the sleeping word's lines, slot 0: its record's
     * position + 1, then the record's length and kind. */
    uint32_t *rec = (uint32_t *)(void *)(ring + 2 * IPCP_CACHE_LINE + 8);
    if (strcmp(what, "kind") == 0) {
        rec[0] = 8;
        rec[1] = 7; /* no kind of record */
    } else if (strcmp(what, "len") == 0) {
        rec[0] = 0xFFFFFF00u; /* bytes */
        rec[1] = 0;           /* a message in the ring */
    } else if (strcmp(what, "skip") == 0) {
        rec[0] = slots + 5; /* slots to skip */
        rec[1] = 2;         /* a skip record */
    } else {
        T_FAIL("unknown forgery \"%s\"", what);
    }
    fake_inbox_publish(fd, ring, size, fds);
}

/* Takes rank 0's inbox for us, writes a record of len bytes at its
 * first position (head, hlen bytes, then nbody bytes: a fresh seed and
 * its bytes with seeded, else 0x3C), turns rank 0 to its inbox and lets
 * the inbox go. */
static void fake_record(int fd, const void *head, size_t hlen, size_t len,
                        size_t nbody, int seeded)
{
    int fds[IPCP_SOCK_MAX_FDS];
    size_t size;
    uint32_t slots;
    unsigned char *ring = fake_inbox_take(fd, &size, &slots, fds);
    unsigned char *slot0 = ring + 2 * IPCP_CACHE_LINE;
    uint32_t *rec = (uint32_t *)(void *)(slot0 + 8);
    unsigned char *body = slot0 + 16 + hlen;
    rec[0] = (uint32_t)len;
    rec[1] = 0; /* a message in the ring */
    memcpy(slot0 + 16, head, hlen);
    if (seeded) {
        uint64_t seed = t_fresh_seed();
        memcpy(body, &seed, sizeof(seed));
        t_fill(body + 8, nbody - 8, seed);
    } else {
        memset(body, 0x3C, nbody);
    }
    fake_inbox_publish(fd, ring, size, fds);
}

/* One EAGER message of LAST_LEN bytes for TAG_DATA (its first 8 bytes the
 * seed of the rest); then we hang up at once: what we wrote before we
 * went must still reach a receive rank 0 posts later. */
enum { LAST_LEN = 64 };
static void fake_last_words(int fd)
{
    ipcp__msg_eager_t e = {{IPCP_MSG_EAGER, 0}, TAG_DATA, LAST_LEN};
    fake_record(fd, &e, sizeof(e), sizeof(e) + LAST_LEN, LAST_LEN, 1);
}

/* A pipelined EAGER message of PIPE_LEN bytes for TAG_DATA that stops at
 * PIPE_FILL bytes (its fill word says so); then we hang up (pipe_hup) or
 * stay without a word (pipe_stall). */
enum { PIPE_LEN = 200 << 10, PIPE_FILL = 16 << 10 };
static void fake_pipe_stopped(int fd)
{
    ipcp__msg_pipe_t h;
    memset(&h, 0, sizeof(h));
    h.e.hdr.type = IPCP_MSG_EAGER;
    h.e.hdr.flags = IPCP_EAGER_PIPE;
    h.e.tag = TAG_DATA;
    h.e.len = PIPE_LEN;
    h.fill = PIPE_FILL;
    fake_record(fd, &h, sizeof(h), sizeof(h) + PIPE_LEN, PIPE_FILL, 0);
}

/* A pipelined message on the socket, where its fill word could never
 * move: malformed, at once. */
static void fake_pipe_socket(int fd)
{
    struct {
        ipcp__msg_pipe_t h;
        unsigned char b[100];
    } m;
    memset(&m, 0x3C, sizeof(m));
    memset(&m.h, 0, sizeof(m.h));
    m.h.e.hdr.type = IPCP_MSG_EAGER;
    m.h.e.hdr.flags = IPCP_EAGER_PIPE;
    m.h.e.tag = TAG_DATA;
    m.h.e.len = sizeof(m.b);
    m.h.fill = 10;
    T_OK(ipcp__sock_send(fd, &m, sizeof(m), NULL, 0, 0));
}

static int fake_main(const char *name)
{
    static uint64_t buf[IPCP_SOCK_MSG_MAX / 8];
    ipcp__boot_t *boot;
    int fds[IPCP_SOCK_MAX_FDS], nfds;
    int fd = fake_join(&boot);

    if (strcmp(name, "mbox_empty") == 0 || strcmp(name, "mbox_file") == 0) {
        fake_offer_mailbox(fd, strcmp(name, "mbox_file") == 0);
    } else if (strcmp(name, "mbox_shrink") == 0) {
        /* Rank 0's inbox for us comes with its memfd: it must be sealed. */
        T_CHECK(fake_read_until(fd, IPCP_MSG_MBOX, buf, sizeof(buf), fds,
                                &nfds) > 0);
        T_EQ_INT(nfds, 2);
        if (ftruncate(fds[0], 0) == 0)
            T_FAIL("rank 0's inbox could be shrunk");
        T_EQ_INT(errno, EPERM);
        close(fds[0]);
        close(fds[1]);
        /* Rank 0 reads (and sleeps on) that inbox from now on; then we
         * leave without a word. */
        ipcp__msg_hdr_t sw = {IPCP_MSG_SWITCH, 0};
        T_OK(ipcp__sock_send(fd, &sw, sizeof(sw), NULL, 0, 0));
        usleep(300000);
        ipcp__boot_destroy(boot);
        return 0;
    } else if (strcmp(name, "mbox_last_words") == 0) {
        fake_last_words(fd);
        ipcp__boot_destroy(boot); /* hangs up */
        return 0;
    } else if (strncmp(name, "mbox_forged_", 12) == 0) {
        fake_forge_inbox(fd, name + 12);
    } else if (strcmp(name, "mbox_pipe_hup") == 0) {
        fake_pipe_stopped(fd);
        usleep(200000);           /* rank 0's receive waits on the record */
        ipcp__boot_destroy(boot); /* hangs up */
        return 0;
    } else if (strcmp(name, "mbox_pipe_socket") == 0) {
        fake_pipe_socket(fd);
    } else if (strcmp(name, "mbox_pipe_stall") == 0) {
        /* Rank 0 gives up on the record after its timeout (1 s), and on
         * us: we hear that it closed the connection. */
        fake_pipe_stopped(fd);
    } else if (strcmp(name, "cts_status") == 0) {
        /* Each of rank 0's sends meets a CTS with a status that is not
         * one of ipcp_status_t's errors. */
        static const int32_t bad[] = {-12345, IPCP_IN_PROGRESS, INT32_MIN};
        for (int i = 0; i < 3; i++) {
            char why[64];
            snprintf(why, sizeof(why), "forged status %d", (int)bad[i]);
            fake_answer_rts(fd, bad[i], 0, why);
        }
    } else if (strcmp(name, "cts_route") == 0) {
        /* Rank 0's send meets a CTS that names a route it has not got. */
        fake_answer_rts(fd, IPCP_OK, 1000, "");
    } else if (strcmp(name, "cts_fds") == 0) {
        fake_answer_rts_fds(fd);
    } else if (strncmp(name, "bar_", 4) == 0) {
        /* What rank 0 takes for our message in round 1 of its first
         * barrier (3 ranks: it hears from rank 2, then from us): one of
         * the next barrier (forged), or one longer than any barrier's
         * (long).  Neither may let rank 0 leave. */
        struct {
            ipcp__msg_eager_t e;
            ipcp__bar_msg_t b;
            uint64_t more;
        } m = {{{IPCP_MSG_EAGER, 0}, IPCP_BAR_TAG, sizeof(ipcp__bar_msg_t)},
               {0, 1, IPCP_BAR_MAGIC},
               0};
        if (strcmp(name, "bar_long") == 0)
            m.e.len += sizeof(m.more);
        else
            m.b.epoch = 1;
        T_OK(ipcp__sock_send(fd, &m, sizeof(m.e) + m.e.len, NULL, 0, 0));
    } else {
        T_FAIL("unknown --case \"%s\"", name);
    }
    fake_bye(fd);
    ipcp__boot_destroy(boot);
    return 0;
}

/* ---- The honest rank facing it ------------------------------------------- */

/* Sends small messages to the fake peer until one fails; it must fail as
 * a lost peer whose message names the mailbox, without a crash. */
static void victim_mbox(ipcp_comm_t *comm)
{
    unsigned char msg[64] = {1};
    ipcp_status_t st = IPCP_OK;
    double t0 = ipcp__now_s();
    while (st == IPCP_OK && ipcp__now_s() - t0 < 5.0) {
        st = ipcp_send(comm, msg, sizeof(msg), 1, TAG_DATA);
        usleep(20000);
    }
    T_EQ_INT(st, IPCP_ERR_PEER_LOST);
    T_MSG_HAS("mailbox");
}

static void victim_cts(ipcp_comm_t *comm)
{
    size_t len = 96 << 10; /* above IPCPIPE_EAGER: an RTS, then a CTS */
    unsigned char *b = t_malloc(len);
    for (int i = 0; i < 3; i++) {
        T_STATUS(ipcp_send(comm, b, len, 1, TAG_DATA), IPCP_ERR_STATE);
        T_MSG_HAS("forged status");
    }
    free(b);
}

/* Descriptors open in this process. */
static int open_fds(void)
{
    int n = 0;
    DIR *d = opendir("/proc/self/fd");
    T_CHECK(d != NULL);
    while (readdir(d))
        n++;
    closedir(d);
    return n;
}

/* A CTS with 72 descriptors that are not what it claims: the send fails,
 * the peer is cut off, and every one of them is closed. */
static void victim_cts_fds(ipcp_comm_t *comm, int fds_before)
{
    unsigned char b[96 << 10]; /* above IPCPIPE_EAGER: an RTS */
    memset(b, 0, sizeof(b));
    ipcp_status_t st = ipcp_send(comm, b, sizeof(b), 1, TAG_DATA);
    if (st == IPCP_OK)
        T_FAIL("a send into a forged channel succeeded");
    T_CHECK(st == IPCP_ERR_PEER_LOST || st == IPCP_ERR_BAD_DESCRIPTOR ||
            st == IPCP_ERR_STATE || st == IPCP_ERR_SYSTEM);
    printf("send: %s: %s\n", ipcp_strerror(st), ipcp_last_error());
    ipcp_status_t fst = ipcp_finalize(comm);
    T_CHECK(fst == IPCP_OK || fst == IPCP_ERR_TIMEOUT);
    int after = open_fds();
    if (after > fds_before)
        T_FAIL("%d descriptors open after finalize, %d before init", after,
               fds_before);
}

/* The fake's pipelined message: one on the socket is malformed at once;
 * one whose writer stops fails the receive (the writer hung up, or wrote
 * nothing more for a quarter of the timeout) instead of waiting for ever,
 * and so does the next. */
static void victim_pipe(ipcp_comm_t *comm, const char *name)
{
    unsigned char *b = t_malloc(PIPE_LEN);
    double t0 = ipcp__now_s();
    if (strcmp(name, "mbox_pipe_socket") == 0) {
        T_STATUS(ipcp_recv(comm, b, 100, 1, TAG_DATA, NULL),
                 IPCP_ERR_PEER_LOST);
        T_MSG_HAS("malformed eager message");
        T_CHECK(ipcp__now_s() - t0 < 5.0);
        free(b);
        return;
    }
    T_STATUS(ipcp_recv(comm, b, PIPE_LEN, 1, TAG_DATA, NULL),
             IPCP_ERR_PEER_LOST);
    T_MSG_HAS("stopped writing a message");
    printf("receive failed after %.3f s\n", ipcp__now_s() - t0);
    T_CHECK(ipcp__now_s() - t0 < 20.0);
    T_STATUS(ipcp_recv(comm, b, PIPE_LEN, 1, TAG_DATA, NULL),
             IPCP_ERR_PEER_LOST);
    free(b);
}

static int victim_main(const char *name)
{
    ipcp_comm_t *comm = NULL;
    int fds_before = open_fds();
    T_OK(ipcp_init(NULL, &comm));
    if (strcmp(name, "cts_fds") == 0) {
        victim_cts_fds(comm, fds_before);
        return 0;
    }
    t_rank = ipcp_comm_rank(comm);
    if (strncmp(name, "bar_", 4) == 0 && t_rank == 2) {
        /* An honest rank, late to the barrier: rank 0's message from the
         * fake waits for it.  Its own from the fake never comes. */
        usleep(500000);
        T_STATUS(ipcp_barrier(comm), IPCP_ERR_PEER_LOST);
        T_MSG_HAS("rank 1");
    } else if (strncmp(name, "bar_", 4) == 0) {
        T_STATUS(ipcp_barrier(comm), IPCP_ERR_PEER_LOST);
        T_MSG_HAS("barrier message out of order");
        T_MSG_HAS(strcmp(name, "bar_long") == 0 ? "more than 16 bytes"
                                                : "barrier 1 round 1");
        /* The peer is ended, and later barriers fail as well. */
        T_STATUS(ipcp_barrier(comm), IPCP_ERR_STATE);
        T_MSG_HAS("failed midway");
    } else if (strcmp(name, "mbox_last_words") == 0) {
        /* Posted once the fake has hung up (and the progress thread has
         * seen it): the message it wrote before is delivered whole, and
         * only the next receive finds it gone. */
        unsigned char b[LAST_LEN];
        uint64_t seed;
        usleep(300000);
        T_OK(ipcp_recv(comm, b, sizeof(b), 1, TAG_DATA, NULL));
        memcpy(&seed, b, sizeof(seed));
        t_verify(b + 8, sizeof(b) - 8, seed, "the fake's last message");
        T_STATUS(ipcp_recv(comm, b, sizeof(b), 1, TAG_DATA, NULL),
                 IPCP_ERR_PEER_LOST);
        T_MSG_HAS("rank 1");
    } else if (strncmp(name, "mbox_forged_", 12) == 0) {
        /* The forged record ends the peer, whether the receive's caller
         * or the progress thread meets it first; nothing is delivered. */
        unsigned char b[8] = {0};
        T_STATUS(ipcp_recv(comm, b, sizeof(b), 1, TAG_DATA, NULL),
                 IPCP_ERR_PEER_LOST);
        T_MSG_HAS("malformed mailbox slot");
        for (size_t i = 0; i < sizeof(b); i++)
            T_CHECK(b[i] == 0);
    } else if (strncmp(name, "mbox_pipe_", 10) == 0) {
        victim_pipe(comm, name);
    } else if (strncmp(name, "mbox_", 5) == 0 &&
               strcmp(name, "mbox_shrink") != 0) {
        victim_mbox(comm);
    } else if (strcmp(name, "mbox_shrink") == 0) {
        /* Idle a while, so that the progress thread sleeps and wakes on
         * its inbox, then find the peer gone. */
        unsigned char b[8];
        T_STATUS(ipcp_recv(comm, b, sizeof(b), 1, TAG_DATA, NULL),
                 IPCP_ERR_PEER_LOST);
    } else if (strcmp(name, "cts_route") == 0) {
        unsigned char b[96 << 10]; /* above IPCPIPE_EAGER: an RTS */
        memset(b, 0, sizeof(b));
        T_STATUS(ipcp_send(comm, b, sizeof(b), 1, TAG_DATA), IPCP_ERR_STATE);
        T_MSG_HAS("CTS names no route");
    } else {
        victim_cts(comm);
    }
    ipcp_status_t st = ipcp_finalize(comm);
    T_CHECK(st == IPCP_OK || st == IPCP_ERR_TIMEOUT);
    return 0;
}

/* ---- Two honest ranks ---------------------------------------------------- */

typedef struct desc_msg {
    uint64_t len;
    unsigned char desc[IPCP_DESC_MAX];
} desc_msg_t;

/* Rank 1 registers len bytes (with guard bytes after them) and sends the
 * descriptor; returns the buffer. */
static unsigned char *owner_register(ipcp_comm_t *comm, size_t len,
                                     ipcp_mem_t **mem, uint64_t seed)
{
    desc_msg_t d;
    unsigned char *b = t_malloc(len + API_GUARD);
    t_fill(b, len + API_GUARD, seed);
    T_OK(ipcp_mem_register(comm, b, len, mem));
    T_OK(ipcp_mem_pack(*mem, d.desc, sizeof(d.desc), &d.len));
    api_ctl_send(comm, 0, TAG_DESC, &d, sizeof(d));
    return b;
}

/* The descriptor's address field (after magic, version, size, job hash,
 * owner, pid, region id and length) and its checksum, the FNV-1a of what
 * precedes it: anyone can recompute it. */
#define DESC_ADDR_OFF 48
#define DESC_SUM_OFF  88

static void forge_addr(unsigned char *desc, size_t len, uint64_t delta)
{
    uint64_t addr, sum;
    T_EQ_U64(len, DESC_SUM_OFF + 8);
    memcpy(&addr, desc + DESC_ADDR_OFF, 8);
    addr += delta;
    memcpy(desc + DESC_ADDR_OFF, &addr, 8);
    sum = ipcp__fnv1a(desc, DESC_SUM_OFF, IPCP_FNV_SEED);
    memcpy(desc + DESC_SUM_OFF, &sum, 8);
}

/* A descriptor whose address was moved past the region (checksum redone)
 * is refused by the owner's word; the true one works, and a put through
 * it stays inside the region. */
static int mp_desc_addr(ipcp_comm_t *comm, int rank)
{
    const size_t len = 64 << 10;
    uint64_t seed = t_shared_seed(comm, TAG_GO);
    if (rank == 1) {
        ipcp_mem_t *mem;
        unsigned char *b = owner_register(comm, len, &mem, seed);
        api_ctl_recv(comm, 0, TAG_DONE, &none, 0);
        t_verify(b, len, seed + 1, "the region after the put");
        api_verify_at(b + len, API_GUARD, seed, len,
                      "the bytes after the region");
        T_OK(ipcp_mem_deregister(mem));
        free(b);
        return 0;
    }
    desc_msg_t d, forged;
    ipcp_rmem_t *rm = NULL;
    api_ctl_recv(comm, 1, TAG_DESC, &d, sizeof(d));
    for (int i = 0; i < 2; i++) {
        forged = d;
        forge_addr(forged.desc, forged.len, i ? (uint64_t)len : 4096);
        T_STATUS(ipcp_rmem_import(comm, forged.desc, forged.len, &rm),
                 IPCP_ERR_BAD_DESCRIPTOR);
        T_MSG_HAS("does not match region");
        T_CHECK(rm == NULL);
    }
    T_OK(ipcp_rmem_import(comm, d.desc, d.len, &rm));
    unsigned char *src = t_malloc(len);
    t_fill(src, len, seed + 1);
    T_OK(ipcp_put(comm, src, len, rm, 0));
    T_OK(ipcp_rmem_release(rm));
    api_ctl_send(comm, 1, TAG_DONE, NULL, 0);
    free(src);
    return 0;
}

/* Rank 0 starts a large put into rank 1's region and says so; rank 1
 * deregisters at once.  Once ipcp_mem_deregister has returned, no write
 * of the put may land in the region any more (the memory may be freed and
 * reused then): rank 1 keeps a copy of the region as it was at that
 * moment, and once rank 0's put has ended (either way) the region must
 * still be that copy; a put that succeeded must be in it. */
static int mp_dereg_inflight(ipcp_comm_t *comm, int rank, int own_writes)
{
    const size_t len = 128u << 20;
    uint64_t seed = t_shared_seed(comm, TAG_GO);
    int ok = 0;
    if (rank == 1) {
        ipcp_mem_t *mem;
        unsigned char *b = owner_register(comm, len, &mem, seed);
        unsigned char *copy = t_malloc(len);
        api_ctl_recv(comm, 0, TAG_GO, &none, 0);
        T_OK(ipcp_mem_deregister(mem));
        memcpy(copy, b, len);
        api_ctl_send(comm, 0, TAG_DONE, NULL, 0);
        api_ctl_recv(comm, 0, TAG_DONE, &ok, sizeof(ok));
        if (memcmp(copy, b, len) != 0)
            T_FAIL("the region changed after its deregistration returned");
        if (ok)
            t_verify(b, len, seed + 1, "the region after the put");
        api_verify_at(b + len, API_GUARD, seed, len,
                      "the bytes after the region");
        free(copy);
        free(b);
        return 0;
    }
    desc_msg_t d;
    ipcp_rmem_t *rm = NULL;
    ipcp_request_t *req = NULL;
    api_ctl_recv(comm, 1, TAG_DESC, &d, sizeof(d));
    T_OK(ipcp_rmem_import(comm, d.desc, d.len, &rm));
    unsigned char *src = t_malloc(len);
    t_fill(src, len, seed + 1);
    T_OK(ipcp_iput(comm, src, len, rm, 0, &req));
    api_ctl_send(comm, 1, TAG_GO, NULL, 0);
    api_ctl_recv(comm, 1, TAG_DONE, &none, 0);
    /* Where this rank writes the region itself (process_vm_writev), its
     * put has ended by then: the owner waited for our word, which we give
     * once the request is complete.  Through the owner (staged), the
     * owner's copy ended, and our request ends a moment later. */
    int done = 0;
    ipcp_status_t st = ipcp_test(req, &done, NULL);
    if (own_writes && !done)
        T_FAIL("the put still ran after rank 1's deregistration returned");
    if (!done)
        st = ipcp_wait(req, NULL);
    if (st != IPCP_OK && st != IPCP_ERR_NOT_REGISTERED)
        T_FAIL("the put ended with %s: %s", ipcp_strerror(st),
               ipcp_last_error());
    ok = st == IPCP_OK;
    fprintf(stderr, "put %s\n", ok ? "completed" : "refused");
    api_ctl_send(comm, 1, TAG_DONE, &ok, sizeof(ok));
    T_OK(ipcp_rmem_release(rm));
    free(src);
    return 0;
}

static int rank_main(int argc, char **argv)
{
    const char *name = api_opt(argc, argv, "--case", "");
    int two =
        strcmp(name, "desc_addr") == 0 || strcmp(name, "dereg_inflight") == 0;
    if (!two) {
        const char *r = getenv("IPCPIPE_RANK");
        return r && strcmp(r, "1") == 0 ? fake_main(name) : victim_main(name);
    }
    ipcp_path_t path = api_parse_path(api_opt(argc, argv, "--path", "auto"));
    ipcp_comm_t *comm = api_init(path, "set");
    int rank = ipcp_comm_rank(comm);
    int own = path != IPCP_PATH_STAGED && api_pvm_permitted();
    int rc = strcmp(name, "desc_addr") == 0
                 ? mp_desc_addr(comm, rank)
                 : mp_dereg_inflight(comm, rank, own);
    api_finalize(comm);
    return rc;
}

int main(int argc, char **argv)
{
    const char *name = api_opt(argc, argv, "--case", "");
    int rc = hostile_solo(name);
    if (rc >= 0)
        return rc;
    return t_mp_main(argc, argv, strncmp(name, "bar_", 4) == 0 ? 3 : 2, 60,
                     rank_main);
}
