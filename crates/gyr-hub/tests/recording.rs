//! The hub's recording under overload and across a program's server going away: every record
//! in a file has its schema and thread, and what the hub received is either in the file or
//! counted lost in its end block.

mod common;

use common::wait_for;
use gyr_core::record::push_record;
use gyr_core::trace::Item;
use gyr_core::{Field, FieldType, Schema, ThreadInfo, TraceEnd, TraceReader};
use gyr_proto::v1;
use gyr_proto::v1::gyr_client::GyrClient;
use std::path::{Path, PathBuf};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

const PID: u32 = 4_000_001;
const STARTED: u64 = 1_700_000_000_000_000_000;
const THREAD: u64 = 7;

fn hub(record: &Path, queue_bytes: usize) -> gyr_hub::Hub {
    gyr_hub::Hub::start(gyr_hub::HubConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        grpc: Some("127.0.0.1:0".parse().unwrap()),
        socket_dir: record.join("no-sockets"),
        discover: false,
        record: Some(record.to_owned()),
        record_queue_bytes: queue_bytes,
        ..Default::default()
    })
    .unwrap()
}

fn hello(steer_address: &str) -> v1::PublishMessage {
    v1::PublishMessage {
        kind: Some(v1::publish_message::Kind::Hello(v1::PublishHello {
            pid: PID,
            command_line: vec!["stepper".into()],
            started_unix_ns: STARTED,
            clock_zero_unix_ns: STARTED,
            host: "here".into(),
            steer_address: steer_address.into(),
            protocol_version: gyr_proto::PROTOCOL_VERSION,
            ..Default::default()
        })),
    }
}

fn schema(id: u32, name: &str) -> v1::Schema {
    gyr_proto::stream::wire_schema(
        &Schema::new(id, name, vec![Field::new("n", FieldType::U64)]).unwrap(),
    )
}

/// Batch `i` of `per` records of type `type_id` (sequence numbers follow on from the batch
/// before); the first carries the program's description.
fn batch(i: u64, per: u64, type_id: u32, lost: u64) -> v1::PublishMessage {
    let mut records = Vec::new();
    for j in 0..per {
        let seq = i * per + j + 1;
        push_record(
            &mut records,
            type_id,
            seq * 1000,
            seq,
            0,
            &seq.to_le_bytes(),
        );
    }
    let first = i == 0;
    v1::PublishMessage {
        kind: Some(v1::publish_message::Kind::Batch(v1::EventBatch {
            schemas: if first {
                vec![
                    gyr_proto::stream::wire_schema(&gyr_core::lost_schema(1)),
                    schema(2, "step"),
                ]
            } else {
                vec![]
            },
            threads: if first {
                vec![gyr_proto::stream::wire_thread(&ThreadInfo {
                    id: THREAD,
                    name: "main".into(),
                    os_tid: 1,
                })]
            } else {
                vec![]
            },
            blocks: vec![v1::RecordBlock {
                thread: THREAD,
                records: records.into(),
            }],
            lost,
            pid: 0,
            anchor: None,
            events: Vec::new(),
            undecodable: 0,
        })),
    }
}

/// Publishes to `hub`: the hello, then whatever comes through the returned sender, until it is
/// dropped.
fn publisher(
    rt: &tokio::runtime::Runtime,
    hub: &gyr_hub::Hub,
    steer_address: &str,
) -> (
    mpsc::Sender<v1::PublishMessage>,
    tokio::task::JoinHandle<u64>,
) {
    let (tx, rx) = mpsc::channel(16);
    tx.try_send(hello(steer_address)).unwrap();
    let grpc = hub.grpc_addr().unwrap().to_string();
    let task = rt.spawn(async move {
        let mut c = GyrClient::new(gyr_client::connect::tcp(&grpc).await.unwrap());
        c.publish(ReceiverStream::new(rx))
            .await
            .unwrap()
            .into_inner()
            .received
    });
    (tx, task)
}

/// What the recording holds: its files, its records (each checked to have its schema and its
/// thread), and its end blocks.
struct Recorded {
    files: Vec<PathBuf>,
    records: u64,
    ends: Vec<TraceEnd>,
}

fn read(dir: &Path) -> Recorded {
    let files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "gyr"))
        .collect();
    let (mut records, mut ends) = (0, Vec::new());
    for f in &files {
        let mut r = TraceReader::open(f).unwrap();
        let mut threads = std::collections::HashSet::new();
        r.for_each_item(|i| match i {
            Item::Thread(t) => {
                threads.insert(t.id);
            }
            Item::Record { schema, record } => {
                assert!(schema.is_some(), "a record without its schema in {f:?}");
                assert!(
                    threads.contains(&record.thread),
                    "a record without its thread in {f:?}"
                );
                records += 1;
            }
            Item::End(e) => ends.push(e.clone()),
            Item::Schema(_) => {}
        });
        assert!(!r.summary().is_corrupt(), "{f:?}: {:?}", r.summary());
        assert!(r.summary().clean_end, "{f:?} was closed");
    }
    Recorded {
        files,
        records,
        ends,
    }
}

