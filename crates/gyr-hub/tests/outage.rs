//! A hub that goes away and comes back: the program pushing to it runs on, and what it emitted
//! meanwhile is not silently gone: the new hub counts it as lost for that program.

mod common;

use common::{Program, wait_for};
use std::io::{BufRead, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

const CHILD: &str = "GYR_TEST_OUTAGE_CHILD";

#[derive(gyr::Sensor)]
struct Tick {
    n: u64,
}

/// The program: for each number read on stdin, emits that many events, makes them reach its
/// sinks, and says `done`.
fn child_program() -> ! {
    let rt = gyr::init().expect("start gyr");
    let mut n = 0;
    for line in std::io::stdin().lock().lines().map_while(Result::ok) {
        let count: u64 = line.trim().parse().expect("a count");
        for _ in 0..count {
            gyr::emit!(Tick { n });
            n += 1;
        }
        assert!(rt.flush());
        println!("done");
    }
    drop(rt);
    std::process::exit(0);
}

fn hub(grpc: std::net::SocketAddr, dir: &std::path::Path) -> gyr_hub::Hub {
    gyr_hub::Hub::start(gyr_hub::HubConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        grpc: Some(grpc),
        socket_dir: dir.to_owned(),
        discover: false,
        ..Default::default()
    })
    .unwrap()
}

#[test]
fn events_emitted_while_the_hub_is_away_are_counted_lost_by_the_next_hub() {
    if std::env::var_os(CHILD).is_some() {
        child_program();
    }
    let dir = tempfile::tempdir().unwrap();
    let first = hub("127.0.0.1:0".parse().unwrap(), dir.path());
    let grpc = first.grpc_addr().unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "events_emitted_while_the_hub_is_away_are_counted_lost_by_the_next_hub",
            "--nocapture",
        ])
        .env(CHILD, "1")
        .env("GYR_SOCKET_DIR", dir.path())
        .env("GYR_HUB", grpc.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let (said, lines) = mpsc::channel();
    for out in [
        Box::new(child.stdout.take().unwrap()) as Box<dyn std::io::Read + Send>,
        Box::new(child.stderr.take().unwrap()),
    ] {
        let said = said.clone();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
                let _ = said.send(line);
            }
        });
    }
    let program = Program(child);
    let pid = program.0.id();
    // Every line the program wrote so far; `said(what)` waits for one more containing `what`.
    let mut heard: Vec<String> = Vec::new();
    let mut said = |what: &str| {
        let seen = heard.iter().filter(|l| l.contains(what)).count();
        wait_for(what, || {
            if let Ok(l) = lines.recv_timeout(Duration::from_millis(100)) {
                heard.push(l);
            }
            (heard.iter().filter(|l| l.contains(what)).count() > seen).then_some(())
        });
    };
    let mut emit = |count: u64, said: &mut dyn FnMut(&str)| {
        writeln!(stdin, "{count}").unwrap();
        said("done");
    };

    emit(100, &mut said);
    wait_for("the first hub to receive the events", || {
        first
            .programs()
            .into_iter()
            .find(|(p, _, received)| *p == pid && *received >= 100)
    });
    assert_eq!(first.totals().1, 0, "nothing lost while the hub is there");
    drop(first);
    // The program notices (it says so once) and runs on, emitting while no hub is there.
    said("cannot publish to the hub");
    const AWAY: u64 = 5000;
    emit(AWAY, &mut said);

    let second = hub(grpc, dir.path());
    wait_for("the second hub to hear from the program", || {
        second
            .programs()
            .into_iter()
            .find(|(p, alive, _)| *p == pid && *alive)
    });
    emit(100, &mut said);
    wait_for("the second hub to receive new events", || {
        second
            .programs()
            .into_iter()
            .find(|(p, _, received)| *p == pid && *received >= 100)
    });
    let (_, lost) = second.totals();
    assert_eq!(lost, AWAY, "the events emitted while no hub was there");
}
