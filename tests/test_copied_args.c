/*
 * test_copied_args: arguments copied at push (vf_op.arg_size) and
 * operators pushed with an argument of their own (vf_operator_push_arg).
 *
 * - sizes_in_the_op_block: each var count 0 to 9 with argument sizes
 *   around the room its op block has for the copy (op.h), same checks;
 * - sync and async ops, on every engine kind, at sizes 1, VF_OP_ARG_INLINE
 *   (a free-list block), VF_OP_ARG_INLINE + 1 and VF_MAX_OP_ARG_SIZE
 *   (malloc'd): the caller's buffer is overwritten right after the push,
 *   yet fn and done see the bytes pushed, at one address aligned to
 *   max_align_t, and done sees the same copy as fn;
 * - a skipped op's done still gets its copy (with VF_ESKIPPED);
 * - a device op (the emulated device) and ops fused by bulking get theirs;
 * - vf_operator_push_arg: each run gets its own index, copied or passed
 *   as a pointer; an operator created with arg_size owns a copy;
 * - bad input: arg_size over VF_MAX_OP_ARG_SIZE and a NULL arg with a
 *   size are VF_EINVAL (with a detail) for the push, the operator's create
 *   and vf_operator_push_arg, and nothing runs;
 * - a random program of copied-argument ops, one-shot and operator pushes
 *   mixed, with and without bulking, computes the serial program's values;
 * - out of memory (vf__testing_fail_alloc, the n-th allocation failing,
 *   for every n the program makes): copied pushes, operator runs with an
 *   argument and vf_var_of return 0 or VF_ENOMEM, and each op whose push
 *   succeeded runs and is done once (LSan, make asan, checks leaks).
 */
#include "runner.h"

/* the testing aid vf__testing_fail_alloc (fault injection) */
#include "base/alloc.h"

#include <stdalign.h>

/* What an op saw: its argument's address and first bytes, as fn and done
 * each saw them. */
typedef struct seen {
    atomic_int fn_runs, done_runs;
    const void *fn_at, *done_at;
    size_t size;
    bool fn_ok, done_ok, aligned;
    int done_status;
} seen;

/* The argument's bytes: byte i of a copy pushed with `salt` is salt + i. */
static void fill(unsigned char *b, size_t n, unsigned salt)
{
    for (size_t i = 0; i < n; i++)
        b[i] = (unsigned char)(salt + i);
}

static bool holds(const unsigned char *b, size_t n, unsigned salt)
{
    for (size_t i = 0; i < n; i++)
        if (b[i] != (unsigned char)(salt + i))
            return false;
    return true;
}

#define SALT 7u

/* The argument starts with a pointer to its `seen`, then the bytes. */
typedef struct argbuf {
    seen *s;
    unsigned char bytes[];
} argbuf;

static int check_fn(vf_run *run, void *arg)
{
    (void)run;
    argbuf *a = arg;
    seen *s = a->s;
    s->fn_at = arg;
    s->aligned = (uintptr_t)arg % alignof(max_align_t) == 0;
    s->fn_ok = holds(a->bytes, s->size - sizeof(argbuf), SALT);
    atomic_fetch_add(&s->fn_runs, 1);
    return 0;
}

static void check_async(vf_run *run, void *arg, vf_completion done)
{
    CHECK_OK(check_fn(run, arg));
    CHECK_OK(vf_completion_finish(done, 0, NULL));
}

static void check_done(void *arg, int status)
{
    argbuf *a = arg;
    seen *s = a->s;
    s->done_at = arg;
    s->done_status = status;
    s->done_ok = holds(a->bytes, s->size - sizeof(argbuf), SALT);
    atomic_fetch_add(&s->done_runs, 1);
}

/* Push one op with an argument of `size` bytes, overwrite the caller's
 * buffer at once, and check what fn and done saw. */
