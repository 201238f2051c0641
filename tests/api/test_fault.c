/* Fault injection: one rank (the victim) sends itself SIGKILL or SIGSTOP at
 * a protocol stage of one path (IPCPIPE_FAULT), and the other (the
 * survivor) must see the right status within IPCPIPE_TIMEOUT (2 s here),
 * with nothing written outside its buffers, no descriptor, mapping,
 * /dev/shm entry or rendezvous file left once it finalized, and a new job
 * of the same name working afterwards.
 *
 *   test_api_fault --path P --victim ROLE --stage S [--count N]
 *                  --action kill|stop [--free-late 1]
 *
 * P: eager, direct (the sender copies into the receiver's ipcp_mem_alloc
 * buffer), driven (the receiver copies out of the sender's, IPCPIPE_DRIVE),
 * staged, put-mapped / get-mapped (one-sided into an ipcp_mem_alloc region,
 * no owner), put-pvm / get-pvm (one-sided with process_vm_writev/readv),
 * put-owner / get-owner (one-sided through the owner's staged ring),
 * barrier, finalize; live (no fault, below).  ROLE: sender|receiver (rank 0
 * sends), owner|origin (rank 0 owns the region), rank0|rank1 (barrier and
 * finalize).
 *
 * What the survivor accepts: IPCP_ERR_PEER_LOST naming the victim (after a
 * SIGKILL through the hang-up, after a SIGSTOP through the keepalive: "did
 * not answer"), or IPCP_OK where the operation can end before the fault
 * (an eager send, a direct send whose copies went into the receiver's
 * shared memory, a receive that copies out of a sender's mapped buffer, a
 * barrier whose last message came): then every received byte is checked
 * and a receive from the victim posted next must fail with the loss within
 * the timeout.  The survivor prints one "fault-result" line per case.
 * What it must not leave behind is counted in test_fault_leaks.c. */
#include "apitest.h"
#include "test_fault_int.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#define FAULT_TIMEOUT_S 2.0
enum { TAG_DATA = 7, TAG_DONE = 8, TAG_NEVER = 9, TAG_REJOIN = 10 };

static const struct {
    const char *name;
    size_t size;
    const char *role0, *role1; /* the roles of rank 0 and rank 1 */
} paths[P_N] = {
    [P_EAGER] = {"eager", 4000, "sender", "receiver"},
    [P_DIRECT] = {"direct", 4 << 20, "sender", "receiver"},
    [P_DRIVEN] = {"driven", 4 << 20, "sender", "receiver"},
    [P_STAGED] = {"staged", 16 << 20, "sender", "receiver"},
    [P_PUT_MAPPED] = {"put-mapped", 4 << 20, "owner", "origin"},
    [P_GET_MAPPED] = {"get-mapped", 4 << 20, "owner", "origin"},
    [P_PUT_PVM] = {"put-pvm", 4 << 20, "owner", "origin"},
    [P_GET_PVM] = {"get-pvm", 4 << 20, "owner", "origin"},
    [P_PUT_OWNER] = {"put-owner", 16 << 20, "owner", "origin"},
    [P_GET_OWNER] = {"get-owner", 16 << 20, "owner", "origin"},
    [P_BARRIER] = {"barrier", 0, "rank0", "rank1"},
    [P_FINALIZE] = {"finalize", 0, "rank0", "rank1"},
};

