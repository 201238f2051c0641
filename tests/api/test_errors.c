/* Argument checks and error statuses of the public API, each with the
 * status and a stable part of the message.
 *
 *   test_api_errors --case NAME [--path P] [--alloc A] [--size small|large]
 *                   [--var NAME --value V]
 *
 * Single-process cases (label unit) join a one-rank job in this process;
 * multi-process ones run 2 ranks through t_mp_main (foreign_job forks two
 * separate one-rank jobs itself). */
#include "apitest.h"

#include <errno.h>
#include <limits.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

enum { TAG_DATA = 5, TAG_GO = 6, TAG_DESC = 7 };

typedef struct desc_msg {
    uint64_t len;
    uint64_t seed;
    unsigned char desc[IPCP_DESC_MAX];
} desc_msg_t;

/* A sentinel that output arguments must keep after a failed call. */
#define SENTINEL ((void *)(uintptr_t)0x5e57)

/* expr must fail with IPCP_ERR_INVALID and a message holding substr
 * (when not NULL). */
#define T_INVALID(expr, substr) check_invalid((expr), #expr, (substr), __LINE__)

static void check_invalid(ipcp_status_t st, const char *expr,
                          const char *substr, int line)
{
    if (st != IPCP_ERR_INVALID)
        T_FAIL("line %d: %s returned %s, expected IPCP_ERR_INVALID (last "
               "error: %s)",
               line, expr, ipcp_strerror(st), ipcp_last_error());
    if (substr && !strstr(ipcp_last_error(), substr))
        T_FAIL("line %d: %s: last error \"%s\" lacks \"%s\"", line, expr,
               ipcp_last_error(), substr);
}

static void *misalign(const void *p)
{
    return (void *)((const char *)p + 1);
}

static ipcp_comm_t *unit_init(void)
{
    static char job[64];
    ipcp_comm_params_t p;
    ipcp_comm_t *comm = NULL;
    snprintf(job, sizeof job, "apiunit-%ld", (long)getpid());
    ipcp_comm_params_init(&p);
    p.rank = 0;
    p.size = 1;
    p.job_id = job;
    T_OK(ipcp_init(&p, &comm));
    T_CHECK(comm != NULL);
    T_EQ_INT(ipcp_comm_rank(comm), 0);
    T_EQ_INT(ipcp_comm_size(comm), 1);
    T_EQ_STR(ipcp_comm_job(comm), job);
    return comm;
}

/* ---------------------------------------------------------------- unit */

static int case_strings(void)
{
    T_CHECK(ipcp_last_error() != NULL);
    T_EQ_STR(ipcp_last_error(), "");
    T_EQ_STR(ipcp_strerror(IPCP_OK), "IPCP_OK");
    T_EQ_STR(ipcp_strerror(IPCP_ERR_TIMEOUT), "IPCP_ERR_TIMEOUT");
    T_EQ_STR(ipcp_strerror(IPCP_ERR_PEER_LOST), "IPCP_ERR_PEER_LOST");
    T_EQ_STR(ipcp_strerror(IPCP_ERR_CONFIG), "IPCP_ERR_CONFIG");
    T_EQ_STR(ipcp_status_desc(IPCP_ERR_TRUNCATED),
             "message larger than receive buffer");
    T_CHECK(ipcp_strerror((ipcp_status_t)-999) != NULL);
    T_CHECK(ipcp_status_desc((ipcp_status_t)12345) != NULL);
    T_EQ_U64(ipcp_version(), IPCP_VERSION);
    char v[32];
    snprintf(v, sizeof v, "%d.%d.%d", IPCP_VERSION_MAJOR, IPCP_VERSION_MINOR,
             IPCP_VERSION_PATCH);
    T_EQ_STR(ipcp_version_string(), v);
    static const struct {
        ipcp_path_t p;
        const char *name;
    } paths[] = {{IPCP_PATH_AUTO, "auto"},
                 {IPCP_PATH_DIRECT, "direct"},
                 {IPCP_PATH_STAGED, "staged"},
                 {IPCP_PATH_EAGER, "eager"}};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        const char *n = ipcp_path_name(paths[i].p);
        T_CHECK(n != NULL);
        if (!strcasestr(n, paths[i].name))
            T_FAIL("ipcp_path_name(%d) = \"%s\", expected \"%s\"",
                   (int)paths[i].p, n, paths[i].name);
    }
    T_CHECK(ipcp_path_name((ipcp_path_t)77) != NULL);
    return 0;
}

static int case_init_args(void)
{
    T_INVALID(ipcp_init(NULL, NULL), "comm");
    T_INVALID(ipcp_finalize(NULL), "comm");
    T_INVALID(ipcp_barrier(NULL), "comm");
    T_INVALID(ipcp_comm_set_path(NULL, IPCP_PATH_AUTO), "comm");
    return 0;
}

