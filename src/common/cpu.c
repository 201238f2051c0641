/* Threads that share one CPU (common/cpu.h). */
#include <pthread.h>
#include <sched.h>
#include <sys/prctl.h>
#include <time.h>

#include "common/cpu.h"
#include "common/log.h"

/* Long enough that the sleep is a real hand-over (a shorter one is a
 * spin in the kernel), short against a transfer's steps. */
#define IPCP_RELAX_SLEEP_NS 20000

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
                  "its threads sleep between looks instead of spinning");
}

int ipcp__one_cpu(void)
{
    pthread_once(&ipcp__cpu_once, ipcp__cpu_probe);
    return ipcp__cpu_single;
}

void ipcp__relax(int others)
{
    if (!others || !ipcp__one_cpu()) {
        sched_yield();
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
