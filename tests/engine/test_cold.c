/* When the device backend opens (engine/dev.c), between two processes on a
 * machine without a GPU: a fake device backend (the host backend's
 * functions, with "device memory" that is host memory it keeps a list of)
 * counts its opens.  Its present() answers what the test sets, as CUDA's
 * answers whether libcuda.so.1 is loaded.
 *
 *   test_cold hostonly|alloc|owned|race|peer|heap|heapask|stack|stackask
 *
 * hostonly: host buffers only, the library "not loaded": never opened.
 * alloc:    a device allocation opens it, once for several.
 * owned:    the library loaded and a buffer the backend owns (as one from
 *           the user's cudaMalloc): the transfer opens it, once.
 * race:     eight threads allocating device memory at once open it once.
 * peer:     rank 1 sends from device memory into rank 0's host buffer;
 *           rank 0 never opens its backend and gets every byte.
 * heap:     the library loaded, host buffers in the brk heap, a backend
 *           whose memory is never there (heap_free): never opened.
 * heapask:  the same with a backend that does not say so: opened, once.
 * stack:    host buffers on the caller's stack, a backend whose memory is
 *           never there: never opened.
 * stackask: the same with a backend that does not say so: opened, once. */
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include "backend/backend.h"
#include "fakedev.h"
#include "testutil.h"

enum { TAG_SEED = 1, TAG_MSG = 7 };

/* ---- The fake device backend ------------------------------------------- */

static const ipcp__backend_ops_t *const H = &ipcp__host_backend_ops;
static ipcp__backend_ops_t fk_ops;
static atomic_int fk_opens;
static atomic_int fk_loaded; /* what present() answers */

static ipcp_status_t fk_open(const ipcp__config_t *cfg, ipcp__backend_t **be)
{
    atomic_fetch_add(&fk_opens, 1);
    /* As slow as a cuInit, so that racing first uses overlap. */
    usleep(20000);
    return H->open(cfg, be);
}

static int fk_present(void)
{
    return atomic_load(&fk_loaded);
}

/* The host backend's queues copy the fake device memory (host memory). */
static void fk_install(void)
{
    fakedev_ops(&fk_ops);
    fk_ops.open = fk_open;
    fk_ops.present = fk_present;
    ipcp__device_backend_for_tests = &fk_ops;
}

/* "Device memory" the user allocated outside the library (cudaMalloc). */
static void *fk_user_alloc(size_t len)
{
    void *p = t_malloc(len);
    fakedev_add(p, len, NULL);
    return p;
}

/* ---- Transfers ------------------------------------------------------------
 */

static const size_t sizes[] = {8, 4096, 100000, 3u << 20};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

/* Rank 1 sends each size up to upto from src, rank 0 receives each into
 * dst; every byte is checked. */
static void one_way(ipcp_comm_t *comm, void *src, void *dst, size_t upto)
{
    for (size_t i = 0; i < NSIZES && sizes[i] <= upto; i++) {
        uint64_t seed = t_shared_seed(comm, TAG_SEED) + i;
        ipcp_request_t *req;
        if (t_rank == 1) {
            t_fill(src, sizes[i], seed);
            T_OK(ipcp_isend(comm, src, sizes[i], 0, TAG_MSG, &req));
            T_OK(ipcp_wait(req, NULL));
        } else {
            memset(dst, 0, sizes[i]);
            T_OK(ipcp_irecv(comm, dst, sizes[i], 1, TAG_MSG, &req));
            T_OK(ipcp_wait(req, NULL));
            t_verify(dst, sizes[i], seed, "received");
        }
    }
    T_OK(ipcp_barrier(comm));
}

#define BIG (3u << 20)

static void hostonly(ipcp_comm_t *comm)
{
    void *a = t_malloc(BIG), *b = t_malloc(BIG);
    one_way(comm, a, b, BIG);
    T_EQ_INT(atomic_load(&fk_opens), 0);
    free(a);
    free(b);
}

static void alloc(ipcp_comm_t *comm)
{
    ipcp_alloc_params_t p;
    void *a, *b;
    ipcp_alloc_params_init(&p);
    p.type = IPCP_MEM_CUDA;
    T_EQ_INT(atomic_load(&fk_opens), 0);
    T_OK(ipcp_mem_alloc(comm, BIG, &p, &a));
    T_EQ_INT(atomic_load(&fk_opens), 1);
    T_OK(ipcp_mem_alloc(comm, BIG, &p, &b));
    one_way(comm, a, b, BIG);
    T_EQ_INT(atomic_load(&fk_opens), 1);
    T_OK(ipcp_mem_free(comm, a));
    T_OK(ipcp_mem_free(comm, b));
}

static void owned(ipcp_comm_t *comm)
{
    void *a = fk_user_alloc(BIG), *b = fk_user_alloc(BIG);
    T_EQ_INT(atomic_load(&fk_opens), 0);
    one_way(comm, a, b, BIG);
    T_EQ_INT(atomic_load(&fk_opens), 1);
}

/* Below malloc's first mmap threshold (128 KiB): from the brk heap. */
#define SMALL 100000u

/* Every classified buffer is in the heap here: the seeds are fixed (a
 * shared one would travel in a buffer on the stack), and each receive's
 * buffer is cleared first. */
