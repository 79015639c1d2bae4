/* sched.c: worker pools, ready queues, stealing and sleeping (see sched.h). */
#include "core/sched.h"

#include <limits.h>

#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "base/stack.h"
#include "core/config.h"

/* A pool's sleepers are its workers (a nested waiter is one of them). */
_Static_assert(VF__MAX_WORKERS < 0xffff,
               "a pool's sleepers fit the event count's 16 bits (ecount.h)");

/* The worker this thread is (sched.h reads it inline), or NULL. */
_Thread_local vf__worker *vf__this_worker_;
static _Thread_local unsigned round_robin;

/* --- the ready queue: a FIFO lane and an intrusive pairing heap ---------- */

/* Whether a runs before b: higher priority, then earlier arrival (seq
 * counts arrivals in 32 bits: compared as a difference, it stays right
 * across a wrap while the heap's ops are fewer than 2^31 apart). */
static bool runs_before(const vf__op *a, const vf__op *b)
{
    return a->priority != b->priority ? a->priority > b->priority
                                      : (int32_t)(a->seq - b->seq) < 0;
}

static vf__op *meld(vf__op *a, vf__op *b)
{
    if (a == NULL)
        return b;
    if (b == NULL)
        return a;
    if (runs_before(b, a)) {
        vf__op *t = a;
        a = b;
        b = t;
    }
    b->next = a->child;
    a->child = b;
    return a;
}

/* Two-pass pairing of a root's children, iterative (no recursion depth). */
static vf__op *merge_children(vf__op *c)
{
    vf__op *pairs = NULL; /* melded pairs, in reverse order */
    while (c != NULL) {
        vf__op *a = c, *b = c->next;
        if (b == NULL) {
            a->next = pairs;
            pairs = a;
            break;
        }
        c = b->next;
        a->next = b->next = NULL;
        vf__op *m = meld(a, b);
        m->next = pairs;
        pairs = m;
    }
    vf__op *root = NULL;
    while (pairs != NULL) {
        vf__op *next = pairs->next;
        pairs->next = NULL;
        root = meld(root, pairs);
        pairs = next;
    }
    return root;
}

/* The lane is doubly linked: `next` toward the tail, and `child`, which
 * only the heap uses otherwise, back toward the head (lane_prev), so a
 * thief can take the oldest child at the tail (try_steal). */
static vf__op **lane_prev(vf__op *op)
{
    return &op->child;
}

/* Under w->qlock, once the heap's root changed: its mirror (sched.h). */
static void mirror_heap_top(vf__worker *w)
{
    atomic_store_explicit(&w->heap_top,
                          w->root != NULL ? w->root->priority : INT_MIN,
                          memory_order_relaxed);
}

/* Under w->qlock: one more op queued (vf__pool_look_same). */
static void count_arrival(vf__worker *w)
{
    atomic_store_explicit(
        &w->arrivals,
        atomic_load_explicit(&w->arrivals, memory_order_relaxed) + 1,
        memory_order_relaxed);
}

/* Under w->qlock. Priority 0, nearly every op, goes to the FIFO lane in
 * O(1); other priorities to the heap. */
static void queue_push(vf__worker *w, vf__op *op)
{
    op->next = op->child = NULL;
    w->len++;
    count_arrival(w);
    if (op->priority == 0) {
        *lane_prev(op) = w->fifo_tail;
        if (w->fifo_tail != NULL)
            w->fifo_tail->next = op;
        else
            w->fifo_head = op;
        w->fifo_tail = op;
        return;
    }
    op->seq = w->next_seq++;
    w->root = meld(w->root, op);
    mirror_heap_top(w);
}

/* Under w->qlock: take the lane's head (there is one). */
static vf__op *lane_pop(vf__worker *w)
{
    vf__op *top = w->fifo_head;
    w->len--;
    w->fifo_head = top->next;
    if (w->fifo_head == NULL)
        w->fifo_tail = NULL;
    else
        *lane_prev(w->fifo_head) = NULL;
    top->next = *lane_prev(top) = NULL;
    return top;
}

/* Under w->qlock: take the lane's tail (there is one). */
static vf__op *lane_pop_tail(vf__worker *w)
{
    vf__op *last = w->fifo_tail;
    w->len--;
    w->fifo_tail = *lane_prev(last);
    if (w->fifo_tail == NULL)
        w->fifo_head = NULL;
    else
        w->fifo_tail->next = NULL;
    last->next = *lane_prev(last) = NULL;
    return last;
}

/* Under w->qlock: take `op`, found at *link (the root's place, a parent's
 * first child or a sibling's next), out of the heap. Its siblings keep
 * their places (under the same parent, which runs before them all); its
 * children, each no earlier than it, are paired and melded with the root. */
static vf__op *heap_unlink(vf__worker *w, vf__op **link, vf__op *op)
{
    if (op->priority > 0)
        atomic_fetch_sub_explicit(&w->pool->queued_above0, 1,
                                  memory_order_relaxed);
    *link = op->next;
    vf__op *children = merge_children(op->child);
    op->child = op->next = NULL;
    w->root = meld(w->root, children);
    w->len--;
    mirror_heap_top(w);
    return op;
}

/* Under w->qlock: take the heap's best op (there is one). */
static vf__op *heap_pop(vf__worker *w)
{
    return heap_unlink(w, &w->root, w->root);
}

/* Under w->qlock: whether the lane's head runs before the heap's best:
 * unless the heap holds a higher priority (positive); negative ones wait
 * for the lane to empty. */
static bool lane_first(const vf__worker *w)
{
    return w->fifo_head != NULL && (w->root == NULL || w->root->priority < 0);
}

/* Under w->qlock; the queue must not be empty. */
static vf__op *queue_pop(vf__worker *w)
{
    return lane_first(w) ? lane_pop(w) : heap_pop(w);
}

