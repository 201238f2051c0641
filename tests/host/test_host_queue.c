/* Host backend queues: order, flags (in one process and across fork),
 * aborts, failures, remote copies.  One case per run: test_host_queue CASE.
 *
 * Cases that fork do so before any queue exists, so the process is
 * single-threaded at fork (ThreadSanitizer does not support threads in a
 * child forked from a multi-threaded parent). */
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "backend/host/host.h"
#include "common/time.h"
#include "testutil.h"

static const ipcp__backend_ops_t *ops = &ipcp__host_backend_ops;

/* A track whose callback raises `done`. */
typedef struct tk {
    ipcp__track_t t;
    atomic_int done;
} tk_t;

static void tk_cb(ipcp__track_t *t)
{
    tk_t *k = ipcp__container_of(t, tk_t, t);
    atomic_store(&k->done, 1);
}

static void tk_init(tk_t *k, int pending)
{
    atomic_init(&k->done, 0);
    ipcp__track_init(&k->t, pending, tk_cb, NULL);
}

static int tk_done(tk_t *k)
{
    return atomic_load(&k->done);
}

static void sleep_ms(double ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms * 1e6) % 1000000000};
    nanosleep(&ts, NULL);
}

/* Waits for the callback; fails the test after timeout_s. */
static void tk_wait(tk_t *k, double timeout_s)
{
    double end = ipcp__now_s() + timeout_s;
    while (!tk_done(k)) {
        if (ipcp__now_s() > end)
            T_FAIL("track not completed after %.1f s", timeout_s);
        sleep_ms(0.1);
    }
}

static void tk_expect(tk_t *k, ipcp_status_t st, const char *msg_part)
{
    char msg[IPCP_ERRMSG_MAX];
    ipcp__track_errmsg(&k->t, msg, sizeof(msg));
    int got = atomic_load(&k->t.status);
    if (got != (int)st)
        T_FAIL("track status %s, expected %s (message: %s)",
               ipcp_strerror((ipcp_status_t)got), ipcp_strerror(st), msg);
    if (msg_part && !strstr(msg, msg_part))
        T_FAIL("track message \"%s\" lacks \"%s\"", msg, msg_part);
}

static uint64_t next_rand(uint64_t *s)
{
    *s += 1;
    return ipcp_pattern_word(*s, 0);
}

/* A block of flags, each on its own cache line as the engine lays them. */
static uint64_t *flag_at(void *base, int i)
{
    return (uint64_t *)((char *)base + (size_t)i * IPCP_CACHE_LINE);
}

static ipcp__queue_t *new_queue(ipcp__backend_t *be)
{
    ipcp__queue_t *q = NULL;
    T_OK(ops->queue_create(be, -1, &q));
    return q;
}

/* ------------------------------------------------------------------------ */

static void case_copy_order(void)
{
    ipcp__backend_t *be;
    T_OK(ops->open(NULL, &be));
    ipcp__queue_t *q = new_queue(be);
    tk_t k;
    tk_init(&k, 1);

    /* A chain: each copy reads what the previous one wrote. */
    enum { NCHAIN = 200, LINK = 65536 + 24 };
    char *chain = t_malloc((size_t)NCHAIN * LINK);
    memset(chain, 0, (size_t)NCHAIN * LINK);
    uint64_t s1 = t_fresh_seed();
    t_fill(chain, LINK, s1);
    for (int i = 0; i + 1 < NCHAIN; i++)
        T_OK(ops->copy(q, chain + (size_t)(i + 1) * LINK,
                       chain + (size_t)i * LINK, LINK, &k.t));

    /* Random-sized pieces tiling a large buffer. */
    size_t big = 48u << 20;
    char *src = t_malloc(big), *dst = t_malloc(big);
    uint64_t s2 = t_fresh_seed(), r = s2;
    t_fill(src, big, s2);
    memset(dst, 0, big);
    size_t off = 0, n = 0;
    while (off < big) {
        size_t want = next_rand(&r) % (256 * 1024);
        size_t len = ipcp__min(big - off, want);
        T_OK(ops->copy(q, dst + off, src + off, len, &k.t));
        off += len;
        n++;
    }
    T_OK(ops->notify(q, &k.t));
    tk_wait(&k, 60);
    tk_expect(&k, IPCP_OK, NULL);
    t_verify(chain + (size_t)(NCHAIN - 1) * LINK, LINK, s1, "end of chain");
    t_verify(dst, big, s2, "tiled copies");
    printf("%zu copies checked\n", n);
    ops->queue_destroy(q);
    ipcp__track_destroy(&k.t);
    free(chain);
    free(src);
    free(dst);
    ops->close(be);
}

