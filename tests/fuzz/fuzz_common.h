/* Helpers shared by the libFuzzer harnesses: a reader that takes bytes off
 * the front of an input (zeros once it is used up, so that every input is
 * a valid script), and the quiet logging every harness starts with. */
#ifndef IPCP_FUZZ_COMMON_H
#define IPCP_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct fuzz_in {
    const uint8_t *p;
    size_t n;
} fuzz_in_t;

static inline uint8_t fuzz_u8(fuzz_in_t *in)
{
    if (!in->n)
        return 0;
    in->n--;
    return *in->p++;
}

static inline uint16_t fuzz_u16(fuzz_in_t *in)
{
    uint16_t lo = fuzz_u8(in);
    return (uint16_t)(lo | (uint16_t)fuzz_u8(in) << 8);
}

/* Up to want bytes (fewer at the end of the input); *got says how many. */
static inline const uint8_t *fuzz_bytes(fuzz_in_t *in, size_t want, size_t *got)
{
    const uint8_t *p = in->p;
    *got = want < in->n ? want : in->n;
    in->p += *got;
    in->n -= *got;
    return p;
}

/* Log lines would cost more than the code under test: off unless the
 * person running the harness asked for them. */
static inline void fuzz_quiet(void)
{
    setenv("IPCPIPE_LOG_LEVEL", "none", 0);
}

#endif
