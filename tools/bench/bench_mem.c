/* ipcpipe-bench: buffers of one rank, on host or device memory, and the
 * data in them (fill, poison, check).  Device buffers are filled and
 * checked through a host staging buffer (bench_cuda.c copies). */
#include "bench.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "pattern.h"

void bench_fmt(char *buf, size_t len, const char *fmt, ...)
{
    va_list ap;
    if (!buf || !len)
        return;
    va_start(ap, fmt);
    vsnprintf(buf, len, fmt, ap);
    va_end(ap);
}

int bench_buf_alloc(ipcp_comm_t *comm, size_t len, int device,
                    bench_alloc_t alloc, bench_buf_t *b, int *nomem, char *err,
                    size_t elen)
{
    if (device >= 0)
        return bench_cuda_buf_alloc(comm, len, device, alloc, b, nomem, err,
                                    elen);
    memset(b, 0, sizeof(*b));
    *nomem = 0;
    if (alloc != BENCH_ALLOC_IPCP && alloc != BENCH_ALLOC_PLAIN) {
        bench_fmt(err, elen,
                  "--alloc vmm, vmm0, pool and spool make GPU "
                  "memory: they need --mem cuda");
        return -1;
    }
    if (alloc == BENCH_ALLOC_PLAIN) {
        /* Private memory no peer can map: the library reaches it with
         * process_vm_writev/readv or its staged path. */
        if (posix_memalign(&b->ptr, 4096, len ? len : 1) != 0) {
            b->ptr = NULL;
            *nomem = 1;
            bench_fmt(err, elen, "posix_memalign(%zu bytes) failed", len);
            return -1;
        }
    } else {
        ipcp_status_t st = ipcp_mem_alloc(comm, len, NULL, &b->ptr);
        if (st != IPCP_OK) {
            *nomem = st == IPCP_ERR_NOMEM;
            bench_fmt(err, elen,
                      "ipcp_mem_alloc(%zu bytes of host memory): %s: %s", len,
                      ipcp_strerror(st), ipcp_last_error());
            return -1;
        }
    }
    b->len = len;
    b->device = -1;
    b->alloc = alloc;
    /* Every page touched now, so no timed transfer pays first-touch
     * faults. */
    memset(b->ptr, 0, len);
    return 0;
}

void bench_buf_free(ipcp_comm_t *comm, bench_buf_t *b)
{
    if (!b->ptr)
        return;
    if (b->device >= 0) {
        bench_cuda_buf_free(comm, b);
    } else if (b->alloc == BENCH_ALLOC_PLAIN) {
        free(b->ptr);
    } else {
        ipcp_status_t st = ipcp_mem_free(comm, b->ptr);
        if (st != IPCP_OK)
            fprintf(stderr, "ipcpipe-bench: ipcp_mem_free: %s: %s\n",
                    ipcp_strerror(st), ipcp_last_error());
    }
    memset(b, 0, sizeof(*b));
}

static int in_range(const bench_buf_t *b, size_t off, size_t len, char *err,
                    size_t elen)
{
    if (off <= b->len && len <= b->len - off)
        return 0;
    bench_fmt(err, elen, "bench bug: [%zu, +%zu) outside a buffer of %zu bytes",
              off, len, b->len);
    return -1;
}

int bench_buf_fill(bench_buf_t *b, size_t off, size_t len, uint64_t seed,
                   unsigned char *staging, char *err, size_t elen)
{
    unsigned char *p = (unsigned char *)b->ptr + off;
    if (in_range(b, off, len, err, elen) < 0)
        return -1;
    if (b->device < 0) {
        ipcp_pattern_fill(p, len, seed, 0);
        return 0;
    }
    ipcp_pattern_fill(staging, len, seed, 0);
    return bench_cuda_h2d(p, staging, len, err, elen);
}

#define POISON 0xa5

int bench_buf_poison(bench_buf_t *b, size_t off, size_t len, char *err,
                     size_t elen)
{
    unsigned char *p = (unsigned char *)b->ptr + off;
    if (in_range(b, off, len, err, elen) < 0)
        return -1;
    if (b->device < 0) {
        memset(p, POISON, len);
        return 0;
    }
    return bench_cuda_memset(p, POISON, len, err, elen);
}

size_t bench_buf_check(bench_buf_t *b, size_t off, size_t len, uint64_t seed,
                       unsigned char *staging, unsigned char *got, char *err,
                       size_t elen)
{
    const unsigned char *p = (const unsigned char *)b->ptr + off;
    if (in_range(b, off, len, err, elen) < 0)
        return (size_t)-1;
    if (b->device >= 0) {
        if (bench_cuda_d2h(staging, p, len, err, elen) < 0)
            return (size_t)-1;
        p = staging;
    }
    size_t bad = ipcp_pattern_check(p, len, seed, 0);
    if (bad < len)
        *got = p[bad];
    return bad;
}
