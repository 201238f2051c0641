/* Work a thread's exit must do for the library: emptying the caches of
 * freed objects each thread keeps for itself (requests, handle slots), so
 * that a thread that ends gives back what it kept. */
#ifndef IPCP_COMMON_TLS_H
#define IPCP_COMMON_TLS_H

/* Calls fn(arg) when the calling thread exits (at most 4 per thread).
 * Returns 0 when it will, else -1 (the caller then keeps nothing). */
int ipcp__at_thread_exit(void (*fn)(void *), void *arg);

#endif
