/* Small helpers shared by every layer. */
#ifndef IPCP_COMMON_UTIL_H
#define IPCP_COMMON_UTIL_H

#include <stddef.h>
#include <stdint.h>

/* 1 in a build under AddressSanitizer (GCC's and clang's ways of saying
 * it): caches of freed memory are then left out, so it sees each use
 * after a free. */
#if defined(__SANITIZE_ADDRESS__)
#define IPCP_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define IPCP_ASAN 1
#endif
#endif
#ifndef IPCP_ASAN
#define IPCP_ASAN 0
#endif
/* 1 under AddressSanitizer or ThreadSanitizer: they see no store made
 * through intrinsics, so copies there go through memcpy. */
#if defined(__SANITIZE_THREAD__)
#define IPCP_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define IPCP_SANITIZED 1
#endif
#endif
#ifndef IPCP_SANITIZED
#define IPCP_SANITIZED IPCP_ASAN
#endif

#define IPCP_HIDDEN __attribute__((visibility("hidden")))

#define ipcp__min(a, b)      ((a) < (b) ? (a) : (b))
#define ipcp__max(a, b)      ((a) > (b) ? (a) : (b))
#define ipcp__align_up(x, a) ((((x) + (a)-1) / (a)) * (a))
#define ipcp__div_up(x, a)   (((x) + (a)-1) / (a))
#define ipcp__array_size(a)  (sizeof(a) / sizeof((a)[0]))
#define ipcp__container_of(ptr, type, member)                                  \
    ((type *)((char *)(ptr)-offsetof(type, member)))

#define ipcp__likely(x)   __builtin_expect(!!(x), 1)
#define ipcp__unlikely(x) __builtin_expect(!!(x), 0)

/* Cache line size of x86-64 and Arm server parts; flags shared between
 * processes sit one per line so that writers do not contend. */
#define IPCP_CACHE_LINE 64

/* memcpy for the bytes of small messages: up to 16 in two overlapping
 * moves of fixed size, which the compiler writes in place, where a call
 * to the library's memcpy cost ~20 instructions a message (callgrind). */
static inline void ipcp__copy_small(void *dst, const void *src, size_t n)
{
    unsigned char *d = (unsigned char *)dst;
    const unsigned char *s = (const unsigned char *)src;
    if (n >= 8 && n <= 16) {
        uint64_t a, b;
        __builtin_memcpy(&a, s, 8);
        __builtin_memcpy(&b, s + n - 8, 8);
        __builtin_memcpy(d, &a, 8);
        __builtin_memcpy(d + n - 8, &b, 8);
    } else if (n >= 4 && n < 8) {
        uint32_t a, b;
        __builtin_memcpy(&a, s, 4);
        __builtin_memcpy(&b, s + n - 4, 4);
        __builtin_memcpy(d, &a, 4);
        __builtin_memcpy(d + n - 4, &b, 4);
    } else if (n < 4) {
        for (size_t i = 0; i < n; i++)
            d[i] = s[i];
    } else {
        __builtin_memcpy(d, s, n);
    }
}

/* 64-bit FNV-1a, used for descriptor checksums and job hashes. */
static inline uint64_t ipcp__fnv1a(const void *data, size_t len, uint64_t h)
{
    const unsigned char *p = (const unsigned char *)data;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}
#define IPCP_FNV_SEED 0xcbf29ce484222325ULL

#endif
