/*
 * rec.h: the recording op the failure tests share (test_errors,
 * test_remote_failure): a sync op that fails with a given code and message
 * (or succeeds) and counts its runs, its done calls and the status done got.
 * Include after util.h.
 */
#ifndef VF_TEST_REC_H
#define VF_TEST_REC_H

typedef struct rec {
    int ret;         /* what fn returns */
    const char *msg; /* set with vf_run_set_error when ret != 0 */
    atomic_int ran;  /* fn calls */
    atomic_int done; /* done calls */
    atomic_int status;
} rec;

static int rec_fn(vf_run *run, void *arg)
{
    rec *r = arg;
    atomic_fetch_add(&r->ran, 1);
    if (r->ret && r->msg)
        vf_run_set_error(run, "%s", r->msg);
    return r->ret;
}

static void rec_done(void *arg, int status)
{
    rec *r = arg;
    atomic_store(&r->status, status);
    atomic_fetch_add(&r->done, 1);
}

static void rec_init(rec *r, int ret, const char *msg)
{
    r->ret = ret;
    r->msg = msg;
    atomic_init(&r->ran, 0);
    atomic_init(&r->done, 0);
    atomic_init(&r->status, 12345);
}

static void push_rec(vf_engine *e, rec *r, vf_var_list reads,
                     vf_var_list writes, const char *name, bool no_skip)
{
    vf_op op = {.fn = rec_fn,
                .arg = r,
                .done = rec_done,
                .reads = reads,
                .writes = writes,
                .name = name,
                .no_skip = no_skip};
    CHECK_OK(vf_engine_push(e, &op));
}

#endif /* VF_TEST_REC_H */
