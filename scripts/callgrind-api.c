/*
 * callgrind-api.c: instructions per op of the calls issue 19 item 4 added
 * (copied arguments, vf_operator_push_arg, vf_var_of), beside the paths
 * they extend, counted by callgrind as bench/callgrind.py counts the
 * workloads: the naive engine (each op runs inside its push, so the count
 * is the whole trip), empty ops, the region from the first push to the
 * return of vf_engine_wait_all, at N and 2N ops: (I(2N) - I(N)) / N.
 *
 *   scripts/callgrind-api [BUILD]     (BUILD: a Release tree with
 *                                      varflow/libvarflow.a, build-bench)
 *
 * Modes (each op writes one of 1024 vars, in turn):
 *   push          vf_engine_push, arg a pointer (W1's op, with a done)
 *   push-copy16   the same with a 16-byte argument copied (arg_size 16)
 *   push-copy256  a 256-byte argument (over VF_OP_ARG_INLINE: malloc'd)
 *   push-var-of   vf_engine_push whose var comes from vf_var_of(address)
 *   var-of        vf_var_of alone (a hit), no push
 *   opr           vf_operator_push of one of 1024 operators
 *   opr-arg0      vf_operator_push_arg, arg a pointer (arg_size 0)
 *   opr-arg16     vf_operator_push_arg with a 16-byte argument copied
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <valgrind/callgrind.h>
#include <varflow.h>

#define NV 1024

static int empty(vf_run *run, void *arg)
{
    (void)run;
    (void)arg;
    return 0;
}

static void nothing(void *arg, int status)
{
    (void)arg;
    (void)status;
}

static vf_engine *e;
static vf_var vars[NV];
static vf_operator *oprs[NV];
static char addrs[NV];
static struct {
    char bytes[256];
} payload;

enum mode { PUSH, PUSH_COPY, PUSH_VAR_OF, VAR_OF, OPR, OPR_ARG };
static enum mode mode;
static size_t size; /* the copied argument's */

static void run(long n)
{
    long sink = 0;
    for (long i = 0; i < n; i++) {
        int k = (int)(i % NV);
        vf_var v;
        switch (mode) {
        case PUSH:
        case PUSH_COPY:
            vf_engine_push(e, &(vf_op){.fn = empty,
                                       .arg = &payload,
                                       .arg_size = size,
                                       .done = nothing,
                                       .writes = {&vars[k], 1}});
            break;
        case PUSH_VAR_OF:
            vf_var_of(e, &addrs[k], &v);
            vf_engine_push(e, &(vf_op){.fn = empty,
                                       .arg = &payload,
                                       .done = nothing,
                                       .writes = {&v, 1}});
            break;
        case VAR_OF:
            vf_var_of(e, &addrs[k], &v);
            sink += (long)v.id;
            break;
        case OPR:
            vf_operator_push(e, oprs[k], 0);
            break;
        case OPR_ARG:
            vf_operator_push_arg(e, oprs[k], 0, &payload, size);
            break;
        }
    }
    vf_engine_wait_all(e, NULL);
    if (sink == 42)
        puts("");
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s MODE N\n", argv[0]);
        return 2;
    }
    const char *m = argv[1];
    long n = atol(argv[2]);
    if (strncmp(m, "push-copy", 9) == 0)
        mode = PUSH_COPY, size = (size_t)atoi(m + 9);
    else if (strncmp(m, "opr-arg", 7) == 0)
        mode = OPR_ARG, size = (size_t)atoi(m + 7);
    else if (strcmp(m, "push-var-of") == 0)
        mode = PUSH_VAR_OF;
    else if (strcmp(m, "var-of") == 0)
        mode = VAR_OF;
    else if (strcmp(m, "opr") == 0)
        mode = OPR;
    else if (strcmp(m, "push") == 0)
        mode = PUSH;
    else
        return 2;
    if (vf_engine_create(&e, &(vf_config){.type = VF_ENGINE_NAIVE}) != 0)
        return 1;
    for (int i = 0; i < NV; i++) {
        vf_var_create(e, &vars[i]);
        vf_operator_create(e,
                           &(vf_op){.fn = empty,
                                    .arg = &payload,
                                    .done = nothing,
                                    .writes = {&vars[i], 1}},
                           &oprs[i]);
        vf_var v;
        vf_var_of(e, &addrs[i], &v); /* every address known: hits */
    }
    run(n); /* warm up: free lists, tables */
    CALLGRIND_ZERO_STATS;
    run(n);
    CALLGRIND_DUMP_STATS;
    for (int i = 0; i < NV; i++)
        vf_operator_destroy(e, oprs[i]);
    return vf_engine_destroy(e) == 0 ? 0 : 1;
}
