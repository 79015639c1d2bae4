/*
 * fuzz_engine.c: a libFuzzer harness for varflow (issue 4, point 5; issue
 * 17: failures are part of the serial result).
 *
 * Each input is decoded into a program of tests/failure_oracle.h, run on a
 * real engine (tests/failure_run.h) and compared, item by item, with what
 * the serial program gives (the oracle of issue 17's failure semantics,
 * the same one tests/test_failure_diff.c uses); any difference aborts
 * (libFuzzer then keeps the input as a crash): every op's done status and
 * whether its body ran, every wait's code and error (code, op name,
 * message) and the var's value and version right after it, every var's
 * final value and version (a deleted var: what its free callback saw), the
 * ran/failed/skipped stats, and calls that must succeed (or, for a push
 * with a deleted or foreign handle, be refused).
 *
 * Input format (every byte string is a valid program; decoding stops at the
 * end of the input or after MAXINSNS instructions):
 *   byte 0     engine: kind = b % 3 (naive, pooled, per-device),
 *              workers = 1 + (b / 3) % 2, bulk size (rule 13) =
 *              {0, 4, 64}[(b / 6) % 3], help_on_wait = (b / 18) % 2,
 *              max_inflight = {0, 3}[(b / 36) % 2], emulated device
 *              latency = {0, 20 us}[(b / 72) % 2]
 *   byte 1     main vars: 1 + b % MAXV; (b / MAXV) % 2: as graphs (issue
 *              30), each run of the main thread's pushes captured into a
 *              graph and launched (not with the chaos moves)
 *   then instructions, opcode = b % 16, thread = (b / 16) % 2 (used only
 *   inside a fork):
 *     0,1,2, 10-15 push: flags, counts (reads = c & 3, writes = (c >> 2) & 3),
 *                    then one byte per read and per write (var = b % the
 *                    vars in reach; repeats and a var both read and written
 *                    allowed). flags: 1 async, 2 and 4 both set: fails
 *                    (code 1000 + op, with a message), 8 no-skip, 16
 *                    CPU-prioritized (a device op: copy to device),
 *                    priority = (flags >> 5) - 3.
 *     3 nested push: as push, then one byte k: 1 + k % 3 children, which
 *                    the op pushes from inside when it runs, over a scratch
 *                    var of its own (each writes it; with bit 7 the later
 *                    ones read it too); child i fails if bit 2+i is set,
 *                    they are async if bit 6 is; then the op waits on the
 *                    scratch var (a nested wait) and fails (4242) when the
 *                    wait reports a failure.
 *     4 wait:        var byte: vf_var_wait.
 *     5 wait_all.
 *     6 delete:      var byte: vf_var_destroy; a new var takes its place.
 *     7 stale:       a push with a handle deleted earlier: VF_ESTALE (before
 *                    any delete: a handle of another engine, VF_EXDEV).
 *     8 push+:       one byte x, then as push: x & 3 = how it runs (sync,
 *                    async completed inline, async completed later by
 *                    another thread, a device op on emulated device
 *                    (x >> 2) & 1, its work failing when it fails); 8:
 *                    unnamed (reported as "op #N"; only before the first
 *                    nested push or fork); 16: when it fails, a sync op
 *                    returns VF_ESKIPPED and an async one ends with
 *                    vf_completion_fail; 32: no message.
 *     9 fork:        bytes n, m: the next 1 + n % 16 instructions form a
 *                    segment in which a second thread pushes the ones whose
 *                    thread bit is set, over vars of its own, while the main
 *                    thread pushes the others; then the main thread joins
 *                    it. The vars are split into two sides (bit j of m for
 *                    the j-th group of vars that share an unreported
 *                    failure; a wait_all first if a side would be empty),
 *                    and only the ops of side (n >> 4) & 1 may fail; inside
 *                    a segment only pushes and waits count (the other
 *                    instructions are read and dropped).
 *   The program ends with a wait_all.
 *
 * The chaos moves (issue 27; tests/failure_chaos.h), when byte 0 is 144 or
 * more: byte 0 - 144 is the engine byte above, then byte 1 as above, then
 * byte 2, the chaos byte c: 1 + c % 4 handshake pushers (a token passes
 * from step to step, so the steps run in program order whatever thread
 * makes each), VF_BULK_SIZE = {unset, 1, 8, 64}[(c / 4) % 4] in the
 * environment at engine creation, (c / 16) % 4 address vars (vf_var_of of
 * a data cell's address), children nested 1 + (c / 64) % 4 levels deep.
 * Then an instruction's thread is (b / 16) % the pushers, and:
 *     3 nested push: as above; when more than one level is allowed, one
 *                    more byte g after k: child j has children of its own
 *                    (read the same way, recursively) when bit j of g is
 *                    set and it is a sync op; child j runs on emulated
 *                    device j % 2 when bit 3 + j is set.
 *     9 stop/start:  vf_engine_stop by thread 0 (no byte), or, when
 *                    stopped, vf_engine_start; while stopped, waits (4, 5)
 *                    are read and dropped. The program starts the engine
 *                    before its last wait_all.
 *     13 address:    one byte b: address b % n; with bit 2 and its var
 *                    alive, vf_var_destroy of it; else a lookup (after a
 *                    destroy, the address's new var, on the same data
 *                    cell); without address vars, a push as before.
 * A move turned off by VF_CHAOS_MOVES (threads, nest, addr, stop, bulk)
 * reads its bytes and does nothing (one pusher, no bulk: neither
 * VF_BULK_SIZE nor the engine byte's, no address vars, one level, no
 * stop).
 *
 * Build: `make fuzz` (clang -fsanitize=fuzzer,address,undefined). Compiled
 * with VF_FUZZ_NO_MAIN defined by tests/test_fuzz_replay.c, which replays
 * the checked-in corpus (fuzz/corpus) and random inputs as a regular test.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <varflow.h>

#include "../tests/failure_run.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAXV 8
#define MAXINSNS 160 /* instructions per program */

