/* One-sided transfers: rank 0 owns a registered region, rank 1 imports its
 * descriptor and puts/gets at an offset.  Both sides verify every byte.
 *
 *   test_api_putget --case data --size S [--reg malloc|mem] [--regoff N]
 *       [--off N] [--loff N] [--mode blocking|nb]
 *   test_api_putget --case oob|dereg [--reg malloc|mem]
 *
 * data: the region (size + off + 64 bytes, registered at regoff bytes into
 * its allocation) is filled with seed A.  The origin gets [off, off+size)
 * and checks it, puts seed-B data there, tells the owner, who checks the
 * whole region (A around, B inside); the origin then gets the whole region
 * back and checks the same. */
#include "apitest.h"

enum { TAG_DESC = 1, TAG_SEED = 2, TAG_ACK = 3, TAG_DONE = 4 };

typedef struct desc_msg {
    uint64_t len;
    uint64_t seed;
    uint64_t region;
    unsigned char desc[IPCP_DESC_MAX];
} desc_msg_t;

typedef struct cfg {
    const char *name;
    size_t size;
    api_alloc_t reg;
    size_t regoff, off, loff;
    int nb;
} cfg_t;

static cfg_t parse(int argc, char **argv)
{
    cfg_t c;
    c.name = api_opt(argc, argv, "--case", "data");
    c.size = api_opt_size(argc, argv, "--size", "4095");
    c.reg = api_parse_alloc(api_opt(argc, argv, "--reg", "malloc"));
    c.regoff = api_opt_size(argc, argv, "--regoff", "0");
    c.off = api_opt_size(argc, argv, "--off", "0");
    c.loff = api_opt_size(argc, argv, "--loff", "0");
    c.nb = strcmp(api_opt(argc, argv, "--mode", "blocking"), "nb") == 0;
    if (c.reg == API_ALLOC_NULL)
        T_FAIL("--reg null is not a region");
    return c;
}

static void do_get(ipcp_comm_t *comm, const cfg_t *c, void *dst, size_t len,
                   ipcp_rmem_t *rmem, size_t off)
{
    if (!c->nb) {
        T_OK(ipcp_get(comm, dst, len, rmem, off));
        return;
    }
    ipcp_request_t *req = NULL;
    T_OK(ipcp_iget(comm, dst, len, rmem, off, &req));
    api_wait_ok(req, len, "ipcp_iget");
}

static void do_put(ipcp_comm_t *comm, const cfg_t *c, const void *src,
                   size_t len, ipcp_rmem_t *rmem, size_t off)
{
    if (!c->nb) {
        T_OK(ipcp_put(comm, src, len, rmem, off));
        return;
    }
    ipcp_request_t *req = NULL;
    T_OK(ipcp_iput(comm, src, len, rmem, off, &req));
    api_wait_ok(req, len, "ipcp_iput");
}

/* The region after the put: seed A around [off, off+size), seed B inside. */
static void check_region(const unsigned char *r, size_t region, const cfg_t *c,
                         uint64_t a, uint64_t b, const char *who)
{
    char what[128];
    snprintf(what, sizeof what, "%s: region before the put", who);
    api_verify_at(r, c->off, a, 0, what);
    snprintf(what, sizeof what, "%s: data put at offset %zu", who, c->off);
    api_verify_at(r + c->off, c->size, b, 0, what);
    snprintf(what, sizeof what, "%s: region after the put", who);
    api_verify_at(r + c->off + c->size, region - c->off - c->size, a,
                  c->off + c->size, what);
}

/* Owner side: allocates, fills with seed A, registers, sends the
 * descriptor.  Returns the registration; *buf holds the allocation. */
static ipcp_mem_t *owner_setup(ipcp_comm_t *comm, api_alloc_t reg,
                               size_t regoff, size_t region, uint64_t seed,
                               api_buf_t *buf, desc_msg_t *m)
{
    unsigned char *r = api_buf_alloc(comm, reg, region, regoff, buf);
    ipcp_pattern_fill(r, region, seed, 0);
    ipcp_mem_t *mem = NULL;
    T_OK(ipcp_mem_register(comm, r, region, &mem));
    T_CHECK(mem != NULL);
    size_t len = 0;
    memset(m, 0, sizeof *m);
    T_OK(ipcp_mem_pack(mem, m->desc, sizeof m->desc, &len));
    T_CHECK(len > 0 && len <= IPCP_DESC_MAX);
    m->len = len;
    m->seed = seed;
    m->region = region;
    return mem;
}

static ipcp_rmem_t *origin_import(ipcp_comm_t *comm, const desc_msg_t *m)
{
    ipcp_rmem_t *rmem = NULL;
    T_OK(ipcp_rmem_import(comm, m->desc, m->len, &rmem));
    T_CHECK(rmem != NULL);
    T_EQ_U64(ipcp_rmem_size(rmem), m->region);
    T_EQ_INT(ipcp_rmem_owner(rmem), 0);
    return rmem;
}

