/* hello.c: c = a + b, then d = a + c; varflow orders them by their vars. */
#include <stdio.h>
#include <varflow.h>

static int add(vf_run *run, void *arg) /* arg = {out, x, y}: *out = *x + *y */
{
    double **p = arg;
    (void)run;
    *p[0] = *p[1] + *p[2];
    return 0; /* non-zero fails the op; the ops that depend on it are skipped */
}

int main(void)
{
    double a = 1, b = 2, c = 0, d = 0;
    double *c_args[] = {&c, &a, &b}, *d_args[] = {&d, &a, &c};
    vf_engine *e;
    vf_var va, vb, vc, vd;               /* tags for a, b, c and d */
    if (vf_engine_create(&e, NULL) != 0) /* NULL: defaults and VF_* env vars */
        return 1;
    vf_var_create(e, &va);
    vf_var_create(e, &vb);
    vf_var_create(e, &vc);
    vf_var_create(e, &vd);
    vf_engine_push(e, &(vf_op){.fn = add,
                               .arg = c_args,
                               .reads = VF_VARS(va, vb),
                               .writes = VF_VARS(vc)});
    vf_engine_push(e, &(vf_op){.fn = add, /* reads c: runs after the op above */
                               .arg = d_args,
                               .reads = VF_VARS(va, vc),
                               .writes = VF_VARS(vd)});
    int err = vf_var_wait(e, vd, NULL); /* 0, or VF_EOPFAILED if an op failed */
    printf("d = %g (%s)\n", d, err ? vf_error_string(err) : "ok");
    return vf_engine_destroy(e) != 0 || err != 0;
}