static cfg_t parse(int argc, char **argv)
{
    cfg_t c;
    memset(&c, 0, sizeof c);
    if (strcmp(api_opt(argc, argv, "--path", ""), "live") == 0)
        return c;
    const char *p = api_opt(argc, argv, "--path", "eager");
    for (c.path = 0; c.path < P_N; c.path++)
        if (strcmp(p, paths[c.path].name) == 0)
            break;
    if (c.path == P_N)
        T_FAIL("--path %s: unknown", p);
    const char *v = api_opt(argc, argv, "--victim", "");
    if (strcmp(v, paths[c.path].role0) == 0)
        c.victim = 0;
    else if (strcmp(v, paths[c.path].role1) == 0)
        c.victim = 1;
    else
        T_FAIL("--victim %s: %s or %s on path %s", v, paths[c.path].role0,
               paths[c.path].role1, p);
    c.stage = api_opt(argc, argv, "--stage", "rts-posted");
    c.count = api_opt_long(argc, argv, "--count", 1);
    const char *a = api_opt(argc, argv, "--action", "kill");
    c.stop = strcmp(a, "stop") == 0;
    if (!c.stop && strcmp(a, "kill") != 0)
        T_FAIL("--action %s: kill or stop", a);
    c.free_early = api_opt(argc, argv, "--free-late", NULL) == NULL;
    const char *d = getenv("FAULT_DIR"), *s = getenv("FAULT_SEED");
    c.dir = d ? d : "";
    c.seed = s ? strtoull(s, NULL, 16) : 0;
    return c;
}

static int onesided(path_id_t p)
{
    return p >= P_PUT_MAPPED && p <= P_GET_OWNER;
}

static int is_put(path_id_t p)
{
    return p == P_PUT_MAPPED || p == P_PUT_PVM || p == P_PUT_OWNER;
}

/* ---- The survivor's checks ------------------------------------------------
 */

static pid_t victim_pid;

/* A stopped victim never exits: the survivor ends it, also when it fails. */
static void kill_victim(void)
{
    if (victim_pid > 0)
        kill(victim_pid, SIGKILL);
}

typedef struct outcome {
    ipcp_status_t st;
    double el;
    char msg[512];
} outcome_t;

static void note(outcome_t *o, ipcp_status_t st, double t0)
{
    o->st = st;
    o->el = api_now() - t0;
    snprintf(o->msg, sizeof o->msg, "%s",
             st == IPCP_OK ? "" : ipcp_last_error());
}

/* A loss must name the victim and, when first reported (not known), say
 * how it was found: a stopped peer by the keepalive, a killed one by its
 * hang-up (or its goodbye). */
static void expect_loss(const cfg_t *c, const outcome_t *o, const char *what,
                        int known)
{
    char rank[32];
    snprintf(rank, sizeof rank, "rank %d", c->victim);
    if (o->st != IPCP_ERR_PEER_LOST)
        T_FAIL("%s returned %s after %.3f s, expected IPCP_ERR_PEER_LOST (%s)",
               what, ipcp_strerror(o->st), o->el, o->msg);
    if (!strstr(o->msg, rank))
        T_FAIL("%s: message \"%s\" does not name %s", what, o->msg, rank);
    if (known) /* the loss was reported already: later calls say so */
        return;
    int keepalive = strstr(o->msg, "did not answer") != NULL;
    int bye = strstr(o->msg, "finalized") != NULL;
    if (c->stop && !keepalive && !bye)
        T_FAIL("%s: a stopped peer's loss came without the keepalive: \"%s\"",
               what, o->msg);
    if (!c->stop && keepalive)
        T_FAIL("%s: a killed peer was found by the keepalive, not its "
               "hang-up: \"%s\"",
               what, o->msg);
}

static void expect_time(const outcome_t *o, const char *what)
{
    if (o->el >= FAULT_TIMEOUT_S)
        T_FAIL("%s ended after %.3f s, IPCPIPE_TIMEOUT is %.1f s", what, o->el,
               FAULT_TIMEOUT_S);
}

/* Where the survivor's operation may end well before the fault: see the
 * top of the file. */
static int ok_allowed(const cfg_t *c)
{
    switch (c->path) {
    case P_EAGER:
    case P_DRIVEN:
        return c->victim == 0 || c->path == P_EAGER;
    case P_DIRECT:
        return c->victim == 1 && strcmp(c->stage, "cts-posted") == 0;
    case P_BARRIER:
        return c->victim == 1;
    case P_FINALIZE:
        return strcmp(c->stage, "bye-received") == 0;
    default:
        return 0;
    }
}

/* ---- The two sides' operations --------------------------------------------
 */

