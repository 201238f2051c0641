/* CUDA backend in one process: the driver probe, owns() on every kind of
 * pointer, VMM allocations, exports of both kinds, strict rejection of bad
 * exports, host registration, and queues (copies, flags, notify).  One
 * case per run: test_cuda_backend CASE (--list prints them).  Exits 77 when
 * the backend cannot open here (no driver, no device). */
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#include "common/time.h"
#include "cudatest.h"

static const ipcp__backend_ops_t *ops = &ipcp__cuda_backend_ops;
static ipcp__backend_t *be;

/* ---- Helpers ------------------------------------------------------------- */

/* Makes device's primary context current on this thread (the test's own
 * driver calls need one); returns it retained. */
static CUcontext use_device(int device)
{
    CUdevice dev;
    CUcontext ctx;
    CU_OK(IPCP_CU(cuDeviceGet)(&dev, device));
    CU_OK(IPCP_CU(cuDevicePrimaryCtxRetain)(&ctx, dev));
    CU_OK(IPCP_CU(cuCtxSetCurrent)(ctx));
    return ctx;
}

static void drop_device(int device)
{
    CUdevice dev;
    CU_OK(IPCP_CU(cuDeviceGet)(&dev, device));
    CU_OK(IPCP_CU(cuDevicePrimaryCtxRelease)(dev));
}

/* Fresh pattern data, made on the host and copied to the device. */
static void dev_fill(CUdeviceptr p, size_t len, uint64_t seed)
{
    if (!len)
        return;
    void *h = t_malloc(len);
    t_fill(h, len, seed);
    ct_htod(p, h, len);
    free(h);
}

/* Copies back and checks the pattern of seed at stream offset off. */
static void dev_verify(CUdeviceptr p, size_t len, uint64_t seed, uint64_t off,
                       const char *what)
{
    if (!len)
        return;
    unsigned char *h = t_malloc(len);
    CU_OK(IPCP_CU(cuCtxSynchronize)());
    CU_OK(IPCP_CU(cuMemcpyDtoH)(h, p, len));
    size_t bad = ipcp_pattern_check(h, len, seed, off);
    if (bad != len)
        T_FAIL("%s: byte %zu of %zu differs: expected 0x%02x, got 0x%02x", what,
               bad, len, ipcp_pattern_byte(seed, off + bad), h[bad]);
    free(h);
}

static void host_verify(const void *h, size_t len, uint64_t seed,
                        const char *what)
{
    t_verify(h, len, seed, what);
}

/* A track whose callback raises `done`. */
typedef struct tk {
    ipcp__track_t t;
    atomic_int done;
} tk_t;

static void tk_cb(ipcp__track_t *t)
{
    atomic_store(&ipcp__container_of(t, tk_t, t)->done, 1);
}

static void tk_init(tk_t *k, int pending)
{
    atomic_init(&k->done, 0);
    ipcp__track_init(&k->t, pending, tk_cb, NULL);
}

static void tk_wait(tk_t *k, double timeout_s)
{
    double end = ipcp__now_s() + timeout_s;
    struct timespec ts = {0, 100000};
    while (!atomic_load(&k->done)) {
        if (ipcp__now_s() > end)
            T_FAIL("track not completed after %.1f s", timeout_s);
        nanosleep(&ts, NULL);
    }
}

static void tk_expect(tk_t *k, ipcp_status_t st)
{
    char msg[IPCP_ERRMSG_MAX];
    int got = atomic_load(&k->t.status);
    ipcp__track_errmsg(&k->t, msg, sizeof msg);
    if (got != (int)st)
        T_FAIL("track status %s, expected %s (message: %s)",
               ipcp_strerror((ipcp_status_t)got), ipcp_strerror(st), msg);
}

static uint64_t flag_load(const uint64_t *f)
{
    return __atomic_load_n(f, __ATOMIC_ACQUIRE);
}

/* ---- Cases --------------------------------------------------------------- */

