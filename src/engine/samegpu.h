/* Two ranks on one GPU: what the receiver of a device transfer says about
 * it, once per peer (engine/samegpu.c). */
#ifndef IPCP_ENGINE_SAMEGPU_H
#define IPCP_ENGINE_SAMEGPU_H

#include <stddef.h>

#include "engine/engine.h"

/* The line for a peer of rank `rank` whose buffer lies on this process's
 * GPU `device`, given what the backend says of MPS there (1 on, 0 off,
 * -1 unknown); pure, for tests. */
void ipcp__samegpu_text(char *buf, size_t len, int rank, int device, int mps);

/* Whether the sender's buffer (rts) lies on the GPU of the receive
 * buffer. */
int ipcp__samegpu(ipcp_comm_t *comm, const ipcp__msg_rts_t *rts,
                  const ipcp_request_t *req);

/* Called as a receive meets the peer's RTS: the first time a device
 * transfer from this peer comes out of a buffer on the GPU of the receive
 * buffer, logs ipcp__samegpu_text at info level. */
void ipcp__samegpu_note(ipcp_comm_t *comm, ipcp__peer_t *peer,
                        const ipcp__msg_rts_t *rts, const ipcp_request_t *req);

#endif
