/* The forum post's program, with ipcpipe: rank 0 moves a buffer on its GPU
 * into rank 1's buffer on the other GPU.  With ipcpipe the transfer is one
 * call on each side; --naive also runs a faithful copy of the post's own
 * pattern (rank 1's handle opened while device 0 is current, device-to-host
 * chunks on device-0 streams, host-to-device chunks on device-1 streams)
 * and prints both figures side by side.
 *
 *   example_seed [--size BYTES (K, M, G)] [--chunks N] [--iters N] [--naive]
 *
 * Runs under mpirun (2 ranks) or on its own (it starts its 2 ranks).  Every
 * byte is checked.  Needs a GPU per rank (one GPU shared works too); exits
 * 77 without one. */
#include <cuda_runtime_api.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ipcpipe.h"
#include "launch.h"
#include "pattern.h"

#define CHECK_CUDA(call)                                                       \
    do {                                                                       \
        cudaError_t e_ = (call);                                               \
        if (e_ != cudaSuccess) {                                               \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,      \
                    cudaGetErrorString(e_));                                   \
            exit(1);                                                           \
        }                                                                      \
    } while (0)

#define CHECK_IPCP(call)                                                       \
    do {                                                                       \
        ipcp_status_t s_ = (call);                                             \
        if (s_ != IPCP_OK) {                                                   \
            fprintf(stderr, "%s:%d: %s: %s: %s\n", __FILE__, __LINE__, #call,  \
                    ipcp_strerror(s_), ipcp_last_error());                     \
            exit(1);                                                           \
        }                                                                      \
    } while (0)

enum { NSTREAMS = 4 };

typedef struct opts {
    size_t size;
    int chunks;
    int iters;
    int naive;
} opts_t;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Fills (rank 0) or checks (rank 1) the device buffer through the host. */
static int pattern_device(void *dev, size_t size, uint64_t seed, int fill)
{
    unsigned char *h = malloc(size);
    size_t bad = size;
    if (!h)
        return -1;
    if (fill) {
        ipcp_pattern_fill(h, size, seed, 0);
        CHECK_CUDA(cudaMemcpy(dev, h, size, cudaMemcpyHostToDevice));
    } else {
        CHECK_CUDA(cudaMemcpy(h, dev, size, cudaMemcpyDeviceToHost));
        bad = ipcp_pattern_check(h, size, seed, 0);
        if (bad != size)
            fprintf(stderr, "byte %zu of %zu differs\n", bad, size);
    }
    free(h);
    return fill || bad == size ? 0 : -1;
}

/* The whole transfer with ipcpipe: one call on each side. */
static double run_ipcpipe(ipcp_comm_t *comm, int rank, void *buf,
                          const opts_t *o)
{
    double best = 0;
    for (int i = 0; i < o->iters; i++) {
        CHECK_IPCP(ipcp_barrier(comm));
        double t0 = now_s();
        if (rank == 0)
            CHECK_IPCP(ipcp_send(comm, buf, o->size, 1, 0));
        else
            CHECK_IPCP(ipcp_recv(comm, buf, o->size, 0, 0, NULL));
        double gbps = (double)o->size / (now_s() - t0) / 1e9;
        best = gbps > best ? gbps : best;
    }
    return best;
}

/* The post's pattern, as it wrote it: rank 0 opens rank 1's handle while
 * device 0 is current, then copies chunks D2H on device-0 streams and H2D
 * into the imported buffer on device-1 streams, joined by events.  The
 * mapping belongs to device 0's context, so each H2D is a cross-context
 * copy: this is what serializes. */
