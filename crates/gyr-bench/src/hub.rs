//! The hub (central monitor).
//!
//! - Throughput: 8 simulated processes (a child process, one Publish stream each, sending
//!   real records of gyr's format as fast as the hub takes them) into the hub, which decodes
//!   and analyses every event; against the transport floor, the same streams into a server
//!   that only counts the records.
//! - Latency: a real gyr program (a child, pushing with `GYR_HUB`) stamps events with the wall
//!   clock; a gRPC subscriber of the hub and a WebSocket client (the web UI's path) read them,
//!   while 8 simulated processes add 10k events/s each of background load.

use crate::figures::{percentile, r3};
use gyr::Sensor;
use gyr_client::events::EventDecoder;
use gyr_core::record::{Records, push_record};
use gyr_proto::v1;
use gyr_proto::v1::gyr_client::GyrClient;
use serde_json::json;
use std::io::BufRead;
use std::net::SocketAddr;
use std::pin::Pin;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio_stream::Stream;
use tonic::{Request, Response, Status};

/// Simulated processes.
const PROCESSES: usize = 8;
/// Records per batch a simulated process sends.
const BATCH: usize = 2048;
/// Background load of the latency run, per simulated process.
const BACKGROUND_RATE: f64 = 10_000.0;

fn now_us() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as f64 / 1e3)
        .unwrap_or(0.0)
}

/// A child process, killed when dropped.
struct Kid(Child);
impl Drop for Kid {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn(args: &[String]) -> anyhow::Result<Kid> {
    Ok(Kid(Command::new(std::env::current_exe()?)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()?))
}

/// The child's last line, parsed (its report).
fn report(kid: &mut Kid) -> anyhow::Result<serde_json::Value> {
    let out = kid.0.stdout.take().expect("piped");
    let mut last = String::new();
    for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
        last = line;
    }
    kid.0.wait()?;
    serde_json::from_str(&last).map_err(|e| anyhow::anyhow!("a child's report `{last}`: {e}"))
}

fn hub(grpc: bool) -> anyhow::Result<gyr_hub::Hub> {
    let dir = std::env::temp_dir().join(format!("gyr-bench-hub-{}", std::process::id()));
    Ok(gyr_hub::Hub::start(gyr_hub::HubConfig {
        listen: "127.0.0.1:0".parse()?,
        grpc: grpc.then(|| "127.0.0.1:0".parse()).transpose()?,
        socket_dir: dir,
        discover: false,
        ..Default::default()
    })?)
}

