/* common/lockorder.h: in a build that checks the lock order, a thread that
 * waits for a lock earlier in the order than one it holds is stopped with
 * a message naming both, while the order itself, a recursive rx_lock and a
 * trylock out of order pass; in a build that does not check, the wrappers
 * are plain locks and nothing stops. */
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/lockorder.h"
#include "testutil.h"

static pthread_mutex_t prog = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t mem = PTHREAD_MUTEX_INITIALIZER;
static ipcp__rmutex_t rx; /* as a peer's rx_lock */

/* In a child: holds mem, then waits for prog (out of order). */
static int out_of_order(void)
{
    pid_t pid = fork();
    T_CHECK(pid >= 0);
    if (pid == 0) {
        ipcp__lock(&mem, IPCP_LOCK_MEM);
        ipcp__lock(&prog, IPCP_LOCK_PROG);
        ipcp__unlock(&prog, IPCP_LOCK_PROG);
        ipcp__unlock(&mem, IPCP_LOCK_MEM);
        _exit(0);
    }
    int st;
    T_CHECK(waitpid(pid, &st, 0) == pid);
    return st;
}

int main(void)
{
    ipcp__rmutex_init(&rx);

    /* The order, a recursive rx_lock, a trylock against the order. */
    ipcp__lock(&prog, IPCP_LOCK_PROG);
    ipcp__lock(&rx, IPCP_LOCK_RX);
    ipcp__lock(&rx, IPCP_LOCK_RX);
    ipcp__lock(&mem, IPCP_LOCK_MEM);
    /* A recursive lock held already cannot make the thread wait, whatever
     * it took since. */
    ipcp__lock(&rx, IPCP_LOCK_RX);
    ipcp__unlock(&rx, IPCP_LOCK_RX);
    ipcp__unlock(&mem, IPCP_LOCK_MEM);
    ipcp__unlock(&rx, IPCP_LOCK_RX);
    ipcp__unlock(&rx, IPCP_LOCK_RX);
    ipcp__unlock(&prog, IPCP_LOCK_PROG);
    ipcp__lock(&mem, IPCP_LOCK_MEM);
    T_EQ_INT(ipcp__trylock(&prog, IPCP_LOCK_PROG), 0);
    ipcp__unlock(&prog, IPCP_LOCK_PROG);
    ipcp__unlock(&mem, IPCP_LOCK_MEM);
    /* All released: any order starts afresh. */
    ipcp__lock(&mem, IPCP_LOCK_MEM);
    ipcp__unlock(&mem, IPCP_LOCK_MEM);
    ipcp__lock(&prog, IPCP_LOCK_PROG);
    ipcp__unlock(&prog, IPCP_LOCK_PROG);

    unsetenv("IPCP_LOCK_CHECK_LOG");
    int st = out_of_order();
#ifdef IPCP_LOCK_CHECK
    T_CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
#else
    T_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
#endif
    return 0;
}
