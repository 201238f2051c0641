/* The receiver's choice of path (engine/route.h) without a backend: for
 * each offer and settings, which routes serve it, in the order they are
 * tried, and what the sender's copy would be and why.  The cases are the
 * combinations a user meets: plain or ipcp_mem_alloc buffers on either
 * side, host or GPU memory, stream-ordered receives, forced paths, the
 * settings that turn a route off, one CPU; and that a route whose start
 * declines passes the transfer to the next one that serves. */
#include <stdio.h>
#include <string.h>

#include "common/config.h"
#include "engine/route.h"
#include "engine/xfer.h"
#include "testutil.h"

enum { H = IPCP_MEM_HOST, C = IPCP_MEM_CUDA };
enum {
    SRC_MAP = 1,
    SRC_ADDR = 2,
    PVM_OK = 4,
    REACH = 8,
    SHARED = 16,
    SYNC = 32,
    ONE_CPU = 64,
    AUTO = 128, /* the sent route exports the cudaMalloc'd receive buffer */
    NO_BOUNCE = 256, /* the sender could not map our ring before */
    INTERNAL = 512   /* the library's own message (a barrier's tag) */
};

typedef struct {
    const char *what;
    const char *env; /* "NAME=value" or NULL */
    int src, dst;
    unsigned facts;
    uint64_t len;
    ipcp_path_t force;
    const char *routes; /* the names of those that serve, in order */
    int why;            /* the sender's copy: IPCP_WHY_* */
    int mode;           /* ... where it writes (0: staged; -1: the
                           forced direct or bounce path cannot serve) */
} route_case_t;

#define MIB ((uint64_t)1 << 20)

