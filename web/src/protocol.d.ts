// The page protocol's types, generated from crates/gyr-hub/src/protocol.rs by its test
// `the_page_protocol_declarations_are_current` (GYR_BLESS=1 rewrites this file).
// Do not edit by hand.

/** `[t, value]`: seconds of the program's clock, and the mean over one bucket. */
export type Point = [number, number];

/**
 * A message from the hub to a page.
 */
export type ToPage = { "t": "snapshot" } & Snapshot | { "t": "update" } & Update | { "t": "reply" } & Reply;

/**
 * Everything a page needs to start from.
 */
export type Snapshot = { 
/**
 * The width of a series bucket, in seconds of program time.
 */
bucket_s: number, 
/**
 * The window statistics are computed over, in seconds.
 */
stats_window_s: number, 
/**
 * Every program the hub knows, alive or gone.
 */
processes: Array<ProcessSummary>, 
/**
 * The history of every series.
 */
points: { [key in string]: Array<Point> }, 
/**
 * The bucket still filling, per series: drawn as the last point until it closes.
 */
live: { [key in string]: Point }, 
/**
 * Statistics of every series over the last window.
 */
stats: { [key in string]: Stats }, 
/**
 * The latest values per group (domain, worker, ...), per grouped field.
 */
groups: { [key in string]: { [key in string]: { [key in string]: number } } }, 
/**
 * The steering log, oldest first.
 */
log: Array<LogLine>, 
/**
 * Events of alert types, oldest first.
 */
alerts: Array<Alert>, 
/**
 * The replay's position and speed, when the hub replays trace files.
 */
replay: ReplayState | null, 
/**
 * The hub's own state.
 */
hub: HubState, };

/**
 * What changed since the last tick.
 */
export type Update = { 
/**
 * New closed points of the series that moved.
 */
points: { [key in string]: Array<Point> }, 
/**
 * The bucket still filling, per series that moved.
 */
live: { [key in string]: Point }, 
/**
 * New steering-log entries.
 */
log: Array<LogLine>, 
/**
 * New alerts.
 */
alerts: Array<Alert>, 
/**
 * Every sixth tick: every program's summary.
 */
processes?: Array<ProcessSummary>, 
/**
 * Every sixth tick: statistics of the series that moved.
 */
stats?: { [key in string]: Stats }, 
/**
 * Every sixth tick: the latest values per group.
 */
groups?: { [key in string]: { [key in string]: { [key in string]: number } } }, 
/**
 * With the summaries: the hub's own state.
 */
hub?: HubState, 
/**
 * When replaying: the replay's position and speed.
 */
replay?: ReplayState, 
/**
 * When the update left the hub (Unix ms): the page measures how far behind it is.
 */
sent_ms: number, };

/**
 * A program as the page shows it.
 */
export type ProcessSummary = { 
/**
 * Process id.
 */
pid: number, 
/**
 * Its command line, joined by spaces.
 */
command: string, 
/**
 * How the hub gets its stream: `attached`, `pushed` or `replay`.
 */
source: string, 
/**
 * Whether it still runs.
 */
alive: boolean, 
/**
 * Its run state as text (`running`, `paused at step`, ...).
 */
state: string, 
/**
 * Whether it is paused.
 */
paused: boolean, 
/**
 * Records its monitors have taken.
 */
records: number, 
/**
 * Events it reports lost.
 */
lost: number, 
/**
 * Events the hub received.
 */
received: number, 
/**
 * Events the hub missed (its queues were full, or the stream broke).
 */
missed: number, 
/**
 * Records of a type whose schema never reached the hub.
 */
unreadable: number, 
/**
 * Records of threads past the hub's limit per program, taken in without per-thread
 * counts.
 */
untracked_records: number, 
/**
 * Count and rate per event type, by name.
 */
types: { [key in string]: Rate }, 
/**
 * Its threads with events or a name.
 */
threads: Array<ThreadSummary>, 
/**
 * Its steering objects, once the hub has read them.
 */
objects: Objects | null, 
/**
 * Its sensors, once the hub has read them.
 */
sensors: Array<SensorView> | null, };

/**
 * How many events, and how many a second lately.
 */
export type Rate = { 
/**
 * Events so far.
 */
count: number, 
/**
 * Events per second over the last seconds.
 */
rate: number, };

/**
 * One thread of a program.
 */
export type ThreadSummary = { 
/**
 * gyr's thread id.
 */
id: number, 
/**
 * Its name (empty if it has none); left out of an update once the page was told.
 */
name?: string, 
/**
 * Events so far.
 */
count: number, 
/**
 * Events per second lately.
 */
rate: number, };

