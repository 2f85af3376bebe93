//! The watched program: started in a process group of its own with its stdout and stderr
//! read through pipes (and passed on to the watch-dog's own, unless quiet), stopped (SIGTERM
//! to the group, SIGKILL after the spec's grace), restarted with changed arguments, signalled;
//! and the files it reads changed for it (a control file appended to, an input file's
//! `key = value` line rewritten).
//!
//! Each pipe is drained by a thread of its own that parses as it reads, so the program never
//! waits on a full pipe for longer than a line takes to parse; when gyr's rings are full,
//! events are dropped and counted by gyr, the reading goes on.

use crate::parse::LineParser;
use crate::publish::{Publisher, cut};
use crate::spec::Spec;
use crate::tail::Lines;
use std::collections::VecDeque;
use std::io::{IsTerminal, Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicI32, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long the pipes' readers are waited for after the program ended (a process it left
/// behind may hold them open).
pub const READER_GRACE: Duration = Duration::from_secs(2);

/// The signals `watched.signal` knows by name.
pub const SIGNALS: [(&str, i32); 13] = [
    ("HUP", libc::SIGHUP),
    ("INT", libc::SIGINT),
    ("QUIT", libc::SIGQUIT),
    ("ABRT", libc::SIGABRT),
    ("KILL", libc::SIGKILL),
    ("USR1", libc::SIGUSR1),
    ("USR2", libc::SIGUSR2),
    ("ALRM", libc::SIGALRM),
    ("TERM", libc::SIGTERM),
    ("CONT", libc::SIGCONT),
    ("STOP", libc::SIGSTOP),
    ("TSTP", libc::SIGTSTP),
    ("WINCH", libc::SIGWINCH),
];

/// A signal's number from its name (`SIGUSR1`, `usr1`) or number (`10`).
pub fn signal_number(name: &str) -> Result<i32, String> {
    let t = name.trim();
    if let Ok(n) = t.parse::<i32>() {
        if (1..=64).contains(&n) {
            return Ok(n);
        }
        return Err(format!("signal {n} does not exist: give 1 to 64 or a name"));
    }
    let up = t.to_ascii_uppercase();
    let bare = up.strip_prefix("SIG").unwrap_or(&up);
    SIGNALS
        .iter()
        .find(|(n, _)| *n == bare)
        .map(|(_, s)| *s)
        .ok_or_else(|| {
            format!(
                "unknown signal `{t}`: use one of {}",
                SIGNALS
                    .iter()
                    .map(|(n, _)| format!("SIG{n}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })
}

/// A signal's name (`SIGTERM`), or its number as text.
pub fn signal_name(sig: i32) -> String {
    SIGNALS
        .iter()
        .find(|(_, s)| *s == sig)
        .map(|(n, _)| format!("SIG{n}"))
        .unwrap_or_else(|| sig.to_string())
}

/// Splits a command line as a shell would split words: spaces separate, `'...'` and `"..."`
/// quote, `\` escapes the next character (not inside single quotes).
pub fn split_words(s: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(ch) => cur.push(ch),
                        None => return Err(format!("unclosed ' in `{s}`")),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(ch) => cur.push(ch),
                            None => return Err(format!("a \\ ends `{s}`")),
                        },
                        Some(ch) => cur.push(ch),
                        None => return Err(format!("unclosed \" in `{s}`")),
                    }
                }
            }
            '\\' => {
                in_word = true;
                match chars.next() {
                    Some(ch) => cur.push(ch),
                    None => return Err(format!("a \\ ends `{s}`")),
                }
            }
            c if c.is_whitespace() => {
                if in_word {
                    out.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            c => {
                in_word = true;
                cur.push(c);
            }
        }
    }
    if in_word {
        out.push(cur);
    }
    Ok(out)
}

/// A command line as a shell would read it back.
pub fn join_words(words: &[String]) -> String {
    words
        .iter()
        .map(|w| {
            if !w.is_empty()
                && w.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c))
            {
                w.clone()
            } else {
                format!("'{}'", w.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn is_option(w: &str) -> bool {
    w.starts_with('-') && w.len() > 1 && w.parse::<f64>().is_err()
}

/// `command` with `changes` applied: each `--opt value`, `--opt=value` (or single-dash) and
/// `key=value` in `changes` replaces the same option or key of `command` (its first
/// occurrence after the program), else is appended; a bare option already present is left.
///
/// ```
/// use gyr_watchdog::supervise::apply_changes;
/// let cmd: Vec<String> = ["solver", "--relax", "0.5", "--steps=100", "cfl=2", "case.in"]
///     .iter().map(|s| s.to_string()).collect();
/// let new = apply_changes(&cmd, "--relax 0.4 --steps=200 cfl=1.5 --restart").unwrap();
/// assert_eq!(new.join(" "), "solver --relax 0.4 --steps=200 cfl=1.5 case.in --restart");
/// ```
pub fn apply_changes(command: &[String], changes: &str) -> Result<Vec<String>, String> {
    let words = split_words(changes)?;
    let mut cmd = command.to_vec();
    let mut i = 0;
    while i < words.len() {
        let w = &words[i];
        if is_option(w) {
            let (name, inline) = match w.split_once('=') {
                Some((n, v)) => (n.to_owned(), Some(v.to_owned())),
                None => (w.clone(), None),
            };
            let value = match &inline {
                Some(_) => None,
                None => words.get(i + 1).filter(|n| !is_option(n)).cloned(),
            };
            i += if value.is_some() { 2 } else { 1 };
            // Where the option is in the command, and whether its value follows it.
            let found =
                (1..cmd.len()).find(|&k| cmd[k] == name || cmd[k].starts_with(&format!("{name}=")));
            match found {
                Some(k) if cmd[k].contains('=') => {
                    let v = inline.or(value).unwrap_or_default();
                    cmd[k] = format!("{name}={v}");
                }
                Some(k) => match (inline, value) {
                    (Some(v), _) => {
                        // `--opt=v` given for `--opt old`: keep the command's form.
                        if cmd.get(k + 1).is_some_and(|n| !is_option(n)) {
                            cmd[k + 1] = v;
                        } else {
                            cmd[k] = format!("{name}={v}");
                        }
                    }
                    (None, Some(v)) => {
                        if cmd.get(k + 1).is_some_and(|n| !is_option(n)) {
                            cmd[k + 1] = v;
                        } else {
                            cmd.insert(k + 1, v);
                        }
                    }
                    (None, None) => {}
                },
                None => {
                    cmd.push(match &inline {
                        Some(v) => format!("{name}={v}"),
                        None => name,
                    });
                    if let Some(v) = value {
                        cmd.push(v);
                    }
                }
            }
        } else if let Some((key, _)) = w.split_once('=').filter(|(k, _)| !k.is_empty()) {
            i += 1;
            let prefix = format!("{key}=");
            match (1..cmd.len()).find(|&k| cmd[k].starts_with(&prefix)) {
                Some(k) => cmd[k] = w.clone(),
                None => cmd.push(w.clone()),
            }
        } else {
            i += 1;
            cmd.push(w.clone());
        }
    }
    Ok(cmd)
}

/// Appends `line` to the control file at `path` (created if missing).
pub fn append_control(path: &Path, line: &str) -> Result<(), String> {
    if line.contains('\n') {
        return Err("give one line, without a newline".into());
    }
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| format!("cannot open the control file {}: {e}", path.display()))?;
    f.write_all(format!("{line}\n").as_bytes())
        .map_err(|e| format!("cannot write the control file {}: {e}", path.display()))
}

/// The largest input file `set_input` rewrites.
pub const MAX_INPUT_BYTES: u64 = 16 << 20;

/// Rewrites the first line of the input file at `path` that sets `key` (`key = value`,
/// `key: value` or `key value`, the key matched without regard to case), keeping its layout
/// and a trailing comment (`!`, `#`); the file is replaced whole (written beside it, then
/// renamed). Returns the old value.
pub fn rewrite_input(path: &Path, key: &str, value: &str) -> Result<String, String> {
    if key.trim().is_empty() || value.contains('\n') {
        return Err("give a key and a one-line value".into());
    }
    let meta = std::fs::metadata(path)
        .map_err(|e| format!("cannot read the input file {}: {e}", path.display()))?;
    if meta.len() > MAX_INPUT_BYTES {
        return Err(format!(
            "{} is larger than {MAX_INPUT_BYTES} bytes: not an input file the watch-dog rewrites",
            path.display()
        ));
    }
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read the input file {}: {e}", path.display()))?;
    let mut out = String::with_capacity(text.len() + value.len());
    let mut old = None;
    for line in text.split_inclusive('\n') {
        if old.is_none()
            && let Some((new, was)) = rewrite_line(line, key, value)
        {
            out.push_str(&new);
            old = Some(was);
            continue;
        }
        out.push_str(line);
    }
    let Some(old) = old else {
        return Err(format!(
            "no line of {} sets `{key}` (as `{key} = value` or `{key} value`); nothing was changed",
            path.display()
        ));
    };
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let tmp = dir.join(format!(
        ".{}.gyr-watchdog.{}",
        path.file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default(),
        std::process::id()
    ));
    std::fs::write(&tmp, out)
        .and_then(|_| std::fs::set_permissions(&tmp, meta.permissions()))
        .and_then(|_| std::fs::rename(&tmp, path))
        .map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            format!("cannot rewrite {}: {e}", path.display())
        })?;
    Ok(old)
}

/// The line with `key`'s value replaced, and the old value; `None` if it does not set `key`.
fn rewrite_line(line: &str, key: &str, value: &str) -> Option<(String, String)> {
    let indent = line.len() - line.trim_start().len();
    let rest = &line[indent..];
    if rest.len() < key.len() || !rest[..key.len()].eq_ignore_ascii_case(key) {
        return None;
    }
    let after = &rest[key.len()..];
    // The key must end here: then `=`, `:` or blanks before the value.
    let sep_len = {
        let blanks = after.len() - after.trim_start_matches([' ', '\t']).len();
        let t = &after[blanks..];
        if t.starts_with('=') || t.starts_with(':') {
            let more = t[1..].len() - t[1..].trim_start_matches([' ', '\t']).len();
            blanks + 1 + more
        } else if blanks > 0 {
            blanks
        } else {
            return None;
        }
    };
    let value_start = indent + key.len() + sep_len;
    let tail = &line[value_start..];
    let end_of_line = tail.trim_end_matches(['\n', '\r']).len();
    let comment = tail[..end_of_line].find(['!', '#']).unwrap_or(end_of_line);
    let old_raw = &tail[..comment];
    let old = old_raw.trim_end();
    let kept_space = &old_raw[old.len()..];
    Some((
        format!(
            "{}{value}{kept_space}{}",
            &line[..value_start],
            &tail[comment..]
        ),
        old.to_owned(),
    ))
}

/// The last lines the program printed, both pipes together.
#[derive(Debug)]
pub struct LastLines {
    lines: VecDeque<String>,
    max: usize,
}

impl LastLines {
    /// Keeps `max` lines.
    pub fn new(max: usize) -> LastLines {
        LastLines {
            lines: VecDeque::with_capacity(max),
            max,
        }
    }

    fn push(&mut self, line: &str) {
        if self.max == 0 {
            return;
        }
        let mut s = if self.lines.len() >= self.max {
            self.lines.pop_front().unwrap_or_default()
        } else {
            String::new()
        };
        s.clear();
        s.push_str(cut(line, crate::publish::MAX_SHOWN_LINE));
        self.lines.push_back(s);
    }

    /// The lines, joined by newlines.
    pub fn text(&self) -> String {
        self.lines
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// How a run of the program ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ended {
    /// Its exit status, when it exited.
    pub status: Option<i32>,
    /// The signal that ended it, when one did.
    pub signal: Option<i32>,
}

impl Ended {
    fn of(s: ExitStatus) -> Ended {
        Ended {
            status: s.code(),
            signal: s.signal(),
        }
    }

    /// The exit code a shell would show: the status, or 128 + the signal.
    pub fn code(&self) -> i32 {
        match (self.status, self.signal) {
            (Some(c), _) => c,
            (None, Some(s)) => 128 + s,
            _ => 1,
        }
    }
}

/// What the program is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Not started yet.
    Idle,
    /// Running.
    Running,
    /// It exited (any status).
    Exited,
    /// A signal ended it that the watch-dog did not send.
    Crashed,
    /// Stopped by `watched.stop`.
    Stopped,
}

impl State {
    /// `idle`, `running`, `exited`, `crashed` or `stopped`.
    pub fn name(self) -> &'static str {
        match self {
            State::Idle => "idle",
            State::Running => "running",
            State::Exited => "exited",
            State::Crashed => "crashed",
            State::Stopped => "stopped",
        }
    }
}

struct Running {
    child: Child,
    started: Instant,
    readers: Vec<JoinHandle<()>>,
}

/// The process group of the running program, for the signal handler.
static GROUP: AtomicI32 = AtomicI32::new(0);

/// Runs and watches the program.
pub struct Supervisor {
    /// The command line the next start uses.
    pub command: Vec<String>,
    dir: PathBuf,
    spec: Arc<Spec>,
    publisher: Arc<Publisher>,
    instance: String,
    passthrough: bool,
    run: Option<Running>,
    last: Arc<Mutex<LastLines>>,
    /// What it is doing.
    pub state: State,
    /// Runs started after the first.
    pub restarts: u32,
    /// How the last run ended.
    pub last_end: Option<Ended>,
    /// Runs started in all.
    runs: u32,
    /// The same, read by the parsers of its output and of the files, whose events carry it.
    pub run_number: Arc<AtomicU32>,
}

impl std::fmt::Debug for Supervisor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Supervisor")
            .field("command", &self.command)
            .field("state", &self.state)
            .finish()
    }
}

