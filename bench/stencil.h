/*
 * W9's compute kernel: a busy floating-point loop that a stencil task runs
 * for a calibrated time (Task Bench's compute-bound kernel, kept bounded).
 *
 * The loop updates BENCH_FLOP_LANES independent doubles, each
 * a = a * c + d with c = 1 - 2^-10 and d = 2^-11: every value starts in
 * [0.5, 1) (drawn from the seed) and falls towards the fixed point 0.5, so
 * no value overflows or goes denormal, and each iteration costs the same
 * whatever the count. The lanes are independent chains, so the loop is
 * bound by the floating-point units, not by one chain's latency, and it
 * touches no memory. Its result folds every lane's bits, so no compiler can
 * drop the work.
 *
 * Built once, by the C compiler, into a library of its own (as W8's
 * kernels are: CMakeLists.txt, bench_sparselu), with no fused multiply-add,
 * and linked into every binary: every engine runs the same machine code,
 * and a result computed by one binary is bit for bit the one the serial
 * reference (shared in build-bench/refs/) computed in another.
 */
#ifndef VF_BENCH_STENCIL_H
#define VF_BENCH_STENCIL_H

#include <stdint.h>

enum {
    BENCH_FLOP_LANES = 16,
    BENCH_FLOPS_PER_ITER = 2 * BENCH_FLOP_LANES, /* a multiply, an add */
};

/* Run `iters` iterations of the loop from a state drawn from `seed`;
 * returns a 64-bit fold of the final state. Pure: the same arguments give
 * the same result in every binary. */
uint64_t bench_flop_loop(uint64_t seed, uint64_t iters);

/* Nanoseconds per iteration of bench_flop_loop on this machine: the fastest
 * of 15 timed passes of about a millisecond (the least disturbed by other
 * processes). Takes ~20 ms. */
double bench_flop_calibrate(void);

#endif /* VF_BENCH_STENCIL_H */
