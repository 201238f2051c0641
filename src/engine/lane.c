/* The small-message lane: stream-ordered messages of up to IPCPIPE_SMALL
 * bytes between GPUs, moved by kernels on the users' streams instead of the
 * RTS/CTS protocol and copy engines (design: docs/design-small-messages.md;
 * memory layout and kernel protocol: backend/lane_abi.h).
 *
 * Why: a stream-ordered 8-byte message through the protocol crosses the
 * progress threads, the sockets and several CUDA calls on each side, 20-30
 * us between two H200s; a kernel storing data and flag into the peer's
 * memory against a kernel spinning on its own memory took 4.8 us.
 *
 * The price is a contract, since a message numbered at the call cannot be
 * matched by tag: with IPCPIPE_SMALL set (the same on both ranks), every
 * stream-ordered send of at most that many device bytes takes the lane, and
 * so does every stream-ordered receive of at most that capacity; receives
 * must come in the order the peer sent.  The receiving kernel checks the
 * tag and the length, and a mismatch fails the receive (the message is
 * dropped), never delivering another message's bytes as this one's.
 *
 * Per peer: our block in our GPU's memory (inbox for the peer's messages,
 * credits for ours), made at our first lane operation with that peer and
 * sent in a LANE message; the peer's block, mapped here once both exist
 * (progress thread).  Kernels launched before that read the mapping's
 * address from a host word.  Host memory also holds the abort word and one
 * completion record per message in flight, which the progress thread
 * polls for user requests.  comm->lane_lock guards it all. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "common/time.h"
#include "engine/engine.h"
#include "engine/remote.h"

#define IPCP_LANE_SLOTS 64
/* Completion records per direction: at most this many messages of one
 * direction in flight. */
#define IPCP_LANE_RECS 4096
/* Longest the progress thread leaves the lanes alone while calls post. */
#define IPCP_LANE_POLL_NS 50000

typedef struct ipcp__lane_host {
    uint64_t peer_word; /* the peer's block as mapped here, or BROKEN */
    uint64_t abort;
    uint64_t pad[6];
    ipcp__lane_rec_t rec[2][IPCP_LANE_RECS]; /* [IPCP_LANE_SEND/RECV] */
} ipcp__lane_host_t;

struct ipcp__lane {
    int peer;
    int device; /* of our block; -1 until it exists */
    void *block, *block_handle;
    ipcp__export_t exp; /* our block's, until sent */
    int exp_fd;
    ipcp__lane_host_t *host;
    void *host_handle, *host_reg;
    int have_peer; /* the peer's LANE message came */
    ipcp__msg_lane_t peer_msg;
    int peer_fd;
    void *remote, *remote_handle; /* the peer's block mapped here */
    ipcp_status_t broken;         /* not IPCP_OK: unusable, why says why */
    char why[IPCP_ERRMSG_MAX];
    ipcp_status_t abort_st; /* set with the abort word */
    char abort_msg[IPCP_ERRMSG_MAX];
    uint64_t next[2]; /* next message number per direction */
    /* A record whose request the progress thread has not collected yet
     * (its kernel may be done) is not reused. */
    unsigned char pending[2][IPCP_LANE_RECS];
    ipcp__list_t reqs;
    int warned;     /* a request waited longer than IPCPIPE_TIMEOUT */
    int sent;       /* our LANE message went (or is going) out */
    int sent_block; /* ... with our block (status OK) */
    /* Our side broke after our block went out (a failed launch, the
     * peer's block that cannot be mapped here): a second LANE message
     * tells the peer, whose kernels would wait for us. */
    int stop_pending, stop_sent;
};

static uint32_t ipcp__lane_slot_bytes(size_t small)
{
    return (uint32_t)(IPCP_LANE_DATA_OFF + (small + 63) / 64 * 64);
}

int ipcp__lane_takes(const ipcp_comm_t *comm, const ipcp_request_t *req)
{
    size_t small = comm->cfg->small;
    return small > 0 && req->attr.type == IPCP_MEM_CUDA &&
           (req->type == IPCP_REQ_SEND || req->type == IPCP_REQ_RECV) &&
           req->len <= small;
}

/* Makes every kernel of the lane that waits leave (peer lost, finalize, a
 * broken lane); the first reason stays.  lane_lock held. */
static void ipcp__lane_stop(ipcp__lane_t *l, ipcp_status_t st, const char *msg)
{
    if (l->abort_st != IPCP_OK)
        return;
    l->abort_st = st;
    snprintf(l->abort_msg, sizeof(l->abort_msg), "%s", msg);
    if (l->host)
        __atomic_store_n(&l->host->abort, 1, __ATOMIC_RELEASE);
}

