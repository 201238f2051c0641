/* Two ranks on one GPU (engine/samegpu.c), on a machine without a GPU: a
 * fake device backend (the host backend's functions, its "device memory"
 * host memory from memfd it keeps a list of) says both ranks' memory lies
 * on one GPU and what MPS is there.  The receiver of device transfers must
 * log that once per peer, naming the peer and the MPS state.
 *
 *   test_samegpu text|off|on|unknown|noop|other|host
 *
 * text:    the three lines (MPS on, off, unknown) as formatted; no ranks.
 * off, on, unknown: both ranks on one fake GPU whose MPS the backend
 *          reports as 0, 1, -1; rank 1 sends to rank 0 several sizes
 *          several times, then rank 0 to rank 1 once; each rank's log
 *          holds the line once, naming the other rank and that state.
 * noop:    the same with a backend that has no device_mps: unknown.
 * other:   each rank on a GPU of its own: no such line.
 * host:    one GPU, but host buffers: no such line. */
#include <pthread.h>
#include <unistd.h>

#include "backend/backend.h"
#include "engine/samegpu.h"
#include "fakedev.h"
#include "testutil.h"

enum { TAG_SEED = 1, TAG_MSG = 7, TAG_BACK = 8 };

#define NEEDLE "uses the same GPU as this process"

/* ---- The fake device backend ------------------------------------------- */

static ipcp__backend_ops_t fk_ops;
static int fk_mps;     /* what device_mps answers */
static uint64_t fk_id; /* identity of the fake GPU 0 */

/* One device, which reaches only itself. */
static int fk_device_reach(ipcp__backend_t *be, int device, uint64_t *ids,
                           int max)
{
    (void)be;
    if (device != 0 || max < 1)
        return 0;
    ids[0] = fk_id;
    return 1;
}

static int fk_device_mps(ipcp__backend_t *be, int device)
{
    (void)be;
    return device == 0 ? fk_mps : -1;
}

static void fk_install(int with_mps)
{
    fakedev_ops(&fk_ops);
    fk_ops.device_reach = fk_device_reach;
    fk_ops.device_mps = with_mps ? fk_device_mps : NULL;
    ipcp__device_backend_for_tests = &fk_ops;
}

/* ---- Cases ----------------------------------------------------------------
 */

typedef struct sg_case {
    const char *name;
    int mps;            /* what the fake backend says */
    int with_mps;       /* it has device_mps */
    int same;           /* both ranks on one GPU */
    int device;         /* device buffers (else host) */
    const char *expect; /* in the line; NULL: no line */
} sg_case_t;

static const sg_case_t cases[] = {
    {"text", 0, 0, 0, 0, NULL},
    {"off", 0, 1, 1, 1, "(GPU 0), without MPS: "},
    {"on", 1, 1, 1, 1, "(GPU 0), with MPS: "},
    {"unknown", -1, 1, 1, 1, "(GPU 0); MPS unknown "},
    {"noop", 1, 0, 1, 1, "(GPU 0); MPS unknown "},
    {"other", 0, 1, 0, 1, NULL},
    {"host", 0, 1, 1, 0, NULL},
};

static void expect_has(const char *text, const char *part)
{
    if (!strstr(text, part))
        T_FAIL("\"%s\" lacks \"%s\"", text, part);
}

/* The lines themselves: the rank and GPU given, the MPS state, and the
 * H200 figures labelled as measured there. */
