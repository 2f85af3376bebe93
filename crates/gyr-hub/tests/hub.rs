//! The hub end to end: it finds a running program by itself, analyses its events, serves them
//! to pages over WebSocket and HTTP, forwards a page's steering to the program (refusals come
//! back with the program's reason), and every page sees a change another page made.

mod common;

use common::{Program, Ws, command, http_get, next_json, wait_for};
use futures_util::SinkExt;
use serde_json::json;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use tokio_tungstenite::tungstenite::Message;

const CHILD: &str = "GYR_TEST_HUB_CHILD";

#[derive(gyr::Sensor)]
struct Work {
    domain: u32,
    seconds: f64,
}

/// The watched program: a loop with a steerable gain, a sensor per domain and a synch point.
fn child_program() -> ! {
    let rt = gyr::init().expect("start gyr");
    let gain = gyr::steer::param("gain", 1.0f64)
        .range(0.0, 10.0)
        .register()
        .expect("register gain");
    for i in 0u64.. {
        let g = gain.get();
        gyr::emit!(Work {
            domain: (i % 4) as u32,
            seconds: g * (1 + i % 4) as f64,
        });
        gyr::steer::sync_point("step");
        std::thread::sleep(Duration::from_micros(200));
    }
    drop(rt);
    std::process::exit(0);
}

/// Waits for an update in which `pid`'s attribute `path` shows `value`.
async fn sees(ws: &mut Ws, pid: u32, path: &str, value: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        let m = next_json(ws).await;
        let Some(procs) = m["processes"].as_array() else {
            continue;
        };
        for p in procs.iter().filter(|p| p["pid"] == pid) {
            for o in p["objects"]["objects"].as_array().into_iter().flatten() {
                for a in o["attributes"].as_array().into_iter().flatten() {
                    if a["path"] == path && a["value"] == value {
                        return;
                    }
                }
            }
        }
    }
    panic!("no page update showed {path} = {value}");
}

#[test]
fn the_hub_watches_and_steers_a_running_program() {
    if std::env::var_os(CHILD).is_some() {
        child_program();
    }
    let dir = tempfile::tempdir().unwrap();
    let child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "the_hub_watches_and_steers_a_running_program",
            "--nocapture",
        ])
        .env(CHILD, "1")
        .env("GYR_SOCKET_DIR", dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let program = Program(child);
    let pid = program.0.id();
    let hub = gyr_hub::Hub::start(gyr_hub::HubConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        grpc: None,
        socket_dir: dir.path().to_owned(),
        ..Default::default()
    })
    .unwrap();
    // Found without being told, and its events arrive.
    wait_for("the hub to receive events", || {
        hub.programs()
            .into_iter()
            .find(|(p, alive, received)| *p == pid && *alive && *received > 100)
    });
    // The analyses: a decimated series, statistics and per-domain groups.
    let snap = wait_for("series in the snapshot", || {
        let s = hub.snapshot();
        s["points"]
            .get(format!("{pid}/work/seconds"))
            .is_some_and(|p| p.as_array().is_some_and(|a| !a.is_empty()))
            .then_some(s)
    });
    assert_eq!(snap["t"], "snapshot");

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let url = format!("ws://{}/ws", hub.addr());
        let (mut a, _) = tokio_tungstenite::connect_async(&url).await.unwrap();
        let (mut b, _) = tokio_tungstenite::connect_async(&url).await.unwrap();
        assert_eq!(next_json(&mut a).await["t"], "snapshot");
        assert_eq!(next_json(&mut b).await["t"], "snapshot");
        // An update carries statistics and the per-domain groups.
        let upd = loop {
            let m = next_json(&mut a).await;
            if m["t"] == "update" && m["groups"].get(format!("{pid}/work/domain")).is_some() {
                break m;
            }
        };
        let groups = &upd["groups"][format!("{pid}/work/domain")];
        assert_eq!(groups.as_object().unwrap().len(), 4, "{groups}");
        assert!(
            upd["stats"][format!("{pid}/work/seconds")]["n"]
                .as_u64()
                .unwrap()
                > 0
        );

        // Page a steers; page b sees it.
        let r = command(
            &mut a,
            json!({"op": "set", "id": 1, "pid": pid, "path": "gain", "value": "2.5"}),
        )
        .await;
        assert_eq!(r["ok"], true, "{r}");
        assert_eq!(r["id"], 1);
        sees(&mut b, pid, "gain", "2.5").await;
        // A refused write says why and changes nothing.
        let r = command(
            &mut a,
            json!({"op": "set", "id": 2, "pid": pid, "path": "gain", "value": "99"}),
        )
        .await;
        assert_eq!(r["ok"], false);
        assert!(r["error"].as_str().unwrap().contains("out of range"), "{r}");
        // Pause and resume through the hub.
        let r = command(
            &mut a,
            json!({"op": "control", "id": 3, "pid": pid, "action": "pause"}),
        )
        .await;
        assert_eq!(r["ok"], true, "{r}");
        let r = command(
            &mut a,
            json!({"op": "control", "id": 4, "pid": pid, "action": "resume"}),
        )
        .await;
        assert_eq!(r["ok"], true, "{r}");
        // Bad commands are refused with a reason, not dropped.
        let r = command(&mut a, json!({"op": "warp", "id": 5, "pid": pid})).await;
        assert!(
            r["error"].as_str().unwrap().contains("unknown command"),
            "{r}"
        );
        let r = command(&mut a, json!({"op": "set", "id": 6, "pid": 1})).await;
        assert!(
            r["error"]
                .as_str()
                .unwrap()
                .contains("watches no program 1"),
            "{r}"
        );
        ws_text(&mut a, "{not json").await;
    });
    assert!(
        gyr::steer::get("gain").is_err(),
        "the test process has no objects of its own"
    );
    let steered = hub.snapshot()["log"].as_array().unwrap().iter().any(|e| {
        e["who"].as_str().unwrap_or("").starts_with("gyr-web")
            && e["action"].as_str().unwrap_or("").contains("gain")
    });
    assert!(steered, "the steering log names the web client");
    // The page and its assets are served from the binary.
    // The page's modules, in folders too, come as JavaScript: browsers run no module otherwise.
    for (path, needle) in [
        ("/", "<title>gyr</title>"),
        ("/app.js", "text/javascript"),
        ("/conn.js", "WebSocket"),
        ("/panels/charts.js", "text/javascript"),
        ("/vendor/uPlot.iife.min.js", "uPlot"),
    ] {
        let body = http_get(hub.addr(), path);
        assert!(
            body.contains(needle),
            "{path}: {}",
            &body[..body.len().min(300)]
        );
    }
    // Only the page's own files: no way out of its folder, and no type declarations.
    for path in [
        "/nothing-here",
        "/panels/nothing.js",
        "/../Cargo.toml",
        "/%2e%2e/Cargo.toml",
        "/panels/%2e%2e/%2e%2e/Cargo.toml",
        "/panels//charts.js",
        "/protocol.d.ts",
    ] {
        let body = http_get(hub.addr(), path);
        assert!(
            body.contains("404"),
            "{path}: {}",
            &body[..body.len().min(300)]
        );
    }
}