/**
 * A program's steering objects and functions.
 */
export type Objects = { 
/**
 * Objects (and parameters, which are objects of one attribute).
 */
objects: Array<ObjectView>, 
/**
 * Registered functions.
 */
functions: Array<OperationView>, };

/**
 * A steering object.
 */
export type ObjectView = { 
/**
 * Its name.
 */
name: string, 
/**
 * Whether it is a single parameter (`gyr::steer::param`).
 */
is_param: boolean, 
/**
 * What it is.
 */
description: string, 
/**
 * Its attributes.
 */
attributes: Array<AttributeView>, 
/**
 * Its actuators.
 */
actuators: Array<OperationView>, };

/**
 * An attribute of a steering object.
 */
export type AttributeView = { 
/**
 * Its name.
 */
name: string, 
/**
 * The path a `set` names (`obj.attr`, or the parameter's name).
 */
path: string, 
/**
 * Its type as users write it (`f64`, `bool`, `[f64]`, ...).
 */
type: string, 
/**
 * Its value as text.
 */
value: string, 
/**
 * Its unit, if any.
 */
unit: string, 
/**
 * The least value a probe may write.
 */
min: number | null, 
/**
 * The greatest value a probe may write.
 */
max: number | null, 
/**
 * Whether only the program may change it.
 */
read_only: boolean, 
/**
 * What it is.
 */
description: string, };

/**
 * An actuator or function.
 */
export type OperationView = { 
/**
 * Its name.
 */
name: string, 
/**
 * What a `call` names (`obj.actuator`, or the function's name).
 */
target: string, 
/**
 * What it does.
 */
description: string, 
/**
 * Its parameters.
 */
params: Array<ParamView>, };

/**
 * A parameter of an actuator or function.
 */
export type ParamView = { 
/**
 * Its name.
 */
name: string, 
/**
 * Its type as users write it.
 */
type: string, };

/**
 * A sensor and its setting.
 */
export type SensorView = { 
/**
 * Its event type.
 */
type: string, 
/**
 * Its instance name, if registered as one.
 */
instance: string, 
/**
 * `tracing`, `sampling`, `extended`, ...
 */
kind: string, 
/**
 * Whether it is switched on.
 */
enabled: boolean, 
/**
 * Whether it records now (on, and its rate allows).
 */
active: boolean, 
/**
 * Its sampling or rate setting as text.
 */
rate: string, 
/**
 * Events it skipped by its setting.
 */
skipped: number, };

/**
 * Statistics of a series over the last window.
 */
export type Stats = { 
/**
 * Points in the window.
 */
n: number, 
/**
 * Their mean.
 */
mean: number, 
/**
 * The least.
 */
min: number, 
/**
 * The greatest.
 */
max: number, 
/**
 * The median.
 */
p50: number, 
/**
 * The 99th percentile.
 */
p99: number, };

/**
 * One entry of a program's steering log.
 */
export type LogLine = { 
/**
 * The program.
 */
pid: number, 
/**
 * Its number in the program's log.
 */
seq: number, 
/**
 * Seconds of the program's clock.
 */
t: number, 
/**
 * Who did it (the client's name).
 */
who: string, 
/**
 * What was done, as `gyr_client::describe` writes it.
 */
action: string, 
/**
 * Why it was refused, if it was.
 */
error: string, };

/**
 * An event of an alert type.
 */
export type Alert = { 
/**
 * The program.
 */
pid: number, 
/**
 * Seconds of the program's clock.
 */
t: number, 
/**
 * Its fields as text, by name.
 */
fields: { [key in string]: string }, };

/**
 * The replay's position and speed.
 */
export type ReplayState = { 
/**
 * Where it is, in seconds from the start.
 */
position_s: number, 
/**
 * How long the traces last.
 */
duration_s: number, 
/**
 * Program seconds per wall-clock second.
 */
speed: number, 
/**
 * Whether it is paused.
 */
paused: boolean, 
/**
 * The trace files, and the pid each is shown as.
 */
files: Array<ReplayFile>, 
/**
 * Whether the time monitoring took has been removed from the threads' timelines.
 */
corrected: boolean, };

/**
 * A replayed trace file.
 */
export type ReplayFile = { 
/**
 * Its path.
 */
path: string, 
/**
 * The pid its program is shown as.
 */
pid: number, };

/**
 * The hub's own state.
 */