/* Marks the lane unusable; its kernels that wait for the peer's block
 * leave with IPCP_LANE_UNUSABLE. */
static void ipcp__lane_break(ipcp__lane_t *l, ipcp_status_t st, const char *why)
{
    if (l->broken != IPCP_OK)
        return;
    l->broken = st;
    snprintf(l->why, sizeof(l->why), "%s", why);
    IPCP_WARN(IPCP_SUB_ENGINE, "small-message lane with rank %d: %s", l->peer,
              why);
    if (l->host)
        __atomic_store_n(&l->host->peer_word, IPCP_LANE_BROKEN,
                         __ATOMIC_RELEASE);
    /* Kernels waiting for a message that will not come leave too. */
    char msg[IPCP_ERRMSG_MAX];
    snprintf(msg, sizeof(msg), "small-message lane with rank %d: %.200s",
             l->peer, why);
    ipcp__lane_stop(l, st, msg);
}

/* After a break of our own: the peer learns it from our LANE message when
 * that has not gone yet, else from a second one (lane_lock held). */
static void ipcp__lane_tell(ipcp_comm_t *comm, ipcp__lane_t *l)
{
    if (!l->sent_block || l->stop_pending)
        return;
    ipcp_request_t *req = ipcp__req_new(comm, IPCP_REQ_LANE);
    if (!req)
        return; /* the peer's kernels then wait until it is lost */
    l->stop_pending = 1;
    req->peer = l->peer;
    req->user = 0; /* nobody waits: freed when it ran */
    ipcp__comm_submit(comm, req);
}

static ipcp__lane_t *ipcp__lane_get(ipcp_comm_t *comm, int peer)
{
    if (!comm->lanes &&
        !(comm->lanes = calloc((size_t)comm->size, sizeof(*comm->lanes))))
        return NULL;
    ipcp__lane_t *l = comm->lanes[peer];
    if (l)
        return l;
    if (!(l = calloc(1, sizeof(*l))))
        return NULL;
    l->peer = peer;
    l->device = -1;
    l->exp_fd = -1;
    l->peer_fd = -1;
    ipcp__list_init(&l->reqs);
    /* Lost before its lane existed: ipcp__lane_abort found nothing to
     * abort, so the lane starts aborted. */
    if (atomic_load(&comm->peers[peer].lost) != 0) {
        char msg[64];
        snprintf(msg, sizeof(msg), "peer rank %d was lost",
                 ipcp__job_rank(comm, peer));
        ipcp__lane_stop(l, IPCP_ERR_PEER_LOST, msg);
    }
    comm->lanes[peer] = l;
    return l;
}

/* Maps the peer's block once both blocks exist (progress thread). */
static void ipcp__lane_connect(ipcp_comm_t *comm, ipcp__lane_t *l)
{
    char why[IPCP_ERRMSG_MAX];
    const ipcp__msg_lane_t *m = &l->peer_msg;
    uint32_t sb = ipcp__lane_slot_bytes(comm->cfg->small);
    uint64_t need = (uint64_t)IPCP_LANE_SLOTS * sb + IPCP_LANE_SLOTS * 8;
    if (!l->have_peer || l->remote)
        return;
    if (m->small != comm->cfg->small || m->nslots != IPCP_LANE_SLOTS ||
        m->slot_bytes != sb) {
        snprintf(why, sizeof(why),
                 "rank %d has IPCPIPE_SMALL=%u and %u slots, "
                 "this rank %zu and %d: set it the same on both",
                 l->peer, m->small, m->nslots, comm->cfg->small,
                 IPCP_LANE_SLOTS);
        ipcp__lane_break(l, IPCP_ERR_CONFIG, why);
    } else if (m->words_max != comm->cfg->small_words) {
        /* Compared whatever the peer's status: it may have broken its side
         * for this very difference before it sent its block. */
        snprintf(why, sizeof(why),
                 "rank %d has IPCPIPE_SMALL_WORDS=%u, this rank %zu: set it "
                 "the same on both",
                 l->peer, m->words_max, comm->cfg->small_words);
        ipcp__lane_break(l, IPCP_ERR_CONFIG, why);
    } else if (m->status != IPCP_OK) {
        snprintf(why, sizeof(why),
                 "rank %d could not set its side up (%s; "
                 "see its log)",
                 l->peer, ipcp_strerror(ipcp__peer_status(m->status)));
        ipcp__lane_break(l,
                         m->status == IPCP_ERR_CONFIG ? IPCP_ERR_CONFIG
                                                      : IPCP_ERR_UNSUPPORTED,
                         why);
    } else if (m->exp.size < need) {
        snprintf(why, sizeof(why),
                 "rank %d's block has %llu bytes, %llu "
                 "needed",
                 l->peer, (unsigned long long)m->exp.size,
                 (unsigned long long)need);
        ipcp__lane_break(l, IPCP_ERR_BAD_DESCRIPTOR, why);
    } else if (l->device < 0 && l->broken == IPCP_OK) {
        return; /* mapped once our block exists; the fd waits */
    } else if (l->broken != IPCP_OK) {
        /* nothing to map: the fd goes */
    } else if (comm->dev_ops->mem_import(ipcp__dev(comm), &m->exp, &l->peer_fd,
                                         l->peer_fd >= 0, l->device, &l->remote,
                                         &l->remote_handle) != IPCP_OK) {
        l->remote = NULL;
        snprintf(why, sizeof(why),
                 "GPU %d cannot map rank %d's GPU memory "
                 "(%s); the lane needs GPUs that reach each other (peer "
                 "access, or one GPU); unset IPCPIPE_SMALL",
                 l->device, l->peer, ipcp__last_error());
        ipcp__lane_break(l, IPCP_ERR_UNSUPPORTED, why);
    } else {
        __atomic_store_n(&l->host->peer_word, (uint64_t)(uintptr_t)l->remote,
                         __ATOMIC_RELEASE);
        IPCP_DEBUG(IPCP_SUB_ENGINE,
                   "small-message lane with rank %d mapped "
                   "on device %d",
                   l->peer, l->device);
    }
    if (l->peer_fd >= 0)
        close(l->peer_fd);
    l->peer_fd = -1;
    if (l->broken != IPCP_OK)
        ipcp__lane_tell(comm, l);
}