static int text_case(void)
{
    char buf[512];
    ipcp__samegpu_text(buf, sizeof(buf), 3, 2, 0);
    printf("%s\n", buf);
    expect_has(buf, "rank 3 " NEEDLE " (GPU 2), without MPS: ");
    expect_has(buf, "time slices");
    expect_has(buf, "~170 us measured on one H200");
    expect_has(buf, "nvidia-cuda-mps-control -d");
    ipcp__samegpu_text(buf, sizeof(buf), 1, 0, 1);
    printf("%s\n", buf);
    expect_has(buf, "rank 1 " NEEDLE " (GPU 0), with MPS: ");
    expect_has(buf, "~22 us measured on one H200 with MPS");
    T_CHECK(!strstr(buf, "without MPS:"));
    ipcp__samegpu_text(buf, sizeof(buf), 0, 5, -1);
    printf("%s\n", buf);
    expect_has(buf, "rank 0 " NEEDLE " (GPU 5); MPS unknown ");
    expect_has(buf, "nvidia-cuda-mps-control -d");
    /* A short buffer is cut, never overrun. */
    char small[16];
    memset(small, 'x', sizeof(small));
    ipcp__samegpu_text(small, 8, 1, 0, 0);
    T_EQ_INT((int)strlen(small), 7);
    T_EQ_INT(small[15], 'x');
    return 0;
}

static const size_t sizes[] = {8, 4096, 1u << 20};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))
#define ROUNDS 3
#define BIG    (1u << 20)

static void *buffer(ipcp_comm_t *comm, const sg_case_t *c)
{
    ipcp_alloc_params_t p;
    void *ptr;
    ipcp_alloc_params_init(&p);
    p.type = c->device ? IPCP_MEM_CUDA : IPCP_MEM_HOST;
    T_OK(ipcp_mem_alloc(comm, BIG, &p, &ptr));
    return ptr;
}

/* Rank 1 sends every size ROUNDS times, then rank 0 sends one message
 * back: each rank receives from the other at least once. */
static void transfers(ipcp_comm_t *comm, void *buf)
{
    for (int r = 0; r < ROUNDS; r++) {
        for (size_t i = 0; i < NSIZES; i++) {
            uint64_t seed = t_shared_seed(comm, TAG_SEED);
            if (t_rank == 1) {
                t_fill(buf, sizes[i], seed);
                T_OK(ipcp_send(comm, buf, sizes[i], 0, TAG_MSG));
            } else {
                memset(buf, 0, sizes[i]);
                T_OK(ipcp_recv(comm, buf, sizes[i], 1, TAG_MSG, NULL));
                t_verify(buf, sizes[i], seed, "received");
            }
        }
    }
    uint64_t seed = t_shared_seed(comm, TAG_SEED);
    if (t_rank == 0) {
        t_fill(buf, 8, seed);
        T_OK(ipcp_send(comm, buf, 8, 1, TAG_BACK));
    } else {
        T_OK(ipcp_recv(comm, buf, 8, 0, TAG_BACK, NULL));
        t_verify(buf, 8, seed, "received back");
    }
    T_OK(ipcp_barrier(comm));
}

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
    const sg_case_t *c = &cases[pick(argc, argv)];
    ipcp_comm_t *comm;
    fk_install(c->with_mps);
    fk_mps = c->mps;
    t_log_to_file();
    T_OK(ipcp_init(NULL, &comm));
    t_rank = ipcp_comm_rank(comm);
    fk_id = c->same ? 0x5a5a0000u : 0x5a5a0000u + (uint64_t)t_rank + 1;
    void *buf = buffer(comm, c);
    transfers(comm, buf);
    T_OK(ipcp_mem_free(comm, buf));
    T_OK(ipcp_finalize(comm));
    int n = t_log_lines(NEEDLE, 0);
    if (!c->expect) {
        T_EQ_INT(n, 0);
    } else {
        char want[128];
        snprintf(want, sizeof(want), "rank %d " NEEDLE " %s", 1 - t_rank,
                 c->expect);
        T_EQ_INT(n, 1);
        T_EQ_INT(t_log_lines(want, 0), 1);
    }
    /* The transfers ran, so rank 0 did log its path choices (rank 1
     * receives eager messages only, which go no path way once the peer's
     * path setting is known). */
    if (t_rank == 0)
        T_CHECK(t_log_lines(" path (", 1) > 0);
    return 0;
}

int main(int argc, char **argv)
{
    if (!ipcp_launch_is_rank() &&
        strcmp(cases[pick(argc, argv)].name, "text") == 0)
        return text_case();
    return t_mp_main(argc, argv, 2, 60, rank_main);
}
