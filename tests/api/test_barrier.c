/* Barriers: many in a row across 3 ranks, and a barrier that a rank never
 * enters times out (IPCPIPE_TIMEOUT) naming the missing rank; later
 * barriers on that communicator then fail instead of pairing up wrongly. */
#include "testutil.h"

#include <time.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int rank_main(int argc, char **argv)
{
    ipcp_comm_t *comm;
    int skip = argc > 1 && strcmp(argv[1], "--timeout") == 0;
    T_OK(ipcp_init(NULL, &comm));
    t_rank = ipcp_comm_rank(comm);
    for (int i = 0; i < 200; i++)
        T_OK(ipcp_barrier(comm));
    if (skip) {
        int x = 0;
        if (t_rank == 2) {
            /* Never enters: waits for rank 0's word that it gave up. */
            T_OK(ipcp_recv(comm, &x, sizeof x, 0, 9, NULL));
        } else {
            double t0 = now_s();
            T_STATUS(ipcp_barrier(comm), IPCP_ERR_TIMEOUT);
            double dt = now_s() - t0;
            if (dt < 0.9 || dt > 5)
                T_FAIL("the barrier gave up after %.2f s (timeout 1 s)", dt);
            if (t_rank == 0)
                T_MSG_HAS("rank 2");
            T_STATUS(ipcp_barrier(comm), IPCP_ERR_STATE);
            T_MSG_HAS("timed out");
            if (t_rank == 0)
                T_OK(ipcp_send(comm, &x, sizeof x, 2, 9));
        }
    }
    T_OK(ipcp_finalize(comm));
    (void)argv;
    return 0;
}

int main(int argc, char **argv)
{
    return t_mp_main(argc, argv, 3, 60, rank_main);
}
