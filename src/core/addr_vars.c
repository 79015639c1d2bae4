/* addr_vars.c: the engine's table from addresses to vars (see
 * addr_vars.h). */
#include "core/addr_vars.h"

#include <pthread.h>
#include <stdlib.h>

#include "base/alloc.h"
#include "base/error.h"
#include "base/hashmap.h"
#include "core/engine.h"
#include "core/graph.h"
#include "core/lifecycle.h"
#include "core/var_api.h"

#define VF__ADDR_STRIPES 64 /* stripe_of takes the hash's top 6 bits */

typedef struct stripe {
    pthread_mutex_t lock;
    vf__hashmap map; /* lock */
} __attribute__((aligned(VF__CACHELINE))) stripe;

struct vf__addr_vars {
    stripe fwd[VF__ADDR_STRIPES]; /* address -> var id */
    stripe rev[VF__ADDR_STRIPES]; /* var id -> address */
};

/* A stripe by the key's hash. Not the top bits of the hashmap's own
 * product (key * 2^64/phi): those pick the home slot inside the map, and
 * keys that agreed on them would all crowd into one run of its table.
 * Another odd multiplier's top bits are independent enough. */
static stripe *stripe_of(stripe *s, uint64_t key)
{
    return &s[(key * 0xC2B2AE3D27D4EB4Full) >> 58];
}

static vf__addr_vars *table_new(void)
{
    vf__addr_vars *t = vf__calloc(1, sizeof *t);
    if (t == NULL)
        return NULL;
    for (int i = 0; i < VF__ADDR_STRIPES; i++) {
        pthread_mutex_init(&t->fwd[i].lock, NULL);
        pthread_mutex_init(&t->rev[i].lock, NULL);
        vf__hashmap_init(&t->fwd[i].map, vf__calloc);
        vf__hashmap_init(&t->rev[i].map, vf__calloc);
    }
    return t;
}

void vf__addr_vars_free(vf__addr_vars *t)
{
    if (t == NULL)
        return;
    for (int i = 0; i < VF__ADDR_STRIPES; i++) {
        vf__hashmap_destroy(&t->fwd[i].map);
        vf__hashmap_destroy(&t->rev[i].map);
        pthread_mutex_destroy(&t->fwd[i].lock);
        pthread_mutex_destroy(&t->rev[i].lock);
    }
    free(t);
}

/* The engine's table, made on first use (NULL: no memory). */
static vf__addr_vars *table_of(vf_engine *e)
{
    vf__addr_vars *t = atomic_load_explicit(&e->addr_vars,
                                            memory_order_acquire);
    if (VF__LIKELY(t != NULL))
        return t;
    pthread_mutex_lock(&e->addr_vars_lock); /* not during a fork */
    t = atomic_load_explicit(&e->addr_vars, memory_order_acquire);
    if (t == NULL) {
        t = table_new();
        atomic_store_explicit(&e->addr_vars, t, memory_order_release);
    }
    pthread_mutex_unlock(&e->addr_vars_lock);
    return t;
}

/* An entry's value is its var's handle; vf_var_destroy marks it by
 * zeroing the handle's engine-tag field (var.h), never 0 in a handle. */
#define TAG_SHIFT (VF__VAR_INDEX_BITS + VF__VAR_GEN_BITS)

static uint64_t marked(uint64_t id)
{
    return id & ((UINT64_C(1) << TAG_SHIFT) - 1);
}

static bool is_marked(uint64_t value)
{
    return (value >> TAG_SHIFT) == 0;
}

/* The address of var `id`, or 0 when vf_var_of did not make it. */
static uint64_t key_of(vf__addr_vars *t, uint64_t id)
{
    stripe *r = stripe_of(t->rev, id);
    pthread_mutex_lock(&r->lock);
    const uint64_t *at = vf__hashmap_find(&r->map, id);
    uint64_t key = at != NULL ? *at : 0;
    pthread_mutex_unlock(&r->lock);
    return key;
}

/* Drop `key`'s entry (var `id`, marked or not) and id's reverse entry;
 * under the forward stripe `f`. */
static void drop(vf__addr_vars *t, stripe *f, uint64_t key, uint64_t id)
{
    const uint64_t *at = vf__hashmap_find(&f->map, key);
    if (at != NULL && (*at == id || *at == marked(id)))
        vf__hashmap_remove(&f->map, key);
    stripe *r = stripe_of(t->rev, id);
    pthread_mutex_lock(&r->lock);
    vf__hashmap_remove(&r->map, id);
    pthread_mutex_unlock(&r->lock);
}

