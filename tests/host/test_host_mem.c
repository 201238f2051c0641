/* Host backend memory: memfd allocation, export, import and the checks
 * that reject a bad export.  One case per run: test_host_mem CASE. */
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "backend/host/host.h"
#include "testutil.h"

static const ipcp__backend_ops_t *ops = &ipcp__host_backend_ops;

static ipcp__backend_t *open_backend(void)
{
    ipcp__backend_t *be = NULL;
    T_OK(ops->open(NULL, &be));
    T_CHECK(be != NULL);
    return be;
}

/* Imports exp/fd and checks both mappings show each other's writes. */
static void check_shared(ipcp__backend_t *be, void *mine, size_t len,
                         const ipcp__export_t *exp, int fd)
{
    void *theirs = NULL, *h = NULL;
    T_EQ_U64(exp->size, len);
    T_OK(ops->mem_import(be, exp, &fd, fd >= 0, -1, &theirs, &h));
    T_CHECK(theirs != mine); /* a second mapping, not the same pages */
    uint64_t s1 = t_fresh_seed(), s2 = t_fresh_seed();
    t_fill(mine, len, s1);
    t_verify(theirs, len, s1, "read through the import");
    t_fill(theirs, len, s2);
    t_verify(mine, len, s2, "read through the allocation");
    T_OK(ops->mem_unimport(be, h));
}

static void case_alloc_import(void)
{
    ipcp__backend_t *be = open_backend();
    size_t len = 3 * 1024 * 1024 + 5;
    void *ptr = NULL, *h = NULL;
    T_OK(ops->mem_alloc(be, len, -1, &ptr, &h));
    T_CHECK(ptr != NULL && h != NULL);

    ipcp__export_t exp;
    int fd = -1;
    T_OK(ops->mem_export(be, h, ptr, len, &exp, &fd));
    T_EQ_INT(exp.kind, IPCP_EXPORT_HOST_MEMFD);
    T_CHECK(fd >= 0);
    T_CHECK(fcntl(fd, F_GETFD) & FD_CLOEXEC);
    check_shared(be, ptr, len, &exp, fd);
    close(fd);

    /* A range that starts mid-page, exported with the handle and again
     * found through the registry (handle NULL). */
    char *sub = (char *)ptr + 3 * 4096 + 123;
    size_t sublen = 100000 + 7;
    T_OK(ops->mem_export(be, h, sub, sublen, &exp, &fd));
    check_shared(be, sub, sublen, &exp, fd);
    close(fd);
    T_OK(ops->mem_export(be, NULL, sub, sublen, &exp, &fd));
    check_shared(be, sub, sublen, &exp, fd);
    close(fd);

    T_OK(ops->mem_free(be, h));
    ops->close(be);
}

static void case_alloc_zero(void)
{
    ipcp__backend_t *be = open_backend();
    void *p1 = NULL, *p2 = NULL, *h1 = NULL, *h2 = NULL;
    T_OK(ops->mem_alloc(be, 0, -1, &p1, &h1));
    T_OK(ops->mem_alloc(be, 0, -1, &p2, &h2));
    T_CHECK(p1 != NULL && p2 != NULL && p1 != p2);
    memset(p1, 0xab, 4096); /* one page is there */

    ipcp__export_t exp;
    int fd = -1;
    void *q = NULL, *hq = NULL;
    T_OK(ops->mem_export(be, h1, p1, 0, &exp, &fd));
    T_EQ_U64(exp.size, 0);
    T_OK(ops->mem_import(be, &exp, &fd, fd >= 0, -1, &q, &hq));
    T_EQ_INT(((unsigned char *)q)[0], 0xab);
    T_OK(ops->mem_unimport(be, hq));
    close(fd);
    T_OK(ops->mem_free(be, h1));
    /* h2 is left for close to release. */
    ops->close(be);
}

static void case_owns(void)
{
    ipcp__backend_t *be = open_backend();
    ipcp__mem_attr_t a;
    void *user = t_malloc(1000);
    T_EQ_INT(ops->owns(be, user, &a), 1);
    T_EQ_INT(a.type, IPCP_MEM_HOST);
    T_EQ_INT(a.device, -1);
    T_EQ_U64(a.base, 0);
    T_EQ_U64(a.size, 0);

    void *p1, *p2, *h1, *h2;
    T_OK(ops->mem_alloc(be, 10000, -1, &p1, &h1));
    T_OK(ops->mem_alloc(be, 5000, -1, &p2, &h2));
    T_EQ_INT(ops->owns(be, (char *)p1 + 9999, &a), 1);
    T_EQ_U64(a.base, (uintptr_t)p1);
    T_CHECK(a.size >= 10000);
    uint64_t id1 = a.buffer_id;
    T_EQ_INT(ops->owns(be, p2, &a), 1);
    T_EQ_U64(a.base, (uintptr_t)p2);
    T_CHECK(id1 != 0 && a.buffer_id != 0 && a.buffer_id != id1);
    T_OK(ops->mem_free(be, h1));
    T_EQ_INT(ops->owns(be, p2, &a), 1);
    T_EQ_U64(a.base, (uintptr_t)p2);

    void *sh = (void *)1;
    T_OK(ops->shm_register(be, p2, 5000, -1, &sh));
    T_CHECK(sh == NULL);
    ops->shm_unregister(be, sh);
    T_OK(ops->mem_free(be, h2));
    free(user);
    ops->close(be);
}