static int case_finalize_twice(void)
{
    ipcp_comm_t *comm = unit_init();
    T_OK(ipcp_finalize(comm));
    T_STATUS(ipcp_finalize(comm), IPCP_ERR_STATE);
    T_MSG_HAS("comm");
    return 0;
}

static int case_mem_free_bad(void)
{
    ipcp_comm_t *comm = unit_init();
    unsigned char *p = NULL;
    T_OK(ipcp_mem_alloc(comm, 8192, NULL, (void **)&p));
    T_INVALID(ipcp_mem_free(comm, p + 1), "ipcp_mem_alloc");
    T_INVALID(ipcp_mem_free(comm, p + 4096), "ipcp_mem_alloc");
    unsigned char *m = t_malloc(4096);
    T_INVALID(ipcp_mem_free(comm, m), "ipcp_mem_alloc");
    free(m);
    memset(p, 1, 8192); /* still mapped after the refused frees */
    T_OK(ipcp_mem_free(comm, p));
    T_INVALID(ipcp_mem_free(comm, p), "ipcp_mem_alloc");
    T_INVALID(ipcp_mem_free(misalign(comm), p), "comm");
    T_OK(ipcp_finalize(comm));
    return 0;
}

static int case_misaligned_mem(void)
{
    ipcp_comm_t *comm = unit_init();
    unsigned char *buf = t_malloc(8192);
    ipcp_mem_t *mem = NULL;
    unsigned char desc[IPCP_DESC_MAX];
    size_t len = 12345;
    T_OK(ipcp_mem_register(comm, buf, 8192, &mem));
    T_INVALID(ipcp_mem_deregister(misalign(mem)), "registration");
    T_INVALID(ipcp_mem_pack(misalign(mem), desc, sizeof desc, &len),
              "registration");
    T_EQ_U64(len, 12345);
    T_INVALID(ipcp_mem_deregister(NULL), "registration");
    T_INVALID(ipcp_mem_pack(NULL, desc, sizeof desc, &len), "registration");
    T_INVALID(ipcp_mem_pack(mem, NULL, sizeof desc, &len), "desc");
    T_INVALID(ipcp_mem_pack(mem, desc, sizeof desc, NULL), "len");
    T_OK(ipcp_mem_pack(mem, desc, sizeof desc, &len));
    T_CHECK(len > 0 && len <= IPCP_DESC_MAX);
    T_OK(ipcp_mem_deregister(mem));
    free(buf);
    T_OK(ipcp_finalize(comm));
    return 0;
}

static int case_bad_env(int argc, char **argv)
{
    const char *var = api_opt(argc, argv, "--var", "IPCPIPE_CHUNK");
    const char *val = api_opt(argc, argv, "--value", "12abc");
    setenv(var, val, 1);
    T_STATUS(ipcp_settings_check(), IPCP_ERR_CONFIG);
    T_MSG_HAS(var);
    ipcp_comm_params_t p;
    ipcp_comm_params_init(&p);
    p.rank = 0;
    p.size = 1;
    p.job_id = "apiunit-badenv";
    ipcp_comm_t *comm = SENTINEL;
    T_STATUS(ipcp_init(&p, &comm), IPCP_ERR_CONFIG);
    T_MSG_HAS(var);
    T_CHECK(comm == SENTINEL);
    return 0;
}

static int case_settings(void)
{
    int n = ipcp_settings_count();
    int seen_timeout = 0, seen_path = 0, seen_pvm = 0;
    T_CHECK(n > 0);
    T_OK(ipcp_settings_check());
    for (int i = 0; i < n; i++) {
        ipcp_setting_info_t s;
        memset(&s, 0, sizeof s);
        T_OK(ipcp_setting_get(i, &s));
        T_CHECK(s.name && s.value && s.deflt && s.doc);
        if (strncmp(s.name, "IPCPIPE_", 8) != 0)
            T_FAIL("setting %d is named \"%s\"", i, s.name);
        T_CHECK(s.doc[0] != '\0');
        seen_timeout |= strcmp(s.name, "IPCPIPE_TIMEOUT") == 0;
        seen_path |= strcmp(s.name, "IPCPIPE_PATH") == 0;
        seen_pvm |= strcmp(s.name, "IPCPIPE_PVM") == 0;
    }
    T_CHECK(seen_timeout && seen_path && seen_pvm);
    ipcp_setting_info_t s;
    T_INVALID(ipcp_setting_get(n, &s), NULL);
    T_INVALID(ipcp_setting_get(-1, &s), NULL);
    T_INVALID(ipcp_setting_get(0, NULL), NULL);
    return 0;
}

/* Two separate one-rank jobs: a descriptor packed in one is refused by the
 * other with IPCP_ERR_BAD_DESCRIPTOR. */
