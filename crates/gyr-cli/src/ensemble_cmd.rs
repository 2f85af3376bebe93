//! `gyr ensemble`: a slow program run over a grid of parameters, every member watched by the
//! watch-dog's spec and the rules, failed, hung and diverged members retried once, the
//! results made into a map (left-out points filled) and cached (`gyr_watchdog::ensemble`).
//! This module reads the arguments, shows progress (indicatif bars on a terminal, plain lines
//! otherwise) and prints the table.
//!
//! Exit status: 0 when the map was written (from the cache too, and with filled points), 1
//! when it could not be built, 2 for bad input.

use crate::Failure;
use anyhow::anyhow;
use clap::Args;
use gyr_rules::rules::Severity;
use gyr_watchdog::ensemble::{
    self, MemberReport, Observer, Report, Status, Tally, Update, Verdict,
};
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::collections::HashMap;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Alert lines printed at most; past it they are counted.
const MAX_ALERT_LINES: usize = 100;

#[derive(Debug, Args)]
pub(crate) struct EnsembleArgs {
    /// The watch-dog spec the members' output is read by (see docs/watchdog.md).
    #[arg(long, value_name = "SPEC.toml")]
    spec: PathBuf,
    /// Rules run over every member's events: a firing that asks to restart(args) or stop()
    /// marks the member diverged, and its retry runs with those arguments.
    #[arg(long, value_name = "RULES.toml")]
    rules: Option<PathBuf>,
    /// An axis of the grid: NAME=V1,V2,... or NAME=LO:HI:COUNT; give one per axis. The
    /// command's {NAME} is replaced by each value.
    #[arg(long, value_name = "NAME=VALUES", required = true)]
    grid: Vec<String>,
    /// What each member gives (comma-separated): keys of the --from file, or EVENT.FIELD of
    /// the spec's events (the last value in the member's output).
    #[arg(long, value_name = "NAME,...", required = true)]
    result: Vec<String>,
    /// The file of `key = value` lines each member writes in its directory.
    #[arg(long, value_name = "FILE")]
    from: Option<String>,
    /// Change the command of the members selected: 'AXIS=VALUE,...: ARGS', ARGS replacing the
    /// same options (`--relax 0.4`, `key=value`) or appended.
    #[arg(long = "override", value_name = "SELECTOR: ARGS")]
    overrides: Vec<String>,
    /// Members running at once (default: the number of cores).
    #[arg(long, short, value_name = "N")]
    jobs: Option<usize>,
    /// A member printing no line (stdout, stderr, the spec's files) for SECS is hung: its
    /// process group is ended.
    #[arg(long, value_name = "SECS", default_value_t = 120.0)]
    timeout: f64,
    /// A member running longer than SECS in all is hung too (default: no limit).
    #[arg(long, value_name = "SECS")]
    max_time: Option<f64>,
    /// Where the map is written.
    #[arg(long, short, value_name = "FILE")]
    out: PathBuf,
    /// The cache directory (default: $XDG_CACHE_HOME/gyr/ensemble or ~/.cache/gyr/ensemble).
    #[arg(long, value_name = "DIR")]
    cache: Option<PathBuf>,
    /// Run even if the cache has the map (the new map replaces it there).
    #[arg(long)]
    no_cache: bool,
    /// Publish the members' events to the hub at this gRPC address (host:port).
    #[arg(long, value_name = "ADDR")]
    hub: Option<String>,
    /// Write the members' events to this trace file.
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
    /// Keep the members' directories in DIR (DIR/member-N) rather than a temporary one.
    #[arg(long, value_name = "DIR")]
    keep: Option<PathBuf>,
    /// Print the outcome as one JSON object (progress still goes to stderr).
    #[arg(long)]
    json: bool,
    /// The command template: the program and its arguments, with {AXIS}, {dir}, {member},
    /// {instance} and {cwd} placeholders.
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "PROGRAM",
        required = true
    )]
    command: Vec<String>,
}

fn seconds(name: &str, s: f64) -> Result<Duration, Failure> {
    if s.is_finite() && s > 0.0 && s < 1e8 {
        Ok(Duration::from_secs_f64(s))
    } else {
        Err(Failure::input(anyhow!(
            "--{name} {s}: give seconds, more than 0"
        )))
    }
}