static void ipcp__lane_free_block(ipcp_comm_t *comm, ipcp__lane_t *l)
{
    if (l->exp_fd >= 0)
        close(l->exp_fd);
    l->exp_fd = -1;
    if (l->host_reg)
        comm->dev_ops->shm_unregister(ipcp__dev(comm), l->host_reg);
    if (l->host)
        comm->host_ops->mem_free(comm->host, l->host_handle);
    if (l->block)
        comm->dev_ops->mem_free(ipcp__dev(comm), l->block_handle);
    l->host_reg = NULL;
    l->host = NULL;
    l->block = NULL;
}

/* Our block on device, zeroed and exported, and the host words (user
 * thread, lane_lock held).  Then the progress thread sends it.  A failure
 * breaks the lane (l->why); the return is only about the request. */
static ipcp_status_t ipcp__lane_create(ipcp_comm_t *comm, ipcp__lane_t *l,
                                       int device)
{
    const ipcp__backend_ops_t *ops = comm->dev_ops;
    ipcp__backend_t *be = ipcp__dev(comm);
    ipcp_status_t st;
    uint32_t sb = ipcp__lane_slot_bytes(comm->cfg->small);
    size_t len = (size_t)IPCP_LANE_SLOTS * sb + IPCP_LANE_SLOTS * 8;

    if (!ops->lane_prepare || !ops->lane_launch)
        st = ipcp__fail(IPCP_LOG_WARN, IPCP_SUB_API, IPCP_ERR_UNSUPPORTED,
                        "IPCPIPE_SMALL is set, but this build of ipcpipe has "
                        "no small-message lane (nvcc was not found when it "
                        "was built)");
    else if ((st = ops->mem_alloc(be, len, device, &l->block,
                                  &l->block_handle)) != IPCP_OK)
        l->block = NULL;
    else if ((st = ops->lane_prepare(be, device, l->block, len)) == IPCP_OK &&
             (st = ops->mem_export(be, l->block_handle, l->block, len, &l->exp,
                                   &l->exp_fd)) == IPCP_OK &&
             (st = comm->host_ops->mem_alloc(comm->host, sizeof(*l->host), -1,
                                             (void **)&l->host,
                                             &l->host_handle)) != IPCP_OK)
        l->host = NULL;
    if (st == IPCP_OK &&
        (st = ops->shm_register(be, l->host, sizeof(*l->host), device,
                                &l->host_reg)) != IPCP_OK)
        l->host_reg = NULL;
    if (st == IPCP_OK) {
        memset(l->host, 0, sizeof(*l->host));
        l->device = device;
        if (l->abort_st != IPCP_OK) /* the peer was lost before */
            l->host->abort = 1;
    } else {
        ipcp__lane_free_block(comm, l);
        char why[IPCP_ERRMSG_MAX];
        snprintf(why, sizeof(why), "setting it up on device %d failed: %s",
                 device, ipcp__last_error());
        ipcp__lane_break(l, st, why);
    }
    /* The peer hears either way, so that its kernels never wait for a
     * block that will not come. */
    ipcp_request_t *req = ipcp__req_new(comm, IPCP_REQ_LANE);
    if (!req)
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_API, IPCP_ERR_NOMEM,
                          "no memory for a request");
    req->peer = l->peer;
    req->user = 0; /* nobody waits: freed when it ran */
    ipcp__comm_submit(comm, req);
    return IPCP_OK;
}