static void push_sized_on(vf_engine *e, const vf_var *vars, int nvars,
                          size_t size, bool async)
{
    seen s;
    memset(&s, 0, sizeof s);
    s.size = size < sizeof(argbuf) ? sizeof(argbuf) : size;
    argbuf *a = malloc(s.size);
    REQUIRE(a != NULL);
    a->s = &s;
    fill(a->bytes, s.size - sizeof(argbuf), SALT);
    vf_op op = {.arg = a,
                .arg_size = s.size,
                .done = check_done,
                .writes = {vars, nvars},
                .name = "sized"};
    if (async)
        op.async_fn = check_async;
    else
        op.fn = check_fn;
    CHECK_OK(vf_engine_push(e, &op));
    memset(a, 0xee, s.size); /* the op must not see this */
    free(a);
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_EQ(atomic_load(&s.fn_runs), 1);
    CHECK_EQ(atomic_load(&s.done_runs), 1);
    if (!s.fn_ok || !s.done_ok || !s.aligned || s.fn_at != s.done_at ||
        s.done_status != 0)
        CHECK_REPORT_("size %zu vars %d async %d: fn_ok %d done_ok %d "
                      "aligned %d fn_at %p done_at %p status %d",
                      s.size, nvars, async, s.fn_ok, s.done_ok, s.aligned,
                      s.fn_at, s.done_at, s.done_status);
}

static void push_sized(vf_engine *e, vf_var v, size_t size, bool async)
{
    push_sized_on(e, &v, 1, size, async);
}

TEST_KIND_CASE(sizes_sync_and_async, k)
{
    vf_engine *e = tu_engine(k);
    vf_var v = tu_var(e);
    const size_t sizes[] = {
        1,    sizeof(argbuf) + 1, VF_OP_ARG_INLINE, VF_OP_ARG_INLINE + 1,
        4096, VF_MAX_OP_ARG_SIZE};
    for (int async = 0; async < 2; async++)
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
            push_sized(e, v, sizes[i], async);
    tu_finish_engine(e);
}

/* An op with n vars and an argument of up to 16 * (8 - n) bytes takes its
 * copy in its own block (op.h); one byte more, a block of its own. Every
 * var count 0 to 9 with sizes around that edge. */
TEST_KIND_CASE(sizes_in_the_op_block, k)
{
    vf_engine *e = tu_engine(k);
    vf_var vars[9];
    for (int i = 0; i < 9; i++)
        vars[i] = tu_var(e);
    for (int n = 0; n <= 9; n++) {
        size_t room = n < 8 ? 16 * (size_t)(8 - n) : 16;
        const size_t sizes[] = {sizeof(argbuf), 16,   17,
                                room - 1,       room, room + 1};
        for (int async = 0; async < 2; async++)
            for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
                push_sized_on(e, vars, n, sizes[i], async);
    }
    tu_finish_engine(e);
}

/* A child with no vars, pushed from inside an op, runs inside its push
 * on a pool of one worker, its block (and its argument's copy) on that
 * push's frame: aligned to max_align_t as any copy is. The frame's block
 * asked for 8 bytes only, and a clang build placed it so (an aligned
 * load of a copied __m128 crashed: found by an auditor). */
static int push_children_sized(vf_run *run, void *arg)
{
    (void)arg;
    const size_t sizes[] = {sizeof(argbuf), 16, 32, 48, 64, 100};
    seen s[sizeof sizes / sizeof sizes[0]];
    memset(s, 0, sizeof s);
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        s[i].size = sizes[i];
        unsigned char buf[128];
        argbuf *a = (argbuf *)buf;
        a->s = &s[i];
        fill(a->bytes, sizes[i] - sizeof(argbuf), SALT);
        CHECK_OK(
            vf_engine_push(vf_run_engine(run), &(vf_op){.fn = check_fn,
                                                        .arg = a,
                                                        .arg_size = sizes[i],
                                                        .done = check_done,
                                                        .name = "child"}));
        memset(buf, 0xee, sizeof buf); /* the child must not see this */
    }
    CHECK_OK(vf_run_wait_children(run, NULL));
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        if (!s[i].fn_ok || !s[i].done_ok || !s[i].aligned)
            CHECK_REPORT_("child's copy of %zu bytes: fn_ok %d done_ok %d "
                          "aligned %d (at %p)",
                          sizes[i], s[i].fn_ok, s[i].done_ok, s[i].aligned,
                          s[i].fn_at);
    return 0;
}

