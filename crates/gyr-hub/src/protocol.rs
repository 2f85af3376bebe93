//! The page protocol: every message between the hub and a web page, as types.
//!
//! One WebSocket per page (`/ws`): the hub sends a [`Snapshot`] when the page connects (and
//! again when the page fell behind or a replay seeked), then an [`Update`] every tick
//! (`TICK`, 40 ms): the points of the series that moved, every sixth tick also the programs'
//! summaries, statistics and groups. The page sends [`PageRequest`]s: its buttons' messages
//! and its command line as text, and gets one [`Reply`] each. `/api/access` answers
//! [`AccessInfo`], `/api/state` a [`Snapshot`], `/api/timeline` a [`TimelineTile`],
//! `/api/mpi` an [`MpiView`] and `/api/mpi/timeline` a [`RankTile`].
//!
//! A series is named `PID/TYPE/FIELD`; a point is `[t, value]`, `t` in seconds of the
//! program's clock (to the microsecond), the value exactly as the program gave it; rates go to
//! 7 significant digits. Maps keep the order the hub built them in.
//! What does not change is not sent again: a thread's name comes in the snapshot and in the
//! first update that lists the thread, and the page keeps it.
//!
//! `web/src/protocol.d.ts` declares the same types for the page's code; a test generates it
//! from these and fails when the checked-in file differs (`GYR_BLESS=1` rewrites it).

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

/// `[t, value]`: seconds of the program's clock, and the mean over one bucket.
pub type Point = (f64, f64);

/// The latest values per group of one grouped field: group (`3` for domain 3) → field → value.
pub type Groups = IndexMap<String, IndexMap<String, f64>>;

/// A message from the hub to a page.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(tag = "t", rename_all = "snake_case")]
pub enum ToPage {
    /// Everything the page needs to start from.
    Snapshot(Snapshot),
    /// What changed since the last tick.
    Update(Update),
    /// The answer to one [`PageRequest`].
    Reply(Reply),
}

/// Everything a page needs to start from.
#[derive(Debug, Clone, Default, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct Snapshot {
    /// The width of a series bucket, in seconds of program time.
    pub bucket_s: f64,
    /// The window statistics are computed over, in seconds.
    pub stats_window_s: f64,
    /// Every program the hub knows, alive or gone.
    pub processes: Vec<ProcessSummary>,
    /// The history of every series.
    pub points: IndexMap<String, Vec<Point>>,
    /// The bucket still filling, per series: drawn as the last point until it closes.
    pub live: IndexMap<String, Point>,
    /// Statistics of every series over the last window.
    pub stats: IndexMap<String, Stats>,
    /// The latest values per group (domain, worker, ...), per grouped field.
    pub groups: IndexMap<String, Groups>,
    /// The steering log, oldest first.
    pub log: Vec<LogLine>,
    /// Events of alert types, oldest first.
    pub alerts: Vec<Alert>,
    /// The replay's position and speed, when the hub replays trace files.
    pub replay: Option<ReplayState>,
    /// The hub's own state.
    pub hub: HubState,
}

/// What changed since the last tick.
#[derive(Debug, Clone, Default, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct Update {
    /// New closed points of the series that moved.
    pub points: IndexMap<String, Vec<Point>>,
    /// The bucket still filling, per series that moved.
    pub live: IndexMap<String, Point>,
    /// New steering-log entries.
    pub log: Vec<LogLine>,
    /// New alerts.
    pub alerts: Vec<Alert>,
    /// Every sixth tick: every program's summary.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub processes: Option<Vec<ProcessSummary>>,
    /// Every sixth tick: statistics of the series that moved.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub stats: Option<IndexMap<String, Stats>>,
    /// Every sixth tick: the latest values per group.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub groups: Option<IndexMap<String, Groups>>,
    /// With the summaries: the hub's own state.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub hub: Option<HubState>,
    /// When replaying: the replay's position and speed.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub replay: Option<ReplayState>,
    /// When the update left the hub (Unix ms): the page measures how far behind it is.
    pub sent_ms: f64,
}

