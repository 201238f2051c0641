/* The handle table (src/common/handle.c) on its own: a handle resolves to
 * its object while live and to nothing once freed, even after its slot was
 * reused; several chunks' worth at once; and threads that free, reuse and
 * resolve handles at the same time (run under TSan too); a slot that used
 * all its generations; reaping the handles of one owner (what finalize
 * does with the requests the user still holds); threads that end with
 * slots kept for themselves.
 *
 *   test_handle basic|many|threads|wrap|reap|exit */
#include <pthread.h>
#include <stdatomic.h>

#include "common/handle.h"
#include "testutil.h"

static int objs_[8];

static int case_basic(void)
{
    ipcp__handle_t h = 0, h2 = 0;
    T_OK(ipcp__handle_new(IPCP_HANDLE_REQ, &objs_[0], &h));
    T_CHECK(h != 0);
    T_EQ_INT(ipcp__handle_type(h), IPCP_HANDLE_REQ);
    T_CHECK(ipcp__handle_get(h, IPCP_HANDLE_REQ) == &objs_[0]);
    T_CHECK(ipcp__handle_get(h, IPCP_HANDLE_MEM) == NULL);
    T_CHECK(ipcp__handle_get(h + 1, IPCP_HANDLE_MEM) == NULL);
    T_EQ_INT(ipcp__handle_stale(h), 0);
    ipcp__handle_free(h);
    T_CHECK(ipcp__handle_get(h, IPCP_HANDLE_REQ) == NULL);
    T_EQ_INT(ipcp__handle_stale(h), 1);
    ipcp__handle_free(h); /* a second free changes nothing */
    /* The freed slot is the next one given out, in a later generation. */
    T_OK(ipcp__handle_new(IPCP_HANDLE_REQ, &objs_[1], &h2));
    T_EQ_INT(ipcp__handle_index(h2), ipcp__handle_index(h));
    T_CHECK(h2 != h);
    T_CHECK(ipcp__handle_get(h, IPCP_HANDLE_REQ) == NULL);
    T_CHECK(ipcp__handle_get(h2, IPCP_HANDLE_REQ) == &objs_[1]);
    ipcp__handle_free(h); /* stale: must not free h2 */
    T_CHECK(ipcp__handle_get(h2, IPCP_HANDLE_REQ) == &objs_[1]);
    T_EQ_INT(ipcp__handle_stale(h2), 0);
    /* Not issued: an aligned address, a slot past the last, a later
     * generation of a live slot. */
    T_EQ_INT(ipcp__handle_type((uintptr_t)&objs_[0] & ~(uintptr_t)7), 0);
    T_CHECK(ipcp__handle_get(0xfffffff2, IPCP_HANDLE_REQ) == NULL);
    T_EQ_INT(ipcp__handle_stale(0xfffffff2), 0);
    ipcp__handle_t later = h2 + ((ipcp__handle_t)1 << IPCP_HANDLE_GEN_SHIFT);
    T_CHECK(ipcp__handle_get(later, IPCP_HANDLE_REQ) == NULL);
    T_EQ_INT(ipcp__handle_stale(later), 0);
    ipcp__handle_free(h2);
    return 0;
}

/* More handles than one chunk holds: all distinct, all resolving, all
 * stale once freed. */
static int case_many(void)
{
    enum { N = 5000 };
    static ipcp__handle_t hs[N];
    static int objs[N];
    for (int i = 0; i < N; i++) {
        T_OK(ipcp__handle_new(IPCP_HANDLE_MEM, &objs[i], &hs[i]));
        T_CHECK(hs[i] != 0);
    }
    for (int i = 0; i < N; i++)
        if (ipcp__handle_get(hs[i], IPCP_HANDLE_MEM) != &objs[i])
            T_FAIL("handle %d (0x%llx) does not resolve to its object", i,
                   (unsigned long long)hs[i]);
    for (int i = 0; i < N; i++)
        ipcp__handle_free(hs[i]);
    for (int i = 0; i < N; i++) {
        T_CHECK(ipcp__handle_get(hs[i], IPCP_HANDLE_MEM) == NULL);
        T_EQ_INT(ipcp__handle_stale(hs[i]), 1);
    }
    return 0;
}

/* Writers replace the handles of their objects again and again; readers
 * resolve whatever handle is published for an object and must get that
 * object or nothing - never another one that took a freed slot. */