static void case_copy_zero(void)
{
    ipcp__backend_t *be;
    T_OK(ops->open(NULL, &be));
    ipcp__queue_t *q = new_queue(be);
    tk_t k;
    tk_init(&k, 1);
    char a[64], b[64];
    uint64_t s = t_fresh_seed();
    t_fill(a, sizeof(a), s);
    memset(b, 0, sizeof(b));
    T_OK(ops->copy(q, NULL, NULL, 0, &k.t));
    T_OK(ops->copy(q, b, a, 0, &k.t));
    T_OK(ops->copy(q, b, a, sizeof(a), &k.t));
    T_OK(ops->copy(q, NULL, a, 0, &k.t));
    T_OK(ops->rcopy(q, getpid(), 0, NULL, 0, 1, &k.t));
    T_OK(ops->notify(q, &k.t));
    tk_wait(&k, 10);
    tk_expect(&k, IPCP_OK, NULL);
    t_verify(b, sizeof(b), s, "after zero-length copies");
    ops->queue_destroy(q);
    ipcp__track_destroy(&k.t);
    ops->close(be);
}

/* Enqueueing must not wait for earlier operations: with the worker held
 * in a flag wait, thousands of copies are accepted (the ring grows) and
 * none runs before the flag is written. */
static void case_enqueue_nonblocking(void)
{
    ipcp__backend_t *be;
    T_OK(ops->open(NULL, &be));
    ipcp__queue_t *q = new_queue(be), *w = new_queue(be);
    uint64_t *flags = t_malloc(4096);
    memset(flags, 0, 4096);
    tk_t k, kw;
    tk_init(&k, 1);
    tk_init(&kw, 1);
    enum { NOPS = 20000, PIECE = 512 };
    char *src = t_malloc((size_t)NOPS * PIECE);
    char *dst = t_malloc((size_t)NOPS * PIECE);
    uint64_t s = t_fresh_seed();
    t_fill(src, (size_t)NOPS * PIECE, s);
    memset(dst, 0, (size_t)NOPS * PIECE);

    T_OK(ops->flag_wait(q, flag_at(flags, 0), 1, NULL, &k.t));
    double t0 = ipcp__now_s();
    for (int i = 0; i < NOPS; i++)
        T_OK(ops->copy(q, dst + (size_t)i * PIECE, src + (size_t)i * PIECE,
                       PIECE, &k.t));
    T_OK(ops->notify(q, &k.t));
    double dt = ipcp__now_s() - t0;
    printf("%d enqueues in %.3f ms\n", NOPS, dt * 1e3);
    T_CHECK(dt < 2.0);
    sleep_ms(20);
    T_EQ_INT(tk_done(&k), 0);
    T_EQ_INT(dst[0], 0);

    T_OK(ops->flag_write(w, flag_at(flags, 0), 1, &kw.t));
    T_OK(ops->notify(w, &kw.t));
    tk_wait(&k, 30);
    tk_wait(&kw, 30);
    tk_expect(&k, IPCP_OK, NULL);
    t_verify(dst, (size_t)NOPS * PIECE, s, "copies after the wait");
    ops->queue_destroy(q);
    ops->queue_destroy(w);
    ipcp__track_destroy(&k.t);
    ipcp__track_destroy(&kw.t);
    free(src);
    free(dst);
    free(flags);
    ops->close(be);
}

/* destroy returns only after every enqueued operation ran. */
static void case_destroy_drains(void)
{
    ipcp__backend_t *be;
    T_OK(ops->open(NULL, &be));
    ipcp__queue_t *q = new_queue(be);
    tk_t k;
    tk_init(&k, 1);
    size_t len = 16u << 20;
    char *src = t_malloc(len), *dst = t_malloc(len);
    uint64_t s = t_fresh_seed();
    t_fill(src, len, s);
    for (size_t off = 0; off < len; off += 1u << 20)
        T_OK(ops->copy(q, dst + off, src + off, 1u << 20, &k.t));
    T_OK(ops->notify(q, &k.t));
    ops->queue_destroy(q);
    T_EQ_INT(tk_done(&k), 1);
    t_verify(dst, len, s, "after destroy");
    ipcp__track_destroy(&k.t);
    free(src);
    free(dst);
    ops->close(be);
}

