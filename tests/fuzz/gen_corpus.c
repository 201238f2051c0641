/* Writes the seed corpus of the fuzz harnesses: gen_corpus <dir> makes
 * <dir>/<harness>/<seed> from the library's own encoders (descriptors
 * from ipcp__mem_pack, hellos from ipcp__boot_hello_pack, barrier tokens
 * from ipcp__boot_barrier, calibration files from
 * ipcp__stripe_cache_store, settings from the table's names and
 * defaults, control messages as the engine sends them, caught from the
 * harness's communicator, messages to a rank on another node as the
 * engine sends them, caught from its transport).  Run by hand when a format
 * changes; the output is committed in tests/fuzz/corpus. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "ctrl_env.h"
#include "engine/engine.h"
#include "engine/mbox_ring.h"
#include "engine/mem.h"
#include "engine/remote.h"
#include "engine/stripe.h"

static const char *gen_dir;

typedef struct gen_buf {
    unsigned char b[1 << 17];
    size_t n;
} gen_buf_t;

static void gen_put(gen_buf_t *g, const void *p, size_t n)
{
    if (g->n + n > sizeof(g->b))
        abort();
    memcpy(g->b + g->n, p, n);
    g->n += n;
}

static void gen_u8(gen_buf_t *g, unsigned v)
{
    unsigned char c = (unsigned char)v;
    gen_put(g, &c, 1);
}

static void gen_u16(gen_buf_t *g, unsigned v)
{
    gen_u8(g, v & 0xff);
    gen_u8(g, v >> 8);
}

static void gen_write(const char *harness, const char *name, const void *p,
                      size_t n)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", gen_dir, harness);
    if (mkdir(path, 0755) != 0 && errno != EEXIST)
        abort();
    snprintf(path, sizeof(path), "%s/%s/%s", gen_dir, harness, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n || fclose(f) != 0) {
        fprintf(stderr, "gen_corpus: cannot write %s\n", path);
        exit(1);
    }
}

/* ---- Descriptors ------------------------------------------------------- */

static void gen_desc(void)
{
    ipcp_comm_t comm;
    ipcp__peer_t peers[3];
    ipcp__remote_t wide;
    memset(&comm, 0, sizeof(comm));
    memset(peers, 0, sizeof(peers));
    memset(&wide, 0, sizeof(wide));
    comm.size = 3;
    comm.peers = peers;
    /* fuzz_desc's job over nodes: ranks 0-2 on its node, 3 and 4 not. */
    snprintf(wide.job, sizeof(wide.job), "fuzzwide");
    wide.size = 5;
    comm.remote = &wide;
    static const struct {
        const char *name;
        int owner, type, fix;
        uint64_t id, len, wide_addr;
    } seeds[] = {
        {"host_owner0", 0, IPCP_MEM_HOST, 3, 1, 4096, 0},
        {"host_owner2", 2, IPCP_MEM_HOST, 3, 7, 1 << 20, 0},
        {"cuda_owner0", 0, IPCP_MEM_CUDA, 3, 2, 64 << 20, 0},
        {"raw_pid", 0, IPCP_MEM_HOST, 0, 3, 100, 0},
        {"self_owner", 1, IPCP_MEM_HOST, 3, 4, 8, 0},
        /* From a rank on another node (its node's job is another). */
        {"wide_owner3", 3, IPCP_MEM_HOST, 1, 5, 1 << 16, 0x7f1000000000ull},
        {"wide_cuda4", 4, IPCP_MEM_CUDA, 1, 6, 1 << 16, 0},
    };
    for (size_t i = 0; i < ipcp__array_size(seeds); i++) {
        ipcp_mem_t mem;
        unsigned char out[1 + IPCP_DESC_MAX];
        size_t len;
        int elsewhere = seeds[i].owner >= 3;
        memset(&mem, 0, sizeof(mem));
        snprintf(comm.job, sizeof(comm.job), "%s",
                 elsewhere ? "fuzzjob-n1" : "fuzzjob");
        comm.job_hash = ipcp__fnv1a(comm.job, strlen(comm.job), IPCP_FNV_SEED);
        comm.rank = elsewhere ? seeds[i].owner - 3 : seeds[i].owner;
        wide.rank = seeds[i].owner;
        mem.comm = &comm;
        mem.region.id = seeds[i].id;
        mem.region.len = seeds[i].len;
        mem.region.ptr = (void *)(uintptr_t)(0x7f0000000000ull + i * 4096);
        mem.region.attr.type = (ipcp_mem_type_t)seeds[i].type;
        mem.region.attr.device = seeds[i].type == IPCP_MEM_CUDA ? 0 : -1;
        mem.wide_addr = seeds[i].wide_addr;
        out[0] = (unsigned char)seeds[i].fix;
        if (ipcp__mem_pack(&mem, out + 1, IPCP_DESC_MAX, &len) != IPCP_OK)
            abort();
        gen_write("desc", seeds[i].name, out, len + 1);
    }
}