/* A side's buffer, made and filled before the barrier that starts the
 * operation: both sides then post at once, and the survivor's clock starts
 * within milliseconds of the victim's last message. */
static void prepare(ipcp_comm_t *comm, const cfg_t *c, int me, api_buf_t *b)
{
    size_t n = paths[c->path].size;
    if (c->path == P_BARRIER || c->path == P_FINALIZE ||
        (onesided(c->path) && me == 0))
        return;
    if (onesided(c->path)) { /* the origin's local buffer */
        void *p = api_buf_alloc(comm, API_ALLOC_MALLOC, n, 3, b);
        if (is_put(c->path))
            t_fill(p, n, c->seed + 2);
        else
            memset(p, 0xa5, n);
    } else if (me == 0) {
        api_alloc_t k = c->path == P_DRIVEN ? API_ALLOC_MEM : API_ALLOC_MALLOC;
        t_fill(api_buf_alloc(comm, k, n, 3, b), n, c->seed);
    } else {
        api_alloc_t k = c->path == P_DIRECT || c->path == P_DRIVEN
                            ? API_ALLOC_MEM
                            : API_ALLOC_MALLOC;
        memset(api_buf_alloc(comm, k, n, 5, b), 0xa5, n);
    }
}

/* One side of a two-sided transfer; the survivor's outcome in o. */
static void run_twosided(ipcp_comm_t *comm, const cfg_t *c, int me,
                         outcome_t *o, api_buf_t *b)
{
    size_t n = paths[c->path].size;
    ipcp_request_t *req = NULL;
    double t0 = api_now();
    if (me == 0)
        T_OK(ipcp_isend(comm, b->ptr, n, 1, TAG_DATA, &req));
    else
        T_OK(ipcp_irecv(comm, b->ptr, n, 0, TAG_DATA, &req));
    note(o, ipcp_wait(req, NULL), t0);
    if (o->st == IPCP_OK && me == 1)
        t_verify(b->ptr, n, c->seed, "the received data");
}

static ipcp_mem_t *owner_region(ipcp_comm_t *comm, const cfg_t *c, api_buf_t *b)
{
    size_t n = paths[c->path].size;
    int mapped = c->path == P_PUT_MAPPED || c->path == P_GET_MAPPED;
    void *p =
        api_buf_alloc(comm, mapped ? API_ALLOC_MEM : API_ALLOC_MALLOC, n, 5, b);
    ipcp_mem_t *mem = NULL;
    unsigned char desc[IPCP_DESC_MAX];
    size_t len = 0;
    t_fill(p, n, c->seed + 1);
    T_OK(ipcp_mem_register(comm, p, n, &mem));
    T_OK(ipcp_mem_pack(mem, desc, sizeof desc, &len));
    file_write(c, "desc", desc, len);
    return mem;
}

static void run_owner(ipcp_comm_t *comm, outcome_t *o)
{
    uint64_t done = 0;
    double t0 = api_now();
    note(o, ipcp_recv(comm, &done, sizeof done, 1, TAG_DONE, NULL), t0);
}

static void run_origin(ipcp_comm_t *comm, const cfg_t *c, outcome_t *o,
                       api_buf_t *b)
{
    size_t n = paths[c->path].size;
    unsigned char desc[IPCP_DESC_MAX];
    size_t len = file_read(c, "desc", desc, sizeof desc);
    ipcp_rmem_t *rm = NULL;
    double t0 = api_now();
    ipcp_status_t st = ipcp_rmem_import(comm, desc, len, &rm);
    if (st == IPCP_OK)
        st = is_put(c->path) ? ipcp_put(comm, b->ptr, n, rm, 0)
                             : ipcp_get(comm, b->ptr, n, rm, 0);
    note(o, st, t0);
    if (st == IPCP_OK && !is_put(c->path))
        t_verify(b->ptr, n, c->seed + 1, "the data got");
    if (st == IPCP_OK) {
        uint64_t done = 1;
        st = ipcp_send(comm, &done, sizeof done, 0, TAG_DONE);
        note(o, st, t0);
    }
    if (rm)
        T_OK(ipcp_rmem_release(rm));
}