static void case_probe(void)
{
    ipcp__cu_probe_t p;
    T_OK(ipcp__cu_probe(&p));
    T_CHECK(p.ndev >= 1);
    T_CHECK(p.driver_version >= 12000);
    for (int i = 0; i < p.ndev; i++) {
        printf("device %d: %s, pci %s, uva %d, vmm %d, vmm fd %d, memops64 "
               "%d, host va %d, mps %d, peers",
               i, p.dev[i].name, p.dev[i].pci_bus_id, p.dev[i].uva,
               p.dev[i].vmm, p.dev[i].vmm_fd, p.dev[i].memops64,
               p.dev[i].host_va, p.dev[i].mps);
        for (int j = 0; j < p.ndev; j++)
            printf(" %d", p.peer[i][j]);
        printf("\n");
        T_EQ_INT(p.peer[i][i], 1);
        T_EQ_INT(p.dev[i].uva, 1);
        /* The backend asks the driver the same way; a CUDA 13 driver
         * knows the attribute (its headers name it), so never unknown. */
        T_EQ_INT(ops->device_mps(be, i), p.dev[i].mps);
        if (p.driver_version >= 13000)
            T_CHECK(p.dev[i].mps == 0 || p.dev[i].mps == 1);
    }
    T_EQ_INT(p.ndev, be->ndev);
}

static void expect_not_ours(const void *p, const char *what)
{
    ipcp__mem_attr_t a;
    if (ops->owns(be, p, &a))
        T_FAIL("owns(%s %p) said device memory of device %d", what, p,
               a.device);
}

static void expect_ours(const void *p, int device, CUdeviceptr base,
                        size_t min_size)
{
    ipcp__mem_attr_t a;
    T_EQ_INT(ops->owns(be, p, &a), 1);
    T_EQ_INT(a.type, IPCP_MEM_CUDA);
    T_EQ_INT(a.device, device);
    T_EQ_U64(a.base, base);
    T_CHECK(a.size >= min_size);
    T_CHECK(a.buffer_id != 0);
}

static void case_owns(void)
{
    CUdeviceptr d, m;
    use_device(0);
    CU_OK(IPCP_CU(cuMemAlloc)(&d, 1 << 20));
    expect_ours((void *)(uintptr_t)(d + 3), 0, d, 1 << 20);
    expect_ours((void *)(uintptr_t)(d + (1 << 20) - 1), 0, d, 1 << 20);

    void *h = t_malloc(1 << 16);
    int local = 0;
    expect_not_ours(h, "malloc");
    expect_not_ours(&local, "stack");
    expect_not_ours(NULL, "NULL");
    CU_OK(IPCP_CU(cuMemHostRegister)(h, 1 << 16, CU_MEMHOSTREGISTER_PORTABLE));
    expect_not_ours(h, "registered host");
    CU_OK(IPCP_CU(cuMemHostUnregister)(h));
    CU_OK(IPCP_CU(cuMemAllocManaged)(&m, 4096, CU_MEM_ATTACH_GLOBAL));
    expect_not_ours((void *)(uintptr_t)m, "managed");
    CU_OK(IPCP_CU(cuMemFree)(m));
    CU_OK(IPCP_CU(cuMemFree)(d));
    free(h);
    drop_device(0);
}

static CUdeviceptr owns_thread_ptr;

/* A thread that never touched CUDA has no current context. */
static void *owns_thread_main(void *arg)
{
    CUcontext cur = (CUcontext)1;
    (void)arg;
    CU_OK(IPCP_CU(cuCtxGetCurrent)(&cur));
    T_CHECK(cur == NULL);
    expect_ours((void *)(uintptr_t)(owns_thread_ptr + 5), 0, owns_thread_ptr,
                4096);
    expect_not_ours(&cur, "stack of a thread without context");
    CU_OK(IPCP_CU(cuCtxGetCurrent)(&cur));
    T_CHECK(cur == NULL); /* owns() popped what it pushed */
    return NULL;
}

static void case_owns_thread(void)
{
    pthread_t th;
    use_device(0);
    CU_OK(IPCP_CU(cuMemAlloc)(&owns_thread_ptr, 4096));
    T_EQ_INT(pthread_create(&th, NULL, owns_thread_main, NULL), 0);
    T_EQ_INT(pthread_join(th, NULL), 0);
    CU_OK(IPCP_CU(cuMemFree)(owns_thread_ptr));
    drop_device(0);
}