/* ------------------------------------------------------------------------ */
/* A producer queue and a consumer queue pass chunks through a ring of
 * slots, ordered only by flags: full[s] counts chunks put in slot s, free[s]
 * counts chunks taken out of it. */

enum { RING_SLOTS = 4, RING_SLOT = 65536 + 40, RING_CHUNKS = 600 };

static void ring_enqueue(ipcp__queue_t *prod, ipcp__queue_t *cons, char *ring,
                         uint64_t *flags, const char *src, char *dst,
                         ipcp__track_t *t)
{
    for (int i = 0; i < RING_CHUNKS; i++) {
        int s = i % RING_SLOTS;
        uint64_t round = (uint64_t)(i / RING_SLOTS);
        char *slot = ring + (size_t)s * RING_SLOT;
        uint64_t *full = flag_at(flags, s), *fr = flag_at(flags, 8 + s);
        T_OK(ops->flag_wait(prod, fr, round, NULL, t));
        T_OK(ops->copy(prod, slot, src + (size_t)i * RING_SLOT, RING_SLOT, t));
        T_OK(ops->flag_write(prod, full, round + 1, t));
        T_OK(ops->flag_wait(cons, full, round + 1, NULL, t));
        T_OK(ops->copy(cons, dst + (size_t)i * RING_SLOT, slot, RING_SLOT, t));
        T_OK(ops->flag_write(cons, fr, round + 1, t));
    }
}

static void case_flag_ring(void)
{
    ipcp__backend_t *be;
    T_OK(ops->open(NULL, &be));
    ipcp__queue_t *prod = new_queue(be), *cons = new_queue(be);
    size_t total = (size_t)RING_CHUNKS * RING_SLOT;
    char *src = t_malloc(total), *dst = t_malloc(total);
    char *ring = t_malloc((size_t)RING_SLOTS * RING_SLOT);
    uint64_t *flags = t_malloc(4096);
    memset(flags, 0, 4096);
    memset(dst, 0, total);
    uint64_t s = t_fresh_seed();
    t_fill(src, total, s);
    tk_t k;
    tk_init(&k, 2);
    ring_enqueue(prod, cons, ring, flags, src, dst, &k.t);
    T_OK(ops->notify(prod, &k.t));
    T_OK(ops->notify(cons, &k.t));
    tk_wait(&k, 60);
    tk_expect(&k, IPCP_OK, NULL);
    t_verify(dst, total, s, "through the ring");
    ops->queue_destroy(prod);
    ops->queue_destroy(cons);
    ipcp__track_destroy(&k.t);
    free(src);
    free(dst);
    free(ring);
    free(flags);
    ops->close(be);
}

/* A wait on a flag nobody writes ends when the abort word is set. */
static void case_flag_abort(void)
{
    ipcp__backend_t *be;
    T_OK(ops->open(NULL, &be));
    ipcp__queue_t *q = new_queue(be);
    uint64_t *flags = t_malloc(4096);
    memset(flags, 0, 4096);
    atomic_int abort_word;
    atomic_init(&abort_word, 0);
    tk_t k;
    tk_init(&k, 1);
    T_OK(ops->flag_wait(q, flag_at(flags, 0), 1, &abort_word, &k.t));
    T_OK(ops->notify(q, &k.t));
    sleep_ms(70); /* long enough for the waiter to be asleep in the kernel */
    T_EQ_INT(tk_done(&k), 0);
    double t0 = ipcp__now_s();
    atomic_store(&abort_word, IPCP_ERR_PEER_LOST);
    tk_wait(&k, 10);
    double dt = ipcp__now_s() - t0;
    printf("abort seen after %.1f ms\n", dt * 1e3);
    T_CHECK(dt < 0.1);
    tk_expect(&k, IPCP_ERR_PEER_LOST, "peer lost while waiting for flag");
    ops->queue_destroy(q);
    ipcp__track_destroy(&k.t);
    free(flags);
    ops->close(be);
}

/* After a failure, copies, flag writes and flag waits of the track are
 * skipped (a wait that would never end included), but notify still runs;
 * another track on the same queue is unaffected. */
