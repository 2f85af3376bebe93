//! Synch points: where the program lets steering act on it.
//!
//! `gyr::steer::sync_point("step")` in the program's main loop costs one relaxed load while
//! nobody steers. When a client has asked for something, the first thread to reach a synch point
//! runs the queued actuators, counts steps for single-stepping and run-until, and stalls while
//! the program is paused (Progress: "Synch Points stall an application so that the end user can
//! explore the state of the application"). Actuators queued while the program is paused run at
//! once on the stalled thread, so a paused program can still be changed safely.

use super::log::{self, Action};
use super::object::{Args, ObjectEntry};
use super::{Condition, SteerError, Who};
use gyr_core::Value;
use std::collections::{HashMap, VecDeque};
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Bit of [`ATTENTION`]: actuations are queued.
const QUEUED: u32 = 1;
/// Bit of [`ATTENTION`]: pause, step or run-until is in force.
const CONTROLLED: u32 = 2;

/// Zero while nobody needs the program to stop at a synch point: the whole fast path.
static ATTENTION: AtomicU32 = AtomicU32::new(0);

struct Queued {
    entry: Arc<dyn ObjectEntry>,
    actuator: String,
    args: Args,
    who: Who,
    reply: Sender<Result<Value, SteerError>>,
}

static QUEUE: Mutex<VecDeque<Queued>> = Mutex::new(VecDeque::new());

type Until = Box<dyn Fn() -> bool + Send>;

#[derive(Default)]
struct Control {
    pause_requested: bool,
    paused: bool,
    steps_left: Option<u64>,
    until: Option<(String, Until)>,
    paused_at: Option<(String, u64)>,
    reached: HashMap<String, u64>,
}

static CONTROL: Mutex<Option<Control>> = Mutex::new(None);
static WAKE: Condvar = Condvar::new();

fn control() -> MutexGuard<'static, Option<Control>> {
    CONTROL.lock().unwrap_or_else(|e| e.into_inner())
}

fn queue() -> MutexGuard<'static, VecDeque<Queued>> {
    QUEUE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Recomputes [`ATTENTION`]. The queue's lock is held from the check to the store, and
/// [`enqueue`] sets its bit under the same lock: otherwise an actuation queued between the two
/// would have its bit overwritten, and wait for a synch point that never looks.
fn update_attention(c: &Control) {
    let queue = queue();
    let mut a = 0;
    if !queue.is_empty() {
        a |= QUEUED;
    }
    if c.pause_requested || c.paused || c.steps_left.is_some() || c.until.is_some() {
        a |= CONTROLLED;
    }
    ATTENTION.store(a, Ordering::Release);
}

/// Marks a point in the program's loop where steering may act: queued actuators run here,
/// and a paused program stalls here.
#[inline]
pub fn sync_point(name: &str) {
    if ATTENTION.load(Ordering::Relaxed) != 0 {
        reached(name, &mut || false);
    }
}

/// How often a stalled [`sync_point_interruptible`] asks whether to give up the stall.
const INTERRUPT_CHECK: Duration = Duration::from_millis(50);

/// As [`sync_point`], for a caller that must be able to leave a stall: while the program is
/// paused here, `interrupted` is asked about every 50 ms, without gyr's locks held (it may
/// take the caller's own, such as Python's GIL to see a Ctrl-C); when it answers true the
/// program resumes, logged as resumed by the program, and this returns true.
pub fn sync_point_interruptible(name: &str, mut interrupted: impl FnMut() -> bool) -> bool {
    ATTENTION.load(Ordering::Relaxed) != 0 && reached(name, &mut interrupted)
}