static void heap(ipcp_comm_t *comm)
{
    unsigned char *a = t_malloc(SMALL), *b = t_malloc(SMALL);
    for (size_t i = 0; i < NSIZES && sizes[i] <= SMALL; i++) {
        uint64_t seed = 0x5eed0000u + i;
        if (t_rank == 1) {
            t_fill(a, sizes[i], seed);
            T_OK(ipcp_send(comm, a, sizes[i], 0, TAG_MSG));
        } else {
            memset(b, 0, sizes[i]);
            T_OK(ipcp_recv(comm, b, sizes[i], 1, TAG_MSG, NULL));
            t_verify(b, sizes[i], seed, "received");
        }
    }
    T_EQ_INT(atomic_load(&fk_opens), fk_ops.heap_free && T_HEAP_MALLOC ? 0 : 1);
    free(a);
    free(b);
}

/* Every classified buffer is on the caller's stack (8 B and 4 KiB
 * messages, and the seed shared through one): never opened where the
 * backend's memory is never there. */
static void stack(ipcp_comm_t *comm)
{
    unsigned char a[4096], b[4096];
    uint64_t seed = t_shared_seed(comm, TAG_MSG + 1);
    for (size_t i = 0; i < NSIZES && sizes[i] <= sizeof(a); i++) {
        if (t_rank == 1) {
            t_fill(a, sizes[i], seed + i);
            T_OK(ipcp_send(comm, a, sizes[i], 0, TAG_MSG));
        } else {
            memset(b, 0, sizes[i]);
            T_OK(ipcp_recv(comm, b, sizes[i], 1, TAG_MSG, NULL));
            t_verify(b, sizes[i], seed + i, "received");
        }
    }
    int own = t_on_own_stack(a) && t_on_own_stack(&seed);
    T_EQ_INT(atomic_load(&fk_opens), fk_ops.heap_free && own ? 0 : 1);
}

#define NTHREADS 8
static pthread_barrier_t race_bar;
typedef struct race_arg {
    ipcp_comm_t *comm;
    void *ptr;
} race_arg_t;

static void *race_main(void *arg)
{
    race_arg_t *a = arg;
    ipcp_alloc_params_t p;
    ipcp_alloc_params_init(&p);
    p.type = IPCP_MEM_CUDA;
    pthread_barrier_wait(&race_bar);
    T_OK(ipcp_mem_alloc(a->comm, 4096, &p, &a->ptr));
    return NULL;
}

static void race(ipcp_comm_t *comm)
{
    pthread_t th[NTHREADS];
    race_arg_t args[NTHREADS];
    pthread_barrier_init(&race_bar, NULL, NTHREADS);
    for (int i = 0; i < NTHREADS; i++) {
        args[i].comm = comm;
        args[i].ptr = NULL;
        T_EQ_INT(pthread_create(&th[i], NULL, race_main, &args[i]), 0);
    }
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&race_bar);
    T_EQ_INT(atomic_load(&fk_opens), 1);
    for (int i = 0; i < NTHREADS; i++)
        T_OK(ipcp_mem_free(comm, args[i].ptr));
}

static void peer(ipcp_comm_t *comm)
{
    void *src = NULL, *dst = NULL;
    if (t_rank == 1) {
        ipcp_alloc_params_t p;
        ipcp_alloc_params_init(&p);
        p.type = IPCP_MEM_CUDA;
        T_OK(ipcp_mem_alloc(comm, BIG, &p, &src));
    } else {
        dst = t_malloc(BIG);
    }
    one_way(comm, src, dst, BIG);
    T_EQ_INT(atomic_load(&fk_opens), t_rank == 1 ? 1 : 0);
    if (src)
        T_OK(ipcp_mem_free(comm, src));
    free(dst);
}

/* ---- Cases ----------------------------------------------------------------
 */

typedef struct cold_case {
    const char *name;
    void (*run)(ipcp_comm_t *comm);
    int loaded;    /* present() answers 1 */
    int heap_free; /* the backend's memory is never in the brk heap */
} cold_case_t;

static const cold_case_t cases[] = {
    {"hostonly", hostonly, 0, 0}, {"alloc", alloc, 0, 0},
    {"owned", owned, 1, 0},       {"race", race, 0, 0},
    {"peer", peer, 0, 0},         {"heap", heap, 1, 1},
    {"heapask", heap, 1, 0},      {"stack", stack, 1, 1},
    {"stackask", stack, 1, 0},
};

static int pick(int argc, char **argv)
{
    int rc, i = t_pick_case(argc, argv, cases, sizeof(cases) / sizeof(cases[0]),
                            sizeof(cases[0]), &rc);
    if (i < 0)
        exit(rc);
    return i;
}

static int rank_main(int argc, char **argv)
{
    const cold_case_t *c = &cases[pick(argc, argv)];
    ipcp_comm_t *comm;
    fk_install();
    fk_ops.heap_free = c->heap_free;
    atomic_store(&fk_loaded, c->loaded);
    T_OK(ipcp_init(NULL, &comm));
    t_rank = ipcp_comm_rank(comm);
    T_EQ_INT(atomic_load(&fk_opens), 0);
    c->run(comm);
    int opened = atomic_load(&fk_opens);
    T_OK(ipcp_finalize(comm));
    T_EQ_INT(atomic_load(&fk_opens), opened);
    return 0;
}

int main(int argc, char **argv)
{
    if (!ipcp_launch_is_rank())
        pick(argc, argv);
    return t_mp_main(argc, argv, 2, 60, rank_main);
}
