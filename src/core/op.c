/* op.c: op blocks, var sets in normal form, op definitions (see op.h). */
#include "core/op.h"

#include <inttypes.h>

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/ref.h"
#include "core/arg.h"
#include "core/engine.h"
#include "core/freelist.h"
#include "core/var.h"

_Static_assert(VF__FL_OP_LAST == VF__FL_OP + VF__OP_LISTED_VARS,
               "a free list per listed var count");

/* Entry slots an op with n vars takes: the first run, then runs of
 * VF__DEP_RUN - 1 entries after a back slot each (op.h). */
static size_t dep_slots(int n)
{
    if (n <= VF__DEP_RUN)
        return (size_t)n;
    size_t rest = (size_t)(n - VF__DEP_RUN);
    size_t runs = rest / (VF__DEP_RUN - 1), left = rest % (VF__DEP_RUN - 1);
    return VF__DEP_RUN + runs * VF__DEP_RUN + (left ? left + 1 : 0);
}

size_t vf__op_block_size(int nvars)
{
    return sizeof(vf__op) + dep_slots(nvars) * sizeof(vf__dep);
}

vf__dep *vf__op_dep_far(const vf__op *op, int i)
{
    int j = i - VF__DEP_RUN;
    return (vf__dep *)&op
        ->deps[VF__DEP_RUN + (j / (VF__DEP_RUN - 1)) * VF__DEP_RUN + 1 +
               j % (VF__DEP_RUN - 1)];
}

vf__op *vf__dep_op_far(const vf__dep *d)
{
    const vf__dep *back = d - ((d->var_w >> 2) & (VF__DEP_RUN - 1));
    return (vf__op *)back->var_w;
}

/* A fresh block for `nvars` entries and `room` more for an argument. */
static inline __attribute__((always_inline)) vf__op *alloc_block(int nvars,
                                                                 int room)
{
    vf__op *op = nvars + room <= VF__OP_LISTED_VARS
                     ? vf__fl_alloc(VF__FL_OP + nvars + room)
                     : vf__malloc(vf__op_block_size(nvars));
    if (op == NULL)
        return NULL;
    vf__op_init_header(op, nvars, room);
    return op;
}

vf__op *vf__op_alloc(int nvars)
{
    return alloc_block(nvars, 0);
}

vf__op *vf__op_alloc_arg(int nvars, size_t arg_size)
{
    if (arg_size == 0)
        return alloc_block(nvars, 0);
    return alloc_block(nvars, nvars <= VF__OP_LISTED_VARS
                                  ? vf__op_arg_room(nvars, arg_size)
                                  : 0);
}

void vf__op_stage_var_far(vf__op *op, int i, const vf__varref *ref)
{
    vf__dep *d = vf__op_dep_far(op, i);
    uintptr_t index = (uintptr_t)(i - VF__DEP_RUN) % (VF__DEP_RUN - 1) + 1;
    d[-(intptr_t)index].var_w = (uintptr_t)op; /* its run's back slot */
    d->var_w = (uintptr_t)ref->var | index << 2 | VF__DEP_FAR |
               (ref->write ? VF__DEP_WRITE : 0);
    d->gen = ref->gen;
}

int vf__op_copy_arg_apart(vf__op *op, const char *who, const void *arg,
                          size_t size)
{
    int rc = vf__arg_check(who, arg, size);
    if (rc != 0)
        return rc;
    VF__ASSERT(op->argcopy == VF__ARG_NONE);
    vf__argcopy c;
    if (!vf__argcopy_make(&c, arg, size))
        return vf__fail(VF_ENOMEM,
                        "%s: out of memory for a %zu-byte "
                        "argument",
                        who, size);
    op->arg = c.ptr;
    op->argcopy = vf__argcopy_origin(&c);
    return 0;
}

/* What an op block may hold besides itself: a profile record, a failure,
 * a family (family.h), a side block (a device op's run, an async op's
 * message; a waiter is its wait's to free), a copied argument, an argument
 * its kind frees (a batch). */
static inline void free_held(vf__op *op)
{
    const vf__opdef *def = op->def;
    if (op->prof != NULL)
        vf__prof_op_dropped(op->prof);
    if (op->failure != NULL)
        vf__failure_unref(op->failure);
    if (op->up != NULL)
        vf__family_unref(op->up);
    if (((uintptr_t)op->waiter | (op->argcopy % VF__ARG_ROOM)) != 0) {
        if (def != NULL && def->kind->free_side != NULL)
            def->kind->free_side(op);
        if (op->argcopy == VF__ARG_KIND)
            def->kind->free_arg(op->arg);
        else
            vf__argcopy_free_origin(op->arg, op->argcopy);
    }
}

