/* What a host queue's worker thread does for each operation: copies,
 * copies to or from another process (process_vm_writev/readv), and flags
 * in memory shared between processes, woken through futexes. */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "backend/host/host.h"
#include "common/status.h"
#include "common/time.h"

/* A waiter spins this long before it sleeps: a flag that follows a chunk
 * copy usually lands within microseconds, and a futex sleep and wake-up
 * costs tens of them; longer spins would steal the core the writer needs
 * on small machines. */
#define HOST_SPIN_NS 4000
/* A sleeping waiter wakes this often to look at the abort word (which
 * nothing wakes it for) and to cover a flag change that left the low 32
 * bits as they were. */
#define HOST_SLEEP_NS (20 * 1000 * 1000)

static inline void host_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Flags are plain uint64_t words in shared memory; lock-free 64-bit
 * atomics are plain loads and stores on x86-64 and AArch64, so another
 * process using the same word sees the same ordering. */
static inline _Atomic uint64_t *host_flag_atomic(uint64_t *flag)
{
    return (_Atomic uint64_t *)flag;
}

/* Futexes are 32-bit; they watch the half of the flag that changes with
 * every increment. */
static inline uint32_t *host_flag_low(uint64_t *flag)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    return (uint32_t *)flag;
#else
    return (uint32_t *)flag + 1;
#endif
}

static const char *host_strerror(int err, char *buf, size_t len)
{
    /* _GNU_SOURCE gives the GNU strerror_r, which returns the string. */
    return strerror_r(err, buf, len);
}

/* A copy looks at its track between slices of this size: a transfer whose
 * peer was lost stops within one slice, where a piece of a large direct
 * transfer (hundreds of MiB) would otherwise run to its end first (5 s on a
 * loaded CI machine).  Large enough that the check costs nothing. */
#define HOST_COPY_SLICE (4u << 20)

static void host_op_copy(const ipcp__host_op_t *op)
{
    char *dst = op->u.copy.dst;
    const char *src = op->u.copy.src;
    size_t len = op->u.copy.len;

    while (len) {
        if (op->t && !ipcp__track_ok(op->t))
            return;
        size_t n = len < HOST_COPY_SLICE ? len : HOST_COPY_SLICE;
        ipcp__host_memcpy(dst, src, n);
        dst += n;
        src += n;
        len -= n;
    }
}

static ipcp_status_t host_rcopy_status(int err)
{
    switch (err) {
    case EPERM:
        return IPCP_ERR_PERMISSION;
    case ESRCH:
        return IPCP_ERR_PEER_LOST;
    case ENOMEM:
        return IPCP_ERR_NOMEM;
    case EFAULT:
        return IPCP_ERR_OUT_OF_RANGE;
    case ENOSYS:
        return IPCP_ERR_UNSUPPORTED;
    default:
        return IPCP_ERR_SYSTEM;
    }
}

/* The kernel may move less than asked (a limit per call, or the remote
 * range ending in an unmapped page); loop until done or an error. */
static void host_op_rcopy(const ipcp__host_op_t *op)
{
    const char *fn =
        op->u.rcopy.write ? "process_vm_writev" : "process_vm_readv";
    size_t len = op->u.rcopy.len, done = 0;
    char buf[128];

    if (op->t && !ipcp__track_ok(op->t))
        return;
    while (done < len) {
        struct iovec lv = {(char *)op->u.rcopy.local + done, len - done};
        struct iovec rv = {(void *)(uintptr_t)(op->u.rcopy.remote + done),
                           len - done};
        ssize_t n = op->u.rcopy.write
                        ? process_vm_writev(op->u.rcopy.pid, &lv, 1, &rv, 1, 0)
                        : process_vm_readv(op->u.rcopy.pid, &lv, 1, &rv, 1, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            int err = n < 0 ? errno : EFAULT;
            IPCP_DEBUG(IPCP_SUB_HOST, "%s pid %d failed: errno %d", fn,
                       (int)op->u.rcopy.pid, err);
            if (op->t)
                ipcp__track_fail(
                    op->t, host_rcopy_status(err),
                    "%s of %zu bytes %s remote %#llx of pid %d %s local %p "
                    "failed after %zu bytes: %s (errno %d)",
                    fn, len, op->u.rcopy.write ? "to" : "from",
                    (unsigned long long)op->u.rcopy.remote,
                    (int)op->u.rcopy.pid, op->u.rcopy.write ? "from" : "into",
                    op->u.rcopy.local, done,
                    host_strerror(err, buf, sizeof(buf)), err);
            return;
        }
        done += (size_t)n;
    }
}

/* The wake is not FUTEX_PRIVATE_FLAG: waiters sit in other processes, and
 * only a shared futex is keyed by the page rather than by the address
 * space.  It is issued every time, since the flag layout has no room for
 * a waiter count; a wake with nobody waiting is one short syscall. */
