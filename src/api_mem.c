/* The public API of memory: allocation, registration, descriptors and
 * one-sided puts and gets. */
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cpu.h"
#include "common/time.h"
#include "api.h"
#include "engine/mem.h"
#include "engine/remote.h"
#include "ipcpipe_cuda.h"

/* ---- Memory -------------------------------------------------------------- */

ipcp_status_t ipcp_mem_alloc(ipcp_comm_t *comm_h, size_t len,
                             const ipcp_alloc_params_t *params, void **ptr)
{
    ipcp_alloc_params_t p;
    ipcp_comm_t *comm;
    IPCP_CHECK(ipcp__comm_get(comm_h, &comm));
    if (!ptr || ipcp__misaligned(ptr, sizeof(void *)))
        return ipcp__bad_arg("ptr output pointer is NULL or misaligned");
    ipcp_alloc_params_init(&p);
    if (params) {
        if (params->struct_size < sizeof(size_t) ||
            params->struct_size > sizeof(p))
            return ipcp__bad_arg("params->struct_size is not the size of an "
                                 "ipcp_alloc_params_t");
        memcpy(&p, params, params->struct_size);
    }
    if (p.type != IPCP_MEM_HOST && p.type != IPCP_MEM_CUDA)
        return ipcp__bad_arg("params->type must be IPCP_MEM_HOST or "
                             "IPCP_MEM_CUDA");
    return ipcp__mem_alloc(comm, len, p.type, p.device, ptr);
}

ipcp_status_t ipcp_mem_free(ipcp_comm_t *comm_h, void *ptr)
{
    ipcp_comm_t *comm;
    IPCP_CHECK(ipcp__comm_get(comm_h, &comm));
    if (!ptr)
        return ipcp__bad_arg("ptr is NULL");
    return ipcp__mem_free(comm, ptr);
}

ipcp_status_t ipcp_mem_register(ipcp_comm_t *comm_h, void *buf, size_t len,
                                ipcp_mem_t **out)
{
    ipcp_comm_t *comm;
    IPCP_CHECK(ipcp__comm_get(comm_h, &comm));
    if (!out || ipcp__misaligned(out, sizeof(void *)))
        return ipcp__bad_arg("mem output pointer is NULL or misaligned");
    if (!buf && len)
        return ipcp__fail(IPCP_LOG_INFO, IPCP_SUB_API, IPCP_ERR_INVALID,
                          "buffer is NULL but length is %zu", len);
    ipcp_mem_t *mem = calloc(1, sizeof(*mem));
    if (!mem)
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_API, IPCP_ERR_NOMEM,
                          "no memory for a registration");
    mem->magic = IPCP_MEM_MAGIC;
    mem->comm = comm;
    /* Before the region is listed: finalize frees it with its handle. */
    ipcp_status_t st = ipcp__handle_new(IPCP_HANDLE_MEM, mem, &mem->handle);
    if (st != IPCP_OK) {
        free(mem);
        return st;
    }
    st = ipcp__mem_register(comm, buf, len, mem);
    if (st != IPCP_OK) {
        ipcp__handle_free(mem->handle);
        ipcp__region_release(&mem->region);
        free(mem);
        return st;
    }
    ipcp__remote_attach(comm, mem);
    *out = ipcp__hptr(mem->handle);
    return IPCP_OK;
}

ipcp_status_t ipcp_mem_deregister(ipcp_mem_t *mem_h)
{
    ipcp_mem_t *mem;
    ipcp_request_t *req;
    IPCP_CHECK(ipcp__mem_get(mem_h, &mem));
    IPCP_CHECK(ipcp__handle_claim(mem_h, IPCP_HANDLE_MEM));
    /* Ranks on other nodes lose it first (they are not waited for:
     * docs/launchers.md). */
    ipcp__remote_detach(mem->comm, mem);
    ipcp_status_t st = ipcp__mem_deregister(mem->comm, mem, &req);
    if (st != IPCP_OK)
        return st; /* stays registered (freed at finalize) */
    /* Until no peer's operation on it is in flight (ipcp__mem_dereg_cmd). */
    st = ipcp__wait_req(req, NULL);
    ipcp__region_release(&mem->region);
    mem->magic = IPCP_DEAD_MAGIC;
    free(mem);
    return st;
}