static int case_foreign_job(void)
{
    int blob[2], done[2];
    if (pipe(blob) || pipe(done))
        T_FAIL("pipe: %s", strerror(errno));
    pid_t child = fork();
    if (child < 0)
        T_FAIL("fork: %s", strerror(errno));
    if (child == 0) {
        close(blob[0]);
        close(done[1]);
        alarm(60);
        ipcp_comm_t *comm = unit_init(); /* job apiunit-<child pid> */
        unsigned char *buf = t_malloc(4096);
        ipcp_mem_t *mem = NULL;
        desc_msg_t m;
        memset(&m, 0, sizeof m);
        size_t len = 0;
        T_OK(ipcp_mem_register(comm, buf, 4096, &mem));
        T_OK(ipcp_mem_pack(mem, m.desc, sizeof m.desc, &len));
        m.len = len;
        if (write(blob[1], &m, sizeof m) != (ssize_t)sizeof m)
            T_FAIL("write: %s", strerror(errno));
        char c;
        if (read(done[0], &c, 1) != 1)
            T_FAIL("read: %s", strerror(errno));
        T_OK(ipcp_mem_deregister(mem));
        T_OK(ipcp_finalize(comm));
        free(buf);
        _exit(0);
    }
    close(blob[1]);
    close(done[0]);
    ipcp_comm_t *comm = unit_init(); /* job apiunit-<parent pid> */
    desc_msg_t m;
    size_t got = 0;
    while (got < sizeof m) {
        ssize_t r = read(blob[0], (char *)&m + got, sizeof m - got);
        if (r <= 0)
            T_FAIL("read from the other job: %s", r ? strerror(errno) : "eof");
        got += (size_t)r;
    }
    ipcp_rmem_t *rmem = SENTINEL;
    T_STATUS(ipcp_rmem_import(comm, m.desc, m.len, &rmem),
             IPCP_ERR_BAD_DESCRIPTOR);
    T_MSG_HAS("job");
    T_CHECK(rmem == SENTINEL);
    if (write(done[1], "x", 1) != 1)
        T_FAIL("write: %s", strerror(errno));
    int ws;
    while (waitpid(child, &ws, 0) < 0)
        if (errno != EINTR)
            T_FAIL("waitpid: %s", strerror(errno));
    if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0)
        T_FAIL("the other job's process ended with status 0x%x", ws);
    T_OK(ipcp_finalize(comm));
    return 0;
}

/* ---------------------------------------------------------- two ranks */

static int mp_null_args(ipcp_comm_t *comm)
{
    if (ipcp_comm_rank(comm) == 0) {
        char buf[16] = {0};
        ipcp_request_t *req = SENTINEL;
        T_INVALID(ipcp_isend(NULL, buf, 4, 1, 0, &req), "comm");
        T_INVALID(ipcp_isend(comm, NULL, 4, 1, 0, &req), "buf");
        T_INVALID(ipcp_isend(comm, buf, 4, 1, 0, NULL), "req");
        T_INVALID(ipcp_irecv(NULL, buf, 4, 1, 0, &req), "comm");
        T_INVALID(ipcp_irecv(comm, NULL, 4, 1, 0, &req), "buf");
        T_INVALID(ipcp_irecv(comm, buf, 4, 1, 0, NULL), "req");
        T_CHECK(req == SENTINEL);
        T_INVALID(ipcp_send(comm, NULL, 1, 1, 0), "buf");
        T_INVALID(ipcp_recv(comm, NULL, 1, 1, 0, NULL), "buf");
        T_INVALID(ipcp_wait(NULL, NULL), "req");
        int done = -7;
        T_INVALID(ipcp_test(NULL, &done, NULL), "req");
        T_EQ_INT(done, -7);
        void *p = SENTINEL;
        T_INVALID(ipcp_mem_alloc(NULL, 4096, NULL, &p), "comm");
        T_INVALID(ipcp_mem_alloc(comm, 4096, NULL, NULL), "ptr");
        T_CHECK(p == SENTINEL);
        ipcp_mem_t *mem = SENTINEL;
        T_INVALID(ipcp_mem_register(comm, NULL, 10, &mem), "buf");
        T_INVALID(ipcp_mem_register(comm, buf, 10, NULL), "mem");
        T_INVALID(ipcp_mem_register(NULL, buf, 10, &mem), "comm");
        T_CHECK(mem == SENTINEL);
        ipcp_rmem_t *rmem = SENTINEL;
        T_INVALID(ipcp_rmem_import(comm, NULL, 10, &rmem), "desc");
        T_INVALID(ipcp_rmem_import(comm, buf, 10, NULL), "rmem");
        T_CHECK(rmem == SENTINEL);
        T_INVALID(ipcp_put(comm, buf, 4, NULL, 0), "imported region");
        T_INVALID(ipcp_get(comm, buf, 4, NULL, 0), "imported region");
        T_INVALID(ipcp_rmem_release(NULL), "imported region");
        T_INVALID(ipcp_comm_set_path(comm, (ipcp_path_t)42), "path");
    }
    T_OK(ipcp_barrier(comm));
    return 0;
}

