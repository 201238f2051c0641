/* Test helpers (see testutil.h). */
#include "testutil.h"
#include "sizes.h"

#include <ctype.h>
#include <signal.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdatomic.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

int t_rank = -1;

/* splitmix64's finalizer: spreads every input bit over the whole word, so
 * seeds taken close together in time still differ everywhere. */
static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

uint64_t t_fresh_seed(void)
{
    static atomic_ullong counter;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t t = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    uint64_t n = atomic_fetch_add(&counter, 1) + 1;
    return mix64(t ^ ((uint64_t)getpid() << 32) ^ (n * 0x9e3779b97f4a7c15ULL));
}

void t_fill(void *buf, size_t len, uint64_t seed)
{
    ipcp_pattern_fill(buf, len, seed, 0);
}

void t_verify(const void *buf, size_t len, uint64_t seed, const char *what)
{
    size_t bad = ipcp_pattern_check(buf, len, seed, 0);
    if (bad == len)
        return;
    const unsigned char *p = (const unsigned char *)buf;
    /* Count the damage too: one flipped byte and a missing chunk are
     * different bugs. */
    size_t nbad = 0;
    for (size_t i = bad; i < len; i++)
        nbad += p[i] != ipcp_pattern_byte(seed, i);
    T_FAIL("%s: %zu of %zu bytes differ; first at offset %zu: expected 0x%02x, "
           "got 0x%02x (seed 0x%016" PRIx64 ")",
           what ? what : "buffer", nbad, len, bad, ipcp_pattern_byte(seed, bad),
           p[bad], seed);
}

int t_on_own_stack(const void *p)
{
    pthread_attr_t a;
    void *addr;
    size_t size;
    T_CHECK(pthread_getattr_np(pthread_self(), &a) == 0);
    T_CHECK(pthread_attr_getstack(&a, &addr, &size) == 0);
    pthread_attr_destroy(&a);
    return (uintptr_t)p >= (uintptr_t)addr &&
           (uintptr_t)p < (uintptr_t)addr + size;
}

void *t_malloc(size_t len)
{
    long page = sysconf(_SC_PAGESIZE);
    void *p = NULL;
    /* posix_memalign(0) may return NULL; one byte keeps the pointer unique
     * and freeable. */
    int rc = posix_memalign(&p, page > 0 ? (size_t)page : 4096, len ? len : 1);
    if (rc != 0)
        T_FAIL("t_malloc(%zu): %s", len, strerror(rc));
    return p;
}

size_t t_parse_size(const char *s)
{
    size_t v;
    if (!s || ipcp_tool_parse_size(s, NULL, &v, NULL) < 0)
        T_FAIL("bad size \"%s\" (expected e.g. 123, 4K, 1M+3, 4G+1)",
               s ? s : "(null)");
    return v;
}

int t_mp_main(int argc, char **argv, int nranks, double timeout_s,
              int (*rank_main)(int argc, char **argv))
{
    if (ipcp_launch_is_rank()) {
        static const char *const vars[] = {"IPCPIPE_RANK",
                                           "OMPI_COMM_WORLD_RANK", "PMI_RANK",
                                           "SLURM_PROCID", "RANK"};
        for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
            const char *r = getenv(vars[i]);
            if (r && *r) {
                t_rank = atoi(r);
                break;
            }
        }
        return rank_main(argc, argv);
    }
    ipcp_launch_opts_t opts = {
        .nranks = nranks,
        .timeout_s = timeout_s,
        .argv_self = argv,
    };
    ipcp_launch_result_t res;
    if (ipcp_launch(&opts, &res) != 0) {
        fprintf(stderr, "FAIL: cannot start %d ranks of %s: %s\n", nranks,
                argv[0], strerror(errno));
        return 1;
    }
    return ipcp_launch_exit_code(&res);
}

