//! `gyr rules test RULES TRACE...`: replays recorded traces through an expert-system rules
//! file (`gyr_rules::rules`) and prints every firing with why and what it asked for, then
//! each rule's counters; `gyr rules check RULES` loads a file and lists what each rule
//! watches. A rules file that does not load is exit code 2, with its file, line and column.
//!
//! Several traces are merged by wall-clock time (each file's start plus its records' times),
//! one program per file; times printed are seconds from the earliest start. The records are
//! read into memory and sorted first, as a file's threads are not written in time order.

use crate::Failure;
use crate::show::{printable, value_json};
use anyhow::anyhow;
use clap::Args;
use gyr_core::trace::{Item, TraceReader};
use gyr_core::value::decode;
use gyr_core::{Schema, Value};
use gyr_rules::{Action, Engine, EventRef, Firing, RuleSet};
use serde_json::json;
use std::collections::HashMap;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `gyr rules test`.
#[derive(Debug, Args)]
pub(crate) struct TestArgs {
    /// The rules file (TOML; see docs/rules.md).
    rules: PathBuf,
    /// Trace files to replay through the rules (several are merged in time order).
    #[arg(required = true)]
    traces: Vec<PathBuf>,
    /// One JSON object per firing (JSON lines), then the summary.
    #[arg(long)]
    json: bool,
}

/// Arguments of `gyr rules check`.
#[derive(Debug, Args)]
pub(crate) struct CheckArgs {
    /// The rules file.
    rules: PathBuf,
}

fn load(path: &std::path::Path) -> Result<RuleSet, Failure> {
    RuleSet::load(path).map_err(|e| Failure::input(anyhow!("{}", printable(&e.to_string()))))
}

