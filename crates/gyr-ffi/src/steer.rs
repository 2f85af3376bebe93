//! Steering for C, C++ and Fortran: objects whose attributes are the program's own variables,
//! actuators and functions with C callbacks, and synch points.
//!
//! # Bound variables
//!
//! `gyr_attr_double(obj, "dt", &dt, ...)` binds the program's variable `dt` to the attribute
//! `obj.dt`. gyr touches the variable only inside `gyr_sync_point` (or `gyr_object_sync`), on the
//! thread that calls it: a value a client set since the last synch point is stored into the
//! variable there, and otherwise the variable's value is read, which is what clients see. So
//! the program never races with a client, and a steered value takes effect at a point of the
//! program's choosing (Progress's synchronous steering).
//!
//! # Callbacks
//!
//! An actuator (`gyr_actuator`) runs at the program's next synch point, on the thread that
//! reaches it; a function (`gyr_function`) runs when a client calls it (`gyr call`), on the
//! steering server's thread, so it must synchronise with the program itself. Both have the type
//! `gyr_callback`: `int32_t f(void *user_data, const double *args, size_t nargs, double
//! *result)`, the arguments converted to `double` in their declared order; a non-zero return is
//! a failure the client sees. A callback must not unwind (throw a C++ exception) into gyr.

use crate::{Error, GYR_E_EXISTS, GYR_E_INVALID, GYR_E_NULL, handle, opt_text, status, text};
use gyr::steer::{self, AttrInfo, AttrType, DynamicObject, Function, ParamInfo, SteerError};
use gyr_core::Value;
use std::ffi::{c_char, c_void};
use std::sync::Mutex;

/// Flag of `gyr_attr_*`: clients may read the attribute but not set it.
pub const GYR_READ_ONLY: u32 = 1;

/// An actuator's or function's body: `user_data`, the arguments as doubles, their number, and
/// where to put the result. Returns 0 on success.
pub type GyrCallback = Option<
    unsafe extern "C" fn(
        user_data: *mut c_void,
        args: *const f64,
        nargs: usize,
        result: *mut f64,
    ) -> i32,
>;

/// A program variable bound to an attribute.
#[derive(Debug, Clone, Copy)]
enum Var {
    F64(*mut f64),
    I64(*mut i64),
    Bool(*mut u8),
}

/// A steering object of the program, with its bound variables in attribute order.
#[derive(Debug)]
pub struct GyrObject {
    object: DynamicObject,
    vars: Mutex<Vec<Var>>,
}

// SAFETY: the raw pointers in `vars` are dereferenced only in `GyrObject::sync`, which the
// program calls from its own thread at its synch points (the contract of `gyr_attr_*`); the
// handle itself is only moved between threads, never used to touch the variables elsewhere.
unsafe impl Send for GyrObject {}
// SAFETY: as above; `vars` is behind a mutex.
unsafe impl Sync for GyrObject {}

/// Every object made, for `gyr_sync_point`; objects live as long as the process.
static OBJECTS: Mutex<Vec<&'static GyrObject>> = Mutex::new(Vec::new());

fn steer_error(e: SteerError) -> Error {
    let code = match e {
        SteerError::AlreadyRegistered { .. } => GYR_E_EXISTS,
        _ => GYR_E_INVALID,
    };
    Error::new(code, e.to_string())
}

impl GyrObject {
    /// Exchanges the bound variables with the attributes (see the module doc).
    fn sync(&self) {
        let vars = self.vars.lock().unwrap_or_else(|e| e.into_inner());
        self.object.exchange(|i, steered| {
            let Some(&var) = vars.get(i) else {
                return Value::Bool(false);
            };
            // SAFETY: the pointers were non-null when bound, and the program promised
            // (gyr_attr_*) that they stay valid while the object exists and that it calls the
            // synch point from the thread that owns them.
            unsafe {
                match var {
                    Var::F64(p) => {
                        if let Some(v) = steered.and_then(Value::as_f64) {
                            *p = v;
                        }
                        Value::Float(*p)
                    }
                    Var::I64(p) => {
                        if let Some(v) = steered {
                            match v {
                                Value::Int(x) => *p = *x,
                                Value::UInt(x) => *p = *x as i64,
                                _ => {}
                            }
                        }
                        Value::Int(*p)
                    }
                    Var::Bool(p) => {
                        if let Some(Value::Bool(b)) = steered {
                            *p = *b as u8;
                        }
                        Value::Bool(*p != 0)
                    }
                }
            }
        });
    }
}