/* Named in a failure report when set (the replay test sets the input). */
static const char *fuzz_context = "";
/* The replay test sets it: count differing inputs (and print the first
 * few) instead of aborting at the first. */
static bool fuzz_keep_going;
static long fuzz_differing, fuzz_print = 5;
/* The replay test sets it: print each program and the oracle's result. */
static bool fuzz_dump;

typedef struct dec {
    const uint8_t *p;
    size_t n;
    fo_prog *P;
    fo_result *scratch;
    int slot[MAXV], nslots;
    int dead[FO_MAXVARS], ndead;
    bool prefix;  /* no nested push or fork yet: unnamed ops allowed */
    int seg_left; /* instructions left in the segment, 0 outside */
    int side[2][MAXV], nside[2];
    int fails; /* the side whose ops may fail */
    /* the chaos moves (chaos: byte 0 >= 144) */
    bool chaos, stopped;
    bool graphs; /* byte 1: the runs of pushes captured and launched */
    int moves, depth, bulk_env;
    int acur[4], naddr; /* an address's var; -(old var) - 2 once destroyed */
    int cpool[FO_MAXVARS];
} dec;

static bool next(dec *d, uint8_t *out)
{
    if (d->n == 0)
        return false;
    *out = *d->p++;
    d->n--;
    return true;
}

static void add_step(dec *d, int kind, int thread, int arg)
{
    fo_prog *P = d->P;
    fo_step *st = &P->steps[P->nsteps++];
    *st = (fo_step){kind, thread, arg, 0};
    if (kind == FO_WAIT_VAR || kind == FO_WAIT_ALL)
        st->wait = P->nwaits++;
}

/* The vars an instruction of `thread` reaches, and how many. */
static const int *reach(dec *d, int thread, int *n)
{
    if (d->naddr > 0) { /* chaos: the slots and the address vars alive */
        *n = 0;
        for (int k = 0; k < d->nslots; k++)
            d->cpool[(*n)++] = d->slot[k];
        for (int a = 0; a < d->naddr; a++)
            if (d->acur[a] >= 0)
                d->cpool[(*n)++] = d->acur[a];
        return d->cpool;
    }
    if (d->seg_left == 0) {
        *n = d->nslots;
        return d->slot;
    }
    *n = d->nside[thread];
    return d->side[thread];
}