static void run_op(ipcp_comm_t *comm, const cfg_t *c, int me, outcome_t *o,
                   api_buf_t *b)
{
    uint64_t x = 0;
    double t0 = api_now();
    switch (c->path) {
    case P_BARRIER:
        note(o, ipcp_barrier(comm), t0);
        return;
    case P_FINALIZE:
        /* The victim finalizes first (bye-sent) or waits for the
         * survivor's goodbye (bye-received). */
        if ((me == c->victim) == (strcmp(c->stage, "bye-sent") == 0))
            note(o, ipcp_finalize(comm), t0);
        else
            note(o, ipcp_recv(comm, &x, sizeof x, 1 - me, TAG_NEVER, NULL), t0);
        return;
    default:
        break;
    }
    if (!onesided(c->path))
        run_twosided(comm, c, me, o, b);
    else if (me == 0)
        run_owner(comm, o);
    else
        run_origin(comm, c, o, b);
}

/* ---- A new job of the same name -------------------------------------------
 */

/* Both sides of it: rank 0 sends 1 MiB + 3 bytes, rank 1 checks them. */
static void rejoin_transfer(ipcp_comm_t *comm, uint64_t seed)
{
    size_t n = (1 << 20) + 3;
    api_buf_t b;
    if (ipcp_comm_rank(comm) == 0) {
        void *p = api_buf_alloc(comm, API_ALLOC_MALLOC, n, 1, &b);
        t_fill(p, n, seed);
        T_OK(ipcp_send(comm, p, n, 1, TAG_REJOIN));
        api_buf_check_guards(&b, "the new job's send buffer");
    } else {
        void *p = api_buf_alloc(comm, API_ALLOC_MALLOC, n, 1, &b);
        memset(p, 0, n);
        ipcp_xfer_info_t info;
        T_OK(ipcp_recv(comm, p, n, 0, TAG_REJOIN, &info));
        T_EQ_U64(info.nbytes, n);
        t_verify(p, n, seed, "the new job's transfer");
        api_buf_check_guards(&b, "the new job's receive buffer");
    }
    api_buf_free(comm, &b);
}

static int rejoin_main(void)
{
    const char *s = getenv("FAULT_SEED");
    ipcp_comm_t *comm = NULL;
    T_OK(ipcp_init(NULL, &comm));
    rejoin_transfer(comm, (s ? strtoull(s, NULL, 16) : 0) + 7);
    T_OK(ipcp_finalize(comm));
    return 0;
}

/* The survivor starts a fresh process in the victim's rank (its own
 * environment: same job, no IPCPIPE_FAULT) and moves data with it. */
static void rejoin(const cfg_t *c, int me, const leaks_t *l, const char *job)
{
    char rank[16];
    pid_t pid = fork();
    if (pid < 0)
        T_FAIL("fork: %s", strerror(errno));
    if (pid == 0) {
        snprintf(rank, sizeof rank, "%d", 1 - me);
        setenv("IPCPIPE_RANK", rank, 1);
        char *av[] = {"test_api_fault", "--rejoin", NULL};
        execv("/proc/self/exe", av);
        _exit(127);
    }
    ipcp_comm_t *comm = NULL;
    T_OK(ipcp_init(NULL, &comm));
    T_EQ_STR(ipcp_comm_job(comm), job);
    rejoin_transfer(comm, c->seed + 7);
    T_OK(ipcp_finalize(comm));
    int ws = 0;
    for (int i = 0; i < 300 && waitpid(pid, &ws, WNOHANG) == 0; i++)
        usleep(100000);
    if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0) {
        kill(pid, SIGKILL);
        T_FAIL("the new job's rank %d (pid %d) ended with wait status 0x%x",
               1 - me, (int)pid, ws);
    }
    leaks_check(c, l, job, "after the new job finalized");
}

/* ---- Ranks
 * -------------------------------------------------------------------- */

