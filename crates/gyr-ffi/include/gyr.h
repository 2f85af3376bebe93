/* gyr's C ABI, generated from crates/gyr-ffi by cbindgen (`GYR_BLESS=1 cargo test -p gyr-ffi --test header`): do not edit. */

#ifndef GYR_H
#define GYR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 Success.
 */
#define GYR_OK 0

/*
 A pointer argument was null.
 */
#define GYR_E_NULL 1

/*
 A text argument was not UTF-8.
 */
#define GYR_E_UTF8 2

/*
 An argument was refused (a bad name, range, payload or spec): see `gyr_last_error`.
 */
#define GYR_E_INVALID 3

/*
 No sensor, object or function of that name.
 */
#define GYR_E_NOT_FOUND 4

/*
 The name is taken already.
 */
#define GYR_E_EXISTS 5

/*
 The runtime could not be started, or is not running.
 */
#define GYR_E_RUNTIME 6

/*
 A fault inside gyr, caught before it reached the program.
 */
#define GYR_E_INTERNAL 7

/*
 Flag of `gyr_attr_*`: clients may read the attribute but not set it.
 */
#define GYR_READ_ONLY 1

/*
 An aggregating extended sensor: every `every` observations become one event
 `{count, sum, min, max, mean}`. Use one per thread.
 */
typedef struct gyr_aggregate gyr_aggregate;

/*
 A steering object of the program, with its bound variables in attribute order.
 */
typedef struct gyr_object gyr_object;

/*
 A sampling sensor's cell: the program stores values, a local monitor records the latest at
 the sensor's interval.
 */
typedef struct gyr_sample gyr_sample;

/*
 An event type's handle for `gyr_emit`, valid for the whole process.
 */
typedef struct gyr_sensor gyr_sensor;

/*
 An actuator's or function's body: `user_data`, the arguments as doubles, their number, and
 where to put the result. Returns 0 on success.
 */
typedef int32_t (*gyr_callback)(void *user_data, const double *args, size_t nargs, double *result);