fn kill(pid: i32, sig: i32) -> bool {
    if pid == 0 || pid == -1 {
        return false;
    }
    // SAFETY: kill has no memory-safety preconditions; pid is never 0 or -1 here (which
    // would signal our own group or every process).
    unsafe { libc::kill(pid, sig) == 0 }
}

impl Supervisor {
    /// A supervisor for `command`, run in `dir`; its events carry `instance`; with
    /// `passthrough`, its output is also copied to the watch-dog's stdout and stderr.
    pub fn new(
        command: Vec<String>,
        dir: &Path,
        spec: Arc<Spec>,
        publisher: Arc<Publisher>,
        instance: &str,
        passthrough: bool,
    ) -> Supervisor {
        let keep = spec.options.last_lines;
        Supervisor {
            command,
            dir: dir.to_owned(),
            spec,
            publisher,
            instance: instance.to_owned(),
            passthrough,
            run: None,
            last: Arc::new(Mutex::new(LastLines::new(keep))),
            state: State::Idle,
            restarts: 0,
            last_end: None,
            runs: 0,
            run_number: Arc::new(AtomicU32::new(0)),
        }
    }

    /// The running program's pid.
    pub fn pid(&self) -> Option<u32> {
        self.run.as_ref().map(|r| r.child.id())
    }