/* Give the block back to where it came from: the free list of its class
 * (its entries and its argument's room, op.h), or malloc's. */
static inline void free_block(vf__op *op, int room)
{
    if (op->nvars + room <= VF__OP_LISTED_VARS)
        vf__fl_free(VF__FL_OP + op->nvars + room, op);
    else
        free(op);
}

/* vf__op_free of an op that holds more than its block (free_held). */
static __attribute__((noinline)) void free_holding(vf__op *op)
{
    free_held(op);
    const vf__opdef *def = op->def;
    if (def != NULL && def->opr != NULL)
        vf__operator_unref(def->opr);
    free_block(op, op->argcopy / VF__ARG_ROOM);
}

void vf__op_free(vf__op *op)
{
    /* The rare cases (a child's family, an argument copied apart among
     * them), one test on the hot path; an argument copied into the block
     * itself (argcopy a multiple of VF__ARG_ROOM) goes with the block. */
    if (VF__UNLIKELY(((uintptr_t)op->prof | (uintptr_t)op->failure |
                      (uintptr_t)op->up | (uintptr_t)op->waiter |
                      (op->argcopy % VF__ARG_ROOM)) != 0)) {
        free_holding(op);
        return;
    }
    const vf__opdef *def = op->def;
    if (def != NULL && def->opr != NULL)
        vf__operator_unref(def->opr);
    free_block(op, op->argcopy / VF__ARG_ROOM);
}

/* --- var sets ---------------------------------------------------------- */

static int check_list(const char *who, const char *what, vf_var_list l)
{
    if (l.count < 0)
        return vf__fail(VF_EINVAL, "%s: %s.count is negative (%d)", who, what,
                        l.count);
    if (l.count > 0 && l.vars == NULL)
        return vf__fail(VF_EINVAL, "%s: %s.vars is NULL with count %d", who,
                        what, l.count);
    return 0;
}

const char *vf__bad_handle_words(int rc, vf_var h)
{
    /* A handle's tag names its engine: one no live engine holds says the
     * handle is of none (found trying made-up handles as a user: each was
     * said to belong to another engine, with one engine in the process). */
    if (rc == VF_EXDEV)
        return vf__engine_tag_taken(vf__var_handle_tag(h))
                   ? "belongs to another engine"
                   : "is no live engine's (its engine was destroyed, or "
                     "vf_var_create never gave it)";
    return rc == VF_ESTALE ? "was deleted (or vf_var_create never gave it)"
                           : "is not a variable handle";
}

/* A handle that did not resolve: the call's detail (out of line, so the
 * hot path does not pay for choosing the words). */
static __attribute__((noinline, cold)) int
bad_handle(int rc, const char *who, const char *what, int i, vf_var h)
{
    return vf__fail(rc, "%s: %s[%d] (id %#llx) %s", who, what, i,
                    (unsigned long long)h.id, vf__bad_handle_words(rc, h));
}

/* `name` quoted into buf[size] (at least 6: `op ""` and its end), cut
 * between UTF-8 characters to fit, its closing quote kept (cut at a byte,
 * a long name lost its quote and could end in part of a character). */
static const char *quoted_name(const char *name, char *buf, size_t size)
{
    memcpy(buf, "op \"", 4);
    vf__name_fit(buf + 4, size - 5, name);
    size_t len = strlen(buf);
    memcpy(buf + len, "\"", 2);
    return buf;
}

/* How a detail names an op at push time: its name, or "an unnamed op"
 * (the "op #<place>" of later messages has no place yet: a refused push
 * takes none). `buf` holds the quoted form. */
static const char *op_words(const char *name, char *buf, size_t size)
{
    if (name == NULL || *name == '\0')
        return "an unnamed op";
    return quoted_name(name, buf, size);
}

const char *vf__op_label(const char *name, uint64_t place,
                         char buf[VF__OP_LABEL_MAX])
{
    if (name != NULL && *name != '\0')
        quoted_name(name, buf, VF__OP_LABEL_MAX);
    else if (place != 0)
        snprintf(buf, VF__OP_LABEL_MAX, "op #%" PRIu64, place);
    else
        snprintf(buf, VF__OP_LABEL_MAX, "an unnamed op");
    return buf;
}

