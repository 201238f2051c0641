/* The communicator of the control-message harness; see ctrl_env.h.
 *
 * Script: a variant byte (CTRL_VAR_*), then operations, each an op byte
 * (CTRL_OP_* in its low 3 bits) and its arguments:
 *   MSG       b: peer (bit 0), descriptors (bits 1-2); a byte per
 *             descriptor (CTRL_FD_*); u16 length; the message
 *   RECV/SEND b: peer (bit 0), buffer in the last region (bit 1), length
 *             x 64 (bit 2); tag byte (bit 7: a barrier's tag, else the
 *             byte % 4); u16 length
 *   REGION    b: register malloc'd memory (bit 0) rather than allocate;
 *             u16 length (an allocation is a memfd, populated: larger
 *             ones would cost the harness most of its speed)
 *   ONESIDED  b: peer (bit 0), import/put/get ((b >> 1) % 3); the region
 *             id; u16 offset; u16 length
 *   INBOX     b: peer (bit 0); u16 offset; a length byte and as many bytes
 *             written into the inbox we offered that peer, which is then
 *             read (what a peer may write in shared memory)
 *   DROP      b: peer (bit 0), a reason (bit 1): the engine ends the peer
 *             as a barrier does one whose message was out of order
 *   PEER      b: peer (bit 0), process_vm_writev allowed (bit 1)
 * Between operations the harness reads what the engine sent (the
 * descriptors go to a pool that CTRL_FD_POOL hands back) and lets staged
 * transfers enqueue their chunks.  At the end the communicator is torn
 * down as ipcp_finalize does; a descriptor left open is a finding. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "engine/engine.h"
#include "engine/mem.h"
#include "ctrl_env.h"
#include "fuzz_common.h"

#define CTRL_SIZE      3
#define CTRL_MAX_OPS   64
#define CTRL_MAX_BUFS  64
#define CTRL_POOL      8
#define CTRL_MAX_INPUT (256 << 10)
/* The size of a mailbox ring in a job of CTRL_SIZE ranks (engine/mbox.c),
 * which a mailbox offer's memfd is given: the engine refuses one of any
 * other size, so a fixed figure that the ring's layout left behind made
 * every fuzzed offer a refused one. */
static size_t ctrl_mbox_size;

/* The settings of each variant; the rest are the table's defaults. */
static ipcp__config_t ctrl_cfg[8];
static pid_t ctrl_child = -1;
static _Alignas(8) unsigned char ctrl_rxbuf[IPCP_RX_MAX];

typedef struct ctrl_run {
    ipcp_comm_t *comm;
    int others[2]; /* the peers' ranks */
    int sock[2];   /* our ends of their sockets */
    int pool[CTRL_POOL];
    unsigned pool_next;
    void *bufs[CTRL_MAX_BUFS]; /* freed after the teardown */
    int nbufs;
    void *region_ptr; /* the last region's memory and length */
    size_t region_len;
    ctrl_tap_fn tap;
    void *tap_arg;
} ctrl_run_t;

static const char *ctrl_setting(const char *name, void *arg)
{
    unsigned v = (unsigned)(uintptr_t)arg;
    static const char *const fixed[][2] = {
        {"IPCPIPE_TIMEOUT", "0.2"}, {"IPCPIPE_CHUNK", "64K"},
        {"IPCPIPE_SLOTS", "4"},     {"IPCPIPE_QUEUES", "2"},
        {"IPCPIPE_SPIN_US", "0"},   {"IPCPIPE_STRIPE_CACHE", "off"},
    };
    for (size_t i = 0; i < ipcp__array_size(fixed); i++)
        if (strcmp(name, fixed[i][0]) == 0)
            return fixed[i][1];
    if (strcmp(name, "IPCPIPE_MAILBOX") == 0)
        return v & CTRL_VAR_MAILBOX ? "on" : "off";
    if (strcmp(name, "IPCPIPE_DRIVE") == 0)
        return v & CTRL_VAR_DRIVE ? "on" : "auto";
    return NULL;
}