ipcp_status_t ipcp_mem_pack(const ipcp_mem_t *mem_h, void *desc, size_t cap,
                            size_t *len)
{
    ipcp_mem_t *mem;
    IPCP_CHECK(ipcp__mem_get(mem_h, &mem));
    if (!desc || !len)
        return ipcp__bad_arg("desc or len is NULL");
    return ipcp__mem_pack(mem, desc, cap, len);
}

ipcp_status_t ipcp_rmem_import(ipcp_comm_t *comm_h, const void *desc,
                               size_t len, ipcp_rmem_t **out)
{
    ipcp_comm_t *comm;
    IPCP_CHECK(ipcp__comm_get(comm_h, &comm));
    if (!desc || !out || ipcp__misaligned(out, sizeof(void *)))
        return ipcp__bad_arg("desc or rmem output pointer is NULL or "
                             "misaligned");
    ipcp_rmem_t *rm = calloc(1, sizeof(*rm));
    if (!rm)
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_API, IPCP_ERR_NOMEM,
                          "no memory for an imported region");
    rm->magic = IPCP_RMEM_MAGIC;
    rm->comm = comm;
    ipcp__list_init(&rm->link);
    /* Before the region is listed: finalize frees it with its handle. */
    ipcp_status_t st = ipcp__handle_new(IPCP_HANDLE_RMEM, rm, &rm->handle);
    if (st == IPCP_OK)
        st = ipcp__rmem_prepare(comm, desc, len, rm);
    ipcp_request_t *req = NULL;
    /* A region on another node: reached through the transport, its owner
     * not asked (it takes no part in one-sided calls there). */
    if (st == IPCP_OK && !rm->remote &&
        !(req = ipcp__req_new(comm, IPCP_REQ_IMPORT)))
        st = ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_API, IPCP_ERR_NOMEM,
                        "no memory for a request");
    if (st == IPCP_OK && req) {
        req->rmem = rm;
        req->peer = rm->owner;
        ipcp__comm_submit(comm, req);
        st = ipcp__wait_req(req, NULL);
    }
    if (st != IPCP_OK) {
        ipcp__handle_free(rm->handle);
        free(rm);
        return st;
    }
    atomic_init(&rm->valid, 1);
    ipcp__lock(&comm->mem_lock, IPCP_LOCK_MEM);
    ipcp__list_push_back(&comm->rmems, &rm->link);
    ipcp__unlock(&comm->mem_lock, IPCP_LOCK_MEM);
    *out = ipcp__hptr(rm->handle);
    return IPCP_OK;
}

ipcp_status_t ipcp_rmem_release(ipcp_rmem_t *rm_h)
{
    ipcp_rmem_t *rm;
    IPCP_CHECK(ipcp__rmem_get(rm_h, &rm));
    ipcp_comm_t *comm = rm->comm;
    /* Refused before the handle is claimed, so that it stays usable. */
    int busy = atomic_load(&rm->busy);
    if (busy)
        return ipcp__fail(IPCP_LOG_INFO, IPCP_SUB_API, IPCP_ERR_STATE,
                          "imported region %llu of rank %d has %d "
                          "operation(s) in flight: wait for them first",
                          (unsigned long long)rm->reg_id, ipcp__rmem_rank(rm),
                          busy);
    IPCP_CHECK(ipcp__handle_claim(rm_h, IPCP_HANDLE_RMEM));
    ipcp__lock(&comm->mem_lock, IPCP_LOCK_MEM);
    ipcp__list_del(&rm->link);
    ipcp__unlock(&comm->mem_lock, IPCP_LOCK_MEM);
    ipcp__rmem_unmap(rm);
    rm->magic = IPCP_DEAD_MAGIC;
    free(rm);
    return IPCP_OK;
}

size_t ipcp_rmem_size(const ipcp_rmem_t *rm_h)
{
    ipcp_rmem_t *rm;
    return ipcp__rmem_get(rm_h, &rm) == IPCP_OK ? rm->len : 0;
}