/// A program as the page shows it.
#[derive(Debug, Clone, Default, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct ProcessSummary {
    /// Process id.
    pub pid: u32,
    /// Its command line, joined by spaces.
    pub command: String,
    /// How the hub gets its stream: `attached`, `pushed` or `replay`.
    pub source: String,
    /// Whether it still runs.
    pub alive: bool,
    /// Its run state as text (`running`, `paused at step`, ...).
    pub state: String,
    /// Whether it is paused.
    pub paused: bool,
    /// Records its monitors have taken.
    #[cfg_attr(test, ts(type = "number"))]
    pub records: u64,
    /// Events it reports lost.
    #[cfg_attr(test, ts(type = "number"))]
    pub lost: u64,
    /// Events the hub received.
    #[cfg_attr(test, ts(type = "number"))]
    pub received: u64,
    /// Events the hub missed (its queues were full, or the stream broke).
    #[cfg_attr(test, ts(type = "number"))]
    pub missed: u64,
    /// Records of a type whose schema never reached the hub.
    #[cfg_attr(test, ts(type = "number"))]
    pub unreadable: u64,
    /// Records of threads past the hub's limit per program, taken in without per-thread
    /// counts.
    #[cfg_attr(test, ts(type = "number"))]
    pub untracked_records: u64,
    /// Count and rate per event type, by name.
    pub types: IndexMap<String, Rate>,
    /// Its threads with events or a name.
    pub threads: Vec<ThreadSummary>,
    /// Its steering objects, once the hub has read them.
    pub objects: Option<Objects>,
    /// Its sensors, once the hub has read them.
    pub sensors: Option<Vec<SensorView>>,
}

/// How many events, and how many a second lately.
#[derive(Debug, Clone, Default, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct Rate {
    /// Events so far.
    #[cfg_attr(test, ts(type = "number"))]
    pub count: u64,
    /// Events per second over the last seconds.
    pub rate: f64,
}

/// One thread of a program.
#[derive(Debug, Clone, Default, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct ThreadSummary {
    /// gyr's thread id.
    #[cfg_attr(test, ts(type = "number"))]
    pub id: u64,
    /// Its name (empty if it has none); left out of an update once the page was told.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub name: Option<String>,
    /// Events so far.
    #[cfg_attr(test, ts(type = "number"))]
    pub count: u64,
    /// Events per second lately.
    pub rate: f64,
}

/// A program's steering objects and functions.
#[derive(Debug, Clone, Default, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct Objects {
    /// Objects (and parameters, which are objects of one attribute).
    pub objects: Vec<ObjectView>,
    /// Registered functions.
    pub functions: Vec<OperationView>,
}

/// A steering object.
#[derive(Debug, Clone, Default, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct ObjectView {
    /// Its name.
    pub name: String,
    /// Whether it is a single parameter (`gyr::steer::param`).
    pub is_param: bool,
    /// What it is.
    pub description: String,
    /// Its attributes.
    pub attributes: Vec<AttributeView>,
    /// Its actuators.
    pub actuators: Vec<OperationView>,
}

/// An attribute of a steering object.
#[derive(Debug, Clone, Default, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct AttributeView {
    /// Its name.
    pub name: String,
    /// The path a `set` names (`obj.attr`, or the parameter's name).
    pub path: String,
    /// Its type as users write it (`f64`, `bool`, `[f64]`, ...).
    #[serde(rename = "type")]
    #[cfg_attr(test, ts(rename = "type"))]
    pub ty: String,
    /// Its value as text.
    pub value: String,
    /// Its unit, if any.
    pub unit: String,
    /// The least value a probe may write.
    pub min: Option<f64>,
    /// The greatest value a probe may write.
    pub max: Option<f64>,
    /// Whether only the program may change it.
    pub read_only: bool,
    /// What it is.
    pub description: String,
}

