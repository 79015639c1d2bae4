/* thread_exit.c: the one thread key and the exits it runs (see
 * thread_exit.h). */
#include "core/thread_exit.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>

#include "base/error.h"
#include "core/bulk.h"
#include "core/counts.h"
#include "core/freelist.h"
#include "core/guard.h"

static pthread_mutex_t key_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_key_t key; /* key_lock to make or delete */
/* The key's generation (seq_cst; 0: none): a thread armed for an older
 * one (deleted at an unload) arms again. */
static atomic_uint key_gen;
static unsigned last_gen; /* key_lock */
static _Thread_local unsigned armed_gen;

/* The module exits, in this order: the thread's bulk states first (giving
 * one back pushes its batch: a call on its engine, which counts and takes
 * blocks), then the count slots and the call slot, which may free blocks
 * into the caches the free list then gives back. */
static void run_exits(void)
{
    vf__bulk_thread_exit();
    vf__counts_thread_exit();
    vf__guard_thread_exit();
    vf__fl_thread_exit();
}

static void at_thread_exit(void *unused)
{
    (void)unused;
    armed_gen = 0;
    run_exits();
}

int vf__thread_exit_init(void)
{
    if (atomic_load(&key_gen) != 0)
        return 0;
    int rc = 0;
    pthread_mutex_lock(&key_lock);
    if (atomic_load(&key_gen) == 0) {
        int err = pthread_key_create(&key, at_thread_exit);
        if (err == 0)
            atomic_store(&key_gen, ++last_gen == 0 ? ++last_gen : last_gen);
        else
            rc = vf__fail(
                VF_ESYSTEM,
                "vf_engine_create: no thread-specific data key left for "
                "varflow's per-thread state (pthread_key_create: %s)",
                strerror(err));
    }
    pthread_mutex_unlock(&key_lock);
    return rc;
}

int vf__thread_exit_arm(void)
{
    unsigned gen = atomic_load(&key_gen);
    if (VF__LIKELY(gen != 0 && armed_gen == gen))
        return 0;
    int rc = vf__thread_exit_init();
    if (rc != 0)
        return rc;
    /* No lock: a thread's first use of varflow took key_lock, and a fork
     * then left it held in the child, whose first user hung (found by the
     * reviewer). The key read after its generation (made before it: init
     * stores the generation last); an unload deletes it only with no
     * engine alive, when no thread arms. */
    gen = atomic_load(&key_gen);
    if (gen == 0 || pthread_setspecific(key, &armed_gen) != 0)
        return VF_ESYSTEM;
    armed_gen = gen;
    return 0;
}

void vf__thread_exit_fork_lock(bool lock)
{
    if (lock)
        pthread_mutex_lock(&key_lock);
    else
        pthread_mutex_unlock(&key_lock);
}

void vf__thread_exit_unload(void)
{
    pthread_mutex_lock(&key_lock);
    if (atomic_load(&key_gen) != 0) {
        atomic_store(&key_gen, 0);
        pthread_key_delete(key); /* runs no destructor */
    }
    pthread_mutex_unlock(&key_lock);
    armed_gen = 0;
    run_exits();
}
