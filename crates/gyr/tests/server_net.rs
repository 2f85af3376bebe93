//! The embedded server's TCP side as someone on the network meets it: a token that could be
//! guessed keeps the program off TCP (it runs on, over its socket), and the generated token's
//! file is private from its creation.
//!
//! Each test runs the program in a child process (this test binary again): a runtime is one
//! per process, and what the program says goes to its stderr.

use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Output};

const CHILD: &str = "GYR_TEST_NET_CHILD";

/// Runs in a child process: starts gyr from the environment, prints what it listens on and
/// the mode of its token file, and exits.
fn child() -> ! {
    let rt = gyr::init().expect("gyr starts even with a bad token");
    match rt.tcp() {
        Some((addr, _)) => println!("tcp: {addr}"),
        None => println!("tcp: none"),
    }
    let file = gyr::server::discovery::socket_dir().join(format!("{}.token", std::process::id()));
    match std::fs::metadata(&file) {
        Ok(m) => println!("token file mode: {:o}", m.permissions().mode() & 0o777),
        Err(_) => println!("token file: none"),
    }
    drop(rt);
    std::process::exit(0);
}

/// Runs this test (`name`) as the program, with `env`, in a private announcement directory.
fn program(name: &str, env: &[(&str, &str)]) -> Output {
    let dir = tempfile::tempdir().unwrap();
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args(["--exact", name, "--nocapture"])
        .env(CHILD, "1")
        .env("GYR_SOCKET_DIR", dir.path())
        .env("GYR_LISTEN", "127.0.0.1:0")
        .env_remove("GYR_TOKEN")
        .env_remove("GYR_READ_TOKEN");
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().unwrap();
    assert!(out.status.success(), "the program runs on: {out:?}");
    out
}

#[test]
fn a_token_that_could_be_guessed_keeps_the_program_off_tcp() {
    if std::env::var_os(CHILD).is_some() {
        child();
    }
    let name = "a_token_that_could_be_guessed_keeps_the_program_off_tcp";
    for (var, token) in [
        ("GYR_TOKEN", ""),
        ("GYR_TOKEN", "short"),
        ("GYR_READ_TOKEN", ""),
    ] {
        let out = program(name, &[(var, token)]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stdout.contains("tcp: none"), "{var}={token:?}: {stdout}");
        assert!(
            stderr.contains("not listening on TCP")
                && stderr.contains(var)
                && stderr.contains("openssl rand -hex 16"),
            "{var}={token:?}: {stderr}"
        );
        assert_eq!(stderr.matches("gyr:").count(), 1, "one message: {stderr}");
    }
    // A long enough token opens TCP.
    let out = program(name, &[("GYR_TOKEN", "0123456789abcdef")]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("tcp: 127.0.0.1:"), "{stdout}");
}

#[test]
fn the_generated_token_file_is_private() {
    if std::env::var_os(CHILD).is_some() {
        child();
    }
    let out = program("the_generated_token_file_is_private", &[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("tcp: 127.0.0.1:"), "{stdout}");
    assert!(stdout.contains("token file mode: 600"), "{stdout}");
}