/// An actuator or function.
#[derive(Debug, Clone, Default, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct OperationView {
    /// Its name.
    pub name: String,
    /// What a `call` names (`obj.actuator`, or the function's name).
    pub target: String,
    /// What it does.
    pub description: String,
    /// Its parameters.
    pub params: Vec<ParamView>,
}

/// A parameter of an actuator or function.
#[derive(Debug, Clone, Default, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct ParamView {
    /// Its name.
    pub name: String,
    /// Its type as users write it.
    #[serde(rename = "type")]
    #[cfg_attr(test, ts(rename = "type"))]
    pub ty: String,
}

/// A sensor and its setting.
#[derive(Debug, Clone, Default, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct SensorView {
    /// Its event type.
    #[serde(rename = "type")]
    #[cfg_attr(test, ts(rename = "type"))]
    pub type_name: String,
    /// Its instance name, if registered as one.
    pub instance: String,
    /// `tracing`, `sampling`, `extended`, ...
    pub kind: String,
    /// Whether it is switched on.
    pub enabled: bool,
    /// Whether it records now (on, and its rate allows).
    pub active: bool,
    /// Its sampling or rate setting as text.
    pub rate: String,
    /// Events it skipped by its setting.
    #[cfg_attr(test, ts(type = "number"))]
    pub skipped: u64,
}

/// Statistics of a series over the last window.
#[derive(Debug, Clone, Default, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct Stats {
    /// Points in the window.
    pub n: u32,
    /// Their mean.
    pub mean: f64,
    /// The least.
    pub min: f64,
    /// The greatest.
    pub max: f64,
    /// The median.
    pub p50: f64,
    /// The 99th percentile.
    pub p99: f64,
}

/// One entry of a program's steering log.
#[derive(Debug, Clone, Default, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct LogLine {
    /// The program.
    pub pid: u32,
    /// Its number in the program's log.
    #[cfg_attr(test, ts(type = "number"))]
    pub seq: u64,
    /// Seconds of the program's clock.
    pub t: f64,
    /// Who did it (the client's name).
    pub who: String,
    /// What was done, as `gyr_client::describe` writes it.
    pub action: String,
    /// Why it was refused, if it was.
    pub error: String,
}

/// An event of an alert type.
#[derive(Debug, Clone, Default, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct Alert {
    /// The program.
    pub pid: u32,
    /// Seconds of the program's clock.
    pub t: f64,
    /// Its fields as text, by name.
    pub fields: IndexMap<String, String>,
}

impl Alert {
    /// The alert as the gRPC API gives it, its time placed on the Unix clock by the program's
    /// clock zero.
    pub(crate) fn info(&self, clock_zero_unix_ns: u64) -> gyr_proto::v1::AlertInfo {
        let field = |name: &str| self.fields.get(name).cloned().unwrap_or_default();
        gyr_proto::v1::AlertInfo {
            pid: self.pid,
            unix_ns: clock_zero_unix_ns.saturating_add((self.t.max(0.0) * 1e9) as u64),
            severity: field("severity"),
            message: field("message"),
            // A program's own alert names the event it came from (a watch-dog's does).
            rule: self
                .fields
                .get("rule")
                .or_else(|| self.fields.get("event"))
                .cloned()
                .unwrap_or_default(),
        }
    }
}

/// The replay's position and speed.
#[derive(Debug, Clone, Default, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct ReplayState {
    /// Where it is, in seconds from the start.
    pub position_s: f64,
    /// How long the traces last.
    pub duration_s: f64,
    /// Program seconds per wall-clock second.
    pub speed: f64,
    /// Whether it is paused.
    pub paused: bool,
    /// The trace files, and the pid each is shown as.
    pub files: Vec<ReplayFile>,
    /// Whether the time monitoring took has been removed from the threads' timelines.
    pub corrected: bool,
}

/// A replayed trace file.
#[derive(Debug, Clone, Default, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct ReplayFile {
    /// Its path.
    pub path: String,
    /// The pid its program is shown as.
    pub pid: u32,
}