/* ---- Hellos and barrier tokens ------------------------------------------ */

static void gen_hello(void)
{
    ipcp__boot_t boot;
    unsigned char out[1024];
    memset(&boot, 0, sizeof(boot));
    boot.size = 4;
    snprintf(boot.job, sizeof(boot.job), "fuzzjob");
    /* Mode byte: bits 0-1 the mode, 2-3 our rank, bit 4 the pid fix-up. */
    static const struct {
        const char *name;
        int sender, mode, ours;
    } seeds[] = {
        {"hello_from_1", 1, 0, 0},
        {"hello_from_3", 3, 0, 2},
        {"answer_from_0", 0, 1, 1},
        {"answer_from_2", 2, 1, 3},
    };
    for (size_t i = 0; i < ipcp__array_size(seeds); i++) {
        boot.rank = seeds[i].sender;
        out[0] = (unsigned char)(seeds[i].mode | seeds[i].ours << 2 | 0x10);
        size_t n = ipcp__boot_hello_pack(&boot, 0x7ffc00001000ull, out + 1,
                                         sizeof(out) - 1);
        if (!n)
            abort();
        gen_write("hello", seeds[i].name, out, n + 1);
    }
    /* A token as rank r's barrier sends it (the barrier itself times out:
     * nobody answers). */
    for (int r = 0; r < 2; r++) {
        ipcp__boot_peer_t peers[2];
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
            abort();
        memset(&boot, 0, sizeof(boot));
        boot.size = 2;
        boot.rank = r;
        boot.timeout_s = 0.01;
        snprintf(boot.job, sizeof(boot.job), "fuzzjob");
        boot.peers = peers;
        peers[r].fd = -1;
        peers[!r].fd = sv[0];
        (void)ipcp__boot_barrier(&boot);
        ssize_t n = recv(sv[1], out + 1, sizeof(out) - 1, MSG_DONTWAIT);
        if (n <= 0)
            abort();
        out[0] = (unsigned char)(2 | (!r) << 2);
        gen_write("hello", r ? "token_from_1" : "token_from_0", out,
                  (size_t)n + 1);
        close(sv[0]);
        close(sv[1]);
    }
}

/* ---- Calibration files --------------------------------------------------- */

static void gen_stripe_entry(ipcp__stripe_entry_t *e, int layout, int driver,
                             double share)
{
    memset(e, 0, sizeof(*e));
    snprintf(e->src, sizeof(e->src),
             "GPU-11111111-2222-3333-4444-"
             "555555555555");
    snprintf(e->dst, sizeof(e->dst),
             "GPU-66666666-7777-8888-9999-"
             "000000000000");
    e->layout = layout;
    e->driver = driver;
    e->share = share;
    e->size = 256 << 20;
    e->share_large = share ? share * 1.1 : 0;
    e->size_large = 1 << 30;
    e->share_bidir = share / 2;
    e->min_size = share ? 128 << 20 : 0;
    e->direct_gbs = 380.5;
    e->staged_gbs = 45.25;
    e->striped_gbs = share ? 411 : 0;
    e->time = 1700000000;
}