/* x: the push+ byte, or -1. How the op runs, fails and is named. */
static void decode_kind(dec *d, fo_op *o, int i, uint8_t flags, int x,
                        bool can_fail)
{
    o->how = flags & 1 ? FO_ASYNC_INLINE : FO_SYNC;
    o->message = true;
    if (x >= 0) {
        o->how = (fo_how)(x & 3);
        o->device = (x >> 2) & 1;
        o->message = !(x & 32);
    }
    o->no_skip = flags & 8;
    if (flags & 16)
        o->property = o->how == FO_DEVICE ? VF_PROP_COPY_TO_DEVICE
                                          : VF_PROP_CPU_PRIORITIZED;
    o->priority = (flags >> 5) - 3;
    if ((flags & 6) == 6 && can_fail) {
        o->code = 1000 + i;
        if (x >= 0 && (x & 16) && o->how == FO_SYNC)
            o->code = VF_ESKIPPED;
        else if (x >= 0 && (x & 16) && o->how != FO_DEVICE)
            o->cause = true;
    }
    if (x >= 0 && (x & 8) && d->prefix)
        o->name[0] = '\0';
    else
        snprintf(o->name, sizeof o->name, "op%d", i);
}

/* The children of op i (a nested push, at `level`: 1 for a top-level
 * op's) over a new scratch var; in chaos, their children. */
static void decode_kids(dec *d, int i, bool can_fail, int level)
{
    fo_prog *P = d->P;
    uint8_t b = 0, g = 0;
    (void)next(d, &b);
    if (level < d->depth)
        (void)next(d, &g);
    if (P->nvars >= FO_MAXVARS || P->nops + 3 >= FO_MAXOPS)
        return; /* no room for its scratch var: a plain push */
    d->prefix = false;
    fo_op *o = &P->ops[i];
    int scr = P->nvars++;
    o->nkids = 1 + b % 3;
    o->kid0 = P->nops;
    for (int j = 0; j < o->nkids; j++) {
        int c = P->nops++;
        fo_op *k = &P->ops[c];
        memset(k, 0, sizeof *k);
        k->parent = i;
        k->w[k->nw++] = scr;
        if (j > 0 && (b >> 7))
            k->r[k->nr++] = scr;
        k->how = (b >> 6) & 1 ? FO_ASYNC_INLINE : FO_SYNC;
        if ((g >> (3 + j)) & 1) { /* in chaos: a child on a device */
            k->how = FO_DEVICE;
            k->device = j & 1;
        }
        k->code = (b >> (2 + j)) & 1 && can_fail ? 2000 + c : 0;
        k->message = true;
        snprintf(k->name, sizeof k->name, "kid%d", c);
    }
    for (int j = 0; j < o->nkids && level < d->depth; j++)
        if ((g >> j) & 1 && P->ops[o->kid0 + j].how == FO_SYNC)
            decode_kids(d, o->kid0 + j, can_fail, level + 1);
    o = &P->ops[i];
    o->kidwait = (g >> 7) & 1; /* vf_run_wait_children first */
    if (o->kidwait)
        o->kwait = P->nwaits++;
    o->nwait = 1;
    o->wvar[0] = scr;
    o->wait0 = P->nwaits++;
}

