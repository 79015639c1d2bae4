/* var_api.c: the public variable calls (new, delete, version). */
#include "core/var_api.h"

#include <limits.h>
#include <string.h>

#include "core/addr_vars.h"
#include "core/bulk.h"
#include "core/engine.h"
#include "core/exec.h"
#include "core/graph.h"
#include "core/lifecycle.h"
#include "core/push.h"

/* Inside the call's guard (guard.h): an engine that takes new vars and
 * deletes from this caller. */
static int var_check_engine(vf_engine *e, const char *who)
{
    int state = atomic_load(&e->state);
    /* In a child forked from inside an op, that op is this thread's, but
     * the engine runs nothing: a delete accepted there never ran (found
     * trying fork as a user), so nothing is accepted, as pushes are not. */
    if (state != VF__RUNNING &&
        (vf__exec_current_engine() != e || e->life.fork_dead))
        return vf__fail(VF_ESHUTDOWN, "%s: the engine %s", who,
                        e->life.fork_dead       ? VF__FORK_DEAD_WORDS
                        : state == VF__SHUTDOWN ? "was shut down "
                                                  "(vf_engine_shutdown)"
                                                : "is being destroyed");
    return 0;
}

int vf__var_api_create(vf_engine *e, vf_var *out, const char *who)
{
    int rc = var_check_engine(e, who);
    if (rc != 0 || (rc = vf__graph_refuse(e, who)) != 0)
        return rc;
    if (out == NULL)
        return vf__fail(VF_EINVAL, "%s: out is NULL", who);
    return vf__var_create(&e->vars, out, who);
}

VF_API int vf_var_create(vf_engine *e, vf_var *out)
{
    static const char who[] = "vf_var_create";
    return VF__GUARDED(e, who, vf__var_api_create(e, out, who));
}

static int lookup_failed(const char *who, vf_var h, int rc)
{
    return vf__fail(rc, "%s: variable (id %#llx) %s", who,
                    (unsigned long long)h.id, vf__bad_handle_words(rc, h));
}

static int lookup(vf_engine *e, const char *who, vf_var h, vf__var **v)
{
    int rc = vf__var_lookup(&e->vars, h, v);
    return rc != 0 ? lookup_failed(who, h, rc) : 0;
}

/* A delete of a var whose delete was pushed before (VF_ESTALE): the slot
 * is free again, or the push found the var deleting. */
static int already_deleted(const char *who, vf_var h)
{
    return vf__fail(VF_ESTALE, "%s: variable (id %#llx) was already deleted",
                    who, (unsigned long long)h.id);
}

/* A delete's body: never skipped, the resource must be freed whatever
 * happened. It holds its var alone: what it leaves is a fresh var's (no
 * failure, version 0), which is what ops see when vf_var_of revived the
 * slot for them (addr_vars.h); a var whose slot goes back loses both
 * anyway. */
static bool run_delete(vf__op *op, int worker, bool shutdown)
{
    (void)worker;
    (void)shutdown; /* frees even then */
    vf__var *v = vf__dep_var(&op->deps[0]);
    if (atomic_load_explicit(&v->failure, memory_order_relaxed) != NULL)
        vf__var_set_failure(v, NULL); /* it holds v alone: none comes */
    vf__var_unmark(v); /* the delete's run: nothing marked is left */
    /* A kept delete (vf_var_of revived its var while it was held) leaves
     * its generation live: its var goes on, at version 0. */
    if (op->def->kind == &vf__kind_delete)
        vf__var_delete_ran(v, (uint32_t)op->delete_gen);
    else
        vf__var_kept_delete_ran(v);
    vf__family_unref(op->delete_from); /* it stands nowhere now */
    /* Its address's entry (vf_var_of) marked before the callback, which
     * may look the address up: vf_var_destroy marks it once its push
     * returned, after a delete run inside it (a naive engine) or on a
     * worker at once, and vf_var_of there gave the destroyed handle (found
     * by an auditor). Marked already, or no address's var: nothing. */
    if (op->free_fn != NULL && op->def->kind == &vf__kind_delete) {
        vf_engine *e = vf__op_engine(op);
        vf__addr_vars_destroyed(
            e, vf__var_handle(&e->vars, v, (uint32_t)op->delete_gen));
    }
    vf__running outer;
    op->run = NULL; /* a free callback has no run handle */
    vf__running_enter(&outer, op);
    if (op->free_fn)
        op->free_fn(op->arg);
    vf__running_leave(&outer);
    return true;
}