/// Whether `interrupted` ended a stall.
#[cold]
#[inline(never)]
fn reached(name: &str, interrupted: &mut dyn FnMut() -> bool) -> bool {
    run_queued();
    let mut guard = control();
    let c = guard.get_or_insert_with(Control::default);
    let count = {
        let n = c.reached.entry(name.to_owned()).or_default();
        *n += 1;
        *n
    };
    if let Some(left) = c.steps_left {
        if left <= 1 {
            c.steps_left = None;
            c.pause_requested = true;
        } else {
            c.steps_left = Some(left - 1);
        }
    }
    if let Some((text, until)) = c.until.take() {
        // Evaluate the condition without holding the lock: it may read steering state.
        drop(guard);
        let holds = std::panic::catch_unwind(AssertUnwindSafe(&until)).unwrap_or(true);
        guard = control();
        let c = guard.get_or_insert_with(Control::default);
        if holds {
            c.pause_requested = true;
        } else if c.until.is_none() && !c.pause_requested && !c.paused && c.steps_left.is_none() {
            // Still the condition in force (nobody changed the plan meanwhile): keep it.
            c.until = Some((text, until));
        }
    }
    let c = guard.get_or_insert_with(Control::default);
    if c.pause_requested || c.paused {
        if !c.paused {
            c.paused = true;
            c.pause_requested = false;
            c.paused_at = Some((name.to_owned(), count));
            log::record(
                &Who::program(),
                Action::Paused {
                    at: format!("{name} #{count}"),
                },
                Ok(()),
            );
        }
        update_attention(c);
        // Stall; wake regularly to run actuators queued while paused.
        let mut asked = Instant::now();
        while guard.as_ref().is_some_and(|c| c.paused) {
            guard = WAKE
                .wait_timeout(guard, Duration::from_millis(5))
                .map(|(g, _)| g)
                .unwrap_or_else(|e| e.into_inner().0);
            if ATTENTION.load(Ordering::Relaxed) & QUEUED != 0 {
                drop(guard);
                run_queued();
                guard = control();
            }
            if asked.elapsed() >= INTERRUPT_CHECK {
                drop(guard);
                if interrupted() {
                    resume(&Who::program());
                    let mut guard = control();
                    let c = guard.get_or_insert_with(Control::default);
                    c.paused_at = None;
                    update_attention(c);
                    return true;
                }
                asked = Instant::now();
                guard = control();
            }
        }
        let c = guard.get_or_insert_with(Control::default);
        c.paused_at = None;
        update_attention(c);
        return false;
    }
    update_attention(c);
    false
}

/// Runs every queued actuation on this thread.
fn run_queued() {
    loop {
        let Some(q) = queue().pop_front() else { break };
        let path = format!("{}.{}", q.entry.name(), q.actuator);
        let result = std::panic::catch_unwind(AssertUnwindSafe(|| {
            q.entry.run_actuator(&q.actuator, &q.args)
        }))
        .unwrap_or_else(|_| {
            Err(SteerError::ActuatorFailed {
                path: path.clone(),
                reason: "it panicked".into(),
            })
        });
        log::record(
            &q.who,
            Action::Actuate {
                path,
                args: q.args.0.clone(),
                result: result.as_ref().ok().cloned(),
            },
            result.as_ref().map(|_| ()).map_err(|e| e.to_string()),
        );
        let _ = q.reply.send(result);
    }
    let guard = control();
    match guard.as_ref() {
        Some(c) => update_attention(c),
        None => update_attention(&Control::default()),
    }
}

/// An actuation waiting for the program's next synch point.
#[derive(Debug)]
#[must_use = "wait() returns the actuator's result"]
pub struct Pending {
    path: String,
    rx: Receiver<Result<Value, SteerError>>,
}

impl Pending {
    /// Waits for the result, at most `timeout`.
    pub fn wait(self, timeout: Duration) -> Result<Value, SteerError> {
        match self.rx.recv_timeout(timeout) {
            Ok(r) => r,
            Err(_) => Err(SteerError::NoSynchPoint {
                path: self.path,
                waited: timeout,
            }),
        }
    }

    /// The result, if the actuator has run.
    pub fn try_result(&self) -> Option<Result<Value, SteerError>> {
        self.rx.try_recv().ok()
    }
}

pub(crate) fn enqueue(
    entry: Arc<dyn ObjectEntry>,
    actuator: &str,
    args: Args,
    who: Who,
) -> Pending {
    let (reply, rx) = channel();
    let path = format!("{}.{actuator}", entry.name());
    {
        let mut queue = queue();
        queue.push_back(Queued {
            entry,
            actuator: actuator.to_owned(),
            args,
            who,
            reply,
        });
        ATTENTION.fetch_or(QUEUED, Ordering::Release);
    }
    WAKE.notify_all();
    Pending { path, rx }
}

