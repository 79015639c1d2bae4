/*
 * seed.c: MXNet's two seed programs pushed through varflow, with the
 * schedule the engine chose.
 *
 *   program 1:  A = 2; B = A + 1; C = A + 2; D = B * C
 *   program 2:  A = 2; B = 2; B = A + B; C = A + 2; delete A
 *
 * Each op is written as if the program were serial: it names the vars it
 * reads and writes, and varflow runs it as soon as the ops it depends on have
 * finished. B and C both only read A, so they may run at the same time; D
 * waits for both. Every op spins for WORK_MS of real CPU work, so on two or
 * more cores the printed timeline shows B and C overlapping.
 *
 * The schedule is for seeing, not for proof: tests/ proves the overlap with a
 * rendezvous. The values are checked, and a wrong one fails the program.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <varflow.h>

enum { WORK_MS = 30, MAX_STEPS = 8, BAR = 40 };

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Busy CPU work for `ms` milliseconds (not a sleep: it holds a core). */
static void spin_ms(double ms)
{
    double until = now_ms() + ms;
    while (now_ms() < until) {
    }
}

/* One statement of a seed program and what the engine did with it. */
typedef struct step {
    const char *text;        /* "B = A + 1" */
    char kind;               /* '=' set, '+' add, '*' multiply */
    int *out;                /* the value the op writes */
    const int *x, *y;        /* operands (y NULL: the constant k) */
    int k;                   /* the constant of "= k" and "+ k" */
    double t0;               /* time of the first push */
    int worker;              /* filled in by the op */
    double start_ms, end_ms; /* relative to t0 */
} step;

static int run_step(vf_run *run, void *arg)
{
    step *s = arg;
    s->worker = vf_run_worker(run);
    s->start_ms = now_ms() - s->t0;
    spin_ms(WORK_MS);
    int y = s->y ? *s->y : s->k;
    switch (s->kind) {
    case '=':
        *s->out = s->k;
        break;
    case '+':
        *s->out = *s->x + y;
        break;
    case '*':
        *s->out = *s->x * y;
        break;
    default:
        vf_run_set_error(run, "unknown kind '%c'", s->kind);
        return -1;
    }
    s->end_ms = now_ms() - s->t0;
    return 0;
}

static int by_start(const void *x, const void *y)
{
    const step *a = *(const step *const *)x, *b = *(const step *const *)y;
    return (a->start_ms > b->start_ms) - (a->start_ms < b->start_ms);
}

/* Prints the steps in start order with a timeline bar per op. */
static void print_schedule(step *steps, int n, double span_ms)
{
    const step *order[MAX_STEPS];
    for (int i = 0; i < n; i++)
        order[i] = &steps[i];
    qsort(order, (size_t)n, sizeof order[0], by_start);
    printf("  %-12s %6s %9s %9s  timeline (0 .. %.0f ms)\n", "op", "worker",
           "start ms", "end ms", span_ms);
    for (int i = 0; i < n; i++) {
        const step *s = order[i];
        char bar[BAR + 1];
        int from = (int)(s->start_ms / span_ms * BAR + 0.5);
        int to = (int)(s->end_ms / span_ms * BAR + 0.5);
        if (to <= from)
            to = from + 1; /* every op gets at least one mark */
        for (int c = 0; c < BAR; c++)
            bar[c] = (c >= from && c < to) ? '#' : '.';
        bar[BAR] = '\0';
        char worker[16];
        if (s->worker >= 0)
            snprintf(worker, sizeof worker, "%d", s->worker);
        else
            snprintf(worker, sizeof worker, "pusher");
        printf("  %-12s %6s %9.1f %9.1f  |%s|\n", s->text, worker, s->start_ms,
               s->end_ms, bar);
    }
}

static double overlap_ms(const step *a, const step *b)
{
    double lo = a->start_ms > b->start_ms ? a->start_ms : b->start_ms;
    double hi = a->end_ms < b->end_ms ? a->end_ms : b->end_ms;
    return hi > lo ? hi - lo : 0;
}

static int check(int rc, const char *what)
{
    if (rc != 0)
        fprintf(stderr, "seed: %s: %s (%s)\n", what, vf_error_string(rc),
                vf_error_detail());
    return rc;
}

static int push_step(vf_engine *e, step *s, vf_var_list reads, vf_var write)
{
    return check(vf_engine_push(e, &(vf_op){.fn = run_step,
                                            .arg = s,
                                            .reads = reads,
                                            .writes = VF_VARS(write),
                                            .name = s->text}),
                 s->text);
}

