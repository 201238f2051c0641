/* Plain MPI between two ranks, a window of N messages of LEN bytes, in
 * the shapes ipcpipe's remote path gives MPI, each beside plain MPI in
 * the same run (medians of REPS windows [min-max], GB/s, rank 0's):
 *   wait:   the same messages waited for with MPI_Waitall (0), with
 *           MPI_Test of each in turn until it ends (1), or each in turn
 *           with an MPI_Test of every other unfinished one between (2:
 *           as ipcp__rx_progress looks at the running transfers);
 *   header: the message as ipcpipe sends one of more than 64 KiB of host
 *           memory: a 24-byte header on one communicator, received into
 *           the buffer's first 64 KiB, and the bytes on another, whose
 *           receive is posted once the header landed (1), against one
 *           message (0).
 *   mpicc -O2 mpi_shapes.c -o /tmp/mpi_shapes
 *   mpirun -np 2 --bind-to none [--mca btl_vader_single_copy_mechanism
 *          none] /tmp/mpi_shapes wait|header [LEN] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { N = 64, REPS = 60 };

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void wait_modes(int rank, char **buf, size_t len, int mode)
{
    MPI_Request r[N];
    int done[N] = {0};
    for (int i = 0; i < N; i++)
        if (rank == 0)
            MPI_Irecv(buf[i], (int)len, MPI_BYTE, 1, 7, MPI_COMM_WORLD, &r[i]);
        else
            MPI_Isend(buf[i], (int)len, MPI_BYTE, 0, 7, MPI_COMM_WORLD, &r[i]);
    if (mode == 0) {
        MPI_Waitall(N, r, MPI_STATUSES_IGNORE);
        return;
    }
    for (int i = 0; i < N; i++)
        while (!done[i]) {
            MPI_Test(&r[i], &done[i], MPI_STATUS_IGNORE);
            for (int k = 0; mode == 2 && k < N; k++)
                if (!done[k])
                    MPI_Test(&r[k], &done[k], MPI_STATUS_IGNORE);
        }
}

static void header_modes(int rank, char **buf, size_t len, int mode, MPI_Comm a,
                         MPI_Comm b)
{
    MPI_Request h[N], p[N];
    int state[N] = {0};
    static char hdr[N][24];
    if (mode == 0) {
        for (int i = 0; i < N; i++)
            if (rank == 0)
                MPI_Irecv(buf[i], (int)len, MPI_BYTE, 1, 7, a, &p[i]);
            else
                MPI_Isend(buf[i], (int)len, MPI_BYTE, 0, 7, a, &p[i]);
        MPI_Waitall(N, p, MPI_STATUSES_IGNORE);
        return;
    }
    if (rank == 1) {
        for (int i = 0; i < N; i++) {
            MPI_Isend(hdr[i], 24, MPI_BYTE, 0, 7, a, &h[i]);
            MPI_Isend(buf[i], (int)len, MPI_BYTE, 0, i, b, &p[i]);
        }
        MPI_Waitall(N, h, MPI_STATUSES_IGNORE);
        MPI_Waitall(N, p, MPI_STATUSES_IGNORE);
        return;
    }
    for (int i = 0; i < N; i++)
        MPI_Irecv(buf[i], len < 65536 ? (int)len : 65536, MPI_BYTE, 1, 7, a,
                  &h[i]);
    for (int left = N; left;)
        for (int i = 0; i < N; i++) {
            int f = 0;
            if (state[i] == 0) {
                MPI_Test(&h[i], &f, MPI_STATUS_IGNORE);
                if (f) {
                    state[i] = 1;
                    MPI_Irecv(buf[i], (int)len, MPI_BYTE, 1, i, b, &p[i]);
                }
            } else if (state[i] == 1) {
                MPI_Test(&p[i], &f, MPI_STATUS_IGNORE);
                if (f) {
                    state[i] = 2;
                    left--;
                }
            }
        }
}

int main(int argc, char **argv)
{
    int rank, header = argc > 1 && !strcmp(argv[1], "header");
    size_t len = argc > 2 ? strtoul(argv[2], NULL, 0) : 262144;
    int modes = header ? 2 : 3;
    static double t[3][REPS];
    char *buf[N];
    MPI_Comm a, b;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_dup(MPI_COMM_WORLD, &a);
    MPI_Comm_dup(MPI_COMM_WORLD, &b);
    for (int i = 0; i < N; i++) {
        buf[i] = malloc(len);
        memset(buf[i], 1, len);
    }
    for (int rep = 0; rep < REPS; rep++)
        for (int m = 0; m < modes; m++) {
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            if (header)
                header_modes(rank, buf, len, m, a, b);
            else
                wait_modes(rank, buf, len, m);
            t[m][rep] = MPI_Wtime() - t0;
        }
    for (int m = 0; rank == 0 && m < modes; m++) {
        qsort(t[m], REPS, sizeof(double), cmp);
        printf("%s %zu x%d mode %d: %.2f GB/s [%.2f-%.2f]\n",
               header ? "header" : "wait", len, N, m,
               len * N / t[m][REPS / 2] / 1e9, len * N / t[m][REPS - 1] / 1e9,
               len * N / t[m][0] / 1e9);
    }
    MPI_Finalize();
    return 0;
}
