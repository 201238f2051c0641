/* Shared host memory (channel rings and flags) made usable by streams:
 * cuMemHostRegister pins it, so copies to and from it are DMA at full
 * PCIe speed, and maps it for the device, so stream memory operations can
 * wait on and write its flags.
 *
 * A registration is process-wide (PORTABLE: every context sees it) and a
 * range can be registered only once, while the engine registers a channel
 * once per device whose queues use it; so registrations are kept in one
 * process-wide list, refcounted by range. */
#include <stdatomic.h>
#include <stdlib.h>

#include "backend/cuda/cuda_backend.h"
#include "common/status.h"
#include "common/util.h"

typedef struct cuda_reg {
    ipcp__list_t link;
    uint64_t magic;
    char *ptr;
    size_t len;
    CUdeviceptr dptr; /* device address of ptr */
    int device;       /* whose context registered it */
    int refs;
} cuda_reg_t;

#define CUDA_REG_MAGIC 0x6765726170637069ULL

static pthread_mutex_t cuda_reg_lock = PTHREAD_MUTEX_INITIALIZER;
static ipcp__list_t cuda_regs = {&cuda_regs, &cuda_regs};
/* Registrations whose device address differs from the host address; while
 * there are none, flag addresses need no lookup. */
static atomic_int cuda_reg_odd;

/* Called with cuda_reg_lock held. */
static cuda_reg_t *cuda_reg_find(const void *ptr, size_t len)
{
    ipcp__list_t *pos, *tmp;
    ipcp__list_for_each_safe(pos, tmp, &cuda_regs)
    {
        cuda_reg_t *r = ipcp__list_entry(pos, cuda_reg_t, link);
        if (r->ptr == ptr && r->len == len)
            return r;
    }
    return NULL;
}

/* Registers in the current context.  The stream memory operations' doc
 * asks for the address from cuMemHostGetDevicePointer; on x86-64 with
 * CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM it is the
 * host address, which is what the engine hands us. */
static ipcp_status_t cuda_reg_new(void *ptr, size_t len, int device,
                                  cuda_reg_t *r)
{
    ipcp_status_t st = ipcp__cu_check(
        IPCP_CU(cuMemHostRegister)(ptr, len,
                                   CU_MEMHOSTREGISTER_PORTABLE |
                                       CU_MEMHOSTREGISTER_DEVICEMAP),
        IPCP_LOG_ERROR,
        "cuMemHostRegister(%p, %zu bytes, portable, "
        "devicemap)",
        ptr, len);
    if (st != IPCP_OK)
        return st;
    st = ipcp__cu_check(IPCP_CU(cuMemHostGetDevicePointer)(&r->dptr, ptr, 0),
                        IPCP_LOG_ERROR, "cuMemHostGetDevicePointer(%p)", ptr);
    if (st != IPCP_OK) {
        IPCP_CU(cuMemHostUnregister)(ptr);
        return st;
    }
    r->magic = CUDA_REG_MAGIC;
    r->ptr = ptr;
    r->len = len;
    r->device = device;
    r->refs = 1;
    if (r->dptr != (CUdeviceptr)(uintptr_t)ptr)
        atomic_fetch_add(&cuda_reg_odd, 1);
    IPCP_DEBUG(IPCP_SUB_CUDA,
               "registered %zu bytes of host memory at %p "
               "(device address %#llx)",
               len, ptr, (unsigned long long)r->dptr);
    return IPCP_OK;
}

ipcp_status_t ipcp__cuda_shm_register(ipcp__backend_t *be, void *ptr,
                                      size_t len, int device, void **handle)
{
    ipcp__cuda_scope_t sc;
    ipcp_status_t st = IPCP_OK;
    if (device < 0)
        device = 0;
    pthread_mutex_lock(&cuda_reg_lock);
    cuda_reg_t *r = cuda_reg_find(ptr, len);
    if (r) {
        r->refs++;
        goto unlock;
    }
    r = calloc(1, sizeof(*r));
    if (!r) {
        st = ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_CUDA, IPCP_ERR_NOMEM,
                        "cannot allocate a registration record");
        goto unlock;
    }
    if ((st = ipcp__cuda_enter(be, device, IPCP_LOG_ERROR, &sc)) == IPCP_OK) {
        st = cuda_reg_new(ptr, len, device, r);
        ipcp__cuda_leave(&sc);
    }
    if (st != IPCP_OK) {
        free(r);
        goto unlock;
    }
    ipcp__list_push_back(&cuda_regs, &r->link);
unlock:
    pthread_mutex_unlock(&cuda_reg_lock);
    if (st == IPCP_OK)
        *handle = r;
    return st;
}

/* Called with cuda_reg_lock held; r is off the list. */
static void cuda_reg_release(ipcp__backend_t *be, cuda_reg_t *r)
{
    ipcp__cuda_scope_t sc;
    int device = r->device < be->ndev ? r->device : 0;
    int entered = ipcp__cuda_enter(be, device, IPCP_LOG_WARN, &sc) == IPCP_OK;
    ipcp__cu_check(IPCP_CU(cuMemHostUnregister)(r->ptr), IPCP_LOG_WARN,
                   "cuMemHostUnregister(%p, %zu bytes)", (void *)r->ptr,
                   r->len);
    if (entered)
        ipcp__cuda_leave(&sc);
    if (r->dptr != (CUdeviceptr)(uintptr_t)r->ptr)
        atomic_fetch_sub(&cuda_reg_odd, 1);
    r->magic = 0;
    free(r);
}

void ipcp__cuda_shm_unregister(ipcp__backend_t *be, void *handle)
{
    cuda_reg_t *r = handle;
    if (!r || r->magic != CUDA_REG_MAGIC) {
        IPCP_ERROR(IPCP_SUB_CUDA, "CUDA shm_unregister of a handle that is "
                                  "not a live registration");
        return;
    }
    pthread_mutex_lock(&cuda_reg_lock);
    if (--r->refs == 0) {
        ipcp__list_del(&r->link);
        cuda_reg_release(be, r);
    }
    pthread_mutex_unlock(&cuda_reg_lock);
}

CUdeviceptr ipcp__cuda_dev_addr(const void *p)
{
    CUdeviceptr a = (CUdeviceptr)(uintptr_t)p;
    ipcp__list_t *pos, *tmp;
    if (ipcp__likely(
            atomic_load_explicit(&cuda_reg_odd, memory_order_relaxed) == 0))
        return a;
    pthread_mutex_lock(&cuda_reg_lock);
    ipcp__list_for_each_safe(pos, tmp, &cuda_regs)
    {
        cuda_reg_t *r = ipcp__list_entry(pos, cuda_reg_t, link);
        if ((const char *)p >= r->ptr &&
            (size_t)((const char *)p - r->ptr) < r->len) {
            a = r->dptr + (CUdeviceptr)((const char *)p - r->ptr);
            break;
        }
    }
    pthread_mutex_unlock(&cuda_reg_lock);
    return a;
}

void ipcp__cuda_shm_drop_all(ipcp__backend_t *be)
{
    ipcp__list_t *e;
    pthread_mutex_lock(&cuda_reg_lock);
    while ((e = ipcp__list_pop_front(&cuda_regs)) != NULL) {
        cuda_reg_t *r = ipcp__list_entry(e, cuda_reg_t, link);
        IPCP_DEBUG(IPCP_SUB_CUDA,
                   "unregistering %zu bytes at %p left "
                   "registered (%d references)",
                   r->len, (void *)r->ptr, r->refs);
        cuda_reg_release(be, r);
    }
    pthread_mutex_unlock(&cuda_reg_lock);
}
