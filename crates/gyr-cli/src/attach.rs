//! `gyr attach PID`: the interactive steering client (Progress's "transient remote client").
//!
//! A command line with history and Tab completion of commands, attribute paths, actuators,
//! functions and event types; the program's objects on arrival; and, printed above the prompt
//! as they happen, every steering change (whoever made it) and the live events the user asked
//! to `watch`. Leaving (Ctrl-D, `quit`) changes nothing in the program.

use crate::Failure;
use crate::client::Session;
use crate::show;
use crate::steer_cmd::Target;
use gyr_client::command::{COMMANDS, Command, SteerCommand};
use rustyline::completion::{Completer, Pair};
use rustyline::error::ReadlineError;
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::history::DefaultHistory;
use rustyline::validate::Validator;
use rustyline::{Context, Editor, ExternalPrinter, Helper};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Most live-event lines printed per second: a fast stream is summarised, not scrolled past.
const MAX_EVENT_LINES_PER_S: u32 = 20;

/// Names offered by Tab completion, refreshed from the program after each command.
#[derive(Default)]
struct Names {
    attributes: Vec<String>,
    operations: Vec<String>,
    types: Vec<String>,
}

struct AttachHelper {
    names: Arc<Mutex<Names>>,
}

impl Completer for AttachHelper {
    type Candidate = Pair;

    fn complete(
        &self,
        line: &str,
        pos: usize,
        _: &Context<'_>,
    ) -> rustyline::Result<(usize, Vec<Pair>)> {
        let before = &line[..pos];
        let start = before
            .rfind(char::is_whitespace)
            .map(|i| i + 1)
            .unwrap_or(0);
        let word = &before[start..];
        let first = before.split_whitespace().next().unwrap_or("");
        let names = self.names.lock().unwrap_or_else(|e| e.into_inner());
        let pool: Vec<String> = if start == 0 {
            COMMANDS.iter().map(|c| c.0.to_owned()).collect()
        } else {
            match first {
                "get" | "set" | "until" => names.attributes.clone(),
                "call" => names.operations.clone(),
                "watch" | "sensors" => names.types.clone(),
                _ => Vec::new(),
            }
        };
        let mut out: Vec<Pair> = pool
            .into_iter()
            .filter(|c| c.starts_with(word))
            .map(|c| Pair {
                display: c.clone(),
                replacement: format!("{c} "),
            })
            .collect();
        out.sort_by(|a, b| a.display.cmp(&b.display));
        Ok((start, out))
    }
}

impl Hinter for AttachHelper {
    type Hint = String;
}
impl Highlighter for AttachHelper {}
impl Validator for AttachHelper {}
impl Helper for AttachHelper {}

/// Prints lines above the prompt (or plainly when not on a terminal); shared by the threads
/// that follow the steering log and live events.
type Printer = Arc<Mutex<Box<dyn FnMut(String) + Send>>>;

fn say(p: &Printer, line: String) {
    (p.lock().unwrap_or_else(|e| e.into_inner()))(line);
}

fn history_path() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_STATE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/state")))?;
    Some(base.join("gyr").join("attach_history"))
}

/// Follows the steering log from entry `after` on, printing each new entry.
fn follow_log(target: Target, after: u64, printer: Printer, stop: Arc<AtomicBool>) {
    let Ok(mut s) = Session::connect(&target.program, target.token, "gyr-attach") else {
        return;
    };
    let Ok(mut stream) = s.log(after, true) else {
        return;
    };
    while !stop.load(Ordering::Relaxed) {
        match s.next_within(&mut stream, Duration::from_millis(200)) {
            Ok(None) => {}
            Ok(Some(Some(e))) => say(&printer, format!("[steer] {}", show::log_entry(&e))),
            Ok(Some(None)) | Err(_) => {
                if !stop.load(Ordering::Relaxed) {
                    say(&printer, format!("[program {} went away]", target.program));
                }
                return;
            }
        }
    }
}