int vf__fail_deleted(vf_engine *e, const char *who, const char *name,
                     const vf__var *v, uint32_t gen)
{
    char buf[96];
    return vf__fail(VF_ESTALE,
                    "%s: a variable (id %#llx) was deleted (its "
                    "vf_var_destroy was pushed before this call, for %s), "
                    "or is no handle vf_var_create gave",
                    who,
                    (unsigned long long)vf__var_handle(&e->vars, v, gen).id,
                    op_words(name, buf, sizeof buf));
}

/* Is the var `h` names deleted, its delete pushed or run? */
static bool deleted_now(vf_engine *e, vf_var h)
{
    vf__var *v;
    int rc = vf__var_lookup(&e->vars, h, &v);
    if (rc != 0)
        return rc == VF_ESTALE;
    vf__spin_lock(&v->lock);
    bool usable = vf__var_usable(v, vf__var_handle_gen(h));
    vf__spin_unlock(&v->lock);
    return !usable;
}

int vf__varset_deleted(vf_engine *e, const char *who, const char *name,
                       vf_var_list reads, vf_var_list writes, const vf__var *v,
                       uint32_t gen)
{
    for (int w = 0; w < 2; w++) {
        vf_var_list l = w ? writes : reads;
        for (int i = 0; i < l.count; i++) {
            if (deleted_now(e, l.vars[i])) {
                char buf[96];
                return vf__fail(VF_ESTALE,
                                "%s: %s[%d] (id %#llx) was deleted (its "
                                "vf_var_destroy was pushed before this "
                                "call, for %s), or is no handle "
                                "vf_var_create gave",
                                who, w ? "writes" : "reads", i,
                                (unsigned long long)l.vars[i].id,
                                op_words(name, buf, sizeof buf));
            }
        }
    }
    return vf__fail_deleted(e, who, name, v, gen);
}

/* vf__var_lookup refused `h` with `rc`: unless it is a stale handle
 * named by a push from inside an op, whose var vf_var_of may have revived
 * since while its delete is still to run (var.h: vf__var_delete_pending):
 * a child of an op pushed before that delete may yet go ahead of it. The
 * push decides that under the var's lock (push.c: child_passes_delete);
 * every other use of the set looks again there too. Refused here, such a
 * child was lost (VF_ESTALE; found by a user tester's differential of
 * vf_var_of programs). Out of line: the lookup that succeeds pays nothing
 * for it. 0 (*out filled) when it is let through. */
static __attribute__((noinline)) int refused(int rc, const char *who,
                                             const char *what, int i, vf_var h,
                                             vf__varref *out)
{
    /* Its engine is the running op's: a child goes ahead of nothing on
     * another engine (push.c: child_passes_delete). */
    const vf__op *cur = vf__current_op();
    vf__var_table *t = cur != NULL ? &vf__op_engine(cur)->vars : NULL;
    if (rc == VF_ESTALE && t != NULL && vf__var_handle_tag(h) == t->tag) {
        vf__var *v = vf__var_slot(t, h);
        vf__spin_lock(&v->lock);
        bool pending = vf__var_delete_pending(v, vf__var_handle_gen(h));
        vf__spin_unlock(&v->lock);
        if (pending) {
            out->var = v;
            out->gen = vf__var_handle_gen(h);
            return 0;
        }
    }
    return bad_handle(rc, who, what, i, h);
}

static int resolve(vf_engine *e, const char *who, const char *what, int i,
                   vf_var h, vf__varref *out)
{
    int rc = vf__var_lookup(&e->vars, h, &out->var);
    if (VF__UNLIKELY(rc != 0))
        return refused(rc, who, what, i, h, out); /* 0: let through */
    out->gen = vf__var_handle_gen(h);
    return 0;
}

/*
 * Normal form: sorted by var address, each var once, a write if any use of
 * it writes. Nearly every op names a few vars, and for those an insertion
 * sort is the cheapest there is. A larger set is merge-sorted, O(n log n)
 * whatever order it comes in (insertion is quadratic: 21 s for 200,000
 * vars, and vars made one after another need not lie in address order:
 * the var table's chunks are separate blocks, often in descending order),
 * after one linear look that spares a set in order already the sort and
 * its scratch memory. Duplicates are then side by side and merged in one
 * pass.
 */
#define SMALL_SET 16

