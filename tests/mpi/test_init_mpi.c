/* ipcp_init_mpi under mpirun: a job made of MPI_COMM_WORLD moves fresh
 * data around a ring, every byte checked; a second job made of a split of
 * it (even and odd ranks) lives beside the first; bad arguments are
 * refused with the reason.  Links the shared library only, as a user's
 * program does. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ipcpipe_mpi.h"
#include "mpitest.h"

/* Each rank of job sends n fresh bytes to the next and checks what the
 * one before sent (a job of one has no peer: transfers to self are not
 * supported). */
static void ring(ipcp_comm_t *c, size_t n, uint64_t seed)
{
    int me = ipcp_comm_rank(c), size = ipcp_comm_size(c);
    if (size == 1)
        return;
    unsigned char *out = malloc(n), *in = malloc(n), *want = malloc(n);
    ipcp_request_t *r;
    ipcp_xfer_info_t info;
    if (!out || !in || !want)
        fail("out of memory");
    fill(out, n, seed + (uint64_t)me);
    fill(want, n, seed + (uint64_t)((me + size - 1) % size));
    memset(in, 0, n);
    OK(ipcp_irecv(c, in, n, (me + size - 1) % size, 3, &r));
    OK(ipcp_send(c, out, n, (me + 1) % size, 3));
    OK(ipcp_wait(r, &info));
    if (info.nbytes != n || memcmp(in, want, n) != 0)
        fail("ring of %zu bytes: data from rank %d differs", n,
             (me + size - 1) % size);
    free(out);
    free(in);
    free(want);
}

static void expect_invalid(void)
{
    ipcp_comm_t *c = (ipcp_comm_t *)1;
    ipcp_status_t st = ipcp_init_mpi(MPI_COMM_NULL, NULL, &c);
    if (st != IPCP_ERR_INVALID || !strstr(ipcp_last_error(), "MPI_COMM_NULL"))
        fail("MPI_COMM_NULL: %s (%s)", ipcp_strerror(st), ipcp_last_error());
    st = ipcp_init_mpi(MPI_COMM_WORLD, NULL, NULL);
    if (st != IPCP_ERR_INVALID || !strstr(ipcp_last_error(), "NULL"))
        fail("NULL output: %s (%s)", ipcp_strerror(st), ipcp_last_error());
}

int main(int argc, char **argv)
{
    ipcp_comm_t *world = NULL, *half = NULL;
    ipcp_comm_params_t p;
    MPI_Comm split;
    int rank, size;
    uint64_t seed = 0;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    t_rank = rank;
    expect_invalid();
    ipcp_comm_params_init(&p);
    p.rank = 5; /* ignored: the communicator's rank counts */
    p.job_id = "not-this";
    OK(ipcp_init_mpi(MPI_COMM_WORLD, &p, &world));
    if (ipcp_comm_rank(world) != rank || ipcp_comm_size(world) != size)
        fail("rank %d of %d, MPI says %d of %d", ipcp_comm_rank(world),
             ipcp_comm_size(world), rank, size);
    if (strcmp(ipcp_comm_job(world), "not-this") == 0)
        fail("the job's name came from params");
    if (rank == 0)
        seed = (uint64_t)MPI_Wtime() * 1000003u ^ 0x9e3779b97f4a7c15ull;
    MPI_Bcast(&seed, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    /* A second job beside the first: even and odd ranks. */
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &split);
    OK(ipcp_init_mpi(split, NULL, &half));
    MPI_Comm_free(&split);
    if (strcmp(ipcp_comm_job(half), ipcp_comm_job(world)) == 0)
        fail("two communicators made one job (%s)", ipcp_comm_job(half));
    ring(world, 1 << 20 | 3, seed);
    ring(half, 64 << 10, seed + 99);
    ring(world, 7, seed + 7);
    OK(ipcp_barrier(world));
    OK(ipcp_finalize(half));
    OK(ipcp_finalize(world));
    printf("rank %d of %d: rings of 1 MiB + 3, 64 KiB and 7 bytes checked, "
           "in MPI_COMM_WORLD's job and its split's\n",
           rank, size);
    MPI_Finalize();
    return 0;
}