static void case_owns_peer(void)
{
    CUdeviceptr d;
    if (be->ndev < 2) {
        printf("SKIP: one CUDA device\n");
        exit(T_SKIP);
    }
    use_device(1);
    CU_OK(IPCP_CU(cuMemAlloc)(&d, 1 << 20));
    use_device(0); /* owns must report device 1 from device 0's context */
    expect_ours((void *)(uintptr_t)(d + 7), 1, d, 1 << 20);
    use_device(1);
    CU_OK(IPCP_CU(cuMemFree)(d));
    drop_device(1);
    drop_device(1);
    drop_device(0);
}

static void case_alloc(void)
{
    void *p = NULL, *h = NULL, *p0 = NULL, *h0 = NULL;
    ipcp__mem_attr_t a;
    size_t len = (1 << 20) + 3;
    use_device(0);
    T_OK(ops->mem_alloc(be, 0, 0, &p0, &h0));
    T_EQ_INT(ops->owns(be, p0, &a), 1);
    T_EQ_U64(a.base, (uintptr_t)p0);
    T_CHECK(a.size > 0);
    for (int d = 0; d < be->ndev; d++) {
        uint64_t seed = t_fresh_seed();
        T_OK(ops->mem_alloc(be, len, d, &p, &h));
        expect_ours(p, d, (uintptr_t)p, len);
        expect_ours((char *)p + len - 1, d, (uintptr_t)p, len);
        dev_fill((uintptr_t)p, len, seed);
        dev_verify((uintptr_t)p, len, seed, 0, "VMM allocation");
        T_OK(ops->mem_free(be, h));
    }
    T_STATUS(ops->mem_alloc(be, 16, be->ndev, &p, &h), IPCP_ERR_INVALID);
    T_STATUS(ops->mem_alloc(be, 16, -1, &p, &h), IPCP_ERR_INVALID);
    ipcp__cuda_alloc_t fake;
    memset(&fake, 0, sizeof fake);
    T_STATUS(ops->mem_free(be, &fake), IPCP_ERR_INVALID);
    T_OK(ops->mem_free(be, h0));
    drop_device(0);
}

static void case_export(void)
{
    void *p = NULL, *h = NULL;
    ipcp__export_t e;
    ipcp__mem_attr_t a;
    int fd = -2;
    size_t len = (1 << 20) + 3;
    use_device(0);
    T_OK(ops->mem_alloc(be, len, 0, &p, &h));
    T_EQ_INT(ops->owns(be, p, &a), 1);
    /* VMM: the export's base is the pointer; size runs to the end. */
    T_OK(ops->mem_export(be, h, (char *)p + 5, len - 5, &e, &fd));
    T_EQ_INT(e.kind, IPCP_EXPORT_CUDA_VMM);
    T_CHECK(fd >= 0);
    T_EQ_U64(e.size, a.size - 5);
    close(fd);
    /* A NULL handle finds our allocation. */
    fd = -2;
    T_OK(ops->mem_export(be, NULL, (char *)p + 7, 10, &e, &fd));
    T_EQ_INT(e.kind, IPCP_EXPORT_CUDA_VMM);
    T_EQ_U64(e.size, a.size - 7);
    close(fd);
    T_STATUS(ops->mem_export(be, h, p, a.size + 1, &e, &fd),
             IPCP_ERR_OUT_OF_RANGE);
    T_OK(ops->mem_free(be, h));

    /* Legacy: user memory, at an odd offset. */
    CUdeviceptr d, base;
    size_t bsize;
    CU_OK(IPCP_CU(cuMemAlloc)(&d, 1 << 20));
    CU_OK(IPCP_CU(cuMemGetAddressRange)(&base, &bsize, d + 3));
    fd = -2;
    T_OK(ops->mem_export(be, NULL, (void *)(uintptr_t)(d + 3), 1000, &e, &fd));
    T_EQ_INT(e.kind, IPCP_EXPORT_CUDA_LEGACY);
    T_EQ_INT(fd, -1);
    T_EQ_U64(e.size, bsize - (d + 3 - base));
    CU_OK(IPCP_CU(cuMemFree)(d));

    void *m = t_malloc(4096);
    T_STATUS(ops->mem_export(be, NULL, m, 16, &e, &fd), IPCP_ERR_UNSUPPORTED);
    free(m);
    drop_device(0);
}