static inline bool addr_before(const vf__varref *a, const vf__varref *b)
{
    return (uintptr_t)a->var < (uintptr_t)b->var;
}

static void insertion_sort(vf__varref *v, int n)
{
    for (int i = 1; i < n; i++) {
        vf__varref x = v[i];
        int j = i - 1;
        while (j >= 0 && addr_before(&x, &v[j])) {
            v[j + 1] = v[j];
            j--;
        }
        v[j + 1] = x;
    }
}

/* Sort v[0, n) by address; `tmp` has room for n / 2 refs. */
static void merge_sort(vf__varref *v, int n, vf__varref *tmp)
{
    if (n <= SMALL_SET) {
        insertion_sort(v, n);
        return;
    }
    int h = n / 2;
    merge_sort(v, h, tmp);
    merge_sort(v + h, n - h, tmp);
    if (!addr_before(&v[h], &v[h - 1]))
        return; /* the halves are in order already */
    /* The left half moves aside; the merge fills v from the front and
     * never overtakes the right half's next unmerged ref (k < j). */
    memcpy(tmp, v, (size_t)h * sizeof *v);
    int i = 0, j = h, k = 0;
    while (i < h && j < n)
        v[k++] = addr_before(&v[j], &tmp[i]) ? v[j++] : tmp[i++];
    while (i < h)
        v[k++] = tmp[i++];
}

/* Put v[0, n) in normal form; the new count, or VF_ENOMEM (the caller
 * sets the detail) for a large unsorted set without memory to sort. */
static int normalize(vf__varref *v, int n)
{
    if (VF__LIKELY(n <= SMALL_SET)) {
        if (n < 2)
            return n; /* the common one-var op */
        insertion_sort(v, n);
    } else {
        int i = 1;
        while (i < n && !addr_before(&v[i], &v[i - 1]))
            i++;
        if (i < n) {
            vf__varref *tmp = vf__malloc((size_t)(n / 2) * sizeof *tmp);
            if (tmp == NULL)
                return VF_ENOMEM;
            merge_sort(v, n, tmp);
            free(tmp);
        }
    }
    int m = 1; /* n >= 2 here */
    for (int i = 1; i < n; i++) {
        if (v[m - 1].var == v[i].var)
            v[m - 1].write |= v[i].write;
        else
            v[m++] = v[i];
    }
    return m;
}

int vf__varset_build(vf_engine *e, const char *who, vf_var_list reads,
                     vf_var_list writes, vf__varref *out, int cap,
                     vf__varref **heap)
{
    int rc;
    *heap = NULL;
    if ((rc = check_list(who, "reads", reads)) != 0 ||
        (rc = check_list(who, "writes", writes)) != 0)
        return rc;
    long total = (long)reads.count + writes.count;
    if (total > VF_MAX_OP_VARS)
        return vf__fail(VF_EINVAL,
                        "%s: %ld variables in one op (reads.count "
                        "%d + writes.count %d; the limit is "
                        "VF_MAX_OP_VARS, %d)",
                        who, total, reads.count, writes.count, VF_MAX_OP_VARS);
    vf__varref *v = out;
    if (total > cap) {
        v = vf__malloc((size_t)total * sizeof *v);
        if (v == NULL)
            return vf__fail(VF_ENOMEM, "%s: out of memory for %ld variables",
                            who, total);
        *heap = v;
    }
    int n = 0;
    for (int i = 0; i < reads.count; i++, n++) {
        if ((rc = resolve(e, who, "reads", i, reads.vars[i], &v[n])) != 0)
            goto fail;
        v[n].write = false;
    }
    for (int i = 0; i < writes.count; i++, n++) {
        if ((rc = resolve(e, who, "writes", i, writes.vars[i], &v[n])) != 0)
            goto fail;
        v[n].write = true;
    }
    if ((rc = normalize(v, n)) >= 0)
        return rc;
    rc = vf__fail(VF_ENOMEM, "%s: out of memory sorting %d variables", who, n);
fail:
    free(*heap);
    *heap = NULL;
    return rc;
}

/* --- definitions ------------------------------------------------------- */

/* The checks of a device's first op that its caller makes after routing
 * it (its variables, its argument's size): routing makes the device's
 * threads and streams, which stay (and turn the engine's CPU graph
 * replay off), so an op refused must be refused before (found by an
 * auditor: a push refused for a stale var made them). Its caller checks
 * them again: this costs only the device's first ops. */
