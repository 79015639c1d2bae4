/* completer.c: the thread that finishes device ops in flight (see
 * completer.h). */
#include "core/completer.h"

#include <string.h>

#include "base/common.h"
#include "base/error.h"
#include "core/device_ops.h"
#include "core/exec.h"
#include "core/op.h"
#include "device/device.h"

/* Events of one stream complete in order: ask (without blocking) whether
 * the newest of each stream in a batch is complete, so that the device can
 * answer for the older ones without asking the hardware again (device.h's
 * event_wait). Never wait for it: an op's completion would then wait for
 * work handed over after it, on its stream or another, and so would
 * everything that meets its fence on the host. */
static void query_newest_per_stream(vf__op *batch)
{
    enum { MAX_STREAMS = 32 };
    vf__fence *newest[MAX_STREAMS];
    int n = 0;
    for (vf__op *op = batch; op != NULL; op = op->next) {
        vf__fence *f = op->dev->fence;
        int k = 0;
        while (k < n && newest[k]->stream != f->stream)
            k++;
        if (k < n)
            newest[k] = f;
        else if (n < MAX_STREAMS)
            newest[n++] = f;
    }
    for (int k = n - 1; k >= 0; k--)
        (void)newest[k]->cls->event_query(newest[k]->ev);
}

static void *completer_main(void *arg)
{
    vf__completer *c = arg;
    pthread_setname_np(pthread_self(), "vf-completer");
    vf__exec_mark_completer();
    pthread_mutex_lock(&c->lock);
    for (;;) {
        vf__op *op = c->head;
        if (op == NULL) {
            if (c->stop)
                break;
            c->sleeping = true;
            pthread_cond_wait(&c->cond, &c->lock);
            c->sleeping = false;
            continue;
        }
        c->head = c->tail = NULL; /* take them all: one lock per batch */
        pthread_mutex_unlock(&c->lock);
        query_newest_per_stream(op);
        while (op != NULL) {
            vf__op *next = op->next; /* op may be freed by its completion */
            vf__device_op_completed(op);
            op = next;
        }
        pthread_mutex_lock(&c->lock);
    }
    pthread_mutex_unlock(&c->lock);
    return NULL;
}

void vf__completer_add(vf__completer *c, vf__op *op)
{
    op->next = NULL;
    pthread_mutex_lock(&c->lock);
    if (c->tail != NULL)
        c->tail->next = op;
    else
        c->head = op;
    c->tail = op;
    if (c->sleeping)
        pthread_cond_signal(&c->cond);
    pthread_mutex_unlock(&c->lock);
}

int vf__completer_start(vf__completer *c)
{
    if (c->started)
        return 0;
    c->head = c->tail = NULL;
    c->stop = false;
    if (pthread_mutex_init(&c->lock, NULL) != 0)
        return vf__fail(VF_ESYSTEM, "the completer's lock");
    if (pthread_cond_init(&c->cond, NULL) != 0) {
        pthread_mutex_destroy(&c->lock);
        return vf__fail(VF_ESYSTEM, "the completer's condition variable");
    }
    int rc = pthread_create(&c->thread, NULL, completer_main, c);
    if (rc != 0) {
        pthread_cond_destroy(&c->cond);
        pthread_mutex_destroy(&c->lock);
        return vf__fail(VF_ESYSTEM, "no thread for the completer (%s)",
                        strerror(rc));
    }
    c->started = true;
    return 0;
}

void vf__completer_stop(vf__completer *c)
{
    if (!c->started)
        return;
    pthread_mutex_lock(&c->lock);
    c->stop = true;
    pthread_cond_signal(&c->cond);
    pthread_mutex_unlock(&c->lock);
    pthread_join(c->thread, NULL);
    VF__ASSERT(c->head == NULL);
    pthread_cond_destroy(&c->cond);
    pthread_mutex_destroy(&c->lock);
    c->started = false;
}

void vf__completer_forget(vf__completer *c)
{
    c->started = false; /* its thread is the parent's */
    c->head = c->tail = NULL;
}
