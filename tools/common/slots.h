/* The benches' buffers of fresh data: a slot of `size` bytes in host or
 * device memory (dev) filled with the pattern stream (pattern.h) or a
 * poison byte, and read back for a check.  Device slots go through the
 * tools' driver table (tool_cuda.h) on the calling thread's context. */
#ifndef IPCP_TOOLS_SLOTS_H
#define IPCP_TOOLS_SLOTS_H

#include <stddef.h>
#include <stdint.h>

/* The byte a slot holds before a transfer writes it (seed 0). */
#define TOOL_SLOT_POISON 0xa5

/* Fills the slot at p with the stream of seed at offset off, or with
 * TOOL_SLOT_POISON (seed 0); a device slot through tmp (size bytes of
 * host memory) and synchronized, so the library's streams see it.  0, or
 * -1 with the driver's reason in err. */
int tool_slot_fill(unsigned char *p, int dev, size_t size, uint64_t seed,
                   uint64_t off, unsigned char *tmp, char *err, size_t elen);

/* The slot's bytes in host memory: p itself, or a device slot copied into
 * tmp.  NULL with the driver's reason in err. */
unsigned char *tool_slot_read(unsigned char *p, int dev, size_t size,
                              unsigned char *tmp, char *err, size_t elen);

#endif
