/* contend: worker threads that compute, then update shared state under one mutex; for
 * measuring what monitoring perturbs and what `--correct` gives back.
 *
 *   cc -O2 -pthread -o contend crates/gyr-interpose/bench/contend.c
 *   ./contend [THREADS [ITERATIONS [WORK_NS [HOLD_NS]]]]        # defaults: 4 20000 2000 500
 *
 * Each thread repeats ITERATIONS times: WORK_NS of computation, then the mutex held for
 * HOLD_NS. Prints one JSON object: {"threads": T, "iterations": N, "seconds": S}, S being
 * the wall-clock time from the first thread's start to the last one's end (the span a trace of
 * the run shows, from the workers' begin events to their exits). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static volatile unsigned long shared;
static long iterations = 20000, work_ns = 2000, hold_ns = 500;

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* Busy for about `ns`, reading the clock rarely enough not to be its cost. */
static void spin(long ns) {
    double until = now_ns() + (double)ns;
    volatile unsigned long x = 0;
    while (now_ns() < until) {
        for (int i = 0; i < 50; i++) x += (unsigned long)i;
    }
}

static void *worker(void *arg) {
    (void)arg;
    for (long i = 0; i < iterations; i++) {
        spin(work_ns);
        pthread_mutex_lock(&m);
        shared++;
        spin(hold_ns);
        pthread_mutex_unlock(&m);
    }
    return NULL;
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 4;
    if (argc > 2) iterations = atol(argv[2]);
    if (argc > 3) work_ns = atol(argv[3]);
    if (argc > 4) hold_ns = atol(argv[4]);
    if (threads < 1 || threads > 1024 || iterations < 1 || work_ns < 0 || hold_ns < 0) {
        fprintf(stderr, "usage: contend [THREADS(1-1024) [ITERATIONS [WORK_NS [HOLD_NS]]]]\n");
        return 2;
    }
    pthread_t *t = malloc(sizeof(pthread_t) * (size_t)threads);
    if (!t) return 1;
    double t0 = now_ns();
    for (int i = 0; i < threads; i++) {
        if (pthread_create(&t[i], NULL, worker, NULL) != 0) {
            perror("pthread_create");
            return 1;
        }
    }
    for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
    double t1 = now_ns();
    printf("{\"threads\": %d, \"iterations\": %ld, \"seconds\": %.6f}\n", threads, iterations,
           (t1 - t0) / 1e9);
    free(t);
    return shared == (unsigned long)threads * (unsigned long)iterations ? 0 : 1;
}
