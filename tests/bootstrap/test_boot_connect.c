/* ipcp__boot_connect and ipcp__boot_barrier.  Multi-process cases re-run
 * this binary as their ranks (t_mp_main); the others (in
 * test_boot_connect_solo.c) play every part in one process, with raw
 * sockets where a misbehaving peer is needed. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "testutil.h"
#include "bootstrap/bootstrap.h"
#include "common/config.h"
#include "common/time.h"
#include "test_boot_connect_int.h"

/* The word whose address each rank announces in its hello. */
static uint64_t probe_word = IPCP_BOOT_MAGIC;

/* The hello's wire layout in bootstrap.c; case hello_answer_refused checks
 * it against what the library really sends. */
typedef struct t_hello {
    uint64_t magic;
    uint32_t version;
    uint32_t size;
    uint32_t rank;
    int32_t pid;
    uint64_t probe_addr;
    uint64_t node_hash;
    char node[IPCP_BOOT_NODE_MAX];
    char job[IPCP_JOB_MAX];
} t_hello_t;

/* ------------------------------------------------------------------------ */
/* Helpers                                                                   */

void t_fmt(char *buf, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, len, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= len)
        T_FAIL("string too long for its %zu-byte buffer: %s", len, buf);
}

static int rm_entry(const char *path, const struct stat *st, int flag,
                    struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

void rm_tree(const char *path)
{
    nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* The top of the last base directory made, for removal. */
static char t_top[512];

void make_base(char *buf, size_t len, const char *extra)
{
    t_fmt(buf, len, "/tmp/ipcpt-boot-XXXXXX");
    if (mkdtemp(buf) == NULL)
        T_FAIL("mkdtemp: %s", strerror(errno));
    t_fmt(t_top, sizeof(t_top), "%s", buf);
    if (extra != NULL) {
        size_t n = strlen(buf);
        t_fmt(buf + n, len - n, "/%s", extra);
        if (mkdir(buf, 0700) != 0)
            T_FAIL("mkdir %s: %s", buf, strerror(errno));
    }
}

void user_dir(char *buf, size_t len, const char *base)
{
    t_fmt(buf, len, "%s/ipcpipe-%u", base, (unsigned)getuid());
}

void job_dir(char *buf, size_t len, const char *base, const char *job)
{
    t_fmt(buf, len, "%s/ipcpipe-%u/%s", base, (unsigned)getuid(), job);
}

void mkdir_mode(const char *path, mode_t mode)
{
    if (mkdir(path, mode) != 0 && errno != EEXIST)
        T_FAIL("mkdir %s: %s", path, strerror(errno));
    if (chmod(path, mode) != 0)
        T_FAIL("chmod %s: %s", path, strerror(errno));
}

int exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

void solo_params(ipcp__boot_params_t *p, int rank, int size, const char *base,
                 double timeout_s)
{
    memset(p, 0, sizeof(*p));
    p->rank = rank;
    p->size = size;
    t_fmt(p->job, sizeof(p->job), "solo-%ld", (long)getpid());
    t_fmt(p->dir, sizeof(p->dir), "%s", base);
    p->timeout_s = timeout_s;
    p->probe_addr = (uint64_t)(uintptr_t)&probe_word;
    p->proto = T_BOOT_PROTO;
}

/* A rank's parameters from the launcher's variables; the base directory and
 * job come from T_BOOT_BASE / T_BOOT_JOB when the case's parent set them. */
static void rank_params(ipcp__boot_params_t *p)
{
    const ipcp__config_t *cfg;
    ipcp__boot_origin_t o;
    T_OK(ipcp__config_get(&cfg));
    T_OK(ipcp__boot_resolve(cfg, -1, -1, getenv("T_BOOT_JOB"), 20.0, p, &o));
    T_EQ_STR(o.rank_from, "IPCPIPE_RANK");
    const char *base = getenv("T_BOOT_BASE");
    if (base != NULL)
        t_fmt(p->dir, sizeof(p->dir), "%s", base);
    p->probe_addr = (uint64_t)(uintptr_t)&probe_word;
    p->proto = T_BOOT_PROTO;
}

int raw_listen(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    t_fmt(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
        listen(fd, 8) != 0)
        T_FAIL("listen on %s: %s", path, strerror(errno));
    return fd;
}

/* Connects a raw socket to path, waiting up to 10 s for it to appear. */
static int raw_connect(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    t_fmt(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    double t0 = ipcp__now_s();
    for (;;) {
        int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        if (fd < 0)
            T_FAIL("socket: %s", strerror(errno));
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
            return fd;
        close(fd);
        if (ipcp__now_s() - t0 > 10)
            T_FAIL("connect to %s: %s", path, strerror(errno));
        usleep(2000);
    }
}

/* The peer must close the connection (refusing us) within 5 s. */
static void expect_closed(int fd, const char *what)
{
    char buf[256];
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, 5000) != 1)
        T_FAIL("%s: the peer neither answered nor closed within 5 s", what);
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n > 0)
        T_FAIL("%s: the peer answered (%zd bytes) instead of refusing", what,
               n);
    close(fd);
}

