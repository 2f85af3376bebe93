//! The sensor of C and Fortran programs against Rust's, measured in the same run (part of
//! `gyr-bench ffi`): one event of
//! the same shape (`step: u64, energy: f64, alpha: f64`, 24 bytes) emitted in a loop by a C
//! program and a Fortran program whose sensor code `gyr_ffi::codegen` generated, each compiled
//! here (`cc -O2`, `gfortran -O2`) against `libgyr_ffi.a`, and by a derived Rust sensor
//! (`gyr::emit!`) in this process. Every side runs under a runtime of its own with no server
//! and no sink but the monitors' own draining; the runs alternate (Rust, C, Fortran), and each
//! side's figure is its best run, so that a busy spell of the machine falls on all of them.

use crate::ordering::{best, discarding_runtime};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// The figures, ns per event.
#[derive(Debug, Clone, Copy)]
pub(crate) struct NativeFigures {
    /// The generated C sensor.
    pub(crate) c_sensor_ns: f64,
    /// The generated Fortran sensor.
    pub(crate) fortran_sensor_ns: f64,
    /// The derived Rust sensor of the same shape.
    pub(crate) rust_sensor_ns: f64,
}

impl NativeFigures {
    /// The figures and their ratios to Rust's as JSON fields.
    pub(crate) fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "c_sensor_ns": round(self.c_sensor_ns),
            "fortran_sensor_ns": round(self.fortran_sensor_ns),
            "rust_sensor_ns": round(self.rust_sensor_ns),
            "c_vs_rust": round(self.c_sensor_ns / self.rust_sensor_ns),
            "fortran_vs_rust": round(self.fortran_sensor_ns / self.rust_sensor_ns),
            "native_vs_rust_target": 1.2,
        })
    }
}

fn round(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

const SPEC: &str = r#"[[sensor]]
name = "bench.step"
fields = [{ name = "step", type = "u64" }, { name = "energy", type = "f64" }, { name = "alpha", type = "f64" }]
"#;

const C_LOOP: &str = r#"
#define GYR_SENSORS_IMPLEMENTATION
#include "bench_sensors.h"
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 1000000;
    if (gyr_init() != GYR_OK || gyr_sensors_init() != GYR_OK) {
        fprintf(stderr, "%s\n", gyr_last_error());
        return 1;
    }
    volatile double alpha = 0.25;
    gyr_emit_bench_step(0, 0.0, alpha); /* the thread's ring, once */
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < n; i++) gyr_emit_bench_step((uint64_t)i, (double)i * 0.5, alpha);
    clock_gettime(CLOCK_MONOTONIC, &b);
    printf("ns_per_event %.4f\n", ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / n);
    return gyr_shutdown() == GYR_OK ? 0 : 1;
}
"#;

const FORTRAN_LOOP: &str = r#"
program bench
  use iso_c_binding
  use gyr
  use gyr_sensors
  implicit none
  integer(c_int64_t) :: n, i, t0, t1, rate
  character(len=32) :: arg
  real(c_double), volatile :: alpha = 0.25d0
  n = 1000000
  if (command_argument_count() > 0) then
    call get_command_argument(1, arg)
    read (arg, *) n
  end if
  if (gyr_init() /= GYR_OK) stop 1
  if (gyr_sensors_init() /= GYR_OK) stop 2
  call emit_bench_step(0_c_int64_t, 0d0, alpha)
  call system_clock(t0, rate)
  do i = 1, n
    call emit_bench_step(i, real(i, c_double) * 0.5d0, alpha)
  end do
  call system_clock(t1)
  print '(a, es14.6)', 'ns_per_event ', real(t1 - t0, c_double) * 1d9 / real(rate, c_double) / real(n, c_double)
  if (gyr_shutdown() /= GYR_OK) stop 3
end program bench
"#;

/// The Rust side's event: the same fields as the spec's.
#[derive(gyr::Sensor)]
#[sensor(name = "bench.rust_step")]
struct BenchStep {
    step: u64,
    energy: f64,
    alpha: f64,
}

