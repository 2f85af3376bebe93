//! Input ports: how programs reach the hub, while it runs.
//!
//! - Attached: the hub finds the user's running programs (their announcements) and attaches to
//!   each through its embedded server, exactly as any client would: a live event stream, the
//!   steering log, and a poll of status, objects and sensors.
//! - Pushed: a program started with `GYR_HUB=host:port` connects to the hub's gRPC API and
//!   publishes its stream; the hub attaches back to the server the program names, for its
//!   steering log, state and steering.
//!
//! A program both pushing and announced is taken once: the push wins, and records that came
//! both ways are taken once (by their sequence numbers). A program that goes away is marked
//! so, not forgotten.

use crate::Shared;
use crate::program::{Process, Source};
use gyr_client::{CLIENT_HEADER, discovery};
use gyr_proto::v1;
use gyr_proto::v1::gyr_client::GyrClient;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tonic::Status;
use tonic::transport::Channel;

/// How often the announcement directory is read and each program's state is polled.
const POLL: Duration = Duration::from_millis(500);

/// The hub's client of one program's server.
#[derive(Debug, Clone)]
pub(crate) struct ProgramClient {
    pub(crate) inner: GyrClient<Channel>,
    token: Option<String>,
}

impl ProgramClient {
    /// A request to the program, naming `who` in its steering log.
    pub(crate) fn req<T>(&self, msg: T, who: &str) -> tonic::Request<T> {
        let mut r = tonic::Request::new(msg);
        if let Ok(v) = who.parse() {
            r.metadata_mut().insert(CLIENT_HEADER, v);
        }
        if let Some(t) = &self.token
            && let Ok(v) = format!("Bearer {t}").parse()
        {
            r.metadata_mut().insert("authorization", v);
        }
        r
    }
}

/// Where a program's server listens.
#[derive(Debug, Clone)]
enum Address {
    Unix(PathBuf),
    Tcp(String),
}

impl Address {
    fn parse(s: &str) -> Option<Address> {
        if s.is_empty() {
            None
        } else if s.starts_with('/') {
            Some(Address::Unix(s.into()))
        } else {
            Some(Address::Tcp(s.to_owned()))
        }
    }

    async fn connect(&self) -> Result<Channel, tonic::transport::Error> {
        match self {
            Address::Unix(p) => gyr_client::connect::unix(p).await,
            Address::Tcp(a) => gyr_client::connect::tcp(a).await,
        }
    }
}