static void case_skip_after_fail(void)
{
    ipcp__backend_t *be;
    T_OK(ops->open(NULL, &be));
    ipcp__queue_t *q = new_queue(be);
    uint64_t *flags = t_malloc(4096);
    memset(flags, 0, 4096);
    atomic_int abort_word;
    atomic_init(&abort_word, IPCP_ERR_PEER_LOST);
    char a[4096], b[4096], c[4096];
    memset(b, 0, sizeof(b));
    memset(c, 0, sizeof(c));
    uint64_t s = t_fresh_seed();
    t_fill(a, sizeof(a), s);
    tk_t k, ok;
    tk_init(&k, 1);
    tk_init(&ok, 1);
    T_OK(ops->flag_wait(q, flag_at(flags, 0), 1, &abort_word, &k.t));
    T_OK(ops->copy(q, b, a, sizeof(a), &k.t));
    T_OK(ops->flag_write(q, flag_at(flags, 1), 5, &k.t));
    T_OK(ops->flag_wait(q, flag_at(flags, 2), 1, NULL, &k.t));
    T_OK(ops->rcopy(q, getpid(), (uintptr_t)b, a, sizeof(a), 1, &k.t));
    T_OK(ops->copy(q, c, a, sizeof(a), &ok.t));
    T_OK(ops->notify(q, &k.t));
    T_OK(ops->notify(q, &ok.t));
    tk_wait(&k, 10);
    tk_wait(&ok, 10);
    tk_expect(&k, IPCP_ERR_PEER_LOST, "peer lost");
    tk_expect(&ok, IPCP_OK, NULL);
    for (size_t i = 0; i < sizeof(b); i++)
        if (b[i] != 0)
            T_FAIL("skipped copy wrote byte %zu", i);
    T_EQ_U64(*flag_at(flags, 1), 0);
    t_verify(c, sizeof(c), s, "copy of the healthy track");
    ops->queue_destroy(q);
    ipcp__track_destroy(&k.t);
    ipcp__track_destroy(&ok.t);
    free(flags);
    ops->close(be);
}

/* Writes value through queue w and returns once it is stored. */
static void write_flag(ipcp__queue_t *w, uint64_t *flag, uint64_t value)
{
    tk_t k;
    tk_init(&k, 1);
    T_OK(ops->flag_write(w, flag, value, &k.t));
    T_OK(ops->notify(w, &k.t));
    tk_wait(&k, 10);
    ipcp__track_destroy(&k.t);
}

/* The GEQ comparison on a counter that wraps past UINT64_MAX. */
static void case_flag_wrap(void)
{
    ipcp__backend_t *be;
    T_OK(ops->open(NULL, &be));
    ipcp__queue_t *q = new_queue(be), *w = new_queue(be);
    uint64_t *flags = t_malloc(4096);
    memset(flags, 0, 4096);
    uint64_t *f = flag_at(flags, 0);
    *f = UINT64_MAX - 1;

    tk_t k;
    tk_init(&k, 1);
    T_OK(ops->flag_wait(q, f, 3, NULL, &k.t)); /* 5 steps ahead */
    T_OK(ops->notify(q, &k.t));
    sleep_ms(30);
    T_EQ_INT(tk_done(&k), 0);
    write_flag(w, f, UINT64_MAX);
    sleep_ms(30);
    T_EQ_INT(tk_done(&k), 0);
    write_flag(w, f, 2);
    sleep_ms(30);
    T_EQ_INT(tk_done(&k), 0);
    write_flag(w, f, 3);
    tk_wait(&k, 5);
    tk_expect(&k, IPCP_OK, NULL);
    ipcp__track_destroy(&k.t);

    /* Already reached: 3 is 9 steps past UINT64_MAX - 5. */
    tk_init(&k, 1);
    T_OK(ops->flag_wait(q, f, UINT64_MAX - 5, NULL, &k.t));
    T_OK(ops->notify(q, &k.t));
    tk_wait(&k, 5);
    ipcp__track_destroy(&k.t);

    /* Not reached: UINT64_MAX is one step before 0. */
    write_flag(w, f, UINT64_MAX);
    tk_init(&k, 1);
    T_OK(ops->flag_wait(q, f, 0, NULL, &k.t));
    T_OK(ops->notify(q, &k.t));
    sleep_ms(30);
    T_EQ_INT(tk_done(&k), 0);
    write_flag(w, f, 0);
    tk_wait(&k, 5);
    ipcp__track_destroy(&k.t);

    ops->queue_destroy(q);
    ops->queue_destroy(w);
    free(flags);
    ops->close(be);
}