#ifdef __cplusplus
extern "C" {
#endif // __cplusplus

/*
 Starts gyr's runtime as a Rust program's `gyr::init` does, configured by the `GYR_*`
 environment variables (trace file, server, hub, policy). Calling it again while it runs does
 nothing. A program that cannot be monitored gets `GYR_E_RUNTIME` and runs on unmonitored.
 */
int32_t gyr_init(void);

/*
 Ends the runtime: every event recorded so far reaches the trace file and the sinks, and the
 steering server stops. Without it the runtime ends when the process exits normally.
 */
int32_t gyr_shutdown(void);

/*
 Waits (at most 5 s) until every event recorded so far has reached the sinks.
 */
int32_t gyr_flush(void);

/*
 The message of this thread's last failed call (empty if none failed): what was wrong and
 what to do. The text stays valid until the next failing call on this thread.
 */
const char *gyr_last_error(void);

/*
 Says that this process is rank `rank` of `size` in job `job` (a name every process of the
 job shares). Call it once, before the first message.

 # Safety

 `job` is null or a NUL-terminated string.
 */
int32_t gyr_msg_init(const char *job, uint32_t rank, uint32_t size);

/*
 Records that a message of `bytes` bytes to rank `peer` with tag `tag` on communicator
 `comm` (0: the whole job) begins to leave.
 */
void gyr_msg_send(uint32_t peer, int32_t tag, uint64_t bytes, uint64_t comm);

/*
 Records that a message of `bytes` bytes from rank `peer` with tag `tag` on communicator
 `comm` has arrived.
 */
void gyr_msg_recv(uint32_t peer, int32_t tag, uint64_t bytes, uint64_t comm);

/*
 Registers every event type of the spec file at `path` (TOML; `gyr spec FILE` checks one).

 # Safety

 `path` is null or a NUL-terminated string.
 */
int32_t gyr_spec_load(const char *path);

/*
 Registers every event type of a spec given as TOML text (what generated code embeds).

 # Safety

 `toml` is null or a NUL-terminated string.
 */
int32_t gyr_spec_register(const char *toml);

/*
 The handle of the event type `name`, registered by a spec before; null (and a message) if
 there is none. Handles live as long as the process.

 # Safety

 `name` is null or a NUL-terminated string.
 */
gyr_sensor *gyr_sensor_find(const char *name);

/*
 Records one event of `sensor`'s type, its payload `len` bytes at `payload` in gyr's layout
 (fields packed little-endian in schema order; a string or bytes field as a `u32` length and
 its bytes). A switched-off sensor returns at once. A payload that does not fit the type is
 refused with `GYR_E_INVALID`.

 # Safety

 `sensor` is null or a handle from `gyr_sensor_find`; `payload` is null or points to `len`
 readable bytes.
 */
int32_t gyr_emit(const gyr_sensor *sensor, const uint8_t *payload, size_t len);

/*
 Whether `sensor` records now (one relaxed load): skip computing a costly payload when not.

 # Safety

 `sensor` is null or a handle from `gyr_sensor_find`.
 */
bool gyr_sensor_on(const gyr_sensor *sensor);

/*
 Switches the event type `name` on or off (as `gyr sensors PID on|off NAME` does); `name`
 `*` means every sensor. A type not registered yet is switched when it is.

 # Safety

 `name` is null or a NUL-terminated string.
 */
int32_t gyr_sensor_enable(const char *name, bool on);

/*
 Registers the sampling sensor `name` over a `double` cell holding `initial`; null on error.

 # Safety

 `name` is null or a NUL-terminated string.
 */
gyr_sample *gyr_sample_double(const char *name, double initial);

/*
 Registers the sampling sensor `name` over an `int64_t` cell holding `initial`; null on error.

 # Safety

 `name` is null or a NUL-terminated string.
 */
gyr_sample *gyr_sample_int64(const char *name, int64_t initial);

/*
 Stores `v` in a sampling sensor's cell (one relaxed store; an `int64_t` cell takes it
 truncated).

 # Safety

 `cell` is null or a handle from `gyr_sample_*`.
 */
void gyr_sample_set(const gyr_sample *cell, double v);

/*
 Registers the aggregating sensor `name`, one event per `every` observations; null on error.

 # Safety

 `name` is null or a NUL-terminated string.
 */
gyr_aggregate *gyr_aggregate_new(const char *name, uint64_t every);

/*
 Adds one observation; emits when `every` have been seen.

 # Safety

 `agg` is null or a handle from `gyr_aggregate_new` not freed, used by one thread at a time.
 */
void gyr_aggregate_observe(gyr_aggregate *agg, double v);

/*
 Emits what was aggregated so far and frees the handle.

 # Safety

 `agg` is null or a handle from `gyr_aggregate_new`, not used again.
 */
void gyr_aggregate_free(gyr_aggregate *agg);

/*
 Registers the steering object `name` (with an optional description); null on error.

 # Safety

 `name` is null or a NUL-terminated string; `description` is null or one.
 */
gyr_object *gyr_object_new(const char *name, const char *description);

/*
 Binds the program's `double` variable `*var` to the attribute `name` of `obj`, with a unit
 (or null), a range (`min`, `max`; NaN for none) and flags (`GYR_READ_ONLY` or 0). The
 variable is read and written only at synch points (see the module doc).

 # Safety

 `obj` is null or a handle from `gyr_object_new`; `name` and `unit` are null or
 NUL-terminated strings; `var` is null or points to a `double` that stays valid for the rest
 of the process and that only the thread calling the synch points uses while they run.
 */
int32_t gyr_attr_double(const gyr_object *obj, const char *name, double *var, const char *unit, double min, double max, uint32_t flags);

/*
 As `gyr_attr_double`, for an `int64_t` variable (Fortran: `integer(c_int64_t)`).

 # Safety

 As `gyr_attr_double`, with `var` an `int64_t`.
 */
int32_t gyr_attr_int64(const gyr_object *obj, const char *name, int64_t *var, const char *unit, double min, double max, uint32_t flags);

/*
 As `gyr_attr_double`, for a `bool` variable (Fortran: `logical(c_bool)`); no unit or range.

 # Safety

 As `gyr_attr_double`, with `var` a one-byte `bool`.
 */
int32_t gyr_attr_bool(const gyr_object *obj, const char *name, bool *var, uint32_t flags);

/*
 Adds the actuator `name` to `obj`: `callback(user_data, args, nargs, &result)` runs at the
 program's next synch point after a client asks (`gyr call PID obj.name ARGS`). `params`
 declares its parameters (`"n: int, scale: float"`, or null for none).

 # Safety

 `obj` is null or a handle from `gyr_object_new`; the strings are null or NUL-terminated;
 `callback` is null or a function that may be called with `user_data` for the rest of the
 process.
 */
int32_t gyr_actuator(const gyr_object *obj, const char *name, const char *params, gyr_callback callback_fn, void *user_data);

/*
 Registers the function `name`, which clients call (`gyr call PID name ARGS`): the callback
 runs then, on the steering server's thread. `params` as for `gyr_actuator`.

 # Safety

 As `gyr_actuator`, and the callback must be safe to run on another thread than the
 program's.
 */
int32_t gyr_function(const char *name, const char *params, gyr_callback callback_fn, void *user_data);

/*
 A synch point called `name`: queued actuators run here, a paused program waits here, and
 every object's bound variables are exchanged with its attributes.

 # Safety

 `name` is null or a NUL-terminated string.
 */
int32_t gyr_sync_point(const char *name);

/*
 Exchanges one object's bound variables with its attributes, without a synch point.

 # Safety

 `obj` is null or a handle from `gyr_object_new`.
 */
int32_t gyr_object_sync(const gyr_object *obj);

/*
 Names the calling thread in gyr's views (cut at 256 bytes). Call it before the thread's
 first event: a thread that has recorded keeps the name it had, and the call says so
 (`GYR_E_INVALID`). May be called before `gyr_init`.

 # Safety

 `name` is null or a NUL-terminated string.
 */
int32_t gyr_thread_set_name(const char *name);

/*
 Names the calling thread's role and index (a pool's worker 3, OpenMP's thread
 `omp_get_thread_num()`), so that short-lived threads of one role group into one row per
 index in every view. Call it once per thread, after `gyr_init`, not per event.

 # Safety

 `role` is null or a NUL-terminated string.
 */
int32_t gyr_thread_set_role(const char *role, uint64_t index);

#ifdef __cplusplus
}  // extern "C"
#endif  // __cplusplus

#endif  /* GYR_H */
