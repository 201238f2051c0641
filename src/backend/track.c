#include <stdarg.h>
#include <stdio.h>

#include "backend.h"

void ipcp__track_init(ipcp__track_t *t, int pending,
                      void (*cb)(ipcp__track_t *t), void *arg)
{
    atomic_init(&t->pending, pending);
    atomic_init(&t->status, IPCP_OK);
    t->cb = cb;
    t->arg = arg;
    pthread_mutex_init(&t->lock, NULL);
    t->errmsg[0] = '\0';
}

void ipcp__track_destroy(ipcp__track_t *t)
{
    pthread_mutex_destroy(&t->lock);
}

/* A track can be failed by a queue's thread and by the engine (peer loss)
 * at the same time as another thread completes it, so the message is
 * written and read under a lock; failures are rare, completions are not,
 * and the fast path (status check) stays lock-free. */
void ipcp__track_fail(ipcp__track_t *t, ipcp_status_t st, const char *fmt, ...)
{
    va_list ap;
    pthread_mutex_lock(&t->lock);
    if (atomic_load_explicit(&t->status, memory_order_relaxed) == IPCP_OK) {
        va_start(ap, fmt);
        vsnprintf(t->errmsg, sizeof(t->errmsg), fmt, ap);
        va_end(ap);
        atomic_store_explicit(&t->status, (int)st, memory_order_release);
    }
    pthread_mutex_unlock(&t->lock);
}

void ipcp__track_errmsg(ipcp__track_t *t, char *buf, size_t len)
{
    pthread_mutex_lock(&t->lock);
    snprintf(buf, len, "%s", t->errmsg);
    pthread_mutex_unlock(&t->lock);
}

void ipcp__track_notify(ipcp__track_t *t)
{
    if (atomic_fetch_sub_explicit(&t->pending, 1, memory_order_acq_rel) == 1)
        t->cb(t);
}
