/* The shared-memory mailboxes between peers (mbox.c, docs/mailbox.md). */
#ifndef IPCP_ENGINE_MBOX_H
#define IPCP_ENGINE_MBOX_H

#include "engine/comm.h"

/* The longest message a turn reads from a peer in one piece: a record of
 * its inbox (ipcp__mbox_msg_max) or a socket message (IPCP_SOCK_MSG_MAX).
 * A turn reads into comm->rxbuf, which holds this many bytes. */
#define IPCP_RX_MAX (128 * 1024)

void ipcp__mbox_offer(ipcp_comm_t *comm);
void ipcp__mbox_on_offer(ipcp_comm_t *comm, ipcp__peer_t *peer,
                         const unsigned char *msg, size_t len, int *fds,
                         int nfds);
void ipcp__mbox_try_switch(ipcp_comm_t *comm, ipcp__peer_t *peer);
/* One message into the peer's inbox (through the socket and a marker when
 * it has descriptors or does not fit a slot); IPCP_IN_PROGRESS: full. */
ipcp_status_t ipcp__mbox_send(ipcp__peer_t *peer, const void *data, size_t len,
                              const int *fds, int nfds);
int ipcp__mbox_read(ipcp_comm_t *comm, ipcp__peer_t *peer,
                    void (*dispatch)(ipcp_comm_t *, ipcp__peer_t *,
                                     const unsigned char *, size_t, int *, int),
                    void *buf, size_t cap);
/* The same to the inbox's end, even while a caller reads it or a fresh
 * eager message waits for one (after the peer hung up). */
int ipcp__mbox_read_all(ipcp_comm_t *comm, ipcp__peer_t *peer,
                        void (*dispatch)(ipcp_comm_t *, ipcp__peer_t *,
                                         const unsigned char *, size_t, int *,
                                         int),
                        void *buf, size_t cap);
/* Before the progress thread blocks (mbox_wait.c): 1 when it must not;
 * else *look_ns, if not 0, is how soon it must look again (a fresh eager
 * message waits for its caller). */
int ipcp__mbox_sleep(ipcp_comm_t *comm, uint64_t *look_ns);
/* The time left (ns) of the eager message at the inbox's head that its
 * caller is to read, not the thread (0: none; the thread's). */
uint64_t ipcp__mbox_fresh_eager(const ipcp_comm_t *comm, ipcp__peer_t *peer);
void ipcp__mbox_awake(ipcp_comm_t *comm);
/* Longest message the mailbox carries in its slots (headers included). */
size_t ipcp__mbox_msg_max(const ipcp__peer_t *peer);
/* Longest record of any kind (a pipelined EAGER message's, headers
 * included). */
size_t ipcp__mbox_rec_max(const ipcp__peer_t *peer);
/* Longest message ipcp__peer_post carries to the peer whole, by whichever
 * way it takes now: an eager message is never longer. */
size_t ipcp__mbox_carry_max(const ipcp__peer_t *peer);
/* Slots of every ring of a job of size ranks (engine/mbox.c). */
uint32_t ipcp__mbox_slots(int size);
/* Bytes of a ring of that many slots, its header included. */
size_t ipcp__mbox_bytes(uint32_t slots);
/* A caller's EAGER message into the peer's inbox, when nothing of ours
 * waits before it (commands, the socket's queue), waiting up to a
 * millisecond for room; IPCP_IN_PROGRESS: not now.  A peer whose
 * receives are all read by their callers is not woken for it
 * (IPCP_MBOX_LAZY). */
ipcp_status_t ipcp__mbox_send_fast(ipcp__peer_t *peer, const void *hdr,
                                   size_t hlen, const void *data, size_t len);
/* The longest message a caller sends as a plain record; longer ones are
 * pipelined (ipcp__mbox_send_pipe).  As plain records, 96 KiB messages
 * reached 15.7-18.4 GB/s and 128 KiB ones 12.9-14.2 (2-CPU VM, ranks
 * bound), each copied in whole by one side after the other. */
#ifndef IPCP_MBOX_PLAIN_MAX /* a build may set it to measure another */
#define IPCP_MBOX_PLAIN_MAX (64u << 10)
#endif

/* A caller's EAGER message longer than a plain record, as
 * one record of the peer's inbox that the peer copies out while we write
 * it (IPCP_EAGER_PIPE), waiting up to a millisecond for room;
 * IPCP_IN_PROGRESS: not now (full, or behind our commands). */
ipcp_status_t ipcp__mbox_send_pipe(ipcp__peer_t *peer, int tag,
                                   const void *data, size_t len);
/* Copies the len bytes of the pipelined record whose header is at rec to
 * dst (NULL: only waits for them) as its writer fills them in (rx_lock
 * held).  0 once all came; -1 when its writer stopped (its process ended,
 * the peer is lost, or nothing came for the timeout): peer->pipe_dead,
 * and no later record is read. */
int ipcp__mbox_pipe_copy(ipcp_comm_t *comm, ipcp__peer_t *peer, void *dst,
                         const unsigned char *rec, size_t len);