static int device_first_op_check(vf_engine *e, const char *who, const vf_op *op)
{
    vf__varref none, *heap = NULL;
    int rc = vf__varset_build(e, who, op->reads, op->writes, &none, 0, &heap);
    free(heap);
    if (rc < 0)
        return rc;
    return vf__arg_check(who, op->arg, op->arg_size);
}

/* Which pool runs an op of this device and property; NULL: inline. */
static int route(vf_engine *e, const char *who, const vf_op *op,
                 vf__pool **pool)
{
    if (op->device.type != VF_DEVICE_CPU) {
        char buf[VF__OP_LABEL_MAX];
        if (op->async_fn != NULL)
            return vf__fail(VF_ENOTSUP,
                            "%s: %s on a device must be a sync fn (it puts "
                            "its work on its stream: vf_run_submit)",
                            who, op_words(op->name, buf, sizeof buf));
        vf__devctx *made;
        int rc = vf__device_check(e, who, op->device, op->property, &made);
        if (rc == 0 && made == NULL)
            rc = device_first_op_check(e, who, op);
        if (rc != 0)
            return rc;
        return vf__device_route(e, who, op->device, op->property, made, pool);
    }
    if (op->device.id != 0)
        return vf__fail(VF_ENODEV, "%s: CPU device id %d (only 0 exists)", who,
                        op->device.id);
    switch (op->property) {
    case VF_PROP_NORMAL:
    case VF_PROP_DELETE_VAR:
    case VF_PROP_DEVICE_PRIORITIZED: /* a CPU op: the device is the CPU */
        *pool = e->cpu_pool;
        return 0;
    case VF_PROP_CPU_PRIORITIZED:
        *pool = e->priority_pool ? e->priority_pool : e->cpu_pool;
        return 0;
    case VF_PROP_COPY_TO_DEVICE:
    case VF_PROP_COPY_FROM_DEVICE:
        return vf__fail(VF_EINVAL,
                        "%s: a copy to or from a device names "
                        "that device in op.device (not the CPU)",
                        who);
    }
    return vf__fail(VF_EINVAL, "%s: unknown property %d", who,
                    (int)op->property);
}

int vf__opdef_fill(vf_engine *e, const char *who, const vf_op *op,
                   vf__opdef *def)
{
    char buf[VF__OP_LABEL_MAX];
    if (op == NULL)
        return vf__fail(VF_EINVAL, "%s: op is NULL", who);
    if ((op->fn == NULL) == (op->async_fn == NULL))
        return vf__fail(VF_EINVAL,
                        "%s: set exactly one of fn and async_fn (%s)", who,
                        op_words(op->name, buf, sizeof buf));
    vf__pool *pool = NULL;
    int rc = route(e, who, op, &pool);
    if (rc != 0)
        return rc;
    def->engine = e;
    def->opr = NULL;
    def->fn = op->fn;
    def->async_fn = op->async_fn;
    def->async = op->async_fn != NULL;
    def->arg = op->arg;
    def->done = op->done;
    def->name = op->name ? op->name : "";
    def->next_shared = NULL;
    def->device = op->device;
    def->property = op->property;
    def->no_skip = op->no_skip;
    def->nonblocking = op->nonblocking;
    def->kind = op->device.type == VF_DEVICE_CPU ? &vf__kind_user
                                                 : &vf__kind_device;
    def->pool = pool;
    def->devctx = op->device.type == VF_DEVICE_CPU
                      ? NULL
                      : vf__device_of(e, op->device);
    def->inline_run = pool == NULL || op->async_fn != NULL;
    return 0;
}

/* Blocks of freed operators: never handed back to malloc, so that a call
 * on a destroyed operator's handle reads a block marked spent and is
 * refused (it read freed memory: found going over last stop's open
 * points), until a new operator takes the block (the handle then names
 * that one, as an engine's does a new engine at its address). A
 * lock-free stack: an operator is freed by the finish of its last run, on
 * any thread, in a child forked at any point too. Blocks are taken off it
 * one taker at a time (`taking`), so no block leaves and comes back under
 * a taker's feet (the stack's ABA); a creator that finds another taking,
 * or the flag left set by a fork, allocates a new block. */
static _Atomic(vf_operator *) spent;
static atomic_flag taking = ATOMIC_FLAG_INIT;

/* Mark a block no operator's any more (`magic`) and push it on `list`, a
 * lock-free stack (spent, or retired below). */