/* Importing our own fd maps the same memory at a second address. */
static void case_vmm_self_import(void)
{
    void *p = NULL, *h = NULL, *q = NULL, *ih = NULL;
    ipcp__export_t e;
    int fd = -1;
    size_t len = (4 << 20) + 3;
    uint64_t seed = t_fresh_seed(), seed2 = t_fresh_seed();
    use_device(0);
    T_OK(ops->mem_alloc(be, len, 0, &p, &h));
    dev_fill((uintptr_t)p, len, seed);
    T_OK(ops->mem_export(be, h, (char *)p + 4096, len - 4096, &e, &fd));
    T_OK(ops->mem_import(be, &e, &fd, fd >= 0, 0, &q, &ih));
    T_CHECK(q != (char *)p + 4096);
    dev_verify((uintptr_t)q, len - 4096, seed, 4096, "imported mapping");
    dev_fill((uintptr_t)q, 1000, seed2);
    dev_verify((uintptr_t)p + 4096, 1000, seed2, 0, "write through import");
    T_OK(ops->mem_unimport(be, ih));
    close(fd);
    T_OK(ops->mem_free(be, h));
    drop_device(0);
}

static void expect_rejected2(const ipcp__export_t *e, const int *fds, int nfds,
                             const char *what)
{
    void *q = NULL, *ih = NULL;
    ipcp_status_t st = ops->mem_import(be, e, fds, nfds, 0, &q, &ih);
    if (st != IPCP_ERR_BAD_DESCRIPTOR)
        T_FAIL("import of %s returned %s, expected IPCP_ERR_BAD_DESCRIPTOR "
               "(%s)",
               what, ipcp_strerror(st), ipcp_last_error());
}

static void expect_rejected(const ipcp__export_t *e, int fd, const char *what)
{
    expect_rejected2(e, &fd, fd >= 0, what);
}

static void corrupt_and_check(const ipcp__export_t *good, int fd)
{
    ipcp__export_t e = *good;
    e.len -= 8;
    expect_rejected(&e, fd, "a short data length");
    e = *good;
    e.data[9] ^= 0x40;
    expect_rejected(&e, fd, "flipped data");
    e = *good;
    e.size += 1;
    expect_rejected(&e, fd, "a larger size");
    e = *good;
    e.size -= 1;
    expect_rejected(&e, fd, "a smaller size");
}

static void case_import_bad(void)
{
    void *p = NULL, *h = NULL, *q = NULL, *ih = NULL;
    ipcp__export_t e, l;
    int fd = -1, lfd = -1;
    CUdeviceptr d;
    use_device(0);
    T_OK(ops->mem_alloc(be, 1 << 20, 0, &p, &h));
    T_OK(ops->mem_export(be, h, (char *)p + 64, 100, &e, &fd));
    corrupt_and_check(&e, fd);
    expect_rejected(&e, -1, "a VMM export without its fd");
    ipcp__export_t k = e;
    k.kind = IPCP_EXPORT_HOST_MEMFD;
    expect_rejected(&k, fd, "a host kind");
    k.kind = 77;
    expect_rejected(&k, fd, "an unknown kind");
    T_STATUS(ops->mem_import(be, &e, &fd, fd >= 0, be->ndev, &q, &ih),
             IPCP_ERR_INVALID);

    CU_OK(IPCP_CU(cuMemAlloc)(&d, 1 << 20));
    T_OK(ops->mem_export(be, NULL, (void *)(uintptr_t)(d + 3), 100, &l, &lfd));
    corrupt_and_check(&l, -1);
    CU_OK(IPCP_CU(cuMemFree)(d));
    close(fd);
    T_OK(ops->mem_free(be, h));
    drop_device(0);
}

static void case_shm(void)
{
    size_t len = 1 << 20;
    void *m = t_malloc(len), *h1 = NULL, *h2 = NULL;
    use_device(0);
    T_OK(ops->shm_register(be, m, len, 0, &h1));
    T_OK(ops->shm_register(be, m, len, be->ndev - 1, &h2));
    expect_not_ours(m, "registered channel");
    ops->shm_unregister(be, h1);
    /* Still registered once: a second registration of the range fails. */
    T_CHECK(IPCP_CU(cuMemHostRegister)(m, len, CU_MEMHOSTREGISTER_PORTABLE) !=
            CUDA_SUCCESS);
    ops->shm_unregister(be, h2);
    /* Gone: the driver accepts it again. */
    CU_OK(IPCP_CU(cuMemHostRegister)(m, len, CU_MEMHOSTREGISTER_PORTABLE));
    CU_OK(IPCP_CU(cuMemHostUnregister)(m));
    free(m);
    drop_device(0);
}