/// Prints live events of `types` until `stop`, at most [`MAX_EVENT_LINES_PER_S`] lines a
/// second, with a count of the rest.
fn follow_events(target: Target, types: Vec<String>, printer: Printer, stop: Arc<AtomicBool>) {
    let mut s = match Session::connect(&target.program, target.token, "gyr-attach") {
        Ok(s) => s,
        Err(e) => return say(&printer, format!("watch: {:#}", Failure::from(e).error)),
    };
    let mut stream = match s.subscribe(types, vec![]) {
        Ok(st) => st,
        Err(e) => return say(&printer, format!("watch: {:#}", Failure::from(e).error)),
    };
    let mut decoder = show::EventDecoder::default();
    let gap = Duration::from_secs(1) / MAX_EVENT_LINES_PER_S;
    let mut last_shown: Option<Instant> = None;
    let mut window = Instant::now();
    let (mut held, mut lost) = (0u64, 0u64);
    while !stop.load(Ordering::Relaxed) {
        match s.next_within(&mut stream, Duration::from_millis(200)) {
            Ok(None) => {}
            Ok(Some(Some(batch))) => {
                let b = decoder.batch(batch);
                lost += b.lost;
                for e in b.events {
                    if last_shown.is_none_or(|t| t.elapsed() >= gap) {
                        say(
                            &printer,
                            format!("[event] {}", show::event_line(&e).trim_start()),
                        );
                        last_shown = Some(Instant::now());
                    } else {
                        held += 1;
                    }
                }
            }
            Ok(Some(None)) | Err(_) => return,
        }
        if window.elapsed() >= Duration::from_secs(1) {
            if held > 0 || lost > 0 {
                let dropped = if lost > 0 {
                    format!(", {lost} dropped for this client")
                } else {
                    String::new()
                };
                say(
                    &printer,
                    format!("[event] ... and {held} more in the last second{dropped}"),
                );
            }
            window = Instant::now();
            (held, lost) = (0, 0);
        }
    }
}

/// A live-event follower that can be stopped.
struct Watch {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<()>,
}

impl Watch {
    fn end(self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.thread.join();
    }
}

struct Attached {
    session: Session,
    target: Target,
    names: Arc<Mutex<Names>>,
    printer: Printer,
    watch: Option<Watch>,
}

/// What the loop does after a command.
enum Next {
    Go,
    Quit,
}

impl Attached {
    fn refresh_names(&mut self) {
        let Ok(list) = self.session.list() else {
            return;
        };
        let types = self
            .session
            .sensors()
            .map(|r| {
                let mut t: Vec<String> = r.sensors.into_iter().map(|s| s.type_name).collect();
                t.sort();
                t.dedup();
                t
            })
            .unwrap_or_default();
        let mut n = self.names.lock().unwrap_or_else(|e| e.into_inner());
        n.attributes = list
            .objects
            .iter()
            .flat_map(|o| {
                let mut v: Vec<String> =
                    o.attributes.iter().map(|a| show::attr_path(o, a)).collect();
                if !o.is_param {
                    v.push(o.name.clone());
                }
                v
            })
            .collect();
        n.operations = list
            .objects
            .iter()
            .flat_map(|o| o.actuators.iter().map(|a| format!("{}.{}", o.name, a.name)))
            .chain(list.functions.iter().map(|f| f.name.clone()))
            .collect();
        n.types = types;
    }

    /// Prints a command's answer: the prompt is not showing while a command runs.
    fn out(&self, text: &str) {
        let mut o = std::io::stdout().lock();
        for line in text.lines() {
            let _ = writeln!(o, "{line}");
        }
        let _ = o.flush();
    }

    /// Runs one command of the shared grammar ([`gyr_client::command`]).
    fn command(&mut self, command: Command) -> Result<Next, Failure> {
        match command {
            Command::Help => {
                let mut t = String::new();
                for (c, a, d) in COMMANDS {
                    t += &format!("  {:<22} {d}\n", format!("{c} {a}"));
                }
                t += "script functions (`run FILE`):\n";
                for (f, d) in gyr_rules::FUNCTIONS {
                    t += &format!("  {f:<40} {d}\n");
                }
                self.out(&t);
            }
            Command::Quit => return Ok(Next::Quit),
            Command::Ls => {
                let r = self.session.list()?;
                self.out(&show::objects(&r, &self.target.program));
            }
            Command::Get(paths) => {
                for p in self.session.get(paths)? {
                    self.out(&format!("{} = {}", p.path, show::value(&p.value)));
                }
            }
            Command::Status => {
                let r = self.session.status()?;
                self.out(&show::status(&r));
            }
            Command::Steer(SteerCommand::Set(req)) => {
                let ch = self.session.set(req.writes)?;
                self.out(&show::changes(&ch));
            }
            Command::Steer(SteerCommand::Call(req)) => {
                let target = req.target.clone();
                let r = self.session.call(req.target, req.args, req.timeout_ms)?;
                self.out(&format!("{target} -> {r}"));
            }
            Command::Steer(SteerCommand::Control(req)) => {
                let r = self.session.control(req)?;
                self.out(&show::status(&r));
            }
            Command::Steer(SteerCommand::Sensors { request, .. }) => {
                let r = self.session.sensor_control(request)?;
                self.out(&show::sensors(&r));
            }
            Command::ListSensors => {
                let r = self.session.sensors()?;
                self.out(&show::sensors(&r));
            }
            Command::Watch(types) => {
                if let Some(w) = self.watch.take() {
                    w.end();
                }
                let stop = Arc::new(AtomicBool::new(false));
                let what = if types.is_empty() {
                    "every event type".to_owned()
                } else {
                    types.join(", ")
                };
                let (t, p, s) = (self.target.clone(), self.printer.clone(), stop.clone());
                self.watch = Some(Watch {
                    stop,
                    thread: std::thread::spawn(move || follow_events(t, types, p, s)),
                });
                self.out(&format!(
                    "watching {what} (at most {MAX_EVENT_LINES_PER_S} lines a second); `unwatch` stops"
                ));
            }
            Command::Unwatch => {
                if let Some(w) = self.watch.take() {
                    w.end();
                }
            }
            Command::Log(n) => {
                let mut stream = self.session.log(0, false)?;
                let mut all = Vec::new();
                while let Some(e) = self.session.next(&mut stream)? {
                    all.push(e);
                }
                for e in &all[all.len().saturating_sub(n)..] {
                    self.out(&show::log_entry(e));
                }
            }
            Command::Run(file) => {
                let src = std::fs::read_to_string(&file).map_err(|e| {
                    Failure::input(anyhow::anyhow!("cannot read the script {file}: {e}"))
                })?;
                let s = Session::connect(
                    &self.target.program,
                    self.target.token.clone(),
                    "gyr-script",
                )?;
                crate::script_cmd::run_source(s, &file, &src)?;
            }
        }
        Ok(Next::Go)
    }
}