pub(crate) fn run(args: EnsembleArgs) -> Result<ExitCode, Failure> {
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let cwd = std::env::current_dir()?;
    let cache = match (&args.cache, ensemble::cache::default_dir()) {
        (Some(c), _) => Some(cwd.join(c)),
        (None, Some(d)) => Some(d),
        (None, None) => {
            eprintln!(
                "gyr ensemble: no cache (neither XDG_CACHE_HOME nor HOME is set): give --cache DIR to keep maps"
            );
            None
        }
    };
    let opts = ensemble::Options {
        spec: args.spec,
        rules: args.rules,
        grid: args.grid,
        results: args.result,
        from: args.from,
        overrides: args.overrides,
        command: args.command,
        jobs: args.jobs.unwrap_or(cores),
        timeout: seconds("timeout", args.timeout)?,
        max_time: args.max_time.map(|t| seconds("max-time", t)).transpose()?,
        out: cwd.join(&args.out),
        cache,
        no_cache: args.no_cache,
        hub: args.hub,
        trace: args.trace,
        keep: args.keep,
        cwd,
    };
    let json = args.json;
    let prepared = ensemble::prepare(opts).map_err(failure)?;
    if let Some(hit) = prepared.cached() {
        prepared.use_cached(&hit).map_err(failure)?;
        let about = &hit.about;
        let made = about["made_unix"]
            .as_u64()
            .map(|s| {
                humantime::format_rfc3339_seconds(std::time::UNIX_EPOCH + Duration::from_secs(s))
                    .to_string()
            })
            .unwrap_or_else(|| "at an unknown time".into());
        let filled = about["filled"].as_array().map_or(0, Vec::len);
        eprintln!(
            "gyr ensemble: the map is in the cache (made {made}{}): copied {} to {}; --no-cache runs the ensemble again",
            if filled > 0 {
                format!(", {filled} point(s) filled then")
            } else {
                String::new()
            },
            hit.map.display(),
            args.out.display()
        );
        if json {
            let v = serde_json::json!({
                "cached": true,
                "key": prepared.key(),
                "out": args.out.display().to_string(),
                "map": hit.map.display().to_string(),
                "about": about,
            });
            println!("{v}");
        }
        return Ok(ExitCode::SUCCESS);
    }
    let members = prepared.grid().len();
    let jobs = args.jobs.unwrap_or(cores).min(members);
    if jobs > cores {
        eprintln!("gyr ensemble: {jobs} members at once on {cores} cores: they share them");
    }
    eprintln!(
        "gyr ensemble: {members} members of {}, {jobs} at once (cache key {})",
        prepared.program().display(),
        &prepared.key()[..16]
    );
    let mut display: Box<dyn Observer> = if std::io::stderr().is_terminal() {
        Box::new(Bars::new(members))
    } else {
        Box::new(Plain::new(members))
    };
    let report = prepared.run(display.as_mut()).map_err(failure)?;
    drop(display);
    if json {
        println!("{}", report_json(&report));
    } else {
        print_table(&report)?;
    }
    let left_out = report
        .members
        .iter()
        .filter(|m| m.status == Status::LeftOut)
        .count();
    let retried = report
        .members
        .iter()
        .filter(|m| m.status == Status::RetriedOk)
        .count();
    if report.rules_missed > 0 {
        eprintln!(
            "gyr ensemble: the rules missed {} events (their queue was full)",
            report.rules_missed
        );
    }
    if report.ignored_actions > 0 {
        eprintln!(
            "gyr ensemble: {} actions of the rules were not carried out (set, call, sensor and start are not for an ensemble's members)",
            report.ignored_actions
        );
    }
    match &report.map_error {
        Some(e) => Err(Failure {
            code: 1,
            error: anyhow!("{e}"),
        }),
        None => {
            eprintln!(
                "gyr ensemble: map of {members} points ({} computed{}{}) written to {} in {}{}",
                members - left_out,
                if retried > 0 {
                    format!(", {retried} of them on a retry")
                } else {
                    String::new()
                },
                if left_out > 0 {
                    format!(", {left_out} filled")
                } else {
                    String::new()
                },
                args.out.display(),
                fmt_time(report.seconds),
                report
                    .cache_note
                    .as_ref()
                    .map(|c| format!("; {c}"))
                    .unwrap_or_default()
            );
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn failure(e: ensemble::Error) -> Failure {
    match e {
        ensemble::Error::Usage(_) => Failure::input(e),
        e => Failure {
            code: 1,
            error: e.into(),
        },
    }
}

/// A number in 7 significant digits, short.
fn num(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        return format!("{x}");
    }
    let mag = x.abs().log10().floor() as i32;
    if (-4..7).contains(&mag) {
        let decimals = (6 - mag).max(0) as usize;
        let s = format!("{x:.decimals$}");
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_owned()
        } else {
            s
        }
    } else {
        format!("{x:.6e}")
    }
}

fn fmt_time(s: f64) -> String {
    if s < 60.0 {
        format!("{s:.1} s")
    } else {
        format!("{}m{:02}s", (s / 60.0) as u64, (s % 60.0) as u64)
    }
}

fn attempts_text(m: &MemberReport) -> String {
    m.attempts
        .iter()
        .map(|a| a.verdict.name())
        .collect::<Vec<_>>()
        .join(" → ")
}

fn note(m: &MemberReport) -> String {
    let mut parts = Vec::new();
    if let Some(f) = &m.filled {
        parts.push(format!("filled: {f}"));
    }
    for (i, a) in m.attempts.iter().enumerate() {
        if a.verdict != Verdict::Ok {
            parts.push(format!("{}: {}", i + 1, a.why));
        }
    }
    if let Some(d) = &m.dir {
        parts.push(format!("in {}", d.display()));
    }
    parts.join("; ")
}

fn print_table(r: &Report) -> Result<(), Failure> {
    let mut rows: Vec<Vec<String>> = Vec::with_capacity(r.members.len() + 1);
    let mut head = vec![
        "member".to_owned(),
        "status".to_owned(),
        "attempts".to_owned(),
        "time".to_owned(),
    ];
    head.extend(r.results.iter().cloned());
    head.push("note".to_owned());
    rows.push(head);
    for m in &r.members {
        let mut row = vec![
            m.name.clone(),
            m.status.name().to_owned(),
            attempts_text(m),
            fmt_time(m.attempts.iter().map(|a| a.seconds).sum()),
        ];
        match &m.results {
            Some(v) => row.extend(v.iter().map(|x| num(*x))),
            None => row.extend(r.results.iter().map(|_| "-".to_owned())),
        }
        row.push(note(m));
        rows.push(row);
    }
    let cols = rows[0].len();
    let widths: Vec<usize> = (0..cols)
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = std::io::stdout().lock();
    for row in &rows {
        let mut line = String::new();
        for (c, cell) in row.iter().enumerate() {
            if c + 1 == cols {
                line.push_str(cell);
            } else {
                line.push_str(cell);
                line.push_str(&" ".repeat(widths[c] - cell.chars().count() + 2));
            }
        }
        writeln!(out, "{}", line.trim_end())?;
    }
    Ok(())
}

fn report_json(r: &Report) -> serde_json::Value {
    serde_json::json!({
        "cached": false,
        "key": r.key,
        "out": r.out.display().to_string(),
        "map_error": r.map_error,
        "cache": r.cache_note,
        "seconds": r.seconds,
        "rules_missed": r.rules_missed,
        "lost": r.lost,
        "results": r.results,
        "members": r.members.iter().map(|m| serde_json::json!({
            "name": m.name,
            "status": m.status.name(),
            "results": m.results.as_ref().map(|v| r
                .results
                .iter()
                .cloned()
                .zip(v.iter().map(|x| serde_json::json!(x)))
                .collect::<serde_json::Map<String, serde_json::Value>>()),
            "filled": m.filled,
            "last_alert": m.last_alert,
            "dir": m.dir.as_ref().map(|d| d.display().to_string()),
            "attempts": m.attempts.iter().map(|a| serde_json::json!({
                "verdict": a.verdict.name(),
                "why": a.why,
                "seconds": a.seconds,
                "command": a.command,
            })).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    })
}

fn tally_text(t: &Tally) -> String {
    format!(
        "{} done, {} running, {} attempts failed, {} retried, {} left out",
        t.done, t.running, t.failed, t.retried, t.left_out
    )
}

fn ended_text(verdict: Verdict, why: &str, retry: bool, results: Option<&[f64]>) -> String {
    match verdict {
        Verdict::Ok => format!(
            "ok{}",
            results
                .map(|v| format!(
                    ": {}",
                    v.iter().map(|x| num(*x)).collect::<Vec<_>>().join(" ")
                ))
                .unwrap_or_default()
        ),
        v => format!(
            "{} ({why}){}",
            v.name(),
            if retry { ": retrying" } else { ": left out" }
        ),
    }
}

/// Plain lines on stderr, for logs and pipes.
struct Plain {
    members: usize,
    alerts: usize,
    done: usize,
}

impl Plain {
    fn new(members: usize) -> Plain {
        Plain {
            members,
            alerts: 0,
            done: 0,
        }
    }
}

fn alert_line(alerts: &mut usize, name: &str, severity: Severity, message: &str) -> Option<String> {
    if severity < Severity::Warning {
        return None;
    }
    *alerts += 1;
    if *alerts > MAX_ALERT_LINES {
        return (*alerts == MAX_ALERT_LINES + 1)
            .then(|| "gyr ensemble: further alerts are not shown".to_owned());
    }
    let message: String = message
        .lines()
        .next()
        .unwrap_or("")
        .chars()
        .take(300)
        .collect();
    Some(format!("gyr ensemble: {name}: {severity}: {message}"))
}

impl Observer for Plain {
    fn update(&mut self, u: Update<'_>) {
        let line = match u {
            Update::Started {
                name,
                attempt,
                command,
                ..
            } => Some(if attempt == 1 {
                format!("gyr ensemble: {name}: started")
            } else {
                format!("gyr ensemble: {name}: retry: {command}")
            }),
            Update::Ended {
                name,
                verdict,
                why,
                retry,
                results,
                ..
            } => Some(format!(
                "gyr ensemble: {name}: {}",
                ended_text(verdict, why, retry, results)
            )),
            Update::Alert {
                name,
                severity,
                message,
            } => alert_line(&mut self.alerts, name, severity, message),
            Update::Tally(t) => {
                if t.done != self.done {
                    self.done = t.done;
                    Some(format!(
                        "gyr ensemble: {}/{}: {}",
                        t.done,
                        self.members,
                        tally_text(&t)
                    ))
                } else {
                    None
                }
            }
            Update::Progress { .. } => None,
        };
        if let Some(l) = line {
            let _ = writeln!(std::io::stderr().lock(), "{l}");
        }
    }
}

/// indicatif's bars on a terminal: the ensemble's, and one line per running member.
struct Bars {
    multi: MultiProgress,
    overall: ProgressBar,
    running: HashMap<usize, (ProgressBar, usize)>,
    alerts: usize,
}

impl Bars {
    fn new(members: usize) -> Bars {
        let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr());
        let overall = multi.add(ProgressBar::new(members as u64));
        overall.set_style(
            ProgressStyle::with_template(
                "{bar:30.cyan/blue} {pos}/{len} members  {msg}  [{elapsed}]",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        overall.enable_steady_tick(Duration::from_millis(200));
        Bars {
            multi,
            overall,
            running: HashMap::new(),
            alerts: 0,
        }
    }

    fn println(&self, line: &str) {
        let _ = self.multi.println(line);
    }
}

impl Observer for Bars {
    fn update(&mut self, u: Update<'_>) {
        match u {
            Update::Started {
                member,
                name,
                attempt,
                ..
            } => {
                let (bar, _) = self.running.remove(&member).unwrap_or_else(|| {
                    let b = self.multi.add(ProgressBar::new_spinner());
                    b.set_style(
                        ProgressStyle::with_template("  {spinner} {prefix}  {msg}")
                            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
                    );
                    b.enable_steady_tick(Duration::from_millis(120));
                    (b, 1)
                });
                bar.set_prefix(name.to_owned());
                bar.set_message(if attempt > 1 {
                    format!("retry (attempt {attempt}): starting")
                } else {
                    "starting".to_owned()
                });
                self.running.insert(member, (bar, attempt));
            }
            Update::Progress {
                member,
                iter,
                residual,
                ..
            } => {
                if let Some((b, attempt)) = self.running.get(&member) {
                    let mut msg = String::from(if *attempt > 1 {
                        "retry running"
                    } else {
                        "running"
                    });
                    if let Some(i) = iter {
                        msg.push_str(&format!("  iter {i}"));
                    }
                    if let Some((n, v)) = residual {
                        msg.push_str(&format!("  {n} {v:.3e}"));
                    }
                    b.set_message(msg);
                }
            }
            Update::Ended {
                member,
                name,
                verdict,
                why,
                retry,
                results,
                ..
            } => {
                if verdict != Verdict::Ok {
                    self.println(&format!(
                        "{name}: {}",
                        ended_text(verdict, why, retry, results)
                    ));
                }
                if !retry && let Some((b, _)) = self.running.remove(&member) {
                    b.finish_and_clear();
                    self.multi.remove(&b);
                }
            }
            Update::Alert {
                name,
                severity,
                message,
            } => {
                if let Some(l) = alert_line(&mut self.alerts, name, severity, message) {
                    self.println(&l);
                }
            }
            Update::Tally(t) => {
                self.overall.set_position(t.done as u64);
                self.overall.set_message(tally_text(&t));
            }
        }
    }
}

impl Drop for Bars {
    fn drop(&mut self) {
        for (_, (b, _)) in self.running.drain() {
            b.finish_and_clear();
        }
        self.overall.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_short() {
        assert_eq!(num(0.95389816), "0.9538982");
        assert_eq!(num(1.0), "1");
        assert_eq!(num(1.5e-9), "1.500000e-9");
        assert_eq!(num(1234.5), "1234.5");
    }
}