static void check_peer_fd(int fd)
{
    T_CHECK(fd >= 0);
    T_CHECK(fcntl(fd, F_GETFD) & FD_CLOEXEC);
    T_CHECK(!(fcntl(fd, F_GETFL) & O_NONBLOCK));
}

/* ------------------------------------------------------------------------ */
/* Multi-process cases (rank side)                                           */

typedef struct t_ident {
    int32_t rank;
    int32_t pid;
    uint64_t probe_addr;
} t_ident_t;

/* Connects all ranks, checks every peer's socket, pid and probe address
 * against what the peer says over the socket, and runs two barriers. */
static int rank_connect(void)
{
    ipcp__boot_params_t p;
    ipcp__boot_t *boot = NULL;
    t_ident_t me, them;
    size_t len;
    rank_params(&p);
    T_OK(ipcp__boot_connect(&p, &boot));
    T_EQ_INT(boot->rank, p.rank);
    T_EQ_INT(boot->size, p.size);
    T_EQ_STR(boot->job, p.job);
    T_EQ_INT(boot->peers[p.rank].fd, -1);
    me.rank = p.rank;
    me.pid = getpid();
    me.probe_addr = p.probe_addr;
    for (int r = 0; r < p.size; r++) {
        if (r == p.rank)
            continue;
        check_peer_fd(boot->peers[r].fd);
        T_OK(ipcp__sock_send(boot->peers[r].fd, &me, sizeof(me), NULL, 0, 0));
    }
    for (int r = 0; r < p.size; r++) {
        if (r == p.rank)
            continue;
        T_OK(ipcp__sock_recv(boot->peers[r].fd, &them, sizeof(them), &len, NULL,
                             0, NULL, 10.0));
        T_EQ_INT(len, sizeof(them));
        T_EQ_INT(them.rank, r);
        T_EQ_INT(boot->peers[r].pid, them.pid);
        T_EQ_U64(boot->peers[r].probe_addr, them.probe_addr);
    }
    T_OK(ipcp__boot_barrier(boot));
    T_OK(ipcp__boot_barrier(boot));
    /* Past a barrier every rank has left ipcp__boot_connect, and the last
     * one out removed the job directory. */
    if (exists(boot->path))
        T_FAIL("%s still exists after every rank connected", boot->path);
    ipcp__boot_destroy(boot);
    return 0;
}

/* Ranks that come late: the others retry until their sockets appear. */
static int rank_late(void)
{
    const char *r = getenv("IPCPIPE_RANK");
    if (r != NULL && strcmp(r, "0") == 0)
        usleep(300000);
    if (r != NULL && strcmp(r, "2") == 0)
        usleep(600000);
    return rank_connect();
}

/* Rank 0 sends a memfd it has written; rank 1 maps it, checks the data and
 * writes the second half, which rank 0 then reads through its mapping. */