    /// Starts the program; refused if it runs.
    pub fn start(&mut self) -> Result<u32, String> {
        if self.run.is_some() {
            return Err("the program is running already: stop or restart it".into());
        }
        let Some(program) = self.command.first() else {
            return Err("no command to run".into());
        };
        let mut cmd = Command::new(program);
        cmd.args(&self.command[1..])
            .current_dir(&self.dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // Its own group: stop and restart end what it started too (mpirun's ranks, a
            // script's commands); signals the watch-dog gets are passed on to the group.
            .process_group(0);
        if std::io::stdin().is_terminal() {
            // A background group reading the terminal would be stopped (SIGTTIN).
            cmd.stdin(Stdio::null());
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot start `{program}`: {e}"))?;
        let pid = child.id();
        GROUP.store(pid as i32, Ordering::SeqCst);
        if self.runs > 0 {
            self.restarts += 1;
        }
        self.runs += 1;
        self.run_number.store(self.runs, Ordering::Relaxed);
        self.publisher
            .start_event(self.runs, pid, &join_words(&self.command), &self.instance);
        let mut readers = Vec::new();
        let stdout = child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>);
        let stderr = child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>);
        for (source, pipe) in [(0usize, stdout), (1usize, stderr)] {
            let Some(pipe) = pipe else { continue };
            let parser = LineParser::new(self.spec.clone(), source, &self.instance)
                .with_run(self.run_number.clone());
            let publisher = self.publisher.clone();
            let last = self.last.clone();
            let pass = self.passthrough;
            let h = std::thread::Builder::new()
                .name(format!(
                    "watchdog-{}",
                    if source == 0 { "stdout" } else { "stderr" }
                ))
                .spawn(move || read_pipe(pipe, source, parser, publisher, last, pass));
            match h {
                Ok(h) => readers.push(h),
                Err(e) => {
                    // Without a reader the pipe would fill and stop the program.
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(format!(
                        "cannot start a thread to read the program's output: {e}"
                    ));
                }
            }
        }
        self.run = Some(Running {
            child,
            started: Instant::now(),
            readers,
        });
        self.state = State::Running;
        Ok(pid)
    }