/* Host memory laid out as the engine uses it: data, then flags one per
 * cache line, registered for device `device`. */
typedef struct ring {
    unsigned char *in, *out;
    uint64_t *flags;
    size_t n;
    void *mem, *reg;
} ring_t;

static void ring_init(ring_t *r, size_t n, int device)
{
    size_t data = ipcp__align_up(n, 4096);
    r->n = n;
    r->mem = t_malloc(2 * data + 4096);
    memset(r->mem, 0, 2 * data + 4096);
    r->in = r->mem;
    r->out = (unsigned char *)r->mem + data;
    r->flags = (uint64_t *)((unsigned char *)r->mem + 2 * data);
    T_OK(ops->shm_register(be, r->mem, 2 * data + 4096, device, &r->reg));
}

static void ring_fini(ring_t *r)
{
    ops->shm_unregister(be, r->reg);
    free(r->mem);
}

#define FLAG(r, i) (&(r)->flags[(i) * (IPCP_CACHE_LINE / 8)])

/* q1 waits for q0's flag, so its copies run after q0's: host -> A on q0,
 * then A -> B -> host on q1, ordered only by the flag. */
static void case_queue(void)
{
    ipcp__queue_t *q0, *q1;
    ring_t r;
    tk_t k;
    CUdeviceptr a, b;
    size_t n = (4 << 20) + 3;
    uint64_t seed = t_fresh_seed();
    use_device(0);
    ring_init(&r, n, 0);
    t_fill(r.in, n, seed);
    CU_OK(IPCP_CU(cuMemAlloc)(&a, n));
    CU_OK(IPCP_CU(cuMemAlloc)(&b, n));
    T_OK(ops->queue_create(be, 0, &q0));
    T_OK(ops->queue_create(be, 0, &q1));
    tk_init(&k, 1);
    T_OK(ops->flag_wait(q1, FLAG(&r, 0), 1, NULL, &k.t));
    T_OK(ops->copy(q1, (void *)(uintptr_t)b, (void *)(uintptr_t)a, n, &k.t));
    T_OK(ops->copy(q1, r.out, (void *)(uintptr_t)b, n, &k.t));
    T_OK(ops->flag_write(q1, FLAG(&r, 1), 7, &k.t));
    T_OK(ops->notify(q1, &k.t));
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
    T_EQ_INT(atomic_load(&k.done), 0); /* still waiting for the flag */
    T_OK(ops->copy(q0, (void *)(uintptr_t)a, r.in, n, &k.t));
    T_OK(ops->flag_write(q0, FLAG(&r, 0), 1, &k.t));
    tk_wait(&k, 30);
    tk_expect(&k, IPCP_OK);
    host_verify(r.out, n, seed, "host -> device -> device -> host");
    T_EQ_U64(flag_load(FLAG(&r, 1)), 7);
    ipcp__track_destroy(&k.t);
    ops->queue_destroy(q0);
    ops->queue_destroy(q1);
    CU_OK(IPCP_CU(cuMemFree)(a));
    CU_OK(IPCP_CU(cuMemFree)(b));
    ring_fini(&r);
    drop_device(0);
}

/* Counters may wrap: the wait is (int64_t)(flag - value) >= 0. */
static void case_queue_wrap(void)
{
    ipcp__queue_t *q0, *q1;
    ring_t r;
    tk_t k;
    use_device(0);
    ring_init(&r, 64, 0);
    __atomic_store_n(FLAG(&r, 0), UINT64_MAX - 15, __ATOMIC_RELEASE);
    T_OK(ops->queue_create(be, 0, &q0));
    T_OK(ops->queue_create(be, 0, &q1));
    tk_init(&k, 1);
    T_OK(ops->flag_wait(q1, FLAG(&r, 0), 16, NULL, &k.t)); /* wrapped */
    T_OK(ops->flag_write(q1, FLAG(&r, 1), 1, &k.t));
    T_OK(ops->notify(q1, &k.t));
    T_OK(ops->flag_write(q0, FLAG(&r, 0), 17, NULL));
    tk_wait(&k, 30);
    tk_expect(&k, IPCP_OK);
    T_EQ_U64(flag_load(FLAG(&r, 1)), 1);
    ipcp__track_destroy(&k.t);
    ops->queue_destroy(q0);
    ops->queue_destroy(q1);
    ring_fini(&r);
    drop_device(0);
}

