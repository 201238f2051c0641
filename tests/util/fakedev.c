/* The fake device's memory (fakedev.h). */
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "fakedev.h"
#include "testutil.h"

static pthread_mutex_t fakedev_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    char *p;
    size_t n;
    void *handle;
} fakedev_allocs[FAKEDEV_MAX];

void fakedev_add(void *p, size_t n, void *handle)
{
    pthread_mutex_lock(&fakedev_lock);
    int i = 0;
    while (i < FAKEDEV_MAX && fakedev_allocs[i].p)
        i++;
    if (i == FAKEDEV_MAX)
        T_FAIL("more than %d fake device allocations", FAKEDEV_MAX);
    fakedev_allocs[i].p = p;
    fakedev_allocs[i].n = n;
    fakedev_allocs[i].handle = handle;
    pthread_mutex_unlock(&fakedev_lock);
}

int fakedev_owns(ipcp__backend_t *be, const void *ptr, ipcp__mem_attr_t *attr)
{
    (void)be;
    int found = 0;
    const char *c = ptr;
    pthread_mutex_lock(&fakedev_lock);
    for (int i = 0; i < FAKEDEV_MAX && !found; i++) {
        if (fakedev_allocs[i].p && c >= fakedev_allocs[i].p &&
            c < fakedev_allocs[i].p + fakedev_allocs[i].n) {
            memset(attr, 0, sizeof(*attr));
            attr->type = IPCP_MEM_CUDA;
            attr->device = 0;
            attr->base = (uintptr_t)fakedev_allocs[i].p;
            attr->size = fakedev_allocs[i].n;
            attr->buffer_id = (uint64_t)i + 1;
            found = 1;
        }
    }
    pthread_mutex_unlock(&fakedev_lock);
    return found;
}

ipcp_status_t fakedev_mem_alloc(ipcp__backend_t *be, size_t len, int device,
                                void **ptr, void **handle)
{
    (void)device;
    ipcp_status_t st =
        ipcp__host_backend_ops.mem_alloc(be, len, -1, ptr, handle);
    if (st == IPCP_OK)
        fakedev_add(*ptr, len, *handle);
    return st;
}

ipcp_status_t fakedev_mem_free(ipcp__backend_t *be, void *handle)
{
    pthread_mutex_lock(&fakedev_lock);
    for (int i = 0; i < FAKEDEV_MAX; i++)
        if (fakedev_allocs[i].handle == handle)
            fakedev_allocs[i].p = NULL;
    pthread_mutex_unlock(&fakedev_lock);
    return ipcp__host_backend_ops.mem_free(be, handle);
}

void fakedev_ops(ipcp__backend_ops_t *ops)
{
    *ops = ipcp__host_backend_ops;
    ops->name = "fake-gpu";
    ops->type = IPCP_MEM_CUDA;
    ops->owns = fakedev_owns;
    ops->mem_alloc = fakedev_mem_alloc;
    ops->mem_free = fakedev_mem_free;
}
