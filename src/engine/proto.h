/* Wire protocol between the progress threads of two ranks (messages over the
 * bootstrap's SOCK_SEQPACKET sockets) and the layout of the shared memory of
 * a channel.  Both ends run the same build, so structs travel as they are;
 * the hello of the bootstrap checks the protocol version. */
#ifndef IPCP_ENGINE_PROTO_H
#define IPCP_ENGINE_PROTO_H

#include <stdint.h>

#include "backend/backend.h"
#include "bootstrap/bootstrap.h"
#include "common/util.h"

/* The version of this protocol, checked at the bootstrap's hello with
 * the routes' names (ipcp__proto).  2: striped transfers, 3: lane, 4: the
 * lane's flagged words and break message, 5: receiver-driven transfers,
 * 6: the region's address in a map reply, keepalive PING/PONG, 7: EAGER,
 * 8: mailbox records carry their position, 9: RTS_SRC_ADDR (the receiver
 * reads host memory with process_vm_readv), 10: the CTS names
 * the receiver's route, 11: an export may come with several descriptors
 * (device memory mapped piece by piece), 12: the bounce path, 13: its
 * ring's slot size in the CTS, RTS_NO_BOUNCE, 14: the hello carries the
 * node (IPCPIPE_NODE), 15: barriers are eager messages on IPCP_BAR_TAG,
 * 16: eager bytes only in EAGER messages, records up to a quarter of the
 * ring, 17: pipelined EAGER records (IPCP_EAGER_PIPE). */
#define IPCP_PROTO_VERSION 17

/* Most descriptors one message carries: a CTS's channel and its target's
 * export. */
#define IPCP_MSG_MAX_FDS (1 + IPCP_EXPORT_MAX_FDS)
_Static_assert(IPCP_MSG_MAX_FDS <= IPCP_SOCK_MAX_FDS,
               "a socket message must carry a CTS's descriptors");

#define IPCP_MAX_SLOTS      64
#define IPCP_MAX_QUEUES     8
#define IPCP_MAX_QSETS_WIRE 33
#define IPCP_MAX_REACH      16

enum {
    IPCP_MSG_RTS = 1, /* a sender (or a get's owner) offers data */
    IPCP_MSG_CTS,     /* the receiver says where and how */
    IPCP_MSG_MAP_REQ, /* importer asks for a region's export */
    IPCP_MSG_MAP_REP,
    IPCP_MSG_REG_GONE, /* owner freed or deregistered a region */
    IPCP_MSG_GET_REQ,  /* origin asks the owner to send a range */
    IPCP_MSG_BYE,      /* the peer is finalizing */
    IPCP_MSG_PATH,     /* the path the peer forces on what it receives */
    IPCP_MSG_LANE,     /* the peer's small-message lane block */
    IPCP_MSG_MBOX,     /* the sender's inbox for us (engine/mbox.c) */
    IPCP_MSG_SWITCH,   /* later messages come through our inbox */
    IPCP_MSG_PING,     /* keepalive: answer with a PONG (a header) */
    IPCP_MSG_PONG,
    IPCP_MSG_EAGER, /* a small message, its bytes after the header */
};

typedef struct ipcp__msg_hdr {
    uint32_t type;
    uint32_t flags;
} ipcp__msg_hdr_t;

#define IPCP_ERRWIRE_MAX 200

/* A two-sided message of host memory, whole: len bytes follow.  In the
 * peer's inbox where it fits a record (ipcp__mbox_msg_max), else on the
 * socket (IPCP_SOCK_MSG_MAX); a sender sends none that fits neither. */
typedef struct ipcp__msg_eager {
    ipcp__msg_hdr_t hdr;
    int32_t tag;
    uint32_t len;
} ipcp__msg_eager_t;

/* EAGER flags.  PIPE: a message longer than a record of its own may be
 * (ipcp__mbox_msg_max), which a sender's caller writes into the peer's
 * inbox in steps while the receiver copies it out (engine/mbox.c): fill,
 * the bytes written so far, follows the header, then the len bytes.  Only
 * in an inbox. */
