/* A device that is not there, for the engine's tests on machines without a
 * GPU: a backend table made of the host backend's functions whose memory
 * (shared host memory from memfd, which peers can map) it reports as the
 * device memory of GPU 0 while it lives.  Each test fills in the rest of
 * the table (the functions of the device it plays) and installs it with
 * ipcp__device_backend_for_tests. */
#ifndef IPCP_TEST_FAKEDEV_H
#define IPCP_TEST_FAKEDEV_H

#include "backend/backend.h"

/* How many allocations it can remember at once (a test that makes more
 * fails, saying so). */
#define FAKEDEV_MAX 64

/* The table's memory functions: owns says memory mem_alloc made (or
 * fakedev_add recorded) is GPU 0's, with its allocation as base and size
 * and its slot as buffer id; mem_free forgets it. */
int fakedev_owns(ipcp__backend_t *be, const void *ptr, ipcp__mem_attr_t *attr);
ipcp_status_t fakedev_mem_alloc(ipcp__backend_t *be, size_t len, int device,
                                void **ptr, void **handle);
ipcp_status_t fakedev_mem_free(ipcp__backend_t *be, void *handle);
/* Records [p, p + n) as device memory ("cudaMalloc'd" by the user: handle
 * NULL, never freed through the table). */
void fakedev_add(void *p, size_t n, void *handle);
/* The host backend's table with the functions above, named "fake-gpu",
 * of type IPCP_MEM_CUDA. */
void fakedev_ops(ipcp__backend_ops_t *ops);

#endif
