/* Host memory that peers can map: an anonymous memfd, mapped shared.  The
 * descriptor travels to the peer (SCM_RIGHTS) and is mapped there, so both
 * processes see the same page-cache pages and a copy into the peer's
 * mapping is a plain memcpy. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/host/host.h"
#include "common/shm.h"
#include "common/status.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

/* What mem_import hands back for mem_unimport. */
typedef struct host_import {
    void *map;
    size_t len;
} host_import_t;

uint64_t ipcp__host_export_check(const ipcp__export_t *exp,
                                 const ipcp__host_export_data_t *d)
{
    const uint64_t words[5] = {exp->kind, exp->size, d->magic, d->offset,
                               d->file_size};
    return ipcp__fnv1a(words, sizeof(words), IPCP_FNV_SEED);
}

/* Faults every page in now, with write access, so that neither this
 * process nor the first transfer pays the page-zeroing and fault cost, and
 * so that running out of memory is an error here rather than SIGBUS on
 * first touch.  MADV_POPULATE_WRITE (Linux 5.14) faults through the
 * mapping, which keeps any huge-page advice; older kernels reserve the
 * pages with fallocate instead. */
static int host_populate(void *ptr, size_t len, int fd)
{
    if (madvise(ptr, len, MADV_POPULATE_WRITE) == 0)
        return 0;
    if (errno != EINVAL)
        return -1;
    return fallocate(fd, 0, 0, (off_t)len) == 0 ? 0 : -1;
}

static void host_register(ipcp__backend_t *be, ipcp__host_alloc_t *a)
{
    pthread_mutex_lock(&be->lock);
    a->id = be->next_id++;
    ipcp__list_push_back(&be->allocs, &a->link);
    atomic_fetch_add_explicit(&be->nallocs, 1, memory_order_release);
    pthread_mutex_unlock(&be->lock);
}

ipcp_status_t ipcp__host_mem_alloc(ipcp__backend_t *be, size_t len, int device,
                                   void **ptr, void **handle)
{
    ipcp_status_t st;
    if (len > SIZE_MAX / 2)
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_HOST, IPCP_ERR_INVALID,
                          "host allocation of %zu bytes is too large", len);
    /* A zero-length request still gets a page: a distinct address that can
     * be exported and freed like any other. */
    size_t maplen = ipcp__align_up(len ? len : 1, be->page);
    ipcp__host_alloc_t *a = calloc(1, sizeof(*a));
    if (!a)
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_HOST, IPCP_ERR_NOMEM,
                          "cannot allocate an allocation record");
    a->fd = ipcp__memfd_sealed("ipcpipe", maplen);
    if (a->fd < 0) {
        st = ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_HOST, IPCP_ERR_SYSTEM,
                        "memfd_create/ftruncate of %zu bytes failed: %s%s",
                        maplen, strerror(errno),
                        errno == EFBIG ? " (above the file size limit, "
                                         "RLIMIT_FSIZE: see ulimit -f)"
                                       : "");
        goto free_record;
    }
    a->ptr = mmap(NULL, maplen, PROT_READ | PROT_WRITE, MAP_SHARED, a->fd, 0);
    if (a->ptr == MAP_FAILED) {
        st = ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_HOST, IPCP_ERR_NOMEM,
                        "mmap of a %zu-byte memfd failed: %s", maplen,
                        strerror(errno));
        goto close_fd;
    }
    a->len = maplen;
    /* Huge pages cut TLB misses on large copies; shmem honours the advice
     * only when /sys/kernel/mm/transparent_hugepage/shmem_enabled allows,
     * so a refusal is not an error. */
    (void)madvise(a->ptr, maplen, MADV_HUGEPAGE);
    if (host_populate(a->ptr, maplen, a->fd) != 0) {
        st = ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_HOST, IPCP_ERR_NOMEM,
                        "cannot populate %zu bytes of shared memory: %s",
                        maplen, strerror(errno));
        goto unmap;
    }
    host_register(be, a);
    IPCP_DEBUG(IPCP_SUB_HOST, "allocated %zu bytes (%zu mapped) at %p, fd %d",
               len, maplen, a->ptr, a->fd);
    *ptr = a->ptr;
    *handle = a;
    return IPCP_OK;