/* Under w->qlock: `op` (priority 0) at the lane's head, where w runs it
 * next: a push from inside a running op (vf__pool_submit_nested), or an op
 * w was about to run, put back (queue_put_back). */
static void lane_push_front(vf__worker *w, vf__op *op)
{
    op->next = w->fifo_head;
    *lane_prev(op) = NULL;
    if (w->fifo_head != NULL)
        *lane_prev(w->fifo_head) = op;
    else
        w->fifo_tail = op;
    w->fifo_head = op;
    w->len++;
    count_arrival(w);
}

/* Under w->qlock: queue_push of an op new to the pool's queues (not one
 * an inbox held: it was counted there), counted in queued_above0. */
static void queue_push_new(vf__worker *w, vf__op *op)
{
    if (op->priority > 0)
        atomic_fetch_add_explicit(&w->pool->queued_above0, 1,
                                  memory_order_relaxed);
    queue_push(w, op);
}

/* Under w->qlock: `op`, which w was about to run (popped from its queue,
 * or handed off), back where it came from: the lane's head, or the heap
 * in its old turn among its equals. */
static void queue_put_back(vf__worker *w, vf__op *op)
{
    if (op->priority == 0) {
        lane_push_front(w, op);
        return;
    }
    w->len++;
    count_arrival(w);
    if (op->priority > 0)
        atomic_fetch_add_explicit(&w->pool->queued_above0, 1,
                                  memory_order_relaxed);
    op->next = op->child = NULL;
    w->root = meld(w->root, op);
    mirror_heap_top(w);
}

/* How far into a lane a waiter looks for an op it may run above its
 * wait. */
#define ABOVE_SCAN 32

/* Under w->qlock: take `op` out of the lane. */
static vf__op *lane_unlink(vf__worker *w, vf__op *op)
{
    vf__op *prev = *lane_prev(op), *next = op->next;
    if (prev != NULL)
        prev->next = next;
    else
        w->fifo_head = next;
    if (next != NULL)
        *lane_prev(next) = prev;
    else
        w->fifo_tail = prev;
    op->next = *lane_prev(op) = NULL;
    w->len--;
    return op;
}

/* Under w->qlock: for a thread waiting inside an op (exec.c), the first of
 * the lane's first ABOVE_SCAN ops that may run above its wait (`fits`: a
 * descendant of that op, say), taken out; or NULL.
 * A push from inside an op goes to the lane's front
 * (vf__pool_submit_nested), so the newest descendants are near its head,
 * the oldest near its tail: the waiter's own lane is looked at from the
 * head (what it pushed last, as its own run would go on), another's from
 * the tail (the largest piece there, as a thief takes). */
static vf__op *lane_take_above(vf__worker *w, const vf__pool_fits *fits,
                               bool from_tail)
{
    vf__op *op = from_tail ? w->fifo_tail : w->fifo_head;
    for (int i = 0; op != NULL && i < ABOVE_SCAN; i++) {
        if (fits->fn(op, fits->arg))
            return lane_unlink(w, op);
        op = from_tail ? *lane_prev(op) : op->next;
    }
    return NULL;
}

/* How many of a heap's ops a waiter looks at for one it may run. */
#define ABOVE_HEAP_SCAN 64

/* Under w->qlock: lane_take_above for the heap (ops with a priority),
 * breadth first from the root, among its first ABOVE_HEAP_SCAN ops: a
 * push melds an op that is not the best in as the root's first child, so
 * a waiter's newest children, pushed just before its wait, are near the
 * front there. */
static vf__op *heap_take_above(vf__worker *w, const vf__pool_fits *fits)
{
    vf__op **lists[ABOVE_HEAP_SCAN]; /* sibling lists to walk */
    int next = 0, nlists = 0, seen = 0;
    if (w->root != NULL)
        lists[nlists++] = &w->root;
    while (next < nlists) {
        for (vf__op **link = lists[next++]; *link != NULL;
             link = &(*link)->next) {
            vf__op *op = *link;
            if (fits->fn(op, fits->arg))
                return heap_unlink(w, link, op);
            if (++seen == ABOVE_HEAP_SCAN)
                return NULL;
            if (op->child != NULL && nlists < ABOVE_HEAP_SCAN)
                lists[nlists++] = &op->child;
        }
    }
    return NULL;
}

/* --- waking ------------------------------------------------------------ */

static bool has_work(const vf__worker *w)
{
    return atomic_load(&w->qlen) > 0 || atomic_load(&w->inbox) != NULL;
}

static bool any_queued(const vf__pool *p)
{
    if (p->spread && vf__this_worker_ != NULL && vf__this_worker_->pool == p)
        return has_work(vf__this_worker_); /* only its own */
    for (int i = 0; i < p->nworkers; i++)
        if (has_work(&p->workers[i]))
            return true;
    return false;
}

/* Work was queued: wake a sleeper unless a spinner will find it. With
 * nobody to wake (nobody asleep, the common case while workers are busy,
 * or every sleeper already owed a wake), this is one load. */
static void maybe_wake_one(vf__pool *p)
{
    if (vf__ecount_unwoken(&p->sleepers) > 0 && atomic_load(&p->nspinning) == 0)
        vf__ecount_notify(&p->sleepers, false);
}

void vf__pool_nudge(vf__pool *p)
{
    maybe_wake_one(p);
}

void vf__pool_wake_all(vf__pool *p)
{
    if (vf__ecount_waiters(&p->sleepers) > 0)
        vf__ecount_notify(&p->sleepers, true);
}

void vf__pool_wake_tag(vf__pool *p, unsigned tag)
{
    vf__ecount_wake_tag(&p->sleepers, tag);
}

