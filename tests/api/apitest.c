#include "apitest.h"

#include <errno.h>
#include <stdint.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

const char *api_opt(int argc, char **argv, const char *key, const char *dflt)
{
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], key) == 0)
            return argv[i + 1];
    return dflt;
}

size_t api_opt_size(int argc, char **argv, const char *key, const char *dflt)
{
    return t_parse_size(api_opt(argc, argv, key, dflt));
}

long api_opt_long(int argc, char **argv, const char *key, long dflt)
{
    const char *s = api_opt(argc, argv, key, NULL);
    if (!s)
        return dflt;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end)
        T_FAIL("%s: bad number \"%s\"", key, s);
    return v;
}

ipcp_path_t api_parse_path(const char *s)
{
    if (strcmp(s, "direct") == 0)
        return IPCP_PATH_DIRECT;
    if (strcmp(s, "staged") == 0)
        return IPCP_PATH_STAGED;
    if (strcmp(s, "auto") == 0)
        return IPCP_PATH_AUTO;
    T_FAIL("unknown path \"%s\" (direct, staged, auto)", s);
}

api_alloc_t api_parse_alloc(const char *s)
{
    if (strcmp(s, "malloc") == 0)
        return API_ALLOC_MALLOC;
    if (strcmp(s, "mem") == 0)
        return API_ALLOC_MEM;
    if (strcmp(s, "null") == 0)
        return API_ALLOC_NULL;
    T_FAIL("unknown allocation \"%s\" (malloc, mem, null)", s);
}

double api_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static volatile uint64_t api_probe_word = 0x70726f6265ULL;

int api_pvm_permitted(void)
{
    pid_t parent = getpid();
    pid_t child = fork();
    if (child < 0)
        T_FAIL("fork: %s", strerror(errno));
    if (child == 0) {
        uint64_t v = 0;
        struct iovec local = {&v, sizeof v};
        struct iovec remote = {(void *)&api_probe_word, sizeof v};
        ssize_t n = process_vm_readv(parent, &local, 1, &remote, 1, 0);
        _exit(n == (ssize_t)sizeof v && v == api_probe_word ? 0 : 1);
    }
    int ws;
    while (waitpid(child, &ws, 0) < 0)
        if (errno != EINTR)
            T_FAIL("waitpid: %s", strerror(errno));
    return WIFEXITED(ws) && WEXITSTATUS(ws) == 0;
}

void *api_buf_alloc(ipcp_comm_t *comm, api_alloc_t kind, size_t len, size_t off,
                    api_buf_t *b)
{
    memset(b, 0, sizeof *b);
    b->kind = kind;
    b->off = off;
    b->len = len;
    if (kind == API_ALLOC_NULL) {
        T_EQ_U64(len, 0);
        return NULL;
    }
    b->total = off + len + API_GUARD;
    if (kind == API_ALLOC_MEM) {
        void *p = NULL;
        T_OK(ipcp_mem_alloc(comm, b->total, NULL, &p));
        T_CHECK(p != NULL);
        b->base = p;
    } else {
        b->base = t_malloc(b->total);
    }
    b->ptr = b->base + off;
    b->guard_seed = t_fresh_seed();
    ipcp_pattern_fill(b->base, off, b->guard_seed, 0);
    ipcp_pattern_fill(b->ptr + len, API_GUARD, b->guard_seed, off + len);
    return b->ptr;
}

void api_buf_check_guards(const api_buf_t *b, const char *what)
{
    char name[160];
    if (b->kind == API_ALLOC_NULL)
        return;
    snprintf(name, sizeof name, "%s (bytes before the buffer)", what);
    api_verify_at(b->base, b->off, b->guard_seed, 0, name);
    snprintf(name, sizeof name, "%s (bytes after the buffer)", what);
    api_verify_at(b->ptr + b->len, API_GUARD, b->guard_seed, b->off + b->len,
                  name);
}

void api_buf_free(ipcp_comm_t *comm, api_buf_t *b)
{
    if (b->kind == API_ALLOC_MEM && b->base)
        T_OK(ipcp_mem_free(comm, b->base));
    else if (b->kind == API_ALLOC_MALLOC)
        free(b->base);
    b->base = NULL;
    b->ptr = NULL;
}

static ipcp_comm_t *api_ctl_comm;
static void *api_ctl_buf;