void ctrl_env_init(void)
{
    char err[256];
    ctrl_mbox_size = ipcp__mbox_bytes(ipcp__mbox_slots(CTRL_SIZE));
    for (unsigned v = 0; v < 8; v++)
        if (ipcp__config_parse(&ctrl_cfg[v], ctrl_setting, (void *)(uintptr_t)v,
                               err, sizeof(err)) != IPCP_OK) {
            fprintf(stderr, "ctrl_env: %s\n", err);
            abort();
        }
    /* The process's own settings set the log level (none, unless the
     * person running the harness asked for more). */
    const ipcp__config_t *env_cfg;
    if (ipcp__config_get(&env_cfg) != IPCP_OK)
        abort();
    /* The peers' pid: a process that only waits, so that what the engine
     * writes with process_vm_writev at a peer's word lands in a process
     * of no consequence. */
    ctrl_child = fork();
    if (ctrl_child == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        for (;;)
            pause();
    }
    if (ctrl_child < 0)
        abort();
}

/* ---- The communicator -----------------------------------------------------
 */

static ipcp_comm_t *ctrl_comm_new(unsigned variant, ctrl_run_t *run)
{
    ipcp_comm_t *comm = NULL;
    if (ipcp__comm_new(variant & CTRL_VAR_RANK1 ? 1 : 0, CTRL_SIZE, "fuzzjob",
                       ctrl_cfg[variant & 7].timeout_s, &comm) != IPCP_OK)
        abort();
    comm->cfg = &ctrl_cfg[variant & 7];
    comm->eager_max = comm->cfg->eager;
    atomic_init(&comm->path, IPCP_PATH_AUTO);
    comm->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (comm->wake_fd < 0)
        abort();
    int k = 0;
    for (int r = 0; r < CTRL_SIZE; r++) {
        ipcp__peer_t *p = &comm->peers[r];
        if (r == comm->rank)
            continue;
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
            abort();
        p->fd = sv[0];
        p->pid = ctrl_child;
        run->others[k] = r;
        run->sock[k++] = sv[1];
    }
    comm->host_ops = &ipcp__host_backend_ops;
    if (comm->host_ops->open(comm->cfg, &comm->host) != IPCP_OK ||
        ipcp__handle_new(IPCP_HANDLE_COMM, comm, &comm->handle) != IPCP_OK)
        abort();
    return comm;
}

/* What ipcp_finalize does after its goodbye: the progress thread's exit,
 * the teardown, then the communicator's own resources (api.c's
 * ipcp__comm_free). */
static void ctrl_comm_free(ipcp_comm_t *comm)
{
    /* As the progress thread's exit: chunks still to enqueue go in. */
    ipcp__stage_flush_all(comm);
    ipcp__comm_teardown(comm);
    ipcp__handle_free(comm->handle);
    for (int r = 0; r < comm->size; r++)
        if (comm->peers[r].fd >= 0)
            close(comm->peers[r].fd);
    comm->host_ops->close(comm->host);
    ipcp__comm_delete(comm);
}

/* ---- What the engine sent -------------------------------------------------
 */

static void ctrl_pool_put(ctrl_run_t *run, int fd)
{
    int *slot = &run->pool[run->pool_next++ % CTRL_POOL];
    if (*slot >= 0)
        close(*slot);
    *slot = fd;
}

static void ctrl_drain(ctrl_run_t *run)
{
    for (int k = 0; k < 2; k++) {
        for (;;) {
            int fds[IPCP_SOCK_MAX_FDS], nfds = 0;
            size_t len;
            if (ipcp__sock_recv(run->sock[k], ctrl_rxbuf, sizeof(ctrl_rxbuf),
                                &len, fds, IPCP_SOCK_MAX_FDS, &nfds,
                                0) != IPCP_OK)
                break;
            if (run->tap)
                run->tap(k, ctrl_rxbuf, len, nfds, run->tap_arg);
            for (int i = 0; i < nfds; i++)
                ctrl_pool_put(run, fds[i]);
        }
    }
}

/* Lets the staged transfers enqueue their chunks, as the progress loop
 * does between messages. */