void ipcp__lane_preload(ipcp_comm_t *comm, int device)
{
    if (!comm->cfg->small || !comm->dev_ops || !comm->dev_ops->lane_prepare)
        return;
    ipcp__lock(&comm->lane_lock, IPCP_LOCK_LANE);
    for (int r = 0; r < comm->size; r++) {
        ipcp__lane_t *l = r == comm->rank ? NULL : ipcp__lane_get(comm, r);
        if (l && l->device < 0 && l->broken == IPCP_OK)
            ipcp__lane_create(comm, l, device);
    }
    ipcp__unlock(&comm->lane_lock, IPCP_LOCK_LANE);
}

/* Our LANE message to l's peer: our block, or why we have none (lane_lock
 * held; posted after it is released, since a failing post declares the
 * peer lost, which takes the lock). */
static void ipcp__lane_msg(ipcp_comm_t *comm, ipcp__lane_t *l,
                           ipcp__msg_lane_t *m, int *fd)
{
    memset(m, 0, sizeof(*m));
    m->hdr.type = IPCP_MSG_LANE;
    /* A lane broken before this went out is not offered at all. */
    m->status = (int32_t)l->broken;
    m->small = (uint32_t)comm->cfg->small;
    m->nslots = IPCP_LANE_SLOTS;
    m->slot_bytes = ipcp__lane_slot_bytes(comm->cfg->small);
    m->words_max = (uint32_t)comm->cfg->small_words;
    *fd = -1;
    if (m->status == IPCP_OK) {
        m->exp = l->exp;
        *fd = l->exp_fd;
        l->sent_block = 1;
    } else if (l->exp_fd >= 0) {
        close(l->exp_fd);
    }
    l->exp_fd = -1;
    l->sent = 1;
}

static void ipcp__lane_post_msg(ipcp_comm_t *comm, ipcp__peer_t *peer,
                                const ipcp__msg_lane_t *m, int fd)
{
    if (!ipcp__peer_closed(peer))
        ipcp__peer_post(comm, peer, m, sizeof(*m), fd >= 0 ? &fd : NULL,
                        fd >= 0);
    else if (fd >= 0)
        close(fd);
}

/* Progress thread: sends our block (or that we have none), and later
 * that our side broke. */
void ipcp__lane_cmd(ipcp_comm_t *comm, ipcp_request_t *req)
{
    ipcp__msg_lane_t m, stop;
    int fd = -1;
    ipcp__lock(&comm->lane_lock, IPCP_LOCK_LANE);
    ipcp__lane_t *l = comm->lanes[req->peer];
    int send = !l->sent;
    if (send)
        ipcp__lane_msg(comm, l, &m, &fd);
    /* Connecting may break the lane right after our block went out. */
    ipcp__lane_connect(comm, l);
    int send_stop = l->stop_pending && !l->stop_sent;
    if (send_stop) {
        memset(&stop, 0, sizeof(stop));
        stop.hdr.type = IPCP_MSG_LANE;
        stop.status = (int32_t)l->broken;
        l->stop_sent = 1;
    }
    ipcp__unlock(&comm->lane_lock, IPCP_LOCK_LANE);
    if (send)
        ipcp__lane_post_msg(comm, &comm->peers[req->peer], &m, fd);
    if (send_stop)
        ipcp__lane_post_msg(comm, &comm->peers[req->peer], &stop, -1);
    ipcp__req_complete(req, IPCP_OK, NULL);
}