/// The hub's own state.
#[derive(Debug, Clone, Default, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct HubState {
    /// What it records (`--record`), if anything.
    pub recording: Option<Recording>,
}

/// The hub's recording.
#[derive(Debug, Clone, Default, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct Recording {
    /// The directory it writes to.
    pub dir: String,
    /// Batches written.
    #[cfg_attr(test, ts(type = "number"))]
    pub written: u64,
    /// Batches dropped (counted in the files too).
    #[cfg_attr(test, ts(type = "number"))]
    pub dropped: u64,
}

/// The answer to one [`PageRequest`].
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct Reply {
    /// The request's `id`, echoed (`null` if it had none).
    #[cfg_attr(test, ts(type = "number | string | null"))]
    pub id: serde_json::Value,
    /// Whether it was done.
    pub ok: bool,
    /// What was done, when it was.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub result: Option<String>,
    /// Why not, when it was not.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub error: Option<String>,
}

/// `/api/timeline`: one viewport of a program's thread life-time view, drawn by the hub at
/// the page's width (at most one run per pixel and row).
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct TimelineTile {
    /// The program.
    pub pid: u32,
    /// The first and latest times the view holds, seconds of the program's clock.
    pub start_s: f64,
    /// The latest time seen.
    pub now_s: f64,
    /// The viewport's time range, as asked.
    pub t0_s: f64,
    /// Its end.
    pub t1_s: f64,
    /// Pixels across the viewport.
    pub width: u32,
    /// The first row of `rows`.
    pub first_row: u32,
    /// Rows in the whole view (threads, or roles grouping threads).
    pub total_rows: u32,
    /// The rows asked for.
    pub rows: Vec<TimelineRow>,
    /// Causal arrows in the viewport, unless there were more than asked for.
    pub arrows: Vec<TimelineArrow>,
    /// Arrows left out because there were too many: zoom in to see them.
    pub arrows_omitted: u32,
    /// Thread events the view took in.
    pub events: u64,
    /// Events the ordering filter holds now, waiting for their causes.
    pub held: u64,
    /// Falcon's hold-back ratio of the stream so far.
    pub hold_back_ratio: f64,
    /// Events released without their cause (a thread stalled or an event was lost).
    pub forced: u64,
    /// Old segments of long lives forgotten to stay within the hub's bound: views of the
    /// busiest threads start later.
    pub segments_forgotten: u64,
    /// Lives of ended threads forgotten to make room for new threads (their rows are gone).
    pub threads_forgotten: u64,
    /// Thread events not drawn: their threads came when `thread_limit` threads were shown and
    /// too few had ended.
    pub events_not_drawn: u64,
    /// The most threads the view keeps.
    pub thread_limit: u32,
    /// Locks, conditions, barriers, forks and exits whose state was forgotten to stay within
    /// the hub's bound: a later event of one may be released without its cause, or drawn
    /// without its arrow.
    pub objects_forgotten: u64,
}

/// A row of the life-time view.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct TimelineRow {
    /// A role and index, or the thread's name.
    pub label: String,
    /// The threads drawn in it.
    pub threads: Vec<u64>,
    /// `[x0, x1, state, object]`: pixels `x0..x1` in one state (0 running, 1 waiting for a
    /// mutex, 2 a read lock, 3 a write lock, 4 a condition, 5 a join, 6 a barrier, 7 blocked
    /// on a full ring, 8 exited), waiting for `object` when it is not 0.
    pub runs: Vec<(u32, u32, u8, u64)>,
}

/// A causal arrow: a release to the acquisition it let pass, a signal to a wake-up, a fork
/// to a begin, an exit to a join.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct TimelineArrow {
    /// The cause's thread.
    pub from_thread: u64,
    /// The cause's time, seconds.
    pub from_s: f64,
    /// The effect's thread.
    pub to_thread: u64,
    /// The effect's time, seconds.
    pub to_s: f64,
    /// `lock`, `signal`, `fork` or `join`.
    pub kind: String,
    /// The mutex, condition or thread concerned.
    pub object: u64,
}

