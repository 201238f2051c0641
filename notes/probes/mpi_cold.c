/* Plain MPI between two ranks over the buffers a staged transfer gives it:
 * does MPI move a window as fast when the sender's bytes were just written
 * by the copy engine (device to host) and the receiver's are read by it
 * after, as when both buffers stay in the CPUs' caches (the bench's "MPI
 * host" row)?  Rows: hot (the same buffers each window, nothing else),
 * evicted (a 256 MiB sweep by the CPU before each window), copy engine
 * (the sender's slots written by cuMemcpyDtoH before each window, the
 * receiver's read by cuMemcpyHtoD after it).  Only the MPI window is
 * timed.  Medians of REPS [min-max], GB/s.
 *   mpicc -O2 mpi_cold.c -I/usr/local/cuda/include -L/usr/local/cuda/lib64 \
 *         -lcuda -o /tmp/mpi_cold
 *   mpirun -np 2 --bind-to none /tmp/mpi_cold */
#include <cuda.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CK(x)                                                                  \
    do {                                                                       \
        CUresult r_ = (x);                                                     \
        if (r_) {                                                              \
            fprintf(stderr, "%s: %d line %d\n", #x, (int)r_, __LINE__);        \
            MPI_Abort(MPI_COMM_WORLD, 1);                                      \
        }                                                                      \
    } while (0)

enum { REPS = 30, SWEEP = 256 << 20 };

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* One window of n messages of len bytes, rank 1 to rank 0; seconds. */
static double window(int rank, char *buf, size_t len, int n)
{
    MPI_Request r[64];
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < n; i++) {
        if (rank)
            MPI_Isend(buf + (size_t)i * len, (int)len, MPI_BYTE, 0, i,
                      MPI_COMM_WORLD, &r[i]);
        else
            MPI_Irecv(buf + (size_t)i * len, (int)len, MPI_BYTE, 1, i,
                      MPI_COMM_WORLD, &r[i]);
    }
    MPI_Waitall(n, r, MPI_STATUSES_IGNORE);
    double t = MPI_Wtime() - t0, tmax;
    MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return tmax;
}

int main(int argc, char **argv)
{
    int rank;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    CUdevice d;
    CUcontext c;
    CK(cuInit(0));
    CK(cuDeviceGet(&d, 0));
    CK(cuDevicePrimaryCtxRetain(&c, d));
    CK(cuCtxSetCurrent(c));
    char *sweep = malloc(SWEEP);
    memset(sweep, 1, SWEEP);
    const size_t lens[] = {65536, 262144, 1048576};
    const int ns[] = {64, 16, 16};
    const char *modes[] = {"hot", "evicted", "copy engine"};
    for (int s = 0; s < 3; s++) {
        size_t len = lens[s], all = len * (size_t)ns[s];
        char *buf = aligned_alloc(4096, all);
        memset(buf, rank, all);
        CUdeviceptr dev;
        CK(cuMemHostRegister(buf, all, 0));
        CK(cuMemAlloc(&dev, all));
        CK(cuMemsetD8(dev, (unsigned char)(rank + 7), all));
        for (int m = 0; m < 3; m++) {
            double gb[REPS];
            for (int rep = 0; rep < REPS + 3; rep++) {
                if (m == 1)
                    for (size_t i = 0; i < SWEEP; i += 64)
                        sweep[i]++;
                if (m == 2 && rank)
                    CK(cuMemcpyDtoH(buf, dev, all));
                double t = window(rank, buf, len, ns[s]);
                if (m == 2 && !rank)
                    CK(cuMemcpyHtoD(dev, buf, all));
                if (rep >= 3)
                    gb[rep - 3] = (double)all / t / 1e9;
            }
            qsort(gb, REPS, sizeof(double), cmp);
            if (!rank)
                printf("MPI %-12s %8zu x%-3d %6.2f GB/s [%.2f-%.2f]\n",
                       modes[m], len, ns[s], gb[REPS / 2], gb[0], gb[REPS - 1]);
        }
        CK(cuMemHostUnregister(buf));
        CK(cuMemFree(dev));
        free(buf);
    }
    free(sweep);
    MPI_Finalize();
    return 0;
}