/* A write that changes only the high half leaves the futex word as it
 * was; the waiter must still see it. */
static void case_flag_high_word(void)
{
    ipcp__backend_t *be;
    T_OK(ops->open(NULL, &be));
    ipcp__queue_t *q = new_queue(be), *w = new_queue(be);
    uint64_t *flags = t_malloc(4096);
    memset(flags, 0, 4096);
    uint64_t *f = flag_at(flags, 0);
    *f = 0x100000007ull;
    tk_t k;
    tk_init(&k, 1);
    T_OK(ops->flag_wait(q, f, 0x200000007ull, NULL, &k.t));
    T_OK(ops->notify(q, &k.t));
    sleep_ms(30);
    T_EQ_INT(tk_done(&k), 0);
    double t0 = ipcp__now_s();
    write_flag(w, f, 0x200000007ull);
    tk_wait(&k, 5);
    printf("high-half change seen after %.1f ms\n", (ipcp__now_s() - t0) * 1e3);
    T_CHECK(ipcp__now_s() - t0 < 0.2);
    tk_expect(&k, IPCP_OK, NULL);
    ops->queue_destroy(q);
    ops->queue_destroy(w);
    ipcp__track_destroy(&k.t);
    free(flags);
    ops->close(be);
}

static void case_flag_misaligned(void)
{
    ipcp__backend_t *be;
    T_OK(ops->open(NULL, &be));
    ipcp__queue_t *q = new_queue(be);
    uint64_t words[3] = {0, 0, 0};
    uint64_t *bad = (uint64_t *)(void *)((char *)words + 4);
    tk_t k;
    tk_init(&k, 1);
    T_STATUS(ops->flag_write(q, bad, 1, &k.t), IPCP_ERR_INVALID);
    T_MSG_HAS("aligned");
    T_STATUS(ops->flag_wait(q, bad, 1, NULL, &k.t), IPCP_ERR_INVALID);
    T_STATUS(ops->notify(q, NULL), IPCP_ERR_INVALID);
    ops->queue_destroy(q);
    ipcp__track_destroy(&k.t);
    ops->close(be);
}

/* ------------------------------------------------------------------------ */
/* Across processes. */

/* The child dies with the parent, so a failing test leaves nothing
 * behind. */
static pid_t fork_child(void)
{
    pid_t parent = getpid();
    fflush(NULL);
    pid_t pid = fork();
    T_CHECK(pid >= 0);
    if (pid == 0) {
        t_rank = 1;
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(1);
    }
    return pid;
}

/* Waits for the track while watching the child: if it dies first, the
 * abort word releases the parent's waits, as the engine does on peer loss.
 * Returns the child's wait status when it was reaped, else -1. */
static int tk_wait_child(tk_t *k, pid_t child, atomic_int *abort_word,
                         double timeout_s)
{
    double end = ipcp__now_s() + timeout_s;
    int ws = 0, reaped = 0;
    while (!tk_done(k)) {
        if (!reaped && waitpid(child, &ws, WNOHANG) == child) {
            reaped = 1;
            if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0)
                atomic_store(abort_word, IPCP_ERR_PEER_LOST);
        }
        if (ipcp__now_s() > end) {
            kill(child, SIGKILL);
            T_FAIL("track not completed after %.1f s", timeout_s);
        }
        sleep_ms(0.2);
    }
    return reaped ? ws : -1;
}

/* Reaps the child (ws: its status if already reaped, else -1) and fails
 * the test unless it exited 0. */
static void reap_child(pid_t child, int ws, double timeout_s)
{
    double end = ipcp__now_s() + timeout_s;
    while (ws == -1 && waitpid(child, &ws, WNOHANG) != child) {
        ws = -1;
        if (ipcp__now_s() > end) {
            kill(child, SIGKILL);
            T_FAIL("child %d still running after %.1f s", (int)child,
                   timeout_s);
        }
        sleep_ms(1);
    }
    if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0)
        T_FAIL("child failed (wait status 0x%x)", ws);
}

enum { XP_SLOTS = 3, XP_SLOT = 256 * 1024 + 8, XP_CHUNKS = 200 };