export type HubState = { 
/**
 * What it records (`--record`), if anything.
 */
recording: Recording | null, };

/**
 * The hub's recording.
 */
export type Recording = { 
/**
 * The directory it writes to.
 */
dir: string, 
/**
 * Batches written.
 */
written: number, 
/**
 * Batches dropped (counted in the files too).
 */
dropped: number, };

/**
 * The answer to one [`PageRequest`].
 */
export type Reply = { 
/**
 * The request's `id`, echoed (`null` if it had none).
 */
id: number | string | null, 
/**
 * Whether it was done.
 */
ok: boolean, 
/**
 * What was done, when it was.
 */
result?: string, 
/**
 * Why not, when it was not.
 */
error?: string, };

/**
 * `/api/access`: whether the hub asks for a token, and what the given one allows.
 */
export type AccessInfo = { 
/**
 * Whether the hub has tokens at all.
 */
guarded: boolean, 
/**
 * Whether the given token (or none) lets the page in.
 */
ok: boolean, 
/**
 * Whether it may steer.
 */
steer: boolean, 
/**
 * Whether the hub replays traces (the page shows the replay bar).
 */
replay: boolean, };

/**
 * A message from a page to the hub; every one gets a [`Reply`] with its `id`.
 */
export type PageRequest = { "op": "set", 
/**
 * The request's id, echoed in the reply.
 */
id?: number, 
/**
 * The program.
 */
pid?: number, 
/**
 * `obj.attr`.
 */
path: string, 
/**
 * The new value (a number or a string, taken as text).
 */
value: string | number | boolean, } | { "op": "call", 
/**
 * The request's id.
 */
id?: number, 
/**
 * The program.
 */
pid?: number, 
/**
 * `obj.actuator` or a function's name.
 */
target: string, 
/**
 * Its arguments (numbers or strings, taken as text).
 */
args?: Array<string | number | boolean>, } | { "op": "control", 
/**
 * The request's id.
 */
id?: number, 
/**
 * The program.
 */
pid?: number, 
/**
 * `pause`, `resume`, `step` or `run-until`.
 */
action: string, 
/**
 * For `step`: how many synch points (default 1).
 */
steps?: number, 
/**
 * For `run-until`: the condition.
 */
until?: string, } | { "op": "sensor", 
/**
 * The request's id.
 */
id?: number, 
/**
 * The program.
 */
pid?: number, 
/**
 * The event type, or empty for every sensor.
 */
type?: string, 
/**
 * `on`, `off`, `all`, `every N` or `rate R`.
 */
setting: string, } | { "op": "line", 
/**
 * The request's id.
 */
id?: number, 
/**
 * The program.
 */
pid?: number, 
/**
 * The line as typed.
 */
line: string, } | { "op": "replay", 
/**
 * The request's id.
 */
id?: number, 
/**
 * `play`, `pause`, `speed` or `seek`.
 */
action: string, 
/**
 * The speed, or the position in seconds.
 */
value?: number, };

/**
 * `/api/timeline`: one viewport of a program's thread life-time view, drawn by the hub at
 * the page's width (at most one run per pixel and row).
 */
export type TimelineTile = { 
/**
 * The program.
 */
pid: number, 
/**
 * The first and latest times the view holds, seconds of the program's clock.
 */
start_s: number, 
/**
 * The latest time seen.
 */
now_s: number, 
/**
 * The viewport's time range, as asked.
 */
t0_s: number, 
/**
 * Its end.
 */
t1_s: number, 
/**
 * Pixels across the viewport.
 */
width: number, 
/**
 * The first row of `rows`.
 */
first_row: number, 
/**
 * Rows in the whole view (threads, or roles grouping threads).
 */
total_rows: number, 
/**
 * The rows asked for.
 */
rows: Array<TimelineRow>, 
/**
 * Causal arrows in the viewport, unless there were more than asked for.
 */
arrows: Array<TimelineArrow>, 
/**
 * Arrows left out because there were too many: zoom in to see them.
 */
arrows_omitted: number, 
/**
 * Thread events the view took in.
 */
events: number, 
/**
 * Events the ordering filter holds now, waiting for their causes.
 */
held: number, 
/**
 * Falcon's hold-back ratio of the stream so far.
 */
hold_back_ratio: number, 
/**
 * Events released without their cause (a thread stalled or an event was lost).
 */
forced: number, 
/**
 * Old segments of long lives forgotten to stay within the hub's bound: views of the
 * busiest threads start later.
 */
segments_forgotten: number, 
/**
 * Lives of ended threads forgotten to make room for new threads (their rows are gone).
 */
threads_forgotten: number, 
/**
 * Thread events not drawn: their threads came when `thread_limit` threads were shown and
 * too few had ended.
 */
events_not_drawn: number, 
/**
 * The most threads the view keeps.
 */
thread_limit: number, 
/**
 * Locks, conditions, barriers, forks and exits whose state was forgotten to stay within
 * the hub's bound: a later event of one may be released without its cause, or drawn
 * without its arrow.
 */
objects_forgotten: number, };