/// `/api/mpi/timeline`: one viewport of the per-rank timelines of the MPI job a program is a
/// rank of (`crate::rank_timeline`), drawn by the hub at the page's width like a
/// [`TimelineTile`]. Times are seconds from the job's first rank announcement, on the wall
/// clock of the ranks' anchors, as in [`MpiView`].
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct RankTile {
    /// The job's name.
    pub job: String,
    /// Its size, as announced.
    pub size: u32,
    /// From when the view is complete: older segments were forgotten to stay within the
    /// hub's bound (0 when none were).
    pub start_s: f64,
    /// The job's latest event.
    pub now_s: f64,
    /// The viewport's time range.
    pub t0_s: f64,
    /// Its end.
    pub t1_s: f64,
    /// Pixels across the viewport.
    pub width: u32,
    /// The first row of `rows`.
    pub first_row: u32,
    /// Rows in the whole view: the ranks seen.
    pub total_rows: u32,
    /// The rows asked for, in rank order: label `rank N`, `threads` `[N]`, and runs
    /// `[x0, x1, state, call]` with state 0 computing (outside MPI), 1 in a send, 2 in a
    /// receive or probe, 3 waiting for or testing requests, 4 in a collective, 5 in another MPI
    /// call; `call` is 1 + the index in `calls` of the call with the most time in the run (0
    /// when computing). Each pixel shows its dominant state.
    pub rows: Vec<TimelineRow>,
    /// The job's call names, by id (`other MPI call` first: calls past the hub's bound).
    pub calls: Vec<String>,
    /// Matched messages between the rows shown whose send or receive falls in the viewport,
    /// unless there were more than asked for.
    pub arrows: Vec<RankArrow>,
    /// Messages left out because there were too many: zoom in to see them.
    pub arrows_omitted: u32,
    /// Segments (time in one MPI call) the view holds.
    pub segments: u64,
    /// Matched messages it holds.
    pub messages: u64,
    /// Old segments forgotten to stay within the hub's bound (see `start_s`).
    pub segments_forgotten: u64,
    /// Old messages forgotten likewise.
    pub messages_forgotten: u64,
    /// Calls drawn as `other MPI call`: their names came past the hub's bound on names.
    pub calls_past_limit: u64,
    /// Calls left out because they ended before they began (a clock set back).
    pub backwards: u64,
}

/// A message drawn from its send's start on the sender's row to its receive's completion on
/// the receiver's.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct RankArrow {
    /// The sender's rank.
    pub sender: u32,
    /// When the message began to leave, seconds.
    pub send_s: f64,
    /// The receiver's rank.
    pub receiver: u32,
    /// When its receive completed, seconds.
    pub recv_s: f64,
    /// Its bytes.
    pub bytes: u64,
    /// Its tag.
    pub tag: i32,
}

/// `/api/mpi`: the live MPI views of the job a program is a rank of (`crate::mpi`): time in
/// MPI per rank and call, the communication matrix, and late senders and late receivers.
/// Times are seconds; `at_s` and `now_s` count from the job's first rank announcement, on the
/// wall clock of the ranks' anchors.
#[derive(Debug, Clone, Default, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct MpiView {
    /// The job's name, as its ranks announced it (`gyr.msg.rank`).
    pub job: String,
    /// Its size, as announced.
    pub size: u32,
    /// The ranks seen, in rank order.
    pub ranks: Vec<MpiRankView>,
    /// Bytes and messages sent between ranks, per pair that communicated (point to point).
    pub matrix: Vec<MpiCell>,
    /// Late senders per pair (the receiver waited for the sender), the longest waits first.
    pub late_senders: Vec<MpiLatePair>,
    /// Late receivers per pair (a synchronous or rendezvous sender waited for the receive to
    /// be posted), the longest waits first.
    pub late_receivers: Vec<MpiLatePair>,
    /// The latest late messages, newest first.
    pub recent: Vec<MpiLate>,
    /// Messages matched with their receives.
    pub matched: u64,
    /// Sends and receives waiting for their other side now.
    pub unmatched: u64,
    /// Unmatched messages dropped to stay within the hub's bounds.
    pub dropped: u64,
    /// Rank pairs left out of the matrix or the tables to stay within the bounds.
    pub pairs_dropped: u64,
    /// Matched pairs whose receive completed before its send began: the ranks' clocks
    /// disagree (`gyr trace clock` corrects recordings).
    pub clock_violations: u64,
    /// Events left out past the bounds (ranks, open requests).
    pub ignored: u64,
    /// The latest event's time.
    pub now_s: f64,
}