/// Registers the steering object `name` (with an optional description); null on error.
///
/// # Safety
///
/// `name` is null or a NUL-terminated string; `description` is null or one.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gyr_object_new(
    name: *const c_char,
    description: *const c_char,
) -> *mut GyrObject {
    handle("gyr_object_new", || {
        // SAFETY: the caller passes null or NUL-terminated strings.
        let (name, description) =
            unsafe { (text(name, "name")?, opt_text(description, "description")?) };
        let object = DynamicObject::register(name, description).map_err(steer_error)?;
        let obj: &'static GyrObject = Box::leak(Box::new(GyrObject {
            object,
            vars: Mutex::new(Vec::new()),
        }));
        OBJECTS.lock().unwrap_or_else(|e| e.into_inner()).push(obj);
        Ok(obj as *const GyrObject as *mut GyrObject)
    })
}

/// Binds one variable; the checks every `gyr_attr_*` shares.
///
/// # Safety
///
/// Pointers as for `gyr_attr_double`.
#[allow(clippy::too_many_arguments)]
unsafe fn bind(
    what: &str,
    obj: *const GyrObject,
    name: *const c_char,
    var: Var,
    is_null: bool,
    ty: AttrType,
    unit: *const c_char,
    min: f64,
    max: f64,
    flags: u32,
    current: impl FnOnce() -> Value,
) -> i32 {
    status(what, || {
        // SAFETY: null or a handle from gyr_object_new, which lives for the whole process.
        let obj = unsafe { obj.as_ref() }.ok_or_else(|| {
            Error::new(
                GYR_E_NULL,
                "`obj` is a null pointer: pass a handle from gyr_object_new",
            )
        })?;
        // SAFETY: the caller passes null or NUL-terminated strings.
        let (name, unit) = unsafe { (text(name, "name")?, opt_text(unit, "unit")?) };
        if is_null {
            return Err(Error::new(
                GYR_E_NULL,
                format!("the variable of `{name}` is a null pointer: pass its address"),
            ));
        }
        if flags & !GYR_READ_ONLY != 0 {
            return Err(Error::new(
                GYR_E_INVALID,
                format!("unknown flags {flags:#x}: use 0 or GYR_READ_ONLY"),
            ));
        }
        let mut info = AttrInfo::new(name, ty);
        info.unit = unit.map(str::to_owned);
        info.min = Some(min).filter(|m| !m.is_nan());
        info.max = Some(max).filter(|m| !m.is_nan());
        if let (Some(lo), Some(hi)) = (info.min, info.max)
            && lo > hi
        {
            return Err(Error::new(
                GYR_E_INVALID,
                format!("`{name}`: the range's minimum {lo} is above its maximum {hi}"),
            ));
        }
        info.read_only = flags & GYR_READ_ONLY != 0;
        let mut vars = obj.vars.lock().unwrap_or_else(|e| e.into_inner());
        obj.object
            .add_attribute(info, current())
            .map_err(steer_error)?;
        vars.push(var);
        Ok(())
    })
}

/// Binds the program's `double` variable `*var` to the attribute `name` of `obj`, with a unit
/// (or null), a range (`min`, `max`; NaN for none) and flags (`GYR_READ_ONLY` or 0). The
/// variable is read and written only at synch points (see the module doc).
///
/// # Safety
///
/// `obj` is null or a handle from `gyr_object_new`; `name` and `unit` are null or
/// NUL-terminated strings; `var` is null or points to a `double` that stays valid for the rest
/// of the process and that only the thread calling the synch points uses while they run.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gyr_attr_double(
    obj: *const GyrObject,
    name: *const c_char,
    var: *mut f64,
    unit: *const c_char,
    min: f64,
    max: f64,
    flags: u32,
) -> i32 {
    // SAFETY: the caller's promises are bind's; `var` is read only if non-null.
    unsafe {
        bind(
            "gyr_attr_double",
            obj,
            name,
            Var::F64(var),
            var.is_null(),
            AttrType::Float,
            unit,
            min,
            max,
            flags,
            || Value::Float(*var),
        )
    }
}

