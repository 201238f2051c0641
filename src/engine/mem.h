/* Memory operations called by the API layer. */
#ifndef IPCP_ENGINE_MEM_H
#define IPCP_ENGINE_MEM_H

#include "engine/engine.h"

ipcp_status_t ipcp__mem_alloc(ipcp_comm_t *comm, size_t len,
                              ipcp_mem_type_t type, int device, void **ptr);
/* Device memory of the library's own (the bounce path's rings), shared
 * like an allocation but not counted among the user's: no lane is made
 * for its device.  Freed by ipcp__mem_free, or with the communicator. */
ipcp_status_t ipcp__mem_alloc_internal(ipcp_comm_t *comm, size_t len,
                                       int device, void **ptr);
ipcp_status_t ipcp__mem_free(ipcp_comm_t *comm, void *ptr);
ipcp_status_t ipcp__mem_register(ipcp_comm_t *comm, void *buf, size_t len,
                                 ipcp_mem_t *mem);
/* Takes the registration out and starts telling peers; the caller waits
 * for *req (ipcp__mem_dereg_cmd says what it waits for), then frees. */
ipcp_status_t ipcp__mem_deregister(ipcp_comm_t *comm, ipcp_mem_t *mem,
                                   ipcp_request_t **req);
ipcp_status_t ipcp__mem_pack(const ipcp_mem_t *mem, void *out, size_t cap,
                             size_t *len);
/* Checks a descriptor and fills owner, id, length, address and type. */
ipcp_status_t ipcp__rmem_prepare(ipcp_comm_t *comm, const void *desc,
                                 size_t len, ipcp_rmem_t *rm);
void ipcp__rmem_unmap(ipcp_rmem_t *rm);
ipcp_status_t ipcp__region_retire(ipcp_comm_t *comm, ipcp__region_t *r);
void ipcp__region_release(ipcp__region_t *r);

#endif
