/* failure.c: failure records, their reserve and the engine's log (see
 * failure.h). */
#include "core/failure.h"

#include <inttypes.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "base/ref.h"

/* --- the reserve --------------------------------------------------------- */

static int reserve_init(vf__failure_reserve *r)
{
    if (pthread_mutex_init(&r->lock, NULL) != 0)
        return VF_ESYSTEM;
    r->head = NULL;
    r->count = 0;
    for (int i = 0; i < VF__FAILURE_RESERVE; i++) {
        vf__failure *f = vf__malloc(sizeof *f);
        if (f == NULL)
            return VF_ENOMEM; /* destroy frees what was made */
        f->next = r->head;
        r->head = f;
        r->count++;
    }
    return 0;
}

static void reserve_destroy(vf__failure_reserve *r)
{
    while (r->head != NULL) {
        vf__failure *next = r->head->next;
        free(r->head);
        r->head = next;
    }
    pthread_mutex_destroy(&r->lock);
}

/* A record from malloc, else from the reserve; NULL when both fail. */
static vf__failure *reserve_take(vf__failure_reserve *r)
{
    vf__failure *f = vf__malloc(sizeof *f);
    if (f != NULL)
        return f;
    pthread_mutex_lock(&r->lock);
    f = r->head;
    if (f != NULL) {
        r->head = f->next;
        r->count--;
    }
    pthread_mutex_unlock(&r->lock);
    return f;
}

_Atomic uint64_t vf__failure_claims;

void vf__failure_ref(vf__failure *f)
{
    atomic_fetch_add_explicit(&f->refs, 1, memory_order_relaxed);
}

void vf__failure_unref(vf__failure *f)
{
    if (f == NULL || !vf__ref_drop(&f->refs))
        return;
    vf__family_unref(f->up);
    if (vf__failure_claimed(f)) /* its last unref: the claim is complete */
        vf__family_unref(f->cleared_up);
    vf__failure_reserve *r = f->reserve;
    pthread_mutex_lock(&r->lock);
    bool keep = r->count < VF__FAILURE_RESERVE;
    if (keep) {
        f->next = r->head;
        r->head = f;
        r->count++;
    }
    pthread_mutex_unlock(&r->lock);
    if (!keep)
        free(f);
}

/* --- the log ------------------------------------------------------------- */

/* The fewest records listed at which the log looks for claimed ones. */
#define LOG_FIRST_LOOK 64

int vf__failure_log_init(vf__failure_log *log)
{
    log->head = log->tail = NULL;
    log->count = 0;
    log->look_at = LOG_FIRST_LOOK;
    if (pthread_mutex_init(&log->lock, NULL) != 0)
        return VF_ESYSTEM;
    return reserve_init(&log->reserve);
}

void vf__failure_log_destroy(vf__failure_log *log)
{
    vf__failure *f = log->head;
    while (f != NULL) {
        vf__failure *next = f->next;
        vf__failure_unref(f);
        f = next;
    }
    log->head = log->tail = NULL;
    log->count = 0;
    reserve_destroy(&log->reserve); /* after every unref */
    pthread_mutex_destroy(&log->lock);
}

size_t vf__failure_log_count(vf__failure_log *log)
{
    pthread_mutex_lock(&log->lock);
    size_t n = log->count;
    pthread_mutex_unlock(&log->lock);
    return n;
}

/* Under the log lock: the next look comes when the log has doubled. */
static void look_again_at_double(vf__failure_log *log)
{
    log->look_at = 2 * log->count > LOG_FIRST_LOOK ? 2 * log->count
                                                   : LOG_FIRST_LOOK;
}

/* Under the log lock: whether only the log holds the record, unreported.
 * Then no var, op or fence holds it and no wait can ever report it but
 * wait_all (a reference is taken only from a holder: the log's own is
 * given out only by vf__failure_log_record's join, which skips these). */
static bool log_only(vf__failure *f)
{
    return !vf__failure_claimed(f) &&
           atomic_load_explicit(&f->refs, memory_order_acquire) == 1;
}

/* Under the log lock, once the log doubled since it last looked: unlist
 * the records wait_all will never report, as a chain (linked by `next`)
 * for the caller to let go of outside the lock (unref takes the reserve's
 * lock): those a wait reported (claimed), and every record only the log
 * holds but the first in push order, which stays unreported till a
 * wait_all and comes before them in every wait_all that takes them (its
 * root is no later). They keep nothing inert by being cleared: no var
 * holds them. A look costs the records listed, and comes after as many
 * new ones: constant a record. (Two failures in one step of a service,
 * one reported through a var wait, the other's vars deleted, grew the
 * log by 430 bytes a step: found by two user testers.) */
static vf__failure *unlist_unreportable(vf__failure_log *log)
{
    if (log->count < log->look_at)
        return NULL;
    vf__failure *first_alone = NULL;
    for (vf__failure *f = log->head; f != NULL; f = f->next)
        if (log_only(f) && vf__failure_before(f, first_alone))
            first_alone = f;
    vf__failure *claimed = NULL, **link = &log->head;
    log->tail = NULL;
    while (*link != NULL) {
        vf__failure *f = *link;
        if (vf__failure_claimed(f) || (f != first_alone && log_only(f))) {
            *link = f->next;
            f->next = claimed;
            claimed = f;
            log->count--;
        } else {
            log->tail = f;
            link = &f->next;
        }
    }
    look_again_at_double(log);
    return claimed;
}

