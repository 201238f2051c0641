/* Where a PCI device sits: the bridges from its host bridge down to it,
 * as sysfs shows them, and how two devices reach each other.  GPUs behind
 * one root port share that port's link to host memory, so the staged
 * parts of transfers between different pairs of them compete for it
 * (issue: striping under load).  Read from sysfs, not from the driver:
 * the driver gives the bus id alone. */
#ifndef IPCP_COMMON_PCITOPO_H
#define IPCP_COMMON_PCITOPO_H

#include "ipcpipe_diag.h"

/* *out for the device at bus_id ("0000:19:00.0", any case, a domain of 4
 * or 8 hex digits) under the sysfs tree at sysfs ("/sys").  IPCP_OK, or
 * IPCP_ERR_INVALID for a bus id that is not one, IPCP_ERR_UNSUPPORTED
 * when sysfs does not know the device; the reason in ipcp_last_error(). */
ipcp_status_t ipcp__pci_read(const char *sysfs, const char *bus_id,
                             ipcp_diag_pci_t *out);

/* How a reaches b (pure: tested without sysfs). */
ipcp_diag_link_t ipcp__pci_link(const ipcp_diag_pci_t *a,
                                const ipcp_diag_pci_t *b);

#endif
