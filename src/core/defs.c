/* defs.c: the definitions an engine's ops share (see defs.h). */
#include "core/defs.h"

#include <string.h>

#include "base/alloc.h"
#include "core/engine.h"

int vf__defs_init(vf__defs *d)
{
    if (pthread_mutex_init(&d->lock, NULL) != 0)
        return VF_ESYSTEM;
    for (int p = 0; p < VF__DEF_PROPS; p++)
        for (int f = 0; f < VF__DEF_FLAGS; f++)
            atomic_init(&d->cpu[p][f], NULL);
    atomic_init(&d->others, NULL);
    return 0;
}

void vf__defs_destroy(vf__defs *d)
{
    for (int p = 0; p < VF__DEF_PROPS; p++)
        for (int f = 0; f < VF__DEF_FLAGS; f++)
            free(atomic_load_explicit(&d->cpu[p][f], memory_order_relaxed));
    vf__opdef *def = atomic_load_explicit(&d->others, memory_order_relaxed);
    while (def != NULL) {
        vf__opdef *next = def->next_shared;
        free(def);
        def = next;
    }
    pthread_mutex_destroy(&d->lock);
}

/* A CPU user op's slot in the table, or NULL for any other op. The table
 * is looked up by property and flags alone (vf__defs_for_push), so only
 * a definition routed as vf__opdef_fill routes its property goes there
 * (a batch's op pushed alone keeps its batch's pool, not its property). */
static _Atomic(vf__opdef *) *cpu_slot(vf__defs *d, const vf__opdef *p)
{
    vf_engine *e = p->engine;
    if (p->kind != &vf__kind_user || p->device.type != VF_DEVICE_CPU ||
        p->device.id != 0 || p->devctx != NULL ||
        (unsigned)p->property >= VF__DEF_PROPS)
        return NULL;
    vf__pool *routed = p->property == VF_PROP_CPU_PRIORITIZED &&
                               e->priority_pool != NULL
                           ? e->priority_pool
                           : e->cpu_pool;
    if (p->pool != routed || p->inline_run != (routed == NULL || p->async))
        return NULL;
    return &d->cpu[p->property]
                  [vf__defs_flag_bits(p->no_skip, p->nonblocking, p->async)];
}

/* Whether two definitions agree in everything ops share. */
static bool same_shared(const vf__opdef *a, const vf__opdef *b)
{
    return a->kind == b->kind && a->pool == b->pool && a->devctx == b->devctx &&
           a->device.type == b->device.type && a->device.id == b->device.id &&
           a->property == b->property && a->no_skip == b->no_skip &&
           a->nonblocking == b->nonblocking && a->inline_run == b->inline_run &&
           a->async == b->async;
}

static vf__opdef *find(vf__defs *d, _Atomic(vf__opdef *) *slot,
                       const vf__opdef *proto)
{
    if (slot != NULL)
        return atomic_load_explicit(slot, memory_order_acquire);
    for (vf__opdef *def =
             atomic_load_explicit(&d->others, memory_order_acquire);
         def != NULL; def = def->next_shared)
        if (same_shared(def, proto))
            return def;
    return NULL;
}

const vf__opdef *vf__defs_share(vf__defs *d, const vf__opdef *proto)
{
    _Atomic(vf__opdef *) *slot = cpu_slot(d, proto);
    vf__opdef *def = find(d, slot, proto);
    if (def != NULL)
        return def;
    pthread_mutex_lock(&d->lock);
    if ((def = find(d, slot, proto)) == NULL &&
        (def = vf__malloc(sizeof *def)) != NULL) {
        *def = *proto;
        def->opr = NULL;
        /* Each push brings its own run. */
        def->fn = NULL;
        def->async_fn = NULL;
        def->arg = NULL;
        def->done = NULL;
        def->name = "";
        if (slot != NULL) {
            def->next_shared = NULL;
            atomic_store_explicit(slot, def, memory_order_release);
        } else {
            def->next_shared = atomic_load_explicit(&d->others,
                                                    memory_order_relaxed);
            atomic_store_explicit(&d->others, def, memory_order_release);
        }
    }
    pthread_mutex_unlock(&d->lock);
    return def;
}

int vf__defs_for_push(vf_engine *e, const char *who, const vf_op *desc,
                      const vf__opdef **out)
{
    if ((*out = vf__defs_seen(&e->defs, desc)) != NULL)
        return 0;
    vf__opdef proto;
    int rc = vf__opdef_fill(e, who, desc, &proto);
    if (rc != 0)
        return rc;
    if ((*out = vf__defs_share(&e->defs, &proto)) == NULL)
        return vf__fail(VF_ENOMEM, "%s: out of memory", who);
    return 0;
}