pub(crate) fn run(json: bool, quick: bool) -> anyhow::Result<()> {
    let seconds = if quick { 3 } else { 10 };

    // Throughput into the hub.
    let h = hub(true)?;
    let addr = h.grpc_addr().expect("served");
    let mut feeder = spawn(&feeder_args(addr, seconds, None))?;
    let (rate, sent) = {
        // Measured over the middle of the run, from the hub's own count.
        let deadline = Instant::now() + Duration::from_secs(10);
        while h.totals().0 == 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        std::thread::sleep(Duration::from_millis(500));
        let (t0, r0) = (Instant::now(), h.totals().0);
        std::thread::sleep(Duration::from_secs_f64(seconds as f64 - 1.5));
        let (t1, r1) = (Instant::now(), h.totals().0);
        let rate = (r1 - r0) as f64 / (t1 - t0).as_secs_f64();
        (rate, report(&mut feeder)?["sent"].as_u64().unwrap_or(0))
    };
    std::thread::sleep(Duration::from_millis(500));
    let (received, hub_lost) = h.totals();
    let lost = sent.saturating_sub(received) + hub_lost;
    if !json {
        println!(
            "hub: {:.2} M events/s from {PROCESSES} simulated processes ({received} of {sent} taken in, {lost} lost)",
            rate / 1e6
        );
    }
    drop(h);

    // The transport floor: the same streams into a server that only counts.
    let floor = floor_rate(seconds)?;
    if !json {
        println!("floor: {:.2} M events/s (gRPC, counted only)", floor / 1e6);
    }

    // Latency, under background load.
    let h = hub(true)?;
    let addr = h.grpc_addr().expect("served");
    let web = h.addr();
    let _background = spawn(&feeder_args(addr, seconds + 3, Some(BACKGROUND_RATE)))?;
    let mut probe = spawn(&[
        "hub-probe".into(),
        "--hub".into(),
        addr.to_string(),
        "--seconds".into(),
        seconds.to_string(),
    ])?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let (g, w) = rt.block_on(async {
        let until = Instant::now() + Duration::from_secs(seconds + 2);
        let g = tokio::spawn(grpc_latency(addr, until));
        let w = tokio::spawn(ws_latency(web, until));
        (g.await, w.await)
    });
    let probe_report = report(&mut probe)?;
    let (grpc_ms, ws_ms) = (&mut g??, &mut w??);
    let probes = probe_report["probes"].as_u64().unwrap_or(0);
    let p50 = percentile(grpc_ms, 0.5);
    let p99 = percentile(grpc_ms, 0.99);
    let ws50 = percentile(ws_ms, 0.5);
    let ws99 = percentile(ws_ms, 0.99);
    if !json {
        println!(
            "latency sensor -> hub -> gRPC subscriber: p50 {p50:.3} ms, p99 {p99:.3} ms ({} of {probes} probes; background {} x {} events/s)",
            grpc_ms.len(),
            PROCESSES,
            BACKGROUND_RATE
        );
        println!(
            "latency sensor -> hub -> WebSocket page: p50 {ws50:.1} ms, p99 {ws99:.1} ms ({} probes)",
            ws_ms.len()
        );
    }
    let out = json!({
        "bench": "hub",
        "processes": PROCESSES,
        "seconds": seconds,
        "events_per_s": rate.round(),
        "events_sent": sent,
        "events_received": received,
        "lost": lost,
        "transport_events_per_s": floor.round(),
        "ratio_vs_transport": r3(rate / floor),
        "latency_p50_ms": r3(p50),
        "latency_p99_ms": r3(p99),
        "latency_probes": grpc_ms.len(),
        "probes_sent": probes,
        "background_events_per_s": (PROCESSES as f64 * BACKGROUND_RATE).round(),
        "ws_latency_p50_ms": r3(ws50),
        "ws_latency_p99_ms": r3(ws99),
        "ws_probes": ws_ms.len(),
        "ws_tick_ms": gyr_hub::TICK.as_millis() as u64,
        "targets": {
            "events_per_s>=5M": rate >= 5e6,
            "lost==0": lost == 0,
            "latency_p50_ms<=1": p50 <= 1.0,
            "ws_latency_p50_ms<=50": ws50 <= 50.0,
        },
    });
    println!("{out}");
    Ok(())
}

fn feeder_args(addr: SocketAddr, seconds: u64, rate: Option<f64>) -> Vec<String> {
    let mut a = vec![
        "hub-feeder".into(),
        "--addr".into(),
        addr.to_string(),
        "--processes".into(),
        PROCESSES.to_string(),
        "--seconds".into(),
        seconds.to_string(),
    ];
    if let Some(r) = rate {
        a.extend(["--rate".into(), r.to_string()]);
    }
    a
}

/// What the simulated processes send: per-domain work, like examples/md's.
fn schema() -> gyr_core::Schema {
    use gyr_core::{Field, FieldType};
    gyr_core::Schema::new(
        1,
        "sim.work",
        vec![
            Field::new("domain", FieldType::U32),
            Field::new("step", FieldType::U64),
            Field::new("work", FieldType::F64),
            Field::new("imbalance", FieldType::F64),
        ],
    )
    .expect("a valid schema")
}

/// `gyr-bench hub-feeder`: simulated processes publishing to `addr` for `seconds`, as fast as
/// it takes them or at `rate` events/s each; prints `{"sent": N}`.
pub(crate) fn feeder(
    addr: String,
    processes: usize,
    seconds: u64,
    rate: Option<f64>,
) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let sent = rt.block_on(async {
        let start = Instant::now();
        let until = start + Duration::from_secs(seconds);
        let mut tasks = Vec::new();
        for i in 0..processes {
            tasks.push(tokio::spawn(simulated_process(
                addr.clone(),
                i as u32,
                start,
                until,
                rate,
            )));
        }
        let mut sent = 0;
        for t in tasks {
            sent += t.await??;
        }
        anyhow::Ok(sent)
    })?;
    println!("{}", json!({ "sent": sent }));
    Ok(())
}

