/*
 * chain.h: a read-modify-write chain for the lifecycle tests: every op
 * applies v = v * 31 + 7 to one value, on the host (chain_step) or as work
 * on its device stream (chain_step_on_device), so the final value tells
 * how many ops ran, in order, and serial_steps() says what it must be.
 */
#ifndef VF_TEST_CHAIN_H
#define VF_TEST_CHAIN_H

#include "util.h"

typedef struct chain {
    uint64_t value;
    atomic_int runs;
} chain;

static inline uint64_t chain_apply(chain *c)
{
    c->value = c->value * 31 + 7;
    atomic_fetch_add(&c->runs, 1);
    return c->value;
}

/* A host op: one step (arg: the chain). */
static inline int chain_step(vf_run *run, void *arg)
{
    (void)run;
    chain_apply(arg);
    return 0;
}

static inline int chain_device_work(void *arg)
{
    chain_apply(arg);
    return 0;
}

/* A device op: puts one step on its stream. */
static inline int chain_step_on_device(vf_run *run, void *arg)
{
    return vf_run_submit(run, chain_device_work, arg, 0);
}

/* The value after n steps from v. */
static inline uint64_t serial_steps(uint64_t v, int n)
{
    while (n-- > 0)
        v = v * 31 + 7;
    return v;
}

#endif /* VF_TEST_CHAIN_H */
