//! Replay: recorded traces (the hub's own recordings or a program's `GYR_TRACE` file) played
//! into the same analyses and UI as a live run, at any speed, paused, and scrubbed to any
//! moment, so that a run can be looked at again after it ended.
//!
//! Files share one timeline, aligned by the wall-clock time of their timestamp 0. Each file
//! is read by a thread of its own that feeds a record when the replay clock reaches it. A seek
//! starts every file again from its beginning with fresh analyses and feeds it without
//! pausing up to the new position (so the charts show the history up to there), then plays on.

use crate::Shared;
use crate::program::{Process, Source};
use crate::protocol::{ReplayFile, ReplayState};
use gyr_core::RecordHeader;
use gyr_core::trace::Item;
use gyr_core::{TraceHeader, TraceReader};
use gyr_trace::{CausalStream, Released};
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Why a file cannot be replayed.
#[derive(Debug, thiserror::Error)]
#[error("cannot replay {path}: {reason}")]
pub struct ReplayError {
    path: PathBuf,
    reason: String,
}

/// The replay clock, shared by the file threads and the pages' controls.
#[derive(Debug)]
struct Clock {
    speed: f64,
    paused: bool,
    /// Position on the common timeline at `anchor`, ns.
    pos_ns: u64,
    anchor: Instant,
    /// Bumped by every seek: a file thread that sees it change starts again.
    generation: u64,
    stop: bool,
}

impl Clock {
    fn position(&self, now: Instant) -> u64 {
        if self.paused {
            self.pos_ns
        } else {
            self.pos_ns + (now.duration_since(self.anchor).as_nanos() as f64 * self.speed) as u64
        }
    }
}

/// One file being replayed.
#[derive(Debug)]
struct File {
    path: PathBuf,
    header: TraceHeader,
    /// The id it is shown under (its pid, unless two files share one).
    pid: u32,
    /// Where its timestamp 0 falls on the common timeline.
    offset_ns: u64,
}

/// The replay of a set of files.
#[derive(Debug)]
pub(crate) struct Replay {
    clock: Mutex<Clock>,
    changed: Condvar,
    files: Vec<File>,
    duration_ns: u64,
    /// Whether records are replayed in causal order and corrected for perturbation.
    corrected: bool,
}

/// How far a file plays ahead of the clock before a thread waits: coarse enough to feed in
/// runs, fine enough that the charts move smoothly.
const SLACK_NS: u64 = 2_000_000;

impl Replay {
    /// Opens every file and measures the timeline; a file that cannot be read is an error
    /// naming it (a damaged one is replayed for what can be read).
    pub(crate) fn open(paths: &[PathBuf], corrected: bool) -> Result<Replay, ReplayError> {
        let mut files = Vec::new();
        let mut ends = Vec::new();
        for path in paths {
            let mut r = TraceReader::open(path).map_err(|e| ReplayError {
                path: path.clone(),
                reason: e.to_string(),
            })?;
            // The replay lasts until the last record as it will be played: corrected times
            // are earlier than recorded ones, so a corrected replay is measured corrected.
            let mut last = 0u64;
            let mut causal = corrected
                .then(|| CausalStream::new(CORRECT_MAX_HELD, Some(r.header().sensor_cost_ns)));
            let mut released: Vec<Released> = Vec::new();
            r.for_each_item(|item| match (item, causal.as_mut()) {
                (Item::Schema(s), Some(c)) => c.add_schema(s),
                (Item::Record { record, .. }, None) => {
                    last = last.max(record.header.timestamp);
                }
                (Item::Record { record, .. }, Some(c)) => {
                    c.push(record.thread, record.header, record.payload, &mut released);
                    for r in released.drain(..) {
                        last = last.max(r.header.timestamp);
                    }
                }
                _ => {}
            });
            if let Some(c) = causal.as_mut() {
                c.finish(&mut released);
                for r in released.drain(..) {
                    last = last.max(r.header.timestamp);
                }
            }
            let mut header = r.header().clone();
            if header.command_line.is_empty() {
                header.command_line = vec![path.display().to_string()];
            }
            let mut pid = header.pid;
            while files.iter().any(|f: &File| f.pid == pid) {
                pid = pid.wrapping_add(1);
            }
            files.push(File {
                path: path.clone(),
                header,
                pid,
                offset_ns: 0,
            });
            ends.push(last);
        }
        let zero = files
            .iter()
            .map(|f| f.header.start_unix_ns)
            .min()
            .unwrap_or(0);
        let mut duration_ns = 0;
        for (f, end) in files.iter_mut().zip(ends) {
            f.offset_ns = f.header.start_unix_ns - zero;
            duration_ns = duration_ns.max(f.offset_ns + end);
        }
        Ok(Replay {
            clock: Mutex::new(Clock {
                speed: 1.0,
                paused: false,
                pos_ns: 0,
                anchor: Instant::now(),
                generation: 0,
                stop: false,
            }),
            changed: Condvar::new(),
            files,
            duration_ns,
            corrected,
        })
    }

