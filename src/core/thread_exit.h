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
 * the process exits, with no engine alive, it deletes the key and lets go
 * of what it holds for the whole process: the calling thread's state,
 * every thread's count cache, the free-list depot, the call slots
 * (engine.c: lib_unload). The blocks another live thread holds in its
 * free-list caches stay with it: its exit no longer runs (the key is
 * gone), and the library cannot reach them. With an engine alive it does
 * nothing: the engine's threads may still run its code (docs/GUIDE.md:
 * destroy every engine before dlclose()). At the exit of a process that
 * linked the library, the same: a thread that made an engine again
 * afterwards would meet freed slots, but no program does that during its
 * exit.
 */
#ifndef VF_THREAD_EXIT_H
#define VF_THREAD_EXIT_H

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

#endif /* VF_THREAD_EXIT_H */