/* A push (opcodes 0-3, 8, 10-15); false at the end of the input. */
static bool decode_push(dec *d, int thread, bool nested, bool plus)
{
    uint8_t flags, counts, x = 0;
    if ((plus && !next(d, &x)) || !next(d, &flags) || !next(d, &counts))
        return false;
    fo_prog *P = d->P;
    int i = P->nops++, n;
    const int *pool = reach(d, thread, &n);
    fo_op *o = &P->ops[i];
    memset(o, 0, sizeof *o);
    o->parent = -1;
    bool can_fail = d->seg_left == 0 || thread == d->fails;
    decode_kind(d, o, i, flags, plus ? x : -1, can_fail);
    int nr = counts & 3, nw = (counts >> 2) & 3;
    for (int k = 0; k < nr + nw; k++) {
        uint8_t b;
        if (!next(d, &b))
            b = (uint8_t)k;
        if (k < nr)
            o->r[o->nr++] = pool[b % n];
        else
            o->w[o->nw++] = pool[b % n];
    }
    if (nested && o->how == FO_SYNC)
        decode_kids(d, i, can_fail, 1);
    add_step(d, FO_PUSH, thread, i);
    return true;
}

/* Opcode 9: split the vars and open a segment (see the file comment). */
static void decode_fork(dec *d)
{
    uint8_t n = 0, m = 0;
    (void)next(d, &n);
    (void)next(d, &m);
    if (d->nslots < 2)
        return;
    int comp[FO_MAXVARS], rank[FO_MAXVARS], nranks = 0;
    for (int tries = 0; tries < 2; tries++) {
        fo_components_now(d->P, d->scratch, comp);
        d->nside[0] = d->nside[1] = 0;
        for (int v = 0; v < d->P->nvars; v++)
            rank[v] = -1;
        for (int k = 0; k < d->nslots; k++) {
            int c = comp[d->slot[k]];
            if (rank[c] < 0)
                rank[c] = nranks++;
            int s = tries ? k % 2 : (m >> (rank[c] % 8)) & 1;
            d->side[s][d->nside[s]++] = d->slot[k];
        }
        if (d->nside[0] > 0 && d->nside[1] > 0)
            break;
        add_step(d, FO_WAIT_ALL, 0, 0); /* reports everything: any split */
    }
    d->prefix = false;
    d->fails = (n >> 4) & 1;
    d->seg_left = 1 + n % 16;
    add_step(d, FO_FORK, 0, 0);
}

static void decode_delete(dec *d, uint8_t b, int thread)
{
    fo_prog *P = d->P;
    int k = b % d->nslots;
    if (P->nvars >= FO_MAXVARS)
        return;
    add_step(d, FO_DELETE, thread, d->slot[k]);
    d->dead[d->ndead++] = d->slot[k];
    d->slot[k] = P->nvars++;
}

/* Opcode 13 in chaos with address vars: destroy or look up one. */
static void decode_addr(dec *d, int thread)
{
    fo_prog *P = d->P;
    uint8_t b = 0;
    (void)next(d, &b);
    int a = b % d->naddr, v = d->acur[a];
    if (v >= 0 && (b & 4)) {
        add_step(d, FO_DELETE, thread, v);
        d->acur[a] = -v - 2;
        return;
    }
    if (v < 0) {
        if (P->nvars >= FO_MAXVARS)
            return;
        v = P->nvars++;
        P->same[v] = fo_cell(P, -d->acur[a] - 2) + 1;
        P->addr[v] = a + 1;
        d->acur[a] = v;
    }
    add_step(d, FO_ADDR, thread, v);
}

/* One instruction in chaos; false at the end of the input. */
static bool decode_chaos_insn(dec *d, uint8_t op)
{
    uint8_t b = 0;
    int code = op % 16, thread = (op / 16) % d->P->nthreads;
    if (code == 9) {
        if (d->moves & FR_M_STOP)
            add_step(d, d->stopped ? FO_START : FO_STOP, 0, 0);
        d->stopped = (d->moves & FR_M_STOP) && !d->stopped;
    } else if (code == 13 && d->naddr > 0) {
        decode_addr(d, thread);
    } else if (code == 4 || code == 5) {
        int n;
        const int *pool = reach(d, thread, &n);
        if (code == 4)
            (void)next(d, &b);
        if (!d->stopped)
            add_step(d, code == 4 ? FO_WAIT_VAR : FO_WAIT_ALL, thread,
                     code == 4 ? pool[b % n] : 0);
    } else if (code == 6 || code == 7) {
        (void)next(d, &b);
        if (code == 6)
            decode_delete(d, b, thread);
        else if (!d->stopped) /* held unchecked: see test_chaos.c */
            add_step(d, FO_STALE, thread,
                     d->ndead ? d->dead[b % d->ndead] : -1);
    } else {
        return decode_push(d, thread, code == 3, code == 8);
    }
    return true;
}

