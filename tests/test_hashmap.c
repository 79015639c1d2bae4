/*
 * test_hashmap: the map of src/base/hashmap.h, alone (bulk's union, the
 * profiler's names and libvarflow-mpi's records stand on it).
 *
 * It checks: an empty map (find, remove, visit, clear; key 0 refused);
 * put's two answers (added, or there with its value kept) and find's
 * pointer; remove's backward shift, on runs that wrap around the table's
 * end, with every key found afterwards; random puts, removes, clears and
 * reserves against a plain array, the table's invariant (no empty slot
 * between a key's home and the key) after each step; visits see every key
 * once; clear keeps a well-used table and frees one a rare big fill left
 * behind, and sparse says when removing the keys is cheaper; out of
 * memory at every allocation (the first table, growth, reserve) is
 * VF_ENOMEM with the map unchanged, and a put of a key that is there never
 * allocates; aligned pointers (bulk's keys) spread without long runs.
 */
#include "runner.h"

#include "base/hashmap.h"

/* ------------------------------------------------------------- helpers */

/* calloc that fails when `fail_next` is set (once), counting calls. */
static int fail_next, callocs;

static void *test_calloc(size_t n, size_t size)
{
    callocs++;
    if (fail_next) {
        fail_next = 0;
        return NULL;
    }
    return calloc(n, size);
}

static size_t home_of(const vf__hashmap *m, uint64_t key)
{
    return vf__hashmap_home(key, m->shift);
}

/* The invariant: each key sits at its home or after it with no empty slot
 * in between; count is the number of keys; at most half full. */
static void check_invariant(const vf__hashmap *m, const char *when)
{
    size_t n = 0;
    for (size_t i = 0; i <= m->mask; i++) {
        uint64_t k = m->slots[i].key;
        if (k == 0)
            continue;
        n++;
        for (size_t j = home_of(m, k); j != i; j = (j + 1) & m->mask)
            if (m->slots[j].key == 0) {
                CHECK_REPORT_("%s: key %#llx at slot %zu, home %zu, but slot "
                              "%zu is empty",
                              when, (unsigned long long)k, i, home_of(m, k), j);
                return;
            }
    }
    if (n != m->count)
        CHECK_REPORT_("%s: %zu keys in the table, count says %zu", when, n,
                      m->count);
    if (m->limit > 0 && 2 * m->count > m->mask + 1)
        CHECK_REPORT_("%s: %zu keys in %zu slots", when, m->count, m->mask + 1);
}

/* `n` distinct non-zero keys whose home in a table of 2^bits slots is
 * `home`. */
static void keys_with_home(uint64_t *out, int n, unsigned bits, size_t home)
{
    uint64_t k = 1;
    for (int i = 0; i < n; k++)
        if ((size_t)((k * 0x9E3779B97F4A7C15ull) >> (64 - bits)) == home)
            out[i++] = k;
}

/* --------------------------------------------------------------- cases */

TEST_CASE(empty)
{
    tu_phase("empty map");
    vf__hashmap m;
    vf__hashmap_init(&m, NULL);
    CHECK(vf__hashmap_find(&m, 1) == NULL);
    CHECK(vf__hashmap_find(&m, 0) == NULL);
    CHECK(!vf__hashmap_remove(&m, 1));
    size_t pos = 0;
    CHECK(!vf__hashmap_next(&m, &pos, NULL, NULL));
    vf__hashmap_clear(&m);
    CHECK_EQ(m.count, 0);
    uint64_t v = 7;
    CHECK_ERR(vf__hashmap_put(&m, 0, 1, &v), VF_EINVAL);
    CHECK_EQ(v, 7);
    CHECK_EQ(m.count, 0);
    vf__hashmap_destroy(&m);
    vf__hashmap_destroy(&m); /* again: still an empty map */
    CHECK(vf__hashmap_find(&m, 1) == NULL);
}

TEST_CASE(put_find)
{
    tu_phase("put and find");
    vf__hashmap m;
    vf__hashmap_init(&m, NULL);
    uint64_t v = 0;
    CHECK_EQ(vf__hashmap_put(&m, 42, 1000, &v), 0);
    CHECK_EQ(v, 1000);
    CHECK_EQ(vf__hashmap_put(&m, 42, 2000, &v), 1); /* there: kept */
    CHECK_EQ(v, 1000);
    CHECK_EQ(vf__hashmap_put(&m, 43, 3000, NULL), 0);
    uint64_t *p = vf__hashmap_find(&m, 42);
    REQUIRE(p != NULL);
    CHECK_EQ(*p, 1000);
    *p = 1001; /* the value is the caller's to change */
    CHECK_EQ(*vf__hashmap_find(&m, 42), 1001);
    CHECK_ERR(vf__hashmap_put(&m, 0, 1, NULL), VF_EINVAL);
    CHECK(vf__hashmap_find(&m, 0) == NULL);
    CHECK_EQ(m.count, 2);
    /* Growth keeps every key and value. */
    for (uint64_t k = 100; k < 5100; k++)
        CHECK_EQ(vf__hashmap_put(&m, k, k * 3, NULL), 0);
    CHECK_EQ(m.count, 5002);
    for (uint64_t k = 100; k < 5100; k++) {
        p = vf__hashmap_find(&m, k);
        if (p == NULL || *p != k * 3) {
            CHECK_REPORT_("key %llu: %s", (unsigned long long)k,
                          p ? "wrong value" : "lost in growth");
            break;
        }
    }
    check_invariant(&m, "after growth");
    vf__hashmap_destroy(&m);
}