int ipcp_rmem_owner(const ipcp_rmem_t *rm_h)
{
    ipcp_rmem_t *rm;
    return ipcp__rmem_get(rm_h, &rm) == IPCP_OK ? ipcp__rmem_rank(rm) : -1;
}

/* Checks shared by every one-sided call: the handles (resolved into *comm
 * and *rm), the buffer, and the range inside a region that is still
 * registered. */
ipcp_status_t ipcp__check_onesided(const ipcp_comm_t *comm_h, const void *buf,
                                   size_t len, const ipcp_rmem_t *rm_h,
                                   size_t offset, ipcp_comm_t **comm_p,
                                   ipcp_rmem_t **rm_p)
{
    ipcp_comm_t *comm;
    ipcp_rmem_t *rm;
    IPCP_CHECK(ipcp__comm_get(comm_h, &comm));
    IPCP_CHECK(ipcp__rmem_get(rm_h, &rm));
    *comm_p = comm;
    *rm_p = rm;
    if (rm->comm != comm)
        return ipcp__bad_arg("imported region belongs to another "
                             "communicator");
    if (!buf && len)
        return ipcp__fail(IPCP_LOG_INFO, IPCP_SUB_API, IPCP_ERR_INVALID,
                          "buffer is NULL but length is %zu", len);
    if (offset > rm->len || len > rm->len - offset)
        return ipcp__fail(IPCP_LOG_INFO, IPCP_SUB_API, IPCP_ERR_OUT_OF_RANGE,
                          "range [%zu, +%zu) is outside the %zu-byte region "
                          "of rank %d",
                          offset, len, rm->len, ipcp__rmem_rank(rm));
    if (!atomic_load(&rm->valid))
        return ipcp__fail(IPCP_LOG_INFO, IPCP_SUB_API, IPCP_ERR_NOT_REGISTERED,
                          "rank %d deregistered region %llu",
                          ipcp__rmem_rank(rm), (unsigned long long)rm->reg_id);
    return IPCP_OK;
}

static ipcp_status_t ipcp__onesided(ipcp_comm_t *comm_h, int type, void *buf,
                                    size_t len, ipcp_rmem_t *rm_h,
                                    size_t offset, ipcp_request_t **out)
{
    ipcp_comm_t *comm;
    ipcp_rmem_t *rm;
    IPCP_CHECK(
        ipcp__check_onesided(comm_h, buf, len, rm_h, offset, &comm, &rm));
    if (!out || ipcp__misaligned(out, sizeof(void *)))
        return ipcp__bad_arg("request output pointer is NULL or misaligned");
    if (rm->remote)
        return ipcp__remote_onesided(comm, type, buf, len, rm, offset, out);
    return ipcp__post_onesided(comm, type, buf, len, rm, offset, out);
}

ipcp_status_t ipcp_iput(ipcp_comm_t *comm_h, const void *src, size_t len,
                        ipcp_rmem_t *dst, size_t offset, ipcp_request_t **req)
{
    return ipcp__onesided(comm_h, IPCP_REQ_PUT, (void *)src, len, dst, offset,
                          req);
}

ipcp_status_t ipcp_iget(ipcp_comm_t *comm_h, void *dst, size_t len,
                        ipcp_rmem_t *src, size_t offset, ipcp_request_t **req)
{
    return ipcp__onesided(comm_h, IPCP_REQ_GET, dst, len, src, offset, req);
}

ipcp_status_t ipcp_put(ipcp_comm_t *comm_h, const void *src, size_t len,
                       ipcp_rmem_t *dst, size_t offset)
{
    ipcp_request_t *req;
    IPCP_CHECK(ipcp_iput(comm_h, src, len, dst, offset, &req));
    return ipcp_wait(req, NULL);
}

ipcp_status_t ipcp_get(ipcp_comm_t *comm_h, void *dst, size_t len,
                       ipcp_rmem_t *src, size_t offset)
{
    ipcp_request_t *req;
    IPCP_CHECK(ipcp_iget(comm_h, dst, len, src, offset, &req));
    return ipcp_wait(req, NULL);
}