/// A simulated program's `Publish` stream to the hub's gRPC API at `addr`, opened with its
/// hello (`pid`, `command_line`, started now): the sender for its batches, and the call, which
/// ends once the sender is dropped.
pub(crate) async fn publish_stream(
    addr: &str,
    pid: u32,
    command_line: Vec<String>,
) -> anyhow::Result<(
    tokio::sync::mpsc::Sender<v1::PublishMessage>,
    tokio::task::JoinHandle<Result<tonic::Response<v1::PublishReply>, tonic::Status>>,
)> {
    let mut client = GyrClient::new(gyr_client::connect::tcp(addr).await?)
        .max_encoding_message_size(64 << 20)
        .max_decoding_message_size(64 << 20);
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    let call = tokio::spawn(async move {
        client
            .publish(tokio_stream::wrappers::ReceiverStream::new(rx))
            .await
    });
    let started = SystemTime::now().duration_since(UNIX_EPOCH)?.as_nanos() as u64;
    tx.send(v1::PublishMessage {
        kind: Some(v1::publish_message::Kind::Hello(v1::PublishHello {
            pid,
            command_line,
            started_unix_ns: started,
            clock_zero_unix_ns: started,
            host: "bench".into(),
            protocol_version: gyr_proto::PROTOCOL_VERSION,
            ..Default::default()
        })),
    })
    .await?;
    Ok((tx, call))
}

async fn simulated_process(
    addr: String,
    i: u32,
    start: Instant,
    until: Instant,
    rate: Option<f64>,
) -> anyhow::Result<u64> {
    let schema = schema();
    let pid = 4_000_000 + i;
    let (tx, call) = publish_stream(&addr, pid, vec![format!("simulated-{i}")]).await?;
    let batch = match rate {
        Some(r) => ((r / 100.0) as usize).max(1),
        None => BATCH,
    };
    let mut sent = 0u64;
    let mut seq = 0u64;
    let mut first = true;
    let mut payload = Vec::with_capacity(28);
    while Instant::now() < until {
        let t_ns = start.elapsed().as_nanos() as u64;
        let mut records = Vec::with_capacity(batch * 64);
        for j in 0..batch {
            payload.clear();
            payload.extend_from_slice(&((j % 8) as u32).to_le_bytes());
            payload.extend_from_slice(&seq.to_le_bytes());
            payload.extend_from_slice(&(1.0 + (j % 8) as f64 * 0.25).to_le_bytes());
            payload.extend_from_slice(&1.75f64.to_le_bytes());
            push_record(&mut records, 1, t_ns + j as u64, seq, 0, &payload);
            seq += 1;
        }
        let b = v1::EventBatch {
            schemas: if first {
                vec![gyr_proto::stream::wire_schema(&schema)]
            } else {
                Vec::new()
            },
            threads: if first {
                vec![v1::ThreadInfo {
                    id: 1,
                    name: "main".into(),
                    os_tid: u64::from(pid),
                    ..Default::default()
                }]
            } else {
                Vec::new()
            },
            blocks: vec![v1::RecordBlock {
                thread: 1,
                records: records.into(),
            }],
            lost: 0,
            pid: 0,
            anchor: None,
            events: Vec::new(),
            undecodable: 0,
        };
        first = false;
        if tx
            .send(v1::PublishMessage {
                kind: Some(v1::publish_message::Kind::Batch(b)),
            })
            .await
            .is_err()
        {
            break;
        }
        sent += batch as u64;
        if let Some(r) = rate {
            let due = start + Duration::from_secs_f64(sent as f64 / r);
            tokio::time::sleep_until(due.into()).await;
        }
    }
    drop(tx);
    call.await??;
    Ok(sent)
}

/// A server that only counts what is published to it: the transport's floor.
#[derive(Debug, Clone, Default)]
struct CountOnly {
    count: Arc<AtomicU64>,
}

type BoxStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

fn no<T>() -> Result<Response<T>, Status> {
    Err(Status::unimplemented("the floor server only counts"))
}

