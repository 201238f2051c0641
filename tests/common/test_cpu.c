/* common/cpu.h: a process bound to one CPU is seen as such (its threads
 * then sleep between looks while device work runs), one that may use
 * several is not, and the relax calls return in both cases. */
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/cpu.h"
#include "common/time.h"
#include "testutil.h"

int main(void)
{
    cpu_set_t set;
    T_CHECK(sched_getaffinity(0, sizeof(set), &set) == 0);
    if (CPU_COUNT(&set) < 2) {
        fprintf(stderr, "SKIP: this process may use one CPU only\n");
        return T_SKIP;
    }
    pid_t pid = fork();
    T_CHECK(pid >= 0);
    if (pid == 0) {
        cpu_set_t one;
        CPU_ZERO(&one);
        for (int c = 0; c < CPU_SETSIZE; c++)
            if (CPU_ISSET(c, &set)) {
                CPU_SET(c, &one);
                break;
            }
        T_CHECK(sched_setaffinity(0, sizeof(one), &one) == 0);
        T_EQ_INT(ipcp__one_cpu(), 1);
        uint64_t t0 = ipcp__now_ns();
        for (int i = 0; i < 100; i++)
            ipcp__relax(1);
        /* 100 sleeps of about 20 us, not 100 yields. */
        T_CHECK(ipcp__now_ns() - t0 > 100 * 15000ull);
        ipcp__relax(0);
        _exit(0);
    }
    int st;
    T_CHECK(waitpid(pid, &st, 0) == pid);
    T_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    T_EQ_INT(ipcp__one_cpu(), 0);
    ipcp__relax(1);
    return 0;
}
