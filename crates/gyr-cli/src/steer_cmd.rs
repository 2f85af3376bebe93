//! The one-shot steering commands: `gyr ps`, `ls`, `get`, `set`, `call`, `status`, `pause`,
//! `resume`, `step`, `run-until`, `sensors`, `log`, `watch`. Each connects to a program's
//! embedded server, does one thing and exits.

use crate::Failure;
use crate::client::Session;
use crate::show;
use clap::{Args, Subcommand};
use gyr_client::command::{self, SensorScope, SensorSetting};
use gyr_client::discovery;
use gyr_proto::v1;
use std::io::Write;
use std::process::ExitCode;

/// How to reach a program.
#[derive(Debug, Args, Clone)]
pub(crate) struct Target {
    /// The program: its pid (see `gyr ps`), host:port of its TCP listener, or PID@HUB for a
    /// program behind a hub (HUB: the hub's gRPC host:port; see `gyr ps --hub HUB`).
    pub(crate) program: String,
    /// The token for a TCP listener (default: $GYR_TOKEN).
    #[arg(long, global = true)]
    pub(crate) token: Option<String>,
}

/// What `gyr sensors` changes.
#[derive(Debug, Subcommand, Clone)]
pub(crate) enum SensorChange {
    /// Switch on.
    On,
    /// Switch off.
    Off,
    /// Record one event in N.
    Every {
        /// N (1 or more).
        n: u32,
    },
    /// At most R events per second.
    Rate {
        /// R.
        per_second: f64,
    },
    /// Record every event (no rate limit).
    All,
}

fn w(e: std::io::Error) -> Failure {
    Failure::from(anyhow::Error::from(e).context("writing to stdout"))
}

fn print(text: &str) -> Result<(), Failure> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes()).map_err(w)?;
    out.flush().map_err(w)
}

impl Target {
    fn session(&self) -> Result<Session, Failure> {
        Session::connect(&self.program, self.token.clone(), "gyr-cli").map_err(Failure::from)
    }
}

/// `gyr ps --hub ADDR`: the programs a hub watches.
pub(crate) fn ps_hub(hub: &str, token: Option<String>) -> Result<ExitCode, Failure> {
    let mut s = Session::connect(hub, token, "gyr-cli")?;
    if !s.hello.hub {
        return Err(Failure::input(anyhow::anyhow!(
            "{hub} is a program's server, not a hub: `gyr ps` lists programs on this machine"
        )));
    }
    let ps = s.processes()?;
    let mut out = std::io::stdout().lock();
    if ps.is_empty() {
        writeln!(out, "the hub at {hub} watches no programs yet").map_err(w)?;
        return Ok(ExitCode::SUCCESS);
    }
    writeln!(
        out,
        "{:>8}  {:<9} {:<8} {:>12} {:>6}  COMMAND",
        "PID", "STATE", "SOURCE", "EVENTS", "LOST"
    )
    .map_err(w)?;
    for p in ps {
        writeln!(
            out,
            "{:>8}  {:<9} {:<8} {:>12} {:>6}  {}",
            p.pid,
            if p.alive { "running" } else { "ended" },
            show::printable(&p.source),
            p.events,
            p.lost,
            show::command_line(&p.command_line)
        )
        .map_err(w)?;
    }
    writeln!(
        out,
        "steer one through the hub as PID@{hub}, for example `gyr status PID@{hub}`"
    )
    .map_err(w)?;
    Ok(ExitCode::SUCCESS)
}