/* --- placing and taking ------------------------------------------------ */

/* Where the pool counts its inboxes (count_inbox: run_at_push), add
 * (`sign` 1, before the chain goes on) or take off (-1, after a drain took
 * it) the chain `op`.. in w's inbox_len. Apart from the placing and
 * draining loops, so a pool that does not count pays one test. */
static void inbox_count(vf__worker *w, const vf__op *op, int sign)
{
    int n = 0;
    for (; op != NULL; op = op->next)
        n++;
    atomic_fetch_add_explicit(&w->inbox_len, sign * n, memory_order_relaxed);
}

/* The chain `op`.. holds `above0` ops of a priority above 0: counted
 * (`sign` 1: before the chain goes on w's inbox, release, and in the
 * pool's queued_above0) or taken off w's count (-1: a drain moved them
 * into w's queue, where the pool still counts them). Out of line: a chain
 * of priority-0 ops, nearly every one, never comes here. */
static __attribute__((noinline)) void inbox_above0_count(vf__worker *w,
                                                         int above0, int sign)
{
    if (sign > 0)
        atomic_fetch_add_explicit(&w->pool->queued_above0, above0,
                                  memory_order_relaxed);
    atomic_fetch_add_explicit(&w->inbox_above0, sign * above0,
                              memory_order_release);
}

/* Under w->qlock: move the inbox into the queue, oldest first. */
static void drain_inbox(vf__worker *w)
{
    vf__op *stack = atomic_exchange_explicit(&w->inbox, NULL,
                                             memory_order_acquire);
    vf__op *fifo = NULL;
    int above0 = 0;
    while (stack != NULL) { /* newest first: reverse */
        vf__op *next = stack->next;
        above0 += stack->priority > 0;
        stack->next = fifo;
        fifo = stack;
        stack = next;
    }
    if (VF__UNLIKELY(above0 != 0))
        inbox_above0_count(w, above0, -1);
    if (w->pool->count_inbox)
        inbox_count(w, fifo, -1);
    while (fifo != NULL) {
        vf__op *next = fifo->next;
        queue_push(w, fifo);
        fifo = next;
    }
}

/* Put the chain `first`.. (linked by `next`, oldest first) on w's inbox
 * with one compare-and-swap (seq_cst: sleepers rescan inboxes, see
 * sched.h). The inbox is a stack, newest on top, that drain_inbox
 * reverses: the chain goes on reversed, its oldest op deepest, so the
 * drain gives the ops below it, then the chain's in arrival order. */
static void inbox_push_chain(vf__worker *w, vf__op *first)
{
    vf__op *top = NULL, *op = first;
    int above0 = 0;
    while (op != NULL) {
        vf__op *next = op->next;
        above0 += op->priority > 0;
        op->next = top;
        top = op;
        op = next;
    }
    /* Before it can be drained. */
    if (VF__UNLIKELY(above0 != 0))
        inbox_above0_count(w, above0, 1);
    if (w->pool->count_inbox)
        inbox_count(w, top, 1);
    vf__op *head = atomic_load_explicit(&w->inbox, memory_order_relaxed);
    do {
        first->next = head;
    } while (!atomic_compare_exchange_weak(&w->inbox, &head, top));
}

/* A device pool: every op to the next worker's inbox in turn (each worker
 * takes only its own: the ops spread over the streams), and the sleepers
 * all woken, since the one whose inbox got an op may be any of them. */
static void place_spread(vf__pool *p, vf__op *first)
{
    while (first != NULL) {
        vf__op *op = first;
        first = op->next;
        op->next = NULL;
        vf__worker *w = &p->workers[round_robin++ % (unsigned)p->nworkers];
        inbox_push_chain(w, op);
        /* After the push: its thread may take it (vf__pool_queued_stuck). */
        atomic_store(&w->refusing, false);
    }
    vf__pool_wake_all(p);
}

/* Place the chain `first`.. (linked by `next`, oldest first, not empty) as
 * one batch (sched.h). */
static void place_chain(vf__pool *p, vf__op *first)
{
    if (VF__UNLIKELY(p->spread)) {
        place_spread(p, first);
        return;
    }
    vf__worker *w = vf__this_worker_;
    if (w != NULL && w->pool == p && !w->spare) {
        pthread_mutex_lock(&w->qlock); /* its own queue: no one else's */
        while (first != NULL) {
            vf__op *op = first;
            first = op->next;
            queue_push_new(w, op);
        }
        atomic_store(&w->qlen, w->len);
        pthread_mutex_unlock(&w->qlock);
    } else {
        inbox_push_chain(&p->workers[round_robin++ % (unsigned)p->nworkers],
                         first);
    }
    maybe_wake_one(p);
}

void vf__pool_submit_to(vf__pool *p, int i, vf__op *op)
{
    op->next = NULL;
    inbox_push_chain(&p->workers[i], op);
    maybe_wake_one(p);
}

const vf__worker *vf__pool_next_target(const vf__pool *p)
{
    return &p->workers[round_robin % (unsigned)p->nworkers];
}

void vf__pool_submit(vf__pool *p, vf__op *op)
{
    op->next = NULL;
    place_chain(p, op);
}

void vf__pool_submit_list(vf__pool *p, vf__readylist *ops)
{
    if (ops->head == NULL)
        return;
    place_chain(p, ops->head);
    vf__readylist_init(ops);
}

void vf__pool_submit_nested(vf__pool *p, vf__op *op)
{
    vf__worker *w = vf__this_worker_;
    if (w == NULL || w->pool != p || w->spare || p->spread ||
        op->priority != 0) {
        vf__pool_submit(p, op);
        return;
    }
    pthread_mutex_lock(&w->qlock);
    lane_push_front(w, op);
    atomic_store(&w->qlen, w->len);
    pthread_mutex_unlock(&w->qlock);
    maybe_wake_one(p);
}