static const route_case_t cases[] = {
    {"plain host buffers, process_vm_writev offered", NULL, H, H,
     SRC_ADDR | PVM_OK, MIB, IPCP_PATH_AUTO, "read sent", IPCP_WHY_PVM,
     IPCP_DST_PVM},
    {"plain host buffers, the kernel forbids writev", NULL, H, H, SRC_ADDR, MIB,
     IPCP_PATH_AUTO, "read sent", IPCP_WHY_UNSHARED, 0},
    {"ipcp_mem_alloc on both sides", NULL, H, H, SRC_MAP | SRC_ADDR | SHARED,
     MIB, IPCP_PATH_AUTO, "map sent", IPCP_WHY_MAPPED, IPCP_DST_MAPPED},
    {"plain sender, shareable receive buffer", NULL, H, H, SRC_ADDR | SHARED,
     MIB, IPCP_PATH_AUTO, "sent", IPCP_WHY_MAPPED, IPCP_DST_MAPPED},
    {"one CPU, 512 KiB and more: split first", NULL, H, H,
     SRC_ADDR | PVM_OK | ONE_CPU, 8 * MIB, IPCP_PATH_AUTO, "split read sent",
     IPCP_WHY_PVM, IPCP_DST_PVM},
    {"one CPU, below IPCPIPE_SPLIT", NULL, H, H, SRC_ADDR | PVM_OK | ONE_CPU,
     MIB / 4, IPCP_PATH_AUTO, "read sent", IPCP_WHY_PVM, IPCP_DST_PVM},
    {"one CPU, IPCPIPE_SPLIT=0", "IPCPIPE_SPLIT=0", H, H,
     SRC_ADDR | PVM_OK | ONE_CPU, 8 * MIB, IPCP_PATH_AUTO, "read sent",
     IPCP_WHY_PVM, IPCP_DST_PVM},
    {"IPCPIPE_DRIVE=off", "IPCPIPE_DRIVE=off", H, H,
     SRC_MAP | SRC_ADDR | SHARED | ONE_CPU, 8 * MIB, IPCP_PATH_AUTO, "sent",
     IPCP_WHY_MAPPED, IPCP_DST_MAPPED},
    {"IPCPIPE_PVM=off", "IPCPIPE_PVM=off", H, H, SRC_ADDR | PVM_OK, MIB,
     IPCP_PATH_AUTO, "sent", IPCP_WHY_UNSHARED, 0},
    {"a fixed IPCPIPE_STRIPE share: the sender stripes", "IPCPIPE_STRIPE=0.2",
     H, H, SRC_ADDR | PVM_OK | ONE_CPU, 8 * MIB, IPCP_PATH_AUTO, "sent",
     IPCP_WHY_PVM, IPCP_DST_PVM},
    {"staged forced", NULL, H, H, SRC_MAP | SRC_ADDR | SHARED | ONE_CPU,
     8 * MIB, IPCP_PATH_STAGED, "sent", IPCP_WHY_FORCED_STAGED, 0},
    {"direct forced", NULL, H, H, SRC_MAP | SHARED, MIB, IPCP_PATH_DIRECT,
     "map sent", IPCP_WHY_MAPPED, IPCP_DST_MAPPED},
    {"direct forced, nothing the sender can write", NULL, H, H, SRC_ADDR, MIB,
     IPCP_PATH_DIRECT, "read sent", IPCP_WHY_UNSHARED, -1},
    {"direct forced, the library's own message: as auto", NULL, H, H,
     SRC_ADDR | INTERNAL, MIB, IPCP_PATH_DIRECT, "read sent", IPCP_WHY_UNSHARED,
     0},
    {"direct forced, GPUs without peer access", NULL, C, C, SRC_MAP | SHARED,
     MIB, IPCP_PATH_DIRECT, "sent", IPCP_WHY_NO_PEER, -1},
    {"an empty message", NULL, H, H, SRC_MAP | SRC_ADDR | SHARED, 0,
     IPCP_PATH_AUTO, "sent", IPCP_WHY_MAPPED, IPCP_DST_MAPPED},
    {"a stream-ordered receive", NULL, H, H, SRC_MAP | SHARED | SYNC, MIB,
     IPCP_PATH_AUTO, "sent", IPCP_WHY_MAPPED, IPCP_DST_MAPPED},
    {"GPU to GPU, exported sender, peer access", NULL, C, C,
     SRC_MAP | REACH | SHARED, MIB, IPCP_PATH_AUTO, "map sent", IPCP_WHY_MAPPED,
     IPCP_DST_MAPPED},
    {"GPU to GPU, cudaMalloc'd, the receive buffer exported", NULL, C, C,
     REACH | AUTO, MIB, IPCP_PATH_AUTO, "sent", IPCP_WHY_MAPPED,
     IPCP_DST_MAPPED},
    {"GPU to GPU, nothing shareable (the default cudaMallocAsync pool)", NULL,
     C, C, REACH, MIB, IPCP_PATH_AUTO, "sent", IPCP_WHY_BOUNCE,
     IPCP_DST_BOUNCE},
    {"GPU to GPU, nothing shareable, staged forced", NULL, C, C, REACH, MIB,
     IPCP_PATH_STAGED, "sent", IPCP_WHY_UNSHARED, 0},
    {"GPU to GPU, nothing shareable, stream-ordered", NULL, C, C, REACH | SYNC,
     MIB, IPCP_PATH_AUTO, "sent", IPCP_WHY_BOUNCE, IPCP_DST_BOUNCE},
    {"GPU to GPU, nothing shareable, the sender cannot map our ring", NULL, C,
     C, REACH | NO_BOUNCE, MIB, IPCP_PATH_AUTO, "sent", IPCP_WHY_RING_REFUSED,
     0},
    {"GPU to GPU, nothing shareable, direct forced", NULL, C, C, REACH, MIB,
     IPCP_PATH_DIRECT, "sent", IPCP_WHY_UNSHARED, -1},
    {"bounce forced, the sender cannot map our ring", NULL, C, C,
     REACH | NO_BOUNCE, MIB, IPCP_PATH_BOUNCE, "sent", IPCP_WHY_RING_REFUSED,
     -1},
    {"bounce forced, both buffers shareable", NULL, C, C,
     SRC_MAP | REACH | SHARED, MIB, IPCP_PATH_BOUNCE, "sent", IPCP_WHY_BOUNCE,
     IPCP_DST_BOUNCE},
    {"bounce forced, GPUs without peer access", NULL, C, C, 0, MIB,
     IPCP_PATH_BOUNCE, "sent", IPCP_WHY_NO_PEER, -1},
    {"bounce forced, host memory: as auto", NULL, H, H,
     SRC_MAP | SRC_ADDR | PVM_OK | SHARED | ONE_CPU, 8 * MIB, IPCP_PATH_BOUNCE,
     "split map sent", IPCP_WHY_MAPPED, IPCP_DST_MAPPED},
    {"bounce forced, host to GPU: as auto", NULL, H, C, SHARED, MIB,
     IPCP_PATH_BOUNCE, "sent", IPCP_WHY_KINDS, 0},
    {"GPU to GPU without peer access", NULL, C, C, SRC_MAP | SHARED, MIB,
     IPCP_PATH_AUTO, "sent", IPCP_WHY_NO_PEER, 0},
    {"GPU to GPU, stream-ordered", NULL, C, C, SRC_MAP | REACH | SHARED | SYNC,
     MIB, IPCP_PATH_AUTO, "sent", IPCP_WHY_MAPPED, IPCP_DST_MAPPED},
    {"host to GPU", NULL, H, C, SRC_MAP | SRC_ADDR | PVM_OK | SHARED, MIB,
     IPCP_PATH_AUTO, "sent", IPCP_WHY_KINDS, 0},
    {"GPU to host", NULL, C, H, SRC_MAP | PVM_OK | SHARED | ONE_CPU, 8 * MIB,
     IPCP_PATH_AUTO, "sent", IPCP_WHY_KINDS, 0},
};