unmap:
    munmap(a->ptr, maplen);
close_fd:
    close(a->fd);
free_record:
    free(a);
    return st;
}

ipcp_status_t ipcp__host_mem_free(ipcp__backend_t *be, void *handle)
{
    ipcp__host_alloc_t *a = handle;
    if (!a)
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_HOST, IPCP_ERR_INVALID,
                          "host mem_free of a NULL handle");
    pthread_mutex_lock(&be->lock);
    ipcp__list_del(&a->link);
    atomic_fetch_sub_explicit(&be->nallocs, 1, memory_order_relaxed);
    pthread_mutex_unlock(&be->lock);
    munmap(a->ptr, a->len);
    close(a->fd);
    free(a);
    return IPCP_OK;
}

void ipcp__host_mem_release_all(ipcp__backend_t *be)
{
    ipcp__list_t *e;
    while ((e = ipcp__list_pop_front(&be->allocs)) != NULL) {
        ipcp__host_alloc_t *a = ipcp__list_entry(e, ipcp__host_alloc_t, link);
        atomic_fetch_sub_explicit(&be->nallocs, 1, memory_order_relaxed);
        IPCP_DEBUG(IPCP_SUB_HOST, "releasing %zu bytes at %p left allocated",
                   a->len, a->ptr);
        munmap(a->ptr, a->len);
        close(a->fd);
        free(a);
    }
}

/* The allocation holding p, or NULL.  Called with be->lock held. */
static ipcp__host_alloc_t *host_find(ipcp__backend_t *be, const void *p)
{
    ipcp__list_t *pos, *tmp;
    ipcp__list_for_each_safe(pos, tmp, &be->allocs)
    {
        ipcp__host_alloc_t *a = ipcp__list_entry(pos, ipcp__host_alloc_t, link);
        if ((uintptr_t)p >= (uintptr_t)a->ptr &&
            (uintptr_t)p - (uintptr_t)a->ptr < a->len)
            return a;
    }
    return NULL;
}

static void host_export_fill(const ipcp__host_alloc_t *a, size_t off,
                             size_t len, ipcp__export_t *exp)
{
    ipcp__host_export_data_t d;
    memset(exp, 0, sizeof(*exp));
    exp->kind = IPCP_EXPORT_HOST_MEMFD;
    exp->len = sizeof(d);
    exp->size = len;
    d.magic = IPCP_HOST_EXPORT_MAGIC;
    d.offset = off;
    d.file_size = a->len;
    d.check = ipcp__host_export_check(exp, &d);
    memcpy(exp->data, &d, sizeof(d));
}

/* A NULL handle is looked up in the registry, so that a pointer into the
 * middle of an ipcp_mem_alloc buffer can be shared too. */
ipcp_status_t ipcp__host_mem_export(ipcp__backend_t *be, void *handle,
                                    const void *ptr, size_t len,
                                    ipcp__export_t *exp, int *fd)
{
    ipcp_status_t st = IPCP_OK;
    pthread_mutex_lock(&be->lock);
    ipcp__host_alloc_t *a = handle ? handle : host_find(be, ptr);
    if (!a) {
        st = ipcp__fail(IPCP_LOG_DEBUG, IPCP_SUB_HOST, IPCP_ERR_UNSUPPORTED,
                        "host memory at %p was not allocated by "
                        "ipcp_mem_alloc, so it cannot be shared by fd",
                        ptr);
        goto unlock;
    }
    size_t off = (size_t)((uintptr_t)ptr - (uintptr_t)a->ptr);
    if ((uintptr_t)ptr < (uintptr_t)a->ptr || off > a->len ||
        len > a->len - off) {
        st = ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_HOST, IPCP_ERR_OUT_OF_RANGE,
                        "export of [%p, +%zu) leaves the allocation "
                        "[%p, +%zu)",
                        ptr, len, a->ptr, a->len);
        goto unlock;
    }
    int nfd = fcntl(a->fd, F_DUPFD_CLOEXEC, 0);
    if (nfd < 0) {
        st =
            ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_HOST, IPCP_ERR_SYSTEM,
                       "cannot duplicate memfd %d: %s", a->fd, strerror(errno));
        goto unlock;
    }
    host_export_fill(a, off, len, exp);
    *fd = nfd;