/* A new var for `key`, in both maps; under the forward stripe `f`. */
static int insert(vf_engine *e, vf__addr_vars *t, stripe *f, uint64_t key,
                  vf_var *out)
{
    static const char who[] = "vf_var_of";
    if (vf__hashmap_reserve(&f->map, f->map.count + 1) != 0)
        return vf__fail(VF_ENOMEM, "%s: out of memory", who);
    vf_var v;
    int rc = vf__var_api_create(e, &v, who);
    if (rc != 0)
        return rc;
    stripe *r = stripe_of(t->rev, v.id);
    pthread_mutex_lock(&r->lock);
    rc = vf__hashmap_put(&r->map, v.id, key, NULL);
    pthread_mutex_unlock(&r->lock);
    if (rc != 0) {
        vf_var_destroy(e, v, NULL, NULL); /* never seen by anyone */
        return vf__fail(VF_ENOMEM, "%s: out of memory", who);
    }
    rc = vf__hashmap_put(&f->map, key, v.id, NULL); /* reserved: no fail */
    VF__ASSERT(rc == 0);
    *out = v;
    return 0;
}

/* Revive the slot of `h` (its var `v`, destroyed) as `*now`, with the
 * reverse entry of the handle it gets: 0, 1 (its delete is held:
 * vf__var_revive), VF_ESTALE (not revived) or VF_ENOMEM. The room for the
 * entry is taken under the same lock as the entry is put: taken before
 * and let go, another thread's insert in the stripe could use it, and the
 * put, after the revival, fail (an abort; found by an auditor, by
 * reasoning). Lock order: the forward stripe, the reverse one, the var. */
static int revive_slot(vf_engine *e, vf__addr_vars *t, uint64_t key, vf__var *v,
                       vf_var h, vf_var *now)
{
    uint32_t gen = vf__var_handle_gen(h);
    uint32_t next = (gen + 1) & ((1u << VF__VAR_GEN_BITS) - 1);
    stripe *r = stripe_of(t->rev, vf__var_handle(&e->vars, v, next).id);
    pthread_mutex_lock(&r->lock);
    int rc = vf__hashmap_reserve(&r->map, r->map.count + 1);
    if (rc == 0) {
        rc = vf__var_revive(&e->vars, v, gen, now);
        if (rc == 0) {
            int put = vf__hashmap_put(&r->map, now->id, key, NULL);
            VF__ASSERT(put == 0); /* room taken above */
        }
    } else {
        rc = vf__fail(VF_ENOMEM, "vf_var_of: out of memory");
    }
    pthread_mutex_unlock(&r->lock);
    if (rc == 0) { /* the destroyed handle's entry goes */
        r = stripe_of(t->rev, h.id);
        pthread_mutex_lock(&r->lock);
        vf__hashmap_remove(&r->map, h.id);
        pthread_mutex_unlock(&r->lock);
    }
    return rc;
}

/* What vf_var_of does under the forward stripe `f` with `key`'s entry
 * marked (its var `h` destroyed): revive the slot when its delete is
 * queued; VF__HELD when the delete is held (the caller goes on without
 * the lock). */
#define VF__HELD 1
static int revive(vf_engine *e, vf__addr_vars *t, stripe *f, uint64_t key,
                  vf_var h, vf_var *out)
{
    vf__var *v;
    if (vf__var_lookup(&e->vars, h, &v) != 0) {
        drop(t, f, key, h.id); /* cannot happen: the free drops it */
        return insert(e, t, f, key, out);
    }
    vf_var now;
    int rc = revive_slot(e, t, key, v, h, &now);
    if (rc == VF_ENOMEM)
        return rc;
    if (rc == 1)
        return VF__HELD;
    if (rc != 0) {
        drop(t, f, key, h.id);
        return insert(e, t, f, key, out);
    }
    *vf__hashmap_find(&f->map, key) = now.id; /* the entry is there */
    *out = now;
    return 0;
}

/* vf_var_of of a var whose delete a stopped engine holds: once the held
 * delete keeps the var, the handle stays as it is (the caller holds no
 * lock). */
static int revive_held(vf_engine *e, vf__addr_vars *t, uint64_t key, vf_var h,
                       bool last_try)
{
    vf__var *v;
    if (vf__var_lookup(&e->vars, h, &v) != 0)
        return 1; /* look again */
    int rc = vf__var_api_revive_held(e, v, vf__var_handle_gen(h));
    if (rc < 0 || (rc == 1 && !last_try))
        return rc;
    if (rc != 2) {
        stripe *f = stripe_of(t->fwd, key);
        pthread_mutex_lock(&f->lock);
        uint64_t *at = vf__hashmap_find(&f->map, key);
        if (at != NULL && *at == marked(h.id))
            *at = h.id;
        pthread_mutex_unlock(&f->lock);
    }
    return 0;
}