static void unref_chain(vf__failure *f)
{
    while (f != NULL) {
        vf__failure *next = f->next;
        f->next = NULL;
        vf__failure_unref(f);
        f = next;
    }
}

vf__failure *vf__failure_log_record(vf__failure_log *log, int code,
                                    const char *op_name, const char *message,
                                    uint64_t place, vf__family *up)
{
    vf__failure *f = reserve_take(&log->reserve);
    pthread_mutex_lock(&log->lock);
    if (f == NULL) {
        /* Out of memory and of reserve: join the newest failure listed
         * that no wait reported. A reported one (claimed) is inert for the
         * ops after its wait: joined, the failure was never reported and
         * made nothing skip (found by the reviewer of the log's letting
         * go). One only the log holds is not joined either: a var wait
         * could then report it, and wait_all the next, which the log let
         * go (unlist_unreportable). None: NULL (failure.h). */
        vf__failure *newest = NULL;
        for (vf__failure *g = log->head; g != NULL; g = g->next)
            if (!vf__failure_claimed(g) && !log_only(g))
                newest = g;
        if (newest != NULL)
            vf__failure_ref(newest);
        pthread_mutex_unlock(&log->lock);
        return newest;
    }
    atomic_init(&f->refs, 2); /* the caller's and the log's */
    atomic_init(&f->cleared_next, VF__NEVER);
    f->cleared_up = NULL;
    f->cleared_self = false;
    f->root = vf__family_root(up, place);
    f->place = place;
    f->up = up;
    if (up != NULL)
        vf__family_ref(up);
    f->next = NULL;
    f->reserve = &log->reserve;
    f->info.code = code;
    if (op_name != NULL && op_name[0] != '\0')
        vf__name_fit(f->info.op_name, sizeof f->info.op_name, op_name);
    else
        snprintf(f->info.op_name, sizeof f->info.op_name, "op #%" PRIu64,
                 place);
    vf__message_fit(f->info.message, sizeof f->info.message,
                    message ? message : "");
    vf__failure *claimed = unlist_unreportable(log);
    if (log->tail)
        log->tail->next = f;
    else
        log->head = f;
    log->tail = f;
    log->count++;
    pthread_mutex_unlock(&log->lock);
    unref_chain(claimed); /* the log's references */
    return f;
}

void vf__failure_log_retract(vf__failure_log *log, vf__failure *f,
                             uint64_t place)
{
    if (f == NULL)
        return;
    bool unlisted = false;
    pthread_mutex_lock(&log->lock);
    vf__failure *prev = NULL;
    /* Only the log's and the caller's references: no other op joined it
     * meanwhile (out of reserve, vf__failure_log_record), whose failure it
     * now is too. */
    bool alone = f->place == place && atomic_load(&f->refs) == 2;
    for (vf__failure *g = log->head; alone && g != NULL;
         prev = g, g = g->next) {
        if (g != f)
            continue;
        if (prev != NULL)
            prev->next = f->next;
        else
            log->head = f->next;
        if (log->tail == f)
            log->tail = prev;
        f->next = NULL;
        log->count--;
        unlisted = true;
        break;
    }
    pthread_mutex_unlock(&log->lock);
    if (unlisted)
        vf__failure_unref(f); /* the log's */
    vf__failure_unref(f);     /* the caller's */
}

bool vf__failure_log_report(vf__failure_log *log,
                            const _Atomic uint64_t *pushed, vf_error *err)
{
    /* Take every listed record under the lock (each one's root is up to
     * `place`, read there: failure.h); report and clear them outside it
     * (unref takes the reserve's lock). */
    pthread_mutex_lock(&log->lock);
    uint64_t place = atomic_load_explicit(pushed, memory_order_relaxed);
    vf__failure *mine = log->head;
    log->head = log->tail = NULL;
    log->count = 0;
    /* From what is left (nothing): a look put off by a burst that this
     * report took away let claimed records pile up to twice the burst. */
    look_again_at_double(log);
    pthread_mutex_unlock(&log->lock);

    /* The first unclaimed one, again while a var wait on another thread
     * claims the one picked first: the next is then this report's (each
     * try that loses leaves one more claimed, so the picks end). Once
     * taken, the rest were cleared below with it unreported (found by an
     * auditor: 35 of 20,000 rounds). */
    vf__wait_key key = {.up = NULL, .next = place + 1, .self = false};
    vf__failure *first;
    bool reported = false;
    do {
        first = NULL;
        for (vf__failure *f = mine; f != NULL; f = f->next)
            if (!vf__failure_claimed(f) && vf__failure_before(f, first))
                first = f;
    } while (first != NULL && !(reported = vf__failure_claim(first, key)));
    if (reported && err != NULL)
        *err = first->info;
    while (mine != NULL) {
        vf__failure *next = mine->next;
        vf__failure_claim(mine, key); /* no-op when reported already */
        vf__failure_unref(mine);
        mine = next;
    }
    return reported;
}
