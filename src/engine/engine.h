/* The engine: matching, paths (eager, direct, staged, striped,
 * receiver-driven, the lane), chunking, slots and progress.  It is shared
 * by every backend and sees them only through backend.h.  This header
 * gathers the engine's module headers for the files that use most of them.
 *
 * Threads.  The protocol state (peer lists, channels, sequence numbers)
 * belongs to whoever holds comm->prog_lock: the progress thread for its
 * turns, or a waiting caller for one of its own (ipcp__comm_drive, only
 * while no device backend is open).  User threads hand commands
 * (requests) through comm->cmds; backends' threads hand finished tracks
 * through comm->dones.  Both lists are guarded by comm->lock, which also
 * guards request completion (done flag + comm->cond).  The memory registry
 * has its own lock because user threads read and write it directly. */
#ifndef IPCP_ENGINE_H
#define IPCP_ENGINE_H

#include "engine/base.h"
#include "engine/peer.h"
#include "engine/req.h"
#include "engine/region.h"
#include "engine/comm.h"
#include "engine/match.h"
#include "engine/paths.h"
#include "engine/mbox.h"
#include "engine/dev.h"
#include "engine/memreg.h"
#include "engine/sync.h"
#include "engine/lane.h"
#include "engine/trace.h"

#endif