static void setup_path(ipcp_comm_t *comm, const cfg_t *c, int me)
{
    if (me == 1 && c->path == P_DIRECT)
        T_OK(ipcp_comm_set_path(comm, IPCP_PATH_DIRECT));
    if (me == 1 && c->path == P_STAGED)
        T_OK(ipcp_comm_set_path(comm, IPCP_PATH_STAGED));
    /* One-sided operations follow the origin's path. */
    if (me == 1 && (c->path == P_PUT_OWNER || c->path == P_GET_OWNER))
        T_OK(ipcp_comm_set_path(comm, IPCP_PATH_STAGED));
}

static void survivor_report(const cfg_t *c, const char *what,
                            const outcome_t *o)
{
    printf("fault-result path=%s victim=%s stage=%s action=%s %s=%s "
           "elapsed=%.3f msg=\"%s\"\n",
           paths[c->path].name,
           c->victim ? paths[c->path].role1 : paths[c->path].role0, c->stage,
           c->stop ? "stop" : "kill", what, ipcp_strerror(o->st), o->el,
           o->msg);
    fflush(stdout);
}

static void survivor_checks(ipcp_comm_t *comm, const cfg_t *c, outcome_t *o)
{
    survivor_report(c, "status", o);
    expect_time(o, "the survivor's operation");
    if (o->st != IPCP_OK)
        expect_loss(c, o, "the survivor's operation", 0);
    else if (!ok_allowed(c))
        T_FAIL("the survivor's operation ended well, which it cannot here");
    if (c->path == P_FINALIZE && o->st != IPCP_OK &&
        strcmp(c->stage, "bye-received") == 0)
        T_FAIL("finalize returned %s: %s", ipcp_strerror(o->st), o->msg);
    if (c->path == P_FINALIZE && strcmp(c->stage, "bye-received") == 0)
        return; /* finalized */
    /* The loss shows to a receive posted next, within the timeout. */
    outcome_t f;
    uint64_t x = 0;
    double t0 = api_now();
    note(&f, ipcp_recv(comm, &x, sizeof x, c->victim, TAG_NEVER, NULL), t0);
    survivor_report(c, "next-receive", &f);
    expect_loss(c, &f, "a receive from the victim posted afterwards",
                o->st != IPCP_OK);
    expect_time(&f, "a receive from the victim posted afterwards");
}

static int survivor(ipcp_comm_t *comm, const cfg_t *c, int me, const leaks_t *l)
{
    char job[128];
    api_buf_t b = {0}, region = {0};
    ipcp_mem_t *mem = NULL;
    outcome_t o;
    snprintf(job, sizeof job, "%s", ipcp_comm_job(comm));
    if (onesided(c->path) && me == 0)
        mem = owner_region(comm, c, &region);
    prepare(comm, c, me, &b);
    T_OK(ipcp_barrier(comm));
    int32_t pid = 0;
    char name[32];
    snprintf(name, sizeof name, "pid%d", c->victim);
    file_read(c, name, &pid, sizeof pid);
    T_CHECK(pid > 0);
    victim_pid = pid;
    if (c->stop)
        atexit(kill_victim);
    run_op(comm, c, me, &o, &b);
    survivor_checks(comm, c, &o);
    if (b.base) {
        api_buf_check_guards(&b, "the survivor's buffer");
        api_buf_free(comm, &b);
    }
    /* An owner's side of a put or get through its ring may still be
     * copying into or out of the region after the origin was lost:
     * ipcp_mem_deregister waits for it, so the region is freed at once
     * (--free-late 1 keeps it until after finalize instead). */
    int free_early = c->free_early || region.kind == API_ALLOC_MEM;
    if (mem) {
        api_buf_check_guards(&region, "the owner's region");
        T_OK(ipcp_mem_deregister(mem));
        if (free_early)
            api_buf_free(comm, &region);
    }
    if (!(c->path == P_FINALIZE && strcmp(c->stage, "bye-received") == 0)) {
        double t0 = api_now();
        note(&o, ipcp_finalize(comm), t0);
        survivor_report(c, "finalize", &o);
        if (o.st != IPCP_OK)
            T_FAIL("finalize returned %s: %s", ipcp_strerror(o.st), o.msg);
        expect_time(&o, "finalize");
    }
    if (mem && !free_early) {
        api_buf_check_guards(&region, "the owner's region after finalize");
        api_buf_free(NULL, &region);
    }
    leaks_check(c, l, job, "after finalize");
    rejoin(c, me, l, job);
    kill_victim();
    return 0;
}