static void block_keep(_Atomic(vf_operator *) *list, vf_operator *opr,
                       uint32_t magic)
{
    atomic_store_explicit(&opr->magic, magic, memory_order_relaxed);
    vf_operator *head = atomic_load_explicit(list, memory_order_relaxed);
    do
        opr->next_live = head;
    while (!atomic_compare_exchange_weak_explicit(
        list, &head, opr, memory_order_release, memory_order_relaxed));
}

void vf__operator_block_spend(vf_operator *opr)
{
    block_keep(&spent, opr, VF__OPERATOR_SPENT);
}

/* vf__operator_block zeroes a taken block from `engine` to `refs` and
 * from `def` to its end, leaving the atomics between. */
_Static_assert(offsetof(vf_operator, magic) < offsetof(vf_operator, engine) &&
                   offsetof(vf_operator, engine) <
                       offsetof(vf_operator, refs) &&
                   offsetof(vf_operator, refs) <
                       offsetof(vf_operator, deleted) &&
                   offsetof(vf_operator, deleted) < offsetof(vf_operator, def),
               "vf_operator's atomics sit between its zeroed ranges");

vf_operator *vf__operator_block(void)
{
    vf_operator *opr = NULL;
    if (atomic_load_explicit(&spent, memory_order_relaxed) != NULL &&
        !atomic_flag_test_and_set_explicit(&taking, memory_order_acquire)) {
        opr = atomic_load_explicit(&spent, memory_order_acquire);
        while (opr != NULL && !atomic_compare_exchange_weak_explicit(
                                  &spent, &opr, opr->next_live,
                                  memory_order_acquire, memory_order_acquire)) {
        }
        atomic_flag_clear_explicit(&taking, memory_order_release);
    }
    if (opr == NULL)
        return vf__calloc(1, sizeof *opr);
    /* All but its magic (SPENT) and refs (0), which a push on a stale
     * handle to it may read meanwhile (the create publishes them last:
     * push.c), and `deleted` (the create stores it). */
    memset(&opr->engine, 0,
           offsetof(vf_operator, refs) - offsetof(vf_operator, engine));
    memset(&opr->def, 0, sizeof *opr - offsetof(vf_operator, def));
    return opr;
}

static void operator_free(vf_operator *opr)
{
    free(opr->vars);
    opr->vars = NULL;
    vf__argcopy_free(&opr->argcopy);
    vf__operator_block_spend(opr);
}

void vf__operator_list(vf_operator *opr)
{
    vf__operators *ops = &opr->engine->operators;
    pthread_mutex_lock(&ops->lock);
    opr->prev_live = NULL;
    opr->next_live = ops->head;
    if (ops->head != NULL)
        ops->head->prev_live = opr;
    ops->head = opr;
    pthread_mutex_unlock(&ops->lock);
}

void vf__operator_unref(vf_operator *opr)
{
    if (!vf__ref_drop(&opr->refs))
        return;
    vf__operators *ops = &opr->engine->operators;
    pthread_mutex_lock(&ops->lock);
    if (opr->prev_live != NULL)
        opr->prev_live->next_live = opr->next_live;
    else
        ops->head = opr->next_live;
    if (opr->next_live != NULL)
        opr->next_live->prev_live = opr->prev_live;
    pthread_mutex_unlock(&ops->lock);
    operator_free(opr);
}

/* Operators left undestroyed at their engine's destroy, retired: each
 * block stays for the life of the process (reachable from here), marked,
 * so that a call on its handle is refused rather than read freed memory
 * (a C++ reusable_op outliving its engine, another engine made at the
 * same address since: found trying the C++ API as a user). A lock-free
 * list: an engine's destroy may run in a child forked at any point. */
static _Atomic(vf_operator *) retired;

static void operator_retire(vf_operator *opr)
{
    free(opr->vars);
    opr->vars = NULL;
    vf__argcopy_free(&opr->argcopy);
    opr->engine = NULL;
    block_keep(&retired, opr, VF__OPERATOR_RETIRED);
}

uint64_t vf__operators_retire_all(vf__operators *ops)
{
    uint64_t n = 0;
    pthread_mutex_lock(&ops->lock);
    vf_operator *opr = ops->head;
    ops->head = NULL;
    pthread_mutex_unlock(&ops->lock);
    while (opr != NULL) {
        vf_operator *next = opr->next_live;
        operator_retire(opr);
        opr = next;
        n++;
    }
    return n;
}