static int mp_bad_tag(ipcp_comm_t *comm)
{
    char buf[8] = {0};
    ipcp_request_t *req = SENTINEL;
    int peer = 1 - ipcp_comm_rank(comm);
    T_INVALID(ipcp_isend(comm, buf, 8, peer, -1, &req), "tag");
    T_INVALID(ipcp_irecv(comm, buf, 8, peer, -5, &req), "tag");
    T_INVALID(ipcp_send(comm, buf, 8, peer, INT_MIN), "tag");
    T_INVALID(ipcp_recv(comm, buf, 8, peer, -1, NULL), "tag");
    T_CHECK(req == SENTINEL);
    T_OK(ipcp_barrier(comm));
    return 0;
}

/* Self, size, negative and huge peers; the message names the rank. */
static int mp_bad_peer(ipcp_comm_t *comm)
{
    char buf[8] = {0};
    ipcp_request_t *req = SENTINEL;
    int self = ipcp_comm_rank(comm);
    const int bad[] = {self, 2, -1, INT_MAX, INT_MIN};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *num = api_dec(bad[i]);
        T_INVALID(ipcp_isend(comm, buf, 8, bad[i], 0, &req), num);
        T_INVALID(ipcp_irecv(comm, buf, 8, bad[i], 0, &req), num);
        T_INVALID(ipcp_send(comm, buf, 8, bad[i], 0), num);
        T_INVALID(ipcp_recv(comm, buf, 8, bad[i], 0, NULL), num);
    }
    T_CHECK(req == SENTINEL);
    T_OK(ipcp_barrier(comm));
    return 0;
}

/* A misaligned communicator is refused without being dereferenced, and
 * the real one keeps working. */
static int mp_misaligned_comm(ipcp_comm_t *comm)
{
    ipcp_comm_t *bad = misalign(comm);
    char buf[8] = {0};
    ipcp_request_t *req = SENTINEL;
    void *p = SENTINEL;
    ipcp_mem_t *mem = SENTINEL;
    ipcp_rmem_t *rmem = SENTINEL;
    int peer = 1 - ipcp_comm_rank(comm);
    T_INVALID(ipcp_barrier(bad), "comm");
    T_INVALID(ipcp_comm_set_path(bad, IPCP_PATH_STAGED), "comm");
    T_INVALID(ipcp_isend(bad, buf, 8, peer, 0, &req), "comm");
    T_INVALID(ipcp_irecv(bad, buf, 8, peer, 0, &req), "comm");
    T_INVALID(ipcp_send(bad, buf, 8, peer, 0), "comm");
    T_INVALID(ipcp_recv(bad, buf, 8, peer, 0, NULL), "comm");
    T_INVALID(ipcp_mem_alloc(bad, 4096, NULL, &p), "comm");
    T_INVALID(ipcp_mem_register(bad, buf, 8, &mem), "comm");
    T_INVALID(ipcp_rmem_import(bad, buf, 8, &rmem), "comm");
    T_INVALID(ipcp_finalize(bad), "comm");
    T_CHECK(req == SENTINEL && p == SENTINEL && mem == SENTINEL &&
            rmem == SENTINEL);
    uint64_t x = 42, y = 0;
    ipcp_request_t *s = api_ctl_isend(comm, peer, 1, &x, 8);
    api_ctl_recv(comm, peer, 1, &y, 8);
    api_wait_ok(s, 8, "isend after the refused calls");
    T_EQ_U64(y, 42);
    T_OK(ipcp_barrier(comm));
    return 0;
}

static int mp_misaligned_req(ipcp_comm_t *comm)
{
    uint64_t x = 0;
    if (ipcp_comm_rank(comm) == 0) {
        api_buf_t b;
        void *p = api_buf_alloc(comm, API_ALLOC_MEM, 64, 0, &b);
        ipcp_request_t *req = NULL;
        ipcp_xfer_info_t info = {12345, IPCP_PATH_AUTO};
        T_OK(ipcp_irecv(comm, p, 64, 1, TAG_DATA, &req));
        T_INVALID(ipcp_wait(misalign(req), &info), "req");
        int done = -7;
        T_INVALID(ipcp_test(misalign(req), &done, &info), "req");
        T_EQ_INT(done, -7);
        T_EQ_U64(info.nbytes, 12345);
        T_INVALID(ipcp_test(req, NULL, NULL), "done");
        api_ctl_send(comm, 1, TAG_GO, &x, 8);
        T_OK(ipcp_wait(req, &info));
        T_EQ_U64(info.nbytes, 64);
        api_verify_at(p, 64, 99, 0, "data after the refused waits");
        api_buf_free(comm, &b);
    } else {
        unsigned char d[64];
        ipcp_pattern_fill(d, 64, 99, 0);
        api_ctl_recv(comm, 0, TAG_GO, &x, 8);
        T_OK(ipcp_send(comm, d, 64, 0, TAG_DATA));
    }
    T_OK(ipcp_barrier(comm));
    return 0;
}

