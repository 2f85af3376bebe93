/* A 1-D heat-diffusion rod, monitored and steered through gyr's C ABI.
 *
 *   gyr gen --lang c heat.toml -o heat_sensors.h
 *   cc -O2 -I ../../crates/gyr-ffi/include heat.c -L ../../target/release -lgyr_ffi -o heat
 *   LD_LIBRARY_PATH=../../target/release GYR_TRACE=heat.gyr ./heat
 *
 * Steer it from another terminal: gyr ls PID; gyr set PID heat.alpha 0.4;
 * gyr call PID heat.reset 300; gyr call PID energy; gyr call PID heat.stop.
 * Argument: the number of steps (default: run until heat.stop). */
#define GYR_SENSORS_IMPLEMENTATION
#include "heat_sensors.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define CELLS 64

static double rod[CELLS], next[CELLS];
static double alpha = 0.1;  /* steerable, 0 to 0.5 (stable) */
static int64_t step;        /* read-only */
static bool heater = true;  /* steerable: the left end held hot */
static bool running = true;
static pthread_mutex_t energy_lock = PTHREAD_MUTEX_INITIALIZER;
static double last_energy;

static int32_t reset(void *user, const double *args, size_t nargs, double *result) {
    (void)user;
    if (nargs != 1 || args[0] < 0) return 1;
    for (int i = 0; i < CELLS; i++) rod[i] = args[0];
    *result = args[0];
    gyr_emit_heat_note("reset");
    return 0;
}

static int32_t stop(void *user, const double *args, size_t nargs, double *result) {
    (void)user, (void)args, (void)nargs;
    running = false;
    *result = (double)step;
    return 0;
}

/* Called by clients on the steering server's thread: reads under the lock. */
static int32_t energy(void *user, const double *args, size_t nargs, double *result) {
    (void)user, (void)args, (void)nargs;
    pthread_mutex_lock(&energy_lock);
    *result = last_energy;
    pthread_mutex_unlock(&energy_lock);
    return 0;
}

static void check(int32_t rc, const char *what) {
    if (rc != GYR_OK) fprintf(stderr, "heat: %s: %s\n", what, gyr_last_error());
}

int main(int argc, char **argv) {
    long steps = argc > 1 ? atol(argv[1]) : 0;
    /* The thread's row in gyr's views is "rod", not a bare thread id. */
    check(gyr_thread_set_name("rod"), "gyr_thread_set_name");
    check(gyr_init(), "gyr_init");
    check(gyr_sensors_init(), "gyr_sensors_init");
    gyr_sample *hottest = gyr_sample_double("heat.max", 0.0);
    if (!hottest) check(GYR_E_INVALID, "gyr_sample_double");

    gyr_object *obj = gyr_object_new("heat", "a 1-D heat-diffusion rod");
    if (!obj) check(GYR_E_INVALID, "gyr_object_new");
    check(gyr_attr_double(obj, "alpha", &alpha, "1", 0.0, 0.5, 0), "alpha");
    check(gyr_attr_int64(obj, "step", &step, NULL, NAN, NAN, GYR_READ_ONLY), "step");
    check(gyr_attr_bool(obj, "heater", &heater, 0), "heater");
    check(gyr_actuator(obj, "reset", "temperature: float", reset, NULL), "reset");
    check(gyr_actuator(obj, "stop", NULL, stop, NULL), "stop");
    check(gyr_function("energy", NULL, energy, NULL), "energy");

    for (int i = 0; i < CELLS; i++) rod[i] = 300.0;
    gyr_emit_heat_note("started");
    while (running && (steps == 0 || step < steps)) {
        if (heater) rod[0] = 400.0;
        double e = 0, max = 0;
        for (int i = 0; i < CELLS; i++) {
            double l = rod[i > 0 ? i - 1 : i], r = rod[i < CELLS - 1 ? i + 1 : i];
            next[i] = rod[i] + alpha * (l - 2 * rod[i] + r);
        }
        for (int i = 0; i < CELLS; i++) {
            rod[i] = next[i];
            e += rod[i];
            if (rod[i] > max) max = rod[i];
        }
        step++;
        pthread_mutex_lock(&energy_lock);
        last_energy = e;
        pthread_mutex_unlock(&energy_lock);
        gyr_emit_heat_step((uint64_t)step, e, alpha);
        gyr_sample_set(hottest, max);
        check(gyr_sync_point("step"), "gyr_sync_point");
        usleep(2000);
    }
    gyr_emit_heat_note("stopped");
    printf("heat: %lld steps, alpha %g, energy %g\n", (long long)step, alpha, last_energy);
    return gyr_shutdown() == GYR_OK ? 0 : 1;
}
