/* Helpers shared by the API tests: argument parsing, buffers with guard
 * bytes, small control messages, path checks and a process_vm probe. */
#ifndef IPCP_API_TEST_H
#define IPCP_API_TEST_H

#include <stddef.h>
#include <stdint.h>

#include "testutil.h"

/* Tags used by the helpers; tests use tags below API_TAG_CTL. */
#define API_TAG_CTL 1000000
/* Largest control message. */
#define API_CTL_MAX 4096
/* Guard bytes after every test buffer (checked for stray writes). */
#define API_GUARD 64

/* "--key value" from argv, or dflt when absent. */
const char *api_opt(int argc, char **argv, const char *key, const char *dflt);
size_t api_opt_size(int argc, char **argv, const char *key, const char *dflt);
long api_opt_long(int argc, char **argv, const char *key, long dflt);
/* "direct", "staged", "auto" (or fails the test). */
ipcp_path_t api_parse_path(const char *s);

double api_now(void);
/* 1 when this process may use process_vm_readv/writev on a process of the
 * same user that is not its descendant (a sibling rank), else 0.  Probed by
 * a child reading its parent, which needs the same permission. */
int api_pvm_permitted(void);

/* Where a test buffer comes from. */
typedef enum {
    API_ALLOC_MALLOC = 0, /* t_malloc */
    API_ALLOC_MEM = 1,    /* ipcp_mem_alloc */
    API_ALLOC_NULL = 2,   /* no buffer (len 0 only) */
} api_alloc_t;
api_alloc_t api_parse_alloc(const char *s);

typedef struct api_buf {
    api_alloc_t kind;
    unsigned char *base; /* what was allocated */
    size_t total;        /* off + len + API_GUARD */
    size_t off;
    size_t len;
    unsigned char *ptr; /* base + off (NULL for API_ALLOC_NULL) */
    uint64_t guard_seed;
} api_buf_t;

/* Allocates off + len + API_GUARD bytes, fills [0, off) and the guard after
 * the buffer with a pattern, and returns base + off. */
void *api_buf_alloc(ipcp_comm_t *comm, api_alloc_t kind, size_t len, size_t off,
                    api_buf_t *b);
/* Fails the test when the bytes around the buffer changed. */
void api_buf_check_guards(const api_buf_t *b, const char *what);
void api_buf_free(ipcp_comm_t *comm, api_buf_t *b);

/* ipcp_init and the path choice.  how: "set" (ipcp_comm_set_path after
 * init, the default), "param" (ipcp_comm_params_t.path) or "env"
 * (IPCPIPE_PATH, set by the caller before launching).  Ends with a barrier
 * so that no transfer starts before every rank chose its path. */
ipcp_comm_t *api_init(ipcp_path_t path, const char *how);
/* Frees the helper's buffer and finalizes (status must be OK). */
void api_finalize(ipcp_comm_t *comm);

/* Small messages through a receive buffer from ipcp_mem_alloc, so they work
 * under every forced path.  The isend form's p must stay valid until
 * api_wait_ok. */
ipcp_request_t *api_ctl_isend(ipcp_comm_t *comm, int peer, int tag,
                              const void *p, size_t len);
void api_ctl_send(ipcp_comm_t *comm, int peer, int tag, const void *p,
                  size_t len);
void api_ctl_recv(ipcp_comm_t *comm, int peer, int tag, void *p, size_t len);
void api_wait_ok(ipcp_request_t *req, size_t nbytes, const char *what);

/* A well-mixed 64-bit value from two (seeds of derived streams). */
uint64_t api_mix(uint64_t a, uint64_t b);

/* buf must hold the pattern of seed at stream offset off. */
void api_verify_at(const void *buf, size_t len, uint64_t seed, uint64_t off,
                   const char *what);

/* got must be want; when want is AUTO, any concrete path. */
void api_expect_path(ipcp_path_t got, ipcp_path_t want, size_t nbytes,
                     const char *what);

/* Decimal form of v in a static rotating buffer (for T_MSG_HAS). */
const char *api_dec(long long v);

#endif
