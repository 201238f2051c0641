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

/* bus_id as sysfs names it ("0000:19:00.0", lower case; a domain of up
 * to 32 bits, as Intel VMD's 10000 and up) into out[IPCP_DIAG_PCI_NAME];
 * 0, or -1 where it is no bus id (domain:bus:device.function, in hex). */
static int pci_norm(const char *bus_id, char *out)
{
    const char *s = bus_id;
    long dom = pci_hex(&s, 8), bus = -1, dev = -1, fn = -1;
    if (dom >= 0 && *s++ == ':' && (bus = pci_hex(&s, 2)) >= 0 && *s++ == ':' &&
        (dev = pci_hex(&s, 2)) >= 0 && *s++ == '.')
        fn = pci_hex(&s, 1);
    if (fn < 0 || *s || dev > 0x1f || fn > 7)
        return -1;
    snprintf(out, IPCP_DIAG_PCI_NAME, "%04lx:%02x:%02x.%x",
             (unsigned long)dom & 0xffffffffUL, (unsigned)bus & 0xff,
             (unsigned)dev & 0x1f, (unsigned)fn & 7);
    return 0;
}

/* Whether the path component c (len bytes) names a PCI function. */
static int pci_is_addr(const char *c, size_t len)
{
    char tmp[IPCP_DIAG_PCI_NAME], norm[IPCP_DIAG_PCI_NAME];
    if (len < 12 || len >= sizeof(tmp))
        return 0;
    memcpy(tmp, c, len);
    tmp[len] = '\0';
    return pci_norm(tmp, norm) == 0 && strcmp(tmp, norm) == 0;
}

/* Whether c (len bytes) names a host bridge: "pci" domain:bus in hex. */
static int pci_is_root(const char *c, size_t len)
{
    size_t colon = 0;
    if (len < 8 || len >= IPCP_DIAG_PCI_NAME || strncmp(c, "pci", 3) != 0)
        return 0;
    for (size_t i = 3; i < len; i++) {
        if (c[i] == ':' && !colon && i > 3)
            colon = i;
        else if (!isxdigit((unsigned char)c[i]))
            return 0;
    }
    return colon && colon + 1 < len;
}

/* The components of the resolved path into out: the host bridge (the
 * component just above the first PCI function, "pci<domain>:<bus>"),
 * then the PCI functions below it.  A folder higher up whose name merely
 * begins with "pci" is not taken for it. */
static ipcp_status_t pci_split(const char *real, const char *id,
                               ipcp_diag_pci_t *out)
{
    const char *prev = NULL, *p = real;
    size_t prevn = 0;
    while (*p == '/') {
        size_t n = strcspn(++p, "/");
        if (pci_is_addr(p, n)) {
            if (out->depth == 0 && (!prev || !pci_is_root(prev, prevn)))
                break;
            if (out->depth == 0) {
                memcpy(out->root, prev, prevn);
                out->root[prevn] = '\0';
            }
            if (out->depth == IPCP_DIAG_PCI_DEPTH)
                return ipcp__fail(IPCP_LOG_DEBUG, IPCP_SUB_API,
                                  IPCP_ERR_UNSUPPORTED,
                                  "%s: more than %d PCI functions deep", id,
                                  IPCP_DIAG_PCI_DEPTH);
            memcpy(out->chain[out->depth], p, n);
            out->chain[out->depth++][n] = '\0';
        } else if (out->depth) {
            break; /* past the device's own folder */
        }
        prev = p;
        prevn = n;
        p += n;
    }
    if (out->depth == 0 || strcmp(out->chain[out->depth - 1], id) != 0)
        return ipcp__fail(IPCP_LOG_DEBUG, IPCP_SUB_API, IPCP_ERR_UNSUPPORTED,
                          "%s: sysfs puts it at %.200s, under no PCI host "
                          "bridge",
                          id, real);
    return IPCP_OK;
}

/* The first number in the file at path, or -1. */
static int pci_read_int(const char *path)
{
    FILE *f = fopen(path, "r");
    int v = -1;
    if (!f)
        return -1;
    if (fscanf(f, "%d", &v) != 1 || v < 0)
        v = -1;
    fclose(f);
    return v;
}

/* The node sysfs gives the device; where it says none, 0 on a machine
 * whose only online node is 0 (single-socket platforms often leave
 * numa_node at -1), else -1. */
static int pci_numa(const char *sysfs, const char *id)
{
    char path[PATH_MAX], online[16] = "";
    snprintf(path, sizeof(path), "%s/bus/pci/devices/%s/numa_node", sysfs, id);
    int node = pci_read_int(path);
    if (node >= 0)
        return node;
    snprintf(path, sizeof(path), "%s/devices/system/node/online", sysfs);
    FILE *f = fopen(path, "r");
    if (f) {
        if (!fgets(online, sizeof(online), f))
            online[0] = '\0';
        fclose(f);
    }
    return strcmp(online, "0\n") == 0 || strcmp(online, "0") == 0 ? 0 : -1;
}

ipcp_status_t ipcp__pci_read(const char *sysfs, const char *bus_id,
                             ipcp_diag_pci_t *out)
{
    char id[IPCP_DIAG_PCI_NAME], path[PATH_MAX], real[PATH_MAX];
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

/* p's depth within its array: a struct a caller filled may say more. */
static int pci_depth(const ipcp_diag_pci_t *p)
{
    return p->depth < 0                     ? 0
           : p->depth > IPCP_DIAG_PCI_DEPTH ? IPCP_DIAG_PCI_DEPTH
                                            : p->depth;
}

ipcp_diag_link_t ipcp__pci_link(const ipcp_diag_pci_t *a,
                                const ipcp_diag_pci_t *b)
{
    if (strncmp(a->root, b->root, IPCP_DIAG_PCI_NAME) != 0) {
        if (a->numa_node < 0 || b->numa_node < 0)
            return IPCP_DIAG_LINK_UNKNOWN;
        return a->numa_node == b->numa_node ? IPCP_DIAG_LINK_NODE
                                            : IPCP_DIAG_LINK_SYSTEM;
    }
    int k = 0, da = pci_depth(a), db = pci_depth(b);
    while (k < da && k < db &&
           !strncmp(a->chain[k], b->chain[k], IPCP_DIAG_PCI_NAME))
        k++;
    if (k == da && k == db)
        return IPCP_DIAG_LINK_SELF;
    /* A shared first component is a shared root port (or a device
     * above the other: its bridge). */
    return k > 0 ? IPCP_DIAG_LINK_SWITCH : IPCP_DIAG_LINK_HOST;
}
