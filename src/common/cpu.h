/* Threads that share one CPU.  Launchers bind each rank to one core by
 * default (mpirun, srun), and then every thread of the rank (the caller,
 * the progress thread, copy workers, the CUDA event poller, the driver's
 * own) runs on it.  A thread that polls with sched_yield there keeps the
 * core until the scheduler's slice ends (milliseconds), while the thread
 * it waits for cannot run: on one H200 a stream-ordered 8 B half round
 * trip took 7.9 ms bound against 0.17 ms unbound.  Such threads sleep a
 * few microseconds between looks instead, which hands the core over at
 * once and wakes them with the scheduler's preference for sleepers. */
#ifndef IPCP_COMMON_CPU_H
#define IPCP_COMMON_CPU_H

/* 1 when the calling process may run on one CPU only (looked up once). */
int ipcp__one_cpu(void);

/* Between two looks at something another thread or process will change:
 * sched_yield, or a short sleep when the process has one CPU and others
 * is set (other threads have work: a thread that spins without yielding,
 * such as a CUDA stream synchronization, keeps a yielding one off the CPU
 * for a whole slice).  Where only the peer's answer is awaited, yielding
 * keeps the latency low (eager 8 B: 6 us a half round trip bound, 21 us
 * sleeping). */
void ipcp__relax(int others);

/* One turn of a busy wait on a value another CPU writes: tells the core
 * so (a hyperthread sibling gets the pipeline meanwhile). */
static inline void ipcp__cpu_pause(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

#endif
