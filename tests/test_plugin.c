/*
 * test_plugin: varflow in a plugin the program loads with dlopen() and
 * unloads with dlclose() (tests/plugin/plugin.c, linked with libvarflow.a
 * and, in a second plugin, with libvarflow.so), and a process out of
 * thread-specific data keys. Found by a user tester (thread_exit.h):
 * - load_use_unload_again: 400 times load, use (an engine made, a chain
 *   pushed and waited for, the engine destroyed) and unload, on the main
 *   thread: every load took three keys that no unload gave back, and the
 *   342nd aborted the process;
 * - a_thread_exits_after_the_unload: a thread uses the plugin, which is
 *   unloaded before that thread exits: its exit ran the key's destructor,
 *   in unmapped code (a crash, every run);
 * - no_key_left: with every key of the process taken, vf_engine_create
 *   returns VF_ESYSTEM, its detail naming pthread_key_create (it returned
 *   0, and the push, the wait and the destroy then said VF_ENOMEM, the
 *   destroy leaving the workers running); with one left, all of it works
 *   (the first push aborted).
 */
#include "runner.h"

#include <dlfcn.h>
#include <pthread.h>
#include <string.h>

#if defined(TU_ASAN)
#include <sanitizer/lsan_interface.h>
/* What an unloaded copy of the library keeps (GUIDE.md, "In a plugin"):
 * the call slots of the threads that called it, and the blocks a thread
 * that outlives it holds in its caches; not leaks of this test's. */
#define KEPT_BY_AN_UNLOAD(stmt)                                                \
    do {                                                                       \
        __lsan_disable();                                                      \
        stmt;                                                                  \
        __lsan_enable();                                                       \
    } while (0)
#else
#define KEPT_BY_AN_UNLOAD(stmt) stmt
#endif

static const char *const plugins[] = {VF_TEST_PLUGIN_STATIC,
                                      VF_TEST_PLUGIN_SHARED};

typedef int (*plugin_run_fn)(int kind);

/* Load `path`, run its plugin_run(kind), unload it: what it returned. */
static int load_run_unload(const char *path, int kind)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        CHECK_REPORT_("dlopen %s: %s", path, dlerror());
        return -1;
    }
    plugin_run_fn run = (plugin_run_fn)(uintptr_t)dlsym(h, "plugin_run");
    REQUIRE(run != NULL);
    int rc;
    KEPT_BY_AN_UNLOAD(rc = run(kind));
    CHECK_EQ(dlclose(h), 0);
    return rc;
}

TEST_CASE(load_use_unload_again)
{
    for (int p = 0; p < 2; p++) {
        int cycles = (int)tu_scaled(400, 400); /* past the 342 of before */
        for (int i = 0; i < cycles; i++) {
            int rc = load_run_unload(plugins[p], i);
            if (rc != 10) {
                CHECK_REPORT_("%s, cycle %d: %d", plugins[p], i, rc);
                break;
            }
        }
    }
}

typedef struct user_thread {
    const char *path;
    void *handle;
    plugin_run_fn run;
    int rc;
    atomic_int used, unloaded;
} user_thread;

static void *use_then_exit(void *arg)
{
    user_thread *u = arg;
    KEPT_BY_AN_UNLOAD(u->rc = u->run(1));
    atomic_store(&u->used, 1);
    /* Exit only once the plugin is gone. */
    tu_wait_flag(&u->unloaded, 1, TU_TIMEOUT);
    return NULL;
}

TEST_CASE(a_thread_exits_after_the_unload)
{
    for (int p = 0; p < 2; p++) {
        user_thread u = {.path = plugins[p]};
        u.handle = dlopen(u.path, RTLD_NOW | RTLD_LOCAL);
        REQUIRE(u.handle != NULL);
        u.run = (plugin_run_fn)(uintptr_t)dlsym(u.handle, "plugin_run");
        REQUIRE(u.run != NULL);
        pthread_t t = tu_thread_start(use_then_exit, &u);
        REQUIRE(tu_wait_flag(&u.used, 1, TU_TIMEOUT));
        CHECK_EQ(dlclose(u.handle), 0);
        atomic_store(&u.unloaded, 1);
        tu_thread_join(t); /* its exit crashed the process */
        CHECK_EQ(u.rc, 10);
    }
}

static int one(vf_run *run, void *arg)
{
    (void)run;
    *(int *)arg = 1;
    return 0;
}

/* Take every key of the process but `spare`; returns how many it took. */
static int take_keys(pthread_key_t *keys, int max, int spare)
{
    int n = 0;
    while (n < max && pthread_key_create(&keys[n], NULL) == 0)
        n++;
    for (int i = 0; i < spare && n > 0; i++)
        pthread_key_delete(keys[--n]);
    return n;
}

TEST_CASE(no_key_left)
{
    static pthread_key_t keys[4096];
    int n = take_keys(keys, 4096, 0);
    REQUIRE(n > 0 && n < 4096);
    vf_engine *e = NULL;
    CHECK_ERR(vf_engine_create(&e, &(vf_config){.type = VF_ENGINE_POOLED}),
              VF_ESYSTEM);
    CHECK(e == NULL);
    CHECK(strstr(vf_error_detail(), "pthread_key_create") != NULL);
    pthread_key_delete(keys[--n]); /* one left, for varflow */
    CHECK_OK(vf_engine_create(&e, &(vf_config){.type = VF_ENGINE_POOLED}));
    REQUIRE(e != NULL);
    vf_var v = tu_var(e);
    int x = 0;
    CHECK_OK(vf_engine_push(
        e, &(vf_op){.fn = one, .arg = &x, .writes = tu_list(&v, 1)}));
    CHECK_OK(vf_engine_wait_all(e, NULL));
    CHECK_EQ(x, 1);
    CHECK_OK(vf_engine_destroy(e));
    while (n > 0)
        pthread_key_delete(keys[--n]);
}

TEST_MAIN("test_plugin", 120)