static void run_data(ipcp_comm_t *comm, const cfg_t *c)
{
    int rank = ipcp_comm_rank(comm);
    size_t region = c->size + c->off + 64;
    desc_msg_t m;
    uint64_t seed_b, x = 0;
    if (rank == 0) {
        api_buf_t rb;
        ipcp_mem_t *mem = owner_setup(comm, c->reg, c->regoff, region,
                                      t_fresh_seed(), &rb, &m);
        api_ctl_send(comm, 1, TAG_DESC, &m, sizeof m);
        api_ctl_recv(comm, 1, TAG_SEED, &seed_b, 8); /* the put is complete */
        check_region(rb.ptr, region, c, m.seed, seed_b, "owner");
        api_buf_check_guards(&rb, "owner allocation");
        api_ctl_send(comm, 1, TAG_ACK, &x, 8);
        api_ctl_recv(comm, 1, TAG_DONE, &x, 8);
        T_OK(ipcp_mem_deregister(mem));
        api_buf_free(comm, &rb);
    } else {
        api_ctl_recv(comm, 0, TAG_DESC, &m, sizeof m);
        ipcp_rmem_t *rmem = origin_import(comm, &m);
        api_buf_t lb;
        unsigned char *l =
            api_buf_alloc(comm, API_ALLOC_MALLOC, region, c->loff, &lb);
        do_get(comm, c, l, c->size, rmem, c->off);
        api_verify_at(l, c->size, m.seed, c->off, "origin: data got");
        seed_b = t_fresh_seed();
        t_fill(l, c->size, seed_b);
        do_put(comm, c, l, c->size, rmem, c->off);
        api_ctl_send(comm, 0, TAG_SEED, &seed_b, 8);
        api_ctl_recv(comm, 0, TAG_ACK, &x, 8);
        memset(l, 0, region);
        do_get(comm, c, l, region, rmem, 0);
        check_region(l, region, c, m.seed, seed_b, "origin (whole region got)");
        api_buf_check_guards(&lb, "origin buffer");
        T_OK(ipcp_rmem_release(rmem));
        api_ctl_send(comm, 0, TAG_DONE, &x, 8);
        api_buf_free(comm, &lb);
    }
    T_OK(ipcp_barrier(comm));
}

/* Accesses outside the region fail with IPCP_ERR_OUT_OF_RANGE (blocking
 * and non-blocking forms, and offsets that overflow). */
static void expect_oob(ipcp_status_t st, const char *what, const char *num)
{
    if (st != IPCP_ERR_OUT_OF_RANGE)
        T_FAIL("%s returned %s, expected IPCP_ERR_OUT_OF_RANGE (last error: "
               "%s)",
               what, ipcp_strerror(st), ipcp_last_error());
    if (num)
        T_MSG_HAS(num);
}

static ipcp_status_t nb_status(ipcp_status_t st, ipcp_request_t *req)
{
    if (st != IPCP_OK)
        return st;
    return ipcp_wait(req, NULL);
}

static void run_oob(ipcp_comm_t *comm, const cfg_t *c)
{
    int rank = ipcp_comm_rank(comm);
    const size_t region = 4096;
    desc_msg_t m;
    uint64_t x = 0;
    if (rank == 0) {
        api_buf_t rb;
        ipcp_mem_t *mem =
            owner_setup(comm, c->reg, 3, region, t_fresh_seed(), &rb, &m);
        api_ctl_send(comm, 1, TAG_DESC, &m, sizeof m);
        api_ctl_recv(comm, 1, TAG_DONE, &x, 8);
        /* Nothing was written by the failed puts. */
        api_verify_at(rb.ptr, region - 1, m.seed, 0, "owner region");
        T_EQ_INT(rb.ptr[region - 1], 0x5a); /* the one valid put */
        api_buf_check_guards(&rb, "owner allocation");
        T_OK(ipcp_mem_deregister(mem));
        api_buf_free(comm, &rb);
    } else {
        api_ctl_recv(comm, 0, TAG_DESC, &m, sizeof m);
        ipcp_rmem_t *rmem = origin_import(comm, &m);
        unsigned char *l = t_malloc(2 * region);
        const char *rs = api_dec((long long)region);
        ipcp_request_t *req = NULL;
        memset(l, 0xee, 2 * region);
        expect_oob(ipcp_put(comm, l, 1, rmem, region), "put 1 at 4096", rs);
        expect_oob(ipcp_put(comm, l, region + 1, rmem, 0), "put 4097 at 0", rs);
        expect_oob(ipcp_get(comm, l, 2, rmem, region - 1), "get 2 at 4095", rs);
        expect_oob(ipcp_get(comm, l, 1, rmem, region + 100), "get 1 at 4196",
                   rs);
        expect_oob(ipcp_put(comm, l, 2, rmem, SIZE_MAX), "put 2 at SIZE_MAX",
                   NULL);
        expect_oob(ipcp_get(comm, l, SIZE_MAX, rmem, 1), "get SIZE_MAX at 1",
                   NULL);
        expect_oob(
            nb_status(ipcp_iput(comm, l, 8, rmem, region - 4, &req), req),
            "iput 8 at 4092", rs);
        req = NULL;
        expect_oob(
            nb_status(ipcp_iget(comm, l, 8, rmem, region - 4, &req), req),
            "iget 8 at 4092", rs);
        for (size_t i = 0; i < 2 * region; i++)
            if (l[i] != 0xee)
                T_FAIL("a failed get wrote local byte %zu", i);
        /* The last byte is in range. */
        l[0] = 0x5a;
        T_OK(ipcp_put(comm, l, 1, rmem, region - 1));
        T_OK(ipcp_get(comm, l + 1, region - 1, rmem, 0));
        api_verify_at(l + 1, region - 1, m.seed, 0, "origin: region got");
        T_OK(ipcp_rmem_release(rmem));
        api_ctl_send(comm, 0, TAG_DONE, &x, 8);
        free(l);
    }
    T_OK(ipcp_barrier(comm));
}

