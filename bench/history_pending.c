/*
 * bench/history_pending.c: bytes per pending op (two dependencies each), for
 * scripts/bench-history, which links it with the library of each commit it
 * measures (older commits have no pending row in their benchmark). The
 * shape of bench/pending.c: a gate op writes A, B0 and B1 and blocks; N ops
 * each read A and write B[i % 2]; the resident set is read before and after
 * the N pushes, then the gate opens.
 *
 *   history_pending [N]     (default 1000000)
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <varflow.h>

static pthread_mutex_t gate_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cond = PTHREAD_COND_INITIALIZER;
static int gate_open;

static int gate(vf_run *run, void *arg)
{
    (void)run;
    (void)arg;
    pthread_mutex_lock(&gate_lock);
    while (!gate_open)
        pthread_cond_wait(&gate_cond, &gate_lock);
    pthread_mutex_unlock(&gate_lock);
    return 0;
}

static int noop(vf_run *run, void *arg)
{
    (void)run;
    (void)arg;
    return 0;
}

static long resident_bytes(void)
{
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f == NULL || fscanf(f, "%ld %ld", &pages, &resident) != 2)
        resident = 0;
    if (f != NULL)
        fclose(f);
    return resident * sysconf(_SC_PAGESIZE);
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 1000000;
    vf_engine *e;
    vf_config cfg = {.type = VF_ENGINE_PERDEVICE, .cpu_workers = 1};
    if (vf_engine_create(&e, &cfg) != 0)
        return 1;
    vf_var v[3];
    for (int k = 0; k < 3; k++)
        if (vf_var_create(e, &v[k]) != 0)
            return 1;
    if (vf_engine_push(e, &(vf_op){.fn = gate, .writes = {v, 3}}) != 0)
        return 1;
    long before = resident_bytes();
    for (long i = 1; i <= n; i++)
        if (vf_engine_push(e, &(vf_op){.fn = noop,
                                       .reads = {&v[0], 1},
                                       .writes = {&v[1 + i % 2], 1}}) != 0)
            return 1;
    long after = resident_bytes();
    pthread_mutex_lock(&gate_lock);
    gate_open = 1;
    pthread_cond_broadcast(&gate_cond);
    pthread_mutex_unlock(&gate_lock);
    if (vf_engine_wait_all(e, NULL) != 0 || vf_engine_destroy(e) != 0)
        return 1;
    printf("%.1f bytes per pending op (N=%ld)\n", (double)(after - before) / n,
           n);
    return 0;
}