/// `gyr alerts --hub ADDR`: the alerts a hub keeps, oldest first.
pub(crate) fn alerts(
    hub: &str,
    token: Option<String>,
    pid: Option<u32>,
    limit: u32,
    json: bool,
) -> Result<ExitCode, Failure> {
    let mut s = hub_session(hub, token)?;
    let alerts = s.alerts(pid.unwrap_or(0), limit)?;
    let mut out = std::io::stdout().lock();
    if json {
        for a in &alerts {
            let line = serde_json::json!({
                "pid": a.pid,
                "unix_ns": a.unix_ns,
                "severity": a.severity,
                "message": a.message,
                "rule": a.rule,
            });
            writeln!(out, "{line}").map_err(w)?;
        }
        return Ok(ExitCode::SUCCESS);
    }
    if alerts.is_empty() {
        writeln!(out, "the hub at {hub} has no alerts").map_err(w)?;
        return Ok(ExitCode::SUCCESS);
    }
    writeln!(
        out,
        "{:<24} {:>8}  {:<8}  {:<32}  MESSAGE",
        "TIME (UTC)", "PID", "SEVERITY", "RULE"
    )
    .map_err(w)?;
    for a in alerts {
        writeln!(
            out,
            "{:<24} {:>8}  {:<8}  {:<32}  {}",
            show::utc(a.unix_ns),
            a.pid,
            show::printable(&a.severity),
            show::printable(&a.rule),
            show::printable(&a.message)
        )
        .map_err(w)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `gyr rules list PROGRAM` or `gyr rules list --hub ADDR`: the rules a program or a hub runs
/// and their state.
pub(crate) fn rules(
    program: Option<String>,
    hub: Option<String>,
    token: Option<String>,
    json: bool,
) -> Result<ExitCode, Failure> {
    let (mut s, server) = match (program, hub) {
        (Some(p), None) => {
            let s = Session::connect(&p, token, "gyr-cli")?;
            (s, format!("program {p}"))
        }
        (None, Some(h)) => (hub_session(&h, token)?, format!("the hub at {h}")),
        _ => {
            return Err(Failure::input(anyhow::anyhow!(
                "give a program (PID, host:port or PID@HUB) or --hub ADDR, not both"
            )));
        }
    };
    let on_hub = s.hello.hub;
    let r = s.rules()?;
    let mut out = std::io::stdout().lock();
    if json {
        let rules: Vec<_> = r
            .rules
            .iter()
            .map(|x| {
                serde_json::json!({
                    "name": x.name, "on": x.on, "when": x.when, "fired": x.fired,
                    "last_fired_unix_ns": x.last_fired_unix_ns, "last_pid": x.last_pid,
                    "errors": x.errors, "last_error": x.last_error,
                })
            })
            .collect();
        let v = serde_json::json!({
            "origin": r.origin, "loaded_unix_ns": r.loaded_unix_ns,
            "load_error": r.load_error, "events_missed": r.events_missed, "rules": rules,
        });
        writeln!(out, "{v}").map_err(w)?;
        return Ok(ExitCode::SUCCESS);
    }
    if r.origin.is_empty() || (!on_hub && r.rules.is_empty() && r.loaded_unix_ns == 0) {
        let how = if on_hub {
            "start it with `gyr hub --rules FILE`"
        } else {
            "start it with GYR_RULES=FILE (or gyr::Builder::rules), or run them in a hub"
        };
        writeln!(out, "{server} runs no rules: {how}").map_err(w)?;
        return Ok(ExitCode::SUCCESS);
    }
    if r.loaded_unix_ns == 0 {
        writeln!(out, "rules of {}", show::printable(&r.origin)).map_err(w)?;
    } else {
        writeln!(
            out,
            "rules from {} (loaded {})",
            show::printable(&r.origin),
            show::utc(r.loaded_unix_ns)
        )
        .map_err(w)?;
    }
    if r.events_missed > 0 {
        writeln!(
            out,
            "the rules missed {} events: their queue was full (the events were still recorded)",
            r.events_missed
        )
        .map_err(w)?;
    }
    if !r.load_error.is_empty() {
        writeln!(
            out,
            "the file's latest version was refused; the rules below go on:\n  {}",
            show::printable(&r.load_error)
        )
        .map_err(w)?;
    }
    writeln!(
        out,
        "{:<32} {:<24} {:>7} {:<24} {:>8} {:>6}  LAST ERROR",
        "RULE", "ON", "FIRED", "LAST FIRED (UTC)", "PID", "ERRORS"
    )
    .map_err(w)?;
    for x in &r.rules {
        writeln!(
            out,
            "{:<32} {:<24} {:>7} {:<24} {:>8} {:>6}  {}",
            show::printable(&x.name),
            if x.on.is_empty() {
                "(facts)".into()
            } else {
                show::printable(&x.on)
            },
            x.fired,
            if x.last_fired_unix_ns == 0 {
                "-".into()
            } else {
                show::utc(x.last_fired_unix_ns)
            },
            if x.last_pid == 0 {
                "-".into()
            } else {
                x.last_pid.to_string()
            },
            x.errors,
            show::printable(&x.last_error)
        )
        .map_err(w)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// A session with the hub at `hub`, refused with a clear message when it is a program's server.
fn hub_session(hub: &str, token: Option<String>) -> Result<Session, Failure> {
    let s = Session::connect(hub, token, "gyr-cli")?;
    if !s.hello.hub {
        return Err(Failure::input(anyhow::anyhow!(
            "{hub} is a program's server, not a hub: give the address `gyr hub` printed"
        )));
    }
    Ok(s)
}

pub(crate) fn ps() -> Result<ExitCode, Failure> {
    let found = discovery::discover().map_err(|e| Failure::from(anyhow::Error::new(e)))?;
    let mut out = std::io::stdout().lock();
    if found.is_empty() {
        writeln!(
            out,
            "no gyr programs are running (looked in {})",
            discovery::socket_dir().display()
        )
        .map_err(w)?;
        return Ok(ExitCode::SUCCESS);
    }
    writeln!(
        out,
        "{:>8}  {:<34} {:>10} {:>6}  COMMAND",
        "PID", "STATE", "RECORDS", "LOST"
    )
    .map_err(w)?;
    for a in found {
        let status = Session::connect(&a.pid.to_string(), None, "gyr-cli")
            .and_then(|mut s| s.status())
            .ok();
        let (state, records, lost) = match status {
            Some(s) => (
                s.state
                    .map(|s| show::printable(&s.text).into_owned())
                    .unwrap_or_default(),
                s.records.to_string(),
                s.lost.to_string(),
            ),
            None => ("(not answering)".into(), String::new(), String::new()),
        };
        let cmd = show::command_line(&a.command_line);
        let tcp = a.tcp.map(|t| format!("  [tcp {t}]")).unwrap_or_default();
        writeln!(
            out,
            "{:>8}  {:<34} {:>10} {:>6}  {cmd}{tcp}",
            a.pid, state, records, lost
        )
        .map_err(w)?;
    }
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn ls(t: Target) -> Result<ExitCode, Failure> {
    let mut s = t.session()?;
    let reply = s.list()?;
    print(&show::objects(&reply, &t.program))?;
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn get(t: Target, paths: Vec<String>, json: bool) -> Result<ExitCode, Failure> {
    let values = t.session()?.get(paths)?;
    if json {
        let m: serde_json::Map<String, serde_json::Value> = values
            .iter()
            .map(|p| {
                (
                    p.path.clone(),
                    serde_json::Value::String(show::value_for_json(&p.value)),
                )
            })
            .collect();
        print(&format!("{}\n", serde_json::Value::Object(m)))?;
    } else if values.len() == 1 {
        print(&format!("{}\n", show::value(&values[0].value)))?;
    } else {
        for p in &values {
            print(&format!(
                "{} = {}\n",
                show::printable(&p.path),
                show::value(&p.value)
            ))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn set(t: Target, pairs: Vec<String>) -> Result<ExitCode, Failure> {
    let writes = command::set_request(&pairs)?.writes;
    let changes = t.session()?.set(writes)?;
    print(&show::changes(&changes))?;
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn call(
    t: Target,
    target: String,
    args: Vec<String>,
    timeout_ms: u32,
) -> Result<ExitCode, Failure> {
    let args = args.into_iter().map(v1::Value::text).collect();
    let result = t.session()?.call(target, args, timeout_ms)?;
    print(&format!("{result}\n"))?;
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn control(t: Target, req: Option<v1::ControlRequest>) -> Result<ExitCode, Failure> {
    let mut s = t.session()?;
    let reply = match req {
        None => s.status()?,
        Some(r) => s.control(r)?,
    };
    print(&show::status(&reply))?;
    Ok(ExitCode::SUCCESS)
}

impl From<SensorChange> for SensorSetting {
    fn from(c: SensorChange) -> SensorSetting {
        match c {
            SensorChange::On => SensorSetting::On,
            SensorChange::Off => SensorSetting::Off,
            SensorChange::All => SensorSetting::All,
            SensorChange::Every { n } => SensorSetting::Every(n),
            SensorChange::Rate { per_second } => SensorSetting::Rate(per_second),
        }
    }
}

pub(crate) fn sensors(
    t: Target,
    change: Option<SensorChange>,
    type_name: Option<String>,
    instance: Option<String>,
) -> Result<ExitCode, Failure> {
    let mut s = t.session()?;
    let reply = match change {
        None => s.sensors()?,
        Some(ch) => {
            let scope = match (type_name, instance) {
                (Some(t), None) => SensorScope::Type(t),
                (None, Some(i)) => SensorScope::Instance(i),
                (None, None) => SensorScope::All,
                (Some(_), Some(_)) => {
                    return Err(Failure::input(anyhow::anyhow!(
                        "give --type or --instance, not both"
                    )));
                }
            };
            s.sensor_control(command::sensor_request(&scope, ch.into())?)?
        }
    };
    print(&show::sensors(&reply))?;
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn log(t: Target, follow: bool) -> Result<ExitCode, Failure> {
    let mut s = t.session()?;
    let mut stream = s.log(0, follow)?;
    while let Some(e) = s.next(&mut stream)? {
        print(&format!("{}\n", show::log_entry(&e)))?;
    }
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn watch(
    t: Target,
    types: Vec<String>,
    threads: Vec<u64>,
    json: bool,
    limit: Option<u64>,
) -> Result<ExitCode, Failure> {
    let mut s = t.session()?;
    let mut stream = s.subscribe(types, threads)?;
    let mut decoder = show::EventDecoder::default();
    let mut printed = 0u64;
    while let Some(batch) = s.next(&mut stream)? {
        let batch = decoder.batch(batch);
        let mut text = String::new();
        if batch.lost > 0 {
            if json {
                text += &format!("{}\n", serde_json::json!({ "lost": batch.lost }));
            } else {
                text += &format!(
                    "-- {} events not shown: this client fell behind --\n",
                    batch.lost
                );
            }
        }
        if batch.unreadable > 0 {
            if json {
                text += &format!(
                    "{}\n",
                    serde_json::json!({ "unreadable": batch.unreadable })
                );
            } else {
                text += &format!(
                    "-- {} events not shown: their type was never described to this client --\n",
                    batch.unreadable
                );
            }
        }
        for e in &batch.events {
            text += &if json {
                show::event_json(e)
            } else {
                show::event_line(e)
            };
            text.push('\n');
            printed += 1;
            if limit.is_some_and(|l| printed >= l) {
                print(&text)?;
                return Ok(ExitCode::SUCCESS);
            }
        }
        print(&text)?;
    }
    Ok(ExitCode::SUCCESS)
}