TEST_KIND_CASE(copies_of_children_run_at_their_push_are_aligned, k)
{
    vf_engine *e = tu_engine(k);
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = push_children_sized}));
    CHECK_OK(vf_engine_wait_all(e, NULL));
    tu_finish_engine(e);
}

/* --- skipped ops, devices, bulk ------------------------------------------ */

static int fail_fn(vf_run *run, void *arg)
{
    (void)run;
    (void)arg;
    return -100;
}

TEST_KIND_CASE(skipped_op_done_gets_copy, k)
{
    vf_engine *e = tu_engine(k);
    vf_var v = tu_var(e);
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = fail_fn, .writes = VF_VARS(v)}));
    seen s;
    memset(&s, 0, sizeof s);
    s.size = sizeof(argbuf) + 40;
    unsigned char buf[sizeof(argbuf) + 40];
    argbuf *a = (argbuf *)(void *)buf;
    a->s = &s;
    fill(a->bytes, 40, SALT);
    CHECK_OK(vf_engine_push(e, &(vf_op){.fn = check_fn,
                                        .arg = a,
                                        .arg_size = sizeof buf,
                                        .done = check_done,
                                        .reads = VF_VARS(v)}));
    memset(buf, 0, sizeof buf);
    CHECK_ERR(vf_engine_wait_all(e, NULL), VF_EOPFAILED);
    CHECK_EQ(atomic_load(&s.fn_runs), 0);
    CHECK_EQ(atomic_load(&s.done_runs), 1);
    CHECK_EQ(s.done_status, VF_ESKIPPED);
    CHECK(s.done_ok);
    CHECK_OK(vf_engine_destroy(e));
}

TEST_CASE(device_op_gets_copy)
{
    vf_engine *e = NULL;
    CHECK_OK(vf_engine_create(&e, &(vf_config){.type = VF_ENGINE_PERDEVICE,
                                               .gpu_workers = 1,
                                               .gpu_copy_workers = 1,
                                               .gpu_priority_workers = 1}));
    REQUIRE(e != NULL);
    vf_var v = tu_var(e);
    seen s[3];
    memset(s, 0, sizeof s);
    for (int i = 0; i < 3; i++) {
        unsigned char buf[sizeof(argbuf) + 200];
        s[i].size = sizeof(argbuf) + 8 + 90 * (size_t)i;
        argbuf *a = (argbuf *)(void *)buf;
        a->s = &s[i];
        fill(a->bytes, s[i].size - sizeof(argbuf), SALT);
        CHECK_OK(
            vf_engine_push(e, &(vf_op){.fn = check_fn,
                                       .arg = a,
                                       .arg_size = s[i].size,
                                       .done = check_done,
                                       .writes = VF_VARS(v),
                                       .device = {VF_DEVICE_EMULATED, i}}));
        memset(buf, 0, sizeof buf);
    }
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_OK(vf_engine_destroy(e)); /* a device op's done may come late */
    for (int i = 0; i < 3; i++) {
        CHECK_EQ(atomic_load(&s[i].fn_runs), 1);
        CHECK_EQ(atomic_load(&s[i].done_runs), 1);
        CHECK(s[i].fn_ok && s[i].done_ok && s[i].aligned);
        CHECK(s[i].fn_at == s[i].done_at);
    }
}

/* --- operators with an argument ----------------------------------------- */

typedef struct idx_arg {
    long *out; /* out[i] = ++*counter at the run of index i */
    long *counter;
    long i;
} idx_arg;

static int record_fn(vf_run *run, void *arg)
{
    (void)run;
    idx_arg *a = arg;
    a->out[a->i] = ++*a->counter;
    return 0;
}

static atomic_long done_sum;

static void sum_done(void *arg, int status)
{
    idx_arg *a = arg;
    if (status == 0)
        atomic_fetch_add(&done_sum, a->i);
}

/* Runs of one operator writing one var, each with its own index: they run
 * in push order, each with its index, copied (even iterations of the
 * caller's loop reuse one stack slot) or, with arg_size 0, a pointer. */
