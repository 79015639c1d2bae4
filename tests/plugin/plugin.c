/*
 * plugin.c: a plugin that uses varflow, for test_plugin (loaded with
 * dlopen, unloaded with dlclose). Built twice: linked with libvarflow.a
 * (vf_test_plugin_static) and with libvarflow.so (vf_test_plugin_shared).
 *
 * plugin_run(kind): create an engine of that kind (0 naive, 1 pooled, 2
 * perdevice), push a chain of ops from this thread, wait, destroy it;
 * returns the chain's result (10) or a negative error code.
 */
#include <varflow.h>

__attribute__((visibility("default"))) int plugin_run(int kind);

static int add_one(vf_run *run, void *arg)
{
    (void)run;
    ++*(int *)arg;
    return 0;
}

__attribute__((visibility("default"))) int plugin_run(int kind)
{
    static const vf_engine_type types[] = {VF_ENGINE_NAIVE, VF_ENGINE_POOLED,
                                           VF_ENGINE_PERDEVICE};
    vf_engine *e = NULL;
    vf_config cfg = {.type = types[kind % 3], .cpu_workers = 2};
    int rc = vf_engine_create(&e, &cfg);
    if (rc != 0)
        return rc;
    vf_var v;
    int x = 0;
    rc = vf_var_create(e, &v);
    for (int i = 0; rc == 0 && i < 10; i++)
        rc = vf_engine_push(
            e, &(vf_op){.fn = add_one, .arg = &x, .writes = VF_VARS(v)});
    if (rc == 0)
        rc = vf_engine_wait_all(e, NULL);
    int d = vf_engine_destroy(e);
    return rc != 0 ? rc : d != 0 ? d : x;
}