static int mp_misaligned_rmem(ipcp_comm_t *comm)
{
    uint64_t x = 0;
    desc_msg_t m;
    memset(&m, 0, sizeof m);
    if (ipcp_comm_rank(comm) == 0) {
        unsigned char *buf = t_malloc(4096);
        ipcp_mem_t *mem = NULL;
        size_t len = 0;
        memset(buf, 0, 4096);
        T_OK(ipcp_mem_register(comm, buf, 4096, &mem));
        T_OK(ipcp_mem_pack(mem, m.desc, sizeof m.desc, &len));
        m.len = len;
        api_ctl_send(comm, 1, TAG_DESC, &m, sizeof m);
        api_ctl_recv(comm, 1, TAG_GO, &x, 8);
        T_EQ_INT(buf[0], 0);
        T_EQ_INT(buf[1], 0x77);
        T_OK(ipcp_mem_deregister(mem));
        free(buf);
    } else {
        api_ctl_recv(comm, 0, TAG_DESC, &m, sizeof m);
        ipcp_rmem_t *rmem = NULL;
        T_OK(ipcp_rmem_import(comm, m.desc, m.len, &rmem));
        ipcp_rmem_t *bad = misalign(rmem);
        unsigned char l[8];
        memset(l, 0x77, sizeof l);
        ipcp_request_t *req = SENTINEL;
        T_INVALID(ipcp_put(comm, l, 1, bad, 0), "imported region");
        T_INVALID(ipcp_get(comm, l, 1, bad, 0), "imported region");
        T_INVALID(ipcp_iput(comm, l, 1, bad, 0, &req), "imported region");
        T_INVALID(ipcp_iget(comm, l, 1, bad, 0, &req), "imported region");
        T_CHECK(req == SENTINEL);
        T_INVALID(ipcp_rmem_release(bad), "imported region");
        T_OK(ipcp_put(comm, l, 1, rmem, 1));
        T_OK(ipcp_rmem_release(rmem));
        api_ctl_send(comm, 0, TAG_GO, &x, 8);
    }
    T_OK(ipcp_barrier(comm));
    return 0;
}

/* A receive smaller than the message: the receiver fails with
 * IPCP_ERR_TRUNCATED, nothing is written around or into the receive
 * buffer, and the next message on the same tag is delivered.  The sender
 * fails too, except for an eager message (small, path auto), which was
 * complete when it left: the header says so. */
static int mp_truncated(ipcp_comm_t *comm, ipcp_path_t path, api_alloc_t alloc,
                        int large)
{
    size_t rlen = large ? ((size_t)1 << 20) : 64;
    size_t slen = rlen + (large ? 4097 : 37);
    uint64_t seed = 0;
    if (ipcp_comm_rank(comm) == 0) {
        seed = t_fresh_seed();
        api_ctl_send(comm, 1, TAG_GO, &seed, 8);
        unsigned char *s = t_malloc(slen);
        t_fill(s, slen, seed);
        if (path == IPCP_PATH_AUTO && !large) {
            T_OK(ipcp_send(comm, s, slen, 1, TAG_DATA));
        } else {
            T_STATUS(ipcp_send(comm, s, slen, 1, TAG_DATA), IPCP_ERR_TRUNCATED);
            T_MSG_HAS("rank 1");
        }
        t_fill(s, rlen, seed + 1);
        T_OK(ipcp_send(comm, s, rlen, 1, TAG_DATA));
        free(s);
    } else {
        api_ctl_recv(comm, 0, TAG_GO, &seed, 8);
        /* The receive buffer sits at an odd offset inside a larger
         * allocation that is entirely filled with a canary pattern. */
        api_buf_t b;
        size_t off = 4096 + 3;
        unsigned char *base = api_buf_alloc(comm, alloc, rlen + 8192, 0, &b);
        unsigned char *r = base + off;
        uint64_t canary = t_fresh_seed();
        ipcp_pattern_fill(base, rlen + 8192, canary, 0);
        ipcp_xfer_info_t info = {777, IPCP_PATH_AUTO};
        T_STATUS(ipcp_recv(comm, r, rlen, 0, TAG_DATA, &info),
                 IPCP_ERR_TRUNCATED);
        T_MSG_HAS(api_dec((long long)slen));
        T_MSG_HAS(api_dec((long long)rlen));
        T_EQ_U64(info.nbytes, 777);
        api_verify_at(base, rlen + 8192, canary, 0,
                      "allocation around and under the truncated receive");
        T_OK(ipcp_recv(comm, r, rlen, 0, TAG_DATA, &info));
        T_EQ_U64(info.nbytes, rlen);
        api_expect_path(info.path, path, info.nbytes,
                        "receive after the truncation");
        api_verify_at(r, rlen, seed + 1, 0, "message after the truncation");
        api_verify_at(base, off, canary, 0, "bytes before the buffer");
        api_verify_at(r + rlen, 8192 - off, canary, off + rlen,
                      "bytes after the buffer");
        api_buf_check_guards(&b, "allocation");
        api_buf_free(comm, &b);
    }
    T_OK(ipcp_barrier(comm));
    return 0;
}

