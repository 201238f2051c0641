/* Work a thread's exit must do for the library: emptying the caches of
 * freed objects each thread keeps for itself (requests, handle slots), so
 * that a thread that ends gives back what it kept. */
#ifndef IPCP_COMMON_TLS_H
#define IPCP_COMMON_TLS_H

/* Thread-local variables keep the default model of a shared library, so
 * that the library can be opened with dlopen in any process: the
 * initial-exec model (a fixed offset from the thread pointer) needs room
 * in the static TLS block, which a Python process that imported PyTorch
 * has used up ("cannot allocate memory in static TLS block", even for 36
 * bytes).  On x86-64 the library is built with TLS descriptors
 * (-mtls-dialect=gnu2, src/CMakeLists.txt), whose accesses take no call
 * once the thread's block exists. */

/* Calls fn(arg) when the calling thread exits (at most 4 per thread),
 * asked once per thread: *armed (the caller's thread-local flag) says it
 * was.  Returns 0 when it will, else -1 (the caller then keeps nothing). */
int ipcp__at_thread_exit(int *armed, void (*fn)(void *), void *arg);

#endif