static void case_export_user(void)
{
    ipcp__backend_t *be = open_backend();
    void *user = t_malloc(8192);
    ipcp__export_t exp;
    int fd = -1;
    T_STATUS(ops->mem_export(be, NULL, user, 8192, &exp, &fd),
             IPCP_ERR_UNSUPPORTED);
    T_MSG_HAS("not allocated by ipcp_mem_alloc");
    T_EQ_INT(fd, -1);

    void *p, *h;
    T_OK(ops->mem_alloc(be, 8192, -1, &p, &h));
    T_STATUS(ops->mem_export(be, h, (char *)p + 4096, 8192, &exp, &fd),
             IPCP_ERR_OUT_OF_RANGE);
    T_STATUS(ops->mem_export(be, NULL, (char *)p + 1, 8192, &exp, &fd),
             IPCP_ERR_OUT_OF_RANGE);
    T_EQ_INT(fd, -1);
    T_OK(ops->mem_free(be, h));
    free(user);
    ops->close(be);
}

/* A valid export of a fresh allocation, for the rejection cases. */
typedef struct export_fixture {
    ipcp__backend_t *be;
    void *ptr, *h;
    ipcp__export_t exp;
    int fd;
} export_fixture_t;

static void fixture_init(export_fixture_t *f, size_t len)
{
    f->be = open_backend();
    T_OK(ops->mem_alloc(f->be, len, -1, &f->ptr, &f->h));
    T_OK(ops->mem_export(f->be, f->h, f->ptr, len, &f->exp, &f->fd));
}

static void fixture_fini(export_fixture_t *f)
{
    close(f->fd);
    T_OK(ops->mem_free(f->be, f->h));
    ops->close(f->be);
}

static void expect_rejected(export_fixture_t *f, const ipcp__export_t *exp,
                            int fd, const char *msg)
{
    void *p = (void *)1, *h = (void *)1;
    T_STATUS(ops->mem_import(f->be, exp, &fd, fd >= 0, -1, &p, &h),
             IPCP_ERR_BAD_DESCRIPTOR);
    T_MSG_HAS(msg);
    T_CHECK(p == (void *)1 && h == (void *)1); /* outputs untouched */
}

static void case_import_bad_kind(void)
{
    export_fixture_t f;
    fixture_init(&f, 65536);
    ipcp__export_t e = f.exp;
    e.kind = IPCP_EXPORT_CUDA_VMM;
    expect_rejected(&f, &e, f.fd, "not a host memfd export");
    e = f.exp;
    e.len = 7;
    expect_rejected(&f, &e, f.fd, "bytes of data");
    e = f.exp;
    e.data[9] ^= 0x40; /* inside the offset field */
    expect_rejected(&f, &e, f.fd, "checksum");
    fixture_fini(&f);
}

static void case_import_too_large(void)
{
    export_fixture_t f;
    fixture_init(&f, 65536);
    ipcp__export_t e = f.exp;
    e.size = 65536 + 4096;
    expect_rejected(&f, &e, f.fd, "checksum");

    /* An export that is self-consistent but lies about the file: only the
     * fstat of the descriptor can catch it. */
    ipcp__host_export_data_t d;
    memcpy(&d, e.data, sizeof(d));
    d.file_size = 1ull << 30;
    e.size = 1ull << 29;
    d.check = ipcp__host_export_check(&e, &d);
    memcpy(e.data, &d, sizeof(d));
    expect_rejected(&f, &e, f.fd, "the export needs");

    /* Offset plus size past the claimed file. */
    d.file_size = 65536;
    d.offset = 4096;
    e.size = 65536;
    d.check = ipcp__host_export_check(&e, &d);
    memcpy(e.data, &d, sizeof(d));
    expect_rejected(&f, &e, f.fd, "leaves its");
    fixture_fini(&f);
}

static void case_import_wrong_fd(void)
{
    export_fixture_t f;
    fixture_init(&f, 1 << 20);
    expect_rejected(&f, &f.exp, -1, "no file descriptor");

    int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
    T_CHECK(null_fd >= 0);
    expect_rejected(&f, &f.exp, null_fd, "not a memfd");
    close(null_fd);

    /* A memfd large enough but not sealed: its owner could shrink it. */
    int raw = memfd_create("not-ipcpipe", MFD_CLOEXEC);
    T_CHECK(raw >= 0);
    T_EQ_INT(ftruncate(raw, 2 << 20), 0);
    expect_rejected(&f, &f.exp, raw, "not a sealed memfd");
    close(raw);

    /* Another allocation's descriptor, smaller than the export. */
    void *p, *h;
    ipcp__export_t small;
    int small_fd;
    T_OK(ops->mem_alloc(f.be, 4096, -1, &p, &h));
    T_OK(ops->mem_export(f.be, h, p, 4096, &small, &small_fd));
    expect_rejected(&f, &f.exp, small_fd, "the export needs");
    close(small_fd);
    T_OK(ops->mem_free(f.be, h));
    fixture_fini(&f);
}

static const struct {
    const char *name;
    void (*fn)(void);
} cases[] = {
    {"alloc_import", case_alloc_import},
    {"alloc_zero", case_alloc_zero},
    {"owns", case_owns},
    {"export_user", case_export_user},
    {"import_bad_kind", case_import_bad_kind},
    {"import_too_large", case_import_too_large},
    {"import_wrong_fd", case_import_wrong_fd},
};

int main(int argc, char **argv)
{
    int rc, i = t_pick_case(argc, argv, cases, sizeof(cases) / sizeof(cases[0]),
                            sizeof(cases[0]), &rc);
    if (i < 0)
        return rc;
    cases[i].fn();
    return 0;
}