/* The child produces chunks into a memfd ring shared with the parent. */
static int xp_child(ipcp__backend_t *be, char *shared, uint64_t seed)
{
    ipcp__queue_t *q = new_queue(be);
    char *ring = shared + 4096;
    char *src = t_malloc((size_t)XP_CHUNKS * XP_SLOT);
    for (int i = 0; i < XP_CHUNKS; i++)
        t_fill(src + (size_t)i * XP_SLOT, XP_SLOT, seed + (uint64_t)i);
    tk_t k;
    tk_init(&k, 1);
    for (int i = 0; i < XP_CHUNKS; i++) {
        int s = i % XP_SLOTS;
        uint64_t round = (uint64_t)(i / XP_SLOTS);
        /* Pauses now and then make the parent's waits go to sleep in the
         * kernel, so the cross-process wake-up is exercised. */
        if (i % 16 == 15)
            sleep_ms(2);
        T_OK(ops->flag_wait(q, flag_at(shared, 8 + s), round, NULL, &k.t));
        T_OK(ops->copy(q, ring + (size_t)s * XP_SLOT, src + (size_t)i * XP_SLOT,
                       XP_SLOT, &k.t));
        T_OK(ops->flag_write(q, flag_at(shared, s), round + 1, &k.t));
    }
    T_OK(ops->notify(q, &k.t));
    tk_wait(&k, 60);
    tk_expect(&k, IPCP_OK, NULL);
    ops->queue_destroy(q);
    ipcp__track_destroy(&k.t);
    free(src);
    return 0;
}

static void case_flag_fork(void)
{
    ipcp__backend_t *be;
    T_OK(ops->open(NULL, &be));
    void *shared, *h;
    T_OK(
        ops->mem_alloc(be, 4096 + (size_t)XP_SLOTS * XP_SLOT, -1, &shared, &h));
    memset(shared, 0, 4096);
    uint64_t seed = t_fresh_seed();
    pid_t child = fork_child();
    if (child == 0)
        _exit(xp_child(be, shared, seed));

    ipcp__queue_t *q = new_queue(be);
    char *ring = (char *)shared + 4096;
    char *dst = t_malloc((size_t)XP_CHUNKS * XP_SLOT);
    atomic_int abort_word;
    atomic_init(&abort_word, 0);
    tk_t k;
    tk_init(&k, 1);
    for (int i = 0; i < XP_CHUNKS; i++) {
        int s = i % XP_SLOTS;
        uint64_t round = (uint64_t)(i / XP_SLOTS);
        T_OK(ops->flag_wait(q, flag_at(shared, s), round + 1, &abort_word,
                            &k.t));
        T_OK(ops->copy(q, dst + (size_t)i * XP_SLOT, ring + (size_t)s * XP_SLOT,
                       XP_SLOT, &k.t));
        T_OK(ops->flag_write(q, flag_at(shared, 8 + s), round + 1, &k.t));
    }
    T_OK(ops->notify(q, &k.t));
    int ws = tk_wait_child(&k, child, &abort_word, 60);
    tk_expect(&k, IPCP_OK, NULL);
    for (int i = 0; i < XP_CHUNKS; i++)
        t_verify(dst + (size_t)i * XP_SLOT, XP_SLOT, seed + (uint64_t)i,
                 "chunk from the child");
    reap_child(child, ws, 30);
    ops->queue_destroy(q);
    ipcp__track_destroy(&k.t);
    free(dst);
    T_OK(ops->mem_free(be, h));
    ops->close(be);
}

/* ------------------------------------------------------------------------ */

enum { RC_LEN = (8 << 20) + 17 };

/* The child fills `rd` (its copy-on-write copy of the parent's buffer, at
 * the same address), raises flag 0, waits for flag 1, then checks that the
 * parent wrote `wr`. */
static int rc_child(ipcp__backend_t *be, uint64_t *flags, char *rd, char *wr,
                    uint64_t s_rd, uint64_t s_wr)
{
    ipcp__queue_t *q = new_queue(be);
    t_fill(rd, RC_LEN, s_rd);
    tk_t k;
    tk_init(&k, 1);
    T_OK(ops->flag_write(q, flag_at(flags, 0), 1, &k.t));
    T_OK(ops->flag_wait(q, flag_at(flags, 1), 1, NULL, &k.t));
    T_OK(ops->notify(q, &k.t));
    tk_wait(&k, 60);
    t_verify(wr, RC_LEN, s_wr, "written by the parent");
    ops->queue_destroy(q);
    ipcp__track_destroy(&k.t);
    return 0;
}