/// One rank of an [`MpiView`].
#[derive(Debug, Clone, Default, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct MpiRankView {
    /// Its rank.
    pub rank: u32,
    /// The program.
    pub pid: u32,
    /// From its announcement to its latest event.
    pub elapsed_s: f64,
    /// Inside MPI calls (summed over its threads).
    pub in_mpi_s: f64,
    /// Outside them: `elapsed_s - in_mpi_s`, at least 0.
    pub outside_s: f64,
    /// Time per call, the longest first.
    pub calls: Vec<MpiCallTime>,
    /// Point-to-point bytes and messages sent and received.
    pub sent_bytes: u64,
    /// Messages sent.
    pub sent_messages: u64,
    /// Bytes received.
    pub received_bytes: u64,
    /// Messages received.
    pub received_messages: u64,
    /// Bytes contributed to and received from collectives.
    pub collective_bytes: u64,
}

/// Time in one MPI call.
#[derive(Debug, Clone, Default, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct MpiCallTime {
    /// The call (`MPI_Send`; `other`: calls past the hub's bound on names).
    pub call: String,
    /// Calls completed.
    pub count: u64,
    /// Seconds in them.
    pub seconds: f64,
}

/// One cell of the communication matrix.
#[derive(Debug, Clone, Default, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct MpiCell {
    /// The sender's rank.
    pub from: u32,
    /// The receiver's rank.
    pub to: u32,
    /// Bytes sent.
    pub bytes: u64,
    /// Messages sent.
    pub messages: u64,
}

/// Late messages of one kind between two ranks.
#[derive(Debug, Clone, Default, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct MpiLatePair {
    /// The sender's rank.
    pub sender: u32,
    /// The receiver's rank.
    pub receiver: u32,
    /// How many.
    pub count: u64,
    /// Total wait, seconds.
    pub wait_s: f64,
}

/// One late message.
#[derive(Debug, Clone, Default, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct MpiLate {
    /// `late sender` or `late receiver`.
    pub kind: String,
    /// The sender's rank.
    pub sender: u32,
    /// The receiver's rank.
    pub receiver: u32,
    /// The message's tag.
    pub tag: i32,
    /// Its communicator's id.
    #[cfg_attr(test, ts(type = "number"))]
    pub comm: u64,
    /// Its bytes.
    pub bytes: u64,
    /// How long the receiver (late sender) or the sender (late receiver) waited.
    pub wait_s: f64,
    /// When the wait ended.
    pub at_s: f64,
    /// The call that waited: the receive's (`MPI_Recv`, `MPI_Wait`, ...) or `send`.
    pub call: String,
}

/// `/api/access`: whether the hub asks for a token, and what the given one allows.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct AccessInfo {
    /// Whether the hub has tokens at all.
    pub guarded: bool,
    /// Whether the given token (or none) lets the page in.
    pub ok: bool,
    /// Whether it may steer.
    pub steer: bool,
    /// Whether the hub replays traces (the page shows the replay bar).
    pub replay: bool,
}