/// As `gyr_attr_double`, for an `int64_t` variable (Fortran: `integer(c_int64_t)`).
///
/// # Safety
///
/// As `gyr_attr_double`, with `var` an `int64_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gyr_attr_int64(
    obj: *const GyrObject,
    name: *const c_char,
    var: *mut i64,
    unit: *const c_char,
    min: f64,
    max: f64,
    flags: u32,
) -> i32 {
    // SAFETY: as gyr_attr_double.
    unsafe {
        bind(
            "gyr_attr_int64",
            obj,
            name,
            Var::I64(var),
            var.is_null(),
            AttrType::Int,
            unit,
            min,
            max,
            flags,
            || Value::Int(*var),
        )
    }
}

/// As `gyr_attr_double`, for a `bool` variable (Fortran: `logical(c_bool)`); no unit or range.
///
/// # Safety
///
/// As `gyr_attr_double`, with `var` a one-byte `bool`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gyr_attr_bool(
    obj: *const GyrObject,
    name: *const c_char,
    var: *mut bool,
    flags: u32,
) -> i32 {
    let var = var.cast::<u8>();
    // SAFETY: as gyr_attr_double; the byte is read as a byte, so any value is sound.
    unsafe {
        bind(
            "gyr_attr_bool",
            obj,
            name,
            Var::Bool(var),
            var.is_null(),
            AttrType::Bool,
            std::ptr::null(),
            f64::NAN,
            f64::NAN,
            flags,
            || Value::Bool(*var != 0),
        )
    }
}

/// Parses a parameter list: `"n: int, scale: float, on: bool"` (empty or null: none).
fn parse_params(list: Option<&str>) -> Result<Vec<ParamInfo>, Error> {
    let Some(list) = list else {
        return Ok(Vec::new());
    };
    list.split(',')
        .filter(|p| !p.trim().is_empty())
        .map(|p| {
            let (name, ty) = p.split_once(':').ok_or_else(|| {
                Error::new(
                    GYR_E_INVALID,
                    format!("parameter `{}` has no type: write `name: float`, `name: int` or `name: bool`", p.trim()),
                )
            })?;
            let ty = match ty.trim() {
                "float" | "double" => AttrType::Float,
                "int" => AttrType::Int,
                "bool" => AttrType::Bool,
                other => {
                    return Err(Error::new(
                        GYR_E_INVALID,
                        format!("parameter `{}` has type `{other}`: use float, int or bool", name.trim()),
                    ));
                }
            };
            Ok(ParamInfo {
                name: name.trim().to_owned(),
                ty,
            })
        })
        .collect()
}

/// A C callback with its user data, callable from any thread.
#[derive(Clone, Copy)]
struct Callback {
    f: unsafe extern "C" fn(*mut c_void, *const f64, usize, *mut f64) -> i32,
    user: *mut c_void,
}

// SAFETY: the program registered the callback to be called from gyr's threads (the contract of
// gyr_actuator and gyr_function); gyr never touches `user` but to pass it back.
unsafe impl Send for Callback {}
// SAFETY: as above.
unsafe impl Sync for Callback {}

impl Callback {
    fn call(&self, args: &gyr::steer::Args) -> Result<Value, String> {
        let nums: Vec<f64> = args
            .values()
            .iter()
            .map(|v| v.as_f64().unwrap_or(f64::NAN))
            .collect();
        let mut result = 0.0f64;
        // SAFETY: `f` is the program's function of type gyr_callback; the arguments point to
        // `nums.len()` doubles and to a double for the result, both alive for the call.
        let rc = unsafe { (self.f)(self.user, nums.as_ptr(), nums.len(), &mut result) };
        if rc == 0 {
            Ok(Value::Float(result))
        } else {
            Err(format!("the program's callback returned {rc}"))
        }
    }
}

fn callback(f: GyrCallback, user: *mut c_void) -> Result<Callback, Error> {
    let f =
        f.ok_or_else(|| Error::new(GYR_E_NULL, "`callback` is a null pointer: pass a function"))?;
    Ok(Callback { f, user })
}

