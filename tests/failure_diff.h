/*
 * failure_diff.h: compare what an engine did (fr_run_program) with the
 * oracle's result (fo_interpret), item by item, and say what differs.
 * Included by failure_run.h.
 *
 * Each difference has a kind, so a summary can tell the bugs apart: an op
 * whose outcome (done calls, status, whether its body ran) differs; a wait
 * that returned another code; one that reported another failure; one that
 * reported the same failure under another op name (the "op #N" rule); a
 * value or version seen right after a wait; a final value or version; the
 * stats; a call that failed (API).
 */
#ifndef VF_TEST_FAILURE_DIFF_H
#define VF_TEST_FAILURE_DIFF_H

typedef enum fr_dkind {
    FR_D_OP,
    FR_D_WAIT_RC,
    FR_D_WAIT_WHICH,
    FR_D_WAIT_NAME,
    FR_D_WAIT_VALUE,
    FR_D_VALUE,
    FR_D_VERSION,
    FR_D_STATS,
    FR_D_API,
    FR_NDKINDS
} fr_dkind;

static const char *const fr_dkind_names[FR_NDKINDS] = {
    "op outcome",
    "wait code",
    "wait reported another failure",
    "wait op name",
    "value/version after a wait",
    "final value",
    "final version",
    "stats",
    "API call"};

#define FR_MAXLINES 16

typedef struct fr_diffs {
    int count;
    int by_kind[FR_NDKINDS];
    int nlines;
    char lines[FR_MAXLINES][400];
} fr_diffs;

static inline void fr_diff(fr_diffs *d, fr_dkind k, const char *fmt, ...)
    VF_PRINTF_LIKE(3, 4);

static inline void fr_diff(fr_diffs *d, fr_dkind k, const char *fmt, ...)
{
    d->count++;
    d->by_kind[k]++;
    if (d->nlines == FR_MAXLINES)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d->lines[d->nlines++], sizeof d->lines[0], fmt, ap);
    va_end(ap);
}

static inline const char *fr_how_name(int how)
{
    static const char *const names[] = {"sync", "async", "async-thread",
                                        "device"};
    return names[how];
}

/* "ran", "failed 12", "skipped", ... and whether the body ran. */
static inline void fr_outcome(const fo_xop *x, char *buf, size_t n)
{
    if (x->done == 0)
        snprintf(buf, n, "not pushed or no done (body %d)", x->body);
    else if (x->done > 1)
        snprintf(buf, n, "done called %d times", x->done);
    else if (x->status == 0)
        snprintf(buf, n, "ran (body %d)", x->body);
    else if (x->status == VF_ESKIPPED)
        snprintf(buf, n, "%s (VF_ESKIPPED, body %d)",
                 x->body ? "ran" : "skipped", x->body);
    else
        snprintf(buf, n, "failed %d (body %d)", x->status, x->body);
}

static inline void fr_cmp_ops(const fo_prog *p, const fo_result *want,
                              const fo_result *got, fr_diffs *d)
{
    for (int i = 0; i < p->nops; i++) {
        const fo_xop *a = &want->ops[i], *b = &got->ops[i];
        if (a->done == b->done && a->status == b->status && a->body == b->body)
            continue;
        char wa[64], ga[64];
        fr_outcome(a, wa, sizeof wa);
        fr_outcome(b, ga, sizeof ga);
        const fo_op *o = &p->ops[i];
        fr_diff(d, FR_D_OP, "op %d '%s' (%s%s%s%s): %s; serial: %s", i, o->name,
                fr_how_name(o->how), o->no_skip ? ", no_skip" : "",
                o->parent >= 0 ? ", child" : "", o->nkids ? ", parent" : "", ga,
                wa);
    }
}

/* Where wait entry w is in the program, into buf. */
static inline void fr_wait_where(const fo_prog *p, int w, char *buf, size_t n)
{
    for (int s = 0; s < p->nsteps; s++) {
        const fo_step *st = &p->steps[s];
        if (st->wait != w ||
            (st->kind != FO_WAIT_VAR && st->kind != FO_WAIT_ALL))
            continue;
        if (st->kind == FO_WAIT_ALL)
            snprintf(buf, n, "wait_all at step %d", s);
        else
            snprintf(buf, n, "wait_var(v%d) at step %d (thread %d)", st->arg, s,
                     st->thread);
        return;
    }
    for (int i = 0; i < p->nops; i++) {
        const fo_op *o = &p->ops[i];
        if (o->nwait && w >= o->wait0 && w < o->wait0 + o->nwait) {
            snprintf(buf, n, "nested wait_var(v%d) in op %d",
                     o->wvar[w - o->wait0], i);
            return;
        }
        if (o->kidwait && w == o->kwait) {
            snprintf(buf, n, "vf_run_wait_children in op %d", i);
            return;
        }
    }
    snprintf(buf, n, "wait %d", w);
}

static inline void fr_err_text(const fo_xwait *x, char *buf, size_t n)
{
    if (!x->happened)
        snprintf(buf, n, "(did not happen)");
    else if (x->rc == VF_EOPFAILED)
        snprintf(buf, n, "VF_EOPFAILED {%d, '%.63s', '%.100s'}", x->err.code,
                 x->err.op_name, x->err.message);
    else
        snprintf(buf, n, "%s", x->rc ? vf_error_name(x->rc) : "0");
}