/// A message from a page to the hub; every one gets a [`Reply`] with its `id`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum PageRequest {
    /// Write one attribute; the value is text the program parses as the attribute's type.
    Set {
        /// The request's id, echoed in the reply.
        #[serde(default)]
        #[cfg_attr(test, ts(optional, type = "number"))]
        id: Option<serde_json::Value>,
        /// The program.
        #[cfg_attr(test, ts(optional))]
        pid: Option<u32>,
        /// `obj.attr`.
        path: String,
        /// The new value (a number or a string, taken as text).
        #[cfg_attr(test, ts(type = "string | number | boolean"))]
        value: serde_json::Value,
    },
    /// Run an actuator or function.
    Call {
        /// The request's id.
        #[serde(default)]
        #[cfg_attr(test, ts(optional, type = "number"))]
        id: Option<serde_json::Value>,
        /// The program.
        #[cfg_attr(test, ts(optional))]
        pid: Option<u32>,
        /// `obj.actuator` or a function's name.
        target: String,
        /// Its arguments (numbers or strings, taken as text).
        #[serde(default)]
        #[cfg_attr(test, ts(optional, type = "Array<string | number | boolean>"))]
        args: Vec<serde_json::Value>,
    },
    /// Pause, resume, step or run until.
    Control {
        /// The request's id.
        #[serde(default)]
        #[cfg_attr(test, ts(optional, type = "number"))]
        id: Option<serde_json::Value>,
        /// The program.
        #[cfg_attr(test, ts(optional))]
        pid: Option<u32>,
        /// `pause`, `resume`, `step` or `run-until`.
        action: String,
        /// For `step`: how many synch points (default 1).
        #[serde(default)]
        #[cfg_attr(test, ts(optional, type = "number"))]
        steps: Option<u64>,
        /// For `run-until`: the condition.
        #[serde(default)]
        #[cfg_attr(test, ts(optional))]
        until: Option<String>,
    },
    /// Switch or rate-limit sensors: `type` empty or `*` for all.
    Sensor {
        /// The request's id.
        #[serde(default)]
        #[cfg_attr(test, ts(optional, type = "number"))]
        id: Option<serde_json::Value>,
        /// The program.
        #[cfg_attr(test, ts(optional))]
        pid: Option<u32>,
        /// The event type, or empty for every sensor.
        #[serde(rename = "type", default)]
        #[cfg_attr(test, ts(rename = "type", optional))]
        type_name: Option<String>,
        /// `on`, `off`, `all`, `every N` or `rate R`.
        setting: String,
    },
    /// A command line, in the grammar of `gyr attach` (`gyr_client::command`).
    Line {
        /// The request's id.
        #[serde(default)]
        #[cfg_attr(test, ts(optional, type = "number"))]
        id: Option<serde_json::Value>,
        /// The program.
        #[cfg_attr(test, ts(optional))]
        pid: Option<u32>,
        /// The line as typed.
        line: String,
    },
    /// Play, pause, change the speed of or seek the replay: any page may.
    Replay {
        /// The request's id.
        #[serde(default)]
        #[cfg_attr(test, ts(optional, type = "number"))]
        id: Option<serde_json::Value>,
        /// `play`, `pause`, `speed` or `seek`.
        action: String,
        /// The speed, or the position in seconds.
        #[serde(default)]
        #[cfg_attr(test, ts(optional))]
        value: Option<f64>,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use ts_rs::{Config, TS};

    /// Every type of the protocol, declared for TypeScript, in the order of this file.
    fn declarations() -> String {
        let cfg = Config::new().with_large_int("number");
        let decls = [
            (ToPage::docs(), ToPage::decl(&cfg)),
            (Snapshot::docs(), Snapshot::decl(&cfg)),
            (Update::docs(), Update::decl(&cfg)),
            (ProcessSummary::docs(), ProcessSummary::decl(&cfg)),
            (Rate::docs(), Rate::decl(&cfg)),
            (ThreadSummary::docs(), ThreadSummary::decl(&cfg)),
            (Objects::docs(), Objects::decl(&cfg)),
            (ObjectView::docs(), ObjectView::decl(&cfg)),
            (AttributeView::docs(), AttributeView::decl(&cfg)),
            (OperationView::docs(), OperationView::decl(&cfg)),
            (ParamView::docs(), ParamView::decl(&cfg)),
            (SensorView::docs(), SensorView::decl(&cfg)),
            (Stats::docs(), Stats::decl(&cfg)),
            (LogLine::docs(), LogLine::decl(&cfg)),
            (Alert::docs(), Alert::decl(&cfg)),
            (ReplayState::docs(), ReplayState::decl(&cfg)),
            (ReplayFile::docs(), ReplayFile::decl(&cfg)),
            (HubState::docs(), HubState::decl(&cfg)),
            (Recording::docs(), Recording::decl(&cfg)),
            (Reply::docs(), Reply::decl(&cfg)),
            (AccessInfo::docs(), AccessInfo::decl(&cfg)),
            (PageRequest::docs(), PageRequest::decl(&cfg)),
            (TimelineTile::docs(), TimelineTile::decl(&cfg)),
            (TimelineRow::docs(), TimelineRow::decl(&cfg)),
            (TimelineArrow::docs(), TimelineArrow::decl(&cfg)),
            (RankTile::docs(), RankTile::decl(&cfg)),
            (RankArrow::docs(), RankArrow::decl(&cfg)),
            (MpiView::docs(), MpiView::decl(&cfg)),
            (MpiRankView::docs(), MpiRankView::decl(&cfg)),
            (MpiCallTime::docs(), MpiCallTime::decl(&cfg)),
            (MpiCell::docs(), MpiCell::decl(&cfg)),
            (MpiLatePair::docs(), MpiLatePair::decl(&cfg)),
            (MpiLate::docs(), MpiLate::decl(&cfg)),
        ];
        let mut out = String::from(
            "// The page protocol's types, generated from crates/gyr-hub/src/protocol.rs by its test\n\
             // `the_page_protocol_declarations_are_current` (GYR_BLESS=1 rewrites this file).\n\
             // Do not edit by hand.\n\n\
             /** `[t, value]`: seconds of the program's clock, and the mean over one bucket. */\n\
             export type Point = [number, number];\n",
        );
        for (docs, d) in decls {
            out.push('\n');
            if let Some(docs) = docs {
                out.push_str(&docs);
            }
            out.push_str("export ");
            out.push_str(&d.replace("[number, number]", "Point"));
            out.push('\n');
        }
        out
    }

    #[test]
    fn the_page_protocol_declarations_are_current() {
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../web/src/protocol.d.ts");
        let fresh = declarations();
        if std::env::var_os("GYR_BLESS").is_some() {
            std::fs::write(&path, &fresh).unwrap();
        }
        let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            on_disk == fresh,
            "web/src/protocol.d.ts is not what crates/gyr-hub/src/protocol.rs declares: run \
             `GYR_BLESS=1 cargo test -p gyr-hub --lib protocol` and commit the file"
        );
    }

    /// What the hub sends reads as the declarations say: tagged by `t`, optional parts left
    /// out when absent.
    #[test]
    fn messages_carry_their_tag_and_leave_out_what_is_absent() {
        let u = serde_json::to_value(ToPage::Update(Update::default())).unwrap();
        assert_eq!(u["t"], "update");
        assert!(u.get("processes").is_none() && u.get("replay").is_none());
        let r = serde_json::to_value(ToPage::Reply(Reply {
            id: 3.into(),
            ok: false,
            result: None,
            error: Some("no".into()),
        }))
        .unwrap();
        assert_eq!(
            r,
            serde_json::json!({"t": "reply", "id": 3, "ok": false, "error": "no"})
        );
        let req: PageRequest = serde_json::from_str(
            r#"{"op":"sensor","id":1,"pid":7,"type":"energy","setting":"off"}"#,
        )
        .unwrap();
        assert_eq!(
            req,
            PageRequest::Sensor {
                id: Some(1.into()),
                pid: Some(7),
                type_name: Some("energy".into()),
                setting: "off".into()
            }
        );
    }
}
