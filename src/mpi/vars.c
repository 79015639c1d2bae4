/*
 * vars.c: the records of distributed variables.
 *
 * A record is found from the engine's handle through a hash map on the
 * handle's id (base/hashmap.h, compiled into this library too), under
 * data_lock: the pushing thread adds records, the engine's delete ops
 * remove them on the workers, and ops look up their buffers. Records
 * themselves never move, so a buffer pointer read once stays good until
 * the variable is deleted.
 *
 * Which ranks hold a variable's current value is a bitset of `words`
 * 64-bit words, inline for up to 64 ranks.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpi/mpi_internal.h"

void vf__mpi_vars_init(vf__mpi *ctx)
{
    vf__hashmap_init(&ctx->records, NULL);
}

vf__mpi_var *vf__mpi_var_find(vf__mpi *ctx, vf_var v)
{
    uint64_t *mv = vf__hashmap_find(&ctx->records, v.id);
    return mv != NULL ? (vf__mpi_var *)(uintptr_t)*mv : NULL;
}

bool vf__mpi_core_deleted(const vf__mpi *ctx, vf_var v)
{
    uint64_t version;
    return vf_var_version(ctx->engine, v, &version) == VF_ESTALE;
}

vf__mpi_var *vf__mpi_var_live(vf__mpi *ctx, vf_var v, const char *caller,
                              const char *what, int *rc)
{
    /* The engine's delete op frees a deleted variable's record on a
     * worker, under data_lock: look and read `deleted` under it too. A
     * record not deleted stays (only a delete frees it, and deletes are
     * this thread's). The record goes sooner on one rank than another,
     * but the handle stays stale, so every rank says the same. */
    pthread_mutex_lock(&ctx->data_lock);
    vf__mpi_var *mv = vf__mpi_var_find(ctx, v);
    bool deleted = mv != NULL && mv->deleted;
    pthread_mutex_unlock(&ctx->data_lock);
    if (deleted || vf__mpi_core_deleted(ctx, v)) {
        /* A record not deleted whose handle is stale: the core's
         * vf_var_destroy deleted it, on every rank alike where the
         * program is the same (found trying MPI as a user: the next push
         * cut the flow, and every later call failed). */
        *rc = vf__mpi_error(VF_ESTALE,
                            mv != NULL && !deleted
                                ? "%s: %s was deleted with vf_var_destroy (a "
                                  "distributed variable is deleted with "
                                  "vf_mpi_var_destroy, in sequence)"
                                : "%s: %s: the variable was deleted",
                            caller, what);
        return NULL;
    }
    if (mv == NULL)
        *rc = vf__mpi_error(VF_EINVAL,
                            "%s: %s is not a distributed variable of this "
                            "engine (make it with vf_mpi_var_create)",
                            caller, what);
    return mv;
}

/* Adds a new record to the map (data_lock held): 0 or VF_ENOMEM. */
static int table_add(vf__mpi *ctx, vf__mpi_var *mv)
{
    int rc = vf__hashmap_put(&ctx->records, mv->var.id, (uint64_t)(uintptr_t)mv,
                             NULL);
    return rc < 0 ? rc : 0; /* 1 cannot be: the id is a new variable's */
}

static void table_remove(vf__mpi *ctx, vf__mpi_var *mv)
{
    vf__hashmap_remove(&ctx->records, mv->var.id);
}

bool vf__mpi_valid_at(const vf__mpi_var *mv, int rank)
{
    return (mv->valid[rank / 64] >> (rank % 64)) & 1u;
}

void vf__mpi_valid_add(vf__mpi_var *mv, int rank)
{
    mv->valid[rank / 64] |= 1ull << (rank % 64);
}

void vf__mpi_valid_only(const vf__mpi *ctx, vf__mpi_var *mv, int rank)
{
    memset(mv->valid, 0, sizeof *mv->valid * (size_t)ctx->words);
    vf__mpi_valid_add(mv, rank);
    mv->holder = rank;
}

static void var_record_free(vf__mpi_var *mv)
{
    if (mv->valid != &mv->valid_inline)
        free(mv->valid);
    free(mv);
}