ipcp_comm_t *api_init(ipcp_path_t path, const char *how)
{
    ipcp_comm_t *comm = NULL;
    if (!how)
        how = "set";
    if (strcmp(how, "param") == 0) {
        ipcp_comm_params_t p;
        ipcp_comm_params_init(&p);
        T_EQ_U64(p.struct_size, sizeof p);
        p.path = path;
        T_OK(ipcp_init(&p, &comm));
    } else {
        T_OK(ipcp_init(NULL, &comm));
    }
    T_CHECK(comm != NULL);
    t_rank = ipcp_comm_rank(comm);
    if (strcmp(how, "set") == 0)
        T_OK(ipcp_comm_set_path(comm, path));
    else if (strcmp(how, "param") != 0 && strcmp(how, "env") != 0)
        T_FAIL("unknown --how \"%s\" (set, param, env)", how);
    T_OK(ipcp_mem_alloc(comm, API_CTL_MAX, NULL, &api_ctl_buf));
    api_ctl_comm = comm;
    T_OK(ipcp_barrier(comm));
    return comm;
}

void api_finalize(ipcp_comm_t *comm)
{
    if (api_ctl_comm == comm && api_ctl_buf) {
        T_OK(ipcp_mem_free(comm, api_ctl_buf));
        api_ctl_buf = NULL;
        api_ctl_comm = NULL;
    }
    T_OK(ipcp_finalize(comm));
}

ipcp_request_t *api_ctl_isend(ipcp_comm_t *comm, int peer, int tag,
                              const void *p, size_t len)
{
    ipcp_request_t *req = NULL;
    T_CHECK(len <= API_CTL_MAX);
    T_OK(ipcp_isend(comm, p, len, peer, API_TAG_CTL + tag, &req));
    T_CHECK(req != NULL);
    return req;
}

void api_ctl_send(ipcp_comm_t *comm, int peer, int tag, const void *p,
                  size_t len)
{
    T_CHECK(len <= API_CTL_MAX);
    T_OK(ipcp_send(comm, p, len, peer, API_TAG_CTL + tag));
}

void api_ctl_recv(ipcp_comm_t *comm, int peer, int tag, void *p, size_t len)
{
    ipcp_xfer_info_t info = {0, IPCP_PATH_AUTO};
    T_CHECK(comm == api_ctl_comm && len <= API_CTL_MAX);
    T_OK(ipcp_recv(comm, api_ctl_buf, len, peer, API_TAG_CTL + tag, &info));
    T_EQ_U64(info.nbytes, len);
    memcpy(p, api_ctl_buf, len);
}

void api_wait_ok(ipcp_request_t *req, size_t nbytes, const char *what)
{
    ipcp_xfer_info_t info = {(size_t)-1, IPCP_PATH_AUTO};
    ipcp_status_t st = ipcp_wait(req, &info);
    if (st != IPCP_OK)
        T_FAIL("%s: ipcp_wait returned %s (last error: %s)", what,
               ipcp_strerror(st), ipcp_last_error());
    if (info.nbytes != nbytes)
        T_FAIL("%s: info.nbytes %zu, expected %zu", what, info.nbytes, nbytes);
}

uint64_t api_mix(uint64_t a, uint64_t b)
{
    return ipcp_pattern_word(a ^ 0x5bd1e9955bd1e995ULL, b);
}

void api_verify_at(const void *buf, size_t len, uint64_t seed, uint64_t off,
                   const char *what)
{
    size_t i = ipcp_pattern_check(buf, len, seed, off);
    if (i != len)
        T_FAIL("%s: byte %zu of %zu differs: got 0x%02x, expected 0x%02x", what,
               i, len, ((const unsigned char *)buf)[i],
               ipcp_pattern_byte(seed, off + i));
}

void api_expect_path(ipcp_path_t got, ipcp_path_t want, size_t nbytes,
                     const char *what)
{
    /* The stripe variants (IPCPIPE_STRIPE=<share>, with queues to spare):
     * a direct transfer with bytes for both parts is striped. */
    const char *s = getenv("IPCPIPE_STRIPE");
    double share = s ? atof(s) : 0;
    size_t staged = (size_t)((double)nbytes * share);
    if (want == IPCP_PATH_DIRECT && share > 0 && staged > 0 && staged < nbytes)
        want = IPCP_PATH_STRIPED;
    if (want == IPCP_PATH_AUTO) {
        if (got != IPCP_PATH_DIRECT && got != IPCP_PATH_STAGED &&
            got != IPCP_PATH_EAGER && got != IPCP_PATH_STRIPED)
            T_FAIL("%s: info.path %d (%s) is not a concrete path", what,
                   (int)got, ipcp_path_name(got));
        return;
    }
    if (got != want)
        T_FAIL("%s: info.path %s, expected the forced %s", what,
               ipcp_path_name(got), ipcp_path_name(want));
}

const char *api_dec(long long v)
{
    static char bufs[8][32];
    static int next;
    char *b = bufs[next++ & 7];
    snprintf(b, 32, "%lld", v);
    return b;
}