/* A track that failed before enqueueing skips copies and tracked flag
 * writes; an untracked write and the notify still happen. */
static void case_queue_skip(void)
{
    ipcp__queue_t *q;
    ring_t r;
    tk_t k;
    CUdeviceptr a;
    size_t n = 1 << 16;
    use_device(0);
    ring_init(&r, n, 0);
    memset(r.out, 0x5a, n);
    t_fill(r.in, n, t_fresh_seed());
    CU_OK(IPCP_CU(cuMemAlloc)(&a, n));
    ct_memset(a, 0x5a, n);
    T_OK(ops->queue_create(be, 0, &q));
    tk_init(&k, 1);
    ipcp__track_fail(&k.t, IPCP_ERR_PEER_LOST, "failed on purpose");
    T_OK(ops->copy(q, (void *)(uintptr_t)a, r.in, n, &k.t));
    T_OK(ops->copy(q, r.out, (void *)(uintptr_t)a, n, &k.t));
    T_OK(ops->flag_write(q, FLAG(&r, 0), 3, &k.t));
    T_OK(ops->flag_write(q, FLAG(&r, 1), 4, NULL));
    T_OK(ops->notify(q, &k.t));
    tk_wait(&k, 30);
    tk_expect(&k, IPCP_ERR_PEER_LOST);
    T_EQ_U64(flag_load(FLAG(&r, 0)), 0);
    T_EQ_U64(flag_load(FLAG(&r, 1)), 4);
    for (size_t i = 0; i < n; i++)
        if (r.out[i] != 0x5a)
            T_FAIL("byte %zu written by a skipped copy", i);
    ipcp__track_destroy(&k.t);
    ops->queue_destroy(q);
    CU_OK(IPCP_CU(cuMemFree)(a));
    ring_fini(&r);
    drop_device(0);
}

/* A stream of device 1 copies device 0's VMM memory into device 1's. */
static void case_queue_peer(void)
{
    void *p0 = NULL, *h0 = NULL, *p1 = NULL, *h1 = NULL;
    ipcp__queue_t *q;
    ring_t r;
    tk_t k;
    size_t n = (16 << 20) + 3;
    uint64_t seed = t_fresh_seed();
    if (be->ndev < 2 || !be->peer[1][0]) {
        printf("SKIP: needs 2 CUDA devices with peer access\n");
        exit(T_SKIP);
    }
    use_device(0);
    T_OK(ops->mem_alloc(be, n, 0, &p0, &h0));
    T_OK(ops->mem_alloc(be, n, 1, &p1, &h1));
    dev_fill((uintptr_t)p0, n, seed);
    ring_init(&r, 64, 1);
    T_OK(ops->queue_create(be, 1, &q));
    tk_init(&k, 1);
    T_OK(ops->copy(q, p1, p0, n, &k.t));
    T_OK(ops->flag_write(q, FLAG(&r, 0), 9, &k.t));
    T_OK(ops->notify(q, &k.t));
    tk_wait(&k, 30);
    tk_expect(&k, IPCP_OK);
    T_EQ_U64(flag_load(FLAG(&r, 0)), 9);
    dev_verify((uintptr_t)p1, n, seed, 0, "peer copy");
    ipcp__track_destroy(&k.t);
    ops->queue_destroy(q);
    ring_fini(&r);
    T_OK(ops->mem_free(be, h0));
    T_OK(ops->mem_free(be, h1));
    drop_device(0);
}

/* VMM memory another allocator mapped as three allocations of one
 * granule back to back (as PyTorch's expandable segments do): exported as
 * pieces whose fds are made for each share, imported back to back, and
 * its identity changed when a piece is mapped anew. */
