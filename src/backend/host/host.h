/* Private to the host backend (and its tests): the backend instance, the
 * allocation registry, the layout of a memfd export and the queue
 * operations. */
#ifndef IPCP_BACKEND_HOST_H
#define IPCP_BACKEND_HOST_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "backend/backend.h"
#include "common/list.h"

struct ipcp__backend {
    ipcp__config_t cfg;   /* defaults; zeroed when opened without one */
    size_t page;          /* mmap granularity */
    pthread_mutex_t lock; /* guards allocs and next_id */
    ipcp__list_t allocs;  /* ipcp__host_alloc_t, any order */
    atomic_int nallocs;   /* entries of allocs (changed under lock): owns
                           * skips the lock while there are none */
    uint64_t next_id;     /* buffer ids handed to allocations */
};

/* One mem_alloc: a memfd mapped shared, whole, at ptr. */
typedef struct ipcp__host_alloc {
    ipcp__list_t link;
    void *ptr;
    size_t len; /* mapped length = file size, whole pages */
    int fd;
    uint64_t id; /* unique in this process, never 0 */
} ipcp__host_alloc_t;

/* ipcp__export_t.data of an IPCP_EXPORT_HOST_MEMFD export.  It carries no
 * pointer: the importer maps the fd from `offset`, page-aligned down. */
typedef struct ipcp__host_export_data {
    uint64_t magic;     /* IPCP_HOST_EXPORT_MAGIC */
    uint64_t offset;    /* byte offset of the exported start in the file */
    uint64_t file_size; /* size of the file when exported */
    uint64_t check;     /* ipcp__host_export_check() */
} ipcp__host_export_data_t;

#define IPCP_HOST_EXPORT_MAGIC 0x74736f6870637069ULL /* "ipcphost" */

/* Checksum over kind, size and the data fields before `check`. */
uint64_t ipcp__host_export_check(const ipcp__export_t *exp,
                                 const ipcp__host_export_data_t *d);

/* Memory (host_mem.c). */
ipcp_status_t ipcp__host_mem_alloc(ipcp__backend_t *be, size_t len, int device,
                                   void **ptr, void **handle);
ipcp_status_t ipcp__host_mem_free(ipcp__backend_t *be, void *handle);
ipcp_status_t ipcp__host_mem_export(ipcp__backend_t *be, void *handle,
                                    const void *ptr, size_t len,
                                    ipcp__export_t *exp, int *fd);
ipcp_status_t ipcp__host_mem_import(ipcp__backend_t *be,
                                    const ipcp__export_t *exp, const int *fds,
                                    int nfds, int device, void **ptr,
                                    void **handle);
ipcp_status_t ipcp__host_mem_unimport(ipcp__backend_t *be, void *handle);
/* Releases allocations still registered when the backend closes. */
void ipcp__host_mem_release_all(ipcp__backend_t *be);

/* Queue operations, executed in order by the queue's worker thread. */
enum {
    IPCP_HOST_OP_COPY,
    IPCP_HOST_OP_RCOPY,
    IPCP_HOST_OP_FLAG_WRITE,
    IPCP_HOST_OP_FLAG_WAIT,
    IPCP_HOST_OP_NOTIFY,
    IPCP_HOST_OP_STAMP,
    IPCP_HOST_OP_CALL,
    IPCP_HOST_OP_JOIN_WAIT, /* a flag wait on a join word, then drops it */
};

/* A queue's join word (ipcp__host_join): raised in the queue's order, and
 * kept by its queue and by every wait on it, so that a wait still queued
 * when the joined queue is destroyed reads live memory. */
typedef struct ipcp__host_join_word {
    uint64_t word;
    atomic_uint refs;
} ipcp__host_join_word_t;

void ipcp__host_join_word_put(ipcp__host_join_word_t *j);

typedef struct ipcp__host_op {
    int kind;
    ipcp__track_t *t;
    union {
        struct {
            void *dst;
            const void *src;
            size_t len;
        } copy;
        struct {
            void *local;
            uint64_t remote;
            size_t len;
            pid_t pid;
            int write;
        } rcopy;
        struct {
            uint64_t *flag;
            uint64_t value;
            const atomic_int *abort;
        } flag;
        uint64_t *stamp;
        struct {
            void (*fn)(void *arg);
            void *arg;
        } call;
        struct {
            ipcp__host_join_word_t *j;
            uint64_t value;
        } join;
    } u;
} ipcp__host_op_t;

/* Copies of at least this many bytes use non-temporal stores where the
 * CPU has them (host_copy.c); 0 turns them off.  A variable so that
 * benchmarks can compare; set it before creating queues. */
#define IPCP_HOST_STREAM_MIN_DEFAULT ((size_t)256 * 1024)
extern size_t ipcp__host_stream_min;
void ipcp__host_memcpy(void *dst, const void *src, size_t len);

/* Runs one operation on the calling thread (host_ops.c). */
void ipcp__host_op_run(const ipcp__host_op_t *op);

/* Queues (host_queue.c). */
ipcp_status_t ipcp__host_queue_create(ipcp__backend_t *be, int device,
                                      ipcp__queue_t **q);
void ipcp__host_queue_destroy(ipcp__queue_t *q);
ipcp_status_t ipcp__host_copy(ipcp__queue_t *q, void *dst, const void *src,
                              size_t len, ipcp__track_t *t);
ipcp_status_t ipcp__host_rcopy(ipcp__queue_t *q, pid_t pid, uint64_t remote,
                               void *local, size_t len, int write,
                               ipcp__track_t *t);
ipcp_status_t ipcp__host_flag_write(ipcp__queue_t *q, uint64_t *flag,
                                    uint64_t value, ipcp__track_t *t);
ipcp_status_t ipcp__host_flag_wait(ipcp__queue_t *q, uint64_t *flag,
                                   uint64_t value, const atomic_int *abort,
                                   ipcp__track_t *t);
ipcp_status_t ipcp__host_flag_write_wait(ipcp__queue_t *q, uint64_t *wflag,
                                         uint64_t wvalue, uint64_t *flag,
                                         uint64_t value,
                                         const atomic_int *abort);
ipcp_status_t ipcp__host_notify(ipcp__queue_t *q, ipcp__track_t *t);
ipcp_status_t ipcp__host_stamp(ipcp__queue_t *q, uint64_t *ns);
ipcp_status_t ipcp__host_call(ipcp__queue_t *q, void (*fn)(void *arg),
                              void *arg);
ipcp_status_t ipcp__host_join(ipcp__queue_t *dst, ipcp__queue_t *src);

#endif
