/* common/mutex.h: the one-word mutex and its recursive kind keep threads
 * out of each other's critical sections under contention (counts that
 * only a lost exclusion would change), a thread that finds the lock held
 * sleeps and is woken by the unlock, trylock fails while another thread
 * holds the lock, and the recursive kind lets its holder take it again. */
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include "common/mutex.h"
#include "testutil.h"

#define THREADS 4
#define ROUNDS  200000

static ipcp__mutex_t plain;
static ipcp__rmutex_t rec;
/* Written in pairs under the lock; a reader under the lock must see them
 * equal.  Not atomic: an exclusion lost shows as a lost increment. */
static long count_a, count_b;
static atomic_int broken;

static void *plain_worker(void *arg)
{
    (void)arg;
    for (int i = 0; i < ROUNDS; i++) {
        ipcp__mutex_lock(&plain);
        if (count_a != count_b)
            atomic_store(&broken, 1);
        count_a++;
        count_b++;
        ipcp__mutex_unlock(&plain);
    }
    return NULL;
}

static void *rec_worker(void *arg)
{
    (void)arg;
    for (int i = 0; i < ROUNDS / 4; i++) {
        ipcp__rmutex_lock(&rec);
        ipcp__rmutex_lock(&rec);
        count_a++;
        if (ipcp__rmutex_trylock(&rec) != 0) /* its holder: always */
            atomic_store(&broken, 2);
        count_b++;
        ipcp__rmutex_unlock(&rec);
        ipcp__rmutex_unlock(&rec);
        if (count_a != count_b)
            atomic_store(&broken, 3);
        ipcp__rmutex_unlock(&rec);
    }
    return NULL;
}

static void run(void *(*fn)(void *))
{
    pthread_t t[THREADS];
    count_a = count_b = 0;
    for (int i = 0; i < THREADS; i++)
        T_CHECK(pthread_create(&t[i], NULL, fn, NULL) == 0);
    for (int i = 0; i < THREADS; i++)
        T_CHECK(pthread_join(t[i], NULL) == 0);
}

static atomic_int got;

static void *sleeper(void *arg)
{
    (void)arg;
    T_EQ_INT(ipcp__mutex_trylock(&plain) != 0, 1);
    ipcp__mutex_lock(&plain); /* held by main for 100 ms: sleeps */
    atomic_store(&got, 1);
    ipcp__mutex_unlock(&plain);
    return NULL;
}

int main(void)
{
    ipcp__mutex_init(&plain);
    ipcp__rmutex_init(&rec);

    run(plain_worker);
    T_EQ_INT(atomic_load(&broken), 0);
    T_EQ_U64((uint64_t)count_a, (uint64_t)THREADS * ROUNDS);
    T_EQ_U64((uint64_t)count_b, (uint64_t)THREADS * ROUNDS);

    run(rec_worker);
    T_EQ_INT(atomic_load(&broken), 0);
    T_EQ_U64((uint64_t)count_a, (uint64_t)THREADS * (ROUNDS / 4));
    T_EQ_INT((int)rec.depth, 0);

    /* A waiter that must sleep: woken by the unlock, not by a timeout. */
    ipcp__mutex_lock(&plain);
    pthread_t t;
    T_CHECK(pthread_create(&t, NULL, sleeper, NULL) == 0);
    usleep(100000);
    T_EQ_INT(atomic_load(&got), 0);
    T_EQ_INT((int)atomic_load(&plain.word), 2); /* it marked itself */
    ipcp__mutex_unlock(&plain);
    T_CHECK(pthread_join(t, NULL) == 0);
    T_EQ_INT(atomic_load(&got), 1);
    T_EQ_INT((int)atomic_load(&plain.word), 0);
    T_EQ_INT(ipcp__mutex_trylock(&plain), 0);
    ipcp__mutex_unlock(&plain);
    return 0;
}