static inline void fr_cmp_wait(const fo_prog *p, int w, const fo_xwait *a,
                               const fo_xwait *b, fr_diffs *d)
{
    char where[96], ta[400], tb[400];
    fr_wait_where(p, w, where, sizeof where);
    fr_err_text(a, ta, sizeof ta);
    fr_err_text(b, tb, sizeof tb);
    if (a->happened != b->happened || a->rc != b->rc) {
        fr_diff(d, FR_D_WAIT_RC, "%s returned %s; serial: %s", where, tb, ta);
    } else if (a->rc == VF_EOPFAILED &&
               (a->err.code != b->err.code ||
                strcmp(a->err.message, b->err.message) != 0 ||
                strcmp(a->err.op_name, b->err.op_name) != 0)) {
        bool same = a->err.code == b->err.code &&
                    strcmp(a->err.message, b->err.message) == 0;
        fr_diff(d, same ? FR_D_WAIT_NAME : FR_D_WAIT_WHICH,
                "%s returned %s; serial: %s", where, tb, ta);
    } else if (a->value != b->value || a->version != b->version) {
        fr_diff(d, FR_D_WAIT_VALUE,
                "%s: value %#llx version %llu; serial: %#llx version %llu",
                where, (unsigned long long)b->value,
                (unsigned long long)b->version, (unsigned long long)a->value,
                (unsigned long long)a->version);
    }
}

static inline void fr_cmp_vars(const fo_prog *p, const fo_result *want,
                               const fo_result *got, fr_diffs *d)
{
    for (int v = 0; v < p->nvars; v++) {
        const fo_xvar *a = &want->vars[v], *b = &got->vars[v];
        if (a->deleted != b->deleted || a->value != b->value)
            fr_diff(d, FR_D_VALUE, "var %d%s: %#llx; serial: %#llx", v,
                    a->deleted ? " (at its delete)" : "",
                    (unsigned long long)b->value, (unsigned long long)a->value);
        else if (!a->deleted && a->version != b->version)
            fr_diff(d, FR_D_VERSION, "var %d: version %llu; serial: %llu", v,
                    (unsigned long long)b->version,
                    (unsigned long long)a->version);
    }
}

/* Every difference between `got` and `want` into d (d zeroed first);
 * `api` errors (the first one's text in why) count as one difference. */
static inline void fr_compare(const fo_prog *p, const fo_result *want,
                              const fo_result *got, int api, const char *why,
                              fr_diffs *d)
{
    memset(d, 0, sizeof *d);
    if (api)
        fr_diff(d, FR_D_API, "%d API error(s), first: %s", api, why);
    fr_cmp_ops(p, want, got, d);
    for (int w = 0; w < p->nwaits; w++)
        fr_cmp_wait(p, w, &want->waits[w], &got->waits[w], d);
    fr_cmp_vars(p, want, got, d);
    if (want->ran != got->ran || want->failed != got->failed ||
        want->skipped != got->skipped)
        fr_diff(d, FR_D_STATS,
                "stats ran/failed/skipped %llu/%llu/%llu; serial: "
                "%llu/%llu/%llu",
                (unsigned long long)got->ran, (unsigned long long)got->failed,
                (unsigned long long)got->skipped, (unsigned long long)want->ran,
                (unsigned long long)want->failed,
                (unsigned long long)want->skipped);
}

static inline void fr_dump_op(FILE *f, const fo_prog *p, const fo_result *x,
                              int i, int depth)
{
    const fo_op *o = &p->ops[i];
    char out[64];
    fr_outcome(&x->ops[i], out, sizeof out);
    fprintf(f, "%*sop %d '%s' %s r[", depth * 2 + 4, "", i, o->name,
            fr_how_name(o->how));
    for (int k = 0; k < o->nr; k++)
        fprintf(f, k ? ",%d" : "%d", o->r[k]);
    fprintf(f, "] w[");
    for (int k = 0; k < o->nw; k++)
        fprintf(f, k ? ",%d" : "%d", o->w[k]);
    fprintf(f, "]%s code %d%s prop %d prio %d -> %s\n",
            o->no_skip ? " no_skip" : "", o->code, o->cause ? " cause" : "",
            o->property, o->priority, out);
    for (int j = 0; j < o->nkids; j++)
        fr_dump_op(f, p, x, o->kid0 + j, depth + 1);
    if (o->kidwait) {
        char t[400];
        fr_err_text(&x->waits[o->kwait], t, sizeof t);
        fprintf(f, "%*swait children -> %s\n", depth * 2 + 6, "", t);
    }
    for (int k = 0; k < o->nwait; k++) {
        char t[400];
        fr_err_text(&x->waits[o->wait0 + k], t, sizeof t);
        fprintf(f, "%*snested wait v%d -> %s\n", depth * 2 + 6, "", o->wvar[k],
                t);
    }
}

/* The program and a result (the oracle's, or an engine's), step by step. */
static inline void fr_dump_program(FILE *f, const fo_prog *p,
                                   const fo_result *x)
{
    static const char *const kinds[] = {
        "push", "delete", "wait_var", "wait_all", "fork",
        "join", "stale",  "addr",     "stop",     "start"};
    for (int s = 0; s < p->nsteps; s++) {
        const fo_step *st = &p->steps[s];
        char t[400] = "";
        if (st->kind == FO_WAIT_VAR || st->kind == FO_WAIT_ALL)
            fr_err_text(&x->waits[st->wait], t, sizeof t);
        fprintf(f, "s%d [%d] %s %d %s\n", s, st->thread, kinds[st->kind],
                st->arg, t);
        if (st->kind == FO_PUSH)
            fr_dump_op(f, p, x, st->arg, 0);
    }
}

#endif /* VF_TEST_FAILURE_DIFF_H */