/* One instruction; false at the end of the input. */
static bool decode_insn(dec *d)
{
    uint8_t op, b = 0;
    if (!next(d, &op))
        return false;
    if (d->chaos)
        return decode_chaos_insn(d, op);
    int code = op % 16, thread = d->seg_left ? (op / 16) % 2 : 0;
    bool in_seg = d->seg_left > 0, ok = true;
    if (code == 3 || code == 8 || code < 3 || code >= 10) {
        ok = decode_push(d, thread, code == 3, code == 8);
    } else if (code == 4) {
        int n;
        const int *pool = reach(d, thread, &n);
        (void)next(d, &b);
        add_step(d, FO_WAIT_VAR, thread, pool[b % n]);
    } else if (code == 5 && !in_seg) {
        add_step(d, FO_WAIT_ALL, 0, 0);
    } else if (code == 6 || code == 7) {
        (void)next(d, &b);
        if (code == 6 && !in_seg)
            decode_delete(d, b, 0);
        else if (code == 7 && !in_seg)
            add_step(d, FO_STALE, 0, d->ndead ? d->dead[b % d->ndead] : -1);
    } else if (code == 9 && !in_seg) {
        decode_fork(d);
        return true;
    } else if (code == 9) {
        (void)next(d, &b);
        (void)next(d, &b);
    }
    if (in_seg && --d->seg_left == 0)
        add_step(d, FO_JOIN, 0, 0);
    return ok;
}

/* The program the input describes, and the engine to run it on. */
/* The chaos byte (see the file comment), after the vars were made. */
static void decode_chaos(dec *d, uint8_t c)
{
    static const int bulk[4] = {0, 1, 8, 64};
    fo_prog *P = d->P;
    P->nthreads = d->moves & FR_M_THREADS ? 1 + c % 4 : 1;
    d->bulk_env = d->moves & FR_M_BULK ? bulk[(c / 4) % 4] : 0;
    d->naddr = d->moves & FR_M_ADDR ? (c / 16) % 4 : 0;
    d->depth = d->moves & FR_M_NEST ? 1 + (c / 64) % 4 : 1;
    for (int a = 0; a < d->naddr; a++) {
        int v = P->nvars++;
        P->addr[v] = a + 1;
        d->acur[a] = v;
        add_step(d, FO_ADDR, 0, v);
    }
}

static void decode(dec *d, vf_config *cfg)
{
    uint8_t kind_b = 0, nv_b = 0, chaos_b = 0;
    (void)next(d, &kind_b);
    (void)next(d, &nv_b);
    d->chaos = kind_b >= 144;
    if (d->chaos) {
        kind_b -= 144;
        (void)next(d, &chaos_b);
    }
    d->depth = 1;
    static const int bulk_sizes[3] = {0, 4, 64};
    *cfg = (vf_config){.cpu_workers = 1 + (kind_b / 3) % 2,
                       .cpu_priority_workers = 1,
                       .gpu_workers = 1,
                       .gpu_copy_workers = 1,
                       .gpu_priority_workers = 1,
                       .bulk_size = bulk_sizes[(kind_b / 6) % 3],
                       .help_on_wait = (kind_b / 18) % 2,
                       .max_inflight = (kind_b / 36) % 2 ? 3 : 0,
                       .emulated_latency_us = (kind_b / 72) % 2 ? 20 : 0};
    cfg->type = kind_b % 3 == 0   ? VF_ENGINE_NAIVE
                : kind_b % 3 == 1 ? VF_ENGINE_POOLED
                                  : VF_ENGINE_PERDEVICE;
    fo_prog *P = d->P;
    memset(P, 0, sizeof *P);
    P->seed = 0x5eed;
    d->nslots = 1 + nv_b % MAXV;
    d->graphs = !d->chaos && (nv_b / MAXV) % 2;
    for (int k = 0; k < d->nslots; k++)
        d->slot[k] = P->nvars++;
    d->prefix = true;
    if (d->chaos)
        decode_chaos(d, chaos_b);
    for (int n = 0; n < MAXINSNS && decode_insn(d); n++) {
    }
    if (d->seg_left > 0)
        add_step(d, FO_JOIN, 0, 0);
    if (d->stopped)
        add_step(d, FO_START, 0, 0);
    add_step(d, FO_WAIT_ALL, 0, 0);
}