    /// How long the traces last, in seconds, as played.
    pub(crate) fn duration_s(&self) -> f64 {
        self.duration_ns as f64 / 1e9
    }

    fn lock(&self) -> MutexGuard<'_, Clock> {
        self.clock.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Starts a thread per file.
    pub(crate) fn start(shared: &Arc<Shared>) -> std::io::Result<()> {
        let Some(replay) = &shared.replay else {
            return Ok(());
        };
        for i in 0..replay.files.len() {
            let s = shared.clone();
            std::thread::Builder::new()
                .name("gyr-hub-replay".into())
                .spawn(move || play_file(&s, i))?;
        }
        Ok(())
    }

    /// Stops every file thread.
    pub(crate) fn stop(&self) {
        self.lock().stop = true;
        self.changed.notify_all();
    }

    /// Where the replay is, for the pages.
    pub(crate) fn state(&self) -> ReplayState {
        let mut c = self.lock();
        let now = Instant::now();
        let mut pos = c.position(now);
        if pos >= self.duration_ns && !c.paused {
            // The end: hold there, paused, so that a press on play starts over.
            c.pos_ns = self.duration_ns;
            c.paused = true;
            pos = self.duration_ns;
        }
        ReplayState {
            position_s: pos.min(self.duration_ns) as f64 / 1e9,
            duration_s: self.duration_ns as f64 / 1e9,
            speed: c.speed,
            paused: c.paused,
            files: self
                .files
                .iter()
                .map(|f| ReplayFile {
                    path: f.path.display().to_string(),
                    pid: f.pid,
                })
                .collect(),
            corrected: self.corrected,
        }
    }

    /// The generation (bumped by each seek): pages get a fresh snapshot when it changes.
    pub(crate) fn generation(&self) -> u64 {
        self.lock().generation
    }

    /// Carries out a page's replay command: `play`, `pause`, `speed` (value: factor), `seek`
    /// (value: seconds from the start).
    pub(crate) fn command(&self, action: &str, value: Option<f64>) -> Result<String, String> {
        let now = Instant::now();
        let mut c = self.lock();
        let pos = c.position(now).min(self.duration_ns);
        match action {
            "play" => {
                c.pos_ns = if pos >= self.duration_ns { 0 } else { pos };
                if pos >= self.duration_ns {
                    c.generation += 1;
                }
                c.anchor = now;
                c.paused = false;
            }
            "pause" => {
                c.pos_ns = pos;
                c.anchor = now;
                c.paused = true;
            }
            "speed" => {
                let v = value.ok_or("speed needs a factor")?;
                if !(v.is_finite() && (0.01..=10_000.0).contains(&v)) {
                    return Err(format!("speed {v} is out of range: give 0.01 to 10000"));
                }
                c.pos_ns = pos;
                c.anchor = now;
                c.speed = v;
            }
            "seek" => {
                let v = value.ok_or("seek needs a position in seconds")?;
                if !v.is_finite() || v < 0.0 {
                    return Err(format!("cannot seek to {v} s"));
                }
                c.pos_ns = ((v * 1e9) as u64).min(self.duration_ns);
                c.anchor = now;
                c.generation += 1;
            }
            other => {
                return Err(format!(
                    "unknown replay command `{other}`: play, pause, speed or seek"
                ));
            }
        }
        drop(c);
        self.changed.notify_all();
        Ok(action.to_owned())
    }
}

