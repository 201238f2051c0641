/* Handle lifetimes: a request already waited for, a registration already
 * deregistered, an imported region already released, anything after
 * ipcp_finalize, a made-up value and a handle of another type are refused
 * with their status and the exact message, and never touch the object that
 * took the freed one's place.
 *
 *   test_api_handles --case NAME
 *
 * comm_aba, mem_twice, made_up and race_release join a one-rank job in
 * this process; the others run 2 ranks through t_mp_main. */
#include "apitest.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <time.h>
#include <unistd.h>

#include "ipcpipe_cuda.h"

enum {
    TAG_A = 1,
    TAG_B = 2,
    TAG_GO = 3,
    TAG_DESC = 4,
    TAG_NEVER = 5,
    TAG_UNREAD = 6
};
enum { RACE_ROUNDS = 2000 };

#define GONE_COMM "already finalized"
#define GONE_REQ                                                               \
    "already completed and freed, or its communicator was finalized"
#define GONE_MEM   "already deregistered, or its communicator was finalized"
#define GONE_RMEM  "already released, or its communicator was finalized"
#define NOT_ISSUED "(not a value this library issued)"

typedef struct desc_msg {
    uint64_t len;
    unsigned char desc[IPCP_DESC_MAX];
} desc_msg_t;

/* The last error must be exactly the formatted message. */
#define T_LAST(...) check_last(__LINE__, __VA_ARGS__)
/* expr must return st, with exactly the formatted message. */
#define T_ERR(expr, st, ...)                                                   \
    do {                                                                       \
        T_STATUS(expr, st);                                                    \
        check_last(__LINE__, __VA_ARGS__);                                     \
    } while (0)

