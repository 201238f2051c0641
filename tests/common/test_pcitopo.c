/* common/pcitopo.h: where PCI devices sit, read from a sysfs tree made
 * here (two devices behind one switch, one on its own root port, others
 * under host bridges of the same and of another NUMA node, and one whose
 * node is unknown, one in a 32-bit VMD domain), then from this machine's
 * /sys through the diagnostics API: every device there found, its chain
 * ending in it. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/pcitopo.h"
#include "testutil.h"

static char root[256]; /* the tree made here */

static void mkdirs(const char *rel)
{
    char p[PATH_MAX];
    snprintf(p, sizeof(p), "%s/%s", root, rel);
    for (char *s = p + strlen(root) + 1; (s = strchr(s, '/')); s++) {
        *s = '\0';
        T_CHECK(mkdir(p, 0755) == 0 || errno == EEXIST);
        *s = '/';
    }
    T_CHECK(mkdir(p, 0755) == 0 || errno == EEXIST);
}

/* A device at devices/<path> (its last component its bus id), linked from
 * bus/pci/devices as sysfs does, with a numa_node file unless node < -1. */
static void device(const char *path, int node)
{
    char dir[512], link[PATH_MAX], target[PATH_MAX];
    const char *id = strrchr(path, '/') + 1;
    snprintf(dir, sizeof(dir), "devices/%s", path);
    mkdirs(dir);
    mkdirs("bus/pci/devices");
    snprintf(link, sizeof(link), "%s/bus/pci/devices/%s", root, id);
    snprintf(target, sizeof(target), "../../../devices/%s", path);
    T_CHECK(symlink(target, link) == 0);
    if (node < -1)
        return;
    snprintf(link, sizeof(link), "%s/%s/numa_node", root, dir);
    FILE *f = fopen(link, "w");
    T_CHECK(f != NULL);
    fprintf(f, "%d\n", node);
    fclose(f);
}

static ipcp_diag_pci_t read_ok(const char *id)
{
    ipcp_diag_pci_t p;
    memset(&p, 0x5a, sizeof(p));
    T_OK(ipcp__pci_read(root, id, &p));
    return p;
}

static void fake_tree(void)
{
    const char *sw = "pci0000:00/0000:00:01.0/0000:01:00.0";
    char p[PATH_MAX];
    snprintf(p, sizeof(p), "%s/0000:02:08.0/0000:03:00.0", sw);
    device(p, 0);
    snprintf(p, sizeof(p), "%s/0000:02:10.0/0000:04:00.0", sw);
    device(p, 0);
    device("pci0000:00/0000:00:03.0/0000:05:00.0", 0);
    device("pci0000:40/0000:40:01.0/0000:41:00.0", 0);
    device("pci0000:80/0000:80:01.0/0000:81:00.0", 1);
    device("pci0000:c0/0000:c0:01.0/0000:c1:00.0", -1);
    device("pci0000:d0/0000:d0:01.0/0000:d1:00.0", -2); /* no numa_node */
    /* Intel VMD: a domain past 16 bits. */
    device("pci10000:e0/10000:e0:06.0/10000:e1:00.0", 0);
}

