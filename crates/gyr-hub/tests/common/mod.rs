//! Helpers shared by the hub's integration tests: child programs, waiting, a page's
//! WebSocket, plain HTTP.
#![allow(dead_code)]

pub(crate) mod ranks;

use futures_util::{SinkExt, StreamExt};
use serde_json::Value;
use std::process::Child;
use std::time::{Duration, Instant};
use tokio_tungstenite::tungstenite::Message;

/// A child program, killed when dropped.
pub(crate) struct Program(pub(crate) Child);
impl Drop for Program {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Polls `f` until it gives a value, for at most a minute.
pub(crate) fn wait_for<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A page's WebSocket.
pub(crate) type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// The next JSON message from the hub.
pub(crate) async fn next_json(ws: &mut Ws) -> Value {
    loop {
        match ws.next().await.expect("the hub closed the socket").unwrap() {
            Message::Text(t) => return serde_json::from_str(t.as_str()).unwrap(),
            _ => continue,
        }
    }
}

/// Sends a command and returns its reply (updates arriving meanwhile are skipped).
pub(crate) async fn command(ws: &mut Ws, cmd: Value) -> Value {
    ws.send(Message::Text(cmd.to_string().into()))
        .await
        .unwrap();
    loop {
        let m = next_json(ws).await;
        if m["t"] == "reply" {
            return m;
        }
    }
}

/// A plain HTTP GET; the whole response, headers included.
pub(crate) fn http_get(addr: std::net::SocketAddr, path: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}