static bool lock_queue(vf__worker *w, bool *drained);
static void unlock_queue(vf__worker *w, bool drained);

/* Move o's inbox into its queue (another worker's). */
static void sort_in_inbox(vf__worker *o)
{
    bool drained;
    if (lock_queue(o, &drained))
        unlock_queue(o, drained);
}

/* An op of a priority above `than` (and above 0) queued on another worker
 * of w's pool, taken out, or NULL: the best of the heaps' tops, read from
 * their mirrors without the locks, then taken under its worker's lock. */
static vf__op *take_better_elsewhere(vf__worker *w, int than)
{
    vf__pool *p = w->pool;
    /* What queued_above0 counts: ops above 0, and above `than`. An inbox
     * tells how many such ops it holds, not their priorities: sorted in
     * first, so they rank by their heap's top with the others (ranked
     * behind any heap's positive top, a priority-100 op on a busy
     * worker's inbox waited for a third worker's priority-5 ops: the
     * reviewer). */
    for (int i = 0; i < p->nworkers; i++) {
        vf__worker *o = &p->workers[i];
        if (o != w &&
            atomic_load_explicit(&o->inbox_above0, memory_order_relaxed) > 0)
            sort_in_inbox(o);
    }
    vf__worker *from = NULL;
    int floor = than > 0 ? than : 0, best = floor;
    for (int i = 0; i < p->nworkers; i++) {
        vf__worker *o = &p->workers[i];
        if (o == w)
            continue;
        int top = atomic_load_explicit(&o->heap_top, memory_order_relaxed);
        if (top > best) {
            from = o;
            best = top;
        }
    }
    bool drained;
    if (from == NULL || !lock_queue(from, &drained))
        return NULL;
    vf__op *op = NULL;
    if (from->root != NULL && from->root->priority > floor)
        op = heap_pop(from);
    unlock_queue(from, drained);
    return op;
}

/* Rule 11 across the pool: `mine`, the op w would run next (from its own
 * queue or handed off; NULL: none), or, while the pool holds ops of a
 * priority above 0 (queued_above0), a higher one of another worker's
 * queue, `mine` then going back to w's queue. A device pool (spread) keeps
 * each worker's ops on its own stream: its priority orders each worker's
 * queue. */
static __attribute__((noinline)) vf__op *
prefer_the_pools_best_slow(vf__worker *w, vf__op *mine)
{
    vf__pool *p = w->pool;
    if (p->spread || w->spare || p->nworkers == 1)
        return mine;
    vf__op *better = take_better_elsewhere(w, mine != NULL ? mine->priority
                                                           : INT_MIN);
    if (better == NULL)
        return mine;
    if (mine != NULL) {
        pthread_mutex_lock(&w->qlock);
        queue_put_back(w, mine);
        atomic_store(&w->qlen, w->len);
        pthread_mutex_unlock(&w->qlock);
        maybe_wake_one(p);
    }
    return better;
}

/* Out of line past one load: a pool with no op above priority 0 queued,
 * nearly every one, pays that. */
static inline vf__op *prefer_the_pools_best(vf__worker *w, vf__op *mine)
{
    if (VF__LIKELY(atomic_load_explicit(&w->pool->queued_above0,
                                        memory_order_relaxed) <= 0))
        return mine;
    return prefer_the_pools_best_slow(w, mine);
}

vf__op *vf__worker_place(vf__worker *w, vf__readylist *mine, bool pool_wide)
{
    if (mine->count == 0)
        return NULL;
    if (VF__UNLIKELY(w->pool->spread)) {
        vf__pool_submit_list(w->pool, mine);
        return NULL;
    }
    if (VF__UNLIKELY(w->spare)) { /* no queue: run one, place the rest */
        vf__op *first = vf__readylist_pop(mine);
        vf__pool_submit_list(w->pool, mine);
        return first;
    }
    if (mine->count == 1 &&
        atomic_load_explicit(&w->qlen, memory_order_relaxed) == 0 &&
        atomic_load_explicit(&w->inbox, memory_order_relaxed) == NULL)
        /* hand-off: no queue round trip */
        return pool_wide ? prefer_the_pools_best(w, vf__readylist_pop(mine))
                         : vf__readylist_pop(mine);
    pthread_mutex_lock(&w->qlock);
    if (atomic_load_explicit(&w->inbox, memory_order_relaxed) != NULL)
        drain_inbox(w); /* older than `mine`: they queue first */
    vf__op *op;
    while ((op = vf__readylist_pop(mine)) != NULL)
        queue_push_new(w, op);
    vf__op *best = queue_pop(w);
    int left = w->len;
    atomic_store(&w->qlen, left);
    pthread_mutex_unlock(&w->qlock);
    if (left > 0)
        maybe_wake_one(w->pool);
    return pool_wide ? prefer_the_pools_best(w, best) : best;
}

/* Lock w's queue with its inbox moved in; false (not locked) when both
 * look empty. *drained (if not NULL) tells whether this call moved the
 * inbox in. */
static bool lock_queue(vf__worker *w, bool *drained)
{
    if (atomic_load_explicit(&w->qlen, memory_order_relaxed) == 0 &&
        atomic_load_explicit(&w->inbox, memory_order_relaxed) == NULL)
        return false;
    pthread_mutex_lock(&w->qlock);
    bool moved = atomic_load_explicit(&w->inbox, memory_order_relaxed) != NULL;
    if (moved)
        drain_inbox(w);
    if (drained != NULL)
        *drained = moved;
    return true;
}