fn received(hub: &gyr_hub::Hub) -> u64 {
    hub.programs()
        .into_iter()
        .find(|(p, _, _)| *p == PID)
        .map(|(_, _, n)| n)
        .unwrap_or(0)
}

/// Waits until the program is marked gone, and returns what the hub received of it.
fn ended(hub: &gyr_hub::Hub) -> u64 {
    wait_for("the program to be marked ended", || {
        hub.programs()
            .into_iter()
            .find(|(p, alive, _)| *p == PID && !*alive)
            .map(|(_, _, n)| n)
    })
}

#[test]
fn a_recording_whose_every_batch_is_dropped_still_says_what_was_lost() {
    let dir = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    // No room at all in the writer's queue: every batch is dropped from the file.
    let hub = hub(dir.path(), 0);
    let (tx, task) = publisher(&rt, &hub, "");
    for i in 0..20 {
        tx.blocking_send(batch(i, 50, 2, if i == 3 { 5 } else { 0 }))
            .unwrap();
    }
    drop(tx);
    assert_eq!(rt.block_on(task).unwrap(), 1000);
    let received = ended(&hub);
    assert_eq!(received, 1000);
    let (total, lost) = hub.totals();
    assert_eq!(total, 1000);
    // The 5 the stream reported missed on the way, and the 1000 storage dropped.
    assert_eq!(lost, 1005);
    drop(hub);

    let rec = read(dir.path());
    assert_eq!(rec.files.len(), 1, "{:?}", rec.files);
    // None of the program's events: one `gyr.lost` record for its thread's 1000.
    assert_eq!(rec.records, 1);
    assert_eq!(lost_records(&rec.files[0]), (1, 1000));
    assert_eq!(rec.ends.len(), 1);
    assert_eq!(rec.ends[0].records, 1);
    assert_eq!(
        rec.ends[0].lost, 1005,
        "every dropped event is in the end block"
    );
}

#[test]
fn a_recording_is_closed_only_after_the_last_batch_of_a_program_whose_server_went_away() {
    let dir = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let hub = hub(dir.path(), gyr_hub::DEFAULT_RECORD_QUEUE_BYTES);
    // The hub cannot reach the server the program names, so it marks the program gone while
    // its pushed stream still brings batches.
    let nowhere = dir.path().join("no-such-socket");
    let (tx, task) = publisher(&rt, &hub, nowhere.to_str().unwrap());
    tx.blocking_send(batch(0, 50, 2, 0)).unwrap();
    ended(&hub);
    for i in 1..10 {
        tx.blocking_send(batch(i, 50, 2, 0)).unwrap();
    }
    drop(tx);
    assert_eq!(rt.block_on(task).unwrap(), 500);
    wait_for("the hub to take in every batch", || {
        (received(&hub) == 500).then_some(())
    });
    drop(hub);

    let rec = read(dir.path());
    assert_eq!(rec.files.len(), 1, "one file: {:?}", rec.files);
    assert_eq!(rec.records, 500, "the file holds every batch");
    assert_eq!(rec.ends[0].records, 500);
    assert_eq!(rec.ends[0].lost, 0);
}

#[test]
fn a_recording_under_overload_holds_or_counts_every_event() {
    let dir = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    // A queue of one byte, so of one batch at a time: whatever the writer's pace, batches are written or dropped, and a
    // new event type arrives in between.
    let hub = hub(dir.path(), 1);
    let (tx, task) = publisher(&rt, &hub, "");
    let mut first_of_new_type = batch(300, 20, 3, 0);
    if let Some(v1::publish_message::Kind::Batch(b)) = &mut first_of_new_type.kind {
        b.schemas.push(schema(3, "other"));
    }
    for i in 0..600 {
        let m = match i {
            300 => first_of_new_type.clone(),
            i if i > 300 && i % 2 == 0 => batch(i, 20, 3, 0),
            i => batch(i, 20, 2, u64::from(i % 100 == 7)),
        };
        tx.blocking_send(m).unwrap();
    }
    drop(tx);
    assert_eq!(rt.block_on(task).unwrap(), 12_000);
    assert_eq!(ended(&hub), 12_000);
    let (total, lost) = hub.totals();
    drop(hub);

    let rec = read(dir.path());
    assert_eq!(rec.files.len(), 1, "{:?}", rec.files);
    let end = &rec.ends[0];
    assert_eq!(end.records, rec.records);
    // The program's own events, and the `gyr.lost` records of what was dropped.
    let (lost_records, lost_counted) = lost_records(&rec.files[0]);
    let events = rec.records - lost_records;
    // Six batches reported one event each missed on the way to the hub.
    assert_eq!(
        events + end.lost,
        total + 6,
        "recorded + lost in the file == received + missed on the way"
    );
    assert_eq!(lost, end.lost, "the hub counts lost what the file does");
    assert_eq!(
        lost_counted + 6,
        end.lost,
        "gyr.lost counts every dropped event"
    );
}

