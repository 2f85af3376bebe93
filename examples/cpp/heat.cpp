// A 1-D heat-diffusion rod in C++, monitored and steered through gyr's C ABI.
//
//   gyr gen --lang cpp heat.toml -o heat_sensors.hpp
//   c++ -O2 -std=c++17 -I ../../crates/gyr-ffi/include heat.cpp -L ../../target/release -lgyr_ffi -o heat
//   LD_LIBRARY_PATH=../../target/release GYR_TRACE=heat.gyr ./heat
//
// Steer it as the C example (examples/c/heat.c): gyr set PID heat.alpha 0.4, gyr call PID
// heat.reset 300, gyr call PID energy, gyr call PID heat.stop.
#define GYR_SENSORS_IMPLEMENTATION
#include "heat_sensors.hpp"

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

namespace {

struct Rod {
    std::vector<double> cells = std::vector<double>(64, 300.0);
    double alpha = 0.1;    // steerable, 0 to 0.5
    int64_t step = 0;      // read-only
    bool heater = true;    // steerable
    bool running = true;
    std::atomic<double> energy{0.0};  // read by the `energy` function on gyr's thread
};

void check(int32_t rc, const char *what) {
    if (rc != GYR_OK) std::fprintf(stderr, "heat: %s: %s\n", what, gyr_last_error());
}

extern "C" int32_t reset(void *user, const double *args, size_t nargs, double *result) {
    auto *rod = static_cast<Rod *>(user);
    if (nargs != 1 || args[0] < 0) return 1;
    for (double &c : rod->cells) c = args[0];
    *result = args[0];
    gyr_sensors::emit_heat_note(std::string_view("reset"));
    return 0;
}

extern "C" int32_t stop(void *user, const double *, size_t, double *result) {
    auto *rod = static_cast<Rod *>(user);
    rod->running = false;
    *result = static_cast<double>(rod->step);
    return 0;
}

extern "C" int32_t energy(void *user, const double *, size_t, double *result) {
    *result = static_cast<Rod *>(user)->energy.load();
    return 0;
}

}  // namespace

int main(int argc, char **argv) {
    long steps = argc > 1 ? std::atol(argv[1]) : 0;
    check(gyr_thread_set_name("rod"), "gyr_thread_set_name");  // its row in gyr's views
    check(gyr_init(), "gyr_init");
    check(gyr_sensors::init(), "gyr_sensors_init");
    gyr_sample *hottest = gyr_sample_double("heat.max", 0.0);

    static Rod rod;  // lives as long as the process: gyr keeps its addresses
    gyr_object *obj = gyr_object_new("heat", "a 1-D heat-diffusion rod (C++)");
    check(gyr_attr_double(obj, "alpha", &rod.alpha, "1", 0.0, 0.5, 0), "alpha");
    check(gyr_attr_int64(obj, "step", &rod.step, nullptr, NAN, NAN, GYR_READ_ONLY), "step");
    check(gyr_attr_bool(obj, "heater", &rod.heater, 0), "heater");
    check(gyr_actuator(obj, "reset", "temperature: float", reset, &rod), "reset");
    check(gyr_actuator(obj, "stop", nullptr, stop, &rod), "stop");
    check(gyr_function("energy", nullptr, energy, &rod), "energy");

    gyr_sensors::emit_heat_note(std::string_view("started"));
    std::vector<double> next(rod.cells.size());
    const size_t n = rod.cells.size();
    while (rod.running && (steps == 0 || rod.step < steps)) {
        if (rod.heater) rod.cells[0] = 400.0;
        for (size_t i = 0; i < n; i++) {
            double l = rod.cells[i > 0 ? i - 1 : i], r = rod.cells[i + 1 < n ? i + 1 : i];
            next[i] = rod.cells[i] + rod.alpha * (l - 2 * rod.cells[i] + r);
        }
        double e = 0, max = 0;
        for (size_t i = 0; i < n; i++) {
            rod.cells[i] = next[i];
            e += next[i];
            max = std::max(max, next[i]);
        }
        rod.step++;
        rod.energy.store(e);
        gyr_sensors::emit_heat_step(static_cast<uint64_t>(rod.step), e, rod.alpha);
        gyr_sample_set(hottest, max);
        check(gyr_sync_point("step"), "gyr_sync_point");
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    gyr_sensors::emit_heat_note(std::string_view("stopped"));
    std::printf("heat: %lld steps, alpha %g, energy %g\n", static_cast<long long>(rod.step),
                rod.alpha, rod.energy.load());
    return gyr_shutdown() == GYR_OK ? 0 : 1;
}