/* Unlock w's queue (lock_queue), its length stored in qlen. A thread that
 * is not w's and moved w's inbox in (`drained`) wakes the pool when it
 * leaves ops there: between the move and its store of qlen, w's thread may
 * have read qlen, then the inbox, found both empty, and gone to sleep
 * (sleepers rescan in that order), and nothing else would wake it for those
 * ops: in a device pool nobody else takes them unless it waits, and a
 * thread helping from outside (vf__pool_take) passes no baton (a helping
 * vf_engine_wait_all hung beside sleeping workers, 1 run in about 30,000:
 * the reviewer of take_better_elsewhere). */
static void unlock_queue(vf__worker *w, bool drained)
{
    int left = w->len;
    atomic_store(&w->qlen, left);
    pthread_mutex_unlock(&w->qlock);
    if (VF__UNLIKELY(drained) && left > 0 && w != vf__this_worker_) {
        if (w->pool->spread)
            vf__pool_wake_all(w->pool);
        else
            maybe_wake_one(w->pool);
    }
}

/* The best op of w's queue, taken out, or NULL. A `thief` (another thread
 * of the pool) takes the lane's tail instead when that is an op pushed
 * from inside a running op: the oldest of the owner's children there,
 * which in a recursion holds the largest piece of work (a deque's steal
 * end, as Cilk and TBB steal), where the head holds the smallest, which
 * the owner runs next itself. Otherwise a thief takes what the owner
 * would (the lane's head keeps top-level ops in arrival order). */
static vf__op *try_take(vf__worker *w, bool thief)
{
    bool drained = false;
    if (!lock_queue(w, thief ? &drained : NULL))
        return NULL;
    vf__op *op = NULL;
    if (w->len > 0)
        op = thief && lane_first(w) && w->fifo_tail->nest != 0
                 ? lane_pop_tail(w)
                 : queue_pop(w);
    unlock_queue(w, drained);
    return op;
}

/* try_take for a waiter: an op that fits, in the lane, else in the heap. */
static vf__op *try_take_above(vf__worker *w, const vf__pool_fits *fits,
                              bool from_tail)
{
    bool drained;
    if (!lock_queue(w, &drained))
        return NULL;
    vf__op *op = lane_take_above(w, fits, from_tail);
    if (op == NULL)
        op = heap_take_above(w, fits);
    unlock_queue(w, drained);
    return op;
}

/* Where a thread of the pool starts stealing: after its own queue, or,
 * for a spare (which has none), anywhere in turn. */
static int steal_from(vf__worker *w, int *first)
{
    vf__pool *p = w->pool;
    if (VF__UNLIKELY(w->spare)) {
        *first = 0;
        return (int)(round_robin++ % (unsigned)p->nworkers);
    }
    *first = 1;
    return (int)(w - p->workers);
}

vf__op *vf__worker_take_above(vf__worker *w, const vf__pool_fits *fits)
{
    vf__pool *p = w->pool;
    if (p->spread) /* before the look: a placing after it clears it */
        atomic_store(&w->refusing, true);
    vf__op *op = try_take_above(w, fits, false);
    int first, self = steal_from(w, &first);
    for (int i = first; i < p->nworkers && op == NULL; i++) {
        vf__worker *owner = &p->workers[(self + i) % p->nworkers];
        if (!p->spread ||
            atomic_load_explicit(&owner->waiting, memory_order_relaxed) > 0)
            op = try_take_above(owner, fits, true);
    }
    if (p->spread && op != NULL)
        atomic_store(&w->refusing, false);
    return op;
}

void vf__worker_refuses(vf__worker *w)
{
    if (w->pool->spread)
        atomic_store(&w->refusing, true);
}

void vf__worker_waiting(vf__worker *w, int delta)
{
    atomic_fetch_add_explicit(&w->waiting, delta, memory_order_relaxed);
    /* This wait (or an outer one, when it ends) has not looked yet; nor
     * has it when a push at the bound took nothing before. Only a device
     * pool's threads say so (vf__worker_take_above). */
    if (w->pool->spread)
        atomic_store(&w->refusing, false);
}

bool vf__pool_any_queued(const vf__pool *p)
{
    return any_queued(p);
}

vf__op *vf__worker_take(vf__worker *w)
{
    vf__op *op = prefer_the_pools_best(w, try_take(w, false));
    if (op != NULL || w->pool->spread)
        return op;
    vf__pool *p = w->pool;
    int first, self = steal_from(w, &first);
    for (int i = first; i < p->nworkers; i++) {
        op = try_take(&p->workers[(self + i) % p->nworkers], true);
        if (op != NULL)
            return op;
    }
    return NULL;
}

vf__op *vf__pool_take(vf__pool *p)
{
    for (int i = 0; i < p->nworkers; i++) {
        vf__op *op = try_take(
            &p->workers[(round_robin + (unsigned)i) % (unsigned)p->nworkers],
            true); /* a helping thread, not the queue's owner */
        if (op != NULL)
            return op;
    }
    return NULL;
}

/* --- idling ------------------------------------------------------------ */

#define SPIN_ROUNDS 64
#define YIELD_ROUNDS 8
#define LONG_SPIN_PAUSES 32

/* Whether the pool's idle workers may spin for a while (the runner's
 * spin_ns) before they sleep: while a thread of the program sleeps in one
 * of the engine's waits (it waits for the workers' work: a pushing thread
 * is better served by workers that sleep and catch up in a burst than by
 * one that reads its queue lines at every push), and the engine's threads
 * that are not asleep fit the CPUs. */
static bool may_spin_long(const vf__pool *p)
{
    const vf__pool_runner *r = &p->runner;
    return r->spin_ns != 0 && r->awake != NULL && r->program_asleep != NULL &&
           atomic_load_explicit(r->program_asleep, memory_order_relaxed) > 0 &&
           atomic_load_explicit(r->awake, memory_order_relaxed) <= r->ncpus;
}

