/* Sealed memfds: shared memory whose size no process can change once it is
 * handed to a peer.  A shared mapping accessed past the end of its file
 * raises SIGBUS, so a file a peer could shrink (or one that was never as
 * large as claimed) would let that peer kill us; seals rule both out. */
#ifndef IPCP_COMMON_SHM_H
#define IPCP_COMMON_SHM_H

#include <stddef.h>
#include <stdint.h>

#include "ipcpipe.h"

/* Creates a memfd of len bytes with its size sealed (shrink, grow and the
 * seals themselves).  Returns the fd, or -1 with errno set; EFBIG when len
 * is above the process's RLIMIT_FSIZE, which would otherwise kill the
 * process with SIGXFSZ instead of failing the call. */
int ipcp__memfd_sealed(const char *name, size_t len);

/* Checks that fd, received from a peer, is a memfd sealed against
 * shrinking that holds at least need bytes.  what names it in the error
 * (IPCP_ERR_BAD_DESCRIPTOR, logged at level for subsys). */
ipcp_status_t ipcp__memfd_check(int fd, uint64_t need, int level, int subsys,
                                const char *what);

/* Checks that fd, received from a peer to wake it, is an eventfd, and
 * makes writes to it non-blocking: a write to a full pipe or socket, or to
 * an eventfd whose counter the peer drove near its maximum, would block
 * the thread that writes.  Fails with IPCP_ERR_BAD_DESCRIPTOR. */
ipcp_status_t ipcp__eventfd_check(int fd, int level, int subsys,
                                  const char *what);

/* 0 when a file of len bytes fits under RLIMIT_FSIZE, else -1 with errno
 * EFBIG. */
int ipcp__fsize_ok(uint64_t len);

#endif
