/* What a stream-ordered transfer between two processes costs when the GPUs
 * gate it themselves, against the host in the loop (issues 24 and 30: the
 * plan in NOTES that matches on the host ahead of the streams and leaves
 * the copy to the receiver's stream).  Rank 0 sends, rank 1 receives, rank
 * r on GPU r % (GPUs); both ranks on one GPU where there is one.
 *
 * The sender's stream is the same in every mode: per operation i, write
 * start[i] = gen, then wait until done[i] >= gen (so its operations run one
 * at a time, as ipcpipe's stream-ordered calls on one stream do).  The
 * flags are in shared host memory (POSIX shm) both processes register.
 * The copy is from the sender's buffer (cudaIpc, mapped in the receiver)
 * into the receiver's.  Modes, by who gates the receiver's copy:
 *   host:   the receiver's CPU polls start[i], then enqueues the copy and
 *           the write of done[i] on its stream (the host in the loop, with
 *           no protocol at all: a bound on today's design);
 *   wait:   the receiver's stream, enqueued ahead: wait start[i] >= gen,
 *           the copy (copy engine), write done[i] (a match made at the
 *           receive's call, the sender's address known then);
 *   kernel: the receiver's stream, enqueued ahead: a kernel that polls
 *           start[i], copies, and writes done[i] (a match made after the
 *           call: the kernel would read the address from a descriptor).
 * Per size and mode: medians over REPS windows of W operations of the
 * time per operation, timed by the sender from a barrier to the end of
 * its stream.  The receiver's buffer is checked against the sender's
 * pattern (fresh per size) after each mode.  PIN=1 binds each rank to one
 * CPU (its rank's), as mpirun --bind-to core does.
 *   nvcc -O2 -arch=native gated.cu $(mpicc -showme:compile) \
 *        $(mpicc -showme:link) -lcuda -o /tmp/gated
 *   mpirun -np 2 --bind-to none [-x PIN=1] /tmp/gated [W] */
#include <mpi.h>

#include <cuda.h>
#include <cuda_runtime.h>
#include <fcntl.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

enum { MAXW = 256, REPS = 15, BLOCKS = 16, THREADS = 256 };
enum { M_HOST, M_WAIT, M_KERNEL, MODES };
static const char *const mode_name[MODES] = {"host", "wait", "kernel"};

#define CK(x)                                                                  \
    do {                                                                       \
        cudaError_t e_ = (x);                                                  \
        if (e_ != cudaSuccess) {                                               \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x,         \
                    cudaGetErrorString(e_));                                   \
            MPI_Abort(MPI_COMM_WORLD, 1);                                      \
        }                                                                      \
    } while (0)
#define CU(x)                                                                  \
    do {                                                                       \
        CUresult r_ = (x);                                                     \
        if (r_ != CUDA_SUCCESS) {                                              \
            fprintf(stderr, "%s:%d: %s: %d\n", __FILE__, __LINE__, #x,         \
                    (int)r_);                                                  \
            MPI_Abort(MPI_COMM_WORLD, 1);                                      \
        }                                                                      \
    } while (0)

typedef struct flags {
    volatile uint64_t start[MAXW];
    volatile uint64_t done[MAXW];
} flags_t;

/* Polls start >= gen, copies n bytes, then the last block writes done. */
__global__ void gated_copy(const int4 *src, int4 *dst, size_t n,
                           const volatile uint64_t *start, uint64_t gen,
                           volatile uint64_t *done, unsigned *count)
{
    if (threadIdx.x == 0)
        while (*start < gen)
            ;
    __syncthreads();
    size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t step = (size_t)gridDim.x * blockDim.x;
    for (size_t j = t; j < n / 16; j += step)
        dst[j] = src[j];
    if (t == 0)
        for (size_t j = n / 16 * 16; j < n; j++)
            ((char *)dst)[j] = ((const char *)src)[j];
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();
        if (atomicAdd(count, 1) == gridDim.x - 1) {
            *count = 0;
            __threadfence_system();
            *done = gen;
        }
    }
}

__global__ void fill(unsigned char *p, size_t n, unsigned seed)
{
    for (size_t j = (size_t)blockIdx.x * blockDim.x + threadIdx.x; j < n;
         j += (size_t)gridDim.x * blockDim.x)
        p[j] = (unsigned char)(j * 131u + seed);
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The flags' address on the device (registered once, as one range). */
static flags_t *f, *fdev;

static CUdeviceptr dptr(volatile uint64_t *p)
{
    return (CUdeviceptr)((char *)fdev + ((char *)p - (char *)f));
}

/* The run's state: this rank, its buffer, the sender's as mapped here
 * (receiver), the stream, and the generation of the flags' values. */
static int rank, w;
static unsigned char *buf, *src, *check, *want;
static unsigned *count;
static cudaStream_t s;
static uint64_t gen;

/* The flags: rank 0 makes the segment, both map and register it. */
static void flags_map(void)
{
    char name[64];
    long job = (long)getpid();
    MPI_Bcast(&job, 1, MPI_LONG, 0, MPI_COMM_WORLD);
    snprintf(name, sizeof name, "/gated-%ld", job);
    if (rank == 0) {
        int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
        if (fd < 0 || ftruncate(fd, 1 << 20) != 0)
            MPI_Abort(MPI_COMM_WORLD, 1);
        close(fd);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    int fd = shm_open(name, O_RDWR, 0600);
    f = (flags_t *)mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
                        0);
    close(fd);
    if (f == MAP_FAILED)
        MPI_Abort(MPI_COMM_WORLD, 1);
    CK(cudaHostRegister(f, 1 << 20,
                        cudaHostRegisterMapped | cudaHostRegisterPortable));
    CK(cudaHostGetDevicePointer((void **)&fdev, f, 0));
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0)
        shm_unlink(name);
}