/* Its var's slot goes back once every op before it has finished, unless
 * vf_var_of revived it meanwhile (then the slot lives on). */
static void delete_finished(vf__op *op)
{
    vf_engine *e = vf__op_engine(op);
    vf__var *v = vf__dep_var(&op->deps[0]);
    uint32_t gen = (uint32_t)op->delete_gen;
    if (!vf__addr_vars_free_slot(e, v, gen))
        vf__var_free_slot(&e->vars, v, gen);
}

static const vf__op_kind kind_delete_kept;

/* Held while stopped and never pushed: the free callback still runs. */
static void delete_dropped(vf_engine *e, vf__op *op, int rc)
{
    if (op->def->kind == &kind_delete_kept) /* the handle's var is fresh */
        vf__var_kept_delete_ran(vf__dep_var(&op->deps[0]));
    vf__family_unref(op->delete_from); /* none: held ones come from outside */
    op->delete_from = NULL;
    if (op->free_fn != NULL)
        op->free_fn(op->arg);
    vf__lifecycle_drop_op(e, op, rc);
}

/* vf_var_destroy's op: writes the var, then frees its slot. It sets no
 * version: run_delete leaves the var at 0. */
const vf__op_kind vf__kind_delete = {.name = "delete",
                                     .run = run_delete,
                                     .finished = delete_finished,
                                     .dropped = delete_dropped,
                                     .flags = VF__KIND_HELD | VF__KIND_DELETES |
                                              VF__KIND_NO_CODE};

/* A held delete that vf_var_of revived its var for, before the engine
 * started again (vf__var_api_revive_held): it runs as a delete, but leaves the
 * var live with its handle, for the ops held after it. */
static const vf__op_kind kind_delete_kept = {.name = "delete",
                                             .run = run_delete,
                                             .dropped = delete_dropped,
                                             .flags = VF__KIND_HELD};

static const vf__opdef *delete_def(vf_engine *e, const vf__op_kind *kind)
{
    return vf__defs_share(&e->defs,
                          &(vf__opdef){.engine = e,
                                       .kind = kind,
                                       .property = VF_PROP_DELETE_VAR,
                                       .pool = e->cpu_pool,
                                       .inline_run = e->cpu_pool == NULL});
}

/* The last held delete of `v` (generation `gen`), or NULL. Under
 * life.lock: the held ops are lifecycle.c's, read here alone. */
static vf__op *last_held_delete(vf_engine *e, const vf__var *v, uint32_t gen)
{
    vf__op *found = NULL;
    for (vf__op *op = e->life.held_head; op != NULL; op = op->next) {
        const vf__op_kind *k = op->def->kind;
        if ((k == &vf__kind_delete || k == &kind_delete_kept) &&
            vf__dep_var(&op->deps[0]) == v && (uint32_t)op->delete_gen == gen)
            found = op;
    }
    return found;
}

int vf__var_api_revive_held(vf_engine *e, vf__var *v, uint32_t gen)
{
    const vf__opdef *kept = delete_def(e, &kind_delete_kept);
    if (kept == NULL)
        return vf__fail(VF_ENOMEM, "vf_var_of: out of memory");
    pthread_mutex_lock(&e->life.lock);
    vf__op *op = last_held_delete(e, v, gen);
    if (op != NULL) {
        bool newly_kept = op->def != kept;
        op->def = kept; /* not queued yet: no other thread reads it */
        /* The var stays: ops may name it again. Under life.lock, as the
         * holds that set the mark are (push.c: admit_held): cleared after
         * it, the mark of a delete held meanwhile went too, and the ops
         * held after that delete were pushed after it at start, the var
         * gone (found trying vf_var_of, destroy and stop from three
         * threads as a user). */
        vf__spin_lock(&v->lock);
        v->delete_held = false;
        v->kept_deletes += newly_kept;
        vf__spin_unlock(&v->lock);
    }
    pthread_mutex_unlock(&e->life.lock);
    if (op != NULL)
        return 0;
    /* A start took it off the held list and is pushing the held ops: from
     * one of them (a naive engine runs them inline) the delete is still
     * to come; from elsewhere, wait until the start is through (it holds
     * op_lock while it pushes them). */
    if (vf__lifecycle_releasing_held(e) || vf__exec_current_engine() == e)
        return 2;
    pthread_mutex_lock(&e->life.op_lock);
    pthread_mutex_unlock(&e->life.op_lock);
    return 1;
}

