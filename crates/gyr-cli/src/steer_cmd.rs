//! The steering commands: `gyr ps`, `ls`, `get`, `set`, `call`, `status`, `pause`, `resume`,
//! `step`, `sensors`, `log`, `watch`. Each connects to a program's embedded server.

use crate::Failure;
use crate::client::{Client, block_on, refused};
use clap::{Args, Subcommand};
use gyr::gyr_core::record::Records;
use gyr::gyr_core::value::decode;
use gyr::gyr_core::{Field, FieldType, Schema};
use gyr::server::discovery;
use gyr_proto::v1;
use std::collections::HashMap;
use std::io::Write;
use std::process::ExitCode;

/// How to reach a program.
#[derive(Debug, Args, Clone)]
pub(crate) struct Target {
    /// The program: its pid (see `gyr ps`), or host:port of its TCP listener.
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
        /// N.
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

fn attr_type(t: i32) -> &'static str {
    match v1::AttrType::try_from(t).unwrap_or(v1::AttrType::Unspecified) {
        v1::AttrType::Int => "int",
        v1::AttrType::Uint => "uint",
        v1::AttrType::Float => "float",
        v1::AttrType::Bool => "bool",
        v1::AttrType::Str => "string",
        v1::AttrType::IntList => "[int]",
        v1::AttrType::UintList => "[uint]",
        v1::AttrType::FloatList => "[float]",
        v1::AttrType::BoolList => "[bool]",
        v1::AttrType::Unspecified => "?",
    }
}

fn show(v: &Option<v1::Value>) -> String {
    v.as_ref().map(|v| v.to_string()).unwrap_or_default()
}