#define IPCP_EAGER_PIPE 0x1

typedef struct ipcp__msg_pipe {
    ipcp__msg_eager_t e;
    uint64_t fill;
} ipcp__msg_pipe_t;

/* RTS flags.  PVM_OK: the sender may write the receiver's memory with
 * process_vm_writev.  PEER_RECV: the sender also has receives from the
 * receiver posted or running.  SRC: src_region/src_offset name the source;
 * the receiver may copy it itself (IPCPIPE_DRIVE) and then answers with a
 * DRIVEN CTS only.  SRC_EXP: an ipcp__export_t of src_region follows the
 * struct (first time to this receiver; a tail, so that eager RTSs keep
 * their room in a mailbox slot).  SRC_ADDR: host memory that is no
 * shareable allocation; src_offset is its address in the sender, which
 * the receiver may read itself with process_vm_readv (then a DRIVEN CTS
 * only, as for SRC). */
#define IPCP_RTS_EAGER     0x1 /* a kept EAGER message; never on the wire */
#define IPCP_RTS_PUT       0x2 /* one-sided put into reg_id at offset */
#define IPCP_RTS_GET_REPLY 0x4 /* answers the origin's get get_id */
#define IPCP_RTS_PVM_OK    0x8
#define IPCP_RTS_PEER_RECV 0x10
#define IPCP_RTS_SRC       0x20
#define IPCP_RTS_SRC_EXP   0x40
#define IPCP_RTS_SRC_FD    0x80 /* with SRC_EXP: its fd is attached */
#define IPCP_RTS_SRC_ADDR  0x100
/* The sender could not map a bounce ring of the receiver's before: its
 * device transfers go staged. */
#define IPCP_RTS_NO_BOUNCE 0x200

typedef struct ipcp__msg_rts {
    ipcp__msg_hdr_t hdr;
    int32_t tag;
    int32_t status; /* GET_REPLY: the owner's verdict */
    uint64_t id;    /* sender's operation id, echoed by the CTS */
    uint64_t len;
    uint64_t get_id;
    uint64_t reg_id;  /* PUT */
    uint64_t offset;  /* PUT */
    int32_t src_type; /* ipcp_mem_type_t of the source */
    int32_t src_device;
    uint32_t src_qset; /* sender's queue set (index of its done flags) */
    uint32_t src_nq;   /* queues in it */
    int32_t path;      /* PUT/GET_REPLY: path the origin asks for */
    uint32_t nreach;   /* device sources: entries of reach */
    /* Device sources: the source device and every device it can write
     * directly (backend device_reach); the receiver picks the direct path
     * only when its buffer's device is among them. */
    uint64_t reach[IPCP_MAX_REACH];
    uint64_t src_region; /* SRC: the sender's allocation id */
    uint64_t src_offset; /* SRC: the buffer's offset in it; SRC_ADDR: its
                            address in the sender */
    char errmsg[IPCP_ERRWIRE_MAX]; /* status < 0 */
} ipcp__msg_rts_t;

/* CTS flags.  MAP_FD: an fd for the target export is attached (after the
 * channel's, if both).  DRIVEN: the receiver copied the data itself (an
 * RTS_SRC transfer); the send ends here, with status and path. */
#define IPCP_CTS_CHAN_FD 0x1 /* the channel's memfd is attached (first fd) */
#define IPCP_CTS_MAP_FD  0x2
#define IPCP_CTS_HAS_EXP 0x4 /* exp describes the target allocation */
#define IPCP_CTS_DRIVEN  0x8
/* SPLIT (direct, host): the receiver copies [0, head_len) itself out of the
 * sender's buffer (RTS_SRC or RTS_SRC_ADDR) while the sender writes the
 * rest; the send ends at the receiver's DRIVEN CTS, which follows its
 * own done flags. */
