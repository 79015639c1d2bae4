/*
 * check.h: the assertions every varflow test program uses.
 *
 * A failing check prints file:line, the expression, the values that differed
 * and the test's random seed, and counts the failure; the program goes on so
 * one run shows every failure, and check_finish() turns the count into the
 * exit status CTest reads. CHECK_OK also prints the VF_E* name and the
 * engine's detail message for the call that failed.
 */
#ifndef VF_TEST_CHECK_H
#define VF_TEST_CHECK_H

#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <varflow.h>

/* Atomic so that checks may fail on several threads at once. */
static _Atomic int check_failures_;
static uint64_t check_seed_;
/* What the test is doing now (e.g. the engine kind), printed with every
 * failure when set. Set it only while no other thread runs checks. */
static const char *check_context_;

/* The seed for this run: VF_TEST_SEED if set, else the clock. Printed with
 * every failure so a run can be replayed. */
static inline uint64_t check_seed(void)
{
    if (check_seed_ == 0) {
        const char *s = getenv("VF_TEST_SEED");
        check_seed_ = s ? strtoull(s, NULL, 0) : (uint64_t)time(NULL);
        if (check_seed_ == 0)
            check_seed_ = 1;
    }
    return check_seed_;
}

#define CHECK_REPORT_(...)                                                     \
    do {                                                                       \
        fprintf(stderr, "%s:%d: check failed: ", __FILE__, __LINE__);          \
        fprintf(stderr, __VA_ARGS__);                                          \
        if (check_context_)                                                    \
            fprintf(stderr, " [%s]", check_context_);                          \
        fprintf(stderr, " (seed %" PRIu64 ")\n", check_seed_);                 \
        check_failures_++;                                                     \
    } while (0)

#define CHECK(cond)                                                            \
    do {                                                                       \
        if (!(cond))                                                           \
            CHECK_REPORT_("%s", #cond);                                        \
    } while (0)

#define CHECK_EQ(a, b)                                                         \
    do {                                                                       \
        long long a_ = (long long)(a), b_ = (long long)(b);                    \
        if (a_ != b_)                                                          \
            CHECK_REPORT_("%s == %s: %lld != %lld", #a, #b, a_, b_);           \
    } while (0)

/* The call must return 0. */
#define CHECK_OK(expr)                                                         \
    do {                                                                       \
        int rc_ = (expr);                                                      \
        if (rc_ != 0)                                                          \
            CHECK_REPORT_("%s returned %s (%s)", #expr, vf_error_name(rc_),    \
                          vf_error_detail());                                  \
    } while (0)

/* The call must return exactly the VF_E* code `code`. */
#define CHECK_ERR(expr, code)                                                  \
    do {                                                                       \
        int rc_ = (expr);                                                      \
        if (rc_ != (code))                                                     \
            CHECK_REPORT_("%s returned %s, expected %s", #expr,                \
                          vf_error_name(rc_), vf_error_name(code));            \
    } while (0)

/* Stop the test at once (a later step cannot run without this one). */
#define REQUIRE(cond)                                                          \
    do {                                                                       \
        if (!(cond)) {                                                         \
            CHECK_REPORT_("required: %s", #cond);                              \
            exit(1);                                                           \
        }                                                                      \
    } while (0)

/* Exit status for main: prints a one-line verdict. */
static inline int check_finish(const char *test)
{
    int failures = atomic_load(&check_failures_);
    if (failures)
        fprintf(stderr, "%s: %d check(s) failed (seed %" PRIu64 ")\n", test,
                failures, check_seed_);
    else
        printf("%s: ok\n", test);
    return failures ? 1 : 0;
}

#endif /* VF_TEST_CHECK_H */