/* Buffers of maxn bytes; the sender's shared with the receiver. */
static void buffers(size_t maxn)
{
    cudaIpcMemHandle_t h;
    check = (unsigned char *)malloc(maxn);
    want = (unsigned char *)malloc(maxn);
    CK(cudaMalloc(&buf, maxn));
    CK(cudaMalloc(&count, sizeof(unsigned)));
    CK(cudaMemset(count, 0, sizeof(unsigned)));
    if (rank == 0)
        CK(cudaIpcGetMemHandle(&h, buf));
    MPI_Bcast(&h, sizeof(h), MPI_BYTE, 0, MPI_COMM_WORLD);
    if (rank == 1)
        CK(cudaIpcOpenMemHandle((void **)&src, h,
                                cudaIpcMemLazyEnablePeerAccess));
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
}

/* The receiver's operations enqueued ahead (modes wait and kernel). */
static void recv_ahead(int m, size_t n)
{
    for (int i = 0; i < w; i++) {
        if (m == M_WAIT) {
            CU(cuStreamWaitValue64((CUstream)s, dptr(&f->start[i]), gen,
                                   CU_STREAM_WAIT_VALUE_GEQ));
            CK(cudaMemcpyAsync(buf, src, n, cudaMemcpyDeviceToDevice, s));
            CU(cuStreamWriteValue64((CUstream)s, dptr(&f->done[i]), gen, 0));
            continue;
        }
        gated_copy<<<BLOCKS, THREADS, 0, s>>>(
            (const int4 *)src, (int4 *)buf, n,
            (const volatile uint64_t *)dptr(&f->start[i]), gen,
            (volatile uint64_t *)dptr(&f->done[i]), count);
        CK(cudaGetLastError());
    }
}

/* One window after the barrier: the sender's time an operation (us). */
static double window(int m, size_t n)
{
    double t0 = MPI_Wtime();
    if (rank == 0) {
        for (int i = 0; i < w; i++) {
            CU(cuStreamWriteValue64((CUstream)s, dptr(&f->start[i]), gen, 0));
            CU(cuStreamWaitValue64((CUstream)s, dptr(&f->done[i]), gen,
                                   CU_STREAM_WAIT_VALUE_GEQ));
        }
        CK(cudaStreamSynchronize(s));
        return (MPI_Wtime() - t0) / w * 1e6;
    }
    for (int i = 0; m == M_HOST && i < w; i++) {
        while (f->start[i] < gen)
            ;
        CK(cudaMemcpyAsync(buf, src, n, cudaMemcpyDeviceToDevice, s));
        CU(cuStreamWriteValue64((CUstream)s, dptr(&f->done[i]), gen, 0));
    }
    CK(cudaStreamSynchronize(s));
    return 0;
}

/* A size in a mode: fresh data, REPS windows, the receiver's bytes
 * checked; rank 0 prints the row. */
static void cell(int m, size_t n, unsigned seed)
{
    double t[REPS];
    int bad = 0;
    if (rank == 0)
        fill<<<64, 256, 0, s>>>(buf, n, seed);
    else
        CK(cudaMemsetAsync(buf, 0, n, s));
    CK(cudaStreamSynchronize(s));
    MPI_Barrier(MPI_COMM_WORLD);
    for (int rep = 0; rep < REPS; rep++) {
        gen++;
        if (rank == 1 && m != M_HOST)
            recv_ahead(m, n);
        MPI_Barrier(MPI_COMM_WORLD);
        t[rep] = window(m, n);
    }
    if (rank == 1) {
        CK(cudaMemcpy(check, buf, n, cudaMemcpyDeviceToHost));
        for (size_t j = 0; j < n; j++)
            want[j] = (unsigned char)(j * 131u + seed);
        bad = memcmp(check, want, n) != 0;
    }
    MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0) {
        qsort(t, REPS, sizeof(double), cmp);
        printf("%-6s %9zu B x%d: %8.2f us an operation [%.2f-%.2f], %7.2f "
               "GB/s  %s\n",
               mode_name[m], n, w, t[REPS / 2], t[0], t[REPS - 1],
               n / t[REPS / 2] / 1e3, bad ? "DATA DIFFERS" : "checked");
        fflush(stdout);
    }
    if (bad)
        MPI_Abort(MPI_COMM_WORLD, 2);
}

int main(int argc, char **argv)
{
    const size_t sizes[] = {8, 4096, 65536, 2 << 20};
    const int nsizes = 4;
    int ndev;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    w = argc > 1 ? atoi(argv[1]) : 64;
    if (w < 1 || w > MAXW)
        w = 64;
    if (getenv("PIN")) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(rank, &set);
        sched_setaffinity(0, sizeof(set), &set);
    }
    CK(cudaGetDeviceCount(&ndev));
    CK(cudaSetDevice(rank % ndev));
    CK(cudaFree(0));
    flags_map();
    buffers(sizes[nsizes - 1]);
    if (rank == 0)
        printf("gated: sender on GPU 0, receiver on GPU %d, %d operations a "
               "window, medians of %d windows%s\n",
               1 % ndev, w, REPS,
               getenv("PIN") ? ", each rank on one CPU" : "");
    for (int si = 0; si < nsizes; si++)
        for (int m = 0; m < MODES; m++)
            cell(m, sizes[si], (unsigned)(si * MODES + m + 1));
    if (rank == 1)
        CK(cudaIpcCloseMemHandle(src));
    MPI_Barrier(MPI_COMM_WORLD);
    CK(cudaHostUnregister(f));
    munmap(f, 1 << 20);
    MPI_Finalize();
    return 0;
}