static int victim(ipcp_comm_t *comm, const cfg_t *c, int me)
{
    api_buf_t b = {0}, region = {0};
    outcome_t o;
    if (onesided(c->path) && me == 0)
        (void)owner_region(comm, c, &region);
    prepare(comm, c, me, &b);
    T_OK(ipcp_barrier(comm));
    run_op(comm, c, me, &o, &b);
    /* The fault fires in the library's threads: wait for it. */
    for (int i = 0; i < 200; i++)
        usleep(100000);
    fprintf(stderr,
            "victim rank %d: stage %s never fired (its operation "
            "returned %s)\n",
            me, c->stage, ipcp_strerror(o.st));
    return 3;
}

/* No fault: the keepalive must not cut a live peer.  Rank 1 posts its
 * receive twice the timeout after rank 0's send, then a staged transfer of
 * --size bytes runs under the same 2 s timeout. */
static int live_main(int argc, char **argv)
{
    size_t n = api_opt_size(argc, argv, "--size", "256M"), small = 4 << 20;
    ipcp_comm_t *comm = NULL;
    T_OK(ipcp_init(NULL, &comm));
    int me = ipcp_comm_rank(comm);
    if (me == 1)
        T_OK(ipcp_comm_set_path(comm, IPCP_PATH_STAGED));
    T_OK(ipcp_barrier(comm));
    unsigned char *p = t_malloc(n);
    double t0 = api_now();
    if (me == 0) {
        t_fill(p, small, 11);
        T_OK(ipcp_send(comm, p, small, 1, TAG_DATA));
        t_fill(p, n, 12);
        T_OK(ipcp_send(comm, p, n, 1, TAG_DATA));
    } else {
        usleep((useconds_t)(2 * FAULT_TIMEOUT_S * 1e6));
        T_OK(ipcp_recv(comm, p, small, 0, TAG_DATA, NULL));
        t_verify(p, small, 11, "the late receive");
        T_OK(ipcp_recv(comm, p, n, 0, TAG_DATA, NULL));
        t_verify(p, n, 12, "the long staged transfer");
    }
    printf("rank %d: live peer, %zu + %zu bytes in %.3f s (timeout %.1f s)\n",
           me, small, n, api_now() - t0, FAULT_TIMEOUT_S);
    free(p);
    T_OK(ipcp_finalize(comm));
    return 0;
}

static int rank_main(int argc, char **argv)
{
    if (strcmp(api_opt(argc, argv, "--path", ""), "live") == 0)
        return live_main(argc, argv);
    cfg_t c = parse(argc, argv);
    const char *r = getenv("IPCPIPE_RANK");
    int me = r ? atoi(r) : -1;
    static leaks_t l;
    T_CHECK(me == 0 || me == 1);
    int32_t pid = (int32_t)getpid();
    char name[32];
    snprintf(name, sizeof name, "pid%d", me);
    file_write(&c, name, &pid, sizeof pid);
    if (me != c.victim)
        leaks_before(&l);
    ipcp_comm_t *comm = NULL;
    T_OK(ipcp_init(NULL, &comm));
    T_EQ_INT(ipcp_comm_size(comm), 2);
    setup_path(comm, &c, me);
    return me == c.victim ? victim(comm, &c, me) : survivor(comm, &c, me, &l);
}

/* ---- The launcher -----------------------------------------------------------
 */

static const cfg_t *launch_cfg;

