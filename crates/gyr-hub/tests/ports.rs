//! The hub's ports end to end: a program pushing to it (`GYR_HUB`) while also announced (taken
//! once), steered and watched through the hub's gRPC API (the same API as a program's), its
//! events recorded to a trace file, that file replayed (play, pause, speed, seek) and access
//! by token (steer and watch-only) on the web and gRPC sides.

mod common;

use common::{Program, command, http_get, next_json, wait_for};
use gyr_client::events::EventDecoder;
use gyr_proto::v1;
use gyr_proto::v1::gyr_client::GyrClient;
use serde_json::{Value, json};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use tonic::transport::Channel;

const CHILD: &str = "GYR_TEST_PORTS_CHILD";
const STEPS: u64 = 3000;

#[derive(gyr::Sensor)]
struct Work {
    domain: u32,
    seconds: f64,
}

/// The program: STEPS steps with a steerable gain, then a clean exit.
fn child_program() -> ! {
    let rt = gyr::init().expect("start gyr");
    let gain = gyr::steer::param("gain", 1.0f64)
        .range(0.0, 10.0)
        .register()
        .expect("register gain");
    for i in 0..STEPS {
        gyr::emit!(Work {
            domain: (i % 4) as u32,
            seconds: gain.get() * (1 + i % 4) as f64,
        });
        gyr::steer::sync_point("step");
        std::thread::sleep(Duration::from_millis(2));
    }
    drop(rt);
    std::process::exit(0);
}

fn req<T>(msg: T, pid: Option<u32>, token: Option<&str>) -> tonic::Request<T> {
    let mut r = tonic::Request::new(msg);
    r.metadata_mut()
        .insert(gyr_client::CLIENT_HEADER, "ports-test".parse().unwrap());
    if let Some(p) = pid {
        r.metadata_mut()
            .insert(gyr_proto::PROCESS_HEADER, p.to_string().parse().unwrap());
    }
    if let Some(t) = token {
        r.metadata_mut()
            .insert("authorization", format!("Bearer {t}").parse().unwrap());
    }
    r
}