/// Where the program stands, as every client sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunState {
    /// Running freely.
    Running,
    /// Pause asked for; the program stops at its next synch point.
    PauseRequested,
    /// Running a given number of synch points, then pausing.
    Stepping {
        /// Synch points left.
        left: u64,
    },
    /// Running until a condition holds at a synch point.
    RunningUntil {
        /// The condition, as given.
        condition: String,
    },
    /// Stalled at a synch point.
    Paused {
        /// The synch point's name.
        at: String,
        /// How many times it had been reached (counted while steering was active).
        count: u64,
    },
}

impl std::fmt::Display for RunState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunState::Running => f.write_str("running"),
            RunState::PauseRequested => f.write_str("pausing (at the next synch point)"),
            RunState::Stepping { left } => write!(f, "stepping ({left} synch points left)"),
            RunState::RunningUntil { condition } => write!(f, "running until {condition}"),
            RunState::Paused { at, count } => write!(f, "paused at {at} (#{count})"),
        }
    }
}

/// The program's run state.
pub fn state() -> RunState {
    let guard = control();
    let Some(c) = guard.as_ref() else {
        return RunState::Running;
    };
    if let (true, Some((at, count))) = (c.paused, &c.paused_at) {
        return RunState::Paused {
            at: at.clone(),
            count: *count,
        };
    }
    if c.pause_requested {
        return RunState::PauseRequested;
    }
    if let Some(left) = c.steps_left {
        return RunState::Stepping { left };
    }
    if let Some((cond, _)) = &c.until {
        return RunState::RunningUntil {
            condition: cond.clone(),
        };
    }
    RunState::Running
}

fn with_control(f: impl FnOnce(&mut Control)) {
    let mut guard = control();
    let c = guard.get_or_insert_with(Control::default);
    f(c);
    update_attention(c);
    WAKE.notify_all();
}

/// Asks the program to stall at its next synch point.
pub fn pause(who: &Who) {
    with_control(|c| {
        if !c.paused {
            c.pause_requested = true;
        }
        c.steps_left = None;
        c.until = None;
    });
    log::record(who, Action::Pause, Ok(()));
}

/// Lets a paused program go on (and cancels stepping and run-until).
pub fn resume(who: &Who) {
    with_control(|c| {
        c.paused = false;
        c.pause_requested = false;
        c.steps_left = None;
        c.until = None;
    });
    log::record(who, Action::Resume, Ok(()));
}

/// Lets the program pass `n` synch points, then pause again.
pub fn step(n: u64, who: &Who) {
    with_control(|c| {
        c.paused = false;
        c.pause_requested = false;
        c.until = None;
        c.steps_left = Some(n.max(1));
    });
    log::record(who, Action::Step { n }, Ok(()));
}

/// Lets the program run until `condition` holds at a synch point, then pause. `text` describes
/// the condition to clients.
pub fn run_until(text: &str, condition: impl Fn() -> bool + Send + 'static, who: &Who) {
    with_control(|c| {
        c.paused = false;
        c.pause_requested = false;
        c.steps_left = None;
        c.until = Some((text.to_owned(), Box::new(condition)));
    });
    log::record(
        who,
        Action::RunUntil {
            condition: text.to_owned(),
        },
        Ok(()),
    );
}

/// Lets the program run until a textual [`Condition`] holds at a synch point, then pause: the
/// form remote clients use (`gyr run-until PID "nbody.step >= 1000"`).
pub fn run_until_condition(condition: &str, who: &Who) -> Result<(), SteerError> {
    let c = Condition::parse(condition)?;
    let text = c.text().to_owned();
    run_until(&text, move || c.holds(), who);
    Ok(())
}

/// How many times each synch point was reached while steering was active.
pub fn synch_point_counts() -> Vec<(String, u64)> {
    let guard = control();
    let mut v: Vec<_> = guard
        .as_ref()
        .map(|c| c.reached.clone().into_iter().collect())
        .unwrap_or_default();
    v.sort();
    v
}