void ipcp__lane_on_msg(ipcp_comm_t *comm, ipcp__peer_t *peer, const void *msg,
                       size_t len, int *fds, int nfds)
{
    const ipcp__msg_lane_t *m = msg;
    int fd = nfds > 0 ? fds[0] : -1;
    for (int i = 1; i < nfds; i++)
        close(fds[i]);
    ipcp__lock(&comm->lane_lock, IPCP_LOCK_LANE);
    ipcp__lane_t *l =
        len >= sizeof(*m) ? ipcp__lane_get(comm, peer->rank) : NULL;
    if (l && l->have_peer && m->status != IPCP_OK && fd < 0) {
        /* The peer's side broke after its block came: a message of ours
         * it numbered was never launched, so our kernels would wait. */
        char why[IPCP_ERRMSG_MAX];
        ipcp_status_t pst = ipcp__peer_status(m->status);
        snprintf(why, sizeof(why),
                 "rank %d's side of the lane broke (%s; see its log)", l->peer,
                 ipcp_strerror(pst));
        /* A setting or a mapping keeps its status; a failure at run time
         * leaves this side in a broken state. */
        ipcp__lane_break(l,
                         pst == IPCP_ERR_CONFIG || pst == IPCP_ERR_UNSUPPORTED
                             ? pst
                             : IPCP_ERR_STATE,
                         why);
        ipcp__unlock(&comm->lane_lock, IPCP_LOCK_LANE);
        return;
    }
    if (!l || l->have_peer) {
        ipcp__unlock(&comm->lane_lock, IPCP_LOCK_LANE);
        if (fd >= 0)
            close(fd);
        ipcp__peer_lost(comm, peer,
                        l ? "a second small-message lane block"
                          : "malformed or unexpected LANE message");
        return;
    }
    l->peer_msg = *m;
    l->peer_fd = fd;
    l->have_peer = 1;
    /* A rank that will never make a block says so at once, so that the
     * peer's kernels do not wait for it: no lane in this build, or a
     * setting that differs (ipcp__lane_connect breaks the lane).  A rank
     * whose device backend has not opened yet may still make one (it
     * opens on first use, engine/dev.c): the peer's block waits here. */
    if (!ipcp__dev_possible(comm) || !comm->dev_ops->lane_prepare)
        ipcp__lane_break(l, IPCP_ERR_UNSUPPORTED,
                         "this rank has no small-message lane (no CUDA, or "
                         "built without nvcc)");
    ipcp__lane_connect(comm, l);
    ipcp__msg_lane_t reply;
    int rfd = -1, answer = l->device < 0 && l->broken != IPCP_OK && !l->sent;
    if (answer)
        ipcp__lane_msg(comm, l, &reply, &rfd);
    ipcp__unlock(&comm->lane_lock, IPCP_LOCK_LANE);
    if (answer)
        ipcp__lane_post_msg(comm, peer, &reply, rfd);
}

/* Where message k of direction dir records its outcome. */
static ipcp__lane_rec_t *ipcp__lane_rec(ipcp__lane_t *l, int dir, uint64_t k)
{
    return &l->host->rec[dir][k % IPCP_LANE_RECS];
}

static int ipcp__lane_poll_one(ipcp_comm_t *comm, ipcp__lane_t *l);

/* A record holds message k's outcome, or an older message's (k - R): the
 * engine reuses it only once that one was done. */
static int ipcp__lane_rec_done(ipcp__lane_t *l, int dir, uint64_t k)
{
    uint64_t v =
        __atomic_load_n(&ipcp__lane_rec(l, dir, k)->done, __ATOMIC_ACQUIRE);
    return IPCP_LANE_DONE_SEQ(v) == ((k + 1) & IPCP_LANE_SEQ_MASK);
}

/* Numbers the message and fills its kernel's arguments (lane_lock held).
 * Its record must be free: the kernel of message k - R done, and its
 * request (if any) collected. */
static ipcp_status_t ipcp__lane_reserve(ipcp_comm_t *comm, ipcp__lane_t *l,
                                        const ipcp_request_t *req, int dir,
                                        int tracked, ipcp__lane_kargs_t *a)
{
    uint64_t k = l->next[dir];
    unsigned r = (unsigned)(k % IPCP_LANE_RECS);

    /* The progress thread leaves the lanes alone while calls post (see
     * ipcp__lane_poll): a record still held by a finished request is
     * collected here. */
    if (l->pending[dir][r])
        ipcp__lane_poll_one(comm, l);
    if (l->pending[dir][r] ||
        (k >= IPCP_LANE_RECS &&
         !ipcp__lane_rec_done(l, dir, k - IPCP_LANE_RECS)))
        return ipcp__fail(IPCP_LOG_WARN, IPCP_SUB_API, IPCP_ERR_NOMEM,
                          "more than %d small messages %s rank %d in flight",
                          IPCP_LANE_RECS, dir == IPCP_LANE_SEND ? "to" : "from",
                          l->peer);
    memset(a, 0, sizeof(*a));
    a->buf = (uint64_t)(uintptr_t)req->buf;
    a->len = req->len;
    a->k = k;
    a->local = (uint64_t)(uintptr_t)l->block;
    a->remote = (uint64_t)(uintptr_t)l->remote;
    a->peer_word = (uint64_t)(uintptr_t)&l->host->peer_word;
    a->abort = (uint64_t)(uintptr_t)&l->host->abort;
    a->rec = (uint64_t)(uintptr_t)ipcp__lane_rec(l, dir, k);
    a->tag = req->tag;
    a->nslots = IPCP_LANE_SLOTS;
    a->slot_bytes = ipcp__lane_slot_bytes(comm->cfg->small);
    a->words_max = (uint32_t)comm->cfg->small_words;
    l->next[dir] = k + 1;
    l->pending[dir][r] = (unsigned char)tracked;
    return IPCP_OK;
}