#[test]
fn a_pushing_program_is_steered_through_the_hub_recorded_and_replayed() {
    if std::env::var_os(CHILD).is_some() {
        child_program();
    }
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("rec");
    let hub = gyr_hub::Hub::start(gyr_hub::HubConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        grpc: Some("127.0.0.1:0".parse().unwrap()),
        socket_dir: dir.path().to_owned(),
        record: Some(rec.clone()),
        ..Default::default()
    })
    .unwrap();
    let grpc = hub.grpc_addr().unwrap();
    // Announced in the directory the hub watches *and* pushing: it must be taken once.
    let program = Program(
        Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "a_pushing_program_is_steered_through_the_hub_recorded_and_replayed",
                "--nocapture",
            ])
            .env(CHILD, "1")
            .env("GYR_SOCKET_DIR", dir.path())
            .env("GYR_HUB", grpc.to_string())
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let pid = program.0.id();
    wait_for("events from the program", || {
        hub.programs()
            .into_iter()
            .find(|(p, alive, n)| *p == pid && *alive && *n > 50)
    });

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let ch: Channel = gyr_client::connect::tcp(&grpc.to_string()).await.unwrap();
        let mut c = GyrClient::new(ch);
        // A handshake without a protocol version is told what to send.
        let e = c
            .handshake(req(v1::HandshakeRequest::default(), None, None))
            .await
            .unwrap_err();
        assert_eq!(e.code(), tonic::Code::FailedPrecondition);
        assert!(e.message().contains("set protocol_version = 1"), "{e}");
        let hello = c
            .handshake(req(handshake_request(), None, None))
            .await
            .unwrap()
            .into_inner();
        assert!(hello.hub && hello.can_steer);
        // The hub lists it, pushed (not attached as well).
        let ps = c
            .list_processes(req(v1::ListProcessesRequest {}, None, None))
            .await
            .unwrap()
            .into_inner()
            .processes;
        let p = ps.iter().find(|p| p.pid == pid).expect("listed");
        assert_eq!(p.source, "pushed", "{ps:?}");
        assert_eq!(ps.iter().filter(|p| p.pid == pid).count(), 1);
        // Wait for the hub to attach back (for steering) before asking the program things.
        let mut tries = 0;
        let v = loop {
            match c
                .get(req(
                    v1::GetRequest {
                        paths: vec!["gain".into()],
                    },
                    Some(pid),
                    None,
                ))
                .await
            {
                Ok(r) => break r.into_inner(),
                Err(e) if tries < 100 => {
                    tries += 1;
                    let _ = e;
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(e) => panic!("get through the hub: {e}"),
            }
        };
        assert_eq!(v.values[0].value.as_ref().unwrap().to_string(), "1");
        // A write through the hub reaches the program; a refused one comes back with the
        // program's reason.
        let ch = c
            .set(req(
                v1::SetRequest {
                    writes: vec![v1::PathValue {
                        path: "gain".into(),
                        value: Some(v1::Value::text("2.5")),
                    }],
                },
                Some(pid),
                None,
            ))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(ch.changes.len(), 1);
        let e = c
            .set(req(
                v1::SetRequest {
                    writes: vec![v1::PathValue {
                        path: "gain".into(),
                        value: Some(v1::Value::text("99")),
                    }],
                },
                Some(pid),
                None,
            ))
            .await
            .unwrap_err();
        assert!(e.message().contains("out of range"), "{e}");
        // An unknown program is named in the refusal.
        let e = c
            .status(req(v1::StatusRequest {}, Some(1), None))
            .await
            .unwrap_err();
        assert!(e.message().contains("no program 1"), "{e}");
        // Subscribing to every program: batches carry the pid and decode.
        let mut s = c
            .subscribe(req(
                v1::SubscribeRequest {
                    types: vec!["work".into()],
                    threads: vec![],
                    decoded: false,
                },
                None,
                None,
            ))
            .await
            .unwrap()
            .into_inner();
        let mut decoder = EventDecoder::default();
        let mut seen = 0;
        while seen < 20 {
            let b = s.message().await.unwrap().unwrap();
            assert_eq!(b.pid, pid);
            let batch = decoder.batch(b);
            for e in &batch.events {
                assert_eq!(e.type_name, "work");
            }
            seen += batch.events.len();
        }
        // The program's steering log names the client, via the hub.
        let mut log = c
            .log(req(
                v1::LogRequest {
                    after: 0,
                    follow: false,
                },
                Some(pid),
                None,
            ))
            .await
            .unwrap()
            .into_inner();
        let mut via = false;
        while let Some(e) = log.message().await.unwrap() {
            via |= e.who.contains("ports-test via hub") && e.action.contains("gain");
        }
        assert!(via, "the log names the client via the hub");
    });

    // The program ends; its recording is closed and holds what the hub received.
    let mut program = program;
    assert!(program.0.wait().unwrap().success());
    let (_, _, received) = wait_for("the program to be marked ended", || {
        hub.programs()
            .into_iter()
            .find(|(p, alive, _)| *p == pid && !*alive)
    });
    drop(hub);
    let file = std::fs::read_dir(&rec)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().contains(&format!("-{pid}-")))
        .expect("a trace file for the program");
    let mut r = gyr_core::TraceReader::open(&file).unwrap();
    let mut records = 0u64;
    r.for_each_item(|i| {
        if let gyr_core::trace::Item::Record { schema, .. } = i {
            assert!(schema.is_some());
            records += 1;
        }
    });
    assert!(!r.summary().is_corrupt(), "{:?}", r.summary());
    assert_eq!(records, received, "the file holds what the hub received");
    assert!(records >= STEPS, "every step's event: {records}");

    // Replayed in the same UI.
    let replay = gyr_hub::Hub::start(gyr_hub::HubConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        grpc: None,
        socket_dir: dir.path().to_owned(),
        replay: vec![file.clone()],
        ..Default::default()
    })
    .unwrap();
    rt.block_on(async {
        let url = format!("ws://{}/ws", replay.addr());
        let (mut ws, _) = tokio_tungstenite::connect_async(&url).await.unwrap();
        let snap = next_json(&mut ws).await;
        assert!(snap["replay"]["duration_s"].as_f64().unwrap() > 5.0);
        let r = command(
            &mut ws,
            json!({"op": "replay", "id": 1, "action": "speed", "value": 0.0}),
        )
        .await;
        assert_eq!(r["ok"], false, "{r}");
        let r = command(
            &mut ws,
            json!({"op": "replay", "id": 2, "action": "speed", "value": 4.0}),
        )
        .await;
        assert_eq!(r["ok"], true, "{r}");
        // Pause holds the position.
        let r = command(&mut ws, json!({"op": "replay", "id": 3, "action": "pause"})).await;
        assert_eq!(r["ok"], true, "{r}");
        let at = |m: &Value| m["replay"]["position_s"].as_f64();
        // Updates the hub sent before it paused may still be on their way: only those sent
        // after the reply count.
        let paused_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64()
            * 1e3;
        let mut p0: Option<f64> = None;
        for _ in 0..10 {
            let m = next_json(&mut ws).await;
            if m["sent_ms"].as_f64().is_some_and(|t| t < paused_ms) {
                continue;
            }
            if let Some(p) = at(&m) {
                assert!(
                    p0.is_none_or(|q| (p - q).abs() < 1e-9),
                    "paused, yet it moved"
                );
                p0 = Some(p);
            }
        }
        // A seek to near the end brings a fresh snapshot with the events up to there.
        let dur = snap["replay"]["duration_s"].as_f64().unwrap();
        let r = command(
            &mut ws,
            json!({"op": "replay", "id": 4, "action": "seek", "value": dur - 0.5}),
        )
        .await;
        assert_eq!(r["ok"], true, "{r}");
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            assert!(Instant::now() < deadline, "no snapshot after the seek");
            let m = next_json(&mut ws).await;
            let got = m["processes"]
                .as_array()
                .and_then(|ps| ps.iter().find(|p| p["pid"] == pid))
                .and_then(|p| p["received"].as_u64())
                .unwrap_or(0);
            if m["t"] == "snapshot" && got > received * 8 / 10 {
                assert_eq!(m["processes"][0]["source"], "replay");
                // The steering log is rebuilt from the recording's gyr.steer events.
                let log = m["log"].as_array().unwrap();
                assert!(
                    log.iter()
                        .any(|e| e["action"].as_str().unwrap().ends_with(": 1 -> 2.5")
                            && e["who"].as_str().unwrap().contains("via hub")),
                    "{log:?}"
                );
                break;
            }
        }
        // A recording can be watched, not steered.
        let r = command(
            &mut ws,
            json!({"op": "set", "id": 5, "pid": pid, "path": "gain", "value": "1"}),
        )
        .await;
        assert!(r["error"].as_str().unwrap().contains("replayed"), "{r}");
    });
    // A file that is not a trace is refused, naming it.
    let bad = dir.path().join("not-a-trace.gyr");
    std::fs::write(&bad, b"hello").unwrap();
    let e = gyr_hub::Hub::start(gyr_hub::HubConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        grpc: None,
        replay: vec![bad],
        ..Default::default()
    })
    .unwrap_err();
    assert!(e.to_string().contains("not-a-trace.gyr"), "{e}");
}