static int var_of(vf_engine *e, const void *addr, vf_var *out, const char *who)
{
    int refused = vf__graph_refuse(e, who);
    if (refused != 0)
        return refused;
    if (addr == NULL || out == NULL)
        return vf__fail(VF_EINVAL, "%s: %s is NULL", who,
                        addr == NULL ? "addr" : "out");
    vf__addr_vars *t = table_of(e);
    if (t == NULL)
        return vf__fail(VF_ENOMEM, "%s: out of memory", who);
    uint64_t key = (uint64_t)(uintptr_t)addr;
    stripe *f = stripe_of(t->fwd, key);
    for (int tries = 0;; tries++) {
        pthread_mutex_lock(&f->lock);
        const uint64_t *id = vf__hashmap_find(&f->map, key);
        int rc = 0;
        vf_var h = {0};
        if (VF__LIKELY(id != NULL && !is_marked(*id)))
            out->id = *id;
        else if (id == NULL)
            rc = insert(e, t, f, key, out);
        else {
            h.id = *id | (uint64_t)e->vars.tag << TAG_SHIFT;
            rc = revive(e, t, f, key, h, out);
        }
        pthread_mutex_unlock(&f->lock);
        if (VF__LIKELY(rc != VF__HELD))
            return rc;
        if ((rc = revive_held(e, t, key, h, tries > 0)) <= 0) {
            if (rc == 0)
                *out = h;
            return rc;
        }
    }
}

VF_API int vf_var_of(vf_engine *e, const void *addr, vf_var *out)
{
    static const char who[] = "vf_var_of";
    return VF__GUARDED_LIVE(e, who, var_of(e, addr, out, who));
}

void vf__addr_vars_fork_lock(vf_engine *e, bool lock)
{
    if (lock)
        pthread_mutex_lock(&e->addr_vars_lock); /* the table stays as is */
    vf__addr_vars *t = atomic_load_explicit(&e->addr_vars,
                                            memory_order_acquire);
    if (t == NULL) {
        if (!lock)
            pthread_mutex_unlock(&e->addr_vars_lock);
        return;
    }
    for (int i = 0; i < 2 * VF__ADDR_STRIPES; i++) {
        if (lock) {
            stripe *s = i < VF__ADDR_STRIPES ? &t->fwd[i]
                                             : &t->rev[i - VF__ADDR_STRIPES];
            pthread_mutex_lock(&s->lock);
        } else {
            int j = 2 * VF__ADDR_STRIPES - 1 - i;
            stripe *s = j < VF__ADDR_STRIPES ? &t->fwd[j]
                                             : &t->rev[j - VF__ADDR_STRIPES];
            pthread_mutex_unlock(&s->lock);
        }
    }
    if (!lock)
        pthread_mutex_unlock(&e->addr_vars_lock);
}

void vf__addr_vars_destroyed(vf_engine *e, vf_var v)
{
    vf__addr_vars *t = atomic_load_explicit(&e->addr_vars,
                                            memory_order_acquire);
    if (t == NULL)
        return;
    uint64_t key = key_of(t, v.id);
    if (key == 0)
        return; /* not made by vf_var_of, or its delete already ran */
    stripe *f = stripe_of(t->fwd, key);
    pthread_mutex_lock(&f->lock);
    uint64_t *at = vf__hashmap_find(&f->map, key);
    if (at != NULL && *at == v.id)
        *at = marked(v.id);
    pthread_mutex_unlock(&f->lock);
}

bool vf__addr_vars_free_slot(vf_engine *e, vf__var *v, uint32_t gen)
{
    vf__addr_vars *t = atomic_load_explicit(&e->addr_vars,
                                            memory_order_acquire);
    if (t == NULL)
        return false;
    uint64_t id = vf__var_handle(&e->vars, v, gen).id;
    uint64_t key = key_of(t, id);
    if (key == 0)
        return false;
    /* Under the forward stripe, as vf_var_of's revival: one of the two. */
    stripe *f = stripe_of(t->fwd, key);
    pthread_mutex_lock(&f->lock);
    if (vf__var_free_slot(&e->vars, v, gen))
        drop(t, f, key, id);
    pthread_mutex_unlock(&f->lock);
    return true;
}
