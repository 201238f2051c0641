/* ipcp_init_mpi: an ipcpipe job made of the ranks of an MPI communicator.
 * Built apart as libipcpipe_mpi, so that the core library never links
 * MPI; it reaches the core through its public calls only (and its error
 * reporting, exported for its modules). */
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ipcpipe_mpi.h"
#include "common/status.h"

/* Rank 0's name for the job: its host, pid, a count of its calls and the
 * time, so that two communicators, or two calls, never share one. */
static void mpi_job_name(char *buf, size_t len)
{
    static int calls;
    char host[64] = "";
    struct timespec ts;
    (void)gethostname(host, sizeof(host) - 1);
    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(buf, len, "mpi-%.32s-%ld-%d-%lx", host, (long)getpid(),
             __atomic_add_fetch(&calls, 1, __ATOMIC_RELAXED),
             (unsigned long)ts.tv_sec ^ (unsigned long)ts.tv_nsec);
}

/* How many of comm's ranks share this node (an MPI-3 shared-memory
 * split); -1 when MPI refuses. */
static int mpi_node_size(MPI_Comm comm)
{
    MPI_Comm node;
    int n = -1;
    if (MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL,
                            &node) != MPI_SUCCESS)
        return -1;
    if (MPI_Comm_size(node, &n) != MPI_SUCCESS)
        n = -1;
    MPI_Comm_free(&node);
    return n;
}

/* The caller's timeout and path, from as much of params as it has. */
static void mpi_params(const ipcp_comm_params_t *params, ipcp_comm_params_t *p)
{
    ipcp_comm_params_init(p);
    if (params == NULL)
        return;
    if (params->struct_size >=
        offsetof(ipcp_comm_params_t, timeout_s) + sizeof(params->timeout_s))
        p->timeout_s = params->timeout_s;
    if (params->struct_size >=
        offsetof(ipcp_comm_params_t, path) + sizeof(params->path))
        p->path = params->path;
}

ipcp_status_t ipcp_init_mpi(MPI_Comm comm, const ipcp_comm_params_t *params,
                            ipcp_comm_t **out)
{
    ipcp_comm_params_t p;
    char job[96] = "";
    int inited = 0, finished = 0, rank, size, local;

    if (out == NULL || comm == MPI_COMM_NULL)
        return ipcp__fail(IPCP_LOG_INFO, IPCP_SUB_API, IPCP_ERR_INVALID,
                          "ipcp_init_mpi: %s",
                          out == NULL ? "the output pointer is NULL"
                                      : "the communicator is MPI_COMM_NULL");
    *out = NULL;
    MPI_Initialized(&inited);
    MPI_Finalized(&finished);
    if (!inited || finished)
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_API, IPCP_ERR_STATE,
                          "ipcp_init_mpi: MPI is %s",
                          inited ? "finalized" : "not initialized");
    if (MPI_Comm_rank(comm, &rank) != MPI_SUCCESS ||
        MPI_Comm_size(comm, &size) != MPI_SUCCESS)
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_API, IPCP_ERR_INVALID,
                          "ipcp_init_mpi: the communicator's rank or size "
                          "cannot be had");
    /* Every rank sees the same answer (the job is on one node exactly when
     * each node holds all of it), so none waits for another. */
    if ((local = mpi_node_size(comm)) != size)
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_BOOT, IPCP_ERR_UNSUPPORTED,
                          "ipcp_init_mpi: the communicator's %d ranks are "
                          "on several nodes (%d on this one): ipcpipe joins "
                          "the ranks of one node (split the communicator "
                          "with MPI_COMM_TYPE_SHARED)",
                          size, local);
    if (rank == 0)
        mpi_job_name(job, sizeof(job));
    if (MPI_Bcast(job, (int)sizeof(job), MPI_CHAR, 0, comm) != MPI_SUCCESS)
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_BOOT, IPCP_ERR_SYSTEM,
                          "ipcp_init_mpi: MPI_Bcast of the job's name failed");
    job[sizeof(job) - 1] = '\0';
    mpi_params(params, &p);
    p.rank = rank;
    p.size = size;
    p.job_id = job;
    return ipcp_init(&p, out);
}
