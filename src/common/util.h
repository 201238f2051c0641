/* Small helpers shared by every layer. */
#ifndef IPCP_COMMON_UTIL_H
#define IPCP_COMMON_UTIL_H

#include <stddef.h>
#include <stdint.h>

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
