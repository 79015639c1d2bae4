/*
 * thread_exit.h: what a thread leaves behind when it exits, and what the
 * library leaves when it is unloaded.
 *
 * A thread that uses varflow holds state of its own in four modules: its
 * bulk states (bulk.h), its count slots (counts.h), its call slot
 * (guard.h) and its free-list caches (freelist.h). One pthread key, made
 * with the first engine, runs their exits, in that order, when such a
 * thread exits: each module arms it (vf__thread_exit_arm) when the thread
 * first takes state of its own.
 * One key, not one a module: a process has 1024, which a plugin loaded
 * and unloaded in a loop used up 3 at a time.
 *
 * Unloading. A program may use varflow from a plugin it loads with
 * dlopen() and unloads with dlclose(). The key's destructor would then
 * point into unmapped code, and the first thread to exit afterwards
 * crashed the process; each load made keys of its own, and the 342nd
 * aborted (found by a user tester). So when the library is unloaded, or
 * the process exits (a destructor cannot tell them apart), with no engine
 * alive, it deletes the key, runs the calling thread's exits and frees
 * the free-list depot's blocks (engine.c: lib_unload). It frees nothing
 * another thread may still use: at a process's exit other threads run on,
 * and may finish a completion late or call with a destroyed engine's
 * handle, which read the completion slots and the call slots (freeing
 * those, and other threads' count caches, was found by the reviewer to
 * read freed memory, and to race a thread's own exit). A thread that
 * outlives an unload so keeps what it holds (its call slot, the blocks
 * of its free-list caches; its count cache is thread-local storage): a
 * few blocks a thread for each unload it outlives. With an engine alive
 * it does nothing: the engine's threads may still run its code
 * (docs/GUIDE.md: destroy every engine before dlclose()).
 */
#ifndef VF_THREAD_EXIT_H
#define VF_THREAD_EXIT_H

#include <stdbool.h>

/* Make the key if there is none (vf_engine_create): 0, or VF_ESYSTEM with
 * a detail when the process has no key left. */
int vf__thread_exit_init(void);

/* The calling thread takes state of its own: its exit is to give it back.
 * 0, or VF_ESYSTEM (no key could be made, or set). Cheap once armed. */
int vf__thread_exit_arm(void);

/* The library goes with no engine alive (engine.c: lib_unload): run the calling
 * thread's exits now and delete the key; a later engine makes a new one,
 * and threads armed for the old key arm again. */
void vf__thread_exit_unload(void);

/* Fork (lifecycle.c): take or let go of the key's lock (a leaf), which
 * the first engine's creation holds while it makes the key. */
void vf__thread_exit_fork_lock(bool lock);

#endif /* VF_THREAD_EXIT_H */