    /// Whether it ended on its own since the last look; records `watchdog.exit` if so.
    pub fn poll(&mut self) -> Option<Ended> {
        let r = self.run.as_mut()?;
        match r.child.try_wait() {
            Ok(Some(status)) => {
                let ended = Ended::of(status);
                let reason = if ended.signal.is_some() {
                    State::Crashed
                } else {
                    State::Exited
                };
                self.finish_run(ended, reason, reason.name());
                Some(ended)
            }
            _ => None,
        }
    }

    fn finish_run(&mut self, ended: Ended, state: State, reason: &str) {
        let Some(r) = self.run.take() else { return };
        GROUP.store(0, Ordering::SeqCst);
        let deadline = Instant::now() + READER_GRACE;
        for h in r.readers {
            while !h.is_finished() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
            if h.is_finished() {
                let _ = h.join();
            }
        }
        let last = {
            let mut l = self.last.lock().unwrap_or_else(|e| e.into_inner());
            let t = l.text();
            *l = LastLines::new(self.spec.options.last_lines);
            t
        };
        self.publisher.exit_event(
            self.runs,
            ended.status,
            ended.signal,
            reason,
            r.started.elapsed().as_secs_f64(),
            &last,
            &self.instance,
        );
        self.last_end = Some(ended);
        self.state = state;
    }