static double run_naive(ipcp_comm_t *comm, int rank, int ndev, void *buf,
                        const opts_t *o)
{
    cudaIpcMemHandle_t handle;
    int dev1 = ndev > 1 ? 1 : 0;
    double best = 0;
    if (rank == 1) {
        CHECK_CUDA(cudaIpcGetMemHandle(&handle, buf));
        CHECK_IPCP(ipcp_send(comm, &handle, sizeof(handle), 0, 1));
        for (int i = 0; i < o->iters; i++)
            CHECK_IPCP(ipcp_barrier(comm));
        CHECK_IPCP(ipcp_barrier(comm)); /* rank 0 is done with it */
        return 0;
    }
    void *dst, *host;
    cudaStream_t d2h[NSTREAMS], h2d[NSTREAMS];
    cudaEvent_t ev[NSTREAMS];
    CHECK_IPCP(ipcp_recv(comm, &handle, sizeof(handle), 1, 1, NULL));
    CHECK_CUDA(cudaSetDevice(0));
    CHECK_CUDA(
        cudaIpcOpenMemHandle(&dst, handle, cudaIpcMemLazyEnablePeerAccess));
    CHECK_CUDA(cudaMallocHost(&host, o->size));
    for (int s = 0; s < NSTREAMS; s++) {
        CHECK_CUDA(cudaStreamCreateWithFlags(&d2h[s], cudaStreamNonBlocking));
        CHECK_CUDA(cudaEventCreateWithFlags(&ev[s], cudaEventDisableTiming));
        CHECK_CUDA(cudaSetDevice(dev1));
        CHECK_CUDA(cudaStreamCreateWithFlags(&h2d[s], cudaStreamNonBlocking));
        CHECK_CUDA(cudaSetDevice(0));
    }
    size_t chunk = o->size / (size_t)o->chunks;
    for (int i = 0; i < o->iters; i++) {
        CHECK_IPCP(ipcp_barrier(comm));
        double t0 = now_s();
        for (int c = 0; c < o->chunks; c++) {
            size_t off = (size_t)c * chunk;
            size_t n = c == o->chunks - 1 ? o->size - off : chunk;
            CHECK_CUDA(cudaMemcpyAsync((char *)host + off, (char *)buf + off, n,
                                       cudaMemcpyDeviceToHost,
                                       d2h[c % NSTREAMS]));
            CHECK_CUDA(cudaEventRecord(ev[c % NSTREAMS], d2h[c % NSTREAMS]));
            CHECK_CUDA(cudaSetDevice(dev1));
            CHECK_CUDA(
                cudaStreamWaitEvent(h2d[c % NSTREAMS], ev[c % NSTREAMS], 0));
            CHECK_CUDA(cudaMemcpyAsync((char *)dst + off, (char *)host + off, n,
                                       cudaMemcpyHostToDevice,
                                       h2d[c % NSTREAMS]));
            CHECK_CUDA(cudaSetDevice(0));
        }
        for (int s = 0; s < NSTREAMS; s++)
            CHECK_CUDA(cudaStreamSynchronize(h2d[s]));
        double gbps = (double)o->size / (now_s() - t0) / 1e9;
        best = gbps > best ? gbps : best;
    }
    CHECK_CUDA(cudaIpcCloseMemHandle(dst));
    CHECK_CUDA(cudaFreeHost(host));
    CHECK_IPCP(ipcp_barrier(comm));
    return best;
}

/* "4096", "64K", "256M", "1G": bytes, with an optional binary suffix. */
static size_t parse_size(const char *arg)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(arg, &end, 10);
    int shift = 0;
    if (*end == 'K' || *end == 'k')
        shift = 10;
    else if (*end == 'M' || *end == 'm')
        shift = 20;
    else if (*end == 'G' || *end == 'g')
        shift = 30;
    if (shift)
        end++;
    if (errno || end == arg || *end || arg[0] == '-' ||
        v > (SIZE_MAX >> shift)) {
        fprintf(stderr, "--size %s: not a size (bytes, or with K, M or G)\n",
                arg);
        exit(2);
    }
    return (size_t)v << shift;
}

/* A count: digits only. */
static int parse_count(const char *opt, const char *arg)
{
    char *end;
    errno = 0;
    long v = strtol(arg, &end, 10);
    if (errno || end == arg || *end || v < 0 || v > INT_MAX) {
        fprintf(stderr, "%s %s: not a count\n", opt, arg);
        exit(2);
    }
    return (int)v;
}