/* Program 1: A = 2; B = A + 1; C = A + 2; D = B * C. */
static int program1(vf_engine *e)
{
    int a = 0, b = 0, c = 0, d = 0;
    vf_var va, vb, vc, vd;
    if (check(vf_var_create(e, &va), "vf_var_create") ||
        check(vf_var_create(e, &vb), "vf_var_create") ||
        check(vf_var_create(e, &vc), "vf_var_create") ||
        check(vf_var_create(e, &vd), "vf_var_create"))
        return 1;
    step steps[] = {
        {.text = "A = 2", .kind = '=', .out = &a, .k = 2},
        {.text = "B = A + 1", .kind = '+', .out = &b, .x = &a, .k = 1},
        {.text = "C = A + 2", .kind = '+', .out = &c, .x = &a, .k = 2},
        {.text = "D = B * C", .kind = '*', .out = &d, .x = &b, .y = &c},
    };
    double t0 = now_ms();
    for (int i = 0; i < 4; i++)
        steps[i].t0 = t0;
    if (push_step(e, &steps[0], (vf_var_list){0}, va) ||
        push_step(e, &steps[1], VF_VARS(va), vb) ||
        push_step(e, &steps[2], VF_VARS(va), vc) ||
        push_step(e, &steps[3], VF_VARS(vb, vc), vd))
        return 1;
    double pushed_ms = now_ms() - t0;
    vf_error err;
    if (check(vf_var_wait(e, vd, &err), "vf_var_wait(D)"))
        return 1;
    double span = now_ms() - t0;

    printf("program 1: A = 2; B = A + 1; C = A + 2; D = B * C\n");
    printf("  all four ops pushed in %.3f ms; D ready after %.1f ms (serial: "
           "%d ms)\n",
           pushed_ms, span, 4 * WORK_MS);
    print_schedule(steps, 4, span);
    printf("  B and C overlapped for %.1f ms\n",
           overlap_ms(&steps[1], &steps[2]));
    printf("  A = %d, B = %d, C = %d, D = %d\n\n", a, b, c, d);
    return (a == 2 && b == 3 && c == 4 && d == 12) ? 0 : 1;
}

/* What the delete op of program 2 records: when A's memory was freed. */
typedef struct freed {
    int *a;
    double t0, at_ms;
} freed;

static void free_a(void *arg)
{
    freed *f = arg;
    f->at_ms = now_ms() - f->t0;
    free(f->a);
    f->a = NULL;
}

/* Program 2: A = 2; B = 2; B = A + B; C = A + 2; delete A. */
static int program2(vf_engine *e)
{
    int *a = malloc(sizeof *a), b = 0, c = 0;
    vf_var va, vb, vc;
    if (a == NULL)
        return 1;
    *a = 0;
    if (check(vf_var_create(e, &va), "vf_var_create") ||
        check(vf_var_create(e, &vb), "vf_var_create") ||
        check(vf_var_create(e, &vc), "vf_var_create")) {
        free(a);
        return 1;
    }
    step steps[] = {
        {.text = "A = 2", .kind = '=', .out = a, .k = 2},
        {.text = "B = 2", .kind = '=', .out = &b, .k = 2},
        {.text = "B = A + B", .kind = '+', .out = &b, .x = a, .y = &b},
        {.text = "C = A + 2", .kind = '+', .out = &c, .x = a, .k = 2},
    };
    double t0 = now_ms();
    freed f = {.a = a, .t0 = t0, .at_ms = -1};
    for (int i = 0; i < 4; i++)
        steps[i].t0 = t0;
    /* "B = A + B" reads and writes B: listing B in both sets is allowed and
     * counts once, as a write. */
    if (push_step(e, &steps[0], (vf_var_list){0}, va) ||
        push_step(e, &steps[1], (vf_var_list){0}, vb) ||
        push_step(e, &steps[2], VF_VARS(va, vb), vb) ||
        push_step(e, &steps[3], VF_VARS(va), vc) ||
        check(vf_var_destroy(e, va, free_a, &f), "vf_var_destroy(A)"))
        return 1;
    vf_error err;
    if (check(vf_engine_wait_all(e, &err), "vf_engine_wait_all"))
        return 1;
    double span = now_ms() - t0;

    printf("program 2: A = 2; B = 2; B = A + B; C = A + 2; delete A\n");
    print_schedule(steps, 4, span);
    printf("  %-12s %6s %9.1f %9s  (after every op that uses A)\n", "delete A",
           "", f.at_ms, "");
    int later_use = vf_var_version(e, va, &(uint64_t){0});
    printf("  B = %d, C = %d; A's memory freed: %s; using A now: %s\n\n", b, c,
           f.a == NULL ? "yes" : "no", vf_error_name(later_use));

    int ok = b == 4 && c == 4 && f.a == NULL && later_use == VF_ESTALE;
    for (int i = 2; i < 4; i++) /* the delete ran after both readers of A */
        ok = ok && f.at_ms >= steps[i].end_ms;
    return ok ? 0 : 1;
}

int main(void)
{
    vf_engine *e;
    if (check(vf_engine_create(&e, NULL), "vf_engine_create"))
        return 1;
    printf("engine: %s, %d workers (set VF_ENGINE_TYPE, VF_CPU_WORKER_NTHREADS "
           "to change)\n",
           vf_engine_type_name(vf_engine_type_of(e)), vf_engine_num_workers(e));
    printf("every op spins %d ms; worker = vf_run_worker(), times from the "
           "first push\n\n",
           WORK_MS);
    int rc = program1(e);
    rc |= program2(e);
    rc |= check(vf_engine_destroy(e), "vf_engine_destroy") != 0;
    if (rc != 0)
        fprintf(stderr, "seed: FAILED: a value or the delete order is wrong\n");
    return rc;
}