/// `GYR_SERVE=0` with `GYR_HUB`: the program publishes and opens nothing (no socket, no
/// announcement); the hub shows its events, refuses to steer it with a message saying why, and
/// ends its entry when the stream ends.
#[test]
fn a_program_that_only_publishes_is_watched_but_opens_nothing() {
    if std::env::var_os(CHILD).is_some() {
        child_program();
    }
    let dir = tempfile::tempdir().unwrap();
    let sockets = dir.path().join("sockets");
    std::fs::create_dir(&sockets).unwrap();
    let hub = gyr_hub::Hub::start(gyr_hub::HubConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        grpc: Some("127.0.0.1:0".parse().unwrap()),
        socket_dir: dir.path().join("hub-sockets"),
        ..Default::default()
    })
    .unwrap();
    let grpc = hub.grpc_addr().unwrap();
    let program = Program(
        Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "a_program_that_only_publishes_is_watched_but_opens_nothing",
                "--nocapture",
            ])
            .env(CHILD, "1")
            .env("GYR_SOCKET_DIR", &sockets)
            .env("GYR_SERVE", "0")
            .env("GYR_HUB", grpc.to_string())
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let pid = program.0.id();
    wait_for("events from the program", || {
        hub.programs()
            .into_iter()
            .find(|(p, alive, n)| *p == pid && *alive && *n > 50)
    });
    let opened: Vec<_> = std::fs::read_dir(&sockets).unwrap().collect();
    assert!(
        opened.is_empty(),
        "a program that only publishes opened {opened:?}"
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let ch: Channel = gyr_client::connect::tcp(&grpc.to_string()).await.unwrap();
        let mut c = GyrClient::new(ch);
        let e = c
            .get(req(
                v1::GetRequest {
                    paths: vec!["gain".into()],
                },
                Some(pid),
                None,
            ))
            .await
            .unwrap_err();
        assert!(
            e.message().contains("cannot reach program"),
            "steering it is refused with a reason: {e}"
        );
    });
}

