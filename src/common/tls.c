/* Thread-exit work (tls.h): one key for the library, whose value is the
 * thread's list of calls. */
#include <pthread.h>

#include "tls.h"

#define IPCP_TLS_HOOKS 4

typedef struct ipcp__tls_hooks {
    int n;
    void (*fn[IPCP_TLS_HOOKS])(void *);
    void *arg[IPCP_TLS_HOOKS];
} ipcp__tls_hooks_t;

static _Thread_local ipcp__tls_hooks_t ipcp__tls_hooks;
static pthread_key_t ipcp__tls_key;
static pthread_once_t ipcp__tls_once = PTHREAD_ONCE_INIT;
static int ipcp__tls_ok;

static void ipcp__tls_run(void *arg)
{
    ipcp__tls_hooks_t *h = arg;
    for (int i = 0; i < h->n; i++)
        h->fn[i](h->arg[i]);
    h->n = 0;
}

static void ipcp__tls_make(void)
{
    ipcp__tls_ok = pthread_key_create(&ipcp__tls_key, ipcp__tls_run) == 0;
}

/* Unloaded while threads still hold a value: their exit must not call
 * into code that is gone (what they kept is lost then, as the library
 * is). */
__attribute__((destructor)) static void ipcp__tls_drop(void)
{
    if (ipcp__tls_ok)
        pthread_key_delete(ipcp__tls_key);
    ipcp__tls_ok = 0;
}

int ipcp__at_thread_exit(int *armed, void (*fn)(void *), void *arg)
{
    ipcp__tls_hooks_t *h = &ipcp__tls_hooks;
    if (*armed)
        return 0;
    pthread_once(&ipcp__tls_once, ipcp__tls_make);
    if (!ipcp__tls_ok || h->n == IPCP_TLS_HOOKS)
        return -1;
    if (!h->n && pthread_setspecific(ipcp__tls_key, h) != 0)
        return -1;
    h->fn[h->n] = fn;
    h->arg[h->n] = arg;
    h->n++;
    *armed = 1;
    return 0;
}
