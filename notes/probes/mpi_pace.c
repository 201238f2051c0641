/* Plain MPI between two ranks, a window of 64 messages of 64 KiB, with
 * the sender's posts spread out as a staged transfer spreads them (each
 * once its device-to-host copy ended): does MPI then deliver its first
 * message late, and does a test of the oldest send after each post
 * bring it forward?  Modes: burst (all posts, then Waitall), pace P (a
 * post every P us, nothing of MPI between), test P (the same, and one
 * MPI_Test of the oldest unfinished send after each post), cap K (at
 * most K sends posted and not done, the oldest tested until one ends).  The
 * receiver posts all receives first and records when each ends
 * (Testsome); medians over REPS of the first, median and last end (us
 * after the barrier) and of the window's GB/s.
 *   mpicc -O2 mpi_pace.c -o /tmp/mpi_pace
 *   mpirun -np 2 --bind-to none /tmp/mpi_pace */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { REPS = 20, N = 64, LEN = 64 << 10 };

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double med(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp);
    return v[n / 2];
}

static void spin_until(double t)
{
    while (MPI_Wtime() < t)
        ;
}

/* One window; on rank 0 the ends of its receives in end[] (us). */
static double window(int rank, char *buf, int mode, double pace_us, int cap,
                     double *end)
{
    MPI_Request r[N];
    int idx[N], got = 0, oldest = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    if (rank == 0) {
        for (int i = 0; i < N; i++)
            MPI_Irecv(buf + (size_t)i * LEN, LEN, MPI_BYTE, 1, 7,
                      MPI_COMM_WORLD, &r[i]);
        while (got < N) {
            int k = 0;
            MPI_Testsome(N, r, &k, idx, MPI_STATUSES_IGNORE);
            double now = (MPI_Wtime() - t0) * 1e6;
            for (int j = 0; j < k && k != MPI_UNDEFINED; j++)
                end[got++] = now;
        }
    } else {
        for (int i = 0; i < N; i++) {
            /* At most cap sends posted and not done: the oldest tested
             * until one ends. */
            while (cap && i - oldest >= cap) {
                int done = 0;
                MPI_Test(&r[oldest], &done, MPI_STATUS_IGNORE);
                while (oldest < i && r[oldest] == MPI_REQUEST_NULL)
                    oldest++;
            }
            MPI_Isend(buf + (size_t)i * LEN, LEN, MPI_BYTE, 0, 7,
                      MPI_COMM_WORLD, &r[i]);
            if (mode == 2) {
                int done = 0;
                while (oldest < i && r[oldest] == MPI_REQUEST_NULL)
                    oldest++;
                MPI_Test(&r[oldest], &done, MPI_STATUS_IGNORE);
            }
            if (mode)
                spin_until(t0 + (i + 1) * pace_us * 1e-6);
        }
        MPI_Waitall(N, r, MPI_STATUSES_IGNORE);
    }
    double t = MPI_Wtime() - t0, tmax;
    MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return tmax;
}

int main(int argc, char **argv)
{
    int rank;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    char *buf = malloc((size_t)N * LEN);
    memset(buf, rank + 1, (size_t)N * LEN);
    static const struct {
        const char *name;
        int mode;
        double pace;
        int cap;
    } runs[] = {{"burst", 0, 0, 0},        {"cap 4", 0, 0, 4},
                {"cap 8", 0, 0, 8},        {"cap 16", 0, 0, 16},
                {"pace 3", 1, 3, 0},       {"test 3", 2, 3, 0},
                {"test 3 cap 8", 2, 3, 8}, {"pace 8", 1, 8, 0},
                {"test 8", 2, 8, 0},       {"burst", 0, 0, 0}};
    for (size_t k = 0; k < sizeof(runs) / sizeof(runs[0]); k++) {
        double gb[REPS], first[REPS], mid[REPS], last[REPS], end[N];
        for (int w = 0; w < 3; w++) /* warm-up */
            window(rank, buf, runs[k].mode, runs[k].pace, runs[k].cap, end);
        for (int rep = 0; rep < REPS; rep++) {
            double t =
                window(rank, buf, runs[k].mode, runs[k].pace, runs[k].cap, end);
            gb[rep] = (double)N * LEN / t / 1e9;
            first[rep] = end[0];
            mid[rep] = end[N / 2];
            last[rep] = end[N - 1];
        }
        if (rank == 0)
            printf("%-8s GB/s %.2f  first %.0f  median %.0f  last %.0f us\n",
                   runs[k].name, med(gb, REPS), med(first, REPS),
                   med(mid, REPS), med(last, REPS));
    }
    free(buf);
    MPI_Finalize();
    return 0;
}
