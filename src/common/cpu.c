/* Threads that share one CPU (common/cpu.h). */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <time.h>

#include "common/cpu.h"
#include "common/log.h"
#include "common/time.h"

/* A yield that comes back later than this handed the CPU to a thread that
 * ran without yielding (a scheduler's slice is milliseconds; between
 * threads that yield a hand-over takes about a microsecond). */
#define IPCP_RELAX_LATE_NS 300000ull
/* How long the process sleeps between looks once a yield came back late,
 * before it tries a yield again (which costs one slice if a thread still
 * spins: about 0.3% of the time). */
#define IPCP_RELAX_HOLD_NS 1000000000ull
/* Long enough that the sleep is a real hand-over, short against a
 * transfer's steps: on one H200 with the caller in cuStreamSynchronize,
 * stream-ordered 2 MiB x 32 moved 41 GB/s sleeping 5 us, 27 sleeping
 * 20 us; 2 us measured as 5 on one H100 (bound device cases, 2026-12-06). */
#define IPCP_RELAX_SLEEP_NS 5000

static pthread_once_t ipcp__cpu_once = PTHREAD_ONCE_INIT;
static int ipcp__cpu_single;

static void ipcp__cpu_probe(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) == 1)
        ipcp__cpu_single = 1;
    if (ipcp__cpu_single)
        IPCP_INFO(IPCP_SUB_INIT,
                  "this process may run on one CPU only: "
                  "its threads yield between looks instead of spinning");
}

int ipcp__one_cpu(void)
{
    pthread_once(&ipcp__cpu_once, ipcp__cpu_probe);
    return ipcp__cpu_single;
}

/* Until when the process's threads sleep between looks (a time past:
 * they yield).  Relaxed: the word publishes nothing else, and two threads
 * that set it at once set about the same time. */
static _Atomic uint64_t ipcp__relax_until;

int ipcp__relax_sleeping(void)
{
    return ipcp__now_ns() <
           atomic_load_explicit(&ipcp__relax_until, memory_order_relaxed);
}

void ipcp__relax(int others)
{
    if (!others || !ipcp__one_cpu()) {
        sched_yield();
        return;
    }
    uint64_t now = ipcp__now_ns();
    if (now >= atomic_load_explicit(&ipcp__relax_until, memory_order_relaxed)) {
        sched_yield();
        if (ipcp__now_ns() - now < IPCP_RELAX_LATE_NS)
            return;
        /* Said once a process: later holds are the same story. */
        if (!atomic_exchange_explicit(&ipcp__relax_until,
                                      now + IPCP_RELAX_HOLD_NS,
                                      memory_order_relaxed))
            IPCP_INFO(IPCP_SUB_INIT,
                      "a thread on this process's one CPU runs without "
                      "yielding (a CUDA stream synchronization?): ipcpipe's "
                      "threads sleep between looks while it does");
        return;
    }
    /* The default timer slack (50 us) would stretch every such sleep to
     * about 70 us: this thread's sleeps are meant to be short. */
    static _Thread_local int slack_set;
    if (!slack_set) {
        (void)prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
        slack_set = 1;
    }
    struct timespec ts = {0, IPCP_RELAX_SLEEP_NS};
    nanosleep(&ts, NULL);
}