/* Runs that wrap: keys whose home is the last slot of a 16-slot table
 * fill it and spill into slots 0, 1, ...; removing any of them shifts the
 * rest back across the end. */
TEST_CASE(wrap)
{
    tu_phase("backward shift across the table's end");
    uint64_t last[4], first[2];
    keys_with_home(last, 4, 4, 15);
    keys_with_home(first, 2, 4, 0);
    for (int victim = 0; victim < 6; victim++) {
        vf__hashmap m;
        vf__hashmap_init(&m, NULL);
        uint64_t keys[6] = {last[0], last[1], first[0],
                            last[2], last[3], first[1]};
        for (int i = 0; i < 6; i++)
            CHECK_EQ(vf__hashmap_put(&m, keys[i], (uint64_t)i, NULL), 0);
        CHECK_EQ(m.mask, 15); /* still the first table */
        check_invariant(&m, "filled");
        CHECK(vf__hashmap_remove(&m, keys[victim]));
        CHECK(!vf__hashmap_remove(&m, keys[victim]));
        check_invariant(&m, "after a remove");
        for (int i = 0; i < 6; i++) {
            uint64_t *p = vf__hashmap_find(&m, keys[i]);
            if (i == victim)
                CHECK(p == NULL);
            else if (p == NULL || *p != (uint64_t)i)
                CHECK_REPORT_("victim %d: key %d %s", victim, i,
                              p ? "has a wrong value" : "is lost");
        }
        vf__hashmap_destroy(&m);
    }
}

/* Random steps against a plain array of the same keys. */
TEST_CASE(random)
{
    tu_phase("random steps against a model");
    enum { UNIVERSE = 600, STEPS = 60000 };
    static uint64_t model[UNIVERSE + 1]; /* key -> value + 1, 0: absent */
    memset(model, 0, sizeof model);
    tu_rng r = tu_rng_make(18);
    vf__hashmap m;
    vf__hashmap_init(&m, NULL);
    size_t present = 0;
    for (int step = 0; step < STEPS; step++) {
        uint64_t key = 1 + tu_next(&r) % UNIVERSE;
        unsigned what = (unsigned)(tu_next(&r) % 100);
        if (what < 50) {
            uint64_t value = tu_next(&r) >> 1, got = 0;
            int rc = vf__hashmap_put(&m, key, value, &got);
            CHECK_EQ(rc, model[key] ? 1 : 0);
            if (model[key] == 0) {
                model[key] = value + 1;
                present++;
            }
            CHECK_EQ(got + 1, model[key]);
        } else if (what < 90) {
            bool was = vf__hashmap_remove(&m, key);
            CHECK_EQ(was, model[key] != 0);
            present -= model[key] != 0;
            model[key] = 0;
        } else if (what < 99) {
            CHECK_OK(vf__hashmap_reserve(&m, tu_next(&r) % 1000));
        } else {
            vf__hashmap_clear(&m);
            memset(model, 0, sizeof model);
            present = 0;
        }
        if (step % 97 == 0 || step == STEPS - 1) {
            check_invariant(&m, "random step");
            CHECK_EQ(m.count, present);
            for (uint64_t k = 1; k <= UNIVERSE; k++) {
                uint64_t *p = vf__hashmap_find(&m, k);
                if ((p == NULL) != (model[k] == 0) ||
                    (p != NULL && *p + 1 != model[k])) {
                    CHECK_REPORT_("step %d: key %llu differs from the model",
                                  step, (unsigned long long)k);
                    step = STEPS;
                    break;
                }
            }
        }
    }
    vf__hashmap_destroy(&m);
}

TEST_CASE(visit)
{
    tu_phase("visits");
    vf__hashmap m;
    vf__hashmap_init(&m, NULL);
    enum { N = 300 };
    static int seen[N];
    for (uint64_t k = 1; k <= N; k++)
        CHECK_OK(vf__hashmap_put(&m, k * 1000003, k, NULL));
    uint64_t key, value;
    size_t n = 0;
    for (size_t pos = 0; vf__hashmap_next(&m, &pos, &key, &value);) {
        n++;
        if (value < 1 || value > N || key != value * 1000003) {
            CHECK_REPORT_("visit: key %llu with value %llu",
                          (unsigned long long)key, (unsigned long long)value);
            break;
        }
        seen[value - 1]++;
    }
    CHECK_EQ(n, N);
    for (int i = 0; i < N; i++)
        if (seen[i] != 1)
            CHECK_REPORT_("visit: key %d seen %d times", i + 1, seen[i]);
    vf__hashmap_destroy(&m);
}

