//! An MPI job as a user runs it, end to end: `gyr run --mpi` over `mpirun` on
//! examples/mpi/halo.c (compiled here with `mpicc`), then `gyr trace clock`, `gyr trace export
//! --sync`, `gyr sim calibrate`, `gyr sim predict` and `gyr sim validate` on what it wrote; and
//! the Rust example on rsmpi (examples/mpi/rust, built here with cargo) traced and predicted.
//! Skipped, with a line saying so, where Open MPI (or, for rsmpi, libclang) is missing
//! (`scripts/test` installs them).

use serde_json::Value as Json;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn have_mpi() -> bool {
    let ok = Command::new("mpicc")
        .arg("--showme:version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!(
            "skipped: mpicc not found; install Open MPI (apt-get install libopenmpi-dev openmpi-bin)"
        );
    }
    ok
}

fn gyr(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gyr"))
        .args(args)
        .current_dir(dir)
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env("GYR_SOCKET_DIR", dir.join("sockets"))
        .output()
        .expect("gyr runs")
}

fn ok(o: &Output) -> String {
    assert!(
        o.status.success(),
        "status {}: {}{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn json_line(out: &str) -> Json {
    serde_json::from_str(out.lines().last().expect("a line")).expect("JSON")
}

fn halo(dir: &Path) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/mpi/halo.c");
    let bin = dir.join("halo");
    let o = Command::new("mpicc")
        .args(["-O1", "-o"])
        .arg(&bin)
        .arg(&src)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    bin
}