static int rank_fd_pass(void)
{
    enum { LEN = 1 << 20 };
    struct {
        uint64_t seed;
        uint64_t len;
    } hdr;
    ipcp__boot_params_t p;
    ipcp__boot_t *boot;
    int fd = -1, nfds = 0;
    size_t len;
    char ack;
    rank_params(&p);
    T_OK(ipcp__boot_connect(&p, &boot));
    if (p.rank == 0) {
        fd = memfd_create("t_boot_fd_pass", MFD_CLOEXEC);
        T_CHECK(fd >= 0 && ftruncate(fd, LEN) == 0);
        char *m = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        T_CHECK(m != MAP_FAILED);
        hdr.seed = t_fresh_seed();
        hdr.len = LEN;
        t_fill(m, LEN / 2, hdr.seed);
        T_OK(ipcp__sock_send(boot->peers[1].fd, &hdr, sizeof(hdr), &fd, 1, 0));
        close(fd);
        T_OK(ipcp__sock_recv(boot->peers[1].fd, &ack, 1, &len, NULL, 0, NULL,
                             10.0));
        t_verify(m + LEN / 2, LEN / 2, hdr.seed + 1, "half written by rank 1");
        munmap(m, LEN);
    } else {
        T_OK(ipcp__sock_recv(boot->peers[0].fd, &hdr, sizeof(hdr), &len, &fd, 1,
                             &nfds, 10.0));
        T_EQ_INT(len, sizeof(hdr));
        T_EQ_INT(nfds, 1);
        T_CHECK(fcntl(fd, F_GETFD) & FD_CLOEXEC);
        struct stat st;
        T_CHECK(fstat(fd, &st) == 0);
        T_EQ_INT(st.st_size, hdr.len);
        char *m =
            mmap(NULL, hdr.len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        T_CHECK(m != MAP_FAILED);
        close(fd);
        t_verify(m, hdr.len / 2, hdr.seed, "half written by rank 0");
        t_fill(m + hdr.len / 2, hdr.len / 2, hdr.seed + 1);
        ack = 1;
        T_OK(ipcp__sock_send(boot->peers[0].fd, &ack, 1, NULL, 0, 0));
        munmap(m, hdr.len);
    }
    T_OK(ipcp__boot_barrier(boot));
    ipcp__boot_destroy(boot);
    return 0;
}

/* Rank 1 first tries bad hellos on rank 0's socket, each of which rank 0
 * must refuse (close), then connects for real. */
static int rank_hello_refused(void)
{
    ipcp__boot_params_t p;
    ipcp__boot_t *boot;
    rank_params(&p);
    if (p.rank == 1) {
        char path[IPCP_DIR_MAX + 64 + 16];
        t_fmt(path, sizeof(path), "%s/ipcpipe-%u/%s/r0.sock", p.dir,
              (unsigned)getuid(), p.job);
        const t_hello_t good = {
            IPCP_BOOT_MAGIC, T_BOOT_PROTO, 2, 1, getpid(), 8, 0, {0}, {0}};
        for (int v = 0; v < 10; v++) {
            t_hello_t h = good;
            char raw[sizeof(h) + 8] = {0};
            size_t len = sizeof(h);
            t_fmt(h.job, sizeof(h.job), "%s", p.job);
            switch (v) {
            case 0:
                len = 4;
                break; /* too short */
            case 1:
                h.magic ^= 1;
                break; /* not ours */
            case 2:
                h.version = 99;
                break; /* other version */
            case 3:
                t_fmt(h.job, sizeof(h.job), "other");
                break;
            case 4:
                h.size = 3;
                break; /* other size */
            case 5:
                h.rank = 5;
                break; /* out of range */
            case 6:
                h.rank = 0;
                break; /* not above 0 */
            case 7:
                h.pid = 1;
                break; /* lies about pid */
            case 8:
                len = sizeof(raw);
                break; /* too long */
            case 9:
                memset(h.job, 'a', sizeof(h.job));
                break; /* no NUL */
            }
            memcpy(raw, &h, sizeof(h));
            int fd = raw_connect(path);
            if (send(fd, raw, len, MSG_NOSIGNAL) != (ssize_t)len)
                T_FAIL("send bad hello %d: %s", v, strerror(errno));
            char what[32];
            t_fmt(what, sizeof(what), "bad hello %d", v);
            expect_closed(fd, what);
        }
    }
    T_OK(ipcp__boot_connect(&p, &boot));
    T_OK(ipcp__boot_barrier(boot));
    ipcp__boot_destroy(boot);
    return 0;
}

/* Rank 0 first serves its socket itself: it checks rank 1's hello against
 * t_hello_t (so that the layout the other cases use is the real one), then
 * answers with bad hellos, each of which rank 1 must refuse, before it
 * connects for real. */
static void fake_rank0(const ipcp__boot_params_t *p)
{
    char dir[IPCP_DIR_MAX + 64], path[IPCP_DIR_MAX + 80];
    job_dir(dir, sizeof(dir), p->dir, p->job);
    t_fmt(path, sizeof(path), "%s/r0.sock", dir);
    int lfd = raw_listen(path);
    for (int v = 0; v < 5; v++) {
        struct pollfd pf = {.fd = lfd, .events = POLLIN};
        if (poll(&pf, 1, 10000) != 1)
            T_FAIL("rank 1 did not connect (attempt %d)", v);
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        t_hello_t h;
        struct ucred cr;
        socklen_t cl = sizeof(cr);
        T_CHECK(fd >= 0);
        T_CHECK(getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) == 0);
        T_EQ_INT(recv(fd, &h, sizeof(h), 0), sizeof(h));
        T_EQ_U64(h.magic, IPCP_BOOT_MAGIC);
        T_EQ_INT(h.version, T_BOOT_PROTO);
        T_EQ_INT(h.size, 2);
        T_EQ_INT(h.rank, 1);
        T_EQ_INT(h.pid, cr.pid);
        T_CHECK(h.probe_addr != 0);
        T_EQ_STR(h.job, p->job);
        T_EQ_STR(h.node, p->node);
        T_EQ_U64(h.node_hash, p->node_hash);
        /* Answer as rank 0 but wrong in one field. */
        h.rank = 0;
        h.pid = getpid();
        switch (v) {
        case 0:
            t_fmt(h.job, sizeof(h.job), "other");
            break;
        case 1:
            h.rank = 1;
            break;
        case 2:
            h.magic = 0;
            break;
        case 3:
            h.pid = getppid();
            break;
        case 4:
            memset(h.node, 'x', sizeof(h.node));
            break;
        }
        T_EQ_INT(send(fd, &h, sizeof(h), MSG_NOSIGNAL), sizeof(h));
        char what[32];
        t_fmt(what, sizeof(what), "bad answer %d", v);
        expect_closed(fd, what);
    }
    close(lfd);
    unlink(path);
}