/* The checks and the numbering, under lane_lock. */
static ipcp_status_t ipcp__lane_prepare(ipcp_comm_t *comm, ipcp_request_t *req,
                                        int dir, int tracked, ipcp__lane_t **lp,
                                        ipcp__lane_kargs_t *a)
{
    int device = req->attr.device;
    ipcp_status_t st = IPCP_OK;
    ipcp__lane_t *l = ipcp__lane_get(comm, req->peer);
    *lp = l;
    if (!l)
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_API, IPCP_ERR_NOMEM,
                          "no memory for a small-message lane");
    if (l->device < 0 && l->broken == IPCP_OK)
        st = ipcp__lane_create(comm, l, device);
    if (st != IPCP_OK)
        return st;
    if (l->broken != IPCP_OK)
        return ipcp__fail(IPCP_LOG_INFO, IPCP_SUB_API, l->broken,
                          "small-message lane with rank %d: %s", l->peer,
                          l->why);
    /* A send would report what never arrives; a receive may still find a
     * message that came before the loss (its kernel looks first). */
    if (l->abort_st != IPCP_OK && dir == IPCP_LANE_SEND)
        return ipcp__fail(IPCP_LOG_INFO, IPCP_SUB_API, l->abort_st, "%s",
                          l->abort_msg);
    if (l->device != device)
        return ipcp__fail(IPCP_LOG_INFO, IPCP_SUB_API, IPCP_ERR_UNSUPPORTED,
                          "the small-message lane with rank %d is on device "
                          "%d and %p is on device %d; one device per peer can "
                          "use the lane (IPCPIPE_SMALL)",
                          l->peer, l->device, req->buf, device);
    return ipcp__lane_reserve(comm, l, req, dir, tracked, a);
}

/* The kernel is launched outside lane_lock: a launch can block while the
 * stream's launch queue is full, and the progress thread needs the lock to
 * publish mappings and collect completions.  A request is listed in the
 * same hold of the lock that numbers its message (each acquisition the
 * progress thread contends costs the caller more than the critical
 * section): the poll cannot complete it early, as only its kernel, launched
 * after, or the failure below writes its record. */
static ipcp_status_t ipcp__lane_post_(ipcp_comm_t *comm, ipcp_request_t *req,
                                      void *stream, ipcp_request_t **out)
{
    int dir = req->type == IPCP_REQ_RECV ? IPCP_LANE_RECV : IPCP_LANE_SEND;
    int tracked = out != NULL;
    ipcp__lane_kargs_t a;
    ipcp__lane_t *l = NULL;
    int wake = 0;

    ipcp__lock(&comm->lane_lock, IPCP_LOCK_LANE);
    ipcp_status_t st = ipcp__lane_prepare(comm, req, dir, tracked, &l, &a);
    if (st == IPCP_OK && tracked) {
        req->lane_k = a.k;
        req->lane_dir = dir;
        req->lane_t0 = ipcp__now_s();
        req->user = 1;
        req->path = IPCP_PATH_LANE;
        ipcp__list_push_back(&l->reqs, &req->link);
        /* The progress thread polls while any is pending; wake it for
         * the first. */
        wake = atomic_fetch_add(&comm->lane_reqs, 1) == 0;
    }
    ipcp__unlock(&comm->lane_lock, IPCP_LOCK_LANE);
    int numbered = st == IPCP_OK;
    if (numbered)
        st = comm->dev_ops->lane_launch(ipcp__dev(comm), l->device, stream, dir,
                                        &a);
    if (st != IPCP_OK && numbered) {
        /* Message a.k was numbered but never launched: the peer's side of
         * the numbering cannot follow any more. */
        char why[IPCP_ERRMSG_MAX];
        snprintf(why, sizeof(why), "launching message %llu failed: %s",
                 (unsigned long long)a.k, ipcp__last_error());
        ipcp__lock(&comm->lane_lock, IPCP_LOCK_LANE);
        if (tracked) { /* the call fails; no request to wait for */
            ipcp__list_del(&req->link);
            atomic_fetch_sub(&comm->lane_reqs, 1);
        }
        l->pending[dir][a.k % IPCP_LANE_RECS] = 0;
        /* Its record, which no kernel will write, says so: finalize
         * waits for every numbered message's record. */
        __atomic_store_n(&ipcp__lane_rec(l, dir, a.k)->done,
                         IPCP_LANE_DONE(a.k, IPCP_LANE_UNUSABLE, 0),
                         __ATOMIC_RELEASE);
        ipcp__lane_break(l, st, why);
        ipcp__lane_tell(comm, l);
        ipcp__unlock(&comm->lane_lock, IPCP_LOCK_LANE);
    }
    if (wake)
        ipcp__comm_wake(comm);
    if (st != IPCP_OK || !tracked) {
        ipcp__req_free(req);
        return st;
    }
    *out = req;
    return IPCP_OK;
}

