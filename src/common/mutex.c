/* The contended halves of common/mutex.h: a short spin, then the futex. */
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/cpu.h"
#include "common/mutex.h"

/* Looks at a held word before sleeping: a few microseconds at most
 * (a pause is tens of cycles on some parts, over a hundred on others),
 * longer than the critical sections of the mailbox's locks. */
#define IPCP_MUTEX_SPINS 128

static void ipcp__futex(_Atomic uint32_t *w, int op, uint32_t val)
{
    syscall(SYS_futex, (uint32_t *)w, op | FUTEX_PRIVATE_FLAG, val, NULL, NULL,
            0);
}

void ipcp__mutex_wait(ipcp__mutex_t *m)
{
    if (!ipcp__one_cpu())
        for (int i = 0; i < IPCP_MUTEX_SPINS; i++) {
            ipcp__cpu_pause();
            uint32_t free_ = 0;
            if (atomic_load_explicit(&m->word, memory_order_relaxed) == 0 &&
                atomic_compare_exchange_weak_explicit(&m->word, &free_, 1,
                                                      memory_order_acquire,
                                                      memory_order_relaxed))
                return;
        }
    /* Marked 2 while it may sleep, so that the holder's unlock wakes it;
     * it then holds the lock as 2, since another may sleep too. */
    while (atomic_exchange_explicit(&m->word, 2, memory_order_acquire) != 0)
        ipcp__futex(&m->word, FUTEX_WAIT, 2);
}

void ipcp__mutex_wake(ipcp__mutex_t *m)
{
    ipcp__futex(&m->word, FUTEX_WAKE, 1);
}