#[tonic::async_trait]
impl v1::gyr_server::Gyr for CountOnly {
    async fn handshake(
        &self,
        _: Request<v1::HandshakeRequest>,
    ) -> Result<Response<v1::HandshakeReply>, Status> {
        no()
    }
    async fn list_processes(
        &self,
        _: Request<v1::ListProcessesRequest>,
    ) -> Result<Response<v1::ListProcessesReply>, Status> {
        no()
    }
    async fn publish(
        &self,
        req: Request<tonic::Streaming<v1::PublishMessage>>,
    ) -> Result<Response<v1::PublishReply>, Status> {
        let mut s = req.into_inner();
        let mut n = 0;
        while let Some(m) = s.message().await? {
            if let Some(v1::publish_message::Kind::Batch(b)) = m.kind {
                for block in &b.blocks {
                    let k = Records::new(block.thread, &block.records).count() as u64;
                    n += k;
                    self.count.fetch_add(k, Ordering::Relaxed);
                }
            }
        }
        Ok(Response::new(v1::PublishReply { received: n }))
    }
    async fn ping(&self, _: Request<v1::PingRequest>) -> Result<Response<v1::PingReply>, Status> {
        no()
    }
    async fn status(
        &self,
        _: Request<v1::StatusRequest>,
    ) -> Result<Response<v1::StatusReply>, Status> {
        no()
    }
    async fn list_objects(
        &self,
        _: Request<v1::ListObjectsRequest>,
    ) -> Result<Response<v1::ListObjectsReply>, Status> {
        no()
    }
    async fn get(&self, _: Request<v1::GetRequest>) -> Result<Response<v1::GetReply>, Status> {
        no()
    }
    async fn set(&self, _: Request<v1::SetRequest>) -> Result<Response<v1::SetReply>, Status> {
        no()
    }
    async fn call(&self, _: Request<v1::CallRequest>) -> Result<Response<v1::CallReply>, Status> {
        no()
    }
    async fn control(
        &self,
        _: Request<v1::ControlRequest>,
    ) -> Result<Response<v1::StatusReply>, Status> {
        no()
    }
    async fn list_sensors(
        &self,
        _: Request<v1::ListSensorsRequest>,
    ) -> Result<Response<v1::SensorsReply>, Status> {
        no()
    }
    async fn sensor_control(
        &self,
        _: Request<v1::SensorControlRequest>,
    ) -> Result<Response<v1::SensorsReply>, Status> {
        no()
    }
    type SubscribeStream = BoxStream<v1::EventBatch>;
    async fn subscribe(
        &self,
        _: Request<v1::SubscribeRequest>,
    ) -> Result<Response<Self::SubscribeStream>, Status> {
        no()
    }
    type LogStream = BoxStream<v1::LogEntry>;
    async fn log(&self, _: Request<v1::LogRequest>) -> Result<Response<Self::LogStream>, Status> {
        no()
    }
    async fn list_rules(
        &self,
        _: Request<v1::ListRulesRequest>,
    ) -> Result<Response<v1::ListRulesReply>, Status> {
        no()
    }
    async fn list_alerts(
        &self,
        _: Request<v1::ListAlertsRequest>,
    ) -> Result<Response<v1::ListAlertsReply>, Status> {
        no()
    }
}

fn floor_rate(seconds: u64) -> anyhow::Result<f64> {
    // One thread, as the hub's analyses take one at a time: on 2 cores, a server spreading
    // over both would only take them from the simulated processes.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let server = CountOnly::default();
        let count = server.count.clone();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        tokio::spawn(
            tonic::transport::Server::builder()
                .tcp_nodelay(true)
                .add_service(v1::gyr_server::GyrServer::new(server))
                .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
        );
        let mut feeder = spawn(&feeder_args(addr, seconds, None))?;
        let deadline = Instant::now() + Duration::from_secs(10);
        while count.load(Ordering::Relaxed) == 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        let (t0, c0) = (Instant::now(), count.load(Ordering::Relaxed));
        tokio::time::sleep(Duration::from_secs_f64(seconds as f64 - 1.5)).await;
        let (t1, c1) = (Instant::now(), count.load(Ordering::Relaxed));
        tokio::task::spawn_blocking(move || report(&mut feeder)).await??;
        Ok((c1 - c0) as f64 / (t1 - t0).as_secs_f64())
    })
}