/* Descriptors cut short, lengthened or with any one byte changed are
 * refused with IPCP_ERR_BAD_DESCRIPTOR; the intact one imports. */
static int mp_bad_desc(ipcp_comm_t *comm)
{
    uint64_t x = 0;
    desc_msg_t m;
    memset(&m, 0, sizeof m);
    if (ipcp_comm_rank(comm) == 0) {
        unsigned char *buf = t_malloc(65536);
        ipcp_mem_t *mem = NULL;
        size_t len = 0;
        T_OK(ipcp_mem_register(comm, buf, 65536, &mem));
        T_OK(ipcp_mem_pack(mem, m.desc, sizeof m.desc, &len));
        m.len = len;
        api_ctl_send(comm, 1, TAG_DESC, &m, sizeof m);
        api_ctl_recv(comm, 1, TAG_GO, &x, 8);
        T_OK(ipcp_mem_deregister(mem));
        free(buf);
    } else {
        api_ctl_recv(comm, 0, TAG_DESC, &m, sizeof m);
        T_CHECK(m.len > 0 && m.len <= IPCP_DESC_MAX);
        unsigned char d[IPCP_DESC_MAX + 1];
        ipcp_rmem_t *rmem = SENTINEL;
        T_STATUS(ipcp_rmem_import(comm, m.desc, m.len - 1, &rmem),
                 IPCP_ERR_BAD_DESCRIPTOR);
        T_MSG_HAS("descriptor");
        T_STATUS(ipcp_rmem_import(comm, m.desc, 1, &rmem),
                 IPCP_ERR_BAD_DESCRIPTOR);
        memcpy(d, m.desc, m.len);
        d[m.len] = 0;
        T_STATUS(ipcp_rmem_import(comm, d, m.len + 1, &rmem),
                 IPCP_ERR_BAD_DESCRIPTOR);
        T_MSG_HAS("descriptor");
        for (size_t i = 0; i < m.len; i++) {
            for (int k = 0; k < 2; k++) {
                memcpy(d, m.desc, m.len);
                d[i] ^= k ? 0xff : 0x01;
                ipcp_status_t st = ipcp_rmem_import(comm, d, m.len, &rmem);
                if (st != IPCP_ERR_BAD_DESCRIPTOR)
                    T_FAIL("descriptor with byte %zu of %llu xor 0x%02x: "
                           "import returned %s, expected "
                           "IPCP_ERR_BAD_DESCRIPTOR (last error: %s)",
                           i, (unsigned long long)m.len, k ? 0xff : 0x01,
                           ipcp_strerror(st), ipcp_last_error());
                T_MSG_HAS("descriptor");
            }
        }
        T_CHECK(rmem == SENTINEL);
        T_OK(ipcp_rmem_import(comm, m.desc, m.len, &rmem));
        T_EQ_U64(ipcp_rmem_size(rmem), 65536);
        T_EQ_INT(ipcp_rmem_owner(rmem), 0);
        T_OK(ipcp_rmem_release(rmem));
        api_ctl_send(comm, 0, TAG_GO, &x, 8);
    }
    T_OK(ipcp_barrier(comm));
    return 0;
}

/* Forced direct into malloc memory with IPCPIPE_PVM=off: the transfer
 * fails with IPCP_ERR_UNSUPPORTED on both sides; direct into memory from
 * ipcp_mem_alloc still works. */