#define IPCP_CTS_SPLIT 0x10
/* Bounce: the ring's chunks are whole slots from the first (one GPU). */
#define IPCP_CTS_NO_RAMP 0x20
/* Bounce: each side enqueues a chunk once the host sees its flag met. */
#define IPCP_CTS_GATE 0x40

/* BOUNCE is the receiver's choice alone (ipcp__sent_choose): its CTS
 * names the ring in device memory it made (dst_region, path BOUNCE) with
 * dst_mode MAPPED. */
enum { IPCP_DST_MAPPED = 1, IPCP_DST_PVM = 2, IPCP_DST_BOUNCE = 3 };

typedef struct ipcp__msg_cts {
    ipcp__msg_hdr_t hdr;
    int32_t status;
    int32_t path; /* ipcp_path_t chosen by the receiver */
    uint64_t id;  /* the RTS's id */
    uint64_t len;
    uint64_t chunk_base;     /* staged: first ring chunk of this transfer */
    uint64_t dseq;           /* direct: value for the done flags */
    uint64_t sseq;           /* staged: the transfer's number (error slot) */
    uint32_t dst_mode;       /* direct: MAPPED or PVM */
    uint32_t npieces;        /* direct: copies (and done flags) to use */
    uint32_t dq_lo;          /* direct: the sender's first queue for them */
    uint32_t route;          /* ipcp__route_id of the receiver's route */
    uint64_t stripe_len;     /* striped: bytes at the end that go staged */
    uint64_t dst_region;     /* direct MAPPED: receiver's allocation id;
                                bounce: its ring's */
    uint64_t dst_offset;     /* direct MAPPED: offset of the buffer in it */
    uint64_t dst_addr;       /* direct PVM: receiver's address */
    uint64_t head_len;       /* SPLIT: the bytes the receiver copies */
    uint64_t ring_slot;      /* bounce: bytes of a slot of its ring */
    ipcp__export_t chan_exp; /* with CHAN_FD: the channel's memfd export */
    ipcp__export_t exp;      /* with HAS_EXP: the target allocation */
    char errmsg[IPCP_ERRWIRE_MAX];
} ipcp__msg_cts_t;

typedef struct ipcp__msg_map_req {
    ipcp__msg_hdr_t hdr;
    uint64_t id;
    uint64_t reg_id;
} ipcp__msg_map_req_t;

#define IPCP_MAP_HAS_EXP 0x1
#define IPCP_MAP_FD      0x2

typedef struct ipcp__msg_map_rep {
    ipcp__msg_hdr_t hdr;
    int32_t status;
    int32_t mem_type;
    uint64_t id;
    uint64_t reg_id;
    uint64_t len;
    uint64_t offset; /* of the region in the export */
    uint64_t addr;   /* of the region in the owner's process: the
                        importer refuses a descriptor that names
                        another (one-sided writes through
                        process_vm_writev use the address) */
    ipcp__export_t exp;
    char errmsg[IPCP_ERRWIRE_MAX];
} ipcp__msg_map_rep_t;

/* REG_GONE flags */
#define IPCP_REG_GONE_ASK 0x1 /* answer once nothing of yours touches it */
#define IPCP_REG_GONE_ACK 0x2 /* that answer */

typedef struct ipcp__msg_reg_gone {
    ipcp__msg_hdr_t hdr;
    uint64_t reg_id;
} ipcp__msg_reg_gone_t;

typedef struct ipcp__msg_get_req {
    ipcp__msg_hdr_t hdr;
    uint64_t id;
    uint64_t reg_id;
    uint64_t offset;
    uint64_t len;
    int32_t path;
    uint32_t pad;
} ipcp__msg_get_req_t;

typedef struct ipcp__msg_path {
    ipcp__msg_hdr_t hdr;
    int32_t path;
    uint32_t pad;
} ipcp__msg_path_t;