    /// Ends the running program: SIGTERM to its group, SIGKILL after the spec's grace.
    fn end_run(&mut self, state: State, reason: &str) -> Result<Ended, String> {
        let Some(r) = self.run.as_mut() else {
            return Err(format!(
                "the program is not running (it is {})",
                self.state.name()
            ));
        };
        let pid = r.child.id() as i32;
        kill(-pid, libc::SIGTERM);
        let deadline = Instant::now() + self.spec.options.stop_grace;
        let status = loop {
            match r.child.try_wait() {
                Ok(Some(s)) => break s,
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10))
                }
                _ => {
                    kill(-pid, libc::SIGKILL);
                    match r.child.wait() {
                        Ok(s) => break s,
                        Err(e) => return Err(format!("cannot wait for the program: {e}")),
                    }
                }
            }
        };
        // What it left in its group goes too.
        kill(-pid, libc::SIGKILL);
        let ended = Ended::of(status);
        self.finish_run(ended, state, reason);
        Ok(ended)
    }

    /// Stops the program (it stays stopped until [`Supervisor::start`]).
    pub fn stop(&mut self) -> Result<Ended, String> {
        self.end_run(State::Stopped, "stopped")
    }

    /// Stops the program if it runs and starts it again with `changes` applied to its command
    /// line (see [`apply_changes`]); the changed line is kept for later restarts.
    pub fn restart(&mut self, changes: &str) -> Result<String, String> {
        let new = apply_changes(&self.command, changes)?;
        if self.run.is_some() {
            self.end_run(State::Stopped, "restarted")?;
        }
        let old = std::mem::replace(&mut self.command, new);
        match self.start() {
            Ok(pid) => Ok(format!(
                "started as pid {pid}: {}",
                join_words(&self.command)
            )),
            Err(e) => {
                self.command = old;
                Err(e)
            }
        }
    }

    /// Sends `sig` to the program (its main process only).
    pub fn signal(&mut self, sig: i32) -> Result<(), String> {
        let Some(r) = &self.run else {
            return Err(format!(
                "the program is not running (it is {})",
                self.state.name()
            ));
        };
        if kill(r.child.id() as i32, sig) {
            Ok(())
        } else {
            Err(format!(
                "cannot send {} to pid {}: {}",
                signal_name(sig),
                r.child.id(),
                std::io::Error::last_os_error()
            ))
        }
    }

    /// Ends the program at the watch-dog's end, if it still runs.
    pub fn shutdown(&mut self) {
        if self.run.is_some() {
            let _ = self.end_run(State::Stopped, "stopped");
        }
    }
}