enum { WRITERS = 2, READERS = 2, PER = 16, ITERS = 200000 };
static int tobjs[WRITERS][PER];
static _Atomic uint64_t pub[WRITERS * PER];
static atomic_int writers_done;
static atomic_long resolved;

static void *writer(void *arg)
{
    int w = (int)(intptr_t)arg;
    uint64_t x = 0x9e3779b97f4a7c15ULL * (uint64_t)(w + 1);
    for (int it = 0; it < ITERS; it++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        int j = (int)(x % PER);
        _Atomic uint64_t *p = &pub[w * PER + j];
        ipcp__handle_t old = atomic_exchange(p, 0), h = 0;
        ipcp__handle_free(old);
        if (old && ipcp__handle_get(old, IPCP_HANDLE_RMEM) != NULL)
            T_FAIL("handle 0x%llx resolves after its free",
                   (unsigned long long)old);
        T_OK(ipcp__handle_new(IPCP_HANDLE_RMEM, &tobjs[w][j], &h));
        T_CHECK(h != old);
        atomic_store(p, h);
    }
    atomic_fetch_add(&writers_done, 1);
    return NULL;
}

static void *reader(void *arg)
{
    (void)arg;
    long n = 0;
    while (atomic_load(&writers_done) < WRITERS) {
        for (int k = 0; k < WRITERS * PER; k++) {
            ipcp__handle_t h = atomic_load(&pub[k]);
            void *o = ipcp__handle_get(h, IPCP_HANDLE_RMEM);
            if (o && o != &tobjs[k / PER][k % PER])
                T_FAIL("handle 0x%llx of object %d resolved to another",
                       (unsigned long long)h, k);
            n += o != NULL;
        }
    }
    atomic_fetch_add(&resolved, n);
    return NULL;
}

static int case_threads(void)
{
    pthread_t t[WRITERS + READERS];
    for (int i = 0; i < WRITERS + READERS; i++)
        T_CHECK(pthread_create(&t[i], NULL, i < WRITERS ? writer : reader,
                               (void *)(intptr_t)i) == 0);
    for (int i = 0; i < WRITERS + READERS; i++)
        T_CHECK(pthread_join(t[i], NULL) == 0);
    for (int k = 0; k < WRITERS * PER; k++) {
        ipcp__handle_t h = atomic_load(&pub[k]);
        T_CHECK(ipcp__handle_get(h, IPCP_HANDLE_RMEM) ==
                &tobjs[k / PER][k % PER]);
        ipcp__handle_free(h);
    }
    /* The readers saw live handles, not only the gaps between them. */
    T_CHECK(atomic_load(&resolved) > 0);
    return 0;
}

/* A slot whose generations come full circle is retired rather than
 * issue its first value again.  Run first in its process, so that the
 * first handle is its slot's first generation; the last generation is
 * forged into the slot rather than reached by 2^36 frees. */
static int case_wrap(void)
{
    ipcp__handle_t first = 0, h = 0, next = 0;
    T_OK(ipcp__handle_new(IPCP_HANDLE_COMM, &objs_[0], &first));
    ipcp__handle_free(first);
    T_OK(ipcp__handle_new(IPCP_HANDLE_COMM, &objs_[1], &h));
    T_EQ_INT(ipcp__handle_index(h), ipcp__handle_index(first));
    const uint64_t mask = ((uint64_t)1 << IPCP_HANDLE_GEN_BITS) - 1;
    const uint64_t low = ((uint64_t)1 << IPCP_HANDLE_GEN_SHIFT) - 1;
    uint64_t last = ((first >> IPCP_HANDLE_GEN_SHIFT) - 1) & mask;
    ipcp__handle_t forged = last << IPCP_HANDLE_GEN_SHIFT | (h & low);
    atomic_store(&ipcp__handle_slot(h)->word, forged);
    T_CHECK(ipcp__handle_get(forged, IPCP_HANDLE_COMM) == &objs_[1]);
    ipcp__handle_free(forged);
    T_CHECK(ipcp__handle_get(forged, IPCP_HANDLE_COMM) == NULL);
    T_OK(ipcp__handle_new(IPCP_HANDLE_COMM, &objs_[2], &next));
    if (ipcp__handle_index(next) == ipcp__handle_index(first))
        T_FAIL("slot %u was given out again after its last generation "
               "(0x%llx, first 0x%llx)",
               ipcp__handle_index(next), (unsigned long long)next,
               (unsigned long long)first);
    T_CHECK(ipcp__handle_get(first, IPCP_HANDLE_COMM) == NULL);
    ipcp__handle_free(next);
    return 0;
}

