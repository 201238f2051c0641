/* ipcpipe's remote path (ipcp_init_mpi, rank r on node r) beside plain
 * MPI on the same host buffers, windows of N messages of LEN bytes in
 * turns: per rank, medians over REPS windows of the time its posts took
 * and of the whole window (us).  Says how much of a window's gap is the
 * calls' own cost (the receiver's posts) and how much the rest.  ONLY=1
 * runs ipcpipe's windows alone (for perf).
 *   mpicc -O2 -g remote_post.c -I include -L build/src -L build/src/mpi \
 *         -lipcpipe_mpi -lipcpipe -Wl,-rpath,build/src:build/src/mpi \
 *         -o /tmp/remote_post
 *   mpirun -np 2 --bind-to none [-x ONLY] /tmp/remote_post [LEN] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ipcpipe.h"
#include "ipcpipe_mpi.h"

enum { N = 64, REPS = 100 };

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double med(double *v)
{
    qsort(v, REPS, sizeof(double), cmp);
    return v[REPS / 2];
}

static void post(int rank, int lib, ipcp_comm_t *c, char **buf, size_t len,
                 MPI_Request *r, ipcp_request_t **q)
{
    for (int i = 0; i < N; i++) {
        int rc = 0;
        if (!lib && rank == 0)
            MPI_Irecv(buf[i], (int)len, MPI_BYTE, 1, 7, MPI_COMM_WORLD, &r[i]);
        else if (!lib)
            MPI_Isend(buf[i], (int)len, MPI_BYTE, 0, 7, MPI_COMM_WORLD, &r[i]);
        else if (rank == 0)
            rc = ipcp_irecv(c, buf[i], len, 1, 7, &q[i]);
        else
            rc = ipcp_isend(c, buf[i], len, 0, 7, &q[i]);
        if (rc) {
            fprintf(stderr, "post: %s\n", ipcp_last_error());
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
}

int main(int argc, char **argv)
{
    int rank;
    size_t len = argc > 1 ? strtoul(argv[1], NULL, 0) : 65536;
    static double tp[2][REPS], ta[2][REPS];
    char node[16], *buf[N];
    ipcp_comm_t *c;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    snprintf(node, sizeof node, "%d", rank);
    setenv("IPCPIPE_NODE", node, 1);
    if (ipcp_init_mpi(MPI_COMM_WORLD, NULL, &c) != IPCP_OK) {
        fprintf(stderr, "ipcp_init_mpi: %s\n", ipcp_last_error());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (int i = 0; i < N; i++) {
        buf[i] = malloc(len);
        memset(buf[i], 1, len);
    }
    for (int rep = 0; rep < REPS; rep++)
        for (int lib = getenv("ONLY") ? 1 : 0; lib < 2; lib++) {
            MPI_Request r[N];
            ipcp_request_t *q[N];
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            post(rank, lib, c, buf, len, r, q);
            double t1 = MPI_Wtime();
            if (!lib)
                MPI_Waitall(N, r, MPI_STATUSES_IGNORE);
            for (int i = 0; lib && i < N; i++)
                ipcp_wait(q[i], NULL);
            tp[lib][rep] = (t1 - t0) * 1e6;
            ta[lib][rep] = (MPI_Wtime() - t0) * 1e6;
        }
    for (int p = 0; p < 2; p++) {
        MPI_Barrier(MPI_COMM_WORLD);
        if (p != rank)
            continue;
        for (int lib = getenv("ONLY") ? 1 : 0; lib < 2; lib++) {
            double a = med(ta[lib]);
            printf("rank %d %-7s %zu x%d: posts %.1f us, window %.1f us "
                   "(%.2f GB/s)\n",
                   rank, lib ? "ipcpipe" : "MPI", len, N, med(tp[lib]), a,
                   len * N / a / 1e3);
        }
        fflush(stdout);
    }
    ipcp_finalize(c);
    MPI_Finalize();
    return 0;
}