#[test]
fn a_token_that_could_be_guessed_is_refused() {
    for (token, read) in [
        (Some(""), None),
        (Some("secret"), None),
        (Some("0123456789abcdef"), Some("")),
    ] {
        let e = gyr_hub::Hub::start(gyr_hub::HubConfig {
            listen: "0.0.0.0:0".parse().unwrap(),
            grpc: None,
            discover: false,
            token: token.map(Into::into),
            read_token: read.map(Into::into),
            ..Default::default()
        })
        .unwrap_err();
        let e = e.to_string();
        assert!(
            e.contains("fewer than 16") && e.contains("openssl rand -hex 16"),
            "{e}"
        );
    }
}

#[test]
fn tokens_guard_the_hub_and_a_read_token_only_watches() {
    // Beyond loopback, no token: refused before listening.
    let e = gyr_hub::Hub::start(gyr_hub::HubConfig {
        listen: "0.0.0.0:0".parse().unwrap(),
        grpc: None,
        discover: false,
        ..Default::default()
    })
    .unwrap_err();
    assert!(e.to_string().contains("--token"), "{e}");
    let dir = tempfile::tempdir().unwrap();
    let hub = gyr_hub::Hub::start(gyr_hub::HubConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        grpc: Some("127.0.0.1:0".parse().unwrap()),
        socket_dir: dir.path().to_owned(),
        token: Some("steer-secret-0123456789".into()),
        read_token: Some("watch-secret-0123456789".into()),
        ..Default::default()
    })
    .unwrap();
    let web = hub.addr();
    // The page itself loads (it asks for the token); data does not, without one.
    assert!(http_get(web, "/").contains("<title>gyr</title>"));
    assert!(http_get(web, "/api/access").contains("\"ok\":false"));
    assert!(http_get(web, "/api/state").contains("401"));
    assert!(http_get(web, "/api/state?token=wrong").contains("not valid"));
    assert!(http_get(web, "/api/access?token=watch-secret-0123456789").contains("\"steer\":false"));
    assert!(http_get(web, "/api/state?token=watch-secret-0123456789").contains("snapshot"));
    // Every data endpoint asks for it; with one, a program that is no rank is told so.
    for api in ["/api/timeline", "/api/mpi", "/api/mpi/timeline"] {
        assert!(
            http_get(web, &format!("{api}?pid=1")).contains("401"),
            "{api}"
        );
    }
    let r = http_get(web, "/api/mpi/timeline?pid=1&token=watch-secret-0123456789");
    assert!(r.contains("no rank of an MPI job"), "{r}");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        assert!(
            tokio_tungstenite::connect_async(format!("ws://{web}/ws"))
                .await
                .is_err(),
            "a page without a token gets no socket"
        );
        assert!(
            tokio_tungstenite::connect_async(format!("ws://{web}/ws?token="))
                .await
                .is_err(),
            "an empty token opens no socket"
        );
        let (mut ws, _) = tokio_tungstenite::connect_async(format!(
            "ws://{web}/ws?token=watch-secret-0123456789"
        ))
        .await
        .unwrap();
        assert_eq!(next_json(&mut ws).await["t"], "snapshot");
        let r = command(
            &mut ws,
            json!({"op": "set", "id": 1, "pid": 1, "path": "x", "value": "1"}),
        )
        .await;
        assert!(r["error"].as_str().unwrap().contains("watch-only"), "{r}");
        // The command line is steering too.
        let r = command(
            &mut ws,
            json!({"op": "line", "id": 2, "pid": 1, "line": "set x 1"}),
        )
        .await;
        assert!(r["error"].as_str().unwrap().contains("watch-only"), "{r}");

        let grpc = hub.grpc_addr().unwrap().to_string();
        standard_services(&grpc, "watch-secret-0123456789").await;
        let mut c = GyrClient::new(gyr_client::connect::tcp(&grpc).await.unwrap());
        let e = c
            .list_processes(req(v1::ListProcessesRequest {}, None, None))
            .await
            .unwrap_err();
        assert_eq!(e.code(), tonic::Code::Unauthenticated, "{e}");
        let e = c
            .list_processes(req(v1::ListProcessesRequest {}, None, Some("")))
            .await
            .unwrap_err();
        assert_eq!(e.code(), tonic::Code::Unauthenticated, "{e}");
        let hello = c
            .handshake(req(
                handshake_request(),
                None,
                Some("watch-secret-0123456789"),
            ))
            .await
            .unwrap()
            .into_inner();
        assert!(!hello.can_steer);
        let e = c
            .set(req(
                v1::SetRequest::default(),
                None,
                Some("watch-secret-0123456789"),
            ))
            .await
            .unwrap_err();
        assert_eq!(e.code(), tonic::Code::PermissionDenied, "{e}");
        let hello = c
            .handshake(req(
                handshake_request(),
                None,
                Some("steer-secret-0123456789"),
            ))
            .await
            .unwrap()
            .into_inner();
        assert!(hello.can_steer);
    });
}