static void ctrl_settle(ctrl_run_t *run)
{
    for (int i = 0; i < 64 && ipcp__stage_poll(run->comm); i++)
        ;
    ctrl_drain(run);
}

/* ---- Descriptors a peer attaches ------------------------------------------
 */

static int ctrl_memfd(size_t size, int seal)
{
    int fd = memfd_create("fuzz", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0 || ftruncate(fd, (off_t)size) != 0)
        abort();
    if (seal &&
        fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0)
        abort();
    return fd;
}

static int ctrl_fd_make(ctrl_run_t *run, uint8_t b)
{
    const size_t sizes[] = {0,         1,       4096,           65536,
                            300 << 10, 1 << 20, ctrl_mbox_size, 4 << 20};
    size_t size = sizes[(b >> 3) & 7];
    int fd = -1, sv[2];
    switch (b & 7) {
    case CTRL_FD_MEMFD_SEALED:
        return ctrl_memfd(size, 1);
    case CTRL_FD_MEMFD:
        return ctrl_memfd(size, 0);
    case CTRL_FD_PIPE:
        if (pipe2(sv, O_CLOEXEC) != 0)
            abort();
        close(sv[1]);
        return sv[0];
    case CTRL_FD_EVENTFD:
        fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        break;
    case CTRL_FD_FILE:
        fd = open("/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
        if (fd < 0) { /* a file system without O_TMPFILE */
            char name[] = "/tmp/ipcpipe-fuzz-XXXXXX";
            if ((fd = mkostemp(name, O_CLOEXEC)) >= 0)
                unlink(name);
        }
        if (fd >= 0 && ftruncate(fd, (off_t)size) != 0)
            abort();
        break;
    case CTRL_FD_POOL:
        fd = run->pool[(b >> 3) % CTRL_POOL];
        return fd >= 0 ? fcntl(fd, F_DUPFD_CLOEXEC, 0) : -1;
    case CTRL_FD_SOCKET:
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
            abort();
        close(sv[1]);
        return sv[0];
    default:
        fd = open("/dev/null", O_RDWR | O_CLOEXEC);
    }
    if (fd < 0)
        abort();
    return fd;
}

/* ---- Operations -----------------------------------------------------------
 */

static void *ctrl_buf(ctrl_run_t *run, size_t len, int from_region)
{
    if (from_region && run->region_ptr)
        return len <= run->region_len ? run->region_ptr : NULL;
    if (run->nbufs == CTRL_MAX_BUFS)
        return NULL;
    void *p = malloc(len ? len : 1);
    if (!p)
        abort();
    memset(p, 0x5a, len);
    run->bufs[run->nbufs++] = p;
    return p;
}

static ipcp_request_t *ctrl_req(ctrl_run_t *run, int type, int peer)
{
    ipcp_request_t *req = ipcp__req_new(run->comm, type);
    if (!req)
        abort();
    req->peer = peer;
    /* As ipcp__submit: the teardown frees the requests whose handles the
     * user holds. */
    if (ipcp__handle_new_owned(IPCP_HANDLE_REQ, req, run->comm->handle,
                               &req->handle) != IPCP_OK)
        abort();
    return req;
}

static void ctrl_op_msg(ctrl_run_t *run, fuzz_in_t *in)
{
    static _Alignas(8) unsigned char msg[IPCP_SOCK_MSG_MAX];
    uint8_t b = fuzz_u8(in);
    ipcp__peer_t *peer = &run->comm->peers[run->others[b & 1]];
    int nfds = (b >> 1) & 3, fds[IPCP_SOCK_MAX_FDS];
    uint8_t kinds[IPCP_SOCK_MAX_FDS];
    for (int i = 0; i < nfds; i++)
        kinds[i] = fuzz_u8(in);
    size_t len, want = fuzz_u16(in);
    const uint8_t *p = fuzz_bytes(in, want, &len);
    memcpy(msg, p, len);
    uint32_t type = 0;
    if (len >= sizeof(type))
        memcpy(&type, msg, sizeof(type));
    /* A mailbox offer's ring: a memfd of the ring's size, sealed unless
     * its kind is a plain memfd's. */
    for (int i = 0; i < nfds; i++)
        fds[i] =
            type == IPCP_MSG_MBOX && i == 0
                ? ctrl_memfd(ctrl_mbox_size, (kinds[i] & 7) != CTRL_FD_MEMFD)
                : ctrl_fd_make(run, kinds[i]);
    /* A pool entry may be empty: the descriptors that exist are sent. */
    int n = 0;
    for (int i = 0; i < nfds; i++)
        if (fds[i] >= 0)
            fds[n++] = fds[i];
    if (ipcp__peer_closed(peer)) {
        for (int i = 0; i < n; i++)
            close(fds[i]);
        return;
    }
    ipcp__dispatch(run->comm, peer, msg, len, fds, n);
}

static void ctrl_op_twosided(ctrl_run_t *run, fuzz_in_t *in, int type)
{
    uint8_t b = fuzz_u8(in);
    uint8_t t = fuzz_u8(in);
    int tag = t & 0x80 ? IPCP_BAR_TAG : t % 4;
    size_t len = fuzz_u16(in) * (b & 4 ? 64u : 1u);
    void *buf = ctrl_buf(run, len, b & 2);
    if (!buf)
        return;
    ipcp_request_t *req = ctrl_req(run, type, run->others[b & 1]);
    req->tag = tag;
    req->buf = buf;
    req->len = len;
    const ipcp__backend_ops_t *ops;
    ipcp__backend_t *be;
    ipcp__mem_attr(run->comm, buf, len, &req->attr, &ops, &be);
    ipcp__match_cmd(run->comm, req);
}

static void ctrl_op_region(ctrl_run_t *run, fuzz_in_t *in)
{
    uint8_t b = fuzz_u8(in);
    size_t len = fuzz_u16(in);
    void *ptr;
    if (!len)
        return;
    if (b & 1) {
        ipcp_mem_t *mem = calloc(1, sizeof(*mem));
        if (!mem || !(ptr = ctrl_buf(run, len, 0)))
            abort();
        mem->magic = IPCP_MEM_MAGIC;
        mem->comm = run->comm;
        if (ipcp__mem_register(run->comm, ptr, len, mem) != IPCP_OK) {
            free(mem);
            return;
        }
    } else if (ipcp__mem_alloc(run->comm, len, IPCP_MEM_HOST, -1, &ptr) !=
               IPCP_OK) {
        return;
    }
    run->region_ptr = ptr;
    run->region_len = len;
}

static void ctrl_op_onesided(ctrl_run_t *run, fuzz_in_t *in)
{
    static const int types[] = {IPCP_REQ_IMPORT, IPCP_REQ_PUT, IPCP_REQ_GET};
    uint8_t b = fuzz_u8(in);
    int peer = run->others[b & 1], type = types[(b >> 1) % 3];
    uint64_t reg_id = fuzz_u8(in);
    size_t off = fuzz_u16(in), len = fuzz_u16(in);
    ipcp_comm_t *comm = run->comm;
    ipcp_rmem_t *rm = calloc(1, sizeof(*rm));
    if (!rm)
        abort();
    /* What ipcp_rmem_import makes of a descriptor before the owner
     * answers: the region's length is the offset plus the length. */
    rm->magic = IPCP_RMEM_MAGIC;
    rm->comm = comm;
    rm->owner = peer;
    rm->reg_id = reg_id;
    rm->len = off + len;
    rm->type = IPCP_MEM_HOST;
    rm->mode = IPCP_RMEM_STAGED;
    atomic_init(&rm->valid, 1);
    pthread_mutex_lock(&comm->mem_lock);
    ipcp__list_push_back(&comm->rmems, &rm->link);
    pthread_mutex_unlock(&comm->mem_lock);
    ipcp_request_t *req = ctrl_req(run, type, peer);
    req->rmem = rm;
    if (type == IPCP_REQ_IMPORT) {
        ipcp__mem_import_cmd(comm, req);
        return;
    }
    void *buf = ctrl_buf(run, len, 0);
    if (!buf) {
        ipcp__req_complete(req, IPCP_ERR_NOMEM, "harness: no buffer");
        return;
    }
    req->buf = buf;
    req->len = len;
    req->offset = off;
    req->attr.type = IPCP_MEM_HOST;
    req->attr.device = -1;
    ipcp__match_cmd(comm, req);
}

static void ctrl_op_inbox(ctrl_run_t *run, fuzz_in_t *in)
{
    uint8_t b = fuzz_u8(in);
    ipcp__peer_t *peer = &run->comm->peers[run->others[b & 1]];
    size_t off = fuzz_u16(in), n, want = fuzz_u8(in);
    const uint8_t *p = fuzz_bytes(in, want, &n);
    if (!peer->inbox || ipcp__peer_closed(peer))
        return;
    off %= ctrl_mbox_size;
    n = ipcp__min(n, ctrl_mbox_size - off);
    memcpy((char *)peer->inbox + off, p, n);
    ipcp__mbox_read(run->comm, peer, ipcp__dispatch, ctrl_rxbuf,
                    sizeof(ctrl_rxbuf));
}

static void ctrl_op(ctrl_run_t *run, fuzz_in_t *in)
{
    uint8_t op = fuzz_u8(in);
    switch (op & 7) {
    case CTRL_OP_MSG:
        ctrl_op_msg(run, in);
        break;
    case CTRL_OP_RECV:
        ctrl_op_twosided(run, in, IPCP_REQ_RECV);
        break;
    case CTRL_OP_SEND:
        ctrl_op_twosided(run, in, IPCP_REQ_SEND);
        break;
    case CTRL_OP_REGION:
        ctrl_op_region(run, in);
        break;
    case CTRL_OP_ONESIDED:
        ctrl_op_onesided(run, in);
        break;
    case CTRL_OP_INBOX:
        ctrl_op_inbox(run, in);
        break;
    case CTRL_OP_DROP: {
        uint8_t b = fuzz_u8(in);
        ipcp_request_t *req = ctrl_req(run, IPCP_REQ_DROP, run->others[b & 1]);
        if (b & 2)
            snprintf(req->errmsg, sizeof(req->errmsg), "fuzzed drop");
        ipcp__peer_drop_cmd(run->comm, req);
        break;
    }
    default: {
        uint8_t b = fuzz_u8(in);
        run->comm->peers[run->others[b & 1]].pvm_to = (b >> 1) & 1;
    }
    }
}

/* ---- A run ----------------------------------------------------------------
 */

static int ctrl_count_fds(void)
{
    int n = 0;
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        abort();
    while (readdir(d))
        n++;
    closedir(d);
    return n;
}

int ctrl_env_run(const uint8_t *data, size_t size, ctrl_tap_fn tap, void *arg)
{
    ctrl_run_t run;
    fuzz_in_t in = {data, size};
    if (size < 1 || size > CTRL_MAX_INPUT)
        return -1;
    int fds_before = ctrl_count_fds();
    memset(&run, 0, sizeof(run));
    for (int i = 0; i < CTRL_POOL; i++)
        run.pool[i] = -1;
    run.tap = tap;
    run.tap_arg = arg;
    run.comm = ctrl_comm_new(fuzz_u8(&in), &run);
    /* What the progress thread says first. */
    ipcp__comm_announce_path(run.comm);
    ipcp__mbox_offer(run.comm);
    ctrl_settle(&run);
    for (int i = 0; i < CTRL_MAX_OPS && in.n; i++) {
        ctrl_op(&run, &in);
        ctrl_settle(&run);
    }
    ctrl_comm_free(run.comm);
    for (int k = 0; k < 2; k++)
        close(run.sock[k]);
    for (int i = 0; i < CTRL_POOL; i++)
        if (run.pool[i] >= 0)
            close(run.pool[i]);
    for (int i = 0; i < run.nbufs; i++)
        free(run.bufs[i]);
    int fds_after = ctrl_count_fds();
    if (fds_after != fds_before) {
        fprintf(stderr, "ctrl_env: %d descriptors before the run, %d after\n",
                fds_before, fds_after);
        abort();
    }
    return 0;
}
