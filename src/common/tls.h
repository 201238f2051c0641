/* Work a thread's exit must do for the library: emptying the caches of
 * freed objects each thread keeps for itself (requests, handle slots), so
 * that a thread that ends gives back what it kept. */
#ifndef IPCP_COMMON_TLS_H
#define IPCP_COMMON_TLS_H

/* For a few bytes read on every message: the initial-exec model reaches
 * them at a fixed offset from the thread pointer, where the default model
 * of a shared library calls __tls_get_addr each time (four calls a small
 * message took, 3.5% of a sender's time on a 2-CPU VM).  The loader sets
 * such variables aside from a small reserve when the library is opened
 * with dlopen, so only small ones get it. */
#define IPCP_TLS_FAST __attribute__((tls_model("initial-exec")))

/* Calls fn(arg) when the calling thread exits (at most 4 per thread),
 * asked once per thread: *armed (the caller's thread-local flag) says it
 * was.  Returns 0 when it will, else -1 (the caller then keeps nothing). */
int ipcp__at_thread_exit(int *armed, void (*fn)(void *), void *arg);

#endif
