//! The C, C++ and Fortran examples (`examples/{c,cpp,fortran}`) as a user builds and steers
//! them: `gyr gen` writes their sensor code, `cc`, `c++` and `gfortran` compile them against
//! `libgyr_ffi.so` (built beside `gyr`), and each runs, is listed and steered with `gyr ls`,
//! `gyr set` and `gyr call`, and leaves a trace whose events show that the steering took effect.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The directory holding `libgyr_ffi.so`: `deps/` beside `gyr`, where building gyr puts it, or
/// beside `gyr` (`cargo build -p gyr-ffi`), whichever was built last.
fn lib_dir() -> PathBuf {
    let bin = Path::new(env!("CARGO_BIN_EXE_gyr")).parent().unwrap();
    [bin.join("deps"), bin.to_path_buf()]
        .into_iter()
        .filter_map(|d| {
            let modified = std::fs::metadata(d.join("libgyr_ffi.so"))
                .ok()?
                .modified()
                .ok()?;
            Some((modified, d))
        })
        .max_by_key(|(modified, _)| *modified)
        .map(|(_, d)| d)
        .expect("libgyr_ffi.so is built beside gyr (cargo build -p gyr-cli)")
}

fn gyr(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gyr"))
        .args(args)
        .current_dir(dir)
        .env("GYR_SOCKET_DIR", dir.join("sockets"))
        .output()
        .unwrap()
}