/// `gyr rules check RULES`.
pub(crate) fn check(args: CheckArgs) -> Result<ExitCode, Failure> {
    let set = load(&args.rules)?;
    let out = std::io::stdout();
    let mut out = BufWriter::new(out.lock());
    for r in set.info() {
        let watches = match &r.on {
            Some(on) => match &r.per {
                Some(per) => format!("on {on} per {per}"),
                None => format!("on {on}"),
            },
            None => "on facts".to_owned(),
        };
        let mut notes = Vec::new();
        if r.salience != 0 {
            notes.push(format!("salience {}", r.salience));
        }
        if r.repeat {
            notes.push("repeat".to_owned());
        }
        if let Some(t) = &r.target {
            notes.push(format!("target {t}"));
        }
        if !r.windows.is_empty() {
            let w: Vec<String> = r.windows.iter().map(|(f, k)| format!("{f}[{k}]")).collect();
            notes.push(format!("windows {}", w.join(" ")));
        }
        notes.push(if r.native { "native" } else { "rhai" }.to_owned());
        writeln!(
            out,
            "{:<24} {:<32} when {}  ({})",
            printable(&r.name),
            printable(&watches),
            printable(&r.when),
            notes.join(", ")
        )?;
    }
    writeln!(out, "{}: {} rules, valid", args.rules.display(), set.len())?;
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// One record to replay.
struct Rec {
    /// Wall-clock ns (the file's start plus the record's time).
    at: u128,
    t_ns: u64,
    file: usize,
    schema: usize,
    payload: Vec<u8>,
}

/// A trace file's program.
struct Prog {
    pid: u32,
    name: String,
    schemas: Vec<Schema>,
}

fn action_json(a: &Action) -> serde_json::Value {
    let fields = |f: &[(String, Value)]| {
        serde_json::Value::Object(f.iter().map(|(k, v)| (k.clone(), value_json(v))).collect())
    };
    match a {
        Action::Alert { severity, message } => {
            json!({"action": "alert", "severity": severity.as_str(), "message": message})
        }
        Action::Assert { name, fields: f } => {
            json!({"action": "assert", "name": name, "fields": fields(f)})
        }
        Action::Retract { name, fields: f } => {
            json!({"action": "retract", "name": name, "fields": f.as_deref().map(fields)})
        }
        Action::Set { path, value } => {
            json!({"action": "set", "path": path, "value": value_json(value)})
        }
        Action::Call { path, args } => json!({
            "action": "call", "path": path,
            "args": args.iter().map(value_json).collect::<Vec<_>>()
        }),
        Action::Sensor {
            name,
            enabled,
            rate,
        } => json!({"action": "sensor", "name": name, "enabled": enabled, "rate": rate}),
        Action::Start => json!({"action": "start"}),
        Action::Stop => json!({"action": "stop"}),
        Action::Restart { args } => json!({"action": "restart", "args": args}),
        Action::Signal { signal } => json!({"action": "signal", "signal": signal}),
        Action::Control { line } => json!({"action": "control", "line": line}),
        Action::SetInput { file, key, value } => {
            json!({"action": "set_input", "file": file, "key": key, "value": value})
        }
        other => json!({"action": other.to_string()}),
    }
}

fn firing_line(f: &Firing, start: u128, at: u128) -> String {
    let secs = at.saturating_sub(start) as f64 / 1e9;
    let actions: Vec<String> = f.actions.iter().map(|a| a.to_string()).collect();
    let target = f
        .target
        .as_deref()
        .map(|t| format!(" (target {t})"))
        .unwrap_or_default();
    let line = format!(
        "{secs:>12.6}s  {}[{}]  {}: {}{}{}{target}",
        f.program,
        f.pid,
        f.rule,
        f.why,
        if actions.is_empty() { "" } else { "  => " },
        actions.join("; ")
    );
    printable(&line).into_owned()
}

/// `gyr rules test RULES TRACE...`.
pub(crate) fn test(args: TestArgs) -> Result<ExitCode, Failure> {
    let set = load(&args.rules)?;
    let mut progs: Vec<Prog> = Vec::new();
    let mut recs: Vec<Rec> = Vec::new();
    let mut damaged = false;
    for (fi, path) in args.traces.iter().enumerate() {
        let mut reader = TraceReader::open(path).map_err(|e| {
            Failure::input(anyhow!(
                "{e}; `gyr rules test` replays gyr trace files (written by a program with GYR_TRACE, or `gyr hub --record`)"
            ))
        })?;
        let header = reader.header().clone();
        let start = u128::from(header.start_unix_ns);
        let name = header
            .command_line
            .first()
            .map(|c| c.rsplit('/').next().unwrap_or(c).to_owned())
            .filter(|c| !c.is_empty())
            .unwrap_or_else(|| format!("pid{}", header.pid));
        let mut pid = header.pid;
        while progs.iter().any(|p| p.pid == pid) {
            // Two files of the same pid (two runs): keep them apart.
            pid = pid.wrapping_add(1 << 22);
        }
        let mut schemas: Vec<Schema> = Vec::new();
        let mut index: HashMap<u32, usize> = HashMap::new();
        reader.for_each_item(|item| {
            if let Item::Record {
                schema: Some(s),
                record,
            } = item
            {
                let si = *index.entry(s.id).or_insert_with(|| {
                    schemas.push(s.clone());
                    schemas.len() - 1
                });
                if !schemas[si].same_shape(s) {
                    // A schema id described again differently: keep the latest.
                    schemas[si] = s.clone();
                }
                recs.push(Rec {
                    at: start + u128::from(record.header.timestamp),
                    t_ns: record.header.timestamp,
                    file: fi,
                    schema: si,
                    payload: record.payload.to_vec(),
                });
            }
        });
        let summary = reader.summary();
        for d in &summary.damage {
            eprintln!("gyr: warning: {}: {d}", path.display());
        }
        damaged |= summary.is_corrupt();
        progs.push(Prog { pid, name, schemas });
    }
    let starts: Vec<u128> = recs.iter().map(|r| r.at - u128::from(r.t_ns)).collect();
    let start = starts.iter().copied().min().unwrap_or(0);
    // Stable: records of one time keep their file order.
    recs.sort_by_key(|r| r.at);

    let mut engine = Engine::new(set);
    let out = std::io::stdout();
    let mut out = BufWriter::new(out.lock());
    let (mut events, mut undecodable, mut firings) = (0u64, 0u64, 0u64);
    for r in &recs {
        let prog = &progs[r.file];
        let schema = &prog.schemas[r.schema];
        let Ok(values) = decode(schema, &r.payload) else {
            undecodable += 1;
            continue;
        };
        events += 1;
        for f in engine.event(&EventRef {
            pid: prog.pid,
            program: &prog.name,
            t_ns: r.t_ns,
            schema,
            values: &values,
        }) {
            firings += 1;
            if args.json {
                let j = json!({
                    "t": r.at.saturating_sub(start) as f64 / 1e9,
                    "t_ns": f.t_ns,
                    "pid": f.pid,
                    "program": f.program,
                    "rule": f.rule,
                    "why": f.why,
                    "actions": f.actions.iter().map(action_json).collect::<Vec<_>>(),
                    "target": f.target,
                });
                writeln!(out, "{j}")?;
            } else {
                writeln!(out, "{}", firing_line(&f, start, r.at))?;
            }
        }
    }
    let states = engine.rules();
    if args.json {
        let rules: Vec<serde_json::Value> = states
            .iter()
            .map(|s| {
                json!({
                    "rule": s.name, "on": s.on, "fired": s.fired, "errors": s.errors,
                    "last_error": s.last_error,
                    "last_firing_t_ns": s.last_firing.as_ref().map(|l| l.t_ns),
                })
            })
            .collect();
        let j = json!({"summary": {
            "events": events, "undecodable": undecodable, "firings": firings,
            "facts": engine.facts(None).len(), "rules": rules,
        }});
        writeln!(out, "{j}")?;
    } else {
        writeln!(
            out,
            "\n{events} events from {} trace(s), {firings} firings{}",
            args.traces.len(),
            if undecodable > 0 {
                format!(", {undecodable} records that do not decode (skipped)")
            } else {
                String::new()
            }
        )?;
        writeln!(
            out,
            "{:<24} {:<24} {:>8} {:>8}  last error",
            "rule", "on", "fired", "errors"
        )?;
        for s in &states {
            let line = format!(
                "{:<24} {:<24} {:>8} {:>8}  {}",
                s.name,
                s.on.as_deref().unwrap_or("(facts)"),
                s.fired,
                s.errors,
                s.last_error.as_deref().unwrap_or("")
            );
            writeln!(out, "{}", printable(&line))?;
        }
    }
    out.flush()?;
    Ok(if damaged {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    })
}