/// Plays file `i` until the hub stops.
fn play_file(shared: &Shared, i: usize) {
    let Some(replay) = &shared.replay else { return };
    let f = &replay.files[i];
    loop {
        let generation = {
            let c = replay.lock();
            if c.stop {
                return;
            }
            c.generation
        };
        let mut p = Process::new(
            f.pid,
            f.header.command_line.clone(),
            f.header.start_unix_ns,
            Source::Replay,
        );
        p.host = f.header.host.clone();
        shared.programs.insert(p);
        let outcome = feed(shared, replay, f, generation);
        if outcome == Fed::Stop {
            return;
        }
        if outcome == Fed::End {
            // Wait for a seek (which replays from the start) or the end of the hub.
            let mut c = replay.lock();
            while !c.stop && c.generation == generation {
                c = replay.changed.wait(c).unwrap_or_else(|e| e.into_inner());
            }
        }
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Fed {
    End,
    Seek,
    Stop,
}

fn feed(shared: &Shared, replay: &Replay, f: &File, generation: u64) -> Fed {
    let Ok(mut reader) = TraceReader::open(&f.path) else {
        return Fed::End;
    };
    // The clock position the thread knows to have reached, so that most records need no lock.
    let mut reached = 0u64;
    let mut play = |thread: u64, header: &RecordHeader, payload: &[u8]| {
        let at = f.offset_ns + header.timestamp;
        // After a wait for the clock, what the rules have is handed over at once: they see a
        // replay as it plays, not in bursts.
        let waited = at > reached;
        if waited {
            reached = wait_until(replay, at, generation)?;
        }
        with_process(shared, f.pid, |p| {
            shared.watch_for_rules(p);
            p.ingest_record(thread, header, payload);
            shared.feed_rules(p, waited);
            shared.feed_mpi(p);
        });
        Ok::<(), Fed>(())
    };
    // Corrected: through the ordering filter and the corrector first.
    let mut causal = replay
        .corrected
        .then(|| CausalStream::new(CORRECT_MAX_HELD, Some(f.header.sensor_cost_ns)));
    let mut released: Vec<Released> = Vec::new();
    let mut outcome = Fed::End;
    reader.try_for_each_item(|item| {
        let played = match item {
            Item::Schema(s) => {
                if let Some(c) = causal.as_mut() {
                    c.add_schema(s);
                }
                with_process(shared, f.pid, |p| p.add_schema(s.clone()));
                Ok(())
            }
            Item::Thread(t) => {
                with_process(shared, f.pid, |p| p.add_thread(t));
                Ok(())
            }
            Item::Record { record, .. } => match causal.as_mut() {
                None => play(record.thread, &record.header, record.payload),
                Some(c) => {
                    c.push(record.thread, record.header, record.payload, &mut released);
                    released
                        .drain(..)
                        .try_for_each(|r| play(r.thread, &r.header, &r.payload))
                }
            },
            Item::End(_) => Ok(()),
        };
        match played {
            Ok(()) => ControlFlow::Continue(()),
            Err(o) => {
                outcome = o;
                ControlFlow::Break(())
            }
        }
    });
    if outcome == Fed::End
        && let Some(c) = causal.as_mut()
    {
        // What the filter still holds comes last.
        c.finish(&mut released);
        if let Err(o) = released
            .drain(..)
            .try_for_each(|r| play(r.thread, &r.header, &r.payload))
        {
            outcome = o;
        }
    }
    with_process(shared, f.pid, |p| shared.feed_rules(p, true));
    outcome
}

/// Events the ordering filter of a corrected replay holds back at most.
const CORRECT_MAX_HELD: usize = 1 << 20;

fn with_process(shared: &Shared, pid: u32, f: impl FnOnce(&mut Process)) {
    shared.programs.with(pid, f);
}

/// Waits until the clock reaches `at`; returns the position then, or why to stop feeding.
fn wait_until(replay: &Replay, at: u64, generation: u64) -> Result<u64, Fed> {
    let mut c = replay.lock();
    loop {
        if c.stop {
            return Err(Fed::Stop);
        }
        if c.generation != generation {
            return Err(Fed::Seek);
        }
        let pos = c.position(Instant::now());
        if pos + SLACK_NS >= at {
            return Ok(pos + SLACK_NS);
        }
        let wait = if c.paused {
            Duration::from_millis(200)
        } else {
            Duration::from_nanos(((at - pos) as f64 / c.speed) as u64)
                .min(Duration::from_millis(50))
        };
        c = replay
            .changed
            .wait_timeout(c, wait)
            .unwrap_or_else(|e| e.into_inner())
            .0;
    }
}