/**
 * A row of the life-time view.
 */
export type TimelineRow = { 
/**
 * A role and index, or the thread's name.
 */
label: string, 
/**
 * The threads drawn in it.
 */
threads: Array<number>, 
/**
 * `[x0, x1, state, object]`: pixels `x0..x1` in one state (0 running, 1 waiting for a
 * mutex, 2 a read lock, 3 a write lock, 4 a condition, 5 a join, 6 a barrier, 7 blocked
 * on a full ring, 8 exited), waiting for `object` when it is not 0.
 */
runs: Array<[number, number, number, number]>, };

/**
 * A causal arrow: a release to the acquisition it let pass, a signal to a wake-up, a fork
 * to a begin, an exit to a join.
 */
export type TimelineArrow = { 
/**
 * The cause's thread.
 */
from_thread: number, 
/**
 * The cause's time, seconds.
 */
from_s: number, 
/**
 * The effect's thread.
 */
to_thread: number, 
/**
 * The effect's time, seconds.
 */
to_s: number, 
/**
 * `lock`, `signal`, `fork` or `join`.
 */
kind: string, 
/**
 * The mutex, condition or thread concerned.
 */
object: number, };

/**
 * `/api/mpi/timeline`: one viewport of the per-rank timelines of the MPI job a program is a
 * rank of (`crate::rank_timeline`), drawn by the hub at the page's width like a
 * [`TimelineTile`]. Times are seconds from the job's first rank announcement, on the wall
 * clock of the ranks' anchors, as in [`MpiView`].
 */
export type RankTile = { 
/**
 * The job's name.
 */
job: string, 
/**
 * Its size, as announced.
 */
size: number, 
/**
 * From when the view is complete: older segments were forgotten to stay within the
 * hub's bound (0 when none were).
 */
start_s: number, 
/**
 * The job's latest event.
 */
now_s: number, 
/**
 * The viewport's time range.
 */
t0_s: number, 
/**
 * Its end.
 */
t1_s: number, 
/**
 * Pixels across the viewport.
 */
width: number, 
/**
 * The first row of `rows`.
 */
first_row: number, 
/**
 * Rows in the whole view: the ranks seen.
 */
total_rows: number, 
/**
 * The rows asked for, in rank order: label `rank N`, `threads` `[N]`, and runs
 * `[x0, x1, state, call]` with state 0 computing (outside MPI), 1 in a send, 2 in a
 * receive or probe, 3 waiting for or testing requests, 4 in a collective, 5 in another MPI
 * call; `call` is 1 + the index in `calls` of the call with the most time in the run (0
 * when computing). Each pixel shows its dominant state.
 */
rows: Array<TimelineRow>, 
/**
 * The job's call names, by id (`other MPI call` first: calls past the hub's bound).
 */
calls: Array<string>, 
/**
 * Matched messages between the rows shown whose send or receive falls in the viewport,
 * unless there were more than asked for.
 */
arrows: Array<RankArrow>, 
/**
 * Messages left out because there were too many: zoom in to see them.
 */
arrows_omitted: number, 
/**
 * Segments (time in one MPI call) the view holds.
 */
segments: number, 
/**
 * Matched messages it holds.
 */
messages: number, 
/**
 * Old segments forgotten to stay within the hub's bound (see `start_s`).
 */
segments_forgotten: number, 
/**
 * Old messages forgotten likewise.
 */
messages_forgotten: number, 
/**
 * Calls drawn as `other MPI call`: their names came past the hub's bound on names.
 */
calls_past_limit: number, 
/**
 * Calls left out because they ended before they began (a clock set back).
 */
backwards: number, };

/**
 * A message drawn from its send's start on the sender's row to its receive's completion on
 * the receiver's.
 */
export type RankArrow = { 
/**
 * The sender's rank.
 */
sender: number, 
/**
 * When the message began to leave, seconds.
 */
send_s: number, 
/**
 * The receiver's rank.
 */
receiver: number, 
/**
 * When its receive completed, seconds.
 */
recv_s: number, 
/**
 * Its bytes.
 */
bytes: number, 
/**
 * Its tag.
 */
tag: number, };

