/* Threads that share one CPU.  Launchers bind each rank to one core by
 * default (mpirun, srun), and then every thread of the rank (the caller,
 * the progress thread, copy workers, the CUDA event poller, the driver's
 * own) runs on it.  Between threads that yield, a yield hands the core
 * over in about a microsecond.  But a thread that spins without yielding
 * (a caller in cuStreamSynchronize under CUDA's default schedule) keeps
 * the core for the scheduler's whole slice (milliseconds) while the
 * thread it waits for cannot run: on one H200 a stream-ordered 8 B half
 * round trip took 7.9 ms bound against 0.17 ms unbound.  Once a yield
 * comes back that late, the process's threads sleep a few microseconds
 * between looks instead for a while, which hands the core over at once
 * and wakes them with the scheduler's preference for sleepers. */
#ifndef IPCP_COMMON_CPU_H
#define IPCP_COMMON_CPU_H

/* 1 when the calling process may run on one CPU only (looked up once). */
int ipcp__one_cpu(void);

/* Between two looks at something another thread or process will change:
 * sched_yield; when the process has one CPU and others is set (other
 * threads have work, among them maybe one that spins without yielding),
 * a short sleep instead while a recent yield came back late.  Where only
 * the peer's answer is awaited (others 0), yielding keeps the latency low
 * (eager 8 B: 6 us a half round trip bound, 21 us sleeping). */
void ipcp__relax(int others);

/* Whether the process's threads sleep between looks now: a yield came
 * back late within the last second.  Anything that keeps the CPU for a
 * slice does that, not only a spinning thread: another process on the
 * CPU, a long copy of a sibling thread, a hypervisor's steal; then the
 * threads sleep a second for nothing worse than before they yielded. */
int ipcp__relax_sleeping(void);

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

/* Asks for the line at p to be ours to write (exclusive), ahead of a
 * store: __builtin_prefetch(p, 1) is a plain read prefetch on x86-64
 * unless the build targets a CPU with PREFETCHW, which every x86-64 CPU
 * either runs or takes as a no-op. */
static inline void ipcp__prefetch_write(const void *p)
{
#if defined(__x86_64__)
    __asm__ __volatile__("prefetchw %0" : : "m"(*(const char *)p));
#else
    __builtin_prefetch(p, 1);
#endif
}

#endif