/// Watches `dir` for programs and attaches to every new one.
pub(crate) async fn discover(shared: Arc<Shared>, dir: PathBuf) {
    let mut complained = false;
    loop {
        let found = match discovery::discover_in(&dir) {
            Ok(found) => {
                complained = false;
                found
            }
            Err(e) => {
                // Said once, and again only after it was fixed and broke anew.
                if !complained {
                    eprintln!("gyr hub: not attaching to programs: {e}");
                    complained = true;
                }
                Vec::new()
            }
        };
        for a in found {
            if a.pid == std::process::id() {
                continue;
            }
            let new = shared.programs.put_if(a.pid, |known| match known {
                // Attached, pushing, or gone while its announcement is still being removed:
                // a program is taken once, and keeps its history after it exits.
                Some(p) if p.alive || p.started_unix_ns == a.started_unix_ns => None,
                // New, or a new program that reuses an old pid.
                _ => {
                    let mut p = Process::new(
                        a.pid,
                        a.command_line.clone(),
                        a.started_unix_ns,
                        Source::Attached,
                    );
                    // Announced in this user's directory: on this machine.
                    p.host = gyr_core::TraceHeader::for_this_process().host;
                    Some(p)
                }
            });
            if new {
                tokio::spawn(attach(
                    shared.clone(),
                    a.pid,
                    a.started_unix_ns,
                    Address::Unix(a.socket.clone()),
                    None,
                    true,
                ));
            }
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Marks a program gone (if it is still the one that started at `started`).
fn gone(shared: &Shared, pid: u32, started: u64) {
    let ended = shared.programs.with(pid, |p| {
        if p.started_unix_ns != started || !p.alive {
            return false;
        }
        p.alive = false;
        if p.finished() {
            finished(shared, p);
        }
        true
    });
    if ended == Some(true) {
        shared.clients().remove(&pid);
    }
}

/// Program `p` is gone and its last stream delivered its last batch: its subscribers' streams
/// end, and so does its recording (not before: batches still in a stream when its server went
/// away are taken in after).
fn finished(shared: &Shared, p: &Process) {
    shared.outputs.ended(p.pid);
    shared.mpi_gone(p.pid);
    if let Some(s) = &shared.store {
        s.ended(p);
    }
}

/// Counts an event stream from program `pid` (started at `started`) as open; false if that
/// program is no longer the one under this pid.
fn stream_opened(shared: &Shared, pid: u32, started: u64) -> bool {
    shared
        .programs
        .with(pid, |p| {
            let same = p.started_unix_ns == started;
            if same {
                p.streams += 1;
            }
            same
        })
        .unwrap_or(false)
}

/// An event stream from program `pid` ended: if the program is gone, its subscribers' streams
/// end too, now that its last batch has been forwarded.
fn stream_closed(shared: &Shared, pid: u32, started: u64) {
    shared.programs.with(pid, |p| {
        if p.started_unix_ns == started {
            p.streams = p.streams.saturating_sub(1);
            if p.finished() {
                finished(shared, p);
            }
        }
    });
}

/// Attaches to one program's server until it goes away: its state, its log and, unless it
/// pushes them, its events.
async fn attach(
    shared: Arc<Shared>,
    pid: u32,
    started: u64,
    address: Address,
    token: Option<String>,
    events: bool,
) {
    let Ok(channel) = address.connect().await else {
        return gone(&shared, pid, started);
    };
    let client = ProgramClient {
        inner: GyrClient::new(channel),
        token,
    };
    shared.clients().insert(pid, client.clone());
    if events {
        tokio::spawn(follow_events(shared.clone(), pid, started, client.clone()));
    }
    tokio::spawn(follow_log(shared.clone(), pid, started, client.clone()));
    poll(shared, pid, started, client).await;
}

async fn follow_events(shared: Arc<Shared>, pid: u32, started: u64, c: ProgramClient) {
    let Ok(stream) = c
        .inner
        .clone()
        .subscribe(c.req(v1::SubscribeRequest::default(), "gyr-hub"))
        .await
    else {
        return;
    };
    let mut stream = stream.into_inner();
    if !stream_opened(&shared, pid, started) {
        return;
    }
    while let Ok(Some(batch)) = stream.message().await {
        if shared
            .ingest(pid, started, Source::Attached, batch)
            .is_none()
        {
            // The program now pushes its stream (or was replaced): this one is not needed.
            break;
        }
    }
    stream_closed(&shared, pid, started);
}

async fn follow_log(shared: Arc<Shared>, pid: u32, started: u64, c: ProgramClient) {
    let Ok(stream) = c
        .inner
        .clone()
        .log(c.req(
            v1::LogRequest {
                after: 0,
                follow: true,
            },
            "gyr-hub",
        ))
        .await
    else {
        return;
    };
    let mut stream = stream.into_inner();
    while let Ok(Some(e)) = stream.message().await {
        let entry = shared.programs.with(pid, |p| {
            (p.started_unix_ns == started).then(|| {
                p.log_entry(&e);
                p.log_entries.back().cloned()
            })
        });
        let Some(Some(entry)) = entry else { return };
        if let Some(e) = entry {
            let _ = shared.outputs.log.send(e);
        }
    }
}

async fn poll(shared: Arc<Shared>, pid: u32, started: u64, c: ProgramClient) {
    let mut inner = c.inner.clone();
    loop {
        let status = inner
            .status(c.req(v1::StatusRequest {}, "gyr-hub"))
            .await
            .map(|r| r.into_inner());
        let objects = inner
            .list_objects(c.req(v1::ListObjectsRequest {}, "gyr-hub"))
            .await
            .map(|r| r.into_inner());
        let sensors = inner
            .list_sensors(c.req(v1::ListSensorsRequest {}, "gyr-hub"))
            .await
            .map(|r| r.into_inner());
        match (status, objects, sensors) {
            (Ok(s), Ok(o), Ok(se)) => {
                let same = shared.programs.with(pid, |p| {
                    let same = p.started_unix_ns == started;
                    if same {
                        p.status = Some(s);
                        p.objects = Some(o);
                        p.sensors = Some(se);
                    }
                    same
                });
                if same != Some(true) {
                    return;
                }
            }
            _ => return gone(&shared, pid, started),
        }
        tokio::time::sleep(POLL).await;
    }
}

/// A program publishing its stream to the hub (`GYR_HUB`): a hello, then batches until it
/// ends. Returns the events taken in.
pub(crate) async fn publish(
    shared: Arc<Shared>,
    mut stream: tonic::Streaming<v1::PublishMessage>,
) -> Result<u64, Status> {
    let hello = match stream.message().await? {
        Some(v1::PublishMessage {
            kind: Some(v1::publish_message::Kind::Hello(h)),
        }) => h,
        _ => {
            return Err(Status::invalid_argument(
                "a Publish stream starts with a hello naming the program",
            ));
        }
    };
    gyr_proto::check_version(hello.protocol_version, "this hub", "the program")?;
    let (pid, started) = (hello.pid, hello.started_unix_ns);
    let attach_back = shared.programs.put_if(pid, |known| match known {
        // Already attached through its announcement: the push takes over the events.
        Some(p) if p.alive && p.started_unix_ns == started => {
            p.source = Source::Pushed;
            p.host = hello.host.clone();
            None
        }
        _ => {
            let mut p = Process::new(pid, hello.command_line.clone(), started, Source::Pushed);
            p.host = hello.host.clone();
            p.clock_zero_unix_ns = hello.clock_zero_unix_ns;
            Some(p)
        }
    });
    stream_opened(&shared, pid, started);
    let address = Address::parse(&hello.steer_address);
    if attach_back && let Some(a) = address.clone() {
        let token = (!hello.steer_token.is_empty()).then(|| hello.steer_token.clone());
        tokio::spawn(attach(shared.clone(), pid, started, a, token, false));
    }
    let mut received = 0;
    loop {
        match stream.message().await {
            Ok(Some(v1::PublishMessage {
                kind: Some(v1::publish_message::Kind::Batch(b)),
            })) => {
                match shared.ingest(pid, started, Source::Pushed, b) {
                    Some(n) => received += n,
                    // Replaced by a new program with the same pid.
                    None => break,
                }
            }
            Ok(Some(_)) => {}
            Ok(None) | Err(_) => break,
        }
    }
    stream_closed(&shared, pid, started);
    if address.is_none() {
        // Nothing else tells the hub when it ends.
        gone(&shared, pid, started);
    }
    Ok(received)
}