static void check_fake(void)
{
    ipcp_diag_pci_t a = read_ok("00000000:03:00.0"),
                    b = read_ok("0000:04:00.0");
    T_EQ_STR(a.root, "pci0000:00");
    T_EQ_INT(a.depth, 4);
    T_EQ_STR(a.chain[0], "0000:00:01.0");
    T_EQ_STR(a.chain[1], "0000:01:00.0");
    T_EQ_STR(a.chain[2], "0000:02:08.0");
    T_EQ_STR(a.chain[3], "0000:03:00.0");
    T_EQ_INT(a.numa_node, 0);
    ipcp_diag_pci_t c = read_ok("0000:05:00.0"), d = read_ok("0000:41:00.0");
    ipcp_diag_pci_t e = read_ok("0000:81:00.0"), f = read_ok("0000:C1:00.0");
    ipcp_diag_pci_t g = read_ok("0000:d1:00.0");
    T_EQ_INT(f.numa_node, -1);
    T_EQ_INT(g.numa_node, -1);
    T_EQ_INT(ipcp__pci_link(&a, &a), IPCP_DIAG_LINK_SELF);
    T_EQ_INT(ipcp__pci_link(&a, &b), IPCP_DIAG_LINK_SWITCH);
    T_EQ_INT(ipcp__pci_link(&b, &a), IPCP_DIAG_LINK_SWITCH);
    T_EQ_INT(ipcp__pci_link(&a, &c), IPCP_DIAG_LINK_HOST);
    T_EQ_INT(ipcp__pci_link(&a, &d), IPCP_DIAG_LINK_NODE);
    T_EQ_INT(ipcp__pci_link(&a, &e), IPCP_DIAG_LINK_SYSTEM);
    T_EQ_INT(ipcp__pci_link(&e, &a), IPCP_DIAG_LINK_SYSTEM);
    T_EQ_INT(ipcp__pci_link(&a, &f), IPCP_DIAG_LINK_UNKNOWN);
    T_EQ_INT(ipcp__pci_link(&g, &d), IPCP_DIAG_LINK_UNKNOWN);
    T_EQ_STR(ipcp_diag_link_name(ipcp__pci_link(&a, &b)), "switch");
    T_EQ_STR(ipcp_diag_link_name(IPCP_DIAG_LINK_HOST), "host-bridge");
    T_EQ_STR(ipcp_diag_link_name((ipcp_diag_link_t)99), "unknown");
    ipcp_diag_pci_t v = read_ok("10000:E1:00.0");
    T_EQ_STR(v.root, "pci10000:e0");
    T_EQ_STR(v.chain[0], "10000:e0:06.0");
    T_EQ_INT(ipcp__pci_link(&v, &d), IPCP_DIAG_LINK_NODE);
    /* A caller's struct that says more than it holds is read within it. */
    ipcp_diag_pci_t big = a;
    big.depth = 1000;
    T_EQ_INT(ipcp_diag_pci_link(&big, &b), IPCP_DIAG_LINK_SWITCH);
    /* A machine of one online node: a device that names none is on it. */
    mkdirs("devices/system/node");
    char p[PATH_MAX];
    snprintf(p, sizeof(p), "%s/devices/system/node/online", root);
    FILE *o = fopen(p, "w");
    T_CHECK(o != NULL);
    fprintf(o, "0\n");
    fclose(o);
    f = read_ok("0000:c1:00.0");
    T_EQ_INT(f.numa_node, 0);
    T_EQ_INT(ipcp__pci_link(&a, &f), IPCP_DIAG_LINK_NODE);
}

static void check_bad(void)
{
    ipcp_diag_pci_t p, keep;
    memset(&p, 0x5a, sizeof(p));
    keep = p;
    T_STATUS(ipcp__pci_read(root, "0000:03:00", &p), IPCP_ERR_INVALID);
    T_MSG_HAS("\"0000:03:00\" is no PCI bus id");
    T_STATUS(ipcp__pci_read(root, "0000:03:00.0x", &p), IPCP_ERR_INVALID);
    T_STATUS(ipcp__pci_read(root, "gpu0", &p), IPCP_ERR_INVALID);
    T_STATUS(ipcp__pci_read(root, "0000:09:00.0", &p), IPCP_ERR_UNSUPPORTED);
    T_MSG_HAS("/bus/pci/devices/0000:09:00.0: No such file or directory");
    T_CHECK(memcmp(&p, &keep, sizeof(p)) == 0); /* nothing written */
    T_STATUS(ipcp_diag_pci(NULL, &p), IPCP_ERR_INVALID);
    T_MSG_HAS("ipcp_diag_pci: NULL argument");
}

/* This machine's devices through the API: each found under a host bridge,
 * its chain ending in it, itself its own "self". */
static void check_real(void)
{
    DIR *d = opendir("/sys/bus/pci/devices");
    struct dirent *e;
    int n = 0;
    if (!d) {
        fprintf(stderr, "no /sys/bus/pci/devices here: the real part left "
                        "out\n");
        return;
    }
    while ((e = readdir(d)) && n < 64) {
        ipcp_diag_pci_t p;
        if (e->d_name[0] == '.')
            continue;
        T_OK(ipcp_diag_pci(e->d_name, &p));
        T_CHECK(strncmp(p.root, "pci", 3) == 0);
        T_EQ_STR(p.chain[p.depth - 1], e->d_name);
        T_EQ_INT(ipcp_diag_pci_link(&p, &p), IPCP_DIAG_LINK_SELF);
        n++;
    }
    closedir(d);
    fprintf(stderr, "%d devices of this machine read\n", n);
}

int main(void)
{
    const char *tmp = getenv("TMPDIR");
    /* A folder above the tree whose name begins with "pci" (as a TMPDIR
     * may) is not taken for a host bridge. */
    snprintf(root, sizeof(root), "%s/pcitopo-XXXXXX", tmp ? tmp : "/tmp");
    T_CHECK(mkdtemp(root) != NULL);
    fake_tree();
    check_fake();
    check_bad();
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
    T_EQ_INT(system(cmd), 0);
    check_real();
    return 0;
}
