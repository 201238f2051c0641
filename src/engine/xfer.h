/* What the files of a transfer's paths share among themselves (xfer.c:
 * queue sets, channels, imports and enqueueing; staged.c: the ring's
 * chunks; share.c: the striped share; accept.c: the receiver's choice and
 * half; drive.c: receiver-driven transfers; send.c: the sender's half).
 * Everything here runs on the progress thread or in a caller's turn
 * (comm->prog_lock), unless it says otherwise. */
#ifndef IPCPIPE_ENGINE_XFER_H
#define IPCPIPE_ENGINE_XFER_H

#include "engine/engine.h"

/* Why the path was chosen, kept as what was seen: the sentence is only
 * written when it is logged or returned in an error (formatting it for
 * every transfer cost a few tenths of a microsecond before each CTS). */
enum {
    IPCP_WHY_KINDS,    /* source and destination memory differ */
    IPCP_WHY_NO_PEER,  /* the peer's GPU cannot reach this one */
    IPCP_WHY_MAPPED,   /* the buffer lies in a shareable allocation */
    IPCP_WHY_PVM,      /* process_vm_writev allowed */
    IPCP_WHY_UNSHARED, /* none of the above */
    IPCP_WHY_FORCED_STAGED,
    IPCP_WHY_DRIVEN,       /* this process copies it (IPCPIPE_DRIVE) */
    IPCP_WHY_PVM_READ,     /* this process reads it with process_vm_readv */
    IPCP_WHY_BOUNCE,       /* neither buffer shareable: the device ring */
    IPCP_WHY_NO_RING,      /* ... but the device ring could not be made */
    IPCP_WHY_RING_REFUSED, /* ... or mapped by the sender */
};

/* Slots the staged ring's chunks pass through other than the channel's
 * (the bounce path's, in device memory): as many as the channel has. */
typedef struct ipcp__ring {
    char *slots;
    uint64_t slot_size;
    int no_ramp; /* whole slots from the first chunk (IPCP_CTS_NO_RAMP) */
    int gate;    /* chunks enqueued once their flag is up (IPCP_CTS_GATE) */
} ipcp__ring_t;

/* The slot size of the ring a staged part passes through (ring, or the
 * channel's when NULL), and the slot its chunks ramp to (0: none). */
static inline uint64_t ipcp__ring_slot(const ipcp__chan_t *ch,
                                       const ipcp__ring_t *ring)
{
    return ring ? ring->slot_size : ch->slot_size;
}

static inline uint64_t ipcp__ring_ramp(const ipcp__chan_t *ch,
                                       const ipcp__ring_t *ring)
{
    return ring && ring->no_ramp ? 0 : ipcp__ring_slot(ch, ring);
}

typedef struct ipcp__choice {
    ipcp_path_t path;
    int mode;              /* IPCP_DST_MAPPED, _PVM or _BOUNCE */
    ipcp__region_t region; /* MAPPED: copy of the allocation; BOUNCE:
                              the ring's number and address */
    ipcp__ring_t ring;     /* BOUNCE: the ring's slots here */
    int why;               /* IPCP_WHY_* */
    int src_type;          /* the RTS's ipcp_mem_type_t */
    uint64_t staged;       /* striped: bytes staged at once */
    uint64_t head;         /* split: bytes this process copies itself */
} ipcp__choice_t;

/* How a two-sided transfer is cut, as the receiver planned it: the
 * direct part [0, dlen) in np pieces over the sender's queues from lo_s
 * (ours from lo_r), the staged part [dlen, len) in nchunks ring chunks of
 * unit bytes. */
typedef struct ipcp__plan {
    ipcp__choice_t c;
    int direct;          /* a direct part (direct or striped) */
    uint64_t dlen, slen; /* direct and staged bytes */
    uint64_t unit;       /* staged: bytes a chunk */
    uint64_t nchunks;    /* staged: ring chunks */
    unsigned np;         /* direct: pieces */
    unsigned snq;        /* the sender's queues */
    unsigned lo_s, lo_r; /* direct: first queue each side */
    ipcp__watch_t watch; /* striped: the watch of its two ends */
} ipcp__plan_t;

/* xfer.c: queue sets, channels, imports, enqueueing */
ipcp_status_t ipcp__chan_create(ipcp_comm_t *comm, ipcp__dir_t *dir,
                                int device_mem);
ipcp_status_t ipcp__chan_import(ipcp_comm_t *comm, ipcp__dir_t *dir,
                                const ipcp__export_t *exp, int fd);