static int mp_direct_nopvm(ipcp_comm_t *comm)
{
    const size_t len = ((size_t)1 << 20) + 3;
    uint64_t seed = 0;
    if (ipcp_comm_rank(comm) == 0) {
        seed = t_fresh_seed();
        api_ctl_send(comm, 1, TAG_GO, &seed, 8);
        unsigned char *s = t_malloc(len);
        t_fill(s, len, seed);
        T_STATUS(ipcp_send(comm, s, len, 1, TAG_DATA), IPCP_ERR_UNSUPPORTED);
        T_MSG_HAS("direct");
        T_OK(ipcp_send(comm, s, len, 1, TAG_DATA));
        free(s);
    } else {
        api_ctl_recv(comm, 0, TAG_GO, &seed, 8);
        api_buf_t mb, db;
        unsigned char *r = api_buf_alloc(comm, API_ALLOC_MALLOC, len, 3, &mb);
        memset(r, 0, len);
        ipcp_xfer_info_t info = {777, IPCP_PATH_AUTO};
        T_STATUS(ipcp_recv(comm, r, len, 0, TAG_DATA, &info),
                 IPCP_ERR_UNSUPPORTED);
        T_MSG_HAS("direct");
        T_EQ_U64(info.nbytes, 777);
        api_buf_check_guards(&mb, "malloc receive buffer");
        unsigned char *d = api_buf_alloc(comm, API_ALLOC_MEM, len, 3, &db);
        T_OK(ipcp_recv(comm, d, len, 0, TAG_DATA, &info));
        T_EQ_U64(info.nbytes, len);
        api_expect_path(info.path, IPCP_PATH_DIRECT, info.nbytes,
                        "receive into mem_alloc");
        t_verify(d, len, seed, "data received directly");
        api_buf_check_guards(&db, "mem_alloc receive buffer");
        api_buf_free(comm, &mb);
        api_buf_free(comm, &db);
    }
    T_OK(ipcp_barrier(comm));
    return 0;
}

/* A copy that fails after it was queued (process_vm_writev into a buffer
 * the receiver made inaccessible after posting its receive; PROT_NONE
 * rather than munmap, whose range a later mapping may take): the sender's call
 * fails, and so does the receiver's, saying the sender could not write -
 * never a success with the bytes that happened to arrive.  The pair still
 * works afterwards.  read: the receiver reads the sender's buffer itself
 * (process_vm_readv, IPCPIPE_DRIVE): its read into that buffer fails, its
 * call says so, and the sender's call fails with the same words. */