static int rank_answer_refused(void)
{
    ipcp__boot_params_t p;
    ipcp__boot_t *boot;
    rank_params(&p);
    if (p.rank == 0)
        fake_rank0(&p);
    T_OK(ipcp__boot_connect(&p, &boot));
    T_OK(ipcp__boot_barrier(boot));
    ipcp__boot_destroy(boot);
    return 0;
}

/* Rank 1 leaves after the barrier without a word; rank 0, already waiting
 * in a receive, must see IPCP_ERR_PEER_LOST, and sends must fail the same
 * way without SIGPIPE. */
static int rank_peer_death(void)
{
    ipcp__boot_params_t p;
    ipcp__boot_t *boot;
    char buf[16] = {0};
    size_t len;
    rank_params(&p);
    T_OK(ipcp__boot_connect(&p, &boot));
    T_OK(ipcp__boot_barrier(boot));
    if (p.rank == 1) {
        usleep(200000);
        _exit(0);
    }
    signal(SIGPIPE, SIG_DFL);
    double t0 = ipcp__now_s();
    T_STATUS(ipcp__sock_recv(boot->peers[1].fd, buf, sizeof(buf), &len, NULL, 0,
                             NULL, 10.0),
             IPCP_ERR_PEER_LOST);
    T_CHECK(ipcp__now_s() - t0 < 5.0);
    T_STATUS(ipcp__sock_send(boot->peers[1].fd, buf, 8, NULL, 0, 0),
             IPCP_ERR_PEER_LOST);
    T_STATUS(ipcp__boot_barrier(boot), IPCP_ERR_PEER_LOST);
    T_MSG_HAS("rank 1");
    ipcp__boot_destroy(boot);
    return 0;
}

/* IPCPIPE_NODE: even ranks on node a, odd ones on node b.  Every rank
 * fails, well before the timeout (20 s), naming the lowest rank on the
 * other node, and leaves no file behind (after_clean). */
static int rank_nodes_differ(void)
{
    ipcp__boot_params_t p;
    ipcp__boot_t *boot = NULL;
    const char *rank = getenv("IPCPIPE_RANK");
    int r = rank ? atoi(rank) : -1;
    setenv("IPCPIPE_NODE", r % 2 ? "b" : "a", 1);
    rank_params(&p);
    T_EQ_INT(p.rank, r);
    double t0 = ipcp__now_s();
    T_STATUS(ipcp__boot_connect(&p, &boot), IPCP_ERR_UNSUPPORTED);
    T_CHECK(ipcp__now_s() - t0 < 5.0);
    T_CHECK(boot == NULL);
    char want[160];
    t_fmt(want, sizeof(want),
          "rank %d counts as on node '%s' and rank %d as on '%s' "
          "(IPCPIPE_NODE): ipcp_init joins the ranks of one node",
          r, r % 2 ? "b" : "a", r % 2 ? 0 : 1, r % 2 ? "a" : "b");
    T_MSG_HAS(want);
    T_MSG_HAS("ipcp_init_mpi");
    return 0;
}

