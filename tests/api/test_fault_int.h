/* What test_fault.c and test_fault_leaks.c, linked into one executable,
 * share: a case's settings and the survivor's leak accounting. */
#ifndef IPCP_TEST_FAULT_INT_H
#define IPCP_TEST_FAULT_INT_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
    P_EAGER,
    P_DIRECT,
    P_DRIVEN,
    P_STAGED,
    P_PUT_MAPPED,
    P_GET_MAPPED,
    P_PUT_PVM,
    P_GET_PVM,
    P_PUT_OWNER,
    P_GET_OWNER,
    P_BARRIER,
    P_FINALIZE,
    P_N
} path_id_t;

typedef struct cfg {
    path_id_t path;
    int victim; /* its rank */
    const char *stage;
    long count;
    int stop;        /* SIGSTOP, else SIGKILL */
    const char *dir; /* FAULT_DIR: pid and descriptor files; IPCPIPE_DIR */
    int free_early;  /* the owner frees its region before finalize (the
                        default; --free-late: after) */
    uint64_t seed;
} cfg_t;

#define SHM_MAX 256
typedef struct shm_list {
    int n;
    char names[SHM_MAX][256];
} shm_list_t;

/* Big: kept static, one per process. */
typedef struct leaks {
    int fds, maps;
    shm_list_t shm;
} leaks_t;

/* Counts what this process holds before its ipcp_init (after a job of one
 * rank has woken any GPU driver up). */
void leaks_before(leaks_t *l);
/* Fails unless the process holds what it held before, and the job's
 * rendezvous directory is gone. */
void leaks_check(const cfg_t *c, const leaks_t *l, const char *job,
                 const char *when);
/* A file beside the job (FAULT_DIR/name), written whole or not at all. */
void file_write(const cfg_t *c, const char *name, const void *p, size_t len);
size_t file_read(const cfg_t *c, const char *name, void *p, size_t cap);

#endif