static int var_destroy(vf_engine *e, vf_var h, void (*free_fn)(void *),
                       void *free_arg, const char *who)
{
    int rc = var_check_engine(e, who);
    if (rc == 0)
        rc = vf__graph_refuse(e, who);
    vf__var *v;
    if (rc != 0)
        return rc;
    if ((rc = vf__var_lookup(&e->vars, h, &v)) != 0)
        return rc == VF_ESTALE ? already_deleted(who, h)
                               : lookup_failed(who, h, rc);
    vf__bulk_flush_all(e); /* a batch may name the var (bulk.h) */
    /* Pushed from inside an op: it stands within that op's run, after
     * what the op pushed so far (family.h: deletes from inside). */
    vf__op *parent = vf__current_op();
    vf__family *from = NULL;
    /* A free callback's delete (its parent a delete, whose place is the
     * last one taken: another op's) stands where that delete does, as
     * one from outside (a family made with that place stood for the
     * other op: found by the reviewer). */
    if (parent != NULL && vf__op_engine(parent) == e &&
        parent->def->property != VF_PROP_DELETE_VAR &&
        (from = vf__push_family_of_run(parent)) == NULL)
        return vf__fail(VF_ENOMEM, "%s: out of memory", who);
    const vf__opdef *def = delete_def(e, &vf__kind_delete);
    vf__op *op = def != NULL ? vf__op_alloc(1) : NULL;
    if (op == NULL)
        return vf__fail(VF_ENOMEM, "%s: out of memory", who);
    vf__op_stage_vars(
        op,
        &(vf__varref){.var = v, .gen = vf__var_handle_gen(h), .write = true});
    op->def = def;
    op->free_fn = free_fn;
    op->arg = free_arg;
    op->delete_gen = vf__var_handle_gen(h);
    op->done = NULL;
    op->name = "vf_var_destroy";
    op->priority = INT_MAX; /* jumps the ready queue: frees memory early */
    /* It never fails nor skips: it needs no number of its own, only a
     * place after the ops pushed before it (failure.h). */
    op->place = vf__push_wait_place(e);
    op->nest = vf__push_nest(e);
    op->delete_from = from;
    if (from != NULL)
        vf__family_ref(from);
    if ((rc = vf__push_enqueue_delete(e, op, who)) != 0) {
        vf__family_unref(op->delete_from);
        op->delete_from = NULL;
        vf__op_free(op);
        /* The op names h alone: a delete of it was pushed first (before
         * this call, or by another thread since the lookup). */
        return rc == VF_ESTALE ? already_deleted(who, h) : rc;
    }
    vf__addr_vars_destroyed(e, h); /* made by vf_var_of: see addr_vars.h */
    return 0;
}

VF_API int vf_var_destroy(vf_engine *e, vf_var h, void (*free_fn)(void *),
                          void *free_arg)
{
    static const char who[] = "vf_var_destroy";
    return VF__GUARDED(e, who, var_destroy(e, h, free_fn, free_arg, who));
}

static int var_version(vf_engine *e, vf_var h, uint64_t *out, const char *who)
{
    if (out == NULL)
        return vf__fail(VF_EINVAL, "%s: out is NULL", who);
    vf__var *v;
    int rc = lookup(e, who, h, &v);
    if (rc != 0)
        return rc;
    vf__spin_lock(&v->lock);
    /* A delete held by a stopped engine refuses the handle already, as
     * pushes are (var.h: delete_held). */
    bool usable = vf__var_nameable(v, vf__var_handle_gen(h));
    /* A slot revived for h whose old delete has not run yet, or a var
     * whose held delete h was kept through: none of h's writes has
     * finished (version_old, kept_deletes). */
    *out = v->version_old || v->kept_deletes != 0
               ? 0
               : atomic_load_explicit(&v->version, memory_order_relaxed);
    vf__spin_unlock(&v->lock);
    if (!usable)
        return vf__fail(VF_ESTALE, "%s: variable was deleted", who);
    return 0;
}

VF_API int vf_var_version(vf_engine *e, vf_var h, uint64_t *out)
{
    static const char who[] = "vf_var_version";
    /* In a child where the engine runs nothing, a var's lock may be held by a
     * thread the child lacks (found by a reviewer: the call spun for ever,
     * 1 child in 7). */
    return VF__GUARDED_LIVE(e, who, var_version(e, h, out, who));
}