/* Spin a little for new work (and, when may_spin_long, up to the runner's
 * spin_ns: the wake-up a sleep would cost the next op is far longer than
 * a short gap between two dependent steps); true if some was seen. While
 * this worker spins, placers skip waking sleepers; one that sees work and
 * stops spinning passes the baton by waking a sleeper when it was the
 * last spinner and more work is queued. */
static bool spin_for_work(vf__pool *p)
{
    atomic_fetch_add(&p->nspinning, 1);
    bool found = false;
    for (int i = 0; i < SPIN_ROUNDS + YIELD_ROUNDS && !found; i++) {
        found = any_queued(p) || atomic_load(&p->stop);
        if (!found) {
            if (i < SPIN_ROUNDS)
                vf__cpu_relax();
            else
                sched_yield();
        }
    }
    if (!found && may_spin_long(p)) {
        atomic_fetch_add_explicit(&p->long_spins, 1, memory_order_relaxed);
        vf__deadline until = vf__deadline_within_us(
            NULL, (int64_t)(p->runner.spin_ns / 1000));
        /* A look every LONG_SPIN_PAUSES pauses (about a microsecond): the
         * queues' lines are the pusher's, and a spinner reading them at
         * every pause would slow each push with the lines' transfers. */
        while (!found) {
            for (int i = 0; i < LONG_SPIN_PAUSES; i++)
                vf__cpu_relax();
            found = any_queued(p) || atomic_load(&p->stop);
            if (!found && (vf__deadline_passed(&until) || !may_spin_long(p)))
                break;
        }
    }
    if (atomic_fetch_sub(&p->nspinning, 1) == 1 && found)
        maybe_wake_one(p);
    return found;
}

/* Sleep as a member of `p` (vf__pool_idle_wait) until `wake_pred(arg)`,
 * the pool stops, or work comes: any queued for the pool, or, with
 * `inbox_of`, an op placed on that worker's inbox (vf__pool_wait_inbox). */
static void sleep_in_pool(vf__pool *p, const vf__worker *inbox_of,
                          bool (*wake_pred)(void *), void *arg, unsigned tag,
                          const vf__deadline *until)
{
    /* Counted in before the rescan, which sees anything placed before a
     * placer could read the count as zero (sched.h); an inbox push is
     * seq_cst, and a placer in a device pool wakes every sleeper
     * (place_spread). */
    uint32_t key = vf__ecount_prepare(&p->sleepers);
    bool work = inbox_of != NULL ? atomic_load(&inbox_of->inbox) != NULL
                                 : any_queued(p);
    if ((wake_pred && wake_pred(arg)) || work || atomic_load(&p->stop)) {
        vf__ecount_cancel(&p->sleepers);
        return;
    }
    atomic_int *awake = p->runner.awake;
    if (awake != NULL)
        atomic_fetch_sub_explicit(awake, 1, memory_order_relaxed);
    vf__ecount_wait_tagged(&p->sleepers, key, tag, until);
    if (awake != NULL)
        atomic_fetch_add_explicit(awake, 1, memory_order_relaxed);
}

void vf__pool_idle_wait(vf__pool *p, bool (*wake_pred)(void *), void *arg,
                        unsigned tag, const vf__deadline *until)
{
    sleep_in_pool(p, NULL, wake_pred, arg, tag, until);
}

void vf__pool_wait_inbox(vf__worker *w, bool (*wake_pred)(void *), void *arg,
                         unsigned tag, const vf__deadline *until)
{
    sleep_in_pool(w->pool, w, wake_pred, arg, tag, until);
}

/* A worker took queued work. If more is queued and nobody spins, wake a
 * sleeper for it: otherwise a worker woken for one op of a burst would leave
 * the rest to workers that sleep on (found by a 3-reader rendezvous on 3
 * workers). The cheap test of the waiter count comes first: with nobody
 * asleep there is nothing to do. */
static void pass_the_baton(vf__pool *p)
{
    if (vf__ecount_unwoken(&p->sleepers) > 0 &&
        atomic_load(&p->nspinning) == 0 && any_queued(p))
        vf__ecount_notify(&p->sleepers, false);
}

/* Whether work is held back for the pool (vf__pool_runner.held_back). */
static bool held_back(void *arg)
{
    const vf__pool *p = arg;
    return p->runner.held_back != NULL && p->runner.held_back(p);
}

/* Sleep until work comes; while work is held back for the pool, for
 * VF__POOL_HELD_BACK_US at most, and then, nothing queued meanwhile, have
 * it released. */
static void idle(vf__pool *p)
{
    /* Work held back after this look wakes the sleep (held_back is its
     * predicate, asked once the sleeper counts itself in), and the next
     * look sees it. */
    if (!held_back(p)) {
        vf__pool_idle_wait(p, held_back, p, 0, NULL);
        return;
    }
    vf__deadline until = vf__deadline_within_us(NULL, VF__POOL_HELD_BACK_US);
    vf__pool_idle_wait(p, NULL, NULL, 0, &until);
    if (vf__deadline_passed(&until) && held_back(p) && !any_queued(p) &&
        !atomic_load(&p->stop))
        p->runner.release_held_back(p);
}