fn read_pipe(
    mut pipe: Box<dyn Read + Send>,
    source: usize,
    mut parser: LineParser,
    publisher: Arc<Publisher>,
    last: Arc<Mutex<LastLines>>,
    mut pass: bool,
) {
    let name = if source == 0 { "stdout" } else { "stderr" };
    let mut buf = vec![0u8; 64 << 10];
    let mut lines = Lines::new();
    let mut on_line = |l: &str| {
        last.lock().unwrap_or_else(|e| e.into_inner()).push(l);
        publisher.line(&mut parser, name, l);
    };
    loop {
        let n = match pipe.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        if pass {
            let ok = if source == 0 {
                let mut o = std::io::stdout().lock();
                o.write_all(&buf[..n]).and_then(|_| o.flush())
            } else {
                std::io::stderr().lock().write_all(&buf[..n])
            };
            // A closed terminal or pipe: the program's output is still read and parsed.
            pass = ok.is_ok();
        }
        lines.feed(&buf[..n], &mut on_line);
    }
    lines.flush(&mut on_line);
    publisher
        .counters
        .cut
        .fetch_add(lines.cut, std::sync::atomic::Ordering::Relaxed);
}

/// Signals the watch-dog received (SIGINT, SIGTERM, SIGHUP), counted.
static RECEIVED: AtomicI32 = AtomicI32::new(0);
/// The last one received.
static LAST_SIGNAL: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    RECEIVED.fetch_add(1, Ordering::SeqCst);
    LAST_SIGNAL.store(sig, Ordering::SeqCst);
    let group = GROUP.load(Ordering::SeqCst);
    if group > 0 {
        // SAFETY: kill is async-signal-safe; errno is saved and restored around it.
        unsafe {
            let errno = *libc::__errno_location();
            libc::kill(-group, sig);
            *libc::__errno_location() = errno;
        }
    }
}

/// Installs the handlers of SIGINT, SIGTERM and SIGHUP: each is passed on to the program's
/// group and counted ([`signals_received`]), and the watch-dog goes on until the program
/// ends (or, watching files only, ends its loop cleanly).
pub fn install_signal_handlers() {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        let handler: extern "C" fn(libc::c_int) = on_signal;
        // SAFETY: the handler only touches atomics and calls kill, both async-signal-safe;
        // SA_RESTART keeps interrupted reads and waits going.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = handler as libc::sighandler_t;
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(sig, &action, std::ptr::null_mut());
        }
    }
}

/// How many of SIGINT, SIGTERM and SIGHUP the watch-dog received, and the last one.
pub fn signals_received() -> (i32, i32) {
    (
        RECEIVED.load(Ordering::SeqCst),
        LAST_SIGNAL.load(Ordering::SeqCst),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_and_joins_words() {
        assert_eq!(
            split_words(r#"--a 'b c' "d\"e" f\ g"#).unwrap(),
            ["--a", "b c", "d\"e", "f g"]
        );
        assert!(split_words("'open").is_err());
        let w = vec!["x".to_string(), "a b".to_string(), "it's".to_string()];
        assert_eq!(split_words(&join_words(&w)).unwrap(), w);
    }

    #[test]
    fn applies_changes_to_a_command() {
        let cmd: Vec<String> = ["s", "-n", "-5", "--x=1", "--flag", "k=v", "file"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(
            apply_changes(&cmd, "-n 7 --x 2 k=w --flag --new=3 extra")
                .unwrap()
                .join(" "),
            "s -n 7 --x=2 --flag k=w file --new=3 extra"
        );
        assert_eq!(apply_changes(&cmd, "").unwrap(), cmd);
    }

    #[test]
    fn rewrites_input_lines() {
        assert_eq!(
            rewrite_line("  relax = 0.5   ! factor\n", "RELAX", "0.4"),
            Some(("  relax = 0.4   ! factor\n".into(), "0.5".into()))
        );
        assert_eq!(
            rewrite_line("nstep 100\n", "nstep", "200"),
            Some(("nstep 200\n".into(), "100".into()))
        );
        assert_eq!(rewrite_line("nsteps 100\n", "nstep", "200"), None);
        assert_eq!(
            rewrite_line("cfl: 2", "cfl", "1.5"),
            Some(("cfl: 1.5".into(), "2".into()))
        );
    }

    #[test]
    fn knows_signals() {
        assert_eq!(signal_number("SIGUSR1"), Ok(libc::SIGUSR1));
        assert_eq!(signal_number("term"), Ok(libc::SIGTERM));
        assert_eq!(signal_number("9"), Ok(9));
        assert!(signal_number("SIGFOO").unwrap_err().contains("SIGUSR1"));
    }
}
