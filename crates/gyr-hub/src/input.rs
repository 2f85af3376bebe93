//! Input ports: the hub finds the user's running programs (their announcements) and attaches
//! to each through its embedded server, exactly as any client would: a live event stream, the
//! steering log, and a poll of status, objects and sensors. A program that goes away is marked
//! so, not forgotten.

use crate::Shared;
use crate::model::Process;
use gyr::server::{CLIENT_HEADER, discovery};
use gyr_proto::events::EventDecoder;
use gyr_proto::v1;
use gyr_proto::v1::gyr_client::GyrClient;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tonic::transport::Channel;

/// How often the announcement directory is read and each program's state is polled.
const POLL: Duration = Duration::from_millis(500);

/// A request to a program, named as the hub in its steering log.
pub(crate) fn request<T>(msg: T, who: &'static str) -> tonic::Request<T> {
    let mut r = tonic::Request::new(msg);
    r.metadata_mut().insert(
        CLIENT_HEADER,
        tonic::metadata::MetadataValue::from_static(who),
    );
    r
}

/// Watches `dir` for programs and attaches to every new one.
pub(crate) async fn discover(shared: Arc<Shared>, dir: PathBuf) {
    loop {
        for a in discovery::discover_in(&dir) {
            if a.pid == std::process::id() {
                continue;
            }
            let new = {
                let mut m = shared.lock();
                match m.processes.get(&a.pid) {
                    // Attached, or gone while its announcement is still being removed: a
                    // program is attached once, and keeps its history after it exits.
                    Some(p) if p.alive || p.started_unix_ns == a.started_unix_ns => false,
                    // New, or a new program that reuses an old pid.
                    _ => {
                        m.processes.insert(
                            a.pid,
                            Process::new(a.pid, a.command_line.clone(), a.started_unix_ns),
                        );
                        true
                    }
                }
            };
            if new {
                tokio::spawn(attach(shared.clone(), a.pid, a.socket.clone()));
            }
        }
        tokio::time::sleep(POLL).await;
    }
}

fn gone(shared: &Shared, pid: u32) {
    if let Some(p) = shared.lock().processes.get_mut(&pid) {
        p.alive = false;
    }
    shared
        .clients
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(&pid);
}

/// Attaches to one program until it goes away.
async fn attach(shared: Arc<Shared>, pid: u32, socket: PathBuf) {
    let Ok(channel) = gyr_proto::connect::unix(&socket).await else {
        return gone(&shared, pid);
    };
    let client = GyrClient::new(channel);
    shared
        .clients
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(pid, client.clone());
    tokio::spawn(follow_events(shared.clone(), pid, client.clone()));
    tokio::spawn(follow_log(shared.clone(), pid, client.clone()));
    poll(shared, pid, client).await;
}

async fn follow_events(shared: Arc<Shared>, pid: u32, mut c: GyrClient<Channel>) {
    let Ok(stream) = c
        .subscribe(request(v1::SubscribeRequest::default(), "gyr-hub"))
        .await
    else {
        return;
    };
    let mut stream = stream.into_inner();
    let mut decoder = EventDecoder::default();
    while let Ok(Some(batch)) = stream.message().await {
        let b = decoder.batch(batch);
        let mut m = shared.lock();
        let Some(p) = m.processes.get_mut(&pid) else {
            return;
        };
        p.missed += b.lost;
        for e in &b.events {
            p.ingest(e);
        }
    }
}

async fn follow_log(shared: Arc<Shared>, pid: u32, mut c: GyrClient<Channel>) {
    let Ok(stream) = c
        .log(request(
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
        if let Some(p) = shared.lock().processes.get_mut(&pid) {
            p.log_entry(&e);
        }
    }
}

async fn poll(shared: Arc<Shared>, pid: u32, mut c: GyrClient<Channel>) {
    loop {
        let status = c
            .status(request(v1::StatusRequest {}, "gyr-hub"))
            .await
            .map(|r| r.into_inner());
        let objects = c
            .list_objects(request(v1::ListObjectsRequest {}, "gyr-hub"))
            .await
            .map(|r| r.into_inner());
        let sensors = c
            .list_sensors(request(v1::ListSensorsRequest {}, "gyr-hub"))
            .await
            .map(|r| r.into_inner());
        match (status, objects, sensors) {
            (Ok(s), Ok(o), Ok(se)) => {
                if let Some(p) = shared.lock().processes.get_mut(&pid) {
                    p.status = Some(s);
                    p.objects = Some(o);
                    p.sensors = Some(se);
                }
            }
            _ => return gone(&shared, pid),
        }
        tokio::time::sleep(POLL).await;
    }
}