/* A pipelined message's bytes (msg: its record) where they go as its
 * writer fills them in (rx_lock held): into r's buffer when r is a host
 * receive they fit, else into a buffer of their own (*own, which the
 * caller frees), from which the rest goes on as from a plain message's.
 * NULL: its writer stopped (r stays posted), or no memory (*nomem). */
const unsigned char *ipcp__mbox_pipe_take(ipcp_comm_t *comm, ipcp__peer_t *peer,
                                          ipcp_request_t *r,
                                          const unsigned char *msg, size_t len,
                                          unsigned char **own, int *nomem);
/* The message at the head of the peer's inbox, when it is an EAGER one
 * with tag of at most cap bytes: copied to buf (*got bytes) and its slots
 * given back; 1 when it was, 0 when the head holds anything else or
 * nothing.  rx_lock held. */
int ipcp__mbox_head_eager(ipcp_comm_t *comm, ipcp__peer_t *peer, int tag,
                          void *buf, size_t cap, size_t *got);
/* Delivers the EAGER messages at the head of the peer's inbox to the
 * receives posted for them, as a waiting caller does, up to the first
 * that none is posted for (or anything else).  rx_lock held.  Returns how
 * many. */
int ipcp__mbox_drain_posted(ipcp_comm_t *comm, ipcp__peer_t *peer);
/* A caller waits for req (a receive it posted, or a send in a process
 * whose callers take turns) reading the peer's inbox itself, up to
 * spin_ns. */
void ipcp__mbox_wait(ipcp_comm_t *comm, ipcp_request_t *req, uint64_t spin_ns);
/* A receive from the peer became the thread's to complete (counted in
 * n_posted_thread already): a lazy word turns WAKE, and the thread wakes
 * for what came meanwhile without waking it.  Any thread. */
void ipcp__mbox_thread_needed(ipcp_comm_t *comm, ipcp__peer_t *peer);
/* Before a caller sleeps on req (a receive it posted itself): its message
 * becomes the progress thread's to read, which writers wake for it. */
void ipcp__mbox_unwatch(ipcp_comm_t *comm, ipcp_request_t *req);
/* One look at the inbox for req (a receive its caller posted itself), as
 * ipcp_test makes: the progress thread leaves such messages to callers
 * for spin_us. */
void ipcp__mbox_poll(ipcp_comm_t *comm, ipcp_request_t *req);
void ipcp__mbox_close(ipcp__peer_t *peer);

/* Progress loop: enqueues the next chunk of the oldest transfer still
 * being staged (ipcp__stage_t); returns 1 when it did. */
int ipcp__stage_poll(ipcp_comm_t *comm);
/* Enqueues every chunk still to go (the progress thread's exit). */
void ipcp__stage_flush_all(ipcp_comm_t *comm);
/* Progress loop: notes which parts of the watched striped transfers have
 * ended (IPCPIPE_STRIPE_ADAPT). */
void ipcp__stripe_watch(ipcp_comm_t *comm);
/* A watched transfer completed (ok: without failure): its watch ends. */
void ipcp__stripe_watch_end(ipcp_comm_t *comm, ipcp__xfer_t *x, int ok);
/* Fills a transfer's error slot in the channel for the receiver. */
void ipcp__err_report(ipcp__errslot_t *slot, uint64_t seq, ipcp__track_t *t);
/* Receiver: copies eager bytes into a device buffer on its queue. */
void ipcp__xfer_eager_to_device(ipcp_comm_t *comm, ipcp__peer_t *peer,
                                ipcp_request_t *req, const void *data,
                                size_t len);
/* One-sided ops on a mapped or pvm-reachable region, without the owner. */
void ipcp__xfer_onesided_direct(ipcp_comm_t *comm, ipcp_request_t *req);
/* Returns the queue set for a direction, creating it. */
ipcp_status_t ipcp__qset_get(ipcp_comm_t *comm, ipcp__peer_t *peer,
                             ipcp__dir_t *dir, const ipcp__mem_attr_t *attr,
                             ipcp__qset_t **qs);
int ipcp__qset_index(const ipcp__mem_attr_t *attr);
void ipcp__dir_destroy(ipcp_comm_t *comm, ipcp__dir_t *dir);
void ipcp__import_put(ipcp_comm_t *comm, ipcp__peer_t *peer,
                      ipcp__import_t *imp);
/* Forgets the peer's export of region id (0: all of them). */
void ipcp__rexport_drop(ipcp__peer_t *peer, uint64_t id);
/* Keeps the peer's export of region id, with duplicates of the nfds
 * descriptors that came with it. */
void ipcp__rexport_put(ipcp__peer_t *peer, uint64_t id,
                       const ipcp__export_t *exp, const int *fds, int nfds);
/* Lost peer: releases device waits by writing the flags (host waits see
 * peer->lost themselves). */
void ipcp__xfer_release_waits(ipcp_comm_t *comm, ipcp__peer_t *peer);

#endif