/// A handshake as every client sends it: with the protocol version.
fn handshake_request() -> v1::HandshakeRequest {
    v1::HandshakeRequest {
        protocol_version: gyr_proto::PROTOCOL_VERSION,
        client: "ports-test".into(),
    }
}

/// A guarded hub's health answers without a token; its reflection takes the read token and
/// lists the API, and refuses a caller without one.
async fn standard_services(grpc: &str, read_token: &str) {
    use tonic_health::pb::{
        HealthCheckRequest, health_check_response::ServingStatus, health_client::HealthClient,
    };
    use tonic_reflection::pb::v1::ServerReflectionRequest;
    use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
    use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
    use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;
    let ch = gyr_client::connect::tcp(grpc).await.unwrap();
    let mut health = HealthClient::new(ch.clone());
    for service in ["", "gyr.v1.Gyr"] {
        let r = health
            .check(HealthCheckRequest {
                service: service.into(),
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(r.status(), ServingStatus::Serving, "{service:?}");
    }
    let list = || {
        tokio_stream::iter([ServerReflectionRequest {
            host: String::new(),
            message_request: Some(MessageRequest::ListServices(String::new())),
        }])
    };
    let mut reflection = ServerReflectionClient::new(ch);
    let e = reflection.server_reflection_info(list()).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::Unauthenticated, "{e}");
    let mut r = tonic::Request::new(list());
    r.metadata_mut().insert(
        "authorization",
        format!("Bearer {read_token}").parse().unwrap(),
    );
    let mut stream = reflection
        .server_reflection_info(r)
        .await
        .unwrap()
        .into_inner();
    let reply = stream.message().await.unwrap().unwrap();
    let Some(MessageResponse::ListServicesResponse(l)) = reply.message_response else {
        panic!("not a list of services: {reply:?}");
    };
    let names: Vec<_> = l.service.into_iter().map(|s| s.name).collect();
    for s in ["gyr.v1.Gyr", "grpc.health.v1.Health"] {
        assert!(names.iter().any(|n| n == s), "{names:?}");
    }
}