static void push_arg_case(const tu_kind *k, int bulk)
{
    vf_engine *e = tu_engine(k);
    if (bulk)
        CHECK(vf_bulk_set_size(e, bulk) >= 0);
    vf_var v = tu_var(e);
    enum { N = 1000 };
    long out[N], counter = 0;
    memset(out, 0, sizeof out);
    vf_operator *o = NULL;
    CHECK_OK(vf_operator_create(e,
                                &(vf_op){.fn = record_fn,
                                         .done = sum_done,
                                         .writes = VF_VARS(v),
                                         .name = "indexed"},
                                &o));
    REQUIRE(o != NULL);
    atomic_store(&done_sum, 0);
    static idx_arg held[N]; /* for the pointer (arg_size 0) pushes */
    long want_sum = 0;
    for (long i = 0; i < N; i++) {
        idx_arg a = {out, &counter, i};
        want_sum += i;
        if (i % 3 == 0) {
            held[i] = a;
            CHECK_OK(vf_operator_push_arg(e, o, 0, &held[i], 0));
        } else {
            CHECK_OK(vf_operator_push_arg(e, o, 0, &a, sizeof a));
        }
        a.i = -1;
    }
    CHECK_OK(vf_engine_wait_all(e, NULL));
    for (long i = 0; i < N; i++)
        if (out[i] != i + 1) {
            CHECK_REPORT_("bulk %d: run of index %ld was number %ld", bulk, i,
                          out[i]);
            break;
        }
    CHECK_EQ(atomic_load(&done_sum), want_sum);
    CHECK_OK(vf_operator_destroy(e, o));
    tu_finish_engine(e);
}

TEST_KIND_CASE(operator_push_arg, k)
{
    push_arg_case(k, 0);
}

TEST_KIND_CASE(operator_push_arg_bulk, k)
{
    push_arg_case(k, 8);
}

/* An operator created with arg_size owns its copy: every plain push gets
 * it, after the caller's buffer is gone. */
TEST_KIND_CASE(operator_owns_copy, k)
{
    vf_engine *e = tu_engine(k);
    vf_var v = tu_var(e);
    long out[1] = {0}, counter = 0;
    vf_operator *o = NULL;
    {
        idx_arg a = {out, &counter, 0};
        CHECK_OK(vf_operator_create(e,
                                    &(vf_op){.fn = record_fn,
                                             .arg = &a,
                                             .arg_size = sizeof a,
                                             .writes = VF_VARS(v)},
                                    &o));
        memset(&a, 0, sizeof a);
    }
    for (int i = 0; i < 10; i++)
        CHECK_OK(vf_operator_push(e, o, 0));
    CHECK_OK(vf_operator_destroy(e, o)); /* runs pending: still valid */
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_EQ(out[0], 10);
    tu_finish_engine(e);
}

/* --- bad input ----------------------------------------------------------- */

static atomic_int bad_runs;

static int count_fn(vf_run *run, void *arg)
{
    (void)run;
    (void)arg;
    atomic_fetch_add(&bad_runs, 1);
    return 0;
}

static void expect_einval(int rc, const char *what, const char *word)
{
    if (rc != VF_EINVAL || strstr(vf_error_detail(), word) == NULL)
        CHECK_REPORT_("%s: returned %s, detail '%s' (wanted VF_EINVAL "
                      "naming '%s')",
                      what, vf_error_name(rc), vf_error_detail(), word);
}

