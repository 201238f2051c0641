/* Fresh, position-addressable test data: the 8-byte word at offset i of a
 * buffer filled with seed s is splitmix64(s + i/8), so any range can be
 * checked without a reference copy. */
#ifndef IPCP_TOOLS_PATTERN_H
#define IPCP_TOOLS_PATTERN_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline uint64_t ipcp_pattern_word(uint64_t seed, uint64_t index)
{
    uint64_t z = seed + (index + 1) * 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Fills buf[0..len) as if it sat at byte offset `offset` of the stream. */
static inline void ipcp_pattern_fill(void *buf, size_t len, uint64_t seed,
                                     uint64_t offset)
{
    unsigned char *p = (unsigned char *)buf;
    size_t i = 0;
    while (i < len && ((offset + i) & 7)) {
        uint64_t w = ipcp_pattern_word(seed, (offset + i) >> 3);
        p[i] = (unsigned char)(w >> (8 * ((offset + i) & 7)));
        i++;
    }
    for (; i + 8 <= len; i += 8) {
        uint64_t w = ipcp_pattern_word(seed, (offset + i) >> 3);
        memcpy(p + i, &w, 8);
    }
    for (; i < len; i++) {
        uint64_t w = ipcp_pattern_word(seed, (offset + i) >> 3);
        p[i] = (unsigned char)(w >> (8 * ((offset + i) & 7)));
    }
}

/* Returns len if buf matches the stream at offset, else the index of the
 * first byte that differs. */
static inline size_t ipcp_pattern_check(const void *buf, size_t len,
                                        uint64_t seed, uint64_t offset)
{
    const unsigned char *p = (const unsigned char *)buf;
    size_t i = 0;
    while (i < len) {
        if (((offset + i) & 7) == 0 && i + 8 <= len) {
            uint64_t w = ipcp_pattern_word(seed, (offset + i) >> 3), v;
            memcpy(&v, p + i, 8);
            if (v == w) {
                i += 8;
                continue;
            }
        }
        uint64_t w = ipcp_pattern_word(seed, (offset + i) >> 3);
        if (p[i] != (unsigned char)(w >> (8 * ((offset + i) & 7))))
            return i;
        i++;
    }
    return len;
}

/* The seed of slot k of a window whose sends each read their own source
 * slot (slot 0's is seed itself). */
static inline uint64_t ipcp_pattern_slot_seed(uint64_t seed, uint64_t k)
{
    return seed + k * 0x632be59bd9b4e019ULL;
}

/* Writes the first word (at most len bytes) of each of slots buffers of len
 * bytes at buf, buf + len, ..., as ipcp_pattern_fill_slots would: data
 * that changes with seed at the cost of a store a buffer. */
static inline void ipcp_pattern_stamp_slots(void *buf, size_t len, int slots,
                                            uint64_t seed)
{
    for (int k = 0; k < slots; k++)
        ipcp_pattern_fill((unsigned char *)buf + (size_t)k * len,
                          len < 8 ? len : 8,
                          ipcp_pattern_slot_seed(seed, (uint64_t)k), 0);
}

/* Fills slots buffers of len bytes at buf, buf + len, ..., slot k with
 * the stream of ipcp_pattern_slot_seed(seed, k). */
static inline void ipcp_pattern_fill_slots(void *buf, size_t len, int slots,
                                           uint64_t seed)
{
    for (int k = 0; k < slots; k++)
        ipcp_pattern_fill((unsigned char *)buf + (size_t)k * len, len,
                          ipcp_pattern_slot_seed(seed, (uint64_t)k), 0);
}

/* Expected byte at offset (for error messages). */
static inline unsigned char ipcp_pattern_byte(uint64_t seed, uint64_t offset)
{
    return (unsigned char)(ipcp_pattern_word(seed, offset >> 3) >>
                           (8 * (offset & 7)));
}

#endif
