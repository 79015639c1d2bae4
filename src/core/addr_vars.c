/* addr_vars.c: the engine's table from addresses to vars (see
 * addr_vars.h). */
#include "core/addr_vars.h"

#include <pthread.h>
#include <stdlib.h>

#include "base/alloc.h"
#include "base/error.h"
#include "base/hashmap.h"
#include "core/engine.h"

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
    vf__addr_vars *fresh = table_new();
    if (fresh == NULL)
        return NULL;
    if (atomic_compare_exchange_strong_explicit(&e->addr_vars, &t, fresh,
                                                memory_order_acq_rel,
                                                memory_order_acquire))
        return fresh;
    vf__addr_vars_free(fresh); /* another thread made it first */
    return t;
}

/* A new var for `key`, in both maps; under the forward stripe `f`. */
static int insert(vf_engine *e, vf__addr_vars *t, stripe *f, uint64_t key,
                  vf_var *out)
{
    static const char who[] = "vf_var_of";
    if (vf__hashmap_reserve(&f->map, f->map.count + 1) != 0)
        return vf__fail(VF_ENOMEM, "%s: out of memory", who);
    vf_var v;
    int rc = vf_var_create(e, &v);
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

static int var_of(vf_engine *e, const void *addr, vf_var *out, const char *who)
{
    if (addr == NULL || out == NULL)
        return vf__fail(VF_EINVAL, "%s: %s is NULL", who,
                        addr == NULL ? "addr" : "out");
    vf__addr_vars *t = table_of(e);
    if (t == NULL)
        return vf__fail(VF_ENOMEM, "%s: out of memory", who);
    uint64_t key = (uint64_t)(uintptr_t)addr;
    stripe *f = stripe_of(t->fwd, key);
    pthread_mutex_lock(&f->lock);
    const uint64_t *id = vf__hashmap_find(&f->map, key);
    int rc = 0;
    if (VF__LIKELY(id != NULL))
        out->id = *id;
    else
        rc = insert(e, t, f, key, out);
    pthread_mutex_unlock(&f->lock);
    return rc;
}

VF_API int vf_var_of(vf_engine *e, const void *addr, vf_var *out)
{
    static const char who[] = "vf_var_of";
    return VF__GUARDED(e, who, var_of(e, addr, out, who));
}

void vf__addr_vars_fork_lock(vf_engine *e, bool lock)
{
    vf__addr_vars *t = atomic_load_explicit(&e->addr_vars,
                                            memory_order_acquire);
    if (t == NULL)
        return;
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
}

void vf__addr_vars_forget(vf_engine *e, vf_var v)
{
    vf__addr_vars *t = atomic_load_explicit(&e->addr_vars,
                                            memory_order_acquire);
    if (t == NULL)
        return;
    stripe *r = stripe_of(t->rev, v.id);
    pthread_mutex_lock(&r->lock);
    const uint64_t *at = vf__hashmap_find(&r->map, v.id);
    uint64_t key = at != NULL ? *at : 0;
    pthread_mutex_unlock(&r->lock);
    if (key == 0)
        return; /* not made by vf_var_of */
    /* Forward first (the lock order), then the reverse entry again. */
    stripe *f = stripe_of(t->fwd, key);
    pthread_mutex_lock(&f->lock);
    const uint64_t *id = vf__hashmap_find(&f->map, key);
    if (id != NULL && *id == v.id)
        vf__hashmap_remove(&f->map, key);
    pthread_mutex_lock(&r->lock);
    vf__hashmap_remove(&r->map, v.id);
    pthread_mutex_unlock(&r->lock);
    pthread_mutex_unlock(&f->lock);
}