static void run_program(const uint8_t *data, size_t size)
{
    static fo_prog *P;
    static fo_result *want, *got, *scratch;
    if (P == NULL) {
        P = malloc(sizeof *P);
        want = malloc(sizeof *want);
        got = malloc(sizeof *got);
        scratch = malloc(sizeof *scratch);
        if (!P || !want || !got || !scratch)
            abort();
    }
    static int moves = -2;
    if (moves == -2 && (moves = fr_moves_from_env()) < 0) {
        fprintf(stderr,
                "fuzz_engine: VF_CHAOS_MOVES=%s names none of "
                "threads, nest, addr, stop, bulk\n",
                getenv("VF_CHAOS_MOVES"));
        exit(2);
    }
    dec d = {.p = data, .n = size, .P = P, .scratch = scratch, .moves = moves};
    vf_config cfg;
    decode(&d, &cfg);
    if (d.chaos && !(moves & FR_M_BULK))
        cfg.bulk_size = 0;
    fo_interpret(P, want);
    if (fuzz_dump)
        fr_dump_program(stdout, P, want);
    char why[256], bulk[16];
    if (d.bulk_env > 0) { /* what a user's environment may say */
        snprintf(bulk, sizeof bulk, "%d", d.bulk_env);
        setenv("VF_BULK_SIZE", bulk, 1);
    }
    fr_run_opts o = {.graphs = d.graphs};
    int api = fr_run_program_opts(P, &cfg, &o, got, why);
    if (d.bulk_env > 0)
        unsetenv("VF_BULK_SIZE");
    fr_diffs diffs;
    fr_compare(P, want, got, api, why, &diffs);
    if (diffs.count == 0 || (fuzz_keep_going && fuzz_differing++ >= fuzz_print))
        return;
    fprintf(stderr,
            "fuzz_engine: invariant broken: %d difference(s) from the "
            "serial program on the %s engine (%d workers, bulk %d, "
            "VF_BULK_SIZE %d, help %d, max_inflight %d, %d pushers%s)%s%s:\n",
            diffs.count, vf_engine_type_name(cfg.type), cfg.cpu_workers,
            cfg.bulk_size, d.bulk_env, cfg.help_on_wait, cfg.max_inflight,
            P->nthreads, d.graphs ? ", as graphs" : "",
            *fuzz_context ? " in " : "", fuzz_context);
    for (int i = 0; i < diffs.nlines; i++)
        fprintf(stderr, "    %s\n", diffs.lines[i]);
    fflush(stderr);
    if (!fuzz_keep_going)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    run_program(data, size);
    return 0;
}

#ifndef VF_FUZZ_NO_MAIN
#ifndef VF_FUZZ_LIBFUZZER
/* Without libFuzzer (gcc, or clang without -fsanitize=fuzzer): run the
 * files named on the command line (VF_FUZZ_DUMP=1: print each program). */
int main(int argc, char **argv)
{
    fuzz_dump = getenv("VF_FUZZ_DUMP") != NULL;
    for (int i = 1; i < argc; i++) {
        FILE *f = fopen(argv[i], "rb");
        if (f == NULL) {
            perror(argv[i]);
            return 1;
        }
        static uint8_t buf[1 << 16];
        size_t n = fread(buf, 1, sizeof buf, f);
        fclose(f);
        LLVMFuzzerTestOneInput(buf, n);
    }
    return 0;
}
#endif
#endif