ipcp_status_t ipcp__lane_post(ipcp_comm_t *comm, ipcp_request_t *req,
                              void *stream, ipcp_request_t **out)
{
    atomic_fetch_add_explicit(&comm->lane_posting, 1, memory_order_relaxed);
    ipcp_status_t st = ipcp__lane_post_(comm, req, stream, out);
    atomic_fetch_sub_explicit(&comm->lane_posting, 1, memory_order_relaxed);
    return st;
}

/* A finished message's outcome, as a request status and message. */
static ipcp_status_t ipcp__lane_outcome(ipcp__lane_t *l, ipcp_request_t *req,
                                        char *msg, size_t len)
{
    const ipcp__lane_rec_t *r = ipcp__lane_rec(l, req->lane_dir, req->lane_k);
    uint64_t done = __atomic_load_n(&r->done, __ATOMIC_ACQUIRE);
    unsigned code = IPCP_LANE_DONE_OUTCOME(done);
    uint32_t v = IPCP_LANE_DONE_VALUE(done);
    if (code == IPCP_LANE_TAG)
        v = (uint32_t)__atomic_load_n(&r->info, __ATOMIC_ACQUIRE);
    unsigned long long k = (unsigned long long)req->lane_k;
    switch (code) {
    case IPCP_LANE_OK:
        req->nbytes = v;
        return IPCP_OK;
    case IPCP_LANE_ABORTED:
        snprintf(msg, len, "%s", l->abort_msg);
        return l->abort_st != IPCP_OK ? l->abort_st : IPCP_ERR_STATE;
    case IPCP_LANE_TAG:
        snprintf(msg, len,
                 "small-message lane: message %llu from rank %d has "
                 "tag %d, this receive tag %d; with IPCPIPE_SMALL set, post "
                 "stream-ordered receives of up to IPCPIPE_SMALL bytes in the "
                 "order the peer sends (the message was dropped)",
                 k, l->peer, (int32_t)v, req->tag);
        return IPCP_ERR_STATE;
    case IPCP_LANE_TRUNC:
        snprintf(msg, len,
                 "small-message lane: message %llu from rank %d has "
                 "%u bytes, more than the receive's %zu (nothing written; the "
                 "message was dropped)",
                 k, l->peer, v, req->len);
        return IPCP_ERR_TRUNCATED;
    case IPCP_LANE_UNUSABLE:
        snprintf(msg, len, "small-message lane with rank %d: %.200s", l->peer,
                 l->why[0] ? l->why : "the peer's side is unusable");
        return l->broken != IPCP_OK ? l->broken : IPCP_ERR_UNSUPPORTED;
    default:
        snprintf(msg, len, "small-message lane: unknown outcome %u", code);
        return IPCP_ERR_STATE;
    }
}

/* Completes the finished requests of one lane (lane_lock held). */
static int ipcp__lane_poll_one(ipcp_comm_t *comm, ipcp__lane_t *l)
{
    ipcp__list_t *e, *tmp;
    char msg[IPCP_ERRMSG_MAX];
    int n = 0;
    ipcp__list_for_each_safe(e, tmp, &l->reqs)
    {
        ipcp_request_t *req = ipcp__list_entry(e, ipcp_request_t, link);
        if (!ipcp__lane_rec_done(l, req->lane_dir, req->lane_k)) {
            /* The usual cause is a broken contract that no kernel can see:
             * the peer used a plain call, or a larger receive, for a
             * message this side moves through the lane. */
            if (!l->warned &&
                ipcp__now_s() - req->lane_t0 > comm->cfg->timeout_s) {
                l->warned = 1;
                IPCP_WARN(IPCP_SUB_ENGINE,
                          "small-message lane: %s %llu %s "
                          "rank %d has waited more than %.0f s; with "
                          "IPCPIPE_SMALL set, both ranks must use the "
                          "stream-ordered calls for messages of up to "
                          "IPCPIPE_SMALL bytes",
                          req->lane_dir ? "receive" : "send",
                          (unsigned long long)req->lane_k,
                          req->lane_dir ? "from" : "to", l->peer,
                          comm->cfg->timeout_s);
            }
            continue;
        }
        ipcp__list_del(e);
        atomic_fetch_sub(&comm->lane_reqs, 1);
        l->pending[req->lane_dir][req->lane_k % IPCP_LANE_RECS] = 0;
        msg[0] = 0;
        ipcp_status_t st = ipcp__lane_outcome(l, req, msg, sizeof(msg));
        ipcp__req_complete(req, st, msg);
        n++;
    }
    return n;
}

