/* common/cpu.h: a process bound to one CPU is seen as such, one that may
 * use several is not; on one CPU shared with a thread that spins without
 * yielding, the relax calls hand the CPU over and come back within
 * microseconds (sleeping), not after the spinner's whole slice (a yield
 * there took 2-4 ms on the CI's VM). */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/cpu.h"
#include "common/time.h"
#include "testutil.h"

static atomic_int spin_stop;
static atomic_long spin_count;

static void *spinner(void *arg)
{
    (void)arg;
    while (!atomic_load_explicit(&spin_stop, memory_order_relaxed))
        atomic_fetch_add_explicit(&spin_count, 1, memory_order_relaxed);
    return NULL;
}

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
        for (int i = 0; i < 100; i++) /* nobody spins: these yield */
            ipcp__relax(1);
        pthread_t t;
        T_CHECK(pthread_create(&t, NULL, spinner, NULL) == 0);
        long before = atomic_load(&spin_count);
        uint64_t t0 = ipcp__now_ns();
        for (int i = 0; i < 200; i++)
            ipcp__relax(1);
        uint64_t took = ipcp__now_ns() - t0;
        long after = atomic_load(&spin_count);
        atomic_store(&spin_stop, 1);
        T_CHECK(pthread_join(t, NULL) == 0);
        /* Yielding every time: about 200 / 2.5 slices of 4 ms (320 ms). */
        fprintf(stderr, "200 relax calls beside a spinner: %.1f ms\n",
                (double)took / 1e6);
        T_CHECK(took < 100000000ull);
        T_CHECK(after > before); /* the spinner ran meanwhile */
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
