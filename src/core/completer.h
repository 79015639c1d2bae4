/*
 * completer.h: the engine's completer, the thread that finishes device ops
 * whose work is in flight (the whole story is in device_ops.h).
 *
 * A worker hands an in-flight device op over (vf__completer_add) before it
 * releases the op's vars, so every op it could depend on through a fence
 * was handed over before it. The completer takes them in that order, all
 * that are queued at a time, waits for each one's event and completes it
 * (vf__device_op_completed: its fence resolved, then `done` and
 * statistics): fences are therefore resolved inputs first, and each as
 * soon as its own work and the work handed over before it completed (not
 * the work after it). Events of one stream complete in order, so it first
 * asks, without blocking, whether the newest of each stream among those it
 * took is complete: when it is, the older ones cost no call to the
 * device.
 *
 * It starts with the engine's first device (under dev.lock) and stops with
 * the engine (stop, destroy). Its `lock` is a leaf (engine.h's lock
 * order).
 */
#ifndef VF_COMPLETER_H
#define VF_COMPLETER_H

#include <pthread.h>
#include <stdbool.h>

typedef struct vf__op vf__op;

/* The engine's completer (the engine's `dev.completer`): device ops in
 * flight, oldest first. */
typedef struct vf__completer {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    vf__op *head, *tail; /* lock; linked through op->next */
    bool stop;           /* lock */
    bool sleeping;       /* lock: waiting on cond (only then signalled) */
    bool started;
    pthread_t thread;
} vf__completer;

/* Start the completer's thread, unless it runs (dev.lock held). 0, or
 * VF_ESYSTEM. */
int vf__completer_start(vf__completer *c);

/* Stop its thread and join it (dev.lock held, or at destroy); nothing may
 * be in flight. */
void vf__completer_stop(vf__completer *c);

/* In a forked child: forget the parent's thread and what it held (not
 * started). */
void vf__completer_forget(vf__completer *c);

/* Hand an in-flight device op to the completer, before its vars are
 * released: so every op it could depend on through a fence was handed
 * over before it, and the completer resolves fences in an order where
 * inputs come first. The op then has two owners, the release of its vars
 * and its completion: the last frees it. */
void vf__completer_add(vf__completer *c, vf__op *op);

#endif /* VF_COMPLETER_H */
