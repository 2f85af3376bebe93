//! The steering API from Python, through grpcio as any user installs it: stubs generated from
//! gyr's .proto files, a channel on the program's Unix socket with grpcio's own defaults
//! (whose `:authority` is the socket's path, percent-encoded), a handshake, a read and a
//! change of an attribute, and a short subscription.
//!
//! And a client with nothing of gyr's (`python/standard.py`): grpcio's health checker and
//! reflection client, over the Unix socket and over TCP with a token, finding the API by
//! reflection and seeing a handshake without a protocol version refused.
//!
//! grpcio and grpcio-tools (and grpcio-reflection, grpcio-health-checking) come from the
//! Python in `GYR_PYTHON`, or the environment `scripts/test` makes in `target/pyenv`, or
//! `python3`. Without them the tests are skipped with a message, except in CI (`CI=true`),
//! where they fail.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const CHILD: &str = "GYR_TEST_PYTHON_CHILD";

/// The program: N-body, steered from Python, until killed.
fn child_program() -> ! {
    let rt = gyr::init().expect("start gyr");
    let sim = gyr_example_nbody::register(64).expect("register nbody");
    let stop = gyr_example_nbody::stop_flag();
    gyr_example_nbody::run(&sim, 2, 0, &stop);
    drop(rt);
    std::process::exit(0);
}

struct Program(Child);
impl Drop for Program {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A Python with grpcio and grpcio-tools, or why there is none.
fn python() -> Result<PathBuf, String> {
    python_with("import grpc, grpc_tools")
}

/// A Python that can run `imports`, or why there is none.
fn python_with(imports: &str) -> Result<PathBuf, String> {
    let candidates: Vec<PathBuf> = match std::env::var_os("GYR_PYTHON") {
        Some(p) => vec![p.into()],
        None => vec![
            root().join("target/pyenv/bin/python"),
            PathBuf::from("python3"),
        ],
    };
    let mut why = Vec::new();
    for p in candidates {
        match Command::new(&p).args(["-c", imports]).output() {
            Ok(o) if o.status.success() => return Ok(p),
            Ok(o) => why.push(format!(
                "{}: {}",
                p.display(),
                String::from_utf8_lossy(&o.stderr).trim()
            )),
            Err(e) => why.push(format!("{}: {e}", p.display())),
        }
    }
    Err(why.join("; "))
}

#[test]
fn a_grpcio_client_steers_and_watches_over_the_unix_socket() {
    if std::env::var_os(CHILD).is_some() {
        child_program();
    }
    let python = match python() {
        Ok(p) => p,
        Err(why) if std::env::var("CI").is_ok_and(|v| v == "true") => panic!(
            "no Python with grpcio and grpcio-tools ({why}); scripts/test installs them into target/pyenv"
        ),
        Err(why) => {
            eprintln!(
                "skipped: no Python with grpcio and grpcio-tools ({why}); run scripts/test, or `pip install grpcio grpcio-tools`"
            );
            return;
        }
    };
    let dir = tempfile::tempdir().unwrap();
    let program = Program(
        Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "a_grpcio_client_steers_and_watches_over_the_unix_socket",
                "--nocapture",
            ])
            .env(CHILD, "1")
            .env("GYR_SOCKET_DIR", dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let pid = program.0.id();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !dir.path().join(format!("{pid}.json")).exists() {
        assert!(
            Instant::now() < deadline,
            "the program did not announce itself"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let stubs = tempfile::tempdir().unwrap();
    let o = Command::new(&python)
        .arg(root().join("crates/gyr-cli/tests/python/client.py"))
        .arg(dir.path().join(format!("{pid}.sock")))
        .arg(root().join("crates/gyr-proto/proto"))
        .arg(stubs.path())
        .output()
        .unwrap();
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert!(
        o.status.success() && out.trim_end().ends_with("ok"),
        "the Python client failed:\n{out}\n{err}"
    );
}

/// The program of `test`, in a private announcement directory `dir`, with `env`; waits for its
/// announcement and returns it with the program.
fn start(test: &str, dir: &Path, env: &[(&str, &str)]) -> (Program, serde_json::Value) {
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args(["--exact", test, "--nocapture"])
        .env(CHILD, "1")
        .env("GYR_SOCKET_DIR", dir)
        .env_remove("GYR_LISTEN")
        .env_remove("GYR_TOKEN")
        .env_remove("GYR_READ_TOKEN")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    for (k, v) in env {
        c.env(k, v);
    }
    let program = Program(c.spawn().unwrap());
    let json = dir.join(format!("{}.json", program.0.id()));
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(Ok(v)) = std::fs::read(&json).map(|b| serde_json::from_slice(&b)) {
            return (program, v);
        }
        assert!(
            Instant::now() < deadline,
            "the program did not announce itself"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_client_with_nothing_of_gyr_finds_the_api_by_reflection_and_health() {
    const TEST: &str = "a_client_with_nothing_of_gyr_finds_the_api_by_reflection_and_health";
    if std::env::var_os(CHILD).is_some() {
        child_program();
    }
    let python = match python_with("import grpc, grpc_reflection, grpc_health") {
        Ok(p) => p,
        Err(why) if std::env::var("CI").is_ok_and(|v| v == "true") => panic!(
            "no Python with grpcio, grpcio-reflection and grpcio-health-checking ({why}); scripts/test installs them into target/pyenv"
        ),
        Err(why) => {
            eprintln!(
                "skipped: no Python with grpcio, grpcio-reflection and grpcio-health-checking ({why}); run scripts/test, or `pip install grpcio grpcio-reflection grpcio-health-checking`"
            );
            return;
        }
    };
    let token = "standard-client-0123456789";
    let dir = tempfile::tempdir().unwrap();
    let (_program, announced) = start(
        TEST,
        dir.path(),
        &[("GYR_LISTEN", "127.0.0.1:0"), ("GYR_TOKEN", token)],
    );
    let socket = announced["socket"].as_str().expect("a socket").to_owned();
    let tcp = announced["tcp"].as_str().expect("a TCP address").to_owned();
    for (target, token) in [(format!("unix:{socket}"), "-"), (tcp, token)] {
        let o = Command::new(&python)
            .arg(root().join("crates/gyr-cli/tests/python/standard.py"))
            .args([&target, token])
            .output()
            .unwrap();
        let (out, err) = (
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr),
        );
        assert!(
            o.status.success() && out.trim_end().ends_with("ok"),
            "the standard client failed on {target}:\n{out}\n{err}"
        );
    }
}