/* The same value everywhere: one node, as with none. */
static int rank_nodes_same(void)
{
    setenv("IPCPIPE_NODE", "one-node-name-longer-than-a-hello-carries-of-it",
           1);
    return rank_connect();
}

/* Rank 1 first fills rank 0's rendezvous with connections that never say
 * hello (more than it has slots for), keeps them open, then joins: rank 0
 * must drop the silent ones to let it in, well before the timeout. */
static int rank_silent_flood(void)
{
    enum { SILENT = 24 };
    ipcp__boot_params_t p;
    ipcp__boot_t *boot;
    int fds[SILENT];
    rank_params(&p);
    if (p.rank == 1) {
        char path[IPCP_DIR_MAX + 64 + 16];
        t_fmt(path, sizeof(path), "%s/ipcpipe-%u/%s/r0.sock", p.dir,
              (unsigned)getuid(), p.job);
        for (int i = 0; i < SILENT; i++)
            fds[i] = raw_connect(path);
    }
    double t0 = ipcp__now_s();
    T_OK(ipcp__boot_connect(&p, &boot));
    T_OK(ipcp__boot_barrier(boot));
    double took = ipcp__now_s() - t0;
    if (took > 5.0)
        T_FAIL("the rendezvous took %.1f s behind %d silent connections", took,
               SILENT);
    if (p.rank == 1)
        for (int i = 0; i < SILENT; i++)
            close(fds[i]);
    ipcp__boot_destroy(boot);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Multi-process cases (parent side: set-up before, checks after)            */

static char t_base[512];

static void setup_base(void)
{
    make_base(t_base, sizeof(t_base), NULL);
    setenv("T_BOOT_BASE", t_base, 1);
}

/* Base deep enough that the socket paths exceed sun_path's 108 bytes. */
static void setup_long_base(void)
{
    char extra[121];
    memset(extra, 'd', sizeof(extra) - 1);
    extra[sizeof(extra) - 1] = '\0';
    make_base(t_base, sizeof(t_base), extra);
    setenv("T_BOOT_BASE", t_base, 1);
}

/* IPCPIPE_DIR naming a directory that does not exist yet: the ranks make
 * it, concurrently. */
static void setup_new_base(void)
{
    make_base(t_base, sizeof(t_base), NULL);
    size_t n = strlen(t_base);
    t_fmt(t_base + n, sizeof(t_base) - n, "/new");
    setenv("T_BOOT_BASE", t_base, 1);
}

/* No IPCPIPE_DIR: $XDG_RUNTIME_DIR when it is usable, else $TMPDIR. */
static void setup_xdg(void)
{
    make_base(t_base, sizeof(t_base), NULL);
    setenv("XDG_RUNTIME_DIR", t_base, 1);
    setenv("TMPDIR", "/tmp", 1);
}

static void setup_tmpdir(void)
{
    make_base(t_base, sizeof(t_base), NULL);
    setenv("XDG_RUNTIME_DIR", "/nonexistent/ipcpt", 1);
    setenv("TMPDIR", t_base, 1);
}

/* Socket files left behind by a crashed run of the same job. */
static void setup_stale(void)
{
    char dir[600], path[700], job[32];
    setup_base();
    t_fmt(job, sizeof(job), "stale-%ld", (long)getpid());
    setenv("T_BOOT_JOB", job, 1);
    user_dir(dir, sizeof(dir), t_base);
    mkdir_mode(dir, 0700);
    job_dir(dir, sizeof(dir), t_base, job);
    mkdir_mode(dir, 0700);
    for (int r = 0; r < 2; r++) {
        t_fmt(path, sizeof(path), "%s/r%d.sock", dir, r);
        close(raw_listen(path));
        T_CHECK(exists(path));
    }
}

static void setup_answer(void)
{
    char dir[600], job[32];
    setup_base();
    t_fmt(job, sizeof(job), "answer-%ld", (long)getpid());
    setenv("T_BOOT_JOB", job, 1);
    user_dir(dir, sizeof(dir), t_base);
    mkdir_mode(dir, 0700);
    job_dir(dir, sizeof(dir), t_base, job);
    mkdir_mode(dir, 0700);
}

/* After a clean run only the empty ipcpipe-<uid> directory remains. */
static void after_clean(void)
{
    char dir[600];
    const char *job = getenv("T_BOOT_JOB");
    if (job != NULL) {
        job_dir(dir, sizeof(dir), t_base, job);
        if (exists(dir))
            T_FAIL("%s was not removed", dir);
    }
    user_dir(dir, sizeof(dir), t_base);
    if (rmdir(dir) != 0)
        T_FAIL("rmdir %s: %s (something left behind?)", dir, strerror(errno));
}

/* ------------------------------------------------------------------------ */

typedef struct t_case {
    const char *name;
    int nranks;           /* 0: one process, solo runs it */
    int (*rank_fn)(void); /* each rank */
    void (*setup)(void);  /* parent, before the ranks */
    void (*after)(void);  /* parent, after they all passed */
    int (*solo)(void);
} t_case_t;

static const t_case_t cases[] = {
    {"connect_2", 2, rank_connect, setup_base, after_clean, NULL},
    {"connect_3", 3, rank_connect, setup_base, after_clean, NULL},
    {"connect_8", 8, rank_connect, setup_base, after_clean, NULL},
    {"connect_default_dir", 2, rank_connect, NULL, NULL, NULL},
    {"connect_long_path", 3, rank_connect, setup_long_base, after_clean, NULL},
    {"connect_new_base", 2, rank_connect, setup_new_base, after_clean, NULL},
    {"connect_xdg", 2, rank_connect, setup_xdg, after_clean, NULL},
    {"connect_tmpdir", 2, rank_connect, setup_tmpdir, after_clean, NULL},
    {"late_rank", 3, rank_late, setup_base, after_clean, NULL},
    {"stale_socket", 2, rank_connect, setup_stale, after_clean, NULL},
    {"fd_pass", 2, rank_fd_pass, setup_base, after_clean, NULL},
    {"hello_refused", 2, rank_hello_refused, setup_base, after_clean, NULL},
    {"answer_refused", 2, rank_answer_refused, setup_answer, after_clean, NULL},
    {"peer_death", 2, rank_peer_death, setup_base, after_clean, NULL},
    {"silent_flood", 2, rank_silent_flood, setup_base, after_clean, NULL},
    {"nodes_differ", 4, rank_nodes_differ, setup_base, after_clean, NULL},
    {"nodes_same", 3, rank_nodes_same, setup_base, after_clean, NULL},
    {"size_1", 0, NULL, NULL, NULL, solo_size1},
    {"missing_rank", 0, NULL, NULL, NULL, solo_missing_rank},
    {"foreign_owner", 0, NULL, NULL, NULL, solo_foreign_owner},
    {"bad_mode", 0, NULL, NULL, NULL, solo_bad_mode},
    {"sock_taken", 0, NULL, NULL, NULL, solo_sock_taken},
    {"bad_params", 0, NULL, NULL, NULL, solo_bad_params},
    {"fd_limit", 0, NULL, NULL, NULL, solo_fd_limit},
};

static const t_case_t *the_case;

static int rank_main(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    return the_case->rank_fn();
}

static int run_case(const t_case_t *c, int argc, char **argv)
{
    if (c->nranks == 0)
        return c->solo();
    the_case = c;
    if (ipcp_launch_is_rank())
        return t_mp_main(argc, argv, c->nranks, 60.0, rank_main);
    t_top[0] = '\0';
    if (c->setup != NULL)
        c->setup();
    int rc = t_mp_main(argc, argv, c->nranks, 60.0, rank_main);
    if (rc == 0 && c->after != NULL)
        c->after();
    if (t_top[0] != '\0')
        rm_tree(t_top);
    return rc;
}

int main(int argc, char **argv)
{
    int rc, i = t_pick_case(argc, argv, cases, sizeof(cases) / sizeof(cases[0]),
                            sizeof(cases[0]), &rc);
    if (i < 0)
        return rc;
    return run_case(&cases[i], argc, argv);
}