fn ok(dir: &Path, args: &[&str]) -> String {
    let o = gyr(dir, args);
    assert!(
        o.status.success(),
        "gyr {args:?} failed: {}{}",
        String::from_utf8_lossy(&o.stderr),
        String::from_utf8_lossy(&o.stdout)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn refused(dir: &Path, args: &[&str], reason: &str) {
    let o = gyr(dir, args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "gyr {args:?} should fail: {err}");
    assert!(
        err.contains(reason),
        "gyr {args:?}: {reason:?} not in {err:?}"
    );
}

fn run(cmd: &mut Command) {
    let o = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        o.status.success(),
        "{cmd:?} failed: {}{}",
        String::from_utf8_lossy(&o.stderr),
        String::from_utf8_lossy(&o.stdout)
    );
}

/// Generates the sensors and compiles the example of `lang` in `dir`; returns the program.
fn build(dir: &Path, lang: &str) -> PathBuf {
    let (src_dir, src, header) = match lang {
        "c" => ("examples/c", "heat.c", "heat_sensors.h"),
        "cpp" => ("examples/cpp", "heat.cpp", "heat_sensors.hpp"),
        _ => ("examples/fortran", "heat.f90", "heat_sensors.f90"),
    };
    let src_dir = root().join(src_dir);
    std::fs::copy(src_dir.join("heat.toml"), dir.join("heat.toml")).unwrap();
    std::fs::copy(src_dir.join(src), dir.join(src)).unwrap();
    ok(dir, &["gen", "--lang", lang, "heat.toml", "-o", header]);
    let include = root().join("crates/gyr-ffi/include");
    let lib = lib_dir();
    let rpath = format!("-Wl,-rpath,{}", lib.display());
    let mut cmd = match lang {
        "c" => Command::new("cc"),
        "cpp" => Command::new("c++"),
        _ => Command::new("gfortran"),
    };
    cmd.current_dir(dir).arg("-O1");
    match lang {
        "c" => {
            cmd.arg("-I").arg(&include).arg(src);
        }
        "cpp" => {
            cmd.args(["-std=c++17", "-I"]).arg(&include).arg(src);
        }
        _ => {
            cmd.arg(root().join("crates/gyr-ffi/fortran/gyr.f90"))
                .args([header, src]);
        }
    }
    cmd.arg("-L")
        .arg(&lib)
        .args(["-lgyr_ffi", &rpath, "-lm", "-o", "heat"]);
    run(&mut cmd);
    dir.join("heat")
}

struct Program(Child);

impl Program {
    /// Waits up to 30 s for the program to end (`why` says what should have ended it); its
    /// exit status and standard output.
    fn stopped(&mut self, why: &str) -> (std::process::ExitStatus, String) {
        let deadline = Instant::now() + Duration::from_secs(30);
        let status = loop {
            if let Some(s) = self.0.try_wait().unwrap() {
                break s;
            }
            assert!(Instant::now() < deadline, "{why}");
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut out = String::new();
        std::io::Read::read_to_string(self.0.stdout.as_mut().unwrap(), &mut out).unwrap();
        (status, out)
    }
}

impl Drop for Program {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn steer_example(lang: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::create_dir(dir.join("sockets")).unwrap();
    let heat = build(dir, lang);
    // The library is found through the program's run path: cargo's LD_LIBRARY_PATH, which
    // would come first, may name an older copy.
    let child = Command::new(&heat)
        .current_dir(dir)
        .env_remove("LD_LIBRARY_PATH")
        .env("GYR_SOCKET_DIR", dir.join("sockets"))
        .env("GYR_TRACE", dir.join("heat.gyr"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut p = Program(child);
    let pid = p.0.id().to_string();
    let pid = pid.as_str();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !dir.join("sockets").join(format!("{pid}.json")).exists() {
        assert!(
            Instant::now() < deadline,
            "the {lang} program did not announce itself"
        );
        assert!(
            p.0.try_wait().unwrap().is_none(),
            "the {lang} program ended early"
        );
        std::thread::sleep(Duration::from_millis(20));
    }

    let ls = ok(dir, &["ls", pid]);
    assert!(
        ls.contains("heat.alpha") && ls.contains("heat.reset(temperature: float)"),
        "{ls}"
    );
    refused(dir, &["set", pid, "heat.alpha", "0.9"], "heat.alpha");
    refused(dir, &["set", pid, "heat.step", "3"], "read-only");
    ok(dir, &["set", pid, "heat.alpha", "0.4"]);
    ok(dir, &["set", pid, "heat.heater", "false"]);
    // The actuator runs at the program's next synch point and answers with its result.
    assert_eq!(ok(dir, &["call", pid, "heat.reset", "1000"]).trim(), "1000");
    let energy: f64 = ok(dir, &["call", pid, "energy"]).trim().parse().unwrap();
    assert!(
        energy > 64.0 * 500.0,
        "energy after the reset to 1000: {energy}"
    );
    let step: i64 = ok(dir, &["get", pid, "heat.step"]).trim().parse().unwrap();
    assert!(step > 0);
    ok(dir, &["call", pid, "heat.stop"]);

    let (status, out) = p.stopped(&format!("heat.stop did not stop the {lang} program"));
    let mut err = String::new();
    std::io::Read::read_to_string(p.0.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert!(status.success(), "{lang}: {status:?} {out}{err}");
    assert!(err.is_empty(), "{lang} printed errors: {err}");
    assert!(out.contains("alpha 0.4"), "{out}");

    // The trace: every step's event, the steered alpha in later ones, the notes and samples.
    let trace = dir.join("heat.gyr");
    let trace = trace.to_str().unwrap();
    let dump = ok(dir, &["trace", "dump", trace, "--json"]);
    let events: Vec<serde_json::Value> = dump
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let of = |ty: &str| -> Vec<&serde_json::Value> {
        events.iter().filter(|e| e["type"] == ty).collect()
    };
    let steps = of("heat.step");
    assert!(!steps.is_empty());
    for (i, e) in steps.iter().enumerate() {
        assert_eq!(
            e["fields"]["step"],
            i as u64 + 1,
            "{lang}: steps in order, none lost"
        );
    }
    assert_eq!(steps[0]["fields"]["alpha"], 0.1);
    assert_eq!(steps.last().unwrap()["fields"]["alpha"], 0.4);
    let notes: Vec<&serde_json::Value> = of("heat.note")
        .iter()
        .map(|e| &e["fields"]["text"])
        .collect();
    assert_eq!(notes, ["started", "reset", "stopped"], "{lang}");
    assert!(
        !of("heat.max").is_empty(),
        "{lang}: the sampling sensor recorded"
    );
    // The program named its thread (gyr_thread_set_name): the steps' thread has that name.
    let info: serde_json::Value =
        serde_json::from_str(&ok(dir, &["trace", "info", trace, "--json"])).unwrap();
    let named = info["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["id"] == steps[0]["thread"]);
    assert_eq!(
        named.map(|t| &t["name"]),
        Some(&"rod".into()),
        "{lang}: {info}"
    );
}

fn have(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn c_example_is_instrumented_and_steered() {
    steer_example("c");
}

#[test]
fn cpp_example_is_instrumented_and_steered() {
    assert!(have("c++"), "c++ is missing: install g++");
    steer_example("cpp");
}

#[test]
fn fortran_example_is_instrumented_and_steered() {
    assert!(have("gfortran"), "gfortran is missing: install gfortran");
    steer_example("fortran");
}

#[test]
fn gen_refuses_bad_specs_and_languages() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(
        dir.join("bad.toml"),
        "[[sensor]]\nname = \"a\"\nfields = [{ name = \"x\", type = \"float\" }]\n",
    )
    .unwrap();
    refused(
        dir,
        &["gen", "--lang", "c", "bad.toml"],
        "unknown type `float`",
    );
    std::fs::write(
        dir.join("clash.toml"),
        "[[sensor]]\nname = \"a.b\"\n[[sensor]]\nname = \"a-b\"\n",
    )
    .unwrap();
    refused(
        dir,
        &["gen", "--lang", "c", "clash.toml"],
        "same function name",
    );
    let o = gyr(dir, &["gen", "--lang", "rust", "clash.toml"]);
    assert_eq!(o.status.code(), Some(2));
    refused(dir, &["gen", "--lang", "c", "missing.toml"], "missing.toml");
}

/// The C example in the hub's page, as a user steers it from a browser (`web/tests/ffi.mjs` in
/// headless Chromium): the hub discovers the program, the page sets `heat.alpha` and shows a
/// refused value's error, runs `heat.reset 1000` and `heat.stop`; the program's output and trace
/// show that each took effect. Screenshots go under `target/tmp/ui-screenshots/`.
#[test]
fn c_example_is_steered_from_the_page() {
    use std::io::BufRead;
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    assert!(
        Path::new(&chromium).exists(),
        "the browser tests need Chromium at {chromium} (Debian: apt-get install chromium; scripts/test installs it), or CHROMIUM=/path/to/it"
    );
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let sockets = dir.join("sockets");
    std::fs::create_dir(&sockets).unwrap();
    let heat = build(dir, "c");
    let mut hub = Program(
        Command::new(env!("CARGO_BIN_EXE_gyr"))
            .args(["hub", "--listen", "127.0.0.1:0"])
            .env("GYR_SOCKET_DIR", &sockets)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    // The hub's output is read to its end, so that what it prints later has somewhere to go.
    let (tx, rx) = std::sync::mpsc::channel();
    let out = hub.0.stdout.take().unwrap();
    std::thread::spawn(move || {
        for l in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            if let Some(i) = l.find("http://") {
                let _ = tx.send(l[i..].split_whitespace().next().unwrap_or("").to_owned());
            }
        }
    });
    let url = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the hub printed its page's address");
    let mut p = Program(
        Command::new(&heat)
            .current_dir(dir)
            .env_remove("LD_LIBRARY_PATH")
            .env("GYR_SOCKET_DIR", &sockets)
            .env("GYR_TRACE", dir.join("heat.gyr"))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let shots = Path::new(env!("CARGO_TARGET_TMPDIR")).join("ui-screenshots");
    let web = root().join("web");
    let node = Command::new("node")
        .arg(web.join("tests/ffi.mjs"))
        .arg(&url)
        .arg(&shots)
        .env("CHROMIUM", &chromium)
        .output()
        .expect("run node (the browser tests need Node.js)");
    let said = String::from_utf8_lossy(&node.stdout);
    println!("{said}");
    assert!(
        node.status.success() && said.contains("all checks passed"),
        "the browser checks failed:\n{said}\n{}",
        String::from_utf8_lossy(&node.stderr)
    );
    for shot in ["c-steered.png", "c-stopped.png"] {
        assert!(shots.join(shot).exists(), "no screenshot {shot}");
    }

    let (status, out) = p.stopped("heat.stop from the page did not stop the program");
    assert!(status.success(), "{status:?} {out}");
    assert!(
        out.contains("alpha 0.4"),
        "the page's set took effect: {out}"
    );
    drop(hub);

    let trace = dir.join("heat.gyr");
    let dump = ok(dir, &["trace", "dump", trace.to_str().unwrap(), "--json"]);
    let notes: Vec<String> = dump
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|e| e["type"] == "heat.note")
        .map(|e| e["fields"]["text"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(
        notes,
        ["started", "reset", "stopped"],
        "the page's calls ran"
    );
}