TEST_KIND_CASE(bad_input, k)
{
    vf_engine *e = tu_engine(k);
    vf_var v = tu_var(e);
    static char big[VF_MAX_OP_ARG_SIZE + 1];
    atomic_store(&bad_runs, 0);
    for (int bulk = 0; bulk < 2; bulk++) {
        CHECK(vf_bulk_set_size(e, bulk ? 4 : 0) >= 0);
        expect_einval(vf_engine_push(e, &(vf_op){.fn = count_fn,
                                                 .arg = big,
                                                 .arg_size = sizeof big,
                                                 .writes = VF_VARS(v)}),
                      "push, size over the limit", "VF_MAX_OP_ARG_SIZE");
        expect_einval(vf_engine_push(e, &(vf_op){.fn = count_fn,
                                                 .arg_size = 8,
                                                 .writes = VF_VARS(v)}),
                      "push, NULL arg with a size", "arg is NULL");
        expect_einval(vf_engine_push(e, &(vf_op){.async_fn = NULL,
                                                 .arg = big,
                                                 .arg_size = 8,
                                                 .writes = VF_VARS(v)}),
                      "push, no function", "fn");
    }
    vf_operator *o = NULL;
    expect_einval(vf_operator_create(e,
                                     &(vf_op){.fn = count_fn,
                                              .arg = big,
                                              .arg_size = sizeof big,
                                              .writes = VF_VARS(v)},
                                     &o),
                  "operator create, size over the limit", "VF_MAX_OP_ARG_SIZE");
    CHECK(o == NULL);
    expect_einval(
        vf_operator_create(
            e, &(vf_op){.fn = count_fn, .arg_size = 1, .writes = VF_VARS(v)},
            &o),
        "operator create, NULL arg with a size", "arg is NULL");
    CHECK_OK(vf_operator_create(
        e, &(vf_op){.fn = count_fn, .writes = VF_VARS(v)}, &o));
    REQUIRE(o != NULL);
    for (int bulk = 0; bulk < 2; bulk++) {
        CHECK(vf_bulk_set_size(e, bulk ? 4 : 0) >= 0);
        expect_einval(vf_operator_push_arg(e, o, 0, big, sizeof big),
                      "push_arg, size over the limit", "VF_MAX_OP_ARG_SIZE");
        expect_einval(vf_operator_push_arg(e, o, 0, NULL, 3),
                      "push_arg, NULL arg with a size", "arg is NULL");
    }
    expect_einval(vf_operator_push_arg(e, NULL, 0, big, 1),
                  "push_arg, NULL operator", "operator");
    CHECK_OK(vf_operator_push_arg(e, o, 0, NULL, 0)); /* a NULL pointer */
    CHECK_OK(vf_operator_destroy(e, o));
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_EQ(atomic_load(&bad_runs), 1);
    tu_finish_engine(e);
}

/* --- a random program against the serial one ----------------------------- */

#define NV 8

typedef struct rop {
    uint64_t *x; /* the program's vars' values */
    int w, nr;
    int r[3];
    uint64_t salt;
    char pad[40]; /* a larger argument than the fields need */
} rop;

static void rop_apply(const rop *o)
{
    uint64_t h = o->x[o->w] * 31 + o->salt;
    for (int i = 0; i < o->nr; i++)
        h = tu_mix(h, o->x[o->r[i]]);
    o->x[o->w] = h;
}

static int rop_fn(vf_run *run, void *arg)
{
    (void)run;
    rop_apply(arg);
    return 0;
}

TEST_KIND_CASE(random_program_matches_serial, k)
{
    for (int round = 0; round < 4; round++) {
        uint64_t seed = 1000 + (uint64_t)round;
        tu_rng r = tu_rng_make(seed);
        vf_engine *e = tu_engine(k);
        int bulk = round & 1 ? 16 : 0;
        CHECK(vf_bulk_set_size(e, bulk) >= 0);
        vf_var v[NV];
        uint64_t x[NV], ref[NV];
        for (int i = 0; i < NV; i++) {
            v[i] = tu_var(e);
            x[i] = ref[i] = (uint64_t)i + 1;
        }
        /* One operator per var it writes, reading nothing (its runs' salts
         * differ); one-shot pushes read up to three vars. */
        vf_operator *wr[NV];
        for (int i = 0; i < NV; i++)
            CHECK_OK(vf_operator_create(
                e, &(vf_op){.fn = rop_fn, .writes = VF_VARS(v[i])}, &wr[i]));
        long n = tu_scaled(20000, 2000);
        for (long j = 0; j < n; j++) {
            rop o = {.x = x, .w = tu_below(&r, NV), .salt = tu_next(&r)};
            if (tu_below(&r, 3) == 0) {
                CHECK_OK(vf_operator_push_arg(e, wr[o.w], 0, &o, sizeof o));
            } else {
                o.nr = tu_below(&r, 4);
                vf_var reads[3];
                for (int i = 0; i < o.nr; i++) {
                    o.r[i] = tu_below(&r, NV);
                    reads[i] = v[o.r[i]];
                }
                CHECK_OK(
                    vf_engine_push(e, &(vf_op){.fn = rop_fn,
                                               .arg = &o,
                                               .arg_size = sizeof o,
                                               .reads = tu_list(reads, o.nr),
                                               .writes = VF_VARS(v[o.w])}));
            }
            o.x = ref;
            rop_apply(&o);
        }
        CHECK_OK(vf_engine_wait_all(e, NULL));
        for (int i = 0; i < NV; i++) {
            if (x[i] != ref[i]) {
                CHECK_REPORT_("seed %llu bulk %d: var %d is %llx, serial "
                              "%llx",
                              (unsigned long long)seed, bulk, i,
                              (unsigned long long)x[i],
                              (unsigned long long)ref[i]);
                break;
            }
        }
        for (int i = 0; i < NV; i++)
            CHECK_OK(vf_operator_destroy(e, wr[i]));
        tu_finish_engine(e);
    }
}