async fn ws_text(ws: &mut Ws, text: &str) {
    ws.send(Message::Text(text.to_owned().into()))
        .await
        .unwrap();
    loop {
        let m = next_json(ws).await;
        if m["t"] == "reply" {
            assert!(
                m["error"].as_str().unwrap().contains("not a JSON command"),
                "{m}"
            );
            return;
        }
    }
}

const ROLE_CHILD: &str = "GYR_TEST_HUB_ROLE_CHILD";

/// A program whose worker names its role, then locks a mutex in a loop; once the role's
/// record has gone through the monitors (and, with no consumer attached, nowhere), it writes
/// the file named by `ROLE_CHILD`.
fn role_program(ready: &str) -> ! {
    let _rt = gyr::init().expect("start gyr");
    let (tx, rx) = std::sync::mpsc::channel();
    // Never joined: the program runs until the test kills it.
    drop(gyr::thread::spawn(move || {
        gyr::thread::set_role("worker", 3);
        tx.send(()).unwrap();
        let lock = gyr::sync::Mutex::new(0u64);
        loop {
            *lock.lock().unwrap() += 1;
            std::thread::sleep(Duration::from_millis(1));
        }
    }));
    rx.recv().unwrap();
    assert!(gyr::flush(), "the monitors made a pass");
    std::fs::write(ready, "").unwrap();
    loop {
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// A hub attaching after a thread named its role still groups the thread's row by the role:
/// the program describes its threads with their roles to every new consumer.
#[test]
fn a_hub_attaching_late_learns_the_roles_named_before() {
    if let Some(ready) = std::env::var_os(ROLE_CHILD) {
        role_program(ready.to_str().unwrap());
    }
    let dir = tempfile::tempdir().unwrap();
    let ready = dir.path().join("ready");
    let child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "a_hub_attaching_late_learns_the_roles_named_before",
            "--nocapture",
        ])
        .env(ROLE_CHILD, &ready)
        .env("GYR_SOCKET_DIR", dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let program = Program(child);
    let pid = program.0.id();
    wait_for("the program to name its role", || {
        ready.exists().then_some(())
    });
    let hub = gyr_hub::Hub::start(gyr_hub::HubConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        grpc: None,
        socket_dir: dir.path().to_owned(),
        ..Default::default()
    })
    .unwrap();
    let tile = wait_for("the worker's row in the life-time view", || {
        let r = http_get(hub.addr(), &format!("/api/timeline?pid={pid}&w=100"));
        let body = r.split_once("\r\n\r\n")?.1.to_owned();
        let tile: serde_json::Value = serde_json::from_str(&body).ok()?;
        let rows = tile["rows"].as_array()?;
        rows.iter()
            .any(|r| r["label"] == "worker 3")
            .then_some(tile)
    });
    assert_eq!(tile["events_not_drawn"], 0);
}
