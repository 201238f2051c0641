/* The memory registry as the engine uses it (mem.c; the API's calls are
 * in mem.h). */
#ifndef IPCP_ENGINE_MEMREG_H
#define IPCP_ENGINE_MEMREG_H

#include "engine/comm.h"

ipcp_status_t ipcp__mem_attr(ipcp_comm_t *comm, const void *ptr, size_t len,
                             ipcp__mem_attr_t *attr,
                             const ipcp__backend_ops_t **ops,
                             ipcp__backend_t **be);
/* The allocation (from ipcp_mem_alloc) that holds [ptr, ptr+len), or NULL.
 * Call with comm->mem_lock held. */
ipcp__region_t *ipcp__region_find_alloc(ipcp_comm_t *comm, const void *ptr,
                                        size_t len);
/* As ipcp__region_find_alloc, but not a region made for the user's memory
 * (auto) once that memory was freed and another allocation, buffer_id,
 * took its place.  mem_lock held. */
ipcp__region_t *ipcp__region_find_live(ipcp_comm_t *comm, const void *ptr,
                                       size_t len, uint64_t buffer_id);
ipcp__region_t *ipcp__region_find_id(ipcp_comm_t *comm, uint64_t id);
/* The descriptors that go with r's export to a peer, new ones the caller
 * sends or closes: a duplicate of the one r holds, else those the backend
 * makes for this share (mem_share).  Returns how many (0 to max), or -1
 * when they cannot be made (the reason is the last error).  mem_lock
 * held. */
int ipcp__region_fds(const ipcp__region_t *r, int *fds, int max);
/* The exported record of the device allocation holding attr's pointer
 * (attr->map_base/map_size, else base/size, and buffer_id), or of the
 * pieces holding [buf, buf + len) where it spans several (backend
 * mem_span: their extent and identity), made on first use; NULL when it
 * cannot be exported (reason logged).  A record at the same address whose
 * memory was replaced since is retired.  Takes comm->mem_lock. */
ipcp__region_t *ipcp__region_auto(ipcp_comm_t *comm,
                                  const ipcp__mem_attr_t *attr, const void *buf,
                                  size_t len);
void ipcp__mem_on_map_req(ipcp_comm_t *comm, ipcp__peer_t *peer,
                          const ipcp__msg_map_req_t *m);
void ipcp__mem_on_map_rep(ipcp_comm_t *comm, ipcp__peer_t *peer,
                          const ipcp__msg_map_rep_t *m, int *fds, int nfds);
void ipcp__mem_on_reg_gone(ipcp_comm_t *comm, ipcp__peer_t *peer,
                           const ipcp__msg_reg_gone_t *m);
void ipcp__mem_notify_cmd(ipcp_comm_t *comm, ipcp_request_t *req);
/* Deregistration (mem.c): tells every peer, then waits for the answers of
 * those that imported the region and for our own operations on it. */
void ipcp__mem_dereg_cmd(ipcp_comm_t *comm, ipcp_request_t *req);
/* Ends the DEREG requests that are done, gave up on a lost peer, or
 * reached their deadline; returns 1 while any still waits. */
int ipcp__mem_dereg_poll(ipcp_comm_t *comm);
/* A one-sided operation without the owner, or an owner-side one, ended. */
/* The end of a one-sided operation without the owner: 1 when the owner
 * waits for an answer (ipcp__rmem_answer, after the request completed, so
 * that the caller the owner tells finds it ended); *owner and *reg_id
 * name the region (the imported region may be released once the request
 * completed). */
int ipcp__rmem_op_end(ipcp_comm_t *comm, ipcp_rmem_t *rm, int *owner,
                      uint64_t *reg_id);
void ipcp__rmem_answer(ipcp_comm_t *comm, int owner, uint64_t reg_id);
void ipcp__region_op_end(ipcp_comm_t *comm, ipcp__region_t *r);
void ipcp__mem_import_cmd(ipcp_comm_t *comm, ipcp_request_t *req);
void ipcp__mem_cleanup(ipcp_comm_t *comm);
/* pvm probe of a peer (cached in peer->pvm_to). */
int ipcp__pvm_allowed(ipcp_comm_t *comm, ipcp__peer_t *peer);
/* The region mapped for copies by the queues of attr's kind and device
 * (made on first use); NULL when it cannot be (reason logged once). */
void *ipcp__rmem_mapping(ipcp_comm_t *comm, ipcp_rmem_t *rm,
                         const ipcp__mem_attr_t *attr);

/* For the import side (memmap.c): the answer to a peer's REG_GONE once
 * no operation of ours on that region is in flight, and whether one is
 * (owe: the answer is owed when it ends). */
void ipcp__reg_gone_answer(ipcp_comm_t *comm, ipcp__peer_t *peer,
                           uint64_t reg_id);
int ipcp__rmem_busy(ipcp_comm_t *comm, int owner, uint64_t reg_id, int owe);

#endif
