//! The embedded server's TCP side as someone on the network meets it: a token that could be
//! guessed keeps the program off TCP (it runs on, over its socket), the generated token's
//! file is private from its creation, and idle connections cannot fill the TCP listener.
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
    let file = gyr_client::discovery::socket_dir().join(format!("{}.token", std::process::id()));
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

const SERVING: &str = "GYR_TEST_NET_SERVING";
const TOKEN: &str = "0123456789abcdef0123";

/// Runs in a child process: serves on TCP within small limits until killed.
fn serving_child() -> ! {
    let rt = gyr::Builder::new()
        .listen_tcp("127.0.0.1:0".parse().unwrap(), Some(TOKEN.into()), None)
        .tcp_limits(4, std::time::Duration::from_millis(500))
        .start()
        .expect("start gyr");
    println!("tcp: {}", rt.tcp().expect("listens on TCP").0);
    loop {
        std::thread::sleep(std::time::Duration::from_secs(1));
    }
}

/// Whether the peer closed `s` (end of file or reset), reading what it sends first (the
/// server's HTTP/2 settings) and waiting at most a minute for more.
fn closed(s: &mut std::net::TcpStream) -> bool {
    use std::io::Read;
    s.set_read_timeout(Some(std::time::Duration::from_secs(60)))
        .unwrap();
    let mut b = [0u8; 256];
    loop {
        match s.read(&mut b) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) => {
                return !matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                );
            }
        }
    }
}

#[test]
fn idle_connections_cannot_fill_the_tcp_listener() {
    use gyr_proto::v1::{HandshakeRequest, gyr_client::GyrClient};
    use std::io::BufRead;
    if std::env::var_os(SERVING).is_some() {
        serving_child();
    }
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "idle_connections_cannot_fill_the_tcp_listener",
            "--nocapture",
        ])
        .env(SERVING, "1")
        .env("GYR_SOCKET_DIR", dir.path())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Kept open until the end: the program's test harness prints too.
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let addr = loop {
        let mut line = String::new();
        assert!(
            out.read_line(&mut line).unwrap() > 0,
            "the program says where it listens"
        );
        if let Some(a) = line.trim().strip_prefix("tcp: ") {
            break a.to_owned();
        }
    };
    let mut idle: Vec<_> = (0..8)
        .map(|_| std::net::TcpStream::connect(&addr).unwrap())
        .collect();
    // A client with the token is served (once the idle ones are gone, at the latest).
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let served = rt.block_on(async {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while std::time::Instant::now() < deadline {
            if let Ok(ch) = gyr_client::connect::tcp(&addr).await {
                let mut req = tonic::Request::new(HandshakeRequest {
                    protocol_version: gyr_proto::PROTOCOL_VERSION,
                    ..Default::default()
                });
                req.metadata_mut()
                    .insert("authorization", format!("Bearer {TOKEN}").parse().unwrap());
                if let Ok(r) = GyrClient::new(ch).handshake(req).await {
                    return Some(r.into_inner());
                }
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        None
    });
    // Every idle connection was closed: at once past the limit, or after the timeout.
    let all_closed = idle.iter_mut().all(closed);
    let _ = child.kill();
    let _ = child.wait();
    assert!(served.expect("a client with the token is served").can_steer);
    assert!(all_closed, "an idle connection stays open");
}
