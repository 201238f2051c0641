#ifndef IPCP_COMMON_TIME_H
#define IPCP_COMMON_TIME_H

#include <stdint.h>
#include <time.h>

/* CLOCK_MONOTONIC is one clock for every process of the machine, so time
 * stamps taken in different ranks can be compared directly. */
static inline uint64_t ipcp__now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The same clock at its last tick (4 ms here, the kernel's jiffy): a
 * few ns a read where a precise one cost 17-28 ns on 2-CPU VMs.  For
 * stamps a timeout of milliseconds or more reads, and for answers that
 * stand for a tick.  0 if the clock cannot be read. */
static inline uint64_t ipcp__coarse_ns(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC_COARSE, &ts) != 0)
        return 0;
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline double ipcp__now_s(void)
{
    return (double)ipcp__now_ns() * 1e-9;
}

#endif
