/* Two ranks on one GPU: the receiver of device transfers logs once per
 * peer that the peer's buffer lies on its own GPU, with whether MPS is on
 * there (engine/samegpu.c); ranks on two GPUs log no such line.
 *
 *   test_cuda_samegpu same|split [--mps on|off]
 *
 * same:  both ranks on GPU 0.  Rank 1 sends 8 B and 1 MiB three times each
 *        from ipcp_mem_alloc memory into rank 0's; then rank 0 sends 8 B
 *        from cuMemAlloc memory into rank 1's.  Every byte is checked, and
 *        each rank's log (IPCPIPE_LOG_FILE, info) must hold the line
 *        exactly once, naming the other rank, GPU 0 and the MPS state the
 *        driver reports for this process (with MPS, without MPS, or MPS
 *        unknown).
 * split: rank r on GPU r (needs two): the same transfers, no such line.
 * --mps on|off: the driver must also report that state (run it with and
 *        without the MPS daemon to check the report itself).
 *
 * Exits 77 in the launching process where the CUDA backend cannot open or
 * split lacks a second GPU. */
#include <unistd.h>

#include "cudatest.h"

enum { TAG_SEED = 1, TAG_MSG = 7, TAG_BACK = 8 };

#define NEEDLE "uses the same GPU as this process"
#define ROUNDS 3

typedef struct sg_cfg {
    int split;
    int mps; /* --mps: 1 on, 0 off, -1 not given */
} sg_cfg_t;

static sg_cfg_t parse(int argc, char **argv)
{
    sg_cfg_t c;
    const char *m = ct_opt(argc, argv, "--mps", "");
    if (argc < 2 ||
        (strcmp(argv[1], "same") != 0 && strcmp(argv[1], "split") != 0)) {
        fprintf(stderr, "usage: %s same|split [--mps on|off]\n", argv[0]);
        exit(2);
    }
    c.split = strcmp(argv[1], "split") == 0;
    c.mps = strcmp(m, "on") == 0 ? 1 : strcmp(m, "off") == 0 ? 0 : -1;
    if (*m && c.mps < 0)
        T_FAIL("unknown --mps \"%s\" (on, off)", m);
    return c;
}

static void *vmm_alloc(ipcp_comm_t *comm, size_t len, int device)
{
    ipcp_alloc_params_t p;
    void *ptr;
    ipcp_alloc_params_init(&p);
    p.type = IPCP_MEM_CUDA;
    p.device = device;
    T_OK(ipcp_mem_alloc(comm, len, &p, &ptr));
    return ptr;
}

/* Sends len bytes of the pattern from device memory p to peer, or
 * receives them into p from peer and checks every byte. */
static void one(ipcp_comm_t *comm, void *p, size_t len, int from, int tag)
{
    uint64_t seed = t_shared_seed(comm, TAG_SEED);
    unsigned char *h = t_malloc(len);
    CUdeviceptr d = (CUdeviceptr)(uintptr_t)p;
    if (t_rank == from) {
        t_fill(h, len, seed);
        ct_htod(d, h, len);
        T_OK(ipcp_send(comm, p, len, 1 - from, tag));
    } else {
        ct_memset(d, 0, len);
        T_OK(ipcp_recv(comm, p, len, from, tag, NULL));
        CU_OK(IPCP_CU(cuMemcpyDtoH)(h, d, len));
        t_verify(h, len, seed, "received");
    }
    free(h);
}

static void transfers(ipcp_comm_t *comm, int device)
{
    const size_t big = (size_t)1 << 20;
    void *v = vmm_alloc(comm, big, device);
    for (int r = 0; r < ROUNDS; r++) {
        one(comm, v, 8, 1, TAG_MSG);
        one(comm, v, big, 1, TAG_MSG);
    }
    CUdeviceptr d;
    CU_OK(IPCP_CU(cuMemAlloc)(&d, 64));
    one(comm, (void *)(uintptr_t)d, 8, 0, TAG_BACK);
    T_OK(ipcp_barrier(comm));
    CU_OK(IPCP_CU(cuMemFree)(d));
    T_OK(ipcp_mem_free(comm, v));
}

/* What the driver says of MPS on device for this process, in the words of
 * the log line. */
static const char *mps_words(int device, const sg_cfg_t *c)
{
    CUdevice dev;
    CU_OK(IPCP_CU(cuDeviceGet)(&dev, device));
    int mps = ipcp__cu_device_mps(dev);
    printf("[rank %d] the driver reports MPS %d on GPU %d\n", t_rank, mps,
           device);
    if (c->mps >= 0)
        T_EQ_INT(mps, c->mps);
    return mps > 0    ? "(GPU 0), with MPS: "
           : mps == 0 ? "(GPU 0), without MPS: "
                      : "(GPU 0); MPS unknown ";
}

static int rank_main(int argc, char **argv)
{
    sg_cfg_t c = parse(argc, argv);
    ipcp_comm_t *comm = NULL;
    t_log_to_file();
    T_OK(ipcp_init(NULL, &comm));
    t_rank = ipcp_comm_rank(comm);
    int device = c.split ? t_rank : 0;
    (void)ct_use_device(device);
    const char *words = mps_words(device, &c);
    transfers(comm, device);
    T_OK(ipcp_finalize(comm));
    int n = t_log_lines(NEEDLE, 0);
    if (c.split) {
        T_EQ_INT(n, 0);
    } else {
        char want[160];
        snprintf(want, sizeof(want), "rank %d " NEEDLE " %s", 1 - t_rank,
                 words);
        T_EQ_INT(n, 1);
        T_EQ_INT(t_log_lines(want, 0), 1);
    }
    T_CHECK(t_log_lines(" path (", 1) > 0);
    CUdevice dev;
    CU_OK(IPCP_CU(cuDeviceGet)(&dev, device));
    CU_OK(IPCP_CU(cuDevicePrimaryCtxRelease)(dev));
    return 0;
}

int main(int argc, char **argv)
{
    if (!ipcp_launch_is_rank()) {
        sg_cfg_t c = parse(argc, argv);
        int rc = ct_check_machine(c.split ? 2 : 1);
        if (rc)
            return rc;
    }
    return t_mp_main(argc, argv, 2, 120, rank_main);
}