unlock:
    pthread_mutex_unlock(&be->lock);
    return st;
}

/* Checks the export's own fields; nothing in it is trusted before this. */
static ipcp_status_t host_export_validate(const ipcp__export_t *exp,
                                          ipcp__host_export_data_t *d)
{
    if (exp->kind != IPCP_EXPORT_HOST_MEMFD)
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_HOST,
                          IPCP_ERR_BAD_DESCRIPTOR,
                          "export kind %u is not a host memfd export (%d)",
                          exp->kind, IPCP_EXPORT_HOST_MEMFD);
    if (exp->len != sizeof(*d))
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_HOST,
                          IPCP_ERR_BAD_DESCRIPTOR,
                          "host export carries %u bytes of data, expected %zu",
                          exp->len, sizeof(*d));
    memcpy(d, exp->data, sizeof(*d));
    if (d->magic != IPCP_HOST_EXPORT_MAGIC ||
        d->check != ipcp__host_export_check(exp, d))
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_HOST,
                          IPCP_ERR_BAD_DESCRIPTOR,
                          "host export fails its checksum (corrupt)");
    if (d->offset > d->file_size || exp->size > d->file_size - d->offset ||
        d->file_size > (uint64_t)SIZE_MAX / 2)
        return ipcp__fail(
            IPCP_LOG_ERROR, IPCP_SUB_HOST, IPCP_ERR_BAD_DESCRIPTOR,
            "host export [%llu, +%llu) leaves its %llu-byte file",
            (unsigned long long)d->offset, (unsigned long long)exp->size,
            (unsigned long long)d->file_size);
    return IPCP_OK;
}

ipcp_status_t ipcp__host_mem_import(ipcp__backend_t *be,
                                    const ipcp__export_t *exp, const int *fds,
                                    int nfds, int device, void **ptr,
                                    void **handle)
{
    ipcp__host_export_data_t d;
    ipcp_status_t st = host_export_validate(exp, &d);
    if (st != IPCP_OK)
        return st;
    if (nfds > 1)
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_HOST,
                          IPCP_ERR_BAD_DESCRIPTOR,
                          "host export rejected: %d descriptors came with "
                          "it, not one",
                          nfds);
    int fd = nfds == 1 ? fds[0] : -1;
    st = ipcp__memfd_check(fd, d.offset + exp->size, IPCP_LOG_ERROR,
                           IPCP_SUB_HOST, "a host export");
    if (st != IPCP_OK)
        return st;
    /* mmap offsets are whole pages; the export may start mid-page. */
    size_t start = (size_t)d.offset & ~(be->page - 1);
    size_t delta = (size_t)d.offset - start;
    size_t maplen =
        ipcp__align_up(delta + ipcp__max((size_t)exp->size, 1), be->page);
    host_import_t *im = calloc(1, sizeof(*im));
    if (!im)
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_HOST, IPCP_ERR_NOMEM,
                          "cannot allocate an import record");
    /* MAP_POPULATE builds the page tables now: the owner's pages already
     * exist, and one pass here is much cheaper than a fault per 4 KiB page
     * in the first copy. */
    im->map = mmap(NULL, maplen, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_POPULATE, fd, (off_t)start);
    if (im->map == MAP_FAILED) {
        st = ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_HOST, IPCP_ERR_SYSTEM,
                        "mmap of %zu bytes of fd %d at offset %zu failed: %s",
                        maplen, fd, start, strerror(errno));
        free(im);
        return st;
    }
    im->len = maplen;
    IPCP_DEBUG(IPCP_SUB_HOST, "imported %llu bytes at %p (fd %d, offset %llu)",
               (unsigned long long)exp->size, (char *)im->map + delta, fd,
               (unsigned long long)d.offset);
    *ptr = (char *)im->map + delta;
    *handle = im;
    return IPCP_OK;
}

ipcp_status_t ipcp__host_mem_unimport(ipcp__backend_t *be, void *handle)
{
    host_import_t *im = handle;
    if (!im)
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_HOST, IPCP_ERR_INVALID,
                          "host mem_unimport of a NULL handle");
    munmap(im->map, im->len);
    free(im);
    return IPCP_OK;
}