static void check_last(int line, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void check_last(int line, const char *fmt, ...)
{
    char want[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(want, sizeof want, fmt, ap);
    va_end(ap);
    if (strcmp(ipcp_last_error(), want) != 0)
        T_FAIL("line %d: last error \"%s\", expected \"%s\"", line,
               ipcp_last_error(), want);
}

/* "0x..." of a handle, in a static rotating buffer. */
static const char *hex(const void *h)
{
    static char bufs[8][24];
    static int next;
    char *b = bufs[next++ % 8];
    snprintf(b, sizeof bufs[0], "0x%llx", (unsigned long long)(uintptr_t)h);
    return b;
}

static ipcp_comm_t *unit_init(void)
{
    static char job[64];
    ipcp_comm_params_t p;
    ipcp_comm_t *comm = NULL;
    snprintf(job, sizeof job, "apihandles-%ld", (long)getpid());
    ipcp_comm_params_init(&p);
    p.rank = 0;
    p.size = 1;
    p.job_id = job;
    T_OK(ipcp_init(&p, &comm));
    T_CHECK(comm != NULL);
    return comm;
}

/* ---------------------------------------------------------------- unit */

/* A finalized communicator stays finalized (IPCP_ERR_STATE) even when the
 * next one is allocated where it was. */
static int case_comm_aba(void)
{
    ipcp_comm_t *old = unit_init();
    T_OK(ipcp_finalize(old));
    ipcp_comm_t *comm = unit_init();
    T_CHECK(comm != old);
    T_ERR(ipcp_barrier(old), IPCP_ERR_STATE,
          "communicator handle %s is stale: " GONE_COMM, hex(old));
    T_EQ_INT(ipcp_comm_rank(old), -1);
    T_LAST("communicator handle %s is stale: " GONE_COMM, hex(old));
    T_ERR(ipcp_finalize(old), IPCP_ERR_STATE,
          "communicator handle %s is stale: " GONE_COMM, hex(old));
    T_EQ_INT(ipcp_comm_rank(comm), 0);
    T_EQ_INT(ipcp_comm_size(comm), 1);
    T_OK(ipcp_barrier(comm));
    T_OK(ipcp_finalize(comm));
    return 0;
}

/* A second deregister, and a pack after it, are refused; a registration
 * made after it (which may take its memory and slot) is left alone. */
static int case_mem_twice(void)
{
    ipcp_comm_t *comm = unit_init();
    unsigned char *buf = t_malloc(8192);
    unsigned char desc[IPCP_DESC_MAX];
    size_t len = 12345;
    ipcp_mem_t *mem = NULL, *next = NULL;
    T_OK(ipcp_mem_register(comm, buf, 4096, &mem));
    T_OK(ipcp_mem_deregister(mem));
    T_ERR(ipcp_mem_deregister(mem), IPCP_ERR_INVALID,
          "registration handle %s is stale: " GONE_MEM, hex(mem));
    T_ERR(ipcp_mem_pack(mem, desc, sizeof desc, &len), IPCP_ERR_INVALID,
          "registration handle %s is stale: " GONE_MEM, hex(mem));
    T_EQ_U64(len, 12345);
    T_OK(ipcp_mem_register(comm, buf + 4096, 4096, &next));
    T_CHECK(next != mem);
    T_ERR(ipcp_mem_deregister(mem), IPCP_ERR_INVALID,
          "registration handle %s is stale: " GONE_MEM, hex(mem));
    T_OK(ipcp_mem_pack(next, desc, sizeof desc, &len));
    T_CHECK(len > 0 && len <= IPCP_DESC_MAX);
    T_OK(ipcp_mem_deregister(next));
    T_OK(ipcp_finalize(comm));
    free(buf);
    return 0;
}

/* Values the library never issued: an aligned address (no handle type), a
 * slot never handed out, and a live handle with another generation. */
static int case_made_up(void)
{
    ipcp_comm_t *comm = unit_init();
    unsigned char buf[64];
    ipcp_mem_t *mem = NULL;
    T_OK(ipcp_mem_register(comm, buf, sizeof buf, &mem));
    void *addr = (void *)(uintptr_t)0x10;
    ipcp_request_t *req = (void *)(uintptr_t)0xfffffff2; /* slot 2^24-1 */
    ipcp_mem_t *regen = (void *)((uintptr_t)mem ^ ((uintptr_t)1 << 63));
    T_ERR(ipcp_wait(addr, NULL), IPCP_ERR_INVALID,
          "0x10 is not a request handle " NOT_ISSUED);
    T_ERR(ipcp_wait(req, NULL), IPCP_ERR_INVALID,
          "%s is not a request handle " NOT_ISSUED, hex(req));
    int done = -7;
    T_ERR(ipcp_test(req, &done, NULL), IPCP_ERR_INVALID,
          "%s is not a request handle " NOT_ISSUED, hex(req));
    T_EQ_INT(done, -7);
    T_ERR(ipcp_barrier(addr), IPCP_ERR_INVALID,
          "0x10 is not a communicator handle " NOT_ISSUED);
    T_EQ_INT(ipcp_comm_size(addr), -1);
    T_LAST("0x10 is not a communicator handle " NOT_ISSUED);
    T_ERR(ipcp_finalize(addr), IPCP_ERR_INVALID,
          "0x10 is not a communicator handle " NOT_ISSUED);
    T_ERR(ipcp_mem_deregister(addr), IPCP_ERR_INVALID,
          "0x10 is not a registration handle " NOT_ISSUED);
    T_ERR(ipcp_mem_deregister(regen), IPCP_ERR_INVALID,
          "%s is not a registration handle " NOT_ISSUED, hex(regen));
    T_ERR(ipcp_rmem_release(addr), IPCP_ERR_INVALID,
          "0x10 is not an imported region handle " NOT_ISSUED);
    T_EQ_U64(ipcp_rmem_size(addr), 0);
    T_LAST("0x10 is not an imported region handle " NOT_ISSUED);
    T_EQ_INT(ipcp_rmem_owner(addr), -1);
    T_ERR(ipcp_put(comm, buf, 1, addr, 0), IPCP_ERR_INVALID,
          "0x10 is not an imported region handle " NOT_ISSUED);
    unsigned char desc[IPCP_DESC_MAX];
    size_t len = 0;
    T_OK(ipcp_mem_pack(mem, desc, sizeof desc, &len));
    T_OK(ipcp_mem_deregister(mem));
    T_OK(ipcp_finalize(comm));
    return 0;
}

/* Two threads release the same handle at once, over and over: exactly one
 * succeeds, the other gets the stale error without touching what the
 * first freed (ASan would see it). */
typedef struct racer {
    pthread_barrier_t *go;
    ipcp_mem_t *volatile *mem;
    ipcp_status_t st[RACE_ROUNDS];
} racer_t;

static void *race_deregister(void *arg)
{
    racer_t *r = arg;
    for (int i = 0; i < RACE_ROUNDS; i++) {
        pthread_barrier_wait(r->go);
        r->st[i] = ipcp_mem_deregister(*r->mem);
        pthread_barrier_wait(r->go);
    }
    return NULL;
}

static int case_race_release(void)
{
    ipcp_comm_t *comm = unit_init();
    unsigned char buf[64];
    ipcp_mem_t *volatile mem = NULL;
    pthread_barrier_t go;
    racer_t r[2];
    pthread_t t[2];
    T_CHECK(pthread_barrier_init(&go, NULL, 3) == 0);
    for (int k = 0; k < 2; k++) {
        r[k].go = &go;
        r[k].mem = &mem;
        T_CHECK(pthread_create(&t[k], NULL, race_deregister, &r[k]) == 0);
    }
    for (int i = 0; i < RACE_ROUNDS; i++) {
        ipcp_mem_t *m = NULL;
        T_OK(ipcp_mem_register(comm, buf, sizeof buf, &m));
        mem = m;
        pthread_barrier_wait(&go); /* both deregister */
        pthread_barrier_wait(&go);
        int ok = (r[0].st[i] == IPCP_OK) + (r[1].st[i] == IPCP_OK);
        int stale =
            (r[0].st[i] == IPCP_ERR_INVALID) + (r[1].st[i] == IPCP_ERR_INVALID);
        if (ok != 1 || stale != 1)
            T_FAIL("round %d: the two deregisters returned %s and %s, "
                   "expected one IPCP_OK and one IPCP_ERR_INVALID",
                   i, ipcp_strerror(r[0].st[i]), ipcp_strerror(r[1].st[i]));
    }
    for (int k = 0; k < 2; k++)
        T_CHECK(pthread_join(t[k], NULL) == 0);
    pthread_barrier_destroy(&go);
    T_OK(ipcp_finalize(comm));
    return 0;
}

/* ---------------------------------------------------------- two ranks */

/* Rank 0 registers 4 KiB and sends its descriptor; rank 1 imports it. */
static ipcp_rmem_t *share_region(ipcp_comm_t *comm, unsigned char *buf,
                                 ipcp_mem_t **mem)
{
    desc_msg_t m;
    memset(&m, 0, sizeof m);
    if (ipcp_comm_rank(comm) == 0) {
        size_t len = 0;
        T_OK(ipcp_mem_register(comm, buf, 4096, mem));
        T_OK(ipcp_mem_pack(*mem, m.desc, sizeof m.desc, &len));
        m.len = len;
        api_ctl_send(comm, 1, TAG_DESC, &m, sizeof m);
        return NULL;
    }
    ipcp_rmem_t *rm = NULL;
    api_ctl_recv(comm, 0, TAG_DESC, &m, sizeof m);
    T_OK(ipcp_rmem_import(comm, m.desc, m.len, &rm));
    return rm;
}

/* Waiting for or testing a request again, after ipcp_wait or after the
 * ipcp_test that completed it. */
static int mp_req_twice(ipcp_comm_t *comm)
{
    uint64_t seed = 0;
    unsigned char buf[64];
    if (ipcp_comm_rank(comm) == 1) {
        api_ctl_recv(comm, 0, TAG_GO, &seed, 8);
        t_fill(buf, sizeof buf, seed);
        T_OK(ipcp_send(comm, buf, sizeof buf, 0, TAG_A));
        t_fill(buf, sizeof buf, seed + 1);
        T_OK(ipcp_send(comm, buf, sizeof buf, 0, TAG_B));
        return 0;
    }
    seed = t_fresh_seed();
    ipcp_request_t *a = NULL, *b = NULL;
    ipcp_xfer_info_t info = {777, IPCP_PATH_AUTO};
    int done = -7;
    T_OK(ipcp_irecv(comm, buf, sizeof buf, 1, TAG_A, &a));
    api_ctl_send(comm, 1, TAG_GO, &seed, 8);
    T_OK(ipcp_wait(a, NULL));
    t_verify(buf, sizeof buf, seed, "first message");
    T_ERR(ipcp_wait(a, &info), IPCP_ERR_INVALID,
          "request handle %s is stale: " GONE_REQ, hex(a));
    T_ERR(ipcp_test(a, &done, &info), IPCP_ERR_INVALID,
          "request handle %s is stale: " GONE_REQ, hex(a));
    T_EQ_INT(done, -7);
    T_EQ_U64(info.nbytes, 777);
    T_OK(ipcp_irecv(comm, buf, sizeof buf, 1, TAG_B, &b));
    ipcp_status_t st;
    while ((st = ipcp_test(b, &done, NULL)) == IPCP_IN_PROGRESS)
        T_EQ_INT(done, 0);
    T_OK(st);
    T_EQ_INT(done, 1);
    t_verify(buf, sizeof buf, seed + 1, "second message");
    done = -7;
    T_ERR(ipcp_test(b, &done, &info), IPCP_ERR_INVALID,
          "request handle %s is stale: " GONE_REQ, hex(b));
    T_EQ_INT(done, -7);
    T_ERR(ipcp_wait(b, &info), IPCP_ERR_INVALID,
          "request handle %s is stale: " GONE_REQ, hex(b));
    T_EQ_U64(info.nbytes, 777);
    return 0;
}

/* ipcp_wait_for: a receive with nothing sent yet times out after about
 * its timeout (0 at once), the request still the caller's; bad timeouts
 * are refused; once the message is sent it completes with its data, and
 * the handle is stale after. */
static int mp_wait_for(ipcp_comm_t *comm)
{
    uint64_t seed = 0;
    unsigned char buf[4096];
    if (ipcp_comm_rank(comm) == 1) {
        api_ctl_recv(comm, 0, TAG_GO, &seed, 8);
        t_fill(buf, sizeof buf, seed);
        T_OK(ipcp_send(comm, buf, sizeof buf, 0, TAG_A));
        return 0;
    }
    seed = t_fresh_seed();
    ipcp_request_t *a = NULL;
    ipcp_xfer_info_t info = {777, IPCP_PATH_AUTO};
    int done = -7;
    T_OK(ipcp_irecv(comm, buf, sizeof buf, 1, TAG_A, &a));
    T_STATUS(ipcp_wait_for(a, 0, &done, &info), IPCP_IN_PROGRESS);
    T_EQ_INT(done, 0);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    T_STATUS(ipcp_wait_for(a, 0.2, &done, &info), IPCP_IN_PROGRESS);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double dt = (double)(t1.tv_sec - t0.tv_sec) +
                (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    T_EQ_INT(done, 0);
    T_EQ_U64(info.nbytes, 777);
    if (dt < 0.19 || dt > 2.0)
        T_FAIL("a wait of 0.2 s took %.3f s", dt);
    done = -7;
    T_STATUS(ipcp_wait_for(a, -1, &done, &info), IPCP_ERR_INVALID);
    T_MSG_HAS("timeout_s is -1");
    T_STATUS(ipcp_wait_for(a, NAN, &done, &info), IPCP_ERR_INVALID);
    T_MSG_HAS("timeout_s is nan");
    T_STATUS(ipcp_wait_for(a, 1, NULL, &info), IPCP_ERR_INVALID);
    T_MSG_HAS("done is NULL");
    T_EQ_INT(done, -7);
    api_ctl_send(comm, 1, TAG_GO, &seed, 8);
    T_OK(ipcp_wait_for(a, 30, &done, &info));
    T_EQ_INT(done, 1);
    T_EQ_U64(info.nbytes, sizeof buf);
    t_verify(buf, sizeof buf, seed, "message after the timeouts");
    T_ERR(ipcp_wait_for(a, 1, &done, &info), IPCP_ERR_INVALID,
          "request handle %s is stale: " GONE_REQ, hex(a));
    return 0;
}

/* An eager host send that the inbox takes at once completes when posted:
 * its handle is one of its own kind (IPCP_HANDLE_DONE in
 * src/common/handle.h: the low 4 bits are 5), with no request behind it.
 * ipcp_wait, ipcp_test and ipcp_wait_for each complete one with its byte
 * count and the eager path, and refuse it afterwards as any request's;
 * the receiver gets every message.  A receive posted before each message
 * makes sure the inbox has room. */
enum { DONE_MSGS = 48 };
static int mp_send_done(ipcp_comm_t *comm)
{
    uint64_t seed = 0;
    unsigned char buf[DONE_MSGS][64];
    if (ipcp_comm_rank(comm) == 0) {
        ipcp_request_t *r[DONE_MSGS];
        seed = t_fresh_seed();
        for (int k = 0; k < DONE_MSGS; k++)
            T_OK(ipcp_irecv(comm, buf[k], sizeof buf[k], 1, TAG_A, &r[k]));
        api_ctl_send(comm, 1, TAG_GO, &seed, 8);
        for (int k = 0; k < DONE_MSGS; k++) {
            ipcp_xfer_info_t info = {777, IPCP_PATH_AUTO};
            T_OK(ipcp_wait(r[k], &info));
            T_EQ_U64(info.nbytes, 1 + (size_t)k);
            t_verify(buf[k], 1 + (size_t)k, seed + (uint64_t)k, "message");
        }
        ipcp_xfer_info_t info = {777, IPCP_PATH_AUTO};
        T_OK(ipcp_recv(comm, buf[0], sizeof buf[0], 1, TAG_A, &info));
        T_EQ_U64(info.nbytes, 1);
        t_verify(buf[0], 1, seed, "last message");
        return 0;
    }
    ipcp_request_t *s[DONE_MSGS];
    int ndone = 0;
    api_ctl_recv(comm, 0, TAG_GO, &seed, 8);
    for (int k = 0; k < DONE_MSGS; k++) {
        t_fill(buf[k], 1 + (size_t)k, seed + (uint64_t)k);
        T_OK(ipcp_isend(comm, buf[k], 1 + (size_t)k, 0, TAG_A, &s[k]));
        ndone += ((uintptr_t)s[k] & 15) == 5;
    }
    /* Without the mailbox (IPCPIPE_MAILBOX=off: one of CI's passes) every
     * send goes the way of requests. */
    const char *mbox = getenv("IPCPIPE_MAILBOX");
    if (mbox && strcmp(mbox, "off") == 0) {
        if (ndone != 0)
            T_FAIL("%d eager sends completed when posted without the "
                   "mailbox",
                   ndone);
    } else if (ndone == 0) {
        T_FAIL("none of %d eager sends completed when posted", DONE_MSGS);
    }
    for (int k = 0; k < DONE_MSGS; k++) {
        ipcp_xfer_info_t info = {777, IPCP_PATH_AUTO};
        int done = -7;
        if (k % 3 == 0) {
            T_OK(ipcp_wait(s[k], &info));
        } else if (k % 3 == 1) {
            T_OK(ipcp_test(s[k], &done, &info));
            T_EQ_INT(done, 1);
        } else {
            T_OK(ipcp_wait_for(s[k], 0, &done, &info));
            T_EQ_INT(done, 1);
        }
        T_EQ_U64(info.nbytes, 1 + (size_t)k);
        T_EQ_INT(info.path, IPCP_PATH_EAGER);
        info.nbytes = 777;
        done = -7;
        T_ERR(ipcp_wait(s[k], &info), IPCP_ERR_INVALID,
              "request handle %s is stale: " GONE_REQ, hex(s[k]));
        T_ERR(ipcp_test(s[k], &done, &info), IPCP_ERR_INVALID,
              "request handle %s is stale: " GONE_REQ, hex(s[k]));
        T_ERR(ipcp_wait_for(s[k], 1, &done, &info), IPCP_ERR_INVALID,
              "request handle %s is stale: " GONE_REQ, hex(s[k]));
        T_EQ_INT(done, -7);
        T_EQ_U64(info.nbytes, 777);
    }
    /* Its checks come before the handle's: done NULL, a bad timeout. */
    ipcp_request_t *q = NULL;
    ipcp_xfer_info_t info = {777, IPCP_PATH_AUTO};
    int done = -7;
    T_OK(ipcp_isend(comm, buf[0], 1, 0, TAG_A, &q));
    T_STATUS(ipcp_test(q, NULL, &info), IPCP_ERR_INVALID);
    T_MSG_HAS("done is NULL");
    T_STATUS(ipcp_wait_for(q, -1, &done, &info), IPCP_ERR_INVALID);
    T_MSG_HAS("timeout_s is -1");
    T_EQ_INT(done, -7);
    T_OK(ipcp_wait(q, &info));
    T_EQ_U64(info.nbytes, 1);
    return 0;
}

/* A stale request handle whose memory and slot a newer request took: the
 * calls on it are refused and the newer request completes with its own
 * data.  The newer message is sent only after those calls, so that a
 * stale call that reached the newer request would see it running. */
static int mp_req_reuse(ipcp_comm_t *comm)
{
    uint64_t seed = 0;
    unsigned char a_buf[64], b_buf[64];
    if (ipcp_comm_rank(comm) == 1) {
        api_ctl_recv(comm, 0, TAG_GO, &seed, 8);
        t_fill(a_buf, sizeof a_buf, seed);
        T_OK(ipcp_send(comm, a_buf, sizeof a_buf, 0, TAG_A));
        api_ctl_recv(comm, 0, TAG_GO, &seed, 8);
        t_fill(b_buf, sizeof b_buf, seed + 1);
        T_OK(ipcp_send(comm, b_buf, sizeof b_buf, 0, TAG_B));
        return 0;
    }
    seed = t_fresh_seed();
    ipcp_request_t *a = NULL, *b = NULL;
    ipcp_xfer_info_t info = {777, IPCP_PATH_AUTO};
    int done = -7;
    memset(b_buf, 0, sizeof b_buf);
    T_OK(ipcp_irecv(comm, a_buf, sizeof a_buf, 1, TAG_A, &a));
    api_ctl_send(comm, 1, TAG_GO, &seed, 8);
    T_OK(ipcp_wait(a, NULL));
    T_OK(ipcp_irecv(comm, b_buf, sizeof b_buf, 1, TAG_B, &b));
    T_ERR(ipcp_test(a, &done, &info), IPCP_ERR_INVALID,
          "request handle %s is stale: " GONE_REQ, hex(a));
    T_EQ_INT(done, -7);
    T_ERR(ipcp_wait(a, &info), IPCP_ERR_INVALID,
          "request handle %s is stale: " GONE_REQ, hex(a));
    T_EQ_U64(info.nbytes, 777);
    T_CHECK(b != a);
    T_STATUS(ipcp_test(b, &done, NULL), IPCP_IN_PROGRESS);
    T_EQ_INT(done, 0);
    api_ctl_send(comm, 1, TAG_GO, &seed, 8);
    T_OK(ipcp_wait(b, &info));
    T_EQ_U64(info.nbytes, sizeof b_buf);
    t_verify(a_buf, sizeof a_buf, seed, "first message");
    t_verify(b_buf, sizeof b_buf, seed + 1, "message of the newer request");
    return 0;
}

/* A second release, and every use after it, are refused; a region
 * imported after it (rank 0's second one) is left alone. */
static int mp_rmem_twice(ipcp_comm_t *comm)
{
    unsigned char a_buf[4096], b_buf[4096], l[8];
    ipcp_mem_t *a_mem = NULL, *b_mem = NULL;
    uint64_t x = 0;
    memset(a_buf, 0, sizeof a_buf);
    memset(b_buf, 0, sizeof b_buf);
    ipcp_rmem_t *rm = share_region(comm, a_buf, &a_mem);
    if (ipcp_comm_rank(comm) == 0) {
        share_region(comm, b_buf, &b_mem);
        api_ctl_recv(comm, 1, TAG_GO, &x, 8);
        for (size_t i = 0; i < sizeof a_buf; i++) {
            T_EQ_INT(a_buf[i], i == 0 ? 0x11 : 0);
            T_EQ_INT(b_buf[i], i == 1 ? 0x22 : 0);
        }
        T_OK(ipcp_mem_deregister(a_mem));
        T_OK(ipcp_mem_deregister(b_mem));
        return 0;
    }
    l[0] = 0x11;
    T_OK(ipcp_put(comm, l, 1, rm, 0));
    T_OK(ipcp_rmem_release(rm));
    T_ERR(ipcp_rmem_release(rm), IPCP_ERR_INVALID,
          "imported region handle %s is stale: " GONE_RMEM, hex(rm));
    T_EQ_U64(ipcp_rmem_size(rm), 0);
    T_LAST("imported region handle %s is stale: " GONE_RMEM, hex(rm));
    T_EQ_INT(ipcp_rmem_owner(rm), -1);
    T_LAST("imported region handle %s is stale: " GONE_RMEM, hex(rm));
    T_ERR(ipcp_put(comm, l, 1, rm, 1), IPCP_ERR_INVALID,
          "imported region handle %s is stale: " GONE_RMEM, hex(rm));
    ipcp_request_t *req = (void *)(uintptr_t)0x5e57;
    T_ERR(ipcp_iget(comm, l, 1, rm, 1, &req), IPCP_ERR_INVALID,
          "imported region handle %s is stale: " GONE_RMEM, hex(rm));
    T_CHECK(req == (void *)(uintptr_t)0x5e57);
    ipcp_rmem_t *next = share_region(comm, NULL, NULL);
    T_CHECK(next != rm);
    T_ERR(ipcp_rmem_release(rm), IPCP_ERR_INVALID,
          "imported region handle %s is stale: " GONE_RMEM, hex(rm));
    T_EQ_U64(ipcp_rmem_size(next), 4096);
    T_EQ_INT(ipcp_rmem_owner(next), 0);
    l[0] = 0x22;
    T_OK(ipcp_put(comm, l, 1, next, 1));
    T_OK(ipcp_rmem_release(next));
    api_ctl_send(comm, 0, TAG_GO, &x, 8);
    return 0;
}

/* Every call with a handle of a finalized communicator: IPCP_ERR_STATE
 * for the communicator, as a second ipcp_finalize has always returned;
 * IPCP_ERR_INVALID for the request not waited for, the registration and
 * the imported region that finalize freed. */
static void after_finalize_comm(ipcp_comm_t *comm, ipcp_rmem_t *rm)
{
    char stale[160];
    unsigned char buf[64];
    void *p = (void *)(uintptr_t)0x5e57;
    ipcp_mem_t *mem = p;
    ipcp_rmem_t *imp = p;
    ipcp_request_t *req = p;
    snprintf(stale, sizeof stale, "communicator handle %s is stale: %s",
             hex(comm), GONE_COMM);
    T_EQ_INT(ipcp_comm_rank(comm), -1);
    T_LAST("%s", stale);
    T_EQ_INT(ipcp_comm_size(comm), -1);
    T_EQ_STR(ipcp_comm_job(comm), "");
    T_LAST("%s", stale);
    T_ERR(ipcp_barrier(comm), IPCP_ERR_STATE, "%s", stale);
    T_ERR(ipcp_comm_set_path(comm, IPCP_PATH_AUTO), IPCP_ERR_STATE, "%s",
          stale);
    T_ERR(ipcp_isend(comm, buf, 8, 0, 1, &req), IPCP_ERR_STATE, "%s", stale);
    T_ERR(ipcp_irecv(comm, buf, 8, 0, 1, &req), IPCP_ERR_STATE, "%s", stale);
    T_ERR(ipcp_send(comm, buf, 8, 0, 1), IPCP_ERR_STATE, "%s", stale);
    T_ERR(ipcp_recv(comm, buf, 8, 0, 1, NULL), IPCP_ERR_STATE, "%s", stale);
    T_ERR(ipcp_isend_on_stream(comm, buf, 8, 0, 1, NULL, &req), IPCP_ERR_STATE,
          "%s", stale);
    T_ERR(ipcp_iput_on_stream(comm, buf, 1, rm, 0, NULL, &req), IPCP_ERR_STATE,
          "%s", stale);
    T_ERR(ipcp_mem_alloc(comm, 4096, NULL, &p), IPCP_ERR_STATE, "%s", stale);
    T_ERR(ipcp_mem_free(comm, buf), IPCP_ERR_STATE, "%s", stale);
    T_ERR(ipcp_mem_register(comm, buf, 8, &mem), IPCP_ERR_STATE, "%s", stale);
    T_ERR(ipcp_rmem_import(comm, buf, 8, &imp), IPCP_ERR_STATE, "%s", stale);
    T_ERR(ipcp_put(comm, buf, 1, rm, 0), IPCP_ERR_STATE, "%s", stale);
    T_ERR(ipcp_finalize(comm), IPCP_ERR_STATE, "%s", stale);
    T_CHECK(p == (void *)(uintptr_t)0x5e57 && mem == p && imp == p && req == p);
}

static int mp_after_finalize(ipcp_comm_t *comm)
{
    unsigned char buf[4096], mine[64];
    unsigned char desc[IPCP_DESC_MAX];
    ipcp_mem_t *shared = NULL, *mem = NULL;
    ipcp_request_t *req = NULL;
    ipcp_xfer_info_t info = {777, IPCP_PATH_AUTO};
    size_t len = 12345;
    int done = -7;
    int rank = ipcp_comm_rank(comm);
    ipcp_rmem_t *rm = share_region(comm, buf, &shared);
    T_OK(ipcp_mem_register(comm, mine, sizeof mine, &mem));
    /* Never matched: finalize frees it. */
    T_OK(ipcp_irecv(comm, mine, sizeof mine, 1 - rank, TAG_NEVER, &req));
    /* Never received, never waited for: complete when posted (mp_send_done),
     * its handle made stale by finalize all the same. */
    ipcp_request_t *sent = NULL;
    T_OK(ipcp_isend(comm, "unread!", 8, 1 - rank, TAG_UNREAD, &sent));
    T_OK(ipcp_barrier(comm));
    api_finalize(comm);
    T_ERR(ipcp_wait(req, &info), IPCP_ERR_INVALID,
          "request handle %s is stale: " GONE_REQ, hex(req));
    T_ERR(ipcp_test(req, &done, &info), IPCP_ERR_INVALID,
          "request handle %s is stale: " GONE_REQ, hex(req));
    T_ERR(ipcp_wait(sent, &info), IPCP_ERR_INVALID,
          "request handle %s is stale: " GONE_REQ, hex(sent));
    T_ERR(ipcp_wait_for(sent, 1, &done, &info), IPCP_ERR_INVALID,
          "request handle %s is stale: " GONE_REQ, hex(sent));
    T_EQ_INT(done, -7);
    T_EQ_U64(info.nbytes, 777);
    T_ERR(ipcp_mem_deregister(mem), IPCP_ERR_INVALID,
          "registration handle %s is stale: " GONE_MEM, hex(mem));
    T_ERR(ipcp_mem_pack(mem, desc, sizeof desc, &len), IPCP_ERR_INVALID,
          "registration handle %s is stale: " GONE_MEM, hex(mem));
    T_EQ_U64(len, 12345);
    if (rank == 0) {
        T_ERR(ipcp_mem_deregister(shared), IPCP_ERR_INVALID,
              "registration handle %s is stale: " GONE_MEM, hex(shared));
    } else {
        T_ERR(ipcp_rmem_release(rm), IPCP_ERR_INVALID,
              "imported region handle %s is stale: " GONE_RMEM, hex(rm));
        T_EQ_U64(ipcp_rmem_size(rm), 0);
        T_LAST("imported region handle %s is stale: " GONE_RMEM, hex(rm));
        T_EQ_INT(ipcp_rmem_owner(rm), -1);
    }
    after_finalize_comm(comm, rank == 1 ? rm : (void *)(uintptr_t)0x5e57);
    return 0;
}

/* "<handle> is <a kind> handle, not <a kind> handle" */
#define WRONG(h, is, want) "%s is " is " handle, not " want " handle", hex(h)

/* Each handle passed where another type is expected is refused, and all
 * of them keep working afterwards. */
static int mp_wrong_type(ipcp_comm_t *comm)
{
    unsigned char buf[4096], mine[64], l[8];
    ipcp_mem_t *shared = NULL, *mem = NULL;
    uint64_t seed = 0;
    memset(buf, 0, sizeof buf);
    ipcp_rmem_t *rm = share_region(comm, buf, &shared);
    if (ipcp_comm_rank(comm) == 0) {
        api_ctl_recv(comm, 1, TAG_GO, &seed, 8);
        t_fill(mine, sizeof mine, seed);
        T_OK(ipcp_send(comm, mine, sizeof mine, 1, TAG_A));
        api_ctl_recv(comm, 1, TAG_GO, &seed, 8);
        for (size_t i = 0; i < sizeof buf; i++)
            T_EQ_INT(buf[i], i == 5 ? 0x33 : 0);
        T_OK(ipcp_mem_deregister(shared));
        return 0;
    }
    ipcp_request_t *req = NULL;
    unsigned char desc[IPCP_DESC_MAX];
    size_t len = 12345;
    int done = -7;
    T_OK(ipcp_mem_register(comm, l, sizeof l, &mem));
    T_OK(ipcp_irecv(comm, mine, sizeof mine, 0, TAG_A, &req));
    void *c = comm, *r = req, *m = mem, *i = rm;
    T_ERR(ipcp_wait(c, NULL), IPCP_ERR_INVALID,
          WRONG(c, "a communicator", "a request"));
    T_ERR(ipcp_wait(m, NULL), IPCP_ERR_INVALID,
          WRONG(m, "a registration", "a request"));
    T_ERR(ipcp_test(i, &done, NULL), IPCP_ERR_INVALID,
          WRONG(i, "an imported region", "a request"));
    T_EQ_INT(done, -7);
    T_ERR(ipcp_mem_deregister(r), IPCP_ERR_INVALID,
          WRONG(r, "a request", "a registration"));
    T_ERR(ipcp_mem_pack(i, desc, sizeof desc, &len), IPCP_ERR_INVALID,
          WRONG(i, "an imported region", "a registration"));
    T_EQ_U64(len, 12345);
    T_ERR(ipcp_rmem_release(m), IPCP_ERR_INVALID,
          WRONG(m, "a registration", "an imported region"));
    T_EQ_U64(ipcp_rmem_size(c), 0);
    T_LAST(WRONG(c, "a communicator", "an imported region"));
    T_ERR(ipcp_put(comm, l, 1, m, 0), IPCP_ERR_INVALID,
          WRONG(m, "a registration", "an imported region"));
    T_ERR(ipcp_barrier(r), IPCP_ERR_INVALID,
          WRONG(r, "a request", "a communicator"));
    T_ERR(ipcp_isend(m, l, 1, 0, TAG_B, &req), IPCP_ERR_INVALID,
          WRONG(m, "a registration", "a communicator"));
    T_ERR(ipcp_finalize(i), IPCP_ERR_INVALID,
          WRONG(i, "an imported region", "a communicator"));
    T_CHECK(req == r);
    /* All of them still work. */
    seed = t_fresh_seed();
    api_ctl_send(comm, 0, TAG_GO, &seed, 8);
    ipcp_xfer_info_t info = {777, IPCP_PATH_AUTO};
    T_OK(ipcp_wait(req, &info));
    T_EQ_U64(info.nbytes, sizeof mine);
    t_verify(mine, sizeof mine, seed, "message after the refused calls");
    l[0] = 0x33;
    T_OK(ipcp_put(comm, l, 1, rm, 5));
    T_OK(ipcp_mem_pack(mem, desc, sizeof desc, &len));
    T_OK(ipcp_mem_deregister(mem));
    T_OK(ipcp_rmem_release(rm));
    api_ctl_send(comm, 0, TAG_GO, &seed, 8);
    return 0;
}

static int rank_main(int argc, char **argv)
{
    static const struct {
        const char *name;
        int (*fn)(ipcp_comm_t *comm);
    } cases[] = {{"req_twice", mp_req_twice},
                 {"wait_for", mp_wait_for},
                 {"req_reuse", mp_req_reuse},
                 {"rmem_twice", mp_rmem_twice},
                 {"after_finalize", mp_after_finalize},
                 {"wrong_type", mp_wrong_type},
                 {"send_done", mp_send_done}};
    const char *name = api_opt(argc, argv, "--case", "");
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        if (strcmp(name, cases[k].name) != 0)
            continue;
        ipcp_comm_t *comm = api_init(IPCP_PATH_AUTO, "set");
        T_EQ_INT(ipcp_comm_size(comm), 2);
        int rc = cases[k].fn(comm);
        if (cases[k].fn != mp_after_finalize) {
            T_OK(ipcp_barrier(comm));
            api_finalize(comm);
        }
        return rc;
    }
    T_FAIL("unknown --case \"%s\"", name);
}

int main(int argc, char **argv)
{
    const char *name = api_opt(argc, argv, "--case", "");
    if (strcmp(name, "comm_aba") == 0)
        return case_comm_aba();
    if (strcmp(name, "mem_twice") == 0)
        return case_mem_twice();
    if (strcmp(name, "made_up") == 0)
        return case_made_up();
    if (strcmp(name, "race_release") == 0)
        return case_race_release();
    return t_mp_main(argc, argv, 2, 60, rank_main);
}