int vf__mpi_var_buffer(vf__mpi *ctx, vf__mpi_var *mv)
{
    if (mv->buf != NULL)
        return 0;
    void *cache = malloc(mv->size);
    if (cache == NULL)
        return vf__mpi_error(VF_ENOMEM,
                             "varflow-mpi: no memory for a copy of "
                             "variable %llu (%zu bytes)",
                             (unsigned long long)mv->index, mv->size);
    pthread_mutex_lock(&ctx->data_lock);
    mv->cache = cache;
    mv->buf = cache;
    pthread_mutex_unlock(&ctx->data_lock);
    return 0;
}

/* Make one record and its engine variable; the caller adds it. */
static int var_make(vf__mpi *ctx, void *ptr, size_t size, int owner,
                    vf__mpi_var **out)
{
    vf__mpi_var *mv = calloc(1, sizeof *mv);
    if (mv == NULL)
        return VF_ENOMEM;
    mv->valid = &mv->valid_inline;
    if (ctx->words > 1 &&
        (mv->valid = calloc((size_t)ctx->words, sizeof *mv->valid)) == NULL) {
        free(mv);
        return VF_ENOMEM;
    }
    int rc = vf_var_create(ctx->engine, &mv->var);
    if (rc != 0) {
        var_record_free(mv);
        return rc;
    }
    mv->ctx = ctx;
    mv->size = size;
    mv->owner = owner;
    mv->holder = owner;
    mv->buf = ptr;
    vf__mpi_valid_add(mv, owner);
    *out = mv;
    return 0;
}

/* A new variable's arguments; `index` names it in the message, -1 for a
 * variable made alone (vf_mpi_var_create). */
static int check_new(const vf__mpi *ctx, const char *caller, size_t size,
                     int owner, const void *ptr, int index)
{
    char which[48] = "";
    if (index >= 0)
        snprintf(which, sizeof which, " of variable %d", index);
    if (size == 0 || size > INT_MAX - sizeof(vf__mpi_header))
        return vf__mpi_error(VF_EINVAL,
                             "%s: size %zu%s (must be 1 to %zu bytes: one "
                             "MPI message)",
                             caller, size, which,
                             (size_t)INT_MAX - sizeof(vf__mpi_header));
    if (owner < 0 || owner >= ctx->size)
        return vf__mpi_error(VF_EINVAL,
                             "%s: owner %d%s is not a rank (0 to %d)", caller,
                             owner, which, ctx->size - 1);
    if (owner == ctx->rank && ptr == NULL)
        return vf__mpi_error(VF_EINVAL, "%s: ptr%s is NULL on its owner",
                             caller, which);
    return 0;
}

/* vf_mpi_vars_create, or vf_mpi_var_create (`who`; `one`: its messages
 * name no variable index). */