/// The `gyr.lost` records in a file, and the events they say were lost.
fn lost_records(file: &Path) -> (u64, u64) {
    let (mut n, mut count) = (0, 0);
    TraceReader::open(file).unwrap().for_each_item(|i| {
        if let Item::Record {
            schema: Some(s),
            record,
        } = i
            && s.name == gyr_core::LOST_EVENT_NAME
        {
            n += 1;
            count += u64::from_le_bytes(record.payload[8..16].try_into().unwrap());
        }
    });
    (n, count)
}

/// A recording of two threads sharing a mutex: thread 1 holds it and blocks 90 ms on its full
/// ring (after recording the acquisition) before releasing it at 100 ms; thread 2 asked for it at 2 ms and gets it just after.
fn perturbed_recording(dir: &Path) -> PathBuf {
    let header = gyr_core::TraceHeader {
        pid: PID + 7,
        command_line: vec!["perturbed".into()],
        start_unix_ns: STARTED,
        ..Default::default()
    };
    let mut w = gyr_core::trace::TraceWriter::new(Vec::new(), &header).unwrap();
    let f = |n: &str| Field::new(n, FieldType::U64);
    w.schema(&Schema::new(1, "gyr.mutex.request", vec![f("mutex")]).unwrap())
        .unwrap();
    for (id, name) in [(2, "gyr.mutex.acquire"), (3, "gyr.mutex.release")] {
        w.schema(&Schema::new(id, name, vec![f("mutex"), f("n")]).unwrap())
            .unwrap();
    }
    for t in [1, 2] {
        w.thread(&ThreadInfo {
            id: t,
            name: format!("t{t}"),
            os_tid: t,
        })
        .unwrap();
    }
    let two = |a: u64, b: u64| [a.to_le_bytes(), b.to_le_bytes()].concat();
    let ms = 1_000_000;
    let mut r = Vec::new();
    // The acquisition's record waited 90 ms for room after its timestamp.
    push_record(&mut r, 2, ms, 1, 90 * ms, &two(9, 1));
    push_record(&mut r, 3, 100 * ms, 2, 90 * ms, &two(9, 1));
    w.records(1, &r).unwrap();
    let mut r = Vec::new();
    push_record(&mut r, 1, 2 * ms, 1, 0, &9u64.to_le_bytes());
    push_record(&mut r, 2, 100 * ms + 100_000, 2, 0, &two(9, 2));
    push_record(&mut r, 3, 101 * ms, 3, 0, &two(9, 2));
    w.records(2, &r).unwrap();
    let path = dir.join("perturbed.gyr");
    std::fs::write(&path, w.finish(&TraceEnd::default()).unwrap()).unwrap();
    path
}

/// The latest time of the replayed program's life-time view, once it took in every event, and
/// the replay's duration.
fn replayed_end(file: &Path, corrected: bool) -> (f64, f64) {
    let hub = gyr_hub::Hub::start(gyr_hub::HubConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        grpc: None,
        socket_dir: file.with_extension("sockets"),
        discover: false,
        replay: vec![file.to_owned()],
        replay_corrected: corrected,
        ..Default::default()
    })
    .unwrap();
    hub.replay_command("pause", None).unwrap();
    hub.replay_command("seek", Some(f64::MAX)).unwrap();
    let end = wait_for("the replay's five thread events", || {
        let r = common::http_get(hub.addr(), &format!("/api/timeline?pid={}", PID + 7));
        let body = r.split("\r\n\r\n").nth(1).unwrap_or("");
        let tile: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
        (tile["events"] == 5).then(|| tile["now_s"].as_f64().unwrap())
    });
    (end, hub.replay_duration().unwrap())
}

#[test]
fn a_corrected_replay_takes_the_blocked_time_out_of_both_threads() {
    let dir = tempfile::tempdir().unwrap();
    let file = perturbed_recording(dir.path());
    let (raw, raw_duration) = replayed_end(&file, false);
    assert!((raw - 0.101).abs() < 1e-6, "raw end {raw}");
    assert!(
        (raw_duration - 0.101).abs() < 1e-6,
        "raw duration {raw_duration}"
    );
    // Thread 1 releases at 10 ms once its 90 ms are removed; thread 2, which waited for that
    // release, gets the mutex 0.1 ms later and holds it 0.9 ms.
    let (corrected, duration) = replayed_end(&file, true);
    assert!(
        (corrected - 0.011).abs() < 1e-6,
        "corrected end {corrected}"
    );
    // The replay bar spans the corrected run, not the recorded one.
    assert!(
        (duration - 0.011).abs() < 1e-6,
        "corrected duration {duration}"
    );
}