int ipcp__lane_poll(ipcp_comm_t *comm)
{
    int n = 0;
    if (atomic_load_explicit(&comm->lane_reqs, memory_order_acquire) == 0)
        return 0;
    /* Rarely while a user's thread posts: a burst of small messages is
     * paced by the calls (about 3 us each, most of it the kernel launch),
     * and each time this thread held lane_lock or comm->lock under one it
     * cost the call about 2 us (H200 VM: 8-byte half round trip 6.8-7.1 us
     * before, see NOTES.md).  The poster collects records it needs itself
     * (ipcp__lane_reserve); a request another thread waits for is still
     * completed within IPCP_LANE_POLL_NS. */
    uint64_t now = ipcp__now_ns();
    if ((atomic_load_explicit(&comm->lane_posting, memory_order_relaxed) > 0 &&
         now - comm->lane_poll_ns < IPCP_LANE_POLL_NS) ||
        ipcp__trylock(&comm->lane_lock, IPCP_LOCK_LANE) != 0)
        return 1;
    comm->lane_poll_ns = now;
    for (int r = 0; r < comm->size; r++)
        if (comm->lanes && comm->lanes[r])
            n += ipcp__lane_poll_one(comm, comm->lanes[r]);
    ipcp__unlock(&comm->lane_lock, IPCP_LOCK_LANE);
    return n;
}

void ipcp__lane_abort(ipcp_comm_t *comm, int peer, ipcp_status_t st,
                      const char *msg)
{
    ipcp__lock(&comm->lane_lock, IPCP_LOCK_LANE);
    ipcp__lane_t *l = comm->lanes ? comm->lanes[peer] : NULL;
    if (l)
        ipcp__lane_stop(l, st, msg);
    ipcp__unlock(&comm->lane_lock, IPCP_LOCK_LANE);
}

/* Whether every kernel launched on the lane wrote its record. */
static int ipcp__lane_idle(ipcp__lane_t *l)
{
    for (int dir = 0; dir < 2; dir++) {
        uint64_t n = l->next[dir];
        uint64_t from = n > IPCP_LANE_RECS ? n - IPCP_LANE_RECS : 0;
        for (uint64_t k = from; k < n; k++)
            if (!ipcp__lane_rec_done(l, dir, k))
                return 0;
    }
    return 1;
}

void ipcp__lane_teardown(ipcp_comm_t *comm)
{
    if (!comm->lanes)
        return;
    double until = ipcp__now_s() + comm->cfg->timeout_s;
    for (int r = 0; r < comm->size; r++) {
        ipcp__lane_t *l = comm->lanes[r];
        if (!l)
            continue;
        ipcp__lane_abort(comm, r, IPCP_ERR_STATE,
                         "finalized while the small-message lane waited");
        /* A kernel still queued behind a user's work would touch the block
         * and the host words later: wait for each, and keep the memory of
         * a lane whose kernels never ran rather than free it under them. */
        int idle = !l->host;
        while (!idle && !(idle = ipcp__lane_idle(l)) && ipcp__now_s() < until)
            usleep(100);
        ipcp__lock(&comm->lane_lock, IPCP_LOCK_LANE);
        ipcp__lane_poll_one(comm, l);
        ipcp__list_t *e;
        while ((e = ipcp__list_pop_front(&l->reqs))) {
            atomic_fetch_sub(&comm->lane_reqs, 1);
            ipcp__req_complete(ipcp__list_entry(e, ipcp_request_t, link),
                               IPCP_ERR_STATE,
                               "finalized before its stream reached it");
        }
        ipcp__unlock(&comm->lane_lock, IPCP_LOCK_LANE);
        if (!idle) {
            IPCP_WARN(IPCP_SUB_ENGINE,
                      "small-message lane with rank %d: "
                      "kernels still queued at finalize; its memory and the "
                      "backends are left as they are",
                      r);
            comm->lane_leaked = 1;
            if (l->exp_fd >= 0)
                close(l->exp_fd);
        } else {
            if (l->remote)
                comm->dev_ops->mem_unimport(ipcp__dev(comm), l->remote_handle);
            ipcp__lane_free_block(comm, l);
        }
        if (l->peer_fd >= 0)
            close(l->peer_fd);
        free(l);
        comm->lanes[r] = NULL;
    }
    free(comm->lanes);
    comm->lanes = NULL;
}