int t_pick_case(int argc, char **argv, const void *cases, size_t n,
                size_t stride, int *rc)
{
    const char *arg = argc == 2 ? argv[1] : NULL;
    int list = arg && strcmp(arg, "--list") == 0;
    for (size_t i = 0; arg && i < n; i++) {
        const char *name =
            *(const char *const *)(const void *)((const char *)cases +
                                                 i * stride);
        if (list)
            printf("%s\n", name);
        else if (strcmp(arg, name) == 0)
            return (int)i;
    }
    *rc = list ? 0 : 2;
    if (!arg)
        fprintf(stderr, "usage: %s CASE|--list\n", argv[0]);
    else if (!list)
        fprintf(stderr, "unknown case '%s'\n", arg);
    return -1;
}

int t_launch2(char **argv, int victim, void (*child_env)(int rank, void *arg),
              void *arg)
{
    ipcp_launch_opts_t o;
    ipcp_launch_result_t res;
    char *env[] = {"IPCPIPE_TIMEOUT=10", NULL};
    memset(&o, 0, sizeof o);
    o.nranks = 2;
    o.timeout_s = 240;
    o.argv_self = argv;
    o.extra_env = env;
    o.keep_going = victim >= 0;
    o.child_env = child_env;
    o.child_env_arg = arg;
    if (ipcp_launch(&o, &res) != 0)
        T_FAIL("launch failed");
    if (victim < 0)
        return ipcp_launch_exit_code(&res);
    int vs = res.wait_status[victim], ss = res.wait_status[1 - victim];
    if (!WIFSIGNALED(vs) || WTERMSIG(vs) != SIGKILL)
        T_FAIL("rank %d should have died by SIGKILL (wait status 0x%x)", victim,
               vs);
    if (!WIFEXITED(ss) || WEXITSTATUS(ss) != 0)
        T_FAIL("surviving rank %d failed (wait status 0x%x)", 1 - victim, ss);
    return 0;
}

void t_small_on_rank1(int rank, void *arg)
{
    if (rank == 1)
        setenv("IPCPIPE_SMALL", (const char *)arg, 1);
}

void t_lane_wait_all(ipcp_request_t **reqs, int n, size_t small, int recv)
{
    for (int i = 0; i < n; i++) {
        ipcp_xfer_info_t info;
        T_OK(ipcp_wait(reqs[i], &info));
        if (recv && info.nbytes != t_lane_size(small, i))
            T_FAIL("receive %d reported %zu bytes, the message had %zu", i,
                   info.nbytes, t_lane_size(small, i));
        if (info.path != IPCP_PATH_LANE)
            T_FAIL("%s %d reported path %s, expected lane",
                   recv ? "receive" : "send", i, ipcp_path_name(info.path));
    }
}

static char t_log_path[256];

void t_log_to_file(void)
{
    const char *dir = getenv("TMPDIR");
    snprintf(t_log_path, sizeof(t_log_path), "%s/ipcpipe-test-%d.log",
             dir && *dir ? dir : "/tmp", (int)getpid());
    unlink(t_log_path);
    setenv("IPCPIPE_LOG_FILE", t_log_path, 1);
    setenv("IPCPIPE_LOG_LEVEL", "info", 1);
    unsetenv("IPCPIPE_LOG_SUBSYS"); /* every subsystem */
}

int t_log_lines(const char *needle, int remove)
{
    char line[4096];
    int n = 0;
    FILE *f = fopen(t_log_path, "r");
    if (!f)
        T_FAIL("cannot read the log %s: %s", t_log_path, strerror(errno));
    while (fgets(line, sizeof(line), f)) {
        if (!strstr(line, needle))
            continue;
        printf("[rank %d] log: %s", t_rank, line);
        n++;
    }
    fclose(f);
    if (remove)
        unlink(t_log_path);
    return n;
}

uint64_t t_shared_seed(ipcp_comm_t *comm, int tag)
{
    uint64_t seed = 0;
    if (ipcp_comm_rank(comm) == 0) {
        seed = t_fresh_seed();
        T_OK(ipcp_send(comm, &seed, sizeof seed, 1, tag));
    } else {
        T_OK(ipcp_recv(comm, &seed, sizeof seed, 0, tag, NULL));
    }
    return seed;
}
