/* An MPI job over several nodes: every rank sends a message to the next
 * around the ring of MPI_COMM_WORLD and receives the one before's; ranks
 * of one node reach each other by ipcpipe's own paths, ranks of other
 * nodes through MPI.  On one machine, IPCPIPE_NODE makes the nodes:
 *
 *   mpirun -np 2 -x IPCPIPE_NODE=a ./example_mpi_nodes : \
 *          -np 2 -x IPCPIPE_NODE=b ./example_mpi_nodes
 *
 * Exits 1 (after saying why) when a message is not what was sent. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ipcpipe_mpi.h"

static int check(ipcp_status_t st, const char *what)
{
    if (st == IPCP_OK)
        return 0;
    fprintf(stderr, "%s: %s (%s)\n", what, ipcp_strerror(st),
            ipcp_last_error());
    return 1;
}

int main(int argc, char **argv)
{
    ipcp_comm_t *comm;
    ipcp_request_t *req;
    ipcp_xfer_info_t info;
    char out[64], in[64] = "", want[64];
    int rc = 1;

    MPI_Init(&argc, &argv);
    if (check(ipcp_init_mpi(MPI_COMM_WORLD, NULL, &comm), "ipcp_init_mpi"))
        MPI_Abort(MPI_COMM_WORLD, 1);
    int me = ipcp_comm_rank(comm), n = ipcp_comm_size(comm);
    int next = (me + 1) % n, prev = (me + n - 1) % n;
    snprintf(out, sizeof(out), "hello from rank %d", me);
    snprintf(want, sizeof(want), "hello from rank %d", prev);
    if (n > 1 &&
        !check(ipcp_irecv(comm, in, sizeof(in), prev, 0, &req), "irecv") &&
        !check(ipcp_send(comm, out, sizeof(out), next, 0), "send") &&
        !check(ipcp_wait(req, &info), "wait")) {
        const char *node = getenv("IPCPIPE_NODE");
        printf("rank %d (node %s): \"%s\" by path %s\n", me,
               node ? node : "of MPI's", in, ipcp_path_name(info.path));
        rc = strcmp(in, want) != 0;
        if (rc)
            fprintf(stderr, "rank %d: expected \"%s\"\n", me, want);
    } else if (n == 1) {
        rc = 0;
    }
    if (check(ipcp_finalize(comm), "ipcp_finalize"))
        rc = 1;
    MPI_Finalize();
    return rc;
}
