/* Message buffers of 16-260 KiB kept for reuse: an unexpected message's
 * copy, a message queued for the peer's ring.  From malloc each such
 * buffer came back as fresh pages (glibc maps blocks of 128 KiB and up
 * anew, and gives a heap's top of over 128 KiB back at each free), so
 * every byte of a message paid a page fault: host windows of 64-128 KiB
 * moved 1.3-2.7 GB/s on the H100 machine, 4.1-12 GB/s with glibc's
 * thresholds raised.  Process-wide, as many as a window of 64 held at
 * once at most; none under AddressSanitizer, which then sees each use
 * after its free. */
#ifndef IPCP_COMMON_BUFCACHE_H
#define IPCP_COMMON_BUFCACHE_H

#include <stddef.h>

/* As malloc (NULL when out of memory); free with ipcp__buf_free only. */
void *ipcp__buf_alloc(size_t len);
/* As free; NULL is fine. */
void ipcp__buf_free(void *p);
/* Frees the kept buffers (at a communicator's end). */
void ipcp__buf_trim(void);

#endif
