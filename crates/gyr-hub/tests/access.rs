//! Who may reach the hub: a page of another web site, or one reaching the hub by another
//! name (DNS rebinding), is refused even when the hub has no token; names given with
//! `allow_hosts` are taken; idle connections cannot fill the hub's listeners.

mod common;

use common::{command, next_json, wait_for};
use gyr_proto::v1::{self, gyr_client::GyrClient};
use serde_json::json;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

fn hub(allow_hosts: &[&str], limits: gyr_proto::listen::Limits) -> gyr_hub::Hub {
    gyr_hub::Hub::start(gyr_hub::HubConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        grpc: Some("127.0.0.1:0".parse().unwrap()),
        discover: false,
        allow_hosts: allow_hosts.iter().map(|h| h.to_string()).collect(),
        limits,
        ..Default::default()
    })
    .unwrap()
}

/// A GET with these header lines; the whole response, or `None` if the hub closed the
/// connection without one.
fn get(addr: SocketAddr, path: &str, headers: &[String]) -> Option<String> {
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(60))).ok()?;
    let mut req = format!("GET {path} HTTP/1.0\r\n");
    for h in headers {
        req += &format!("{h}\r\n");
    }
    req += "\r\n";
    s.write_all(req.as_bytes()).ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    (!out.is_empty()).then_some(out)
}

/// Opens a page's WebSocket with this `Origin`; the refusal's status and body if refused.
async fn open_ws(web: SocketAddr, origin: &str) -> Result<common::Ws, (u16, String)> {
    let mut r = format!("ws://{web}/ws").into_client_request().unwrap();
    r.headers_mut().insert("origin", origin.parse().unwrap());
    match tokio_tungstenite::connect_async(r).await {
        Ok((ws, _)) => Ok(ws),
        Err(tokio_tungstenite::tungstenite::Error::Http(resp)) => Err((
            resp.status().as_u16(),
            String::from_utf8_lossy(resp.body().as_deref().unwrap_or_default()).into_owned(),
        )),
        Err(e) => panic!("the WebSocket failed otherwise: {e}"),
    }
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// A command a page may send: it reaches the hub's steering (which knows no program 7).
async fn steers(ws: &mut common::Ws) -> bool {
    assert_eq!(next_json(ws).await["t"], "snapshot");
    let r = command(
        ws,
        json!({"op": "set", "id": 1, "pid": 7, "path": "nbody.softening", "value": "0.5"}),
    )
    .await;
    r["error"].as_str().unwrap_or("").contains("no program 7")
}

#[test]
fn other_sites_and_other_host_names_are_refused_without_a_token() {
    let hub = hub(&[], Default::default());
    let web = hub.addr();
    let port = web.port();
    rt().block_on(async {
        // Another site's page opens no socket, so it cannot steer.
        let (status, body) = open_ws(web, "http://evil.example").await.unwrap_err();
        assert_eq!(status, 403);
        assert!(
            body.contains("http://evil.example") && body.contains("--allow-host"),
            "{body}"
        );
        let (status, _) = open_ws(web, "null").await.unwrap_err();
        assert_eq!(status, 403);
        // The hub's own page does.
        for origin in [format!("http://{web}"), format!("http://localhost:{port}")] {
            let mut ws = open_ws(web, &origin).await.unwrap();
            assert!(steers(&mut ws).await, "{origin}");
        }
    });
    // A page that reached the hub by another name (DNS rebinding) reads nothing.
    let r = get(web, "/api/state", &[format!("Host: evil.example:{port}")]).unwrap();
    assert!(r.starts_with("HTTP/1.0 403"), "{r}");
    assert!(r.contains("--allow-host evil.example"), "{r}");
    let r = get(web, "/", &[format!("Host: evil.example:{port}")]).unwrap();
    assert!(r.starts_with("HTTP/1.0 403"), "{r}");
    let r = get(
        web,
        "/api/state",
        &[
            format!("Host: {web}"),
            "Origin: https://evil.example".into(),
        ],
    )
    .unwrap();
    assert!(r.starts_with("HTTP/1.0 403"), "{r}");
    // Its own names, and no Host at all (a plain client), read the state.
    for headers in [
        vec![format!("Host: {web}")],
        vec![format!("Host: localhost:{port}")],
        vec![format!("Host: [::1]:{port}")],
        vec![format!("Host: {web}"), format!("Origin: http://{web}")],
        vec![],
    ] {
        let r = get(web, "/api/state", &headers).unwrap();
        assert!(r.contains("snapshot"), "{headers:?}: {r}");
    }
}

#[test]
fn a_name_given_with_allow_hosts_is_taken() {
    let hub = hub(&["gyr.example", "tunnel.example:8080"], Default::default());
    let web = hub.addr();
    for host in [
        "gyr.example",
        "gyr.example:443",
        "GYR.example:9",
        "tunnel.example:8080",
    ] {
        let r = get(web, "/api/state", &[format!("Host: {host}")]).unwrap();
        assert!(r.contains("snapshot"), "{host}: {r}");
    }
    let r = get(web, "/api/state", &["Host: tunnel.example:8081".into()]).unwrap();
    assert!(r.starts_with("HTTP/1.0 403"), "{r}");
    rt().block_on(async {
        let mut ws = open_ws(web, "https://gyr.example").await.unwrap();
        assert!(steers(&mut ws).await);
        let (status, _) = open_ws(web, "http://other.example").await.unwrap_err();
        assert_eq!(status, 403);
    });
}

/// Whether the peer closed `s` (end of file or reset), reading what it sends first (a gRPC
/// server's settings) and waiting at most a minute for more.
fn closed(s: &mut TcpStream) -> bool {
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
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
fn idle_connections_cannot_fill_the_hub() {
    let limit = 4;
    let hub = hub(
        &[],
        gyr_proto::listen::Limits {
            max_connections: limit,
            auth_timeout: Duration::from_millis(500),
        },
    );
    let web = hub.addr();
    let grpc = hub.grpc_addr().unwrap();
    let mut idle: Vec<TcpStream> = (0..2 * limit)
        .flat_map(|_| {
            [
                TcpStream::connect(web).unwrap(),
                TcpStream::connect(grpc).unwrap(),
            ]
        })
        .collect();
    // A real client is served (once the idle ones are gone, at the latest).
    wait_for("the web UI to serve a client", || {
        get(web, "/api/state", &[format!("Host: {web}")]).filter(|r| r.contains("snapshot"))
    });
    rt().block_on(async {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            let r = async {
                let ch = gyr_client::connect::tcp(&grpc.to_string()).await.ok()?;
                GyrClient::new(ch)
                    .list_processes(v1::ListProcessesRequest {})
                    .await
                    .ok()
            }
            .await;
            if r.is_some() {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the gRPC API serves no client"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    // Every idle connection was closed: at once past the limit, or after the timeout.
    for s in &mut idle {
        assert!(closed(s), "an idle connection stays open");
    }
    let (refused, timed_out) = hub.connections_closed();
    assert!(refused > 0 && timed_out > 0, "{refused} {timed_out}");
}