TEST_CASE(clear)
{
    tu_phase("clear");
    vf__hashmap m;
    vf__hashmap_init(&m, test_calloc);
    callocs = 0;
    CHECK_OK(vf__hashmap_reserve(&m, 32)); /* like bulk: 2 * size */
    CHECK_EQ(callocs, 1);
    vf__hashmap_slot *table = m.slots;
    for (int round = 0; round < 5; round++) { /* refills allocate nothing */
        for (uint64_t k = 1; k <= 30; k++)
            CHECK_EQ(vf__hashmap_put(&m, k << 6, k, NULL), 0);
        CHECK(!vf__hashmap_sparse(&m));
        vf__hashmap_clear(&m);
        CHECK_EQ(m.count, 0);
        CHECK(vf__hashmap_find(&m, 1 << 6) == NULL);
        check_invariant(&m, "cleared");
    }
    CHECK_EQ(callocs, 1);
    CHECK(m.slots == table);
    /* A small fill of a big reserve keeps it too; it is sparse, so its
     * keys may also go one by one. */
    CHECK_EQ(vf__hashmap_put(&m, 5, 5, NULL), 0);
    CHECK(vf__hashmap_sparse(&m));
    vf__hashmap_clear(&m);
    CHECK(m.slots == table);
    /* One big fill grows the table; the next small fill's clear frees it,
     * and the next put allocates a small one again. */
    for (uint64_t k = 1; k <= 5000; k++)
        CHECK_OK(vf__hashmap_put(&m, k, k, NULL));
    vf__hashmap_clear(&m); /* it was used: kept */
    CHECK(m.mask + 1 >= 10000);
    CHECK_EQ(vf__hashmap_put(&m, 7, 7, NULL), 0);
    vf__hashmap_clear(&m); /* 16384 slots for a fill of 1: freed */
    CHECK_EQ(m.limit, 0);
    CHECK_EQ(m.count, 0);
    CHECK(vf__hashmap_find(&m, 7) == NULL);
    CHECK_EQ(vf__hashmap_put(&m, 7, 8, NULL), 0);
    CHECK(m.mask + 1 <= 64); /* a small table again */
    CHECK_EQ(*vf__hashmap_find(&m, 7), 8);
    vf__hashmap_destroy(&m);
}

TEST_CASE(enomem)
{
    tu_phase("out of memory");
    vf__hashmap m;
    vf__hashmap_init(&m, test_calloc);
    /* The first table. */
    fail_next = 1;
    CHECK_ERR(vf__hashmap_put(&m, 9, 9, NULL), VF_ENOMEM);
    CHECK_EQ(m.count, 0);
    CHECK(vf__hashmap_find(&m, 9) == NULL);
    fail_next = 1;
    CHECK_ERR(vf__hashmap_reserve(&m, 10), VF_ENOMEM);
    CHECK_EQ(m.limit, 0);
    CHECK_ERR(vf__hashmap_reserve(&m, SIZE_MAX), VF_ENOMEM);
    /* Growth: a full table refuses a new key, keeps the old ones, and
     * still answers for a key it has without allocating. */
    uint64_t k = 1;
    for (; m.count < m.limit || m.limit == 0; k++)
        CHECK_EQ(vf__hashmap_put(&m, k * 64, k, NULL), 0);
    size_t full = m.count;
    fail_next = 1;
    CHECK_ERR(vf__hashmap_put(&m, k * 64, k, NULL), VF_ENOMEM);
    CHECK_EQ(m.count, full);
    CHECK(vf__hashmap_find(&m, k * 64) == NULL);
    fail_next = 1; /* armed: a put of a key that is there must not use it */
    uint64_t v = 0;
    CHECK_EQ(vf__hashmap_put(&m, 64, 99, &v), 1);
    CHECK_EQ(v, 1);
    CHECK_EQ(fail_next, 1);
    fail_next = 0;
    for (uint64_t j = 1; j < k; j++)
        if (vf__hashmap_find(&m, j * 64) == NULL)
            CHECK_REPORT_("key %llu lost after a failed growth",
                          (unsigned long long)(j * 64));
    check_invariant(&m, "after a failed growth");
    CHECK_EQ(vf__hashmap_put(&m, k * 64, k, NULL), 0); /* memory again */
    vf__hashmap_destroy(&m);
}

/* Bulk's keys are vars, 64-byte aligned, often made one after another:
 * they must not pile up in long runs. */
TEST_CASE(spread)
{
    tu_phase("aligned keys spread");
    vf__hashmap m;
    vf__hashmap_init(&m, NULL);
    uint64_t base = 0x7f3a12345000ull;
    for (uint64_t i = 0; i < 4096; i++)
        CHECK_EQ(vf__hashmap_put(&m, base + 64 * i, i, NULL), 0);
    size_t longest = 0, run = 0;
    for (size_t i = 0; i <= 2 * m.mask + 1; i++) { /* twice: runs wrap */
        run = m.slots[i & m.mask].key != 0 ? run + 1 : 0;
        longest = run > longest ? run : longest;
    }
    if (longest > 64)
        CHECK_REPORT_("4096 aligned keys in %zu slots: a run of %zu",
                      m.mask + 1, longest);
    vf__hashmap_destroy(&m);
}

TEST_MAIN("test_hashmap", 120)