static int vars_create(vf_engine *e, const char *who, bool one, vf_var *out,
                       int count, void *const *ptrs, size_t size,
                       vf_mpi_map_fn map, void *map_arg)
{
    vf__mpi *ctx = vf__mpi_of(e, who);
    if (ctx == NULL)
        return VF_EINVAL;
    /* From inside an op: refused before the arguments, which may differ
     * (an op's ptr on one rank), so that the answer is the same anywhere. */
    int rc = vf__mpi_check_thread(ctx, who);
    if (rc != 0)
        return rc;
    if (out == NULL || count < 0 || (count > 0 && map == NULL))
        return vf__mpi_error(VF_EINVAL, "%s: %s", who,
                             out == NULL ? "out is NULL"
                             : count < 0 ? "count is negative"
                                         : "map is NULL");
    int *owners = malloc(sizeof *owners * (size_t)(count ? count : 1));
    vf__mpi_var **made = calloc((size_t)(count ? count : 1), sizeof *made);
    rc = owners && made ? 0
                        : vf__mpi_error(VF_ENOMEM, "%s: out of memory", who);
    for (int i = 0; rc == 0 && i < count; i++) {
        owners[i] = map(i, map_arg);
        rc = check_new(ctx, who, size, owners[i], ptrs ? ptrs[i] : NULL,
                       one ? -1 : i);
    }
    bool entered = rc == 0 && (rc = vf__mpi_enter(ctx, who)) == 0;
    int n = 0; /* made and added */
    for (; rc == 0 && n < count; n++) {
        rc = var_make(ctx, ptrs ? ptrs[n] : NULL, size, owners[n], &made[n]);
        if (rc == 0) {
            pthread_mutex_lock(&ctx->data_lock);
            rc = table_add(ctx, made[n]);
            pthread_mutex_unlock(&ctx->data_lock);
            if (rc != 0) {
                vf_var_destroy(e, made[n]->var, NULL, NULL);
                var_record_free(made[n]);
            }
        }
        if (rc != 0) {
            rc = one ? vf__mpi_error(rc, "%s: %s", who, vf_error_string(rc))
                     : vf__mpi_error(rc, "%s: variable %d: %s", who, n,
                                     vf_error_string(rc));
            break;
        }
    }
    if (rc != 0) {
        pthread_mutex_lock(&ctx->data_lock);
        for (int i = 0; i < n; i++)
            table_remove(ctx, made[i]);
        pthread_mutex_unlock(&ctx->data_lock);
        for (int i = 0; i < n; i++) {
            vf_var_destroy(e, made[i]->var, NULL, NULL);
            var_record_free(made[i]);
        }
    } else {
        for (int i = 0; i < count; i++) {
            made[i]->index = ctx->next_index++;
            out[i] = made[i]->var;
        }
    }
    if (entered)
        vf__mpi_leave(ctx);
    free(owners);
    free(made);
    return rc;
}

VF_API int vf_mpi_vars_create(vf_engine *e, vf_var *out, int count,
                              void *const *ptrs, size_t size, vf_mpi_map_fn map,
                              void *map_arg)
{
    return vars_create(e, "vf_mpi_vars_create", false, out, count, ptrs, size,
                       map, map_arg);
}

static int single_owner(int index, void *arg)
{
    (void)index;
    return *(const int *)arg;
}

VF_API int vf_mpi_var_create(vf_engine *e, vf_var *out, void *ptr, size_t size,
                             int owner)
{
    return vars_create(e, "vf_mpi_var_create", true, out, 1, &ptr, size,
                       single_owner, &owner);
}

/* The body of the engine's delete op: every op pushed on the variable has
 * finished, so no op looks its record up any more, and the calls in
 * sequence refuse it (deleted) or, once it is gone, see a stale handle. */
static void record_delete(void *arg)
{
    vf__mpi_var *mv = arg;
    vf__mpi *ctx = mv->ctx;
    pthread_mutex_lock(&ctx->data_lock);
    table_remove(ctx, mv);
    pthread_mutex_unlock(&ctx->data_lock);
    free(mv->cache);
    var_record_free(mv);
}

VF_API int vf_mpi_var_destroy(vf_engine *e, vf_var v)
{
    vf__mpi *ctx = vf__mpi_of(e, "vf_mpi_var_destroy");
    if (ctx == NULL)
        return VF_EINVAL;
    int rc = vf__mpi_enter(ctx, "vf_mpi_var_destroy");
    if (rc != 0)
        return rc;
    vf__mpi_var *mv = vf__mpi_var_live(ctx, v, "vf_mpi_var_destroy", "v", &rc);
    if (mv == NULL)
        goto out;
    /* Its value home first, as vf_mpi_wait_all brings every one: the
     * owner's buffer, the caller's, then holds what the program last
     * wrote (found trying MPI as a user: written away, then deleted, it
     * was lost). Then out of the flow: once vf_var_destroy returned, the
     * delete op may have run and freed the record. */
    rc = vf__mpi_bring_home(ctx, mv, "vf_mpi_var_destroy");
    if (rc != 0)
        goto out;
    pthread_mutex_lock(&ctx->data_lock); /* any thread reads it there */
    mv->deleted = true;
    pthread_mutex_unlock(&ctx->data_lock);
    rc = vf_var_destroy(e, mv->var, record_delete, mv);
    if (rc != 0) { /* not pushed: as it was, its value home */
        pthread_mutex_lock(&ctx->data_lock);
        mv->deleted = false;
        pthread_mutex_unlock(&ctx->data_lock);
    }
out:
    vf__mpi_leave(ctx);
    return rc;
}

