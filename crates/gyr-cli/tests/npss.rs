//! The NPSS example as a user runs it: `gyr hub --rules` over a watch-dog running the
//! compressor solver with too large a relaxation factor, looked at in headless Chromium
//! (`web/tests/npss.mjs`): the divergence pops up as an alert, the rule's restart shows in the
//! watch-dog's steering log, the spec's design points make gauges. Screenshots go under
//! `target/tmp/ui-screenshots/`.

use std::io::BufRead;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        // SAFETY: kill has no memory-safety preconditions; the pid is our child's. SIGTERM
        // lets a watch-dog stop its program first.
        unsafe {
            libc::kill(self.0.id() as i32, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `gyr hub --rules RULES`; returns it, its page's URL and its gRPC address.
fn start_hub(dir: &Path, rules: &Path) -> (Killed, String, String) {
    let mut hub = Killed(
        Command::new(env!("CARGO_BIN_EXE_gyr"))
            .args([
                "hub",
                "--listen",
                "127.0.0.1:0",
                "--grpc",
                "127.0.0.1:0",
                "--no-discover",
                "--rules",
            ])
            .arg(rules)
            .env("GYR_SOCKET_DIR", dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut lines = std::io::BufReader::new(hub.0.stdout.take().unwrap()).lines();
    let (mut url, mut grpc) = (None, None);
    while url.is_none() || grpc.is_none() {
        let line = lines
            .next()
            .expect("the hub printed its addresses")
            .unwrap();
        if let Some(i) = line.find("http://") {
            url = line[i..].split_whitespace().next().map(str::to_owned);
        }
        if let Some(rest) = line.trim().strip_prefix("gRPC API at ") {
            grpc = Some(rest.split(':').take(2).collect::<Vec<_>>().join(":"));
        }
    }
    (hub, url.unwrap(), grpc.unwrap())
}

#[test]
fn a_diverging_solver_is_caught_and_restarted_in_the_page() {
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    assert!(
        Path::new(&chromium).exists(),
        "the browser tests need Chromium at {chromium} (Debian: apt-get install chromium; scripts/test installs it), or CHROMIUM=/path/to/it"
    );
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/npss/watch");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let sockets = d.join("sockets");
    std::fs::create_dir(&sockets).unwrap();
    let (_hub, url, grpc) = start_hub(&sockets, &examples.join("rules.toml"));
    let shots = Path::new(env!("CARGO_TARGET_TMPDIR")).join("ui-screenshots");
    let web = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../web");
    let mut node = Killed(
        Command::new("node")
            .arg(web.join("tests/npss.mjs"))
            .arg(&url)
            .arg(&shots)
            .env("CHROMIUM", &chromium)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run node (the browser tests need Node.js)"),
    );
    let out = node.0.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut said = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(90);
    while !said.iter().any(|l: &String| l == "page ready") {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(l) => said.push(l),
            Err(_) => panic!("the page did not open: {said:?}"),
        }
    }
    // The solver starts once the page is open, so the page sees the divergence arrive.
    let run = d.join("run");
    std::fs::create_dir(&run).unwrap();
    let gyr = env!("CARGO_BIN_EXE_gyr");
    let _watchdog = Killed(
        Command::new(gyr)
            .args(["watchdog", "--spec"])
            .arg(examples.join("compressor.toml"))
            .args(["--hub", &grpc, "--quiet", "--linger", "30", "--", gyr])
            .args([
                "npss-program",
                "compressor",
                "--relax",
                "1.2",
                "--delay_ms",
                "10",
            ])
            .current_dir(&run)
            .env("GYR_SOCKET_DIR", &sockets)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let deadline = Instant::now() + Duration::from_secs(300);
    let status = loop {
        if let Some(s) = node.0.try_wait().unwrap() {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "the browser checks did not end: {said:?}"
        );
        while let Ok(l) = rx.try_recv() {
            said.push(l);
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    while let Ok(l) = rx.recv_timeout(Duration::from_millis(500)) {
        said.push(l);
    }
    let mut err = String::new();
    if let Some(mut e) = node.0.stderr.take() {
        use std::io::Read;
        let _ = e.read_to_string(&mut err);
    }
    println!("{}", said.join("\n"));
    assert!(
        status.success() && said.iter().any(|l| l.contains("all checks passed")),
        "the browser checks failed:\n{}\n{err}",
        said.join("\n")
    );
    for shot in ["npss-alert.png", "npss-restart.png", "npss-gauges.png"] {
        assert!(shots.join(shot).exists(), "no screenshot {shot}");
    }
}

/// `gyr demo npss --headless --quick --json`, as the README names it: an ensemble builds the
/// map, the rules catch the diverging solver and restart it, the cycle model runs on the map.
#[test]
fn the_npss_demo_catches_and_corrects_a_divergence_and_builds_a_map() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_gyr"))
        .args(["demo", "npss", "--headless", "--quick", "--json"])
        .args(["--listen", "127.0.0.1:0", "--dir"])
        .arg(dir.path())
        .env("GYR_SOCKET_DIR", dir.path().join("sockets"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last = stdout.lines().last().unwrap_or_default();
    let j: serde_json::Value = serde_json::from_str(last)
        .unwrap_or_else(|e| panic!("JSON as the last line ({e}): {stdout}"));
    assert_eq!(j["map_built"], true, "{j}");
    assert_eq!(j["ensemble_exit"], 0, "{j}");
    assert_eq!(j["divergence_caught"], true, "{j}");
    assert_eq!(j["restarted_by_rule"], true, "{j}");
    assert_eq!(
        j["compressor_exit"], 0,
        "the restarted solver converged: {j}"
    );
    assert_eq!(j["cycle_exit"], 0, "{j}");
    assert!(out.status.success(), "{j}");
    // The map the ensemble built is one the cycle model reads.
    gyr_example_npss::map::Map::read(&dir.path().join("compressor.map")).unwrap();
}
