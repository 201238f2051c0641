/* IPCPIPE_TRACE: two ranks move one staged and one direct transfer with
 * tracing on; check_trace.py then checks the merged file (valid JSON,
 * timestamps monotone on every track, the bytes of every copy).
 *
 * With the argument "driven" (CMakeLists.txt sets IPCPIPE_DRIVE=on and a
 * fixed IPCPIPE_STRIPE), rank 1 receives one striped transfer of host
 * memory that it copies itself: the direct pieces and both halves of the
 * staged part are its copies, on queues of two kinds (check_trace.py
 * --driven). */
#include <string.h>

#include "testutil.h"

enum {
    STAGED_SIZE = 3 << 20,
    DIRECT_SIZE = (5 << 20) + 7,
    DRIVEN_SIZE = (9 << 20) + 5
};

static void two_paths(ipcp_comm_t *comm, void *buf, uint64_t seed)
{
    if (t_rank == 0) {
        t_fill(buf, DIRECT_SIZE, seed);
        T_OK(ipcp_barrier(comm));
        T_OK(ipcp_send(comm, buf, STAGED_SIZE, 1, 1));
        T_OK(ipcp_send(comm, buf, DIRECT_SIZE, 1, 2));
        return;
    }
    ipcp_xfer_info_t info;
    T_OK(ipcp_comm_set_path(comm, IPCP_PATH_STAGED));
    T_OK(ipcp_barrier(comm));
    T_OK(ipcp_recv(comm, buf, STAGED_SIZE, 0, 1, &info));
    T_EQ_INT(info.path, IPCP_PATH_STAGED);
    t_verify(buf, STAGED_SIZE, seed, "staged");
    T_OK(ipcp_comm_set_path(comm, IPCP_PATH_DIRECT));
    T_OK(ipcp_recv(comm, buf, DIRECT_SIZE, 0, 2, &info));
    T_EQ_INT(info.path, IPCP_PATH_DIRECT);
    t_verify(buf, DIRECT_SIZE, seed, "direct");
}

static void driven(ipcp_comm_t *comm, void *buf, uint64_t seed)
{
    if (t_rank == 0) {
        t_fill(buf, DRIVEN_SIZE, seed);
        T_OK(ipcp_barrier(comm));
        T_OK(ipcp_send(comm, buf, DRIVEN_SIZE, 1, 3));
        return;
    }
    ipcp_xfer_info_t info;
    memset(buf, 0, DRIVEN_SIZE);
    T_OK(ipcp_barrier(comm));
    T_OK(ipcp_recv(comm, buf, DRIVEN_SIZE, 0, 3, &info));
    T_EQ_INT(info.path, IPCP_PATH_STRIPED);
    t_verify(buf, DRIVEN_SIZE, seed, "driven");
}

static int rank_main(int argc, char **argv)
{
    ipcp_comm_t *comm;
    void *buf;
    int drive = argc > 1 && strcmp(argv[1], "driven") == 0;
    T_OK(ipcp_init(NULL, &comm));
    t_rank = ipcp_comm_rank(comm);
    T_OK(ipcp_mem_alloc(comm, drive ? DRIVEN_SIZE : DIRECT_SIZE, NULL, &buf));
    if (drive)
        driven(comm, buf, 43);
    else
        two_paths(comm, buf, 42);
    /* Driven: each rank finalizes as soon as its call returned, so that the
     * receiver's goodbye races what the sender still waits for. */
    if (!drive)
        T_OK(ipcp_barrier(comm));
    T_OK(ipcp_mem_free(comm, buf));
    T_OK(ipcp_finalize(comm));
    return 0;
}

int main(int argc, char **argv)
{
    /* The launcher's children inherit IPCPIPE_TRACE from CTest's
     * environment (see CMakeLists.txt), and argv. */
    return t_mp_main(argc, argv, 2, 60, rank_main);
}
