/* PCI topology from sysfs (pcitopo.h).  /sys/bus/pci/devices/<bus id> is
 * a link into /sys/devices/pci<domain>:<bus>/<bridge>/.../<bus id>: each
 * component after the host bridge is a bridge (a root port, then a
 * switch's upstream and downstream ports) and the last is the device. */
#include "common/pcitopo.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/status.h"

/* The hex number of 1 to max digits at *s, which it moves past; -1 where
 * none is there. */
static long pci_hex(const char **s, int max)
{
    long v = 0;
    int n = 0;
    for (; n < max && isxdigit((unsigned char)**s); n++, (*s)++)
        v = v * 16 + (isdigit((unsigned char)**s)
                          ? **s - '0'
                          : tolower((unsigned char)**s) - 'a' + 10);
    return n ? v : -1;
}

/* bus_id as sysfs names it ("0000:19:00.0", lower case) into out[16];
 * 0, or -1 where it is no bus id (domain:bus:device.function, in hex). */
static int pci_norm(const char *bus_id, char *out)
{
    const char *s = bus_id;
    long dom = pci_hex(&s, 8), bus = -1, dev = -1, fn = -1;
    if (dom >= 0 && *s++ == ':' && (bus = pci_hex(&s, 2)) >= 0 && *s++ == ':' &&
        (dev = pci_hex(&s, 2)) >= 0 && *s++ == '.')
        fn = pci_hex(&s, 1);
    if (fn < 0 || *s || dom > 0xffff || dev > 0x1f || fn > 7)
        return -1;
    snprintf(out, 16, "%04x:%02x:%02x.%x", (unsigned)dom & 0xffff,
             (unsigned)bus & 0xff, (unsigned)dev & 0x1f, (unsigned)fn & 7);
    return 0;
}

/* Whether the path component c (len bytes) names a PCI function. */
static int pci_is_addr(const char *c, size_t len)
{
    char tmp[16], norm[16];
    if (len < 12 || len >= sizeof(tmp))
        return 0;
    memcpy(tmp, c, len);
    tmp[len] = '\0';
    return pci_norm(tmp, norm) == 0 && strcmp(tmp, norm) == 0;
}

/* The components of the resolved path into out: the host bridge
 * ("pci..."), then the PCI functions below it. */
static ipcp_status_t pci_split(const char *real, const char *id,
                               ipcp_diag_pci_t *out)
{
    const char *p = strstr(real, "/pci");
    if (!p)
        return ipcp__fail(IPCP_LOG_DEBUG, IPCP_SUB_API, IPCP_ERR_UNSUPPORTED,
                          "%s: %.200s is under no PCI host bridge", id, real);
    p++;
    size_t n = strcspn(p, "/");
    if (n >= sizeof(out->root))
        n = sizeof(out->root) - 1;
    memcpy(out->root, p, n);
    out->root[n] = '\0';
    for (p += strcspn(p, "/"); *p == '/';) {
        p++;
        n = strcspn(p, "/");
        if (pci_is_addr(p, n)) {
            if (out->depth == IPCP_DIAG_PCI_DEPTH)
                return ipcp__fail(IPCP_LOG_DEBUG, IPCP_SUB_API,
                                  IPCP_ERR_UNSUPPORTED,
                                  "%s: more than %d PCI functions deep", id,
                                  IPCP_DIAG_PCI_DEPTH);
            memcpy(out->chain[out->depth], p, n);
            out->chain[out->depth++][n] = '\0';
        }
        p += n;
    }
    if (out->depth == 0 || strcmp(out->chain[out->depth - 1], id) != 0)
        return ipcp__fail(IPCP_LOG_DEBUG, IPCP_SUB_API, IPCP_ERR_UNSUPPORTED,
                          "%s: sysfs puts it at %.200s", id, real);
    return IPCP_OK;
}

/* The node sysfs gives the device, -1 where it says none or nothing. */
static int pci_numa(const char *sysfs, const char *id)
{
    char path[PATH_MAX];
    int node = -1;
    snprintf(path, sizeof(path), "%s/bus/pci/devices/%s/numa_node", sysfs, id);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    if (fscanf(f, "%d", &node) != 1 || node < 0)
        node = -1;
    fclose(f);
    return node;
}

ipcp_status_t ipcp__pci_read(const char *sysfs, const char *bus_id,
                             ipcp_diag_pci_t *out)
{
    char id[16], path[PATH_MAX], real[PATH_MAX];
    ipcp_diag_pci_t t;
    ipcp_status_t st;
    memset(&t, 0, sizeof(t));
    if (pci_norm(bus_id, id) != 0)
        return ipcp__fail(IPCP_LOG_DEBUG, IPCP_SUB_API, IPCP_ERR_INVALID,
                          "\"%.40s\" is no PCI bus id (as 0000:19:00.0)",
                          bus_id);
    snprintf(path, sizeof(path), "%s/bus/pci/devices/%s", sysfs, id);
    if (!realpath(path, real))
        return ipcp__fail(IPCP_LOG_DEBUG, IPCP_SUB_API, IPCP_ERR_UNSUPPORTED,
                          "%s: %s", path, strerror(errno));
    if ((st = pci_split(real, id, &t)) != IPCP_OK)
        return st;
    t.numa_node = pci_numa(sysfs, id);
    *out = t;
    return IPCP_OK;
}

ipcp_diag_link_t ipcp__pci_link(const ipcp_diag_pci_t *a,
                                const ipcp_diag_pci_t *b)
{
    if (strcmp(a->root, b->root) != 0) {
        if (a->numa_node < 0 || b->numa_node < 0)
            return IPCP_DIAG_LINK_UNKNOWN;
        return a->numa_node == b->numa_node ? IPCP_DIAG_LINK_NODE
                                            : IPCP_DIAG_LINK_SYSTEM;
    }
    int k = 0;
    while (k < a->depth && k < b->depth && !strcmp(a->chain[k], b->chain[k]))
        k++;
    if (k == a->depth && k == b->depth)
        return IPCP_DIAG_LINK_SELF;
    /* A shared first component is a shared root port (or a device
     * above the other: its bridge). */
    return k > 0 ? IPCP_DIAG_LINK_SWITCH : IPCP_DIAG_LINK_HOST;
}