static void case_foreign_pieces(void)
{
    CUmemAllocationProp prop;
    CUmemAccessDesc acc;
    CUmemGenericAllocationHandle h[4];
    CUdeviceptr va;
    ipcp__export_t e;
    size_t gran = 0, sz = 0;
    uintptr_t base = 0;
    uint64_t id = 0, id2 = 0;
    int fd = 0, fds[4];
    void *q = NULL, *ih = NULL;
    uint64_t seed = t_fresh_seed();
    use_device(0);
    ct_vmm_prop(&prop, 0, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, &gran);
    memset(&acc, 0, sizeof(acc));
    acc.location = prop.location;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CU_OK(IPCP_CU(cuMemAddressReserve)(&va, 4 * gran, 0, 0, 0));
    for (int i = 0; i < 3; i++) {
        CU_OK(IPCP_CU(cuMemCreate)(&h[i], gran, &prop, 0));
        CU_OK(IPCP_CU(cuMemMap)(va + i * gran, gran, 0, h[i], 0));
    }
    CU_OK(IPCP_CU(cuMemSetAccess)(va, 3 * gran, &acc, 1));
    void *p = (void *)(uintptr_t)(va + gran / 2);
    size_t len = 2 * gran; /* from the middle of the first to the third */
    dev_fill((CUdeviceptr)(uintptr_t)p, len, seed);
    T_CHECK(ops->mem_span(be, p, len, &base, &sz, &id));
    T_EQ_U64(base, va);
    T_EQ_U64(sz, 3 * gran);
    T_CHECK(ops->mem_span(be, p, len, &base, &sz, &id2));
    T_EQ_U64(id2, id); /* the same pieces: the same identity */
    T_CHECK(!ops->mem_span(be, p, 3 * gran, &base, &sz, &id2)); /* unmapped */
    T_OK(ops->mem_export(be, NULL, p, len, &e, &fd));
    T_EQ_INT(fd, -1); /* made at each share instead */
    T_EQ_U64(e.size, 3 * gran - gran / 2);
    T_EQ_INT(ops->mem_share(be, p, &e, fds, 2), -1);
    T_MSG_HAS("room for 2");
    T_EQ_INT(ops->mem_share(be, p, &e, fds, 4), 3);
    expect_rejected2(&e, fds, 2, "two fds for three pieces");
    T_OK(ops->mem_import(be, &e, fds, 3, 0, &q, &ih));
    dev_verify((CUdeviceptr)(uintptr_t)q, len, seed, 0, "imported pieces");
    T_OK(ops->mem_unimport(be, ih));
    for (int i = 0; i < 3; i++)
        close(fds[i]);
    /* The third allocation replaced at its address. */
    CU_OK(IPCP_CU(cuMemUnmap)(va + 2 * gran, gran));
    CU_OK(IPCP_CU(cuMemRelease)(h[2]));
    CU_OK(IPCP_CU(cuMemCreate)(&h[3], gran, &prop, 0));
    CU_OK(IPCP_CU(cuMemMap)(va + 2 * gran, gran, 0, h[3], 0));
    CU_OK(IPCP_CU(cuMemSetAccess)(va + 2 * gran, gran, &acc, 1));
    T_CHECK(ops->mem_span(be, p, len, &base, &sz, &id2));
    T_CHECK(id2 != id);
    CU_OK(IPCP_CU(cuMemUnmap)(va, 3 * gran));
    CU_OK(IPCP_CU(cuMemRelease)(h[0]));
    CU_OK(IPCP_CU(cuMemRelease)(h[1]));
    CU_OK(IPCP_CU(cuMemRelease)(h[3]));
    CU_OK(IPCP_CU(cuMemAddressFree)(va, 4 * gran));
    drop_device(0);
}

/* Memory of a cudaMallocAsync pool made with fd handles: one allocation
 * is one region, exported through the pool (its fd made for each share),
 * imported and read here; an allocation made again at the same address
 * has another buffer id; the default pool's memory is refused. */