/* Handles of two owners, and unowned ones, of two types; one of the first
 * owner's freed before: the reap releases exactly the live requests of the
 * first owner and hands each object over once. */
enum { REAP_N = 1500 }; /* more than a chunk */
static int reap_seen[REAP_N];

static void reap_cb(void *obj, void *arg)
{
    int *base = arg;
    reap_seen[(int *)obj - base]++;
}

static int case_reap(void)
{
    static int objs[REAP_N];
    static ipcp__handle_t hs[REAP_N];
    const uint64_t mine = 0x1234, other = 0x5678;
    for (int i = 0; i < REAP_N; i++) {
        switch (i % 4) {
        case 0:
        case 1:
            T_OK(ipcp__handle_new_owned(IPCP_HANDLE_REQ, &objs[i], mine,
                                        &hs[i]));
            break;
        case 2:
            T_OK(ipcp__handle_new_owned(
                i % 8 == 2 ? IPCP_HANDLE_REQ : IPCP_HANDLE_MEM, &objs[i],
                i % 8 == 2 ? other : mine, &hs[i]));
            break;
        default:
            T_OK(ipcp__handle_new(IPCP_HANDLE_REQ, &objs[i], &hs[i]));
        }
    }
    ipcp__handle_free(hs[1]); /* waited for already */
    ipcp__handle_reap(IPCP_HANDLE_REQ, mine, reap_cb, objs);
    for (int i = 0; i < REAP_N; i++) {
        int reaped = (i % 4 == 0) || (i % 4 == 1 && i != 1);
        if (reap_seen[i] != reaped)
            T_FAIL("handle %d (0x%llx): reaped %d times, expected %d", i,
                   (unsigned long long)hs[i], reap_seen[i], reaped);
        void *want = reaped || i == 1 ? NULL : &objs[i];
        unsigned type = i % 8 == 6 ? IPCP_HANDLE_MEM : IPCP_HANDLE_REQ;
        T_CHECK(ipcp__handle_get(hs[i], type) == want);
    }
    for (int i = 0; i < REAP_N; i++)
        ipcp__handle_free(hs[i]);
    return 0;
}

/* Threads that take and release handles one after another, then end:
 * the slots each kept for itself (up to 64) go back to the shared list at
 * its exit, so the table does not grow with the number of threads (200
 * threads keeping 64 slots each would take 12,800 slots). */
enum { EXIT_THREADS = 200, EXIT_PER = 64 };

static void *exit_worker(void *arg)
{
    static int objs[EXIT_PER];
    ipcp__handle_t hs[EXIT_PER];
    (void)arg;
    for (int i = 0; i < EXIT_PER; i++)
        T_OK(ipcp__handle_new(IPCP_HANDLE_REQ, &objs[i], &hs[i]));
    for (int i = 0; i < EXIT_PER; i++)
        T_CHECK(ipcp__handle_free(hs[i]) == 1);
    return NULL;
}

static int case_exit(void)
{
    for (int t = 0; t < EXIT_THREADS; t++) {
        pthread_t th;
        T_CHECK(pthread_create(&th, NULL, exit_worker, NULL) == 0);
        T_CHECK(pthread_join(th, NULL) == 0);
    }
    uint32_t made = atomic_load(&ipcp__hslots);
    if (made > 2 * (1u << IPCP_HANDLE_CHUNK_BITS))
        T_FAIL("%u slots made for %d threads of %d handles each: the "
               "slots a thread kept were not given back at its exit",
               made, EXIT_THREADS, EXIT_PER);
    return 0;
}

int main(int argc, char **argv)
{
    const char *c = argc > 1 ? argv[1] : "";
    if (strcmp(c, "basic") == 0)
        return case_basic();
    if (strcmp(c, "many") == 0)
        return case_many();
    if (strcmp(c, "threads") == 0)
        return case_threads();
    if (strcmp(c, "wrap") == 0)
        return case_wrap();
    if (strcmp(c, "reap") == 0)
        return case_reap();
    if (strcmp(c, "exit") == 0)
        return case_exit();
    T_FAIL("unknown case \"%s\" (basic, many, threads, wrap, reap, exit)", c);
}