/// Adds the actuator `name` to `obj`: `callback(user_data, args, nargs, &result)` runs at the
/// program's next synch point after a client asks (`gyr call PID obj.name ARGS`). `params`
/// declares its parameters (`"n: int, scale: float"`, or null for none).
///
/// # Safety
///
/// `obj` is null or a handle from `gyr_object_new`; the strings are null or NUL-terminated;
/// `callback` is null or a function that may be called with `user_data` for the rest of the
/// process.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gyr_actuator(
    obj: *const GyrObject,
    name: *const c_char,
    params: *const c_char,
    callback_fn: GyrCallback,
    user_data: *mut c_void,
) -> i32 {
    status("gyr_actuator", || {
        // SAFETY: null or a handle from gyr_object_new, which lives for the whole process.
        let obj = unsafe { obj.as_ref() }.ok_or_else(|| {
            Error::new(
                GYR_E_NULL,
                "`obj` is a null pointer: pass a handle from gyr_object_new",
            )
        })?;
        // SAFETY: the caller passes null or NUL-terminated strings.
        let (name, params) = unsafe { (text(name, "name")?, opt_text(params, "params")?) };
        let params = parse_params(params)?;
        let cb = callback(callback_fn, user_data)?;
        obj.object
            .add_actuator(name, params, None, move |args| cb.call(args))
            .map_err(steer_error)
    })
}

/// Registers the function `name`, which clients call (`gyr call PID name ARGS`): the callback
/// runs then, on the steering server's thread. `params` as for `gyr_actuator`.
///
/// # Safety
///
/// As `gyr_actuator`, and the callback must be safe to run on another thread than the
/// program's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gyr_function(
    name: *const c_char,
    params: *const c_char,
    callback_fn: GyrCallback,
    user_data: *mut c_void,
) -> i32 {
    status("gyr_function", || {
        // SAFETY: the caller passes null or NUL-terminated strings.
        let (name, params) = unsafe { (text(name, "name")?, opt_text(params, "params")?) };
        let params = parse_params(params)?;
        let cb = callback(callback_fn, user_data)?;
        let mut f = Function::new(name, move |args| cb.call(args));
        for p in params {
            f = f.param(&p.name, p.ty);
        }
        f.register().map_err(steer_error)
    })
}

/// A synch point called `name`: queued actuators run here, a paused program waits here, and
/// every object's bound variables are exchanged with its attributes.
///
/// # Safety
///
/// `name` is null or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gyr_sync_point(name: *const c_char) -> i32 {
    status("gyr_sync_point", || {
        // SAFETY: the caller passes null or a NUL-terminated string.
        let name = unsafe { text(name, "name") }?;
        steer::sync_point(name);
        let objects: Vec<&'static GyrObject> =
            OBJECTS.lock().unwrap_or_else(|e| e.into_inner()).clone();
        for o in objects {
            o.sync();
        }
        Ok(())
    })
}