static const char *case_env; /* "NAME=value" of the case being run */

static const char *get_env(const char *name, void *arg)
{
    (void)arg;
    size_t n = strlen(name);
    if (case_env && strncmp(case_env, name, n) == 0 && case_env[n] == '=')
        return case_env + n + 1;
    return NULL;
}

static void offer_of(const route_case_t *c, ipcp__offer_t *o)
{
    memset(o, 0, sizeof(*o));
    o->len = c->len;
    o->src_type = c->src;
    o->dst_type = c->dst;
    o->src_map = !!(c->facts & SRC_MAP);
    o->src_addr = !!(c->facts & SRC_ADDR);
    o->pvm_ok = !!(c->facts & PVM_OK);
    o->reach = !!(c->facts & REACH);
    o->dst_shared = !!(c->facts & SHARED);
    o->sync = !!(c->facts & SYNC);
    o->one_cpu = !!(c->facts & ONE_CPU);
    o->no_bounce = !!(c->facts & NO_BOUNCE);
    o->force = ipcp__force_for(c->force, c->facts & INTERNAL ? IPCP_BAR_TAG : 0,
                               c->src, c->dst);
}

static int run_case(const route_case_t *c)
{
    ipcp__config_t cfg;
    ipcp__offer_t o;
    char err[300], got[128] = "";
    case_env = c->env;
    T_OK(ipcp__config_parse(&cfg, get_env, NULL, err, sizeof(err)));
    offer_of(c, &o);
    size_t i = 0;
    const ipcp__route_t *r;
    while ((r = ipcp__route_next(ipcp__routes, &o, &cfg, &i)))
        snprintf(got + strlen(got), sizeof(got) - strlen(got), "%s%s",
                 *got ? " " : "", r->name);
    int mode, why;
    if (ipcp__sent_choose(&o, &cfg, o.dst_shared || (c->facts & AUTO), &mode,
                          &why) < 0)
        mode = -1;
    int ok = strcmp(got, c->routes) == 0 && why == c->why && mode == c->mode;
    fprintf(stderr,
            "%s %s: routes \"%s\" (expected \"%s\"), why %d (%d), "
            "mode %d (%d)\n",
            ok ? "ok  " : "FAIL", c->what, got, c->routes, why, c->why, mode,
            c->mode);
    return ok;
}

/* ---- Declining starts: the next route that serves takes it ---------- */

static int started[4];

static int serves_yes(const ipcp__offer_t *o, const ipcp__config_t *cfg)
{
    (void)o;
    (void)cfg;
    return 1;
}

static int serves_no(const ipcp__offer_t *o, const ipcp__config_t *cfg)
{
    (void)o;
    (void)cfg;
    return 0;
}

#define FAKE_START(k, takes)                                                   \
    static int start_##k(ipcp_comm_t *comm, ipcp__peer_t *peer,                \
                         const ipcp__msg_rts_t *rts, ipcp_request_t *req,      \
                         const ipcp__offer_t *o)                               \
    {                                                                          \
        (void)comm;                                                            \
        (void)peer;                                                            \
        (void)rts;                                                             \
        (void)req;                                                             \
        (void)o;                                                               \
        started[k]++;                                                          \
        return takes;                                                          \
    }
FAKE_START(0, 0)
FAKE_START(1, 1)
FAKE_START(2, 1)
FAKE_START(3, 1)

static const ipcp__route_t declines = {
    .name = "declines", .serves = serves_yes, .start = start_0};
