/* The descriptor sets that travel with exports (backend.h). */
#include <unistd.h>

#include "backend/backend.h"

void ipcp__fds_close(ipcp__fds_t *s)
{
    for (int i = 0; i < s->n; i++)
        if (s->fd[i] >= 0)
            close(s->fd[i]);
    s->n = 0;
}

int ipcp__fds_dup(ipcp__fds_t *s, const int *fds, int n)
{
    ipcp__fds_close(s);
    if (n < 0 || n > IPCP_EXPORT_MAX_FDS)
        return -1;
    for (int i = 0; i < n; i++) {
        if ((s->fd[i] = dup(fds[i])) < 0) {
            s->n = i;
            ipcp__fds_close(s);
            return -1;
        }
        s->n = i + 1;
    }
    return 0;
}
