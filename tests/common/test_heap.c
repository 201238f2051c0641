/* The brk heap (src/common/heap.c): a small malloc'd buffer lies in it
 * (unless a sanitizer's allocator serves malloc), and nothing else does:
 * a stack variable, a mapped page, a range that runs past the break, a
 * null pointer.
 *
 *   test_heap */
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/heap.h"
#include "testutil.h"

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
    munmap(page, 4096);
    free(small);
    return 0;
}
