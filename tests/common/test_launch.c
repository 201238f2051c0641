/* How the spawner folds its ranks' ends into one exit code
 * (ipcp_launch_exit_code): a job counts as skipped (77) only when every
 * rank skipped (or was stopped by the launcher after one did), and a
 * failure is never reported as a pass or a skip. */
#include <signal.h>
#include <sys/wait.h>

#include "launch.h"
#include "testutil.h"

/* An exit code or, as 1000 + n, death by signal n. */
static int fold(int n, const int *ends, int timed_out)
{
    ipcp_launch_result_t r;
    memset(&r, 0, sizeof(r));
    r.nranks = n;
    r.timed_out = timed_out;
    for (int i = 0; i < n; i++) {
        r.pid[i] = 1000 + i;
        r.wait_status[i] = ends[i] >= 1000 ? W_EXITCODE(0, ends[i] - 1000)
                                           : W_EXITCODE(ends[i], 0);
    }
    return ipcp_launch_exit_code(&r);
}

#define CASE(expect, timed_out, ...)                                           \
    do {                                                                       \
        const int e_[] = {__VA_ARGS__};                                        \
        int got_ = fold((int)(sizeof(e_) / sizeof(e_[0])), e_, timed_out);     \
        if (got_ != (expect))                                                  \
            T_FAIL("ranks ending %s folded into %d, expected %d",              \
                   #__VA_ARGS__, got_, (expect));                              \
    } while (0)

int main(void)
{
    CASE(0, 0, 0, 0);
    CASE(77, 0, 77, 77);
    CASE(1, 0, 77, 1); /* a rank failed: not a skip */
    CASE(1, 0, 1, 77);
    CASE(1, 0, 0, 77); /* one rank skipped while the other ran */
    CASE(1, 0, 77, 0);
    CASE(3, 0, 77, 3, 0);
    CASE(3, 0, 1000 + SIGTERM, 3); /* the exit that failed, not the stop */
    CASE(128 + SIGSEGV, 0, 1000 + SIGTERM, 1000 + SIGSEGV);
    CASE(77, 0, 77, 1000 + SIGTERM); /* stopped after the other skipped */
    CASE(77, 0, 1000 + SIGKILL, 77);
    CASE(128 + SIGTERM, 0, 77, 1000 + SIGTERM, 0); /* one passed */
    CASE(124, 1, 0, 1000 + SIGKILL);
    printf("exit codes folded as expected\n");
    return 0;
}
