/* Test helpers: assertions that print both values, status checks that print
 * the library's message, fresh random seeds, and a multi-process main that
 * re-runs the test binary as its ranks. */
#ifndef IPCP_TESTUTIL_H
#define IPCP_TESTUTIL_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ipcpipe.h"
#include "launch.h"
#include "pattern.h"

#define T_SKIP 77

/* Whether malloc serves small blocks of the main thread from the brk heap
 * (glibc's main arena), as it does unless a sanitizer's allocator serves
 * malloc. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define T_HEAP_MALLOC 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define T_HEAP_MALLOC 0
#endif
#endif
#ifndef T_HEAP_MALLOC
#define T_HEAP_MALLOC 1
#endif

extern int t_rank; /* -1 outside a multi-process test */

#define T_FAIL(...)                                                            \
    do {                                                                       \
        fprintf(stderr, "FAIL [rank %d] %s:%d: ", t_rank, __FILE__, __LINE__); \
        fprintf(stderr, __VA_ARGS__);                                          \
        fprintf(stderr, "\n");                                                 \
        fflush(stderr);                                                        \
        exit(1);                                                               \
    } while (0)

#define T_CHECK(cond)                                                          \
    do {                                                                       \
        if (!(cond))                                                           \
            T_FAIL("check failed: %s", #cond);                                 \
    } while (0)

#define T_EQ_INT(a, b)                                                         \
    do {                                                                       \
        long long t_a_ = (long long)(a), t_b_ = (long long)(b);                \
        if (t_a_ != t_b_)                                                      \
            T_FAIL("%s == %s: %lld != %lld", #a, #b, t_a_, t_b_);              \
    } while (0)

#define T_EQ_U64(a, b)                                                         \
    do {                                                                       \
        unsigned long long t_a_ = (unsigned long long)(a),                     \
                           t_b_ = (unsigned long long)(b);                     \
        if (t_a_ != t_b_)                                                      \
            T_FAIL("%s == %s: %llu != %llu", #a, #b, t_a_, t_b_);              \
    } while (0)

#define T_EQ_STR(a, b)                                                         \
    do {                                                                       \
        const char *t_a_ = (a), *t_b_ = (b);                                   \
        if (strcmp(t_a_, t_b_) != 0)                                           \
            T_FAIL("%s == %s: \"%s\" != \"%s\"", #a, #b, t_a_, t_b_);          \
    } while (0)

/* expr must return `expected`; on mismatch prints both names and the
 * library's last message. */
#define T_STATUS(expr, expected)                                               \
    do {                                                                       \
        ipcp_status_t t_s_ = (expr);                                           \
        if (t_s_ != (expected))                                                \
            T_FAIL("%s returned %s, expected %s (last error: %s)", #expr,      \
                   ipcp_strerror(t_s_), ipcp_strerror(expected),               \
                   ipcp_last_error());                                         \
    } while (0)

#define T_OK(expr) T_STATUS(expr, IPCP_OK)

/* The last error message must contain substr. */
#define T_MSG_HAS(substr)                                                      \
    do {                                                                       \
        const char *t_m_ = ipcp_last_error();                                  \
        if (!strstr(t_m_, (substr)))                                           \
            T_FAIL("last error \"%s\" lacks \"%s\"", t_m_, (substr));          \
    } while (0)

/* A seed that differs on every run (time, pid, a counter). */
uint64_t t_fresh_seed(void);

/* Two-rank tests: rank 0 draws a fresh seed and sends it to rank 1 (a
 * host message with tag); both return it. */
uint64_t t_shared_seed(ipcp_comm_t *comm, int tag);

/* Fills and checks buffers with the pattern; t_verify fails the test with
 * the first differing offset and both byte values. */
void t_fill(void *buf, size_t len, uint64_t seed);
void t_verify(const void *buf, size_t len, uint64_t seed, const char *what);

/* Allocates len bytes (page-aligned, len 0 allowed) or fails the test. */
void *t_malloc(size_t len);

/* Whether p lies in the calling thread's own stack as glibc reports it
 * (not in a sanitizer's fake frame elsewhere); fails the test where glibc
 * cannot say. */
int t_on_own_stack(const void *p);

/* Parses "123", "4K", "1M+3", "4G+1" (sums of sizes) or fails the test. */
size_t t_parse_size(const char *s);

/* Case selection of a test binary run as `test CASE` or `test --list`:
 * cases is an array of n structs of stride bytes whose first member is the
 * case's name (const char *).  Returns the index of argv[1]'s case, or -1
 * with *rc set (0 after --list, 2 with a message for a bad argument). */
int t_pick_case(int argc, char **argv, const void *cases, size_t n,
                size_t stride, int *rc);

/* Starts two ranks of this program with IPCPIPE_TIMEOUT=10 (child_env, if
 * not NULL, adjusts each rank's environment, given arg).  victim < 0:
 * returns their folded exit code.  Else that rank must die by SIGKILL and
 * the other exit 0. */
int t_launch2(char **argv, int victim, void (*child_env)(int rank, void *arg),
              void *arg);

/* A child_env for t_launch2: rank 1 gets IPCPIPE_SMALL=arg (a string),
 * for the small-message lane's mismatch cases. */
void t_small_on_rank1(int rank, void *arg);

/* The small-message lane tests' message i (IPCPIPE_SMALL = small): its
 * size, 1 byte to small with both ends included, and its offset in a
 * buffer of slices of small + 16 bytes (odd offsets, so that unaligned
 * copies run too). */
static inline size_t t_lane_size(size_t small, int i)
{
    if (i % 5 == 0)
        return small;
    if (i % 5 == 1)
        return 1;
    return 1 + (size_t)i * 7919 % small;
}

static inline size_t t_lane_off(size_t small, int i)
{
    return (size_t)i * (small + 16) + (size_t)(i % 3) * 5;
}

/* Waits for the lane requests reqs[0..n) of messages 0..n-1; each must
 * report the lane's path and, for receives, its message's size. */
void t_lane_wait_all(ipcp_request_t **reqs, int n, size_t small, int recv);

/* Log capture in a rank, for tests of what the library logs: t_log_to_file
 * sends this process's log (at info level) to a fresh file named after its
 * pid, before ipcp_init reads the settings; t_log_lines counts the file's
 * lines that contain needle, printing each, and removes the file when
 * told to. */
void t_log_to_file(void);
int t_log_lines(const char *needle, int remove);

/* Multi-process main: outside a launcher, re-runs this binary as nranks
 * ranks (timeout_s, children cleaned up) and returns their folded exit code;
 * inside, calls rank_main(argc, argv) and returns its result. */
int t_mp_main(int argc, char **argv, int nranks, double timeout_s,
              int (*rank_main)(int argc, char **argv));

#endif