pub(crate) fn ps() -> Result<ExitCode, Failure> {
    let found = discovery::discover();
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
        let pid = a.pid.to_string();
        let status = block_on(async {
            let mut c = Client::connect(&pid, None).await.ok()?;
            let r = c.req(v1::StatusRequest {});
            c.inner.status(r).await.ok().map(|r| r.into_inner())
        })?;
        let (state, records, lost) = match status {
            Some(s) => (
                s.state.map(|s| s.text).unwrap_or_default(),
                s.records.to_string(),
                s.lost.to_string(),
            ),
            None => ("(not answering)".into(), String::new(), String::new()),
        };
        let cmd = a.command_line.join(" ");
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
    block_on(async {
        let mut c = Client::connect(&t.program, t.token.clone()).await?;
        let r = c.req(v1::ListObjectsRequest {});
        let reply = c
            .inner
            .list_objects(r)
            .await
            .map_err(|s| refused(&t.program, s))?
            .into_inner();
        let mut out = std::io::stdout().lock();
        if reply.objects.is_empty() && reply.functions.is_empty() {
            writeln!(
                out,
                "program {} has no steering objects or functions registered",
                t.program
            )
            .map_err(w)?;
        }
        for o in &reply.objects {
            let desc = if o.description.is_empty() {
                String::new()
            } else {
                format!("  -- {}", o.description)
            };
            writeln!(
                out,
                "{}{}{desc}",
                o.name,
                if o.is_param { " (parameter)" } else { "" }
            )
            .map_err(w)?;
            for a in &o.attributes {
                let mut notes = Vec::new();
                if !a.unit.is_empty() {
                    notes.push(a.unit.clone());
                }
                if a.has_min || a.has_max {
                    let lo = if a.has_min {
                        a.min.to_string()
                    } else {
                        String::new()
                    };
                    let hi = if a.has_max {
                        a.max.to_string()
                    } else {
                        String::new()
                    };
                    notes.push(format!("{lo}..={hi}"));
                }
                if a.read_only {
                    notes.push("read-only".into());
                }
                if !a.description.is_empty() {
                    notes.push(a.description.clone());
                }
                let path = if o.is_param {
                    o.name.clone()
                } else {
                    format!("{}.{}", o.name, a.name)
                };
                writeln!(
                    out,
                    "  {:<28} {:<8} = {:<16} {}",
                    path,
                    attr_type(a.r#type),
                    show(&a.value),
                    notes.join(", ")
                )
                .map_err(w)?;
            }
            for op in &o.actuators {
                let params: Vec<String> = op
                    .params
                    .iter()
                    .map(|p| format!("{}: {}", p.name, attr_type(p.r#type)))
                    .collect();
                writeln!(
                    out,
                    "  {}.{}({})  [actuator] {}",
                    o.name,
                    op.name,
                    params.join(", "),
                    op.description
                )
                .map_err(w)?;
            }
        }
        for f in &reply.functions {
            let params: Vec<String> = f
                .params
                .iter()
                .map(|p| format!("{}: {}", p.name, attr_type(p.r#type)))
                .collect();
            writeln!(
                out,
                "{}({})  [function] {}",
                f.name,
                params.join(", "),
                f.description
            )
            .map_err(w)?;
        }
        Ok(ExitCode::SUCCESS)
    })?
}

pub(crate) fn get(t: Target, paths: Vec<String>, json: bool) -> Result<ExitCode, Failure> {
    block_on(async {
        let mut c = Client::connect(&t.program, t.token.clone()).await?;
        let r = c.req(v1::GetRequest { paths });
        let reply = c
            .inner
            .get(r)
            .await
            .map_err(|s| refused(&t.program, s))?
            .into_inner();
        let mut out = std::io::stdout().lock();
        if json {
            let m: serde_json::Map<String, serde_json::Value> = reply
                .values
                .iter()
                .map(|p| (p.path.clone(), serde_json::Value::String(show(&p.value))))
                .collect();
            writeln!(out, "{}", serde_json::Value::Object(m)).map_err(w)?;
        } else if reply.values.len() == 1 {
            writeln!(out, "{}", show(&reply.values[0].value)).map_err(w)?;
        } else {
            for p in &reply.values {
                writeln!(out, "{} = {}", p.path, show(&p.value)).map_err(w)?;
            }
        }
        Ok(ExitCode::SUCCESS)
    })?
}

pub(crate) fn set(t: Target, pairs: Vec<String>) -> Result<ExitCode, Failure> {
    if pairs.is_empty() || !pairs.len().is_multiple_of(2) {
        return Err(Failure::input(anyhow::anyhow!(
            "give attribute and value in pairs: gyr set PID object.attribute VALUE [object.attribute VALUE ...]"
        )));
    }
    let writes = pairs
        .chunks(2)
        .map(|p| v1::PathValue {
            path: p[0].clone(),
            value: Some(v1::Value::text(p[1].clone())),
        })
        .collect();
    block_on(async {
        let mut c = Client::connect(&t.program, t.token.clone()).await?;
        let r = c.req(v1::SetRequest { writes });
        let reply = c
            .inner
            .set(r)
            .await
            .map_err(|s| refused(&t.program, s))?
            .into_inner();
        let mut out = std::io::stdout().lock();
        for ch in reply.changes {
            writeln!(out, "{}: {} -> {}", ch.path, show(&ch.old), show(&ch.new)).map_err(w)?;
        }
        Ok(ExitCode::SUCCESS)
    })?
}

pub(crate) fn call(
    t: Target,
    target: String,
    args: Vec<String>,
    timeout_ms: u32,
) -> Result<ExitCode, Failure> {
    block_on(async {
        let mut c = Client::connect(&t.program, t.token.clone()).await?;
        let r = c.req(v1::CallRequest {
            target,
            args: args.into_iter().map(v1::Value::text).collect(),
            timeout_ms,
        });
        let reply = c
            .inner
            .call(r)
            .await
            .map_err(|s| refused(&t.program, s))?
            .into_inner();
        writeln!(std::io::stdout(), "{}", show(&reply.result)).map_err(w)?;
        Ok(ExitCode::SUCCESS)
    })?
}

fn print_status(s: &v1::StatusReply) -> Result<(), Failure> {
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "program {}: {}",
        s.pid,
        s.state.as_ref().map(|x| x.text.as_str()).unwrap_or("?")
    )
    .map_err(w)?;
    writeln!(out, "  command   {}", s.command_line.join(" ")).map_err(w)?;
    writeln!(out, "  events    {} recorded, {} lost", s.records, s.lost).map_err(w)?;
    for (name, n) in &s.synch_points {
        writeln!(out, "  synch point {name}: reached {n} times while steered").map_err(w)?;
    }
    Ok(())
}

pub(crate) fn control(
    t: Target,
    action: v1::control_request::Action,
    steps: u64,
) -> Result<ExitCode, Failure> {
    block_on(async {
        let mut c = Client::connect(&t.program, t.token.clone()).await?;
        let reply = if action == v1::control_request::Action::Unspecified {
            let r = c.req(v1::StatusRequest {});
            c.inner.status(r).await
        } else {
            let r = c.req(v1::ControlRequest {
                action: action as i32,
                steps,
            });
            c.inner.control(r).await
        }
        .map_err(|s| refused(&t.program, s))?
        .into_inner();
        print_status(&reply)?;
        Ok(ExitCode::SUCCESS)
    })?
}

pub(crate) fn sensors(
    t: Target,
    change: Option<SensorChange>,
    type_name: Option<String>,
    instance: Option<String>,
) -> Result<ExitCode, Failure> {
    use v1::sensor_control_request::Scope;
    block_on(async {
        let mut c = Client::connect(&t.program, t.token.clone()).await?;
        let reply = match change {
            None => {
                let r = c.req(v1::ListSensorsRequest {});
                c.inner.list_sensors(r).await
            }
            Some(ch) => {
                let (scope, name) = match (type_name, instance) {
                    (Some(t), None) => (Scope::Type, t),
                    (None, Some(i)) => (Scope::Instance, i),
                    (None, None) => (Scope::Global, String::new()),
                    (Some(_), Some(_)) => {
                        return Err(Failure::input(anyhow::anyhow!(
                            "give --type or --instance, not both"
                        )));
                    }
                };
                let mut req = v1::SensorControlRequest {
                    scope: scope as i32,
                    name,
                    ..Default::default()
                };
                match ch {
                    SensorChange::On => req.enabled = Some(true),
                    SensorChange::Off => req.enabled = Some(false),
                    SensorChange::Every { n } => req.every_nth = Some(n),
                    SensorChange::Rate { per_second } => req.per_second = Some(per_second),
                    SensorChange::All => req.every_nth = Some(1),
                }
                let r = c.req(req);
                c.inner.sensor_control(r).await
            }
        }
        .map_err(|s| refused(&t.program, s))?
        .into_inner();
        let mut out = std::io::stdout().lock();
        writeln!(
            out,
            "{:<28} {:<18} {:<9} {:<8} {:<12} {:>10}",
            "TYPE", "INSTANCE", "KIND", "STATE", "RATE", "SKIPPED"
        )
        .map_err(w)?;
        for s in reply.sensors {
            let state = if s.active {
                "on"
            } else if s.enabled {
                "idle"
            } else {
                "off"
            };
            writeln!(
                out,
                "{:<28} {:<18} {:<9} {:<8} {:<12} {:>10}",
                s.type_name, s.instance, s.kind, state, s.rate, s.skipped
            )
            .map_err(w)?;
        }
        Ok(ExitCode::SUCCESS)
    })?
}

pub(crate) fn log(t: Target, follow: bool) -> Result<ExitCode, Failure> {
    block_on(async {
        let mut c = Client::connect(&t.program, t.token.clone()).await?;
        let r = c.req(v1::LogRequest { after: 0, follow });
        let mut stream = c
            .inner
            .log(r)
            .await
            .map_err(|s| refused(&t.program, s))?
            .into_inner();
        let mut out = std::io::stdout().lock();
        while let Some(e) = stream.message().await.map_err(|s| refused(&t.program, s))? {
            let err = if e.error.is_empty() {
                String::new()
            } else {
                format!("  REFUSED: {}", e.error)
            };
            writeln!(
                out,
                "{:>6} {:>12.6}s  {:<28} {}{err}",
                e.seq,
                e.time_ns as f64 / 1e9,
                e.who,
                e.action
            )
            .map_err(w)?;
            out.flush().map_err(w)?;
        }
        Ok(ExitCode::SUCCESS)
    })?
}

fn field_type(s: &str) -> FieldType {
    FieldType::parse(s).unwrap_or(FieldType::Bytes)
}

pub(crate) fn watch(
    t: Target,
    types: Vec<String>,
    threads: Vec<u64>,
    json: bool,
    limit: Option<u64>,
) -> Result<ExitCode, Failure> {
    block_on(async {
        let mut c = Client::connect(&t.program, t.token.clone()).await?;
        let r = c.req(v1::SubscribeRequest { types, threads });
        let mut stream = c
            .inner
            .subscribe(r)
            .await
            .map_err(|s| refused(&t.program, s))?
            .into_inner();
        let mut schemas: HashMap<u32, Schema> = HashMap::new();
        let mut names: HashMap<u64, String> = HashMap::new();
        let mut out = std::io::stdout().lock();
        let mut printed = 0u64;
        while let Some(batch) = stream.message().await.map_err(|s| refused(&t.program, s))? {
            for s in batch.schemas {
                let fields = s
                    .fields
                    .iter()
                    .map(|f| Field::new(f.name.clone(), field_type(&f.r#type)))
                    .collect();
                if let Ok(schema) = Schema::new(s.id, s.name, fields) {
                    schemas.insert(schema.id, schema);
                }
            }
            for th in batch.threads {
                names.insert(th.id, th.name);
            }
            if batch.lost > 0 {
                if json {
                    writeln!(out, "{}", serde_json::json!({ "lost": batch.lost })).map_err(w)?;
                } else {
                    writeln!(
                        out,
                        "-- {} events not shown: this client fell behind --",
                        batch.lost
                    )
                    .map_err(w)?;
                }
            }
            for block in batch.blocks {
                for r in Records::new(block.thread, &block.records).flatten() {
                    let Some(s) = schemas.get(&r.header.type_id) else {
                        continue;
                    };
                    let values = decode(s, r.payload).unwrap_or_default();
                    if json {
                        let fields: serde_json::Map<String, serde_json::Value> = s
                            .fields
                            .iter()
                            .zip(&values)
                            .map(|(f, v)| {
                                (f.name.clone(), serde_json::Value::String(v.to_string()))
                            })
                            .collect();
                        writeln!(
                            out,
                            "{}",
                            serde_json::json!({"t_ns": r.header.timestamp, "thread": block.thread, "type": s.name, "fields": fields})
                        )
                        .map_err(w)?;
                    } else {
                        let body: Vec<String> = s
                            .fields
                            .iter()
                            .zip(&values)
                            .map(|(f, v)| format!("{}: {v}", f.name))
                            .collect();
                        let tn = names.get(&block.thread).map(String::as_str).unwrap_or("");
                        writeln!(
                            out,
                            "{:>14.9}  {:<12} {} {{ {} }}",
                            r.header.timestamp as f64 / 1e9,
                            tn,
                            s.name,
                            body.join(", ")
                        )
                        .map_err(w)?;
                    }
                    printed += 1;
                    if limit.is_some_and(|l| printed >= l) {
                        return Ok(ExitCode::SUCCESS);
                    }
                }
            }
            out.flush().map_err(w)?;
        }
        Ok(ExitCode::SUCCESS)
    })?
}
