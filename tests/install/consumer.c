/*
 * consumer.c: a program that lives outside the varflow tree and is built
 * against an *installed* varflow, by scripts/check-install: once through
 * `pkg-config --cflags --libs varflow`, once through a CMake project that
 * calls find_package(varflow CONFIG REQUIRED) (CMakeLists.txt beside this
 * file), each against the shared and the static library.
 *
 * It checks that the installed header and library work together: it runs
 * the seed program A=2; B=A+1; C=A+2; D=B*C on a two-worker pooled engine
 * and expects D == 12, with D's version at 1 (one write ran), profiled
 * through the installed varflow_profile.h: four ops recorded. It is built
 * with -std=c11 -Wall -Wextra -Wpedantic -Werror, so a public header that
 * is not warning-clean for users fails here too.
 */
#include <stdio.h>

#include <varflow.h>
#include <varflow_profile.h>

/* One op: out = in1 + in2, out = in1 * in2 or out = k (no inputs). */
typedef struct cell {
    int *out;
    const int *in1;
    const int *in2;
    int k;
} cell;

static int op_const(vf_run *run, void *arg)
{
    const cell *c = arg;
    (void)run;
    *c->out = c->k;
    return 0;
}

static int op_add_k(vf_run *run, void *arg)
{
    const cell *c = arg;
    (void)run;
    *c->out = *c->in1 + c->k;
    return 0;
}

static int op_mul(vf_run *run, void *arg)
{
    const cell *c = arg;
    (void)run;
    *c->out = *c->in1 * *c->in2;
    return 0;
}

static int fail(const char *what, int rc)
{
    fprintf(stderr, "consumer: %s: %s (%s) %s\n", what, vf_error_name(rc),
            vf_error_string(rc), vf_error_detail());
    return 1;
}

int main(void)
{
    vf_engine *e = NULL;
    vf_config cfg = {.type = VF_ENGINE_POOLED, .cpu_workers = 2};
    int rc = vf_engine_create(&e, &cfg);
    if (rc != 0)
        return fail("vf_engine_create", rc);

    if ((rc = vf_profile_start(e)) != 0)
        return fail("vf_profile_start", rc);
    vf_var a, b, c, d;
    if ((rc = vf_var_create(e, &a)) != 0 || (rc = vf_var_create(e, &b)) != 0 ||
        (rc = vf_var_create(e, &c)) != 0 || (rc = vf_var_create(e, &d)) != 0)
        return fail("vf_var_create", rc);

    int va = 0, vb = 0, vc = 0, vd = 0;
    cell ca = {.out = &va, .k = 2};
    cell cb = {.out = &vb, .in1 = &va, .k = 1};
    cell cc = {.out = &vc, .in1 = &va, .k = 2};
    cell cd = {.out = &vd, .in1 = &vb, .in2 = &vc};
    const vf_op ops[] = {
        {.fn = op_const, .arg = &ca, .writes = VF_VARS(a), .name = "A=2"},
        {.fn = op_add_k,
         .arg = &cb,
         .reads = VF_VARS(a),
         .writes = VF_VARS(b),
         .name = "B=A+1"},
        {.fn = op_add_k,
         .arg = &cc,
         .reads = VF_VARS(a),
         .writes = VF_VARS(c),
         .name = "C=A+2"},
        {.fn = op_mul,
         .arg = &cd,
         .reads = VF_VARS(b, c),
         .writes = VF_VARS(d),
         .name = "D=B*C"},
    };
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if ((rc = vf_engine_push(e, &ops[i])) != 0)
            return fail(ops[i].name, rc);

    vf_error err = {0};
    if ((rc = vf_var_wait(e, d, &err)) != 0)
        return fail("vf_var_wait", rc);
    uint64_t version = 0;
    if ((rc = vf_var_version(e, d, &version)) != 0)
        return fail("vf_var_version", rc);
    if ((rc = vf_engine_wait_all(e, &err)) != 0)
        return fail("vf_engine_wait_all", rc);

    vf_profile *prof = NULL;
    if ((rc = vf_profile_stop(e)) != 0 || (rc = vf_profile_take(e, &prof)) != 0)
        return fail("vf_profile_take", rc);
    size_t recorded = vf_profile_count(prof);
    vf_profile_destroy(prof);

    int ok = vd == 12 && version == 1 && recorded == 4;
    printf("consumer: varflow %d.%d.%d, %s engine, %d workers: D = %d "
           "(want 12), version %llu (want 1), %zu ops profiled (want 4): "
           "%s\n",
           VF_VERSION_MAJOR, VF_VERSION_MINOR, VF_VERSION_PATCH,
           vf_engine_type_name(vf_engine_type_of(e)), vf_engine_num_workers(e),
           vd, (unsigned long long)version, recorded, ok ? "ok" : "FAILED");

    const vf_var all[] = {a, b, c, d};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if ((rc = vf_var_destroy(e, all[i], NULL, NULL)) != 0)
            return fail("vf_var_destroy", rc);
    if ((rc = vf_engine_destroy(e)) != 0)
        return fail("vf_engine_destroy", rc);
    return ok ? 0 : 1;
}