static void gen_stripe_file(const char *path, const char *name, int key)
{
    static unsigned char buf[1 << 16];
    FILE *f = fopen(path, "rb");
    if (!f)
        abort();
    size_t n = fread(buf + 1, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[0] = (unsigned char)key;
    gen_write("stripe", name, buf, n + 1);
}

static void gen_stripe(void)
{
    char dir[] = "/tmp/ipcpipe-gen-XXXXXX", path[256], why[256];
    ipcp__stripe_entry_t e;
    if (!mkdtemp(dir))
        abort();
    snprintf(path, sizeof(path), "%s/stripe.txt", dir);
    /* Key byte: bit 0 the driven layout, bit 1 driver 12040 (else
     * 12080). */
    gen_stripe_entry(&e, IPCP_STRIPE_RING, 12080, 0.08);
    if (ipcp__stripe_cache_store(path, "fuzzhost", &e, why, sizeof(why)))
        abort();
    gen_stripe_file(path, "ring_hit", 0);
    gen_stripe_entry(&e, IPCP_STRIPE_DRIVEN, 12080, 0.12);
    if (ipcp__stripe_cache_store(path, "fuzzhost", &e, why, sizeof(why)))
        abort();
    gen_stripe_file(path, "two_pairs_driven", 1);
    gen_stripe_file(path, "two_pairs_stale", 3);
    gen_stripe_entry(&e, IPCP_STRIPE_RING, 12080, 0);
    if (ipcp__stripe_cache_store(path, "otherhost", &e, why, sizeof(why)))
        abort();
    gen_stripe_file(path, "foreign_host", 0);
    unlink(path);
    rmdir(dir);
}

/* ---- Settings ------------------------------------------------------------ */

static void gen_config(void)
{
    static char text[1 << 14];
    size_t n = 0;
    for (int i = 0; i < ipcp_settings_count(); i++) {
        ipcp_setting_info_t info;
        if (ipcp_setting_get(i, &info) != IPCP_OK)
            abort();
        n += (size_t)snprintf(
            text + n, sizeof(text) - n, "%s=%s\n", info.name,
            info.is_set || strcmp(info.deflt, "(unset)") ? info.deflt : "");
    }
    gen_write("config", "defaults", text, n);
    static const struct {
        const char *name, *text;
    } seeds[] = {
        {"sizes", "IPCPIPE_CHUNK=1M\nIPCPIPE_EAGER=8KiB\nIPCPIPE_SLOTS=8\n"
                  "IPCPIPE_TIMEOUT=2.5\nIPCPIPE_STRIPE=0.1\n"},
        {"enums", "IPCPIPE_PATH=staged\nIPCPIPE_LOG_LEVEL=debug\n"
                  "IPCPIPE_LOG_SUBSYS=init,boot,engine\nIPCPIPE_DRIVE=on\n"},
        {"explicit", "IPCPIPE_RANK=1\nIPCPIPE_SIZE=4\nIPCPIPE_JOB=abc.1\n"},
        {"openmpi", "OMPI_COMM_WORLD_RANK=0\nOMPI_COMM_WORLD_SIZE=2\n"
                    "PMIX_NAMESPACE=prterun-host-1234@1\n"},
        {"slurm", "SLURM_PROCID=3\nSLURM_NTASKS=8\nSLURM_JOB_ID=991\n"
                  "SLURM_STEP_ID=0\n"},
        {"torchrun", "RANK=1\nWORLD_SIZE=2\nTORCHELASTIC_RUN_ID=none\n"},
    };
    for (size_t i = 0; i < ipcp__array_size(seeds); i++)
        gen_write("config", seeds[i].name, seeds[i].text,
                  strlen(seeds[i].text));
}

/* ---- Control messages ---------------------------------------------------- */

/* A message the engine sent, and how many descriptors it had sent before
 * it (its first one lands in that pool slot, modulo 8). */
typedef struct gen_msg {
    int peer;
    uint32_t type, flags;
    size_t len;
    int nfds, fd_index;
    unsigned char data[IPCP_SOCK_MSG_MAX];
} gen_msg_t;

static gen_msg_t gen_msgs[64];
static int gen_nmsgs, gen_nfds;

static void gen_tap(int peer, const void *msg, size_t len, int nfds, void *arg)
{
    (void)arg;
    if (gen_nmsgs < (int)ipcp__array_size(gen_msgs) && len >= 8) {
        gen_msg_t *m = &gen_msgs[gen_nmsgs++];
        m->peer = peer;
        memcpy(&m->type, msg, 4);
        memcpy(&m->flags, (const char *)msg + 4, 4);
        m->len = len;
        m->nfds = nfds;
        m->fd_index = gen_nfds;
        memcpy(m->data, msg, len);
    }
    gen_nfds += nfds;
}

static void gen_run(const gen_buf_t *g)
{
    gen_nmsgs = gen_nfds = 0;
    if (ctrl_env_run(g->b, g->n, gen_tap, NULL) != 0)
        abort();
}

/* The last message of type the engine sent in the last run. */
static const gen_msg_t *gen_find(uint32_t type)
{
    for (int i = gen_nmsgs - 1; i >= 0; i--)
        if (gen_msgs[i].type == type)
            return &gen_msgs[i];
    fprintf(stderr, "gen_corpus: the engine sent no message of type %u\n",
            type);
    exit(1);
}

/* A MSG operation from peer k: the message, its descriptors handed back
 * from the pool where the engine's went (pool) or made anew (kinds). */
static void gen_op_msg(gen_buf_t *g, int k, const void *msg, size_t len,
                       int nfds, const unsigned char *kinds)
{
    gen_u8(g, CTRL_OP_MSG);
    gen_u8(g, (unsigned)(k | nfds << 1));
    for (int i = 0; i < nfds; i++)
        gen_u8(g, kinds[i]);
    gen_u16(g, (unsigned)len);
    gen_put(g, msg, len);
}

static void gen_op_echo(gen_buf_t *g, int k, const gen_msg_t *m)
{
    unsigned char kinds[IPCP_SOCK_MAX_FDS];
    for (int i = 0; i < m->nfds; i++)
        kinds[i] = (unsigned char)(CTRL_FD_POOL | ((m->fd_index + i) % 8) << 3);
    gen_op_msg(g, k, m->data, m->len, m->nfds, kinds);
}

static void gen_op(gen_buf_t *g, unsigned op, unsigned b, unsigned tag,
                   unsigned len)
{
    gen_u8(g, op);
    gen_u8(g, b);
    if (op == CTRL_OP_RECV || op == CTRL_OP_SEND)
        gen_u8(g, tag);
    gen_u16(g, len);
}

static void gen_op_onesided(gen_buf_t *g, unsigned b, unsigned reg,
                            unsigned off, unsigned len)
{
    gen_u8(g, CTRL_OP_ONESIDED);
    gen_u8(g, b);
    gen_u8(g, reg);
    gen_u16(g, off);
    gen_u16(g, len);
}

static void gen_ctrl_twosided(void)
{
    gen_buf_t g = {.n = 0};
    gen_msg_t path, rts, eager, cts;
    /* A rendezvous RTS (12800 bytes is past the eager limit) and the
     * PATH every rank sends first. */
    gen_u8(&g, 0);
    gen_op(&g, CTRL_OP_SEND, 4, 0, 200);
    gen_run(&g);
    path = *gen_find(IPCP_MSG_PATH);
    rts = *gen_find(IPCP_MSG_RTS);
    gen_write("ctrl", "send_rts", g.b, g.n);
    /* With the peer's PATH known, a small send goes eager. */
    g.n = 0;
    gen_u8(&g, 0);
    gen_op_msg(&g, 0, path.data, path.len, 0, NULL);
    gen_op(&g, CTRL_OP_SEND, 0, 1, 100);
    gen_run(&g);
    eager = *gen_find(IPCP_MSG_EAGER);
    gen_write("ctrl", "path_then_eager_send", g.b, g.n);
    /* Receiving them: eager, then the rendezvous one, which the engine
     * answers with a CTS and its channel. */
    g.n = 0;
    gen_u8(&g, 0);
    gen_op(&g, CTRL_OP_RECV, 0, 1, 100);
    gen_op_msg(&g, 0, eager.data, eager.len, 0, NULL);
    gen_op(&g, CTRL_OP_RECV, 4, 0, 200);
    gen_op_msg(&g, 0, rts.data, rts.len, 0, NULL);
    gen_run(&g);
    cts = *gen_find(IPCP_MSG_CTS);
    gen_write("ctrl", "recv_eager_and_rts", g.b, g.n);
    /* A send to the other peer, whose CTS hands our own channel back. */
    g.n = 0;
    gen_u8(&g, 0);
    gen_op(&g, CTRL_OP_SEND, 1 | 4, 0, 200);
    gen_op(&g, CTRL_OP_RECV, 4, 0, 200);
    gen_op_msg(&g, 0, rts.data, rts.len, 0, NULL);
    gen_op_echo(&g, 1, &cts);
    gen_write("ctrl", "send_cts_staged", g.b, g.n);
    /* The same under IPCPIPE_DRIVE=on from rank 1. */
    g.b[0] = CTRL_VAR_DRIVE | CTRL_VAR_RANK1;
    gen_write("ctrl", "send_cts_drive_rank1", g.b, g.n);
}

static void gen_ctrl_onesided(void)
{
    gen_buf_t g = {.n = 0};
    gen_msg_t req, rep, get, put;
    /* Import (MAP_REQ), answered by our own MAP_REP of a registration. */
    gen_u8(&g, 0);
    gen_u8(&g, CTRL_OP_REGION);
    gen_u8(&g, 1);
    gen_u16(&g, 4096);
    gen_op_onesided(&g, 0, 1, 0, 4096);
    gen_run(&g);
    req = *gen_find(IPCP_MSG_MAP_REQ);
    gen_op_msg(&g, 0, req.data, req.len, 0, NULL);
    gen_run(&g);
    rep = *gen_find(IPCP_MSG_MAP_REP);
    gen_op_echo(&g, 0, &rep);
    gen_write("ctrl", "import_map", g.b, g.n);
    /* Get through the owner: GET_REQ, the owner's RTS reply. */
    g.n = 0;
    gen_u8(&g, 0);
    gen_u8(&g, CTRL_OP_REGION);
    gen_u8(&g, 0);
    gen_u16(&g, 8192);
    gen_op_onesided(&g, 2 << 1, 1, 0, 1024);
    gen_run(&g);
    get = *gen_find(IPCP_MSG_GET_REQ);
    gen_op_msg(&g, 0, get.data, get.len, 0, NULL);
    gen_run(&g);
    gen_op_echo(&g, 0, gen_find(IPCP_MSG_RTS));
    gen_write("ctrl", "get_staged", g.b, g.n);
    /* Put through the owner: RTS PUT, the owner's CTS. */
    g.n = 0;
    gen_u8(&g, 0);
    gen_u8(&g, CTRL_OP_REGION);
    gen_u8(&g, 0);
    gen_u16(&g, 8192);
    gen_op_onesided(&g, 1 << 1, 1, 100, 1000);
    gen_run(&g);
    put = *gen_find(IPCP_MSG_RTS);
    gen_op_msg(&g, 0, put.data, put.len, 0, NULL);
    gen_run(&g);
    gen_op_echo(&g, 0, gen_find(IPCP_MSG_CTS));
    gen_write("ctrl", "put_staged", g.b, g.n);
}

/* An INBOX operation from peer 0 that writes a record of msg into slot i
 * of the inbox we offered it, as its i-th record (engine/mbox_ring.h). */
static void gen_op_record(gen_buf_t *g, unsigned i, const void *msg,
                          uint32_t len)
{
    uint64_t seq = i + 1;
    uint32_t words[2] = {len, IPCP_MBOX_DATA};
    gen_u8(g, CTRL_OP_INBOX);
    gen_u8(g, 0);
    gen_u16(g, (unsigned)(sizeof(ipcp__mbox_ring_t) + i * IPCP_MBOX_SLOT));
    gen_u8(g, (unsigned)(IPCP_MBOX_HDR + len));
    gen_put(g, &seq, sizeof(seq));
    gen_put(g, words, sizeof(words));
    gen_put(g, msg, len);
}

static void gen_ctrl_misc(void)
{
    gen_buf_t g = {.n = 0};
    gen_msg_t mbox, sw;
    /* A barrier's message: its receive, then the message as a peer sends
     * it; then the peer ended as for one out of order. */
    struct {
        ipcp__msg_eager_t e;
        ipcp__bar_msg_t b;
    } bar = {{{IPCP_MSG_EAGER, 0}, IPCP_BAR_TAG, sizeof(ipcp__bar_msg_t)},
             {0, 0, IPCP_BAR_MAGIC}};
    gen_u8(&g, 0);
    gen_op(&g, CTRL_OP_RECV, 0, 0x80, sizeof(ipcp__bar_msg_t));
    gen_op_msg(&g, 0, &bar, sizeof(bar), 0, NULL);
    gen_op(&g, CTRL_OP_RECV, 1, 0x80, sizeof(ipcp__bar_msg_t));
    gen_u8(&g, CTRL_OP_DROP);
    gen_u8(&g, 3);
    gen_write("ctrl", "barrier_drop", g.b, g.n);
    /* Mailbox: the peer's offer, its SWITCH, then a PATH and a goodbye
     * through the inbox we offered (its slots 0 and 1). */
    g.n = 0;
    gen_u8(&g, CTRL_VAR_MAILBOX);
    gen_run(&g);
    mbox = *gen_find(IPCP_MSG_MBOX);
    unsigned char kinds[2] = {CTRL_FD_MEMFD_SEALED, CTRL_FD_EVENTFD};
    gen_op_msg(&g, 0, mbox.data, mbox.len, 2, kinds);
    gen_run(&g);
    sw = *gen_find(IPCP_MSG_SWITCH);
    gen_op_msg(&g, 0, sw.data, sw.len, 0, NULL);
    ipcp__msg_path_t pm;
    memset(&pm, 0, sizeof(pm));
    pm.hdr.type = IPCP_MSG_PATH;
    ipcp__msg_hdr_t bye = {IPCP_MSG_BYE, 0};
    gen_op_record(&g, 0, &pm, sizeof(pm));
    gen_op_record(&g, 1, &bye, sizeof(bye));
    gen_write("ctrl", "mailbox", g.b, g.n);
    /* A region gone, and a goodbye on the socket. */
    g.n = 0;
    gen_u8(&g, 0);
    ipcp__msg_reg_gone_t gone;
    memset(&gone, 0, sizeof(gone));
    gone.hdr.type = IPCP_MSG_REG_GONE;
    gone.reg_id = 1;
    gen_op_onesided(&g, 0, 1, 0, 64);
    gen_op_msg(&g, 0, &gone, sizeof(gone), 0, NULL);
    gen_op_msg(&g, 1, &bye, sizeof(bye), 0, NULL);
    gen_write("ctrl", "reg_gone_bye", g.b, g.n);
}

/* ---- Messages to a rank on another node ------------------------------- */

/* The messages the engine sends a rank elsewhere, caught as fuzz_remote
 * reads them: per message a byte (channel, tag), three of length, then
 * the bytes, or a fill byte where they are all one value. */
static gen_buf_t gen_rx;

static ipcp_status_t gen_rx_isend(void *ctx, int chan, const void *buf,
                                  size_t n, int peer, int tag, void **op)
{
    const unsigned char *b = buf;
    size_t same = 0;
    (void)ctx, (void)peer;
    while (same < n && b[same] == b[0])
        same++;
    gen_u8(&gen_rx, (unsigned)(chan | tag << 1));
    gen_u16(&gen_rx, (unsigned)(n & 0xffff));
    gen_u8(&gen_rx, (unsigned)(n >> 16));
    gen_u8(&gen_rx, n > 1 && same == n ? 0 : 1);
    if (n > 1 && same == n)
        gen_u8(&gen_rx, b[0]);
    else
        gen_put(&gen_rx, buf, n);
    *op = &gen_rx;
    return IPCP_OK;
}

static ipcp_status_t gen_rx_irecv(void *ctx, int chan, void *buf, size_t n,
                                  int peer, int tag, void **op)
{
    (void)ctx, (void)chan, (void)buf, (void)n, (void)peer, (void)tag;
    (void)op;
    return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_API, IPCP_ERR_UNSUPPORTED,
                      "gen_corpus: a send's seeds receive nothing");
}

