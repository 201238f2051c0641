/* The brk heap (src/common/heap.c): a small malloc'd buffer lies in it
 * (unless a sanitizer's allocator serves malloc), and nothing else does:
 * a stack variable, a mapped page, a range that runs past the break, a
 * null pointer.  The caller's stack: its variables and those of the
 * frames above lie in it (unless a sanitizer moved them to fake frames),
 * and nothing else does: the heap, a mapped page, another thread's
 * stack, a range past the stack's top.
 *
 *   test_heap */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/heap.h"
#include "testutil.h"

/* A buffer of a frame below main's (the library's caller is deeper than
 * the user's buffers; here the buffer's frame is the deeper one). */
static __attribute__((noinline)) int deeper(void)
{
    volatile unsigned char buf[64] = {0};
    return ipcp__stack_holds((const void *)buf, sizeof(buf)) ==
           t_on_own_stack((const void *)buf);
}

static void *other_thread(void *arg)
{
    int mine = 0;
    /* main's variable: another thread's stack, not this one's. */
    T_EQ_INT(ipcp__stack_holds(arg, sizeof(int)), 0);
    T_EQ_INT(ipcp__stack_holds(&mine, sizeof(mine)), t_on_own_stack(&mine));
    return NULL;
}

static void stacks(unsigned char *small, void *page)
{
    int here = 0;
    int want = t_on_own_stack(&here);
    T_EQ_INT(ipcp__stack_holds(&here, sizeof(here)), want);
    T_CHECK(deeper());
    T_EQ_INT(ipcp__stack_holds(small, 16), 0);
    T_EQ_INT(ipcp__stack_holds(page, 4096), 0);
    T_EQ_INT(ipcp__stack_holds(NULL, 0), 0);
    T_EQ_INT(ipcp__stack_holds(&here, SIZE_MAX), 0);
    pthread_t t;
    T_CHECK(pthread_create(&t, NULL, other_thread, &here) == 0);
    T_CHECK(pthread_join(t, NULL) == 0);
}

int main(void)
{
    int on_stack = 0;
    unsigned char *small = malloc(4096);
    T_CHECK(small != NULL);
    small[0] = 1;
    void *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    T_CHECK(page != MAP_FAILED);
    T_EQ_INT(ipcp__heap_holds(&on_stack, sizeof(on_stack)), 0);
    T_EQ_INT(ipcp__heap_holds(page, 4096), 0);
    T_EQ_INT(ipcp__heap_holds(NULL, 0), 0);
    T_EQ_INT(ipcp__heap_holds(small, 4096), T_HEAP_MALLOC);
    /* Up to the break and not past it. */
    uintptr_t brk = (uintptr_t)sbrk(0);
    if (T_HEAP_MALLOC) {
        T_CHECK(brk > (uintptr_t)small);
        size_t to_brk = brk - (uintptr_t)small;
        T_EQ_INT(ipcp__heap_holds(small, to_brk), 1);
        T_EQ_INT(ipcp__heap_holds(small, to_brk + 1), 0);
        T_EQ_INT(ipcp__heap_holds((void *)brk, 1), 0);
        T_EQ_INT(ipcp__heap_holds(small, SIZE_MAX), 0);
    }
    stacks(small, page);
    munmap(page, 4096);
    free(small);
    return 0;
}