/// A probe event for the gRPC path: when it was emitted.
#[derive(Sensor)]
#[sensor(name = "bench.hub_probe")]
struct HubProbe {
    sent_us: f64,
}

/// A probe event for the web path, at most one per decimation bucket, so that a page's point
/// is exactly one probe's time.
#[derive(Sensor)]
#[sensor(name = "bench.ws_probe")]
struct WsProbe {
    sent_us: f64,
}

/// `gyr-bench hub-probe`: a real gyr program pushing to the hub at `hub`: a probe every
/// millisecond, a web probe every 50 ms, for `seconds`; prints `{"probes": N}`.
pub(crate) fn probe(hub: String, seconds: u64) -> anyhow::Result<()> {
    let rt = gyr::Builder::new()
        .with_default_env()
        .hub(hub, None)
        .start()?;
    // Give the push time to connect: events before it are not the hub's.
    std::thread::sleep(Duration::from_millis(500));
    let until = Instant::now() + Duration::from_secs(seconds);
    let mut n = 0u64;
    let mut i = 0u64;
    while Instant::now() < until {
        HubProbe { sent_us: now_us() }.emit();
        n += 1;
        if i.is_multiple_of(50) {
            WsProbe { sent_us: now_us() }.emit();
        }
        i += 1;
        std::thread::sleep(Duration::from_millis(1));
    }
    std::thread::sleep(Duration::from_millis(300));
    drop(rt);
    println!("{}", json!({ "probes": n }));
    Ok(())
}

async fn grpc_latency(addr: SocketAddr, until: Instant) -> anyhow::Result<Vec<f64>> {
    let mut c = GyrClient::new(gyr_client::connect::tcp(&addr.to_string()).await?);
    let mut stream = c
        .subscribe(v1::SubscribeRequest {
            types: vec!["bench.hub_probe".into()],
            threads: vec![],
            decoded: false,
        })
        .await?
        .into_inner();
    let mut decoder = EventDecoder::default();
    let mut out = Vec::new();
    let deadline = tokio::time::Instant::from_std(until);
    while let Ok(Ok(Some(b))) = tokio::time::timeout_at(deadline, stream.message()).await {
        let now = now_us();
        for e in decoder.batch(b).events {
            if let Some((_, v)) = e.fields.first()
                && let Some(sent) = v.as_f64()
            {
                out.push((now - sent) / 1e3);
            }
        }
    }
    Ok(out)
}

async fn ws_latency(web: SocketAddr, until: Instant) -> anyhow::Result<Vec<f64>> {
    use futures_util::StreamExt as _;
    let (mut ws, _) = tokio_tungstenite::connect_async(format!("ws://{web}/ws")).await?;
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    let deadline = tokio::time::Instant::from_std(until);
    while let Ok(Some(Ok(msg))) = tokio::time::timeout_at(deadline, ws.next()).await {
        let now = now_us();
        let tokio_tungstenite::tungstenite::Message::Text(t) = msg else {
            continue;
        };
        let Ok(j) = serde_json::from_str::<serde_json::Value>(&t) else {
            continue;
        };
        let mut values = Vec::new();
        for key in ["points", "live"] {
            let Some(m) = j[key].as_object() else {
                continue;
            };
            for (id, v) in m {
                if !id.ends_with("/bench.ws_probe/sent_us") {
                    continue;
                }
                match v.as_array() {
                    // live: one [t, v]; points: a list of them.
                    Some(a) if a.len() == 2 && a[0].is_number() => values.push(a[1].clone()),
                    Some(a) => values.extend(a.iter().map(|p| p[1].clone())),
                    None => {}
                }
            }
        }
        // The snapshot holds probes from before this client connected: not latencies.
        if j["t"] == "snapshot" {
            for v in values {
                seen.insert(v.to_string());
            }
            continue;
        }
        for v in values {
            if let Some(x) = v.as_f64()
                && seen.insert(v.to_string())
            {
                out.push((now - x) / 1e3);
            }
        }
    }
    Ok(out)
}