/// Exchanges one object's bound variables with its attributes, without a synch point.
///
/// # Safety
///
/// `obj` is null or a handle from `gyr_object_new`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gyr_object_sync(obj: *const GyrObject) -> i32 {
    status("gyr_object_sync", || {
        // SAFETY: null or a handle from gyr_object_new, which lives for the whole process.
        let obj = unsafe { obj.as_ref() }.ok_or_else(|| {
            Error::new(
                GYR_E_NULL,
                "`obj` is a null pointer: pass a handle from gyr_object_new",
            )
        })?;
        obj.sync();
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use gyr::steer::Who;

    unsafe extern "C" fn add(
        user: *mut c_void,
        args: *const f64,
        n: usize,
        result: *mut f64,
    ) -> i32 {
        // SAFETY: the test passes a pointer to an f64 as user data; gyr passes n args.
        unsafe {
            let total = &mut *(user as *mut f64);
            let args = std::slice::from_raw_parts(args, n);
            *total += args.iter().sum::<f64>();
            *result = *total;
        }
        if n > 0 && unsafe { *args } < 0.0 {
            1
        } else {
            0
        }
    }

    #[test]
    fn bound_variables_change_at_synch_points_only() {
        let mut dt = 0.1f64;
        let mut step = 0i64;
        let mut on = false;
        // Leaked so that they outlive the object, as the contract asks.
        let total: &'static mut f64 = Box::leak(Box::new(0.0));
        // SAFETY: valid strings and variables that outlive every synch point of this test.
        unsafe {
            let obj = gyr_object_new(c"ffi_sim".as_ptr(), c"test object".as_ptr());
            assert!(!obj.is_null());
            assert!(gyr_object_new(c"ffi_sim".as_ptr(), std::ptr::null()).is_null());
            assert_eq!(
                gyr_attr_double(obj, c"dt".as_ptr(), &mut dt, c"s".as_ptr(), 0.0, 1.0, 0),
                0
            );
            assert_eq!(
                gyr_attr_int64(
                    obj,
                    c"step".as_ptr(),
                    &mut step,
                    std::ptr::null(),
                    f64::NAN,
                    f64::NAN,
                    GYR_READ_ONLY
                ),
                0
            );
            assert_eq!(gyr_attr_bool(obj, c"on".as_ptr(), &mut on, 0), 0);
            assert_eq!(
                gyr_attr_double(
                    obj,
                    c"x".as_ptr(),
                    std::ptr::null_mut(),
                    std::ptr::null(),
                    0.0,
                    1.0,
                    0
                ),
                GYR_E_NULL
            );
            assert_eq!(
                gyr_attr_double(obj, c"y".as_ptr(), &mut dt, std::ptr::null(), 2.0, 1.0, 0),
                GYR_E_INVALID
            );
            assert_eq!(
                gyr_actuator(
                    obj,
                    c"add".as_ptr(),
                    c"a: float, b: int".as_ptr(),
                    Some(add),
                    total as *mut f64 as *mut c_void
                ),
                0
            );
            assert_eq!(
                gyr_actuator(
                    obj,
                    c"bad".as_ptr(),
                    c"a: text".as_ptr(),
                    Some(add),
                    std::ptr::null_mut()
                ),
                GYR_E_INVALID
            );
            assert_eq!(
                gyr_actuator(
                    obj,
                    c"none".as_ptr(),
                    std::ptr::null(),
                    None,
                    std::ptr::null_mut()
                ),
                GYR_E_NULL
            );

            let who = Who::new("test");
            assert!(steer::set("ffi_sim.dt", Value::Float(3.0), &who).is_err());
            assert!(steer::set("ffi_sim.step", Value::Int(3), &who).is_err());
            steer::set("ffi_sim.dt", Value::Float(0.5), &who).unwrap();
            steer::set("ffi_sim.on", Value::Bool(true), &who).unwrap();
            assert_eq!(dt, 0.1, "not before a synch point");
            std::ptr::write_volatile(&mut step, 42);
            let pending =
                steer::actuate("ffi_sim.add", &[Value::Float(1.5), Value::Int(2)], &who).unwrap();
            assert_eq!(gyr_sync_point(c"ffi_step".as_ptr()), 0);
            assert_eq!(dt, 0.5);
            assert!(on);
            assert_eq!(steer::get("ffi_sim.step").unwrap(), Value::Int(42));
            assert_eq!(
                pending.wait(std::time::Duration::from_secs(5)).unwrap(),
                Value::Float(3.5)
            );
            let failing =
                steer::actuate("ffi_sim.add", &[Value::Float(-1.0), Value::Int(0)], &who).unwrap();
            gyr_sync_point(c"ffi_step".as_ptr());
            let e = failing
                .wait(std::time::Duration::from_secs(5))
                .unwrap_err()
                .to_string();
            assert!(e.contains("returned 1"), "{e}");

            assert_eq!(
                gyr_function(
                    c"ffi_total".as_ptr(),
                    c"a: float".as_ptr(),
                    Some(add),
                    total as *mut f64 as *mut c_void
                ),
                0
            );
            assert_eq!(
                steer::call("ffi_total", &[Value::Float(1.0)], &who).unwrap(),
                Value::Float(3.5)
            );
            assert!(steer::call("ffi_total", &[], &who).is_err());
        }
    }
}