int ipcp__chan_ring(ipcp_comm_t *comm, ipcp__dir_t *dir, int device,
                    uint64_t slot_size, ipcp__ring_t *ring, uint64_t *id);
ipcp_status_t ipcp__import_get(ipcp_comm_t *comm, ipcp__peer_t *peer,
                               uint64_t id, const ipcp__mem_attr_t *attr,
                               ipcp__import_t **out);
unsigned ipcp__npieces(const ipcp_comm_t *comm, uint64_t len, unsigned nq,
                       int device);
unsigned ipcp__direct_queue(uint64_t dseq, unsigned i, unsigned lo,
                            unsigned nq);
void ipcp__piece(uint64_t len, unsigned n, unsigned i, uint64_t *off,
                 uint64_t *plen);
void ipcp__xfer_begin(ipcp_comm_t *comm, ipcp__peer_t *peer,
                      ipcp_request_t *req, int rx, size_t npieces);
void ipcp__xfer_go(ipcp__xfer_t *x);
void ipcp__enq_check(ipcp__track_t *t, ipcp_status_t st);
void ipcp__fault_enq(ipcp__qset_t *qs, ipcp__queue_t *q, ipcp__track_t *t,
                     int stage);
void ipcp__enq_notify(ipcp__qset_t *qs, int q, ipcp__track_t *t);
void ipcp__enq_end(ipcp_request_t *req, ipcp__qset_t *qs, unsigned mask);

/* staged.c: the ring's chunks */
int ipcp__staged_nq(const ipcp__chan_t *ch, int nq);
int ipcp__staged_queues(const ipcp__chan_t *ch, const ipcp__qset_t *qs);
uint64_t ipcp__staged_unit(uint64_t len, uint64_t slot, int striped);
uint64_t ipcp__staged_nchunks(uint64_t len, uint64_t slot, uint64_t ring_slot);
void ipcp__stage_init(ipcp__xfer_t *x, ipcp__chan_t *ch,
                      const ipcp__ring_t *ring, char *buf, uint64_t len,
                      uint64_t unit, uint64_t base, int send, int remote_done,
                      ipcp__errslot_t *slot, uint64_t seq);
void ipcp__stage_go(ipcp_comm_t *comm, ipcp__xfer_t *x, ipcp__qset_t *qs,
                    unsigned mask);
void ipcp__stage_flush(ipcp_comm_t *comm, ipcp__qset_t *qs);

/* share.c: the striped share */
int ipcp__local_device(ipcp_comm_t *comm, uint64_t id);
double ipcp__stripe_auto_share(ipcp_comm_t *comm, ipcp__peer_t *peer,
                               const ipcp__msg_rts_t *rts,
                               const ipcp_request_t *req, ipcp_path_t force,
                               int ring, ipcp__watch_t *w, uint64_t *min,
                               ipcp__adapt_t **a);
void ipcp__stripe_settle(ipcp__adapt_t *a, ipcp__watch_t *w, uint64_t n);
uint64_t ipcp__stripe_choose(ipcp_comm_t *comm, ipcp__peer_t *peer,
                             const ipcp__msg_rts_t *rts,
                             const ipcp_request_t *req, const ipcp__choice_t *c,
                             ipcp_path_t force, const ipcp__chan_t *ch,
                             const ipcp__qset_t *qs, unsigned *lo_s,
                             unsigned *lo_r, ipcp__watch_t *w);

/* accept.c: the receiver's choice */
int ipcp__reachable(ipcp_comm_t *comm, const ipcp__msg_rts_t *rts,
                    const ipcp_request_t *req);
void ipcp__log_choice(ipcp_comm_t *comm, ipcp__peer_t *peer,
                      const ipcp_request_t *req, const ipcp__choice_t *c,
                      ipcp_path_t force);

/* drive.c: receiver-driven transfers */
/* Enqueues on qs's queue qi the copy of [off, off + n) of the sender's
 * buffer named by rts into dst + off: out of its allocation mapped here
 * (imp), else read with process_vm_readv (RTS_SRC_ADDR). */
ipcp_status_t ipcp__src_copy(ipcp__qset_t *qs, int qi, const ipcp__peer_t *peer,
                             const ipcp__msg_rts_t *rts,
                             const ipcp__import_t *imp, char *dst, uint64_t off,
                             uint64_t n, ipcp__track_t *t);

#endif