static void victim_env(int rank, void *arg)
{
    char fault[128];
    (void)arg;
    if (rank != launch_cfg->victim || !launch_cfg->stage)
        return;
    snprintf(fault, sizeof fault, "%s:%s:%ld", launch_cfg->stage,
             launch_cfg->stop ? "stop" : "kill", launch_cfg->count);
    setenv("IPCPIPE_FAULT", fault, 1);
}

static void cleanup_dir(const char *dir)
{
    char path[512];
    const char *files[] = {"pid0", "pid1", "desc"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        unlink(path);
    }
    snprintf(path, sizeof path, "%s/ipcpipe-%u", dir, (unsigned)getuid());
    rmdir(path);
    if (rmdir(dir) != 0)
        T_FAIL("rmdir %s: %s (something was left in it)", dir, strerror(errno));
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--rejoin") == 0)
        return rejoin_main();
    if (ipcp_launch_is_rank())
        return rank_main(argc, argv);
    cfg_t c = parse(argc, argv);
    if ((c.path == P_PUT_PVM || c.path == P_GET_PVM) && !api_pvm_permitted()) {
        printf("process_vm_readv/writev between sibling processes is not "
               "permitted here: the pvm path cannot run\n");
        return T_SKIP;
    }
    char dir[] = "/tmp/ipcpf-XXXXXX", e_dir[64], e_ipdir[64], e_seed[64];
    if (!mkdtemp(dir))
        T_FAIL("mkdtemp: %s", strerror(errno));
    snprintf(e_dir, sizeof e_dir, "FAULT_DIR=%s", dir);
    snprintf(e_ipdir, sizeof e_ipdir, "IPCPIPE_DIR=%s", dir);
    snprintf(e_seed, sizeof e_seed, "FAULT_SEED=%llx",
             (unsigned long long)t_fresh_seed());
    char *env[] = {"IPCPIPE_TIMEOUT=2",
                   e_dir,
                   e_ipdir,
                   e_seed,
                   c.path == P_DRIVEN ? "IPCPIPE_DRIVE=on" : NULL,
                   NULL};
    ipcp_launch_opts_t o;
    ipcp_launch_result_t r;
    memset(&o, 0, sizeof o);
    memset(&r, 0, sizeof r);
    launch_cfg = &c;
    o.nranks = 2;
    o.timeout_s = 60;
    o.argv_self = argv;
    o.extra_env = env;
    o.child_env = victim_env;
    o.keep_going = 1;
    if (ipcp_launch(&o, &r) != 0)
        T_FAIL("ipcp_launch: %s", strerror(errno));
    if (r.timed_out)
        T_FAIL("the ranks did not finish within %.0f s", o.timeout_s);
    if (strcmp(api_opt(argc, argv, "--path", ""), "live") == 0) {
        cleanup_dir(dir);
        return ipcp_launch_exit_code(&r);
    }
    int v = c.victim, s = 1 - c.victim;
    int vs = r.wait_status[v], ss = r.wait_status[s];
    if (WIFEXITED(ss) && WEXITSTATUS(ss) == T_SKIP)
        return T_SKIP;
    if (WIFEXITED(vs) && WEXITSTATUS(vs) == 3)
        T_FAIL("the victim (rank %d) never reached stage %s", v, c.stage);
    if (!WIFSIGNALED(vs) || WTERMSIG(vs) != SIGKILL)
        T_FAIL("the victim (rank %d, pid %d) did not end by SIGKILL: wait "
               "status 0x%x (exit %d)",
               v, (int)r.pid[v], vs, WIFEXITED(vs) ? WEXITSTATUS(vs) : -1);
    if (!WIFEXITED(ss) || WEXITSTATUS(ss) != 0)
        T_FAIL("the survivor (rank %d, pid %d) ended with wait status 0x%x "
               "(exit %d, signal %d)",
               s, (int)r.pid[s], ss, WIFEXITED(ss) ? WEXITSTATUS(ss) : -1,
               WIFSIGNALED(ss) ? WTERMSIG(ss) : 0);
    cleanup_dir(dir);
    return 0;
}