/// `gyr attach PID`.
pub(crate) fn run(target: Target) -> Result<ExitCode, Failure> {
    let mut session = Session::connect(&target.program, target.token.clone(), "gyr-attach")?;
    let names = Arc::new(Mutex::new(Names::default()));
    let config = rustyline::Config::builder()
        .completion_type(rustyline::CompletionType::List)
        .auto_add_history(false)
        .build();
    let mut rl: Editor<AttachHelper, DefaultHistory> = Editor::with_config(config)
        .map_err(|e| Failure::from(anyhow::anyhow!("cannot start the command line: {e}")))?;
    rl.set_helper(Some(AttachHelper {
        names: names.clone(),
    }));
    let history = history_path();
    if let Some(h) = &history {
        let _ = rl.load_history(h);
    }
    let printer: Printer = match rl.create_external_printer() {
        Ok(mut p) if std::io::IsTerminal::is_terminal(&std::io::stdin()) => {
            // The terminal is in raw mode while the prompt shows: end lines with CR LF.
            Arc::new(Mutex::new(Box::new(move |line: String| {
                let _ = p.print(format!("{line}\r\n"));
            })))
        }
        _ => Arc::new(Mutex::new(Box::new(|line: String| println!("{line}")))),
    };

    let hello = session.hello.clone();
    let last_log = {
        let mut stream = session.log(0, false)?;
        let mut last = 0;
        while let Some(e) = session.next(&mut stream)? {
            last = e.seq;
        }
        last
    };
    let mut a = Attached {
        session,
        target: target.clone(),
        names,
        printer: printer.clone(),
        watch: None,
    };
    a.out(&format!(
        "attached to program {} ({}); you may {}. `help` lists commands, Tab completes, Ctrl-D leaves.",
        hello.pid,
        hello.command_line.join(" "),
        if hello.can_steer {
            "watch and steer"
        } else {
            "watch but not steer (read-only token)"
        }
    ));
    let status = a.session.status()?;
    a.out(&show::status(&status));
    let list = a.session.list()?;
    a.out(&show::objects(&list, &target.program));
    a.refresh_names();

    let stop = Arc::new(AtomicBool::new(false));
    let log_thread = {
        let (t, p, s) = (target.clone(), printer.clone(), stop.clone());
        std::thread::spawn(move || follow_log(t, last_log, p, s))
    };
    let prompt = format!("gyr {}> ", hello.pid);
    let mut code = ExitCode::SUCCESS;
    loop {
        let line = match rl.readline(&prompt) {
            Ok(l) => l,
            Err(ReadlineError::Interrupted) => continue,
            Err(ReadlineError::Eof) => break,
            Err(e) => {
                eprintln!("gyr: error: reading the command line: {e}");
                code = ExitCode::from(1);
                break;
            }
        };
        let trimmed = line.trim();
        if trimmed.is_empty() {
            continue;
        }
        let _ = rl.add_history_entry(trimmed);
        let command = match Command::parse_line(trimmed) {
            Ok(Some(c)) => c,
            Ok(None) => continue,
            Err(e) => {
                a.out(&format!("error: {}", show::printable(&e.to_string())));
                continue;
            }
        };
        match a.command(command) {
            Ok(Next::Go) => a.refresh_names(),
            Ok(Next::Quit) => break,
            Err(f) if f.code == 1 => {
                eprintln!("gyr: error: {:#}", f.error);
                code = ExitCode::from(1);
                break;
            }
            Err(f) => a.out(&format!("error: {:#}", f.error)),
        }
    }
    if let Some(h) = &history {
        if let Some(dir) = h.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let _ = rl.save_history(h);
    }
    if let Some(w) = a.watch.take() {
        w.end();
    }
    stop.store(true, Ordering::Relaxed);
    let _ = log_thread.join();
    Ok(code)
}
