/* The process's brk heap: where glibc's main arena puts small allocations
 * (below its mmap threshold, 128 KiB at first) of the threads it serves.
 * Nothing but plain host memory lives there: the CUDA driver reserves
 * device and managed memory elsewhere, and a registered range stays host
 * memory to every backend.  So a buffer inside it needs no driver query to
 * be classified (cuPointerGetAttributes costs ~0.25 us on host memory,
 * which each message of a few microseconds pays). */
#ifndef IPCP_COMMON_HEAP_H
#define IPCP_COMMON_HEAP_H

#include <stddef.h>

/* 1 when [ptr, ptr+len) lies in the heap between its start (the kernel's
 * start_brk, read once) and the current break; 0 where that cannot be
 * said (no /proc, an allocator that does not use the heap). */
int ipcp__heap_holds(const void *ptr, size_t len);

/* 1 when [ptr, ptr+len) lies in the calling thread's own stack, between
 * this call's frame and the stack's top (the live part, where no other
 * mapping can be: a caller's buffers on its stack are there), read once
 * per thread; 0 elsewhere, and where the thread runs on another stack
 * than its own (a coroutine's, a sanitizer's fake frames).  Nothing but
 * host memory is a thread's stack either. */
int ipcp__stack_holds(const void *ptr, size_t len);

#endif