static void case_pool(void)
{
    CUmemPoolProps pp;
    CUmemoryPool pool;
    CUdeviceptr d, d2, dd;
    ipcp__mem_attr_t a, a2;
    ipcp__export_t e;
    int fd = -2, pfd = -1;
    void *q = NULL, *ih = NULL;
    size_t len = (1 << 20) + 3;
    uint64_t seed = t_fresh_seed();
    use_device(0);
    memset(&pp, 0, sizeof(pp));
    pp.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    pp.handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    pp.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    pp.location.id = 0;
    CU_OK(IPCP_CU(cuMemPoolCreate)(&pool, &pp));
    CU_OK(IPCP_CU(cuMemAllocFromPoolAsync)(&d, len, pool, NULL));
    CU_OK(IPCP_CU(cuStreamSynchronize)(NULL));
    dev_fill(d, len, seed);
    T_EQ_INT(ops->owns(be, (void *)(uintptr_t)(d + 5), &a), 1);
    T_EQ_U64(a.base, d); /* the allocation, not the pool's piece */
    T_CHECK(a.size >= len);
    T_EQ_U64(a.map_base, d);
    T_EQ_U64(a.map_size, a.size);
    T_OK(ops->mem_export(be, NULL, (void *)(uintptr_t)(d + 5), len - 5, &e,
                         &fd));
    T_EQ_INT(e.kind, IPCP_EXPORT_CUDA_POOL);
    T_EQ_INT(fd, -1); /* made at each share instead */
    T_EQ_U64(e.size, a.size - 5);
    T_EQ_INT(ops->mem_share(be, (void *)(uintptr_t)(d + 5), &e, &pfd, 1), 1);
    corrupt_and_check(&e, pfd);
    expect_rejected2(&e, NULL, 0, "a pool export without its pool's fd");
    T_OK(ops->mem_import(be, &e, &pfd, 1, 0, &q, &ih));
    dev_verify((CUdeviceptr)(uintptr_t)q, len - 5, seed, 5,
               "imported pool "
               "allocation");
    T_OK(ops->mem_unimport(be, ih));
    close(pfd);
    /* Freed and made again: at the same address, another buffer id. */
    CU_OK(IPCP_CU(cuMemFreeAsync)(d, NULL));
    CU_OK(IPCP_CU(cuMemAllocFromPoolAsync)(&d2, len, pool, NULL));
    CU_OK(IPCP_CU(cuStreamSynchronize)(NULL));
    T_EQ_INT(ops->owns(be, (void *)(uintptr_t)d2, &a2), 1);
    if (d2 == d)
        T_CHECK(a2.buffer_id != a.buffer_id);
    printf("pool allocation again at %s address, buffer ids %llu, %llu\n",
           d2 == d ? "the same" : "another", (unsigned long long)a.buffer_id,
           (unsigned long long)a2.buffer_id);
    CU_OK(IPCP_CU(cuMemFreeAsync)(d2, NULL));
    CU_OK(IPCP_CU(cuStreamSynchronize)(NULL));
    CU_OK(IPCP_CU(cuMemPoolDestroy)(pool));
    /* The device's default pool has no shareable handle type. */
    CU_OK(IPCP_CU(cuMemAllocAsync)(&dd, len, NULL));
    CU_OK(IPCP_CU(cuStreamSynchronize)(NULL));
    T_STATUS(ops->mem_export(be, NULL, (void *)(uintptr_t)dd, len, &e, &fd),
             IPCP_ERR_UNSUPPORTED);
    T_MSG_HAS("cannot be shared");
    CU_OK(IPCP_CU(cuMemFreeAsync)(dd, NULL));
    CU_OK(IPCP_CU(cuStreamSynchronize)(NULL));
    drop_device(0);
}

static const struct {
    const char *name;
    void (*fn)(void);
} cases[] = {
    {"probe", case_probe},
    {"owns", case_owns},
    {"owns_thread", case_owns_thread},
    {"owns_peer", case_owns_peer},
    {"alloc", case_alloc},
    {"export", case_export},
    {"vmm_self_import", case_vmm_self_import},
    {"import_bad", case_import_bad},
    {"foreign_pieces", case_foreign_pieces},
    {"pool", case_pool},
    {"shm", case_shm},
    {"queue", case_queue},
    {"queue_wrap", case_queue_wrap},
    {"queue_skip", case_queue_skip},
    {"queue_peer", case_queue_peer},
};

int main(int argc, char **argv)
{
    int rc, i = t_pick_case(argc, argv, cases, sizeof(cases) / sizeof(cases[0]),
                            sizeof(cases[0]), &rc);
    if (i < 0)
        return rc;
    ipcp_status_t st = ops->open(NULL, &be);
    if (st == IPCP_ERR_UNSUPPORTED) {
        printf("SKIP: CUDA backend unavailable: %s\n", ipcp_last_error());
        return T_SKIP;
    }
    T_OK(st);
    cases[i].fn();
    ops->close(be);
    return 0;
}