static ipcp_status_t gen_rx_ibarrier(void *ctx, void **op)
{
    (void)ctx;
    *op = &gen_rx;
    return IPCP_OK;
}

static int gen_rx_test(void *ctx, void *op, ipcp_status_t *st, size_t *nbytes)
{
    (void)ctx, (void)op;
    *st = IPCP_OK;
    *nbytes = 0;
    return 1;
}

static int gen_rx_cancel(void *ctx, void *op)
{
    (void)ctx, (void)op;
    return 1;
}

static void gen_rx_close(void *ctx)
{
    (void)ctx;
}

static const ipcp__remote_ops_t gen_rx_ops = {
    .name = "gen",
    .tag_max = 1000,
    .isend = gen_rx_isend,
    .irecv = gen_rx_irecv,
    .ibarrier = gen_rx_ibarrier,
    .test = gen_rx_test,
    .cancel = gen_rx_cancel,
    .close = gen_rx_close,
};

/* Sends of each kind (bytes behind a header, alone, in pieces), each a
 * seed whose mode byte picks a receive that holds it. */
static void gen_remote(void)
{
    static const size_t lens[] = {0, 8, 232, 300, 20000, 65536, 70000, 300000};
    static const unsigned modes[] = {0, 0, 0, 0, 5, 2, 2, 3};
    ipcp_comm_params_t p;
    ipcp_comm_t *c = NULL;
    char job[64];
    int local[2] = {-1, 0};
    unsigned char *buf = malloc(300000);
    snprintf(job, sizeof(job), "gencorpus-%ld", (long)getpid());
    ipcp_comm_params_init(&p);
    p.rank = 0;
    p.size = 1;
    p.job_id = job;
    if (!buf || ipcp_init(&p, &c) != IPCP_OK ||
        ipcp__comm_remote(c, "genjob", 1, 2, local, &gen_rx_ops, NULL) !=
            IPCP_OK)
        abort();
    for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
        char name[32];
        for (size_t k = 0; k < lens[i]; k++)
            buf[k] = (unsigned char)(lens[i] > 300 ? 0x11 : k * 7 + 1);
        gen_rx.n = 0;
        gen_u8(&gen_rx, modes[i]);
        if (ipcp_send(c, buf, lens[i], 0, 1) != IPCP_OK)
            abort();
        snprintf(name, sizeof(name), "send_%zu", lens[i]);
        gen_write("remote", name, gen_rx.b, gen_rx.n);
    }
    ipcp_finalize(c);
    free(buf);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s <corpus directory>\n", argv[0]);
        return 2;
    }
    gen_dir = argv[1];
    setenv("IPCPIPE_LOG_LEVEL", "none", 0);
    ctrl_env_init();
    gen_desc();
    gen_hello();
    gen_stripe();
    gen_config();
    gen_ctrl_twosided();
    gen_ctrl_onesided();
    gen_ctrl_misc();
    gen_remote();
    return 0;
}