/* After the owner deregisters: puts/gets through an existing import and new
 * imports fail with IPCP_ERR_NOT_REGISTERED. */
static void expect_notreg(ipcp_status_t st, const char *what)
{
    if (st != IPCP_ERR_NOT_REGISTERED)
        T_FAIL("%s returned %s, expected IPCP_ERR_NOT_REGISTERED (last "
               "error: %s)",
               what, ipcp_strerror(st), ipcp_last_error());
    T_MSG_HAS("regist");
}

static void run_dereg(ipcp_comm_t *comm, const cfg_t *c)
{
    int rank = ipcp_comm_rank(comm);
    const size_t region = 1 << 20;
    desc_msg_t ma, mb;
    uint64_t x = 0;
    if (rank == 0) {
        api_buf_t ra, rb;
        ipcp_mem_t *a =
            owner_setup(comm, c->reg, 0, region, t_fresh_seed(), &ra, &ma);
        ipcp_mem_t *b =
            owner_setup(comm, c->reg, 0, region, t_fresh_seed(), &rb, &mb);
        api_ctl_send(comm, 1, TAG_DESC, &ma, sizeof ma);
        api_ctl_send(comm, 1, TAG_DESC, &mb, sizeof mb);
        api_ctl_recv(comm, 1, TAG_ACK, &x, 8); /* a imported and used */
        T_OK(ipcp_mem_deregister(a));
        T_OK(ipcp_mem_deregister(b));
        api_ctl_send(comm, 1, TAG_ACK, &x, 8);
        api_ctl_recv(comm, 1, TAG_DONE, &x, 8);
        /* The memory stays the owner's: untouched by the refused puts. */
        api_verify_at(ra.ptr, region, ma.seed, 0, "owner region a");
        api_verify_at(rb.ptr, region, mb.seed, 0, "owner region b");
        api_buf_free(comm, &ra);
        api_buf_free(comm, &rb);
    } else {
        api_ctl_recv(comm, 0, TAG_DESC, &ma, sizeof ma);
        api_ctl_recv(comm, 0, TAG_DESC, &mb, sizeof mb);
        ipcp_rmem_t *ra = origin_import(comm, &ma);
        unsigned char *l = t_malloc(region);
        T_OK(ipcp_get(comm, l, 64, ra, 0));
        api_verify_at(l, 64, ma.seed, 0, "get before deregistration");
        api_ctl_send(comm, 0, TAG_ACK, &x, 8);
        api_ctl_recv(comm, 0, TAG_ACK, &x, 8); /* both deregistered */
        memset(l, 0x11, region);
        expect_notreg(ipcp_put(comm, l, region, ra, 0), "put after dereg");
        expect_notreg(ipcp_get(comm, l, 64, ra, 0), "get after dereg");
        ipcp_request_t *req = NULL;
        expect_notreg(nb_status(ipcp_iput(comm, l, 4096, ra, 8, &req), req),
                      "iput after dereg");
        ipcp_rmem_t *rb = NULL;
        expect_notreg(ipcp_rmem_import(comm, mb.desc, mb.len, &rb),
                      "import of a deregistered region");
        T_CHECK(rb == NULL);
        T_OK(ipcp_rmem_release(ra));
        api_ctl_send(comm, 0, TAG_DONE, &x, 8);
        free(l);
    }
    T_OK(ipcp_barrier(comm));
}

static int rank_main(int argc, char **argv)
{
    cfg_t c = parse(argc, argv);
    ipcp_comm_t *comm = api_init(IPCP_PATH_AUTO, "set");
    T_EQ_INT(ipcp_comm_size(comm), 2);
    if (strcmp(c.name, "data") == 0)
        run_data(comm, &c);
    else if (strcmp(c.name, "oob") == 0)
        run_oob(comm, &c);
    else if (strcmp(c.name, "dereg") == 0)
        run_dereg(comm, &c);
    else
        T_FAIL("unknown --case \"%s\"", c.name);
    api_finalize(comm);
    return 0;
}

int main(int argc, char **argv)
{
    (void)parse(argc, argv);
    return t_mp_main(argc, argv, 2, 120, rank_main);
}