static void *worker_main(void *arg)
{
    vf__worker *w = arg;
    vf__pool *p = w->pool;
    vf__this_worker_ = w;
    vf__stack_mark_top(); /* frames from here on count (base/stack.h) */
    char name[16];
    if (w->spare)
        snprintf(name, sizeof name, "vf-%s-spare", p->name);
    else
        snprintf(name, sizeof name, "vf-%s-%d", p->name, w->index);
    pthread_setname_np(pthread_self(), name);
    atomic_int *awake = p->runner.awake;
    if (awake != NULL)
        atomic_fetch_add_explicit(awake, 1, memory_order_relaxed);

    vf__op *next = NULL;
    for (;;) {
        /* Inline ops a nested wait left deferred on this thread. */
        if (next == NULL && p->runner.run_deferred(NULL))
            continue;
        vf__op *op = next;
        if (op == NULL && (op = vf__worker_take(w)) != NULL)
            pass_the_baton(p);
        if (op != NULL) {
            next = p->runner.execute(w, op);
            continue;
        }
        if (atomic_load(&p->stop) && !any_queued(p))
            break;
        if (!spin_for_work(p))
            idle(p);
    }
    if (awake != NULL)
        atomic_fetch_sub_explicit(awake, 1, memory_order_relaxed);
    vf__this_worker_ = NULL;
    return NULL;
}

/* --- spares ------------------------------------------------------------ */

/* 0, or the errno value pthread's call failed with. */
static int start_thread(vf__pool *p, vf__worker *w)
{
    /* The stack a thread gets bounds how deep ops nest on it: a nested
     * wait runs ops above itself only while the stack has room (exec.h).
     * A pinned worker starts on its CPU (vf__pool_runner.cpus). */
    const vf__pool_runner *r = &p->runner;
    pthread_attr_t attr;
    int rc = pthread_attr_init(&attr);
    if (rc != 0)
        return rc;
    size_t stack = r->stack_size, system;
    /* The system's default (RLIMIT_STACK) raised to the least a worker
     * may be given: at `ulimit -s 16` a recursion 10 levels deep
     * overflowed a worker inside its wait (found by a user tester). */
    if (stack == 0 && pthread_attr_getstacksize(&attr, &system) == 0 &&
        system < (size_t)VF__MIN_WORKER_STACK_KIB << 10)
        stack = (size_t)VF__MIN_WORKER_STACK_KIB << 10;
    if (stack != 0)
        (void)pthread_attr_setstacksize(&attr, stack);
    if (r->cpus != NULL && w->spare) {
        (void)pthread_attr_setaffinity_np(&attr, sizeof *r->spare_cpus,
                                          r->spare_cpus);
    } else if (r->cpus != NULL) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(r->cpus[(unsigned)w->index % (unsigned)r->ncpus_pinned], &set);
        (void)pthread_attr_setaffinity_np(&attr, sizeof set, &set);
    }
    rc = pthread_create(&w->thread, &attr, worker_main, w);
    pthread_attr_destroy(&attr);
    if (rc != 0)
        return rc;
    w->started = true;
    return 0;
}

static void init_worker(vf__worker *w, vf__pool *p, int index)
{
    pthread_mutex_init(&w->qlock, NULL);
    atomic_init(&w->qlen, 0);
    atomic_init(&w->arrivals, 0);
    atomic_init(&w->heap_top, INT_MIN);
    atomic_init(&w->inbox, NULL);
    atomic_init(&w->inbox_len, 0);
    atomic_init(&w->inbox_above0, 0);
    atomic_init(&w->ran, 0);
    atomic_init(&w->failed, 0);
    atomic_init(&w->skipped, 0);
    atomic_init(&w->waiting, 0);
    atomic_init(&w->refusing, false);
    w->pool = p;
    w->index = index;
    w->tag = 1 + p->threads_made++ % VF__ECOUNT_TAGS;
}

/* Every thread of the pool stuck: none would run what is queued. */
static bool all_stuck(vf__pool *p)
{
    return atomic_load(&p->nstuck) >= p->nworkers + atomic_load(&p->nspares);
}

void vf__pool_pass_on(vf__pool *p)
{
    pass_the_baton(p);
}

void vf__pool_stuck_enter(vf__pool *p)
{
    atomic_fetch_add(&p->nstuck, 1);
    vf__pool_stuck_again(p);
}

/* Under spare_lock: start a spare if every thread of the pool is stuck. */
static void lend_spare(vf__pool *p)
{
    if (!all_stuck(p) || atomic_load(&p->stop) ||
        atomic_load(&p->nspares) >= VF__MAX_SPARES)
        return;
    vf__worker *w = vf__aligned_calloc(VF__CACHELINE, sizeof *w);
    if (w == NULL)
        return;
    init_worker(w, p, -1);
    w->spare = true;
    if (start_thread(p, w) == 0) {
        w->next_spare = p->spares;
        p->spares = w;
        atomic_fetch_add(&p->nspares, 1);
        atomic_store(&p->spare_failed_since, 0);
    } else {
        /* No thread: the waiters poll on, and try again; meanwhile the
         * pool is out of spares (vf__pool_stuck_for_good). */
        pthread_mutex_destroy(&w->qlock);
        free(w);
        uint64_t never = 0;
        (void)atomic_compare_exchange_strong(&p->spare_failed_since, &never,
                                             vf__now_ns());
    }
}

void vf__pool_stuck_again(vf__pool *p)
{
    if (p->spread || !all_stuck(p) || atomic_load(&p->stop) ||
        atomic_load(&p->nspares) >= VF__MAX_SPARES)
        return;
    pthread_mutex_lock(&p->spare_lock);
    lend_spare(p);
    pthread_mutex_unlock(&p->spare_lock);
}

bool vf__pool_spare_failing(vf__pool *p)
{
    return atomic_load(&p->spare_failed_since) != 0 && all_stuck(p);
}

/* Whether the pool's spares have failed to start for VF__SPARE_FAIL_MS. */
static bool spares_failing_long(vf__pool *p)
{
    uint64_t since = atomic_load(&p->spare_failed_since);
    return since != 0 &&
           vf__now_ns() - since >= (uint64_t)VF__SPARE_FAIL_MS * 1000000u;
}