static void case_rcopy_fork(void)
{
    ipcp__backend_t *be;
    T_OK(ops->open(NULL, &be));
    uint64_t *flags = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
                           MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    T_CHECK(flags != MAP_FAILED);
    char *rd = t_malloc(RC_LEN), *wr = t_malloc(RC_LEN);
    memset(rd, 0, RC_LEN);
    memset(wr, 0, RC_LEN);
    uint64_t s_rd = t_fresh_seed(), s_wr = t_fresh_seed();
    pid_t child = fork_child();
    if (child == 0)
        _exit(rc_child(be, flags, rd, wr, s_rd, s_wr));

    ipcp__queue_t *q = new_queue(be);
    char *got = t_malloc(RC_LEN), *src = t_malloc(RC_LEN);
    memset(got, 0, RC_LEN);
    t_fill(src, RC_LEN, s_wr);
    atomic_int abort_word;
    atomic_init(&abort_word, 0);
    tk_t k;
    tk_init(&k, 1);
    T_OK(ops->flag_wait(q, flag_at(flags, 0), 1, &abort_word, &k.t));
    T_OK(ops->rcopy(q, child, (uintptr_t)rd, got, RC_LEN, 0, &k.t));
    T_OK(ops->rcopy(q, child, (uintptr_t)wr, src, RC_LEN, 1, &k.t));
    T_OK(ops->flag_write(q, flag_at(flags, 1), 1, &k.t));
    T_OK(ops->notify(q, &k.t));
    int ws = tk_wait_child(&k, child, &abort_word, 60);
    int st = atomic_load(&k.t.status);
    if (st == IPCP_ERR_PERMISSION || st == IPCP_ERR_UNSUPPORTED) {
        char msg[IPCP_ERRMSG_MAX];
        ipcp__track_errmsg(&k.t, msg, sizeof(msg));
        printf("skipped: %s\n", msg);
        kill(child, SIGKILL);
        waitpid(child, NULL, 0);
        exit(T_SKIP);
    }
    tk_expect(&k, IPCP_OK, NULL);
    t_verify(got, RC_LEN, s_rd, "read from the child");
    reap_child(child, ws, 30);
    ops->queue_destroy(q);
    ipcp__track_destroy(&k.t);
    free(got);
    free(src);
    free(rd);
    free(wr);
    munmap(flags, 4096);
    ops->close(be);
}

/* A copy to a process that is gone fails the track, naming the pid. */
static void case_rcopy_dead_pid(void)
{
    ipcp__backend_t *be;
    T_OK(ops->open(NULL, &be));
    pid_t child = fork_child();
    if (child == 0)
        _exit(0);
    T_EQ_INT(waitpid(child, NULL, 0), child);
    ipcp__queue_t *q = new_queue(be);
    char buf[256] = {0};
    tk_t k;
    tk_init(&k, 1);
    T_OK(ops->rcopy(q, child, (uintptr_t)buf, buf, sizeof(buf), 1, &k.t));
    T_OK(ops->notify(q, &k.t));
    tk_wait(&k, 10);
    char pid_s[32];
    snprintf(pid_s, sizeof(pid_s), "pid %d", (int)child);
    tk_expect(&k, IPCP_ERR_PEER_LOST, pid_s);
    ops->queue_destroy(q);
    ipcp__track_destroy(&k.t);
    ops->close(be);
}

static const struct {
    const char *name;
    void (*fn)(void);
} cases[] = {
    {"copy_order", case_copy_order},
    {"copy_zero", case_copy_zero},
    {"enqueue_nonblocking", case_enqueue_nonblocking},
    {"destroy_drains", case_destroy_drains},
    {"flag_ring", case_flag_ring},
    {"flag_abort", case_flag_abort},
    {"skip_after_fail", case_skip_after_fail},
    {"flag_wrap", case_flag_wrap},
    {"flag_high_word", case_flag_high_word},
    {"flag_misaligned", case_flag_misaligned},
    {"flag_fork", case_flag_fork},
    {"rcopy_fork", case_rcopy_fork},
    {"rcopy_dead_pid", case_rcopy_dead_pid},
};

int main(int argc, char **argv)
{
    int rc, i = t_pick_case(argc, argv, cases, sizeof(cases) / sizeof(cases[0]),
                            sizeof(cases[0]), &rc);
    if (i < 0)
        return rc;
    cases[i].fn();
    return 0;
}