#[test]
fn an_mpi_job_is_traced_synchronised_exported_and_predicted() {
    if !have_mpi() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let bin = halo(d);
    let bin = bin.to_str().unwrap();
    // Traced on shared memory: one file per rank.
    let out = ok(&gyr(
        d,
        &[
            "run",
            "--mpi",
            "--trace",
            "run.%r.gyr",
            "--",
            "mpirun",
            "--allow-run-as-root",
            "--oversubscribe",
            "-np",
            "2",
            "--mca",
            "btl",
            "self,vader",
            "--mca",
            "btl_vader_single_copy_mechanism",
            "none",
            bin,
            "40",
            "4096",
            "20000",
        ],
    ));
    assert!(out.contains("halo: 40 steps on 2 ranks"), "{out}");
    let traces = ["run.0.gyr", "run.1.gyr"];
    for t in traces {
        assert!(d.join(t).exists(), "{t} written");
    }

    // Clocks: every message matched, none received before its send once corrected.
    let clock = json_line(&ok(&gyr(
        d,
        &["trace", "clock", "--json", traces[0], traces[1]],
    )));
    assert_eq!(clock["matched"], 2 * 2 * 40, "{clock}");
    assert_eq!(clock["after"]["reversed"], 0, "{clock}");

    // The Chrome export names the ranks and draws every message as an arrow.
    ok(&gyr(
        d,
        &[
            "trace", "export", "--sync", "--format", "chrome", traces[0], traces[1], "-o",
            "job.json",
        ],
    ));
    let doc: Json = serde_json::from_slice(&std::fs::read(d.join("job.json")).unwrap()).unwrap();
    let events = doc["traceEvents"].as_array().unwrap();
    let ranks: Vec<&str> = events
        .iter()
        .filter(|e| e["name"] == "process_name")
        .filter_map(|e| e["args"]["name"].as_str())
        .collect();
    assert!(ranks.iter().any(|n| n.starts_with("rank 0")), "{ranks:?}");
    let arrows = events.iter().filter(|e| e["flow_in"] == true).count();
    assert_eq!(arrows, 2 * 2 * 40, "one arrow per message");

    // A model measured here, then the run predicted on it, per rank.
    ok(&gyr(
        d,
        &[
            "sim",
            "calibrate",
            "--btl",
            "vader",
            "--max-bytes",
            "65536",
            "--reps",
            "3",
            "-o",
            "shm.toml",
        ],
    ));
    let model = std::fs::read_to_string(d.join("shm.toml")).unwrap();
    // `Cx`, the first exchange's connection, comes from a job of its own.
    assert!(
        model.contains("[intra]") && model.contains("S =") && model.contains("Cx ="),
        "{model}"
    );
    let p = json_line(&ok(&gyr(
        d,
        &[
            "sim",
            "predict",
            "--json",
            "--network",
            "shm.toml",
            "--out",
            "pred",
            traces[0],
            traces[1],
        ],
    )));
    assert_eq!(p["ranks"].as_array().unwrap().len(), 2, "{p}");
    assert!(p["predicted_ns"].as_u64().unwrap() > 0, "{p}");
    assert_eq!(p["unfinished"].as_array().unwrap().len(), 0, "{p}");
    assert!(p["messages"].as_u64().unwrap() >= 160, "{p}");
    // The predicted timelines read as traces.
    let info = ok(&gyr(d, &["trace", "info", "--json", "pred.0.gyr"]));
    assert!(info.contains("gyr.mpi.begin"), "{info}");

    // Bad input says what is wrong.
    let o = gyr(
        d,
        &["sim", "predict", "--set", "L=-3", traces[0], traces[1]],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("finite number"));
    let o = gyr(d, &["sim", "predict", "shm.toml"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn validation_runs_both_networks_and_reports_errors() {
    if !have_mpi() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let bin = halo(d);
    std::fs::write(
        d.join("tcp.toml"),
        "ranks_per_node = 0\n[intra]\nL = 10000.0\no = 2000.0\ng = 1000.0\nG = 0.4\nO = 0.1\nS = 65536\n\
         [inter]\nL = 10000.0\no = 2000.0\ng = 1000.0\nG = 0.4\nO = 0.1\nS = 65536\n",
    )
    .unwrap();
    let v = json_line(&ok(&gyr(
        d,
        &[
            "sim",
            "validate",
            "--json",
            "--np",
            "2",
            "--network",
            "tcp.toml",
            "--dir",
            "val",
            "--",
            bin.to_str().unwrap(),
            "20",
            "4096",
            "20000",
        ],
    )));
    let ranks = v["ranks"].as_array().unwrap();
    assert_eq!(ranks.len(), 2, "{v}");
    for r in ranks {
        for k in ["shm_measured_ns", "tcp_measured_ns", "tcp_predicted_ns"] {
            assert!(r[k].as_u64().unwrap() > 0, "{k}: {v}");
        }
        assert!(r["error_pct"].is_number(), "{v}");
    }
    for f in ["shm.0.gyr", "tcp.1.gyr", "predicted.0.gyr"] {
        assert!(d.join("val").join(f).exists(), "{f}");
    }
}

/// examples/mpi/rust built (rsmpi's bindings are generated from `mpi.h` with libclang), in a
/// directory of the workspace's target, or `None`, said, without libclang.
fn rust_example() -> Option<PathBuf> {
    let libclang = Command::new("ldconfig")
        .arg("-p")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("libclang"));
    if !libclang {
        eprintln!(
            "skipped: libclang not found; install it (apt-get install libclang-dev) to build rsmpi"
        );
        return None;
    }
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/mpi/rust/Cargo.toml");
    // target/debug/deps/this-test → target/mpi-example
    let exe = std::env::current_exe().unwrap();
    let target = exe.ancestors().nth(3).unwrap().join("mpi-example");
    let o = Command::new(env!("CARGO"))
        .args(["build", "--release", "--quiet", "--manifest-path"])
        .arg(&manifest)
        .env("CARGO_TARGET_DIR", &target)
        .output()
        .expect("cargo runs");
    assert!(
        o.status.success(),
        "the Rust example builds: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    Some(target.join("release/halo-rs"))
}

#[test]
fn a_rust_program_on_rsmpi_is_traced_and_predicted() {
    if !have_mpi() {
        return;
    }
    let Some(bin) = rust_example() else { return };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let out = ok(&gyr(
        d,
        &[
            "run",
            "--mpi",
            "--trace",
            "rs.%r.gyr",
            "--",
            "mpirun",
            "--allow-run-as-root",
            "--oversubscribe",
            "-np",
            "2",
            "--mca",
            "btl",
            "self,vader",
            "--mca",
            "btl_vader_single_copy_mechanism",
            "none",
            bin.to_str().unwrap(),
            "20",
            "4096",
            "20000",
        ],
    ));
    assert!(out.contains("halo-rs: 20 steps on 2 ranks"), "{out}");
    let clock = json_line(&ok(&gyr(
        d,
        &["trace", "clock", "--json", "rs.0.gyr", "rs.1.gyr"],
    )));
    // Two exchanges a step, each a message both ways, and the allreduces' none (collectives
    // are not messages in the trace).
    assert_eq!(clock["matched"], 2 * 2 * 20, "{clock}");
    assert_eq!(clock["after"]["reversed"], 0, "{clock}");
    let p = json_line(&ok(&gyr(
        d,
        &[
            "sim", "predict", "--json", "--preset", "shm", "rs.0.gyr", "rs.1.gyr",
        ],
    )));
    assert_eq!(p["unfinished"].as_array().unwrap().len(), 0, "{p}");
    assert!(p["messages"].as_u64().unwrap() >= 80, "{p}");
}