static int mp_async_fail(ipcp_comm_t *comm, int read)
{
    const char *why = read ? "process_vm_readv" : "could not write";
    /* Below IPCPIPE_SPLIT: a split transfer, whose two halves fail on
     * both sides, is api.split.errors'. */
    const size_t len = ((size_t)1 << 18) + 3;
    uint64_t seed = 0;
    if (ipcp_comm_rank(comm) == 0) {
        unsigned char *s = t_malloc(len);
        api_ctl_recv(comm, 1, TAG_GO, &seed, 8);
        t_fill(s, len, seed);
        ipcp_status_t st = ipcp_send(comm, s, len, 1, TAG_DATA);
        if (st == IPCP_OK)
            T_FAIL("the send into an unmapped buffer succeeded");
        if (read)
            T_MSG_HAS(why);
        T_OK(ipcp_send(comm, s, len, 1, TAG_DATA));
        free(s);
    } else {
        size_t maplen = (len + 4095) & ~(size_t)4095;
        void *m = mmap(NULL, maplen, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        T_CHECK(m != MAP_FAILED);
        ipcp_request_t *req;
        T_OK(ipcp_irecv(comm, m, len, 0, TAG_DATA, &req));
        /* before the sender even sends */
        T_CHECK(mprotect(m, maplen, PROT_NONE) == 0);
        seed = t_fresh_seed();
        api_ctl_send(comm, 0, TAG_GO, &seed, 8);
        ipcp_xfer_info_t info = {777, IPCP_PATH_AUTO};
        ipcp_status_t st = ipcp_wait(req, &info);
        if (st == IPCP_OK)
            T_FAIL("a receive the sender could not write completed");
        T_MSG_HAS(why);
        T_EQ_U64(info.nbytes, 777);
        unsigned char *r = t_malloc(len);
        T_OK(ipcp_recv(comm, r, len, 0, TAG_DATA, &info));
        T_EQ_U64(info.nbytes, len);
        t_verify(r, len, seed, "message after the failed one");
        free(r);
        T_CHECK(munmap(m, maplen) == 0);
    }
    T_OK(ipcp_barrier(comm));
    return 0;
}

/* A SPLIT receive (IPCPIPE_SPLIT: ranks bound to one CPU, 8 MiB of
 * malloc'd memory) whose own half cannot be read into (its first pages
 * PROT_NONE after posting) while the sender's half can be written: the
 * receive fails, saying why, but only once the sender's half is in place
 * (every byte after the receiver's half is the sender's: a receive that
 * ended early would leave the sender writing into a buffer its caller may
 * already reuse), and the sender's call fails with the receiver's words.
 * The pair still works afterwards. */
static int mp_split_fail(ipcp_comm_t *comm)
{
    const size_t len = (size_t)8 << 20, head = (len / 2) & ~(size_t)4095;
    uint64_t seed = 0;
    if (ipcp_comm_rank(comm) == 0) {
        unsigned char *s = t_malloc(len);
        api_ctl_recv(comm, 1, TAG_GO, &seed, 8);
        t_fill(s, len, seed);
        if (ipcp_send(comm, s, len, 1, TAG_DATA) == IPCP_OK)
            T_FAIL("a send whose receiver could not read its half succeeded");
        T_MSG_HAS("process_vm_readv");
        T_OK(ipcp_send(comm, s, len, 1, TAG_DATA));
        free(s);
    } else {
        void *m = mmap(NULL, len, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        T_CHECK(m != MAP_FAILED);
        memset(m, 0, len);
        ipcp_request_t *req;
        T_OK(ipcp_irecv(comm, m, len, 0, TAG_DATA, &req));
        T_CHECK(mprotect(m, head, PROT_NONE) == 0);
        seed = t_fresh_seed();
        api_ctl_send(comm, 0, TAG_GO, &seed, 8);
        if (ipcp_wait(req, NULL) == IPCP_OK)
            T_FAIL("a receive whose own half could not be read completed");
        T_MSG_HAS("process_vm_readv");
        size_t bad =
            ipcp_pattern_check((char *)m + head, len - head, seed, head);
        if (bad != len - head)
            T_FAIL("the receive ended before the sender's half was in place: "
                   "byte %zu of %zu after the receiver's half differs",
                   bad, len - head);
        unsigned char *r = t_malloc(len);
        T_OK(ipcp_recv(comm, r, len, 0, TAG_DATA, NULL));
        t_verify(r, len, seed, "message after the failed one");
        free(r);
        T_CHECK(munmap(m, len) == 0);
    }
    T_OK(ipcp_barrier(comm));
    return 0;
}

static int rank_main(int argc, char **argv)
{
    const char *name = api_opt(argc, argv, "--case", "");
    ipcp_path_t path = api_parse_path(api_opt(argc, argv, "--path", "auto"));
    api_alloc_t alloc = api_parse_alloc(api_opt(argc, argv, "--alloc", "mem"));
    int large = strcmp(api_opt(argc, argv, "--size", "small"), "large") == 0;
    int pvm_off = strcmp(name, "direct_nopvm") == 0;
    int async_read = strcmp(name, "async_fail_read") == 0;
    int split = strcmp(name, "split_fail") == 0;
    int async = async_read || split || strcmp(name, "async_fail") == 0;
    if (pvm_off || async)
        path = IPCP_PATH_DIRECT;
    if (async)
        alloc = API_ALLOC_MALLOC;       /* process_vm_writev / readv */
    if (async && !async_read && !split) /* the sender writes */
        setenv("IPCPIPE_DRIVE", "off", 1);
    if (path == IPCP_PATH_DIRECT && alloc == API_ALLOC_MALLOC && !pvm_off &&
        !api_pvm_permitted()) {
        fprintf(stderr, "skip: process_vm_writev not permitted here\n");
        return T_SKIP;
    }
    ipcp_comm_t *comm = api_init(path, "set");
    T_EQ_INT(ipcp_comm_size(comm), 2);
    int rc;
    if (strcmp(name, "null_args") == 0)
        rc = mp_null_args(comm);
    else if (strcmp(name, "bad_tag") == 0)
        rc = mp_bad_tag(comm);
    else if (strcmp(name, "bad_peer") == 0)
        rc = mp_bad_peer(comm);
    else if (strcmp(name, "misaligned_comm") == 0)
        rc = mp_misaligned_comm(comm);
    else if (strcmp(name, "misaligned_req") == 0)
        rc = mp_misaligned_req(comm);
    else if (strcmp(name, "misaligned_rmem") == 0)
        rc = mp_misaligned_rmem(comm);
    else if (strcmp(name, "truncated") == 0)
        rc = mp_truncated(comm, path, alloc, large);
    else if (strcmp(name, "bad_desc") == 0)
        rc = mp_bad_desc(comm);
    else if (strcmp(name, "direct_nopvm") == 0)
        rc = mp_direct_nopvm(comm);
    else if (split)
        rc = mp_split_fail(comm);
    else if (async)
        rc = mp_async_fail(comm, async_read);
    else
        T_FAIL("unknown --case \"%s\"", name);
    api_finalize(comm);
    return rc;
}

int main(int argc, char **argv)
{
    const char *name = api_opt(argc, argv, "--case", "");
    if (strcmp(name, "strings") == 0)
        return case_strings();
    if (strcmp(name, "init_args") == 0)
        return case_init_args();
    if (strcmp(name, "finalize_twice") == 0)
        return case_finalize_twice();
    if (strcmp(name, "mem_free_bad") == 0)
        return case_mem_free_bad();
    if (strcmp(name, "misaligned_mem") == 0)
        return case_misaligned_mem();
    if (strcmp(name, "bad_env") == 0)
        return case_bad_env(argc, argv);
    if (strcmp(name, "settings") == 0)
        return case_settings();
    if (strcmp(name, "foreign_job") == 0)
        return case_foreign_job();
    if (strcmp(name, "direct_nopvm") == 0)
        setenv("IPCPIPE_PVM", "off", 1);
    return t_mp_main(argc, argv, 2, 60, rank_main);
}
