/* IPCPIPE_TRACE: two ranks move one staged and one direct transfer with
 * tracing on; check_trace.py then checks the merged file (valid JSON,
 * timestamps monotone on every track, the bytes of every copy). */
#include "testutil.h"

enum { STAGED_SIZE = 3 << 20, DIRECT_SIZE = (5 << 20) + 7 };

static int rank_main(int argc, char **argv)
{
    ipcp_comm_t *comm;
    void *buf;
    (void)argc;
    (void)argv;
    T_OK(ipcp_init(NULL, &comm));
    t_rank = ipcp_comm_rank(comm);
    T_OK(ipcp_mem_alloc(comm, DIRECT_SIZE, NULL, &buf));
    uint64_t seed = 42;
    if (t_rank == 0) {
        t_fill(buf, DIRECT_SIZE, seed);
        T_OK(ipcp_barrier(comm));
        T_OK(ipcp_send(comm, buf, STAGED_SIZE, 1, 1));
        T_OK(ipcp_send(comm, buf, DIRECT_SIZE, 1, 2));
    } else {
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
    T_OK(ipcp_barrier(comm));
    T_OK(ipcp_mem_free(comm, buf));
    T_OK(ipcp_finalize(comm));
    return 0;
}

int main(int argc, char **argv)
{
    /* The launcher's children inherit IPCPIPE_TRACE from CTest's
     * environment (see CMakeLists.txt). */
    return t_mp_main(argc, argv, 2, 60, rank_main);
}