/// `libgyr_ffi.a`: `GYR_FFI_LIB_DIR`, or beside this benchmark (or in its `deps/`), where
/// building gyr-bench puts it.
fn static_lib() -> anyhow::Result<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(d) = std::env::var_os("GYR_FFI_LIB_DIR") {
        dirs.push(PathBuf::from(d));
    }
    if let Some(d) = std::env::current_exe()?.parent() {
        dirs.push(d.to_path_buf());
        dirs.push(d.join("deps"));
    }
    dirs.into_iter()
        .map(|d| d.join("libgyr_ffi.a"))
        .find(|p| p.exists())
        .ok_or_else(|| {
            anyhow::anyhow!(
                "libgyr_ffi.a not found: build it (cargo build --release -p gyr-bench builds it) or set GYR_FFI_LIB_DIR"
            )
        })
}

fn compile(dir: &Path, lib: &Path) -> anyhow::Result<(PathBuf, PathBuf)> {
    use gyr_ffi::codegen::{Lang, generate};
    let spec = gyr_core::spec::Spec::parse(SPEC)?;
    std::fs::write(
        dir.join("bench_sensors.h"),
        generate(&spec, SPEC, "bench.toml", Lang::C)?,
    )?;
    std::fs::write(
        dir.join("bench_sensors.f90"),
        generate(&spec, SPEC, "bench.toml", Lang::Fortran)?,
    )?;
    std::fs::write(dir.join("loop.c"), C_LOOP)?;
    std::fs::write(dir.join("loop.f90"), FORTRAN_LOOP)?;
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../gyr-ffi");
    let system = ["-lpthread", "-ldl", "-lm", "-lrt"];
    let c = dir.join("loop_c");
    let out = Command::new("cc")
        .current_dir(dir)
        .args(["-O2", "-I"])
        .arg(root.join("include"))
        .arg("loop.c")
        .arg(lib)
        .args(system)
        .arg("-o")
        .arg(&c)
        .output()
        .map_err(|e| anyhow::anyhow!("cannot run cc ({e}): install a C compiler (Debian: gcc)"))?;
    anyhow::ensure!(
        out.status.success(),
        "cc could not build the C loop: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let f = dir.join("loop_f");
    let out = Command::new("gfortran")
        .current_dir(dir)
        .arg("-O2")
        .arg(root.join("fortran/gyr.f90"))
        .args(["bench_sensors.f90", "loop.f90"])
        .arg(lib)
        .args(system)
        .arg("-o")
        .arg(&f)
        .output()
        .map_err(|e| anyhow::anyhow!("cannot run gfortran ({e}): install it (Debian: gfortran)"))?;
    anyhow::ensure!(
        out.status.success(),
        "gfortran could not build the Fortran loop: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok((c, f))
}

/// One run of a compiled loop: ns per event.
fn native(bin: &Path, n: u64) -> anyhow::Result<f64> {
    let out = Command::new(bin)
        .arg(n.to_string())
        .env("GYR_SERVE", "0")
        .env("GYR_SIGNALS", "0")
        .env_remove("GYR_TRACE")
        .env_remove("GYR_HUB")
        .env_remove("GYR_DISABLE")
        .output()?;
    anyhow::ensure!(
        out.status.success(),
        "{} failed: {}",
        bin.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| l.strip_prefix("ns_per_event "))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| anyhow::anyhow!("{} printed no figure: {text}", bin.display()))
}

/// One run of the Rust sensor under a runtime of its own: ns per event.
fn rust(n: u64) -> anyhow::Result<f64> {
    let rt = discarding_runtime()?;
    let alpha = std::hint::black_box(0.25);
    gyr::emit!(BenchStep {
        step: 0,
        energy: 0.0,
        alpha
    });
    let start = Instant::now();
    for i in 0..n {
        gyr::emit!(BenchStep {
            step: i,
            energy: i as f64 * 0.5,
            alpha
        });
    }
    let ns = start.elapsed().as_secs_f64() * 1e9 / n as f64;
    rt.shutdown();
    Ok(ns)
}

/// Measures the three sensors (see the module doc).
pub(crate) fn measure(quick: bool) -> anyhow::Result<NativeFigures> {
    let lib = static_lib()?;
    let dir = tempfile::tempdir()?;
    let (c, f) = compile(dir.path(), &lib)?;
    let (n, runs) = if quick {
        (1_000_000, 3)
    } else {
        (10_000_000, 7)
    };
    let (mut r, mut cs, mut fs) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..runs {
        r.push(rust(n)?);
        cs.push(native(&c, n)?);
        fs.push(native(&f, n)?);
    }
    Ok(NativeFigures {
        c_sensor_ns: best(&cs),
        fortran_sensor_ns: best(&fs),
        rust_sensor_ns: best(&r),
    })
}