static const ipcp__route_t never = {
    .name = "never", .serves = serves_no, .start = start_1};
static const ipcp__route_t takes = {
    .name = "takes", .serves = serves_yes, .start = start_2};
static const ipcp__route_t after = {
    .name = "after", .serves = serves_yes, .start = start_3};

static void check_fallback(void)
{
    static ipcp_comm_t comm;
    ipcp__config_t cfg;
    ipcp__offer_t o;
    char err[300];
    case_env = NULL;
    T_OK(ipcp__config_parse(&cfg, get_env, NULL, err, sizeof(err)));
    comm.cfg = &cfg;
    memset(&o, 0, sizeof(o));
    const ipcp__route_t *const table[] = {&declines, &never, &takes, &after,
                                          NULL};
    T_CHECK(ipcp__route_take(table, &o, &comm, NULL, NULL, NULL) == &takes);
    T_EQ_INT(started[0], 1);
    T_EQ_INT(started[1], 0); /* it does not serve: never started */
    T_EQ_INT(started[2], 1);
    T_EQ_INT(started[3], 0); /* the one before took it */
    const ipcp__route_t *const none[] = {&declines, &never, NULL};
    T_CHECK(ipcp__route_take(none, &o, &comm, NULL, NULL, NULL) == NULL);
    T_EQ_INT(started[0], 2);
    T_EQ_INT(started[1], 0);
}

/* Route numbers (what a CTS carries) name the same route back; an added
 * route comes first and is tried before the table's, until the protocol
 * is first asked for (engine.route.added.mismatch: a peer with other
 * routes is refused). */
static void check_ids(size_t n)
{
    static ipcp_comm_t comm;
    ipcp__config_t cfg;
    ipcp__offer_t o;
    char err[300];
    for (size_t i = 0; i < n; i++) {
        T_EQ_INT(ipcp__route_id(ipcp__routes[i]), i);
        T_CHECK(ipcp__route_by_id((uint32_t)i) == ipcp__routes[i]);
    }
    T_CHECK(ipcp__route_by_id((uint32_t)n) == NULL);
    T_CHECK(ipcp__route_by_id(UINT32_MAX) == NULL);

    T_EQ_INT(ipcp__route_add(&takes), 0);
    T_EQ_INT(ipcp__route_id(&takes), 0);
    T_CHECK(ipcp__route_by_id(0) == &takes);
    T_EQ_INT(ipcp__route_id(ipcp__routes[0]), 1);
    T_CHECK(ipcp__route_by_id((uint32_t)n + 1) == NULL);
    case_env = NULL;
    T_OK(ipcp__config_parse(&cfg, get_env, NULL, err, sizeof(err)));
    comm.cfg = &cfg;
    memset(&o, 0, sizeof(o));
    int before = started[2];
    T_CHECK(ipcp__route_take(ipcp__routes, &o, &comm, NULL, NULL, NULL) ==
            &takes);
    T_EQ_INT(started[2], before + 1);
    T_EQ_INT(ipcp__route_add(&after), 0);
    /* A communicator's hello fixes the numbers: no route is added after
     * it (an added one would shift them under its peers). */
    T_EQ_INT(ipcp__proto() >> 16, IPCP_PROTO_VERSION);
    T_EQ_INT(ipcp__route_add(&after), -1);
    T_CHECK(ipcp__route_by_id(2) == ipcp__routes[0]);
}

int main(void)
{
    int failed = 0;
    /* Every route is complete, and the last serves everything. */
    size_t n = 0;
    for (; ipcp__routes[n]; n++)
        T_CHECK(ipcp__routes[n]->name && ipcp__routes[n]->serves &&
                ipcp__routes[n]->start);
    T_CHECK(n >= 2 && strcmp(ipcp__routes[n - 1]->name, "sent") == 0);
    T_CHECK(ipcp__routes[n - 1]->tx != NULL); /* the sender copies */
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        ipcp__config_t cfg;
        ipcp__offer_t o;
        char err[300];
        failed += !run_case(&cases[k]);
        /* The last route serves every offer: no transfer is left. */
        case_env = cases[k].env;
        T_OK(ipcp__config_parse(&cfg, get_env, NULL, err, sizeof(err)));
        offer_of(&cases[k], &o);
        T_CHECK(ipcp__routes[n - 1]->serves(&o, &cfg));
    }
    check_fallback();
    check_ids(n);
    T_EQ_INT(failed, 0);
    return 0;
}
