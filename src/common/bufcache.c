/* Kept message buffers (bufcache.h). */
#include "common/bufcache.h"

#include <stdalign.h>
#include <stdint.h>
#include <stdlib.h>

#include "common/mutex.h"
#include "common/util.h"

/* Buffers from IPCP_BUF_MIN bytes up to IPCP_BUF_CAP come as blocks of
 * IPCP_BUF_CAP: the largest eager message (IPCPIPE_EAGER's 256 KiB) with
 * its queue header.  Below IPCP_BUF_MIN malloc's bins serve without
 * faults. */
#define IPCP_BUF_MIN  ((size_t)16 << 10)
#define IPCP_BUF_CAP  (((size_t)256 << 10) + 4096)
#define IPCP_BUF_KEEP 64 /* a window of 64 (16.3 MiB at most) */

#ifndef IPCP_BUF_CACHE
#define IPCP_BUF_CACHE (!IPCP_ASAN)
#endif

/* Before each buffer: whether it is a block of IPCP_BUF_CAP. */
typedef struct ipcp__buf_hdr {
    alignas(max_align_t) size_t block;
} ipcp__buf_hdr_t;

static ipcp__mutex_t ipcp__buf_lock;
static ipcp__buf_hdr_t *ipcp__buf_kept[IPCP_BUF_KEEP];
static int ipcp__buf_n;

void *ipcp__buf_alloc(size_t len)
{
    int block = IPCP_BUF_CACHE && len >= IPCP_BUF_MIN && len <= IPCP_BUF_CAP;
    ipcp__buf_hdr_t *h = NULL;
    if (block) {
        ipcp__mutex_lock(&ipcp__buf_lock);
        if (ipcp__buf_n > 0)
            h = ipcp__buf_kept[--ipcp__buf_n];
        ipcp__mutex_unlock(&ipcp__buf_lock);
    }
    if (!h && !(h = malloc(sizeof(*h) + (block ? IPCP_BUF_CAP : len))))
        return NULL;
    h->block = (size_t)block;
    return h + 1;
}

void ipcp__buf_free(void *p)
{
    if (!p)
        return;
    ipcp__buf_hdr_t *h = (ipcp__buf_hdr_t *)p - 1;
    if (h->block) {
        ipcp__mutex_lock(&ipcp__buf_lock);
        int kept = ipcp__buf_n < IPCP_BUF_KEEP;
        if (kept)
            ipcp__buf_kept[ipcp__buf_n++] = h;
        ipcp__mutex_unlock(&ipcp__buf_lock);
        if (kept)
            return;
    }
    free(h);
}

void ipcp__buf_trim(void)
{
    ipcp__mutex_lock(&ipcp__buf_lock);
    while (ipcp__buf_n > 0)
        free(ipcp__buf_kept[--ipcp__buf_n]);
    ipcp__mutex_unlock(&ipcp__buf_lock);
}