/* The sender's block of the small-message lane (engine/lane.c), its fd
 * beside it; status != IPCP_OK: it has none (why: the sender logged it),
 * and the receiver's lane kernels towards it fail.  A second one, without
 * an fd and with status != IPCP_OK, says the sender's side broke since (a
 * numbered message was never launched): the receiver's lane stops too. */
typedef struct ipcp__msg_lane {
    ipcp__msg_hdr_t hdr;
    int32_t status;
    uint32_t small; /* the sender's IPCPIPE_SMALL */
    uint32_t nslots;
    uint32_t slot_bytes;
    uint32_t words_max; /* the sender's IPCPIPE_SMALL_WORDS */
    uint32_t pad;
    ipcp__export_t exp;
} ipcp__msg_lane_t;

/* An inbox offered to the peer: its memfd and the offerer's wake eventfd
 * travel as descriptors; the layout must be the peer's own. */
typedef struct ipcp__msg_mbox {
    ipcp__msg_hdr_t hdr;
    uint64_t size;
    uint32_t slots;
    uint32_t slot;
} ipcp__msg_mbox_t;

/* A barrier's message (src/api_barrier.c): a two-sided message on
 * IPCP_BAR_TAG, which no user's tag can be (they are >= 0), from the
 * sender's round `round` of its barrier `epoch` (both from 0). */
#define IPCP_BAR_TAG   (-1)
#define IPCP_BAR_MAGIC 0x72616270u /* "pbar" */
/* Rounds of a barrier of n ranks: ceil(log2(n)) <= 31 for an int n. */
#define IPCP_BAR_ROUNDS 31

typedef struct ipcp__bar_msg {
    uint64_t epoch;
    uint32_t round;
    uint32_t magic;
} ipcp__bar_msg_t;

/* ---- Shared memory of a channel --------------------------------------- */

#define IPCP_CHAN_MAGIC   0x6e61686370637069ULL /* "ipcpchan" */
#define IPCP_CHAN_VERSION 2

/* Each flag owns a cache line: the sender writes `full`, the receiver
 * `freed`, and sharing a line would bounce it between cores (or between the
 * CPU and a GPU polling it) on every chunk. */
typedef struct ipcp__flag {
    _Alignas(IPCP_CACHE_LINE) uint64_t v;
} ipcp__flag_t;

#define IPCP_ERR_SLOTS 64

typedef struct ipcp__errslot {
    uint64_t seq; /* the failed transfer's number (0: none yet) */
    int64_t status;
} ipcp__errslot_t;

typedef struct ipcp__chan_ctl {
    uint64_t magic;
    uint64_t version;
    uint64_t size; /* of the whole mapping */
    uint64_t nslots;
    uint64_t slot_size;
    uint64_t slots_offset;    /* from the start of the mapping */
    uint64_t slots_per_queue; /* the creator's IPCPIPE_SLOTS_PER_QUEUE: a
                                 staged transfer's queues on both sides */
    ipcp__flag_t full[IPCP_MAX_SLOTS];  /* chunk c in slot c % S: c / S + 1 */
    ipcp__flag_t freed[IPCP_MAX_SLOTS]; /* written after c is copied out */
    ipcp__flag_t done[IPCP_MAX_QSETS_WIRE][IPCP_MAX_QUEUES]; /* direct */
    /* A sender whose transfer failed before its data went out (a set-up or
     * enqueue failure) fills the transfer's error slot before it raises the
     * flags that release the receiver, so that the receiver fails it too.
     * Direct transfers are numbered per sender queue set (dseq), staged
     * ones per channel (sseq); a slot is reused IPCP_ERR_SLOTS transfers
     * later. */
    ipcp__errslot_t derr[IPCP_MAX_QSETS_WIRE][IPCP_ERR_SLOTS];
    ipcp__errslot_t serr[IPCP_ERR_SLOTS];
} ipcp__chan_ctl_t;

/* Slots start on a 64 KiB boundary (a multiple of every page size that
 * matters and of the GPUs' copy alignment). */
#define IPCP_CHAN_SLOTS_ALIGN (64u << 10)

#endif