/* --- out of memory ------------------------------------------------------ */

typedef struct counted {
    atomic_int *runs, *dones;
    char pad[8];
} counted;

static int counted_fn(vf_run *run, void *arg)
{
    (void)run;
    atomic_fetch_add(((counted *)arg)->runs, 1);
    return 0;
}

static void counted_done(void *arg, int status)
{
    (void)status;
    atomic_fetch_add(((counted *)arg)->dones, 1);
}

static void expect_ok_or_enomem(int rc, const char *what, uint64_t n)
{
    if (rc != 0 && rc != VF_ENOMEM)
        CHECK_REPORT_("fail_alloc(%llu): %s returned %s (%s)",
                      (unsigned long long)n, what, vf_error_name(rc),
                      vf_error_detail());
}

TEST_KIND_CASE(out_of_memory, k)
{
    static char big[4096];
    uint64_t n;
    for (n = 1;; n++) {
        vf_engine *e = tu_engine(k);
        vf_var v = tu_var(e);
        vf_operator *o = NULL;
        CHECK_OK(vf_operator_create(e,
                                    &(vf_op){.fn = counted_fn,
                                             .done = counted_done,
                                             .writes = VF_VARS(v)},
                                    &o));
        atomic_int runs = 0, dones = 0;
        int pushed = 0;
        char addr[4];
        vf__testing_fail_alloc(n);
        for (int i = 0; i < 4; i++) {
            size_t size = i % 2 ? sizeof big : sizeof(counted);
            counted *c = (counted *)(void *)big;
            c->runs = &runs;
            c->dones = &dones;
            int rc = vf_engine_push(e, &(vf_op){.fn = counted_fn,
                                                .done = counted_done,
                                                .arg = big,
                                                .arg_size = size,
                                                .writes = VF_VARS(v)});
            expect_ok_or_enomem(rc, "vf_engine_push", n);
            pushed += rc == 0;
            rc = vf_operator_push_arg(e, o, 0, big, size);
            expect_ok_or_enomem(rc, "vf_operator_push_arg", n);
            pushed += rc == 0;
            vf_var w;
            expect_ok_or_enomem(vf_var_of(e, &addr[i], &w), "vf_var_of", n);
        }
        uint64_t made = vf__testing_alloc_count();
        vf__testing_fail_alloc(0);
        CHECK_OK(vf_engine_wait_all(e, NULL));
        CHECK_EQ(atomic_load(&runs), pushed);
        CHECK_EQ(atomic_load(&dones), pushed);
        CHECK_OK(vf_operator_destroy(e, o));
        tu_finish_engine(e);
        if (made < n)
            break; /* this run failed no allocation: all were tried */
    }
    /* 8 copies of 4096 bytes and the table of vf_var_of at least */
    if (n <= 9)
        CHECK_REPORT_("the sweep ended at %llu allocations",
                      (unsigned long long)n);
}

TEST_MAIN("test_copied_args", 300)
