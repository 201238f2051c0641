/* What test_boot_connect.c and test_boot_connect_solo.c (its one-process
 * cases), linked into one executable, share. */
#ifndef IPCP_TEST_BOOT_CONNECT_INT_H
#define IPCP_TEST_BOOT_CONNECT_INT_H

#include <stddef.h>
#include <sys/types.h>

#include "bootstrap/bootstrap.h"

/* The protocol these tests' ranks agree on (ipcp__boot_params_t proto). */
#define T_BOOT_PROTO 0x7e570001u

/* snprintf that fails the test instead of cutting a path short. */
void t_fmt(char *buf, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void rm_tree(const char *path);
/* A fresh private base directory; `extra` is appended (to make long
 * paths). */
void make_base(char *buf, size_t len, const char *extra);
/* base/ipcpipe-<uid>, and base/ipcpipe-<uid>/job under it. */
void user_dir(char *buf, size_t len, const char *base);
void job_dir(char *buf, size_t len, const char *base, const char *job);
void mkdir_mode(const char *path, mode_t mode);
int exists(const char *path);
/* Parameters for a one-process case: job "solo-<pid>" under base. */
void solo_params(ipcp__boot_params_t *p, int rank, int size, const char *base,
                 double timeout_s);
/* A bound, listening raw socket at path. */
int raw_listen(const char *path);

/* The one-process cases (test_boot_connect_solo.c): their exit codes. */
int solo_size1(void);
int solo_missing_rank(void);
int solo_fd_limit(void);
int solo_foreign_owner(void);
int solo_bad_mode(void);
int solo_sock_taken(void);
int solo_bad_params(void);

#endif