static void parse(int argc, char **argv, opts_t *o)
{
    o->size = (size_t)256 << 20;
    o->chunks = 16;
    o->iters = 5;
    o->naive = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--naive") == 0)
            o->naive = 1;
        else if (strcmp(argv[i], "--size") == 0 && i + 1 < argc)
            o->size = parse_size(argv[++i]);
        else if (strcmp(argv[i], "--chunks") == 0 && i + 1 < argc)
            o->chunks = parse_count("--chunks", argv[++i]);
        else if (strcmp(argv[i], "--iters") == 0 && i + 1 < argc)
            o->iters = parse_count("--iters", argv[++i]);
        else {
            fprintf(stderr,
                    "usage: %s [--size BYTES (K, M, G)] [--chunks N] "
                    "[--iters N] [--naive]\n",
                    argv[0]);
            exit(2);
        }
    }
    if (o->size == 0 || o->chunks < 1 || o->iters < 1) {
        fprintf(stderr,
                "--size %zu, --chunks %d, --iters %d: each must be positive\n",
                o->size, o->chunks, o->iters);
        exit(2);
    }
}

static int rank_main(const opts_t *o)
{
    ipcp_comm_t *comm;
    int ndev = 0;
    void *buf;
    uint64_t seed = (uint64_t)time(NULL) * 2654435761u;
    CHECK_IPCP(ipcp_init(NULL, &comm));
    int rank = ipcp_comm_rank(comm);
    CHECK_CUDA(cudaGetDeviceCount(&ndev));
    CHECK_CUDA(cudaSetDevice(ndev > 1 ? rank : 0));
    CHECK_CUDA(cudaMalloc(&buf, o->size));
    if (rank == 0)
        CHECK_IPCP(ipcp_send(comm, &seed, sizeof(seed), 1, 2));
    else
        CHECK_IPCP(ipcp_recv(comm, &seed, sizeof(seed), 0, 2, NULL));
    int rc = 0;
    if (rank == 0)
        pattern_device(buf, o->size, seed, 1);
    double with = run_ipcpipe(comm, rank, buf, o);
    if (rank == 1 && pattern_device(buf, o->size, seed, 0) != 0)
        rc = 1;
    double naive = 0;
    if (o->naive) {
        if (rank == 1) { /* finished before rank 0's copies start */
            CHECK_CUDA(cudaMemset(buf, 0, o->size));
            CHECK_CUDA(cudaDeviceSynchronize());
        }
        naive = run_naive(comm, rank, ndev, buf, o);
        if (rank == 1 && pattern_device(buf, o->size, seed, 0) != 0)
            rc = 1;
    }
    if (rank == 1) {
        printf("%zu bytes, GPU %d -> GPU %d, best of %d: ipcpipe %.1f GB/s "
               "(data %s)\n",
               o->size, 0, ndev > 1 ? 1 : 0, o->iters, with,
               rc ? "WRONG" : "verified");
    }
    CHECK_IPCP(ipcp_barrier(comm));
    if (o->naive && rank == 0)
        printf("%zu bytes, the post's pattern (%d chunks, %d streams a side): "
               "%.1f GB/s\n",
               o->size, o->chunks, NSTREAMS, naive);
    CHECK_CUDA(cudaFree(buf));
    CHECK_IPCP(ipcp_finalize(comm));
    return rc;
}

int main(int argc, char **argv)
{
    opts_t o;
    parse(argc, argv, &o);
    if (!ipcp_launch_is_rank()) {
        int ndev = 0;
        if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) {
            printf("SKIP: no GPU visible\n");
            return 77;
        }
        ipcp_launch_opts_t lo = {
            .nranks = 2, .timeout_s = 600, .argv_self = argv};
        ipcp_launch_result_t res;
        if (ipcp_launch(&lo, &res) != 0) {
            perror("ipcp_launch");
            return 1;
        }
        return ipcp_launch_exit_code(&res);
    }
    return rank_main(&o);
}