bool vf__pool_stuck_for_good(vf__pool *p)
{
    return p->spread ||
           (all_stuck(p) && (atomic_load(&p->nspares) >= VF__MAX_SPARES ||
                             spares_failing_long(p)));
}

uint64_t vf__pool_queued(const vf__pool *p)
{
    uint64_t n = 0;
    for (int i = 0; i < p->nworkers; i++) {
        const vf__worker *w = &p->workers[i];
        n += (uint64_t)atomic_load_explicit(&w->qlen, memory_order_relaxed) +
             (atomic_load_explicit(&w->inbox, memory_order_relaxed) != NULL);
    }
    return n;
}

bool vf__pool_look_same(const vf__pool *p, vf__pool_look *look)
{
    vf__pool_look now = {0, 0};
    bool inbox = false;
    for (int i = 0; i < p->nworkers; i++) {
        const vf__worker *w = &p->workers[i];
        /* Acquire: read before the look's locks that follow it. */
        now.arrivals += atomic_load_explicit(&w->arrivals,
                                             memory_order_acquire);
        now.queued += (uint64_t)atomic_load(&w->qlen);
        inbox |= atomic_load(&w->inbox) != NULL;
    }
    bool same = !inbox && now.arrivals == look->arrivals &&
                now.queued == look->queued;
    *look = now;
    return same;
}

uint64_t vf__pool_queued_stuck(vf__pool *p)
{
    if (!p->spread)
        return vf__pool_stuck_for_good(p) ? vf__pool_queued(p) : 0;
    uint64_t n = 0;
    for (int i = 0; i < p->nworkers; i++) {
        const vf__worker *w = &p->workers[i];
        /* The queue first: an op placed since clears the flag after. */
        uint64_t q = (uint64_t)atomic_load(&w->qlen) +
                     (atomic_load(&w->inbox) != NULL);
        if (q != 0 && atomic_load(&w->waiting) > 0 && atomic_load(&w->refusing))
            n += q;
    }
    return n;
}

void vf__pool_stuck_leave(vf__pool *p)
{
    atomic_fetch_sub(&p->nstuck, 1);
}

/* Join and free the spares (the pool stops). */
static void stop_spares(vf__pool *p)
{
    pthread_mutex_lock(&p->spare_lock);
    vf__worker *w = p->spares;
    p->spares = NULL;
    atomic_store(&p->nspares, 0);
    pthread_mutex_unlock(&p->spare_lock);
    while (w != NULL) {
        vf__worker *next = w->next_spare;
        pthread_join(w->thread, NULL);
        VF__ASSERT(w->len == 0 && atomic_load(&w->inbox) == NULL);
        pthread_mutex_destroy(&w->qlock);
        free(w);
        w = next;
    }
}

/* --- life cycle -------------------------------------------------------- */

int vf__pool_init(vf__pool *p, vf_engine *e, const vf__pool_runner *runner,
                  const char *name, int n, int first_index)
{
    memset(p, 0, sizeof *p);
    p->engine = e;
    p->runner = *runner;
    p->name = name;
    atomic_init(&p->nspinning, 0);
    atomic_init(&p->long_spins, 0);
    atomic_init(&p->refused_sleeps, 0);
    atomic_init(&p->stop, false);
    p->workers = vf__aligned_calloc(VF__CACHELINE,
                                    (size_t)n * sizeof *p->workers);
    if (p->workers == NULL)
        return vf__fail(VF_ENOMEM, "the %s pool's workers: out of memory",
                        name);
    if (vf__ecount_init(&p->sleepers) != 0) {
        free(p->workers);
        p->workers = NULL;
        return vf__fail(VF_ESYSTEM, "the %s pool's event count", name);
    }
    for (int i = 0; i < n; i++)
        init_worker(&p->workers[i], p, first_index + i);
    pthread_mutex_init(&p->spare_lock, NULL);
    atomic_init(&p->nspares, 0);
    atomic_init(&p->spare_failed_since, 0);
    atomic_init(&p->nstuck, 0);
    p->nworkers = n;
    return 0;
}

int vf__pool_start(vf__pool *p)
{
    atomic_store(&p->stop, false); /* started again after a stop */
    atomic_store(&p->spare_failed_since, 0);
    for (int i = 0; i < p->nworkers; i++) {
        int rc = start_thread(p, &p->workers[i]);
        if (rc != 0)
            return vf__fail(VF_ESYSTEM,
                            "no thread for worker %d of the %s pool (%s)", i,
                            p->name, strerror(rc));
    }
    return 0;
}

void vf__pool_stop(vf__pool *p)
{
    if (p->workers == NULL)
        return;
    /* Under spare_lock, so that no spare starts after the store. */
    pthread_mutex_lock(&p->spare_lock);
    atomic_store(&p->stop, true);
    pthread_mutex_unlock(&p->spare_lock);
    vf__pool_wake_all(p);
    for (int i = 0; i < p->nworkers; i++) {
        if (p->workers[i].started)
            pthread_join(p->workers[i].thread, NULL);
        p->workers[i].started = false;
    }
    stop_spares(p);
}

void vf__pool_destroy(vf__pool *p)
{
    if (p->workers == NULL)
        return;
    /* Every worker is joined before any queue is torn down: a worker still
     * running may be stealing from a queue whose owner has exited. */
    vf__pool_stop(p);
    for (int i = 0; i < p->nworkers; i++) {
        VF__ASSERT(p->workers[i].len == 0 &&
                   atomic_load(&p->workers[i].inbox) == NULL);
        pthread_mutex_destroy(&p->workers[i].qlock);
    }
    vf__ecount_destroy(&p->sleepers);
    pthread_mutex_destroy(&p->spare_lock);
    free(p->workers);
    p->workers = NULL;
}
