/* lockloop: the cost of one lock/unlock pair of an uncontended pthread mutex, in ns.
 *
 *   cc -O2 -pthread -o lockloop crates/gyr-interpose/bench/lockloop.c
 *   ./lockloop 10000000                                   # the C library alone
 *   LD_PRELOAD=target/release/libgyr_interpose.so ./lockloop 10000000   # recorded by gyr
 *
 * One thread locks and unlocks one mutex ITERATIONS times (after a tenth as many to warm up)
 * and prints one JSON object: {"iterations": N, "ns_per_pair": X, "cpu_ns_per_pair": Y}, the
 * wall-clock time and the thread's own CPU time per pair (the second leaves out the time the
 * thread waited for a core, so it moves less on a busy machine). Under the interposer each
 * pair records two events (gyr.mutex.acquire and gyr.mutex.release); GYR_POLICY and
 * GYR_TRACE apply as for any program. gyr-bench runs it with and without the library. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static volatile unsigned long counter;

static double now_ns(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void loop(long n) {
    for (long i = 0; i < n; i++) {
        pthread_mutex_lock(&m);
        counter++;
        pthread_mutex_unlock(&m);
    }
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 10000000L;
    if (n <= 0) {
        fprintf(stderr, "usage: %s [ITERATIONS > 0]\n", argv[0]);
        return 2;
    }
    loop(n / 10 + 1);
    double t0 = now_ns(CLOCK_MONOTONIC), c0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
    loop(n);
    double t1 = now_ns(CLOCK_MONOTONIC), c1 = now_ns(CLOCK_THREAD_CPUTIME_ID);
    printf("{\"iterations\": %ld, \"ns_per_pair\": %.2f, \"cpu_ns_per_pair\": %.2f}\n", n,
           (t1 - t0) / (double)n, (c1 - c0) / (double)n);
    return 0;
}
