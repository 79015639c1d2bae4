/*
 * The pending-ops row's gate and resident-set readings. See pending.h.
 */
#define _POSIX_C_SOURCE 200809L
#include "pending.h"

#include <stdio.h>
#include <sys/resource.h>
#include <unistd.h>

void bench_gate_init(bench_gate *g)
{
    pthread_mutex_init(&g->lock, NULL);
    pthread_cond_init(&g->opened, NULL);
    g->open = 0;
}

void bench_gate_wait(bench_gate *g)
{
    pthread_mutex_lock(&g->lock);
    while (!g->open)
        pthread_cond_wait(&g->opened, &g->lock);
    pthread_mutex_unlock(&g->lock);
}

void bench_gate_open(bench_gate *g)
{
    pthread_mutex_lock(&g->lock);
    g->open = 1;
    pthread_cond_broadcast(&g->opened);
    pthread_mutex_unlock(&g->lock);
}

void bench_gate_destroy(bench_gate *g)
{
    pthread_cond_destroy(&g->opened);
    pthread_mutex_destroy(&g->lock);
}

long long bench_rss_bytes(void)
{
    /* statm: total program size, then resident pages. */
    FILE *f = fopen("/proc/self/statm", "r");
    long long size = 0, resident = 0;
    int got = f ? fscanf(f, "%lld %lld", &size, &resident) : 0;
    if (f)
        fclose(f);
    if (got != 2)
        return -1;
    return resident * (long long)sysconf(_SC_PAGESIZE);
}

long long bench_peak_rss_bytes(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return -1;
    return (long long)ru.ru_maxrss * 1024; /* Linux: kilobytes */
}
