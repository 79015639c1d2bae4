/* hello.c: c = a + b and d = a + c, ordered by the vars they read and write. */
#include <stdio.h>
#include <varflow.h>

typedef struct add_args { const double *x, *y; double *out; } add_args;

static int add(vf_run *run, void *arg) {
    const add_args *a = arg;
    (void)run;
    *a->out = *a->x + *a->y;
    return 0; /* non-zero would fail the op and every op that depends on it */
}

int main(void) {
    double a = 1, b = 2, c = 0, d = 0;
    add_args c_args = {&a, &b, &c}, d_args = {&a, &c, &d};
    vf_engine *e;
    vf_var va, vb, vc, vd;
    if (vf_engine_create(&e, NULL) != 0) return 1; /* NULL: defaults + VF_* env */
    vf_var_new(e, &va); vf_var_new(e, &vb); vf_var_new(e, &vc); vf_var_new(e, &vd);
    vf_push(e, &(vf_op){.fn = add, .arg = &c_args, .reads = VF_VARS(va, vb),
                        .writes = VF_VARS(vc), .name = "c = a + b"});
    vf_push(e, &(vf_op){.fn = add, .arg = &d_args, .reads = VF_VARS(va, vc),
                        .writes = VF_VARS(vd), .name = "d = a + c"}); /* after c */
    int err = vf_wait_var(e, vd, NULL); /* 0, or VF_EOPFAILED */
    printf("d = %g (%s)\n", d, err ? vf_strerror(err) : "ok");
    return vf_engine_destroy(e) != 0 || err != 0;
}