static void host_op_flag_write(const ipcp__host_op_t *op)
{
    uint64_t *flag = op->u.flag.flag;
    if (op->t && !ipcp__track_ok(op->t))
        return;
    atomic_store_explicit(host_flag_atomic(flag), op->u.flag.value,
                          memory_order_release);
    syscall(SYS_futex, host_flag_low(flag), FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/* Spins briefly; returns 1 when the flag was reached, with *cur the last
 * value seen. */
static int host_flag_spin(const ipcp__host_op_t *op, uint64_t *cur)
{
    _Atomic uint64_t *f = host_flag_atomic(op->u.flag.flag);
    uint64_t start = ipcp__now_ns();
    for (unsigned i = 1;; i++) {
        *cur = atomic_load_explicit(f, memory_order_acquire);
        if (ipcp__flag_reached(*cur, op->u.flag.value))
            return 1;
        if ((i & 31) == 0 && ipcp__now_ns() - start > HOST_SPIN_NS)
            return 0;
        host_cpu_relax();
    }
}

/* 1 when the wait must stop without the flag: the abort word is set (the
 * track fails with its status) or another operation failed the track. */
static int host_flag_wait_stop(const ipcp__host_op_t *op, uint64_t cur)
{
    if (op->t && !ipcp__track_ok(op->t))
        return 1;
    if (!op->u.flag.abort)
        return 0;
    int ab = atomic_load_explicit(op->u.flag.abort, memory_order_acquire);
    if (ab == 0)
        return 0;
    IPCP_DEBUG(IPCP_SUB_HOST, "flag wait at %p aborted with status %d",
               (void *)op->u.flag.flag, ab);
    if (op->t)
        ipcp__track_fail(
            op->t, (ipcp_status_t)ab,
            "%s while waiting for flag %p to reach %llu (it "
            "holds %llu)",
            ipcp_status_desc((ipcp_status_t)ab), (void *)op->u.flag.flag,
            (unsigned long long)op->u.flag.value, (unsigned long long)cur);
    return 1;
}

/* FUTEX_WAIT compares the low word with the half of the value we saw, in
 * the kernel under the futex lock, so a write that lands between our load
 * and the sleep makes the call return at once instead of being missed.  A
 * write that changes only the high half is caught at the next timeout. */
static void host_op_flag_wait(const ipcp__host_op_t *op)
{
    uint64_t *flag = op->u.flag.flag;
    uint64_t cur;
    char buf[128];

    if (op->t && !ipcp__track_ok(op->t))
        return;
    if (host_flag_spin(op, &cur))
        return;
    for (;;) {
        if (host_flag_wait_stop(op, cur))
            return;
        struct timespec ts = {0, HOST_SLEEP_NS};
        long rc = syscall(SYS_futex, host_flag_low(flag), FUTEX_WAIT,
                          (uint32_t)cur, &ts, NULL, 0);
        if (rc != 0 && errno != EAGAIN && errno != ETIMEDOUT &&
            errno != EINTR) {
            int err = errno;
            IPCP_ERROR(IPCP_SUB_HOST, "futex wait on flag %p failed: errno %d",
                       (void *)flag, err);
            if (op->t)
                ipcp__track_fail(
                    op->t, IPCP_ERR_SYSTEM, "futex wait on flag %p failed: %s",
                    (void *)flag, host_strerror(err, buf, sizeof(buf)));
            return;
        }
        cur =
            atomic_load_explicit(host_flag_atomic(flag), memory_order_acquire);
        if (ipcp__flag_reached(cur, op->u.flag.value))
            return;
    }
}

void ipcp__host_op_run(const ipcp__host_op_t *op)
{
    switch (op->kind) {
    case IPCP_HOST_OP_COPY:
        host_op_copy(op);
        break;
    case IPCP_HOST_OP_RCOPY:
        host_op_rcopy(op);
        break;
    case IPCP_HOST_OP_FLAG_WRITE:
        host_op_flag_write(op);
        break;
    case IPCP_HOST_OP_FLAG_WAIT:
        host_op_flag_wait(op);
        break;
    case IPCP_HOST_OP_NOTIFY:
        ipcp__track_notify(op->t);
        break;
    case IPCP_HOST_OP_STAMP:
        *op->u.stamp = ipcp__now_ns();
        break;
    case IPCP_HOST_OP_CALL:
        op->u.call.fn(op->u.call.arg);
        break;
    case IPCP_HOST_OP_JOIN_WAIT: {
        ipcp__host_op_t w = {.kind = IPCP_HOST_OP_FLAG_WAIT};
        w.u.flag.flag = &op->u.join.j->word;
        w.u.flag.value = op->u.join.value;
        host_op_flag_wait(&w);
        ipcp__host_join_word_put(op->u.join.j);
        break;
    }
    }
}
