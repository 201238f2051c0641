/* The process's brk heap and the threads' stacks (common/heap.h). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/heap.h"

static pthread_once_t heap_once = PTHREAD_ONCE_INIT;
static _Atomic uintptr_t heap_start; /* 0: not known */

/* start_brk, field 47 of /proc/self/stat: the 45th after the command's
 * closing parenthesis (the command may hold spaces and parentheses). */
static void heap_find(void)
{
    char buf[2048];
    FILE *f = fopen("/proc/self/stat", "r");
    if (!f)
        return;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    unsigned long long v = 0;
    for (int field = 2; p && field < 47; field++)
        p = strchr(p + 1, ' ');
    if (p && sscanf(p + 1, "%llu", &v) == 1)
        atomic_store_explicit(&heap_start, (uintptr_t)v, memory_order_relaxed);
}

int ipcp__heap_holds(const void *ptr, size_t len)
{
    pthread_once(&heap_once, heap_find);
    uintptr_t lo = atomic_load_explicit(&heap_start, memory_order_relaxed);
    uintptr_t p = (uintptr_t)ptr;
    if (!lo || p < lo)
        return 0;
    /* The break now (glibc keeps it; no system call): a heap that grew
     * since holds more, one that shrank less. */
    void *brk = sbrk(0);
    uintptr_t hi = (uintptr_t)brk;
    return brk != (void *)-1 && p < hi && len <= hi - p;
}

/* The calling thread's stack [lo, hi), from pthread_getattr_np once (for
 * the main thread glibc reads /proc/self/maps; for others it is the
 * thread's own record); 0, 0 where it could not say. */
static _Thread_local uintptr_t stack_lo, stack_hi;
static _Thread_local int stack_read;

static void stack_find(void)
{
    pthread_attr_t a;
    void *addr = NULL;
    size_t size = 0;
    stack_read = 1;
    if (pthread_getattr_np(pthread_self(), &a) != 0)
        return;
    if (pthread_attr_getstack(&a, &addr, &size) == 0 && addr && size) {
        stack_lo = (uintptr_t)addr;
        stack_hi = stack_lo + size;
    }
    pthread_attr_destroy(&a);
}

int ipcp__stack_holds(const void *ptr, size_t len)
{
    uintptr_t sp = (uintptr_t)__builtin_frame_address(0), p = (uintptr_t)ptr;
    if (!stack_read)
        stack_find();
    /* This frame in the thread's stack, and the range between it and the
     * top: every byte there is the stack's, mapped and the thread's. */
    return sp >= stack_lo && sp < stack_hi && p >= sp && p < stack_hi &&
           len <= stack_hi - p;
}
