/* ipcp_init_mpi: an ipcpipe job made of the ranks of an MPI communicator.
 * Built apart as libipcpipe_mpi, so that the core library never links
 * MPI; it reaches the core through its public calls, its error reporting
 * and ipcp__comm_remote (exported for this library).  Each node's ranks
 * make a job of their own through the core; ranks on other nodes are
 * reached through MPI (remote_mpi.c). */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ipcpipe_mpi.h"
#include "common/status.h"
#include "mpi/remote_mpi.h"

/* Room for a node's name (IPCPIPE_NODE) and for a job's. */
#define IPCP_NODE_NAME 200

/* Rank 0's name for the job: its host, pid, a count of its calls and the
 * time, so that two communicators, or two calls, never share one. */
static void mpi_job_name(char *buf, size_t len)
{
    static int calls;
    char host[64] = "";
    struct timespec ts;
    (void)gethostname(host, sizeof(host) - 1);
    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(buf, len, "mpi-%.16s-%ld-%d-%lx", host, (long)getpid(),
             __atomic_add_fetch(&calls, 1, __ATOMIC_RELAXED),
             (unsigned long)ts.tv_sec ^ (unsigned long)ts.tv_nsec);
}

/* The node of this rank, as the lowest rank of comm on it: the ranks
 * that share memory (MPI-3's split), and among them, where any sets
 * IPCPIPE_NODE, those with the same value (unset counts as ""), so that
 * one machine can stand for several.  -1 when MPI refuses. */
static int mpi_node(MPI_Comm comm, int rank)
{
    char name[IPCP_NODE_NAME] = "", *names = NULL;
    const char *env = getenv("IPCPIPE_NODE");
    int named = env != NULL, any = 0, color = -1, n = 0, *ranks = NULL;
    MPI_Comm node;
    if (MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL,
                            &node) != MPI_SUCCESS)
        return -1;
    if (MPI_Comm_size(node, &n) != MPI_SUCCESS ||
        MPI_Allreduce(&named, &any, 1, MPI_INT, MPI_MAX, node) != MPI_SUCCESS ||
        !(ranks = malloc(sizeof(int) * (size_t)n)) ||
        MPI_Allgather(&rank, 1, MPI_INT, ranks, 1, MPI_INT, node) !=
            MPI_SUCCESS)
        goto out;
    snprintf(name, sizeof(name), "%s", any && env ? env : "");
    if (!(names = malloc((size_t)n * sizeof(name))) ||
        MPI_Allgather(name, (int)sizeof(name), MPI_CHAR, names,
                      (int)sizeof(name), MPI_CHAR, node) != MPI_SUCCESS)
        goto out;
    color = rank;
    for (int i = 0; i < n; i++)
        if (ranks[i] < color &&
            !strncmp(names + (size_t)i * sizeof(name), name, sizeof(name)))
            color = ranks[i];
out:
    free(names);
    free(ranks);
    MPI_Comm_free(&node);
    return color;
}

/* Whether every rank of comm says ok (one MPI_Allreduce; 0 when it
 * fails). */
static int mpi_all(MPI_Comm comm, int ok)
{
    int all = 0;
    return MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, comm) == MPI_SUCCESS &&
           all;
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

/* Joins this node's ranks (colors: each rank's node), then reaches the
 * others through MPI.  Collective: every rank learns whether all got as
 * far, so none waits in MPI for a rank that gave up. */
static ipcp_status_t mpi_join(MPI_Comm comm, const ipcp_comm_params_t *params,
                              int rank, int size, const int *colors,
                              const char *job, ipcp_comm_t **out)
{
    ipcp_comm_params_t p;
    const ipcp__remote_ops_t *ops = NULL;
    char jobl[64];
    int *local = malloc(sizeof(int) * (size_t)size), n = 0;
    void *ctx = NULL;
    for (int r = 0; local && r < size; r++)
        local[r] = colors[r] == colors[rank] ? n++ : -1;
    /* A node's job of its own: its ranks meet through this node alone. */
    snprintf(jobl, sizeof(jobl), "%s-n%d", job, colors[rank]);
    mpi_params(params, &p);
    p.rank = local ? local[rank] : 0;
    p.size = n;
    p.job_id = jobl;
    ipcp_status_t st =
        local ? ipcp_init(&p, out)
              : ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_INIT, IPCP_ERR_NOMEM,
                           "ipcp_init_mpi: no memory for a map of %d ranks",
                           size);
    if (!mpi_all(comm, st == IPCP_OK) && st == IPCP_OK)
        st = ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_INIT, IPCP_ERR_SYSTEM,
                        "ipcp_init_mpi: another node's ranks could not "
                        "meet (their logs say why)");
    if (st == IPCP_OK && n < size) {
        st = ipcp__mpi_remote(comm, &ops, &ctx);
        if (st == IPCP_OK)
            st = ipcp__comm_remote(*out, job, rank, size, local, ops, ctx);
        if (!mpi_all(comm, st == IPCP_OK) && st == IPCP_OK)
            st = ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_INIT, IPCP_ERR_SYSTEM,
                            "ipcp_init_mpi: another rank could not reach "
                            "the other nodes (its log says why)");
        else if (st == IPCP_OK)
            ipcp__mpi_joined(ctx);
    }
    if (st != IPCP_OK && *out) {
        char msg[IPCP_ERRMSG_MAX];
        snprintf(msg, sizeof(msg), "%s", ipcp_last_error());
        ipcp_finalize(*out);
        *out = NULL;
        ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_INIT, st, "%s", msg);
    }
    free(local);
    return st;
}

ipcp_status_t ipcp_init_mpi(MPI_Comm comm, const ipcp_comm_params_t *params,
                            ipcp_comm_t **out)
{
    char job[64] = "";
    int inited = 0, finished = 0, rank, size;

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
    /* Every rank learns every rank's node, so all take the same way. */
    int color = mpi_node(comm, rank);
    int *colors = malloc(sizeof(int) * (size_t)size);
    if (!colors || MPI_Allgather(&color, 1, MPI_INT, colors, 1, MPI_INT,
                                 comm) != MPI_SUCCESS) {
        free(colors);
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_BOOT, IPCP_ERR_SYSTEM,
                          "ipcp_init_mpi: the ranks' nodes could not be "
                          "learned through MPI");
    }
    for (int r = 0; r < size; r++)
        if (colors[r] < 0) {
            free(colors);
            return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_BOOT, IPCP_ERR_SYSTEM,
                              "ipcp_init_mpi: rank %d could not learn its "
                              "node through MPI",
                              r);
        }
    if (rank == 0)
        mpi_job_name(job, sizeof(job));
    if (MPI_Bcast(job, (int)sizeof(job), MPI_CHAR, 0, comm) != MPI_SUCCESS) {
        free(colors);
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_BOOT, IPCP_ERR_SYSTEM,
                          "ipcp_init_mpi: MPI_Bcast of the job's name failed");
    }
    job[sizeof(job) - 1] = '\0';
    ipcp_status_t st = mpi_join(comm, params, rank, size, colors, job, out);
    free(colors);
    return st;
}
