/* The engine's defaults and limits, and the names of its structs (each
 * defined in its module's header). */
#ifndef IPCP_ENGINE_BASE_H
#define IPCP_ENGINE_BASE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

#include "ipcpipe.h"
#include "backend/backend.h"
#include "bootstrap/bootstrap.h"
#include "common/config.h"
#include "common/fault.h"
#include "common/handle.h"
#include "common/list.h"
#include "common/lockorder.h"
#include "common/status.h"
#include "engine/stripe.h"
#include "engine/proto.h"

#define IPCP_COMM_MAGIC 0x636f6d6d69706370ULL /* "pcpicomm" */
#define IPCP_REQ_MAGIC  0x7265717569706370ULL
#define IPCP_MEM_MAGIC  0x6d656d5f69706370ULL
#define IPCP_RMEM_MAGIC 0x6d656d7269706370ULL
#define IPCP_DEAD_MAGIC 0xdeadbeefdeadbeefULL

/* Host chunk/slot defaults.  1 MiB slots stay inside the last-level cache of
 * the receiving core while they are copied out, which is what lets a staged
 * copy run at more than half of memcpy on a small machine. */
#define IPCP_HOST_CHUNK  (1u << 20)
#define IPCP_HOST_SLOTS  8
#define IPCP_HOST_QUEUES 2
/* CUDA defaults.  Measured on 2 x H200 (staged, 1 GiB, share of the
 * pinned-copy ceiling): 16 MiB x 4 slots on one queue 93%, 8 MiB x 8 slots
 * on two 89.5%, on four 88.7%; 16 MiB x 4 slots on four queues 48% (each
 * queue needs slots of its own in flight).  A pair's ring stays within
 * 64 MiB.  Direct copies use the four queues. */
#define IPCP_CUDA_CHUNK (16u << 20)
#define IPCP_CUDA_SLOTS 4
/* The bounce path's slots between two processes on one GPU (a ring of as
 * many as the channel's in the receiver's device memory), and the most
 * device memory a ring takes (its slots are made smaller to fit). */
#define IPCP_BOUNCE_SAMEGPU_CHUNK ((uint64_t)64 << 20)
#define IPCP_BOUNCE_RING_MAX      ((uint64_t)256 << 20)
/* The slots a peer's CTS may name (IPCPIPE_CHUNK's range). */
#define IPCP_RING_SLOT_MIN ((uint64_t)4096)
#define IPCP_RING_SLOT_MAX ((uint64_t)1 << 30)
#define IPCP_CUDA_QUEUES   4
/* Direct transfers (IPCPIPE_PIECE=auto): host copies split into pieces of
 * at least 256 KiB over the worker threads; copies that involve device
 * memory are not split (see ipcp__npieces). */
#define IPCP_PIECE_HOST   ((uint64_t)256 << 10)
#define IPCP_PIECE_DEVICE ((uint64_t)1 << 40)
/* A pair of GPUs whose striping was looked up (sending GPU's identity,
 * receiving GPU's ordinal); share 0: not striped. */
#define IPCP_STRIPE_MEMO 16
/* The smallest size a striping calibration considers (cuda_stripe.c): no
 * smaller transfer makes a process measure. */
#define IPCP_STRIPE_MIN_SIZE ((uint64_t)8 << 20)
/* While the pair also moves data the other way, auto stripes transfers of
 * at least this many bytes only (share.c, ipcp__stripe_choose), at the
 * calibration's share for both ways: on 2 x H200 at 7% both ways, 512 MiB
 * gained 4% (793 against 762 GB/s direct), 256 MiB nothing (740 / 744). */
#define IPCP_STRIPE_BIDIR_MIN ((uint64_t)512 << 20)
typedef struct ipcp__stripe_memo {
    uint64_t src_id;
    int dst;
    ipcp__stripe_entry_t e; /* share 0: not striped */
    /* 1: e is final; 0: the file had no entry and a user's stream waited,
     * so nothing was measured (e says no striping) */
    int measured;
    /* IPCPIPE_STRIPE_ADAPT: factors on e's share, one way and both ways,
     * by size class */
    ipcp__adapt_t adapt[2][IPCP_ADAPT_CLASSES];
} ipcp__stripe_memo_t;

/* Longest a caller waiting for a request polls while device transfers
 * are in flight, before it sleeps. */
#define IPCP_DEV_SPIN_NS ((uint64_t)100 * 1000 * 1000)
/* After a device send offers its buffer, the sender polls for as long as
 * the receiver's copy of it would take at this rate (bytes per ns), so
 * that the end comes without a wake-up (ipcp__await_offer).  A quarter of
 * what NVLink moves on 2 x H200 (~390 GB/s), room for a receive posted a
 * little late; copies over PCIe (25-50 GB/s) outlast it and sleep as
 * before, rather than poll for tens of milliseconds. */
#define IPCP_AWAIT_BYTES_PER_NS 100
/* Staged chunks go round-robin over at most nslots / this many queues, so
 * that every queue has a slot filling while another drains (the default
 * of IPCPIPE_SLOTS_PER_QUEUE; one slot a queue ran at 48% of the copy
 * engines on 2 x H200: every queue filled its slot at once, then drained
 * it at once). */
#define IPCP_SLOTS_PER_QUEUE 4

/* Queue sets: index 0 is host memory, 1 + d is CUDA device d. */
#define IPCP_MAX_DEVICES 32
#define IPCP_MAX_QSETS   (1 + IPCP_MAX_DEVICES)
_Static_assert(IPCP_MAX_QSETS == IPCP_MAX_QSETS_WIRE, "done flags per qset");

typedef struct ipcp__peer ipcp__peer_t;
typedef struct ipcp__region ipcp__region_t;
typedef struct ipcp__sync ipcp__sync_t;
typedef struct ipcp__lane ipcp__lane_t;
typedef struct ipcp__trace_ev ipcp__trace_ev_t;

typedef struct ipcp__xfer ipcp__xfer_t;

#endif