/**
 * `/api/mpi`: the live MPI views of the job a program is a rank of (`crate::mpi`): time in
 * MPI per rank and call, the communication matrix, and late senders and late receivers.
 * Times are seconds; `at_s` and `now_s` count from the job's first rank announcement, on the
 * wall clock of the ranks' anchors.
 */
export type MpiView = { 
/**
 * The job's name, as its ranks announced it (`gyr.msg.rank`).
 */
job: string, 
/**
 * Its size, as announced.
 */
size: number, 
/**
 * The ranks seen, in rank order.
 */
ranks: Array<MpiRankView>, 
/**
 * Bytes and messages sent between ranks, per pair that communicated (point to point).
 */
matrix: Array<MpiCell>, 
/**
 * Late senders per pair (the receiver waited for the sender), the longest waits first.
 */
late_senders: Array<MpiLatePair>, 
/**
 * Late receivers per pair (a synchronous or rendezvous sender waited for the receive to
 * be posted), the longest waits first.
 */
late_receivers: Array<MpiLatePair>, 
/**
 * The latest late messages, newest first.
 */
recent: Array<MpiLate>, 
/**
 * Messages matched with their receives.
 */
matched: number, 
/**
 * Sends and receives waiting for their other side now.
 */
unmatched: number, 
/**
 * Unmatched messages dropped to stay within the hub's bounds.
 */
dropped: number, 
/**
 * Rank pairs left out of the matrix or the tables to stay within the bounds.
 */
pairs_dropped: number, 
/**
 * Matched pairs whose receive completed before its send began: the ranks' clocks
 * disagree (`gyr trace clock` corrects recordings).
 */
clock_violations: number, 
/**
 * Events left out past the bounds (ranks, open requests).
 */
ignored: number, 
/**
 * The latest event's time.
 */
now_s: number, };

/**
 * One rank of an [`MpiView`].
 */
export type MpiRankView = { 
/**
 * Its rank.
 */
rank: number, 
/**
 * The program.
 */
pid: number, 
/**
 * From its announcement to its latest event.
 */
elapsed_s: number, 
/**
 * Inside MPI calls (summed over its threads).
 */
in_mpi_s: number, 
/**
 * Outside them: `elapsed_s - in_mpi_s`, at least 0.
 */
outside_s: number, 
/**
 * Time per call, the longest first.
 */
calls: Array<MpiCallTime>, 
/**
 * Point-to-point bytes and messages sent and received.
 */
sent_bytes: number, 
/**
 * Messages sent.
 */
sent_messages: number, 
/**
 * Bytes received.
 */
received_bytes: number, 
/**
 * Messages received.
 */
received_messages: number, 
/**
 * Bytes contributed to and received from collectives.
 */
collective_bytes: number, };

/**
 * Time in one MPI call.
 */
export type MpiCallTime = { 
/**
 * The call (`MPI_Send`; `other`: calls past the hub's bound on names).
 */
call: string, 
/**
 * Calls completed.
 */
count: number, 
/**
 * Seconds in them.
 */
seconds: number, };

/**
 * One cell of the communication matrix.
 */
export type MpiCell = { 
/**
 * The sender's rank.
 */
from: number, 
/**
 * The receiver's rank.
 */
to: number, 
/**
 * Bytes sent.
 */
bytes: number, 
/**
 * Messages sent.
 */
messages: number, };

/**
 * Late messages of one kind between two ranks.
 */
export type MpiLatePair = { 
/**
 * The sender's rank.
 */
sender: number, 
/**
 * The receiver's rank.
 */
receiver: number, 
/**
 * How many.
 */
count: number, 
/**
 * Total wait, seconds.
 */
wait_s: number, };

/**
 * One late message.
 */
export type MpiLate = { 
/**
 * `late sender` or `late receiver`.
 */
kind: string, 
/**
 * The sender's rank.
 */
sender: number, 
/**
 * The receiver's rank.
 */
receiver: number, 
/**
 * The message's tag.
 */
tag: number, 
/**
 * Its communicator's id.
 */
comm: number, 
/**
 * Its bytes.
 */
bytes: number, 
/**
 * How long the receiver (late sender) or the sender (late receiver) waited.
 */
wait_s: number, 
/**
 * When the wait ended.
 */
at_s: number, 
/**
 * The call that waited: the receive's (`MPI_Recv`, `MPI_Wait`, ...) or `send`.
 */
call: string, };