VF_API void *vf_mpi_data(vf_engine *e, vf_var v)
{
    vf__mpi *ctx = vf__mpi_of(e, "vf_mpi_data");
    if (ctx == NULL)
        return NULL;
    pthread_mutex_lock(&ctx->data_lock);
    vf__mpi_var *mv = vf__mpi_var_find(ctx, v);
    void *buf = mv ? mv->buf : NULL;
    uint64_t index = mv ? mv->index : 0;
    pthread_mutex_unlock(&ctx->data_lock);
    uint64_t version;
    if (mv == NULL && vf_var_version(e, v, &version) == VF_ESTALE)
        vf__mpi_error(VF_ESTALE, "vf_mpi_data: the variable was deleted");
    else if (mv == NULL)
        vf__mpi_error(VF_EINVAL, "vf_mpi_data: not a distributed variable "
                                 "of this engine");
    else if (buf == NULL)
        vf__mpi_error(VF_EINVAL,
                      "vf_mpi_data: the value of variable %llu "
                      "never came to rank %d",
                      (unsigned long long)index, ctx->rank);
    return buf;
}

VF_API int vf_mpi_var_owner(vf_engine *e, vf_var v)
{
    vf__mpi *ctx = vf__mpi_of(e, "vf_mpi_var_owner");
    if (ctx == NULL)
        return VF_EINVAL;
    /* Any thread may ask, while the record may go: read it under the
     * lock, then say why there is none. */
    pthread_mutex_lock(&ctx->data_lock);
    vf__mpi_var *mv = vf__mpi_var_find(ctx, v);
    int owner = mv != NULL && !mv->deleted ? mv->owner : -1;
    pthread_mutex_unlock(&ctx->data_lock);
    if (owner >= 0 && !vf__mpi_core_deleted(ctx, v))
        return owner;
    int rc = 0;
    vf__mpi_var *live = vf__mpi_var_live(ctx, v, "vf_mpi_var_owner", "v", &rc);
    if (live == NULL)
        return rc;
    /* A delete that failed cleared `deleted` meanwhile: it is there, unless
     * the pusher's thread deleted it since, and its delete op freed the
     * record: found again under the lock, never read through `live` (a
     * reviewer's finding). */
    pthread_mutex_lock(&ctx->data_lock);
    mv = vf__mpi_var_find(ctx, v);
    owner = mv != NULL && !mv->deleted ? mv->owner : -1;
    pthread_mutex_unlock(&ctx->data_lock);
    if (owner < 0)
        return vf__mpi_error(VF_ESTALE,
                             "vf_mpi_var_owner: v: the variable was deleted");
    return owner;
}

void vf__mpi_vars_free(vf__mpi *ctx)
{
    uint64_t value;
    for (size_t pos = 0; vf__hashmap_next(&ctx->records, &pos, NULL, &value);) {
        vf__mpi_var *mv = (vf__mpi_var *)(uintptr_t)value;
        /* The engine variable stays (the caller's to delete); the copy
         * we made goes now: vf_mpi_destroy waited for every op. */
        free(mv->cache);
        var_record_free(mv);
    }
    vf__hashmap_destroy(&ctx->records);
}

VF_API void vf_mpi_grid(int size, int *p, int *q)
{
    int best = 1;
    for (int d = 1; size > 0 && d <= size / d; d++)
        if (size % d == 0)
            best = d;
    if (p != NULL)
        *p = best;
    if (q != NULL)
        *q = size > 0 ? size / best : 1;
}

VF_API int vf_mpi_owner_2d(int size, int i, int j)
{
    if (size <= 0 || i < 0 || j < 0)
        return vf_error_set_detail(
            VF_EINVAL, "vf_mpi_owner_2d: size %d, tile (%d, %d)", size, i, j);
    int p, q;
    vf_mpi_grid(size, &p, &q);
    return (i % p) * q + (j % q);
}
