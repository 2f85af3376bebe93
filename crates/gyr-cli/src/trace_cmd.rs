//! `gyr trace stats` and `gyr trace dump`.

use crate::Failure;
use crate::show::{command_line, printable};
use anyhow::Context;
use clap::Args;
use gyr_core::record::RecordHeader;
use gyr_core::trace::{Item, ReadSummary, TraceReader};
use gyr_core::value::decode;
use gyr_core::{LOST_EVENT_NAME, Schema, Value};
use gyr_trace::{CausalStream, Released};
use std::collections::{BTreeMap, HashMap};
use std::io::{BufWriter, Write};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::str::FromStr;

/// A time in a trace: ns since the traced process's timestamp 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Time(pub(crate) u64);

impl FromStr for Time {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim();
        let split = s.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(s.len());
        let (num, unit) = s.split_at(split);
        let scale = match unit {
            "" | "s" => 1e9,
            "ms" => 1e6,
            "us" | "µs" => 1e3,
            "ns" => 1.0,
            _ => {
                return Err(format!(
                    "unknown unit `{unit}` in `{s}`: use s, ms, us or ns (e.g. 1.5s)"
                ));
            }
        };
        let v: f64 = num.parse().map_err(|_| {
            format!("`{s}` is not a time: write a number and a unit, such as 1.5s or 200ms")
        })?;
        if !(v >= 0.0 && v.is_finite()) {
            return Err(format!(
                "`{s}` is not a time at or after the start of the trace"
            ));
        }
        Ok(Time((v * scale).round() as u64))
    }
}

/// Arguments of `gyr trace stats`.
#[derive(Debug, Args)]
pub(crate) struct StatsArgs {
    /// The trace file.
    file: PathBuf,
    /// Print one JSON object instead of tables.
    #[arg(long)]
    json: bool,
    /// Also show each thread's span with the time monitoring took removed, following the
    /// causes between threads (Falcon's perturbation analysis).
    #[arg(long)]
    correct: bool,
}

/// Arguments of `gyr trace dump`.
#[derive(Debug, Args)]
pub(crate) struct DumpArgs {
    /// The trace file; several files (one process each) are merged into one stream in time
    /// order, placed by their wall-clock starts, or on one clock with --sync.
    #[arg(required = true)]
    pub(crate) files: Vec<PathBuf>,
    /// Only records of this event type (repeat for several).
    #[arg(long = "type", value_name = "TYPE")]
    pub(crate) types: Vec<String>,
    /// Only records of this thread (gyr's thread id, as `trace stats` lists it).
    #[arg(long, value_name = "N")]
    pub(crate) thread: Option<u64>,
    /// Only records at or after this time (1.5s, 200ms, 30us, 100ns; a bare number is seconds).
    #[arg(long, value_name = "T0")]
    pub(crate) from: Option<Time>,
    /// Only records at or before this time.
    #[arg(long, value_name = "T1")]
    pub(crate) to: Option<Time>,
    /// One JSON object per line.
    #[arg(long)]
    pub(crate) json: bool,
    /// Stop after this many records.
    #[arg(long, value_name = "N")]
    pub(crate) limit: Option<u64>,
    /// Put every event after its causes (Falcon's ordering filter): the order in which the
    /// threads' events happened, rather than the order the monitors wrote them.
    #[arg(long)]
    pub(crate) ordered: bool,
    /// Remove from each thread's timeline the time monitoring took; implies --ordered.
    #[arg(long)]
    pub(crate) correct: bool,
    /// Merge the files on the reference process's clock, estimated from the messages between
    /// them (see `gyr trace clock`): no receive before its send.
    #[arg(long)]
    pub(crate) sync: bool,
    #[command(flatten)]
    pub(crate) sync_args: crate::trace_clock::SyncArgs,
}

fn open(path: &Path) -> Result<TraceReader<std::io::BufReader<std::fs::File>>, Failure> {
    TraceReader::open(path).map_err(Failure::input)
}

/// Reports damage on stderr; returns the exit code the command should end with.
fn report_damage(path: &Path, summary: &ReadSummary) -> ExitCode {
    for d in &summary.damage {
        eprintln!("gyr: warning: {}: {d}", path.display());
    }
    if summary.is_corrupt() {
        eprintln!(
            "gyr: {}: the trace is damaged; {} records in {} valid chunks were recovered",
            path.display(),
            summary.records,
            summary.chunks
        );
        return ExitCode::from(2);
    }
    if !summary.clean_end {
        eprintln!(
            "gyr: note: {}: the trace was not closed (its writer was killed, crashed or is still running); \
             every complete chunk was read: {} records",
            path.display(),
            summary.records
        );
    }
    ExitCode::SUCCESS
}

#[derive(Default)]
struct TypeStats {
    count: u64,
    first: Option<u64>,
    last: u64,
    bytes: u64,
}

#[derive(Default)]
struct ThreadStats {
    records: u64,
    first: Option<u64>,
    last: u64,
    perturbation: u64,
    last_seq: u64,
    /// First and last corrected times (`--correct`).
    corrected: Option<(u64, u64)>,
}

pub(crate) fn stats(args: StatsArgs) -> Result<ExitCode, Failure> {
    let mut reader = open(&args.file)?;
    let mut types: BTreeMap<u32, TypeStats> = BTreeMap::new();
    let mut threads: BTreeMap<u64, ThreadStats> = BTreeMap::new();
    let mut lost_by_thread: HashMap<u64, u64> = HashMap::new();
    let mut lost_schema: Option<Schema> = None;
    let mut first = u64::MAX;
    let mut last = 0u64;
    let mut end = None;
    let mut causal = args.correct.then(|| {
        CausalStream::new(
            gyr_trace::export::DEFAULT_MAX_HELD,
            Some(reader.header().sensor_cost_ns),
        )
    });
    let mut released = Vec::new();
    let corrected_span = |threads: &mut BTreeMap<u64, ThreadStats>, r: &mut Vec<Released>| {
        for r in r.drain(..) {
            let t = r.header.timestamp;
            let th = threads.entry(r.thread).or_default();
            let (first, last) = th.corrected.get_or_insert((t, t));
            *first = (*first).min(t);
            *last = (*last).max(t);
        }
    };
    reader.for_each_item(|item| match item {
        Item::Schema(s) => {
            if let Some(c) = causal.as_mut() {
                c.add_schema(s);
            }
            if s.name == LOST_EVENT_NAME {
                lost_schema = Some(s.clone());
            }
        }
        Item::Record { schema, record } => {
            if let Some(c) = causal.as_mut() {
                c.push(record.thread, record.header, record.payload, &mut released);
                corrected_span(&mut threads, &mut released);
            }
            let h = record.header;
            first = first.min(h.timestamp);
            last = last.max(h.timestamp);
            let t = types.entry(h.type_id).or_default();
            t.count += 1;
            t.first.get_or_insert(h.timestamp);
            t.last = t.last.max(h.timestamp);
            t.bytes += record.payload.len() as u64 + 32;
            let th = threads.entry(record.thread).or_default();
            th.records += 1;
            th.first.get_or_insert(h.timestamp);
            th.last = th.last.max(h.timestamp);
            th.perturbation = th.perturbation.max(h.perturbation);
            th.last_seq = th.last_seq.max(h.seq);
            if let (Some(s), Some(ls)) = (schema, &lost_schema)
                && s.id == ls.id
                && let Ok(v) = decode(s, record.payload)
                && let (Value::UInt(thread), Value::UInt(count)) = (&v[0], &v[1])
            {
                *lost_by_thread.entry(*thread).or_default() += count;
            }
        }
        Item::End(e) => end = Some(e.clone()),
        _ => {}
    });
    if let Some(c) = causal.as_mut() {
        c.finish(&mut released);
        corrected_span(&mut threads, &mut released);
    }
    let corrected_ns = causal.as_ref().map(|_| {
        let first = threads
            .values()
            .filter_map(|t| t.corrected)
            .map(|c| c.0)
            .min();
        let last = threads
            .values()
            .filter_map(|t| t.corrected)
            .map(|c| c.1)
            .max();
        last.unwrap_or(0).saturating_sub(first.unwrap_or(0))
    });
    let header = reader.header().clone();
    let schemas = reader.schemas().clone();
    let thread_info = reader.threads().clone();
    let summary = reader.summary().clone();
    let duration_ns = last.saturating_sub(if first == u64::MAX { 0 } else { first });
    let lost_total: u64 = lost_by_thread.values().sum();
    let records: u64 = types.values().map(|t| t.count).sum();
    let rate = |n: u64, span: u64| {
        if span == 0 {
            0.0
        } else {
            n as f64 * 1e9 / span as f64
        }
    };
    let type_name = |id: &u32| {
        schemas
            .get(id)
            .map(|s| s.name.clone())
            .unwrap_or_else(|| format!("<type {id}>"))
    };
    let out = std::io::stdout();
    let mut out = BufWriter::new(out.lock());
    if args.json {
        let json = serde_json::json!({
            "file": args.file.display().to_string(),
            "process": {
                "pid": header.pid, "host": header.host, "command_line": header.command_line,
                "start_unix_ns": header.start_unix_ns, "clock_source": header.clock_source,
                "ticks_per_second": header.ticks_per_second, "sensor_cost_ns": header.sensor_cost_ns,
                "policy": header.policy, "gyr_version": header.gyr_version,
            },
            "closed_cleanly": summary.clean_end,
            "chunks": summary.chunks,
            "records": records,
            "duration_ns": duration_ns,
            "corrected_duration_ns": corrected_ns,
            "records_per_s": rate(records, duration_ns),
            "lost": lost_total,
            "filtered": end.as_ref().map(|e| e.filtered),
            "damage": summary.damage.iter().map(|d| d.to_string()).collect::<Vec<_>>(),
            "types": types.iter().map(|(id, t)| serde_json::json!({
                "id": id, "name": type_name(id), "count": t.count,
                "per_s": rate(t.count, duration_ns), "bytes": t.bytes,
                "first_ns": t.first, "last_ns": t.last,
            })).collect::<Vec<_>>(),
            "threads": threads.iter().map(|(id, t)| {
                let info = thread_info.get(id);
                serde_json::json!({
                    "id": id, "name": info.map(|i| i.name.clone()), "os_tid": info.map(|i| i.os_tid),
                    "records": t.records, "first_ns": t.first, "last_ns": t.last,
                    "lost": lost_by_thread.get(id).copied().unwrap_or(0),
                    "blocked_ns": t.perturbation,
                    "perturbation_ns": t.perturbation as f64 + t.last_seq as f64 * header.sensor_cost_ns,
                    "corrected_first_ns": t.corrected.map(|c| c.0),
                    "corrected_last_ns": t.corrected.map(|c| c.1),
                })
            }).collect::<Vec<_>>(),
        });
        writeln!(out, "{json}").context("writing to stdout")?;
        out.flush().context("writing to stdout")?;
        return Ok(report_damage(&args.file, &summary));
    }
    let secs = |ns: u64| ns as f64 / 1e9;
    writeln!(out, "trace     {}", args.file.display()).context("writing to stdout")?;
    writeln!(
        out,
        "process   {} on {}, gyr {}",
        header.pid,
        printable(&header.host),
        printable(&header.gyr_version)
    )?;
    writeln!(out, "command   {}", command_line(&header.command_line))?;
    writeln!(out, "started   {} (unix ns)", header.start_unix_ns)?;
    writeln!(
        out,
        "clock     {} at {:.3} GHz; sensor cost {:.1} ns/event; ring-full policy {}",
        printable(&header.clock_source),
        header.ticks_per_second / 1e9,
        header.sensor_cost_ns,
        printable(&header.policy)
    )?;
    writeln!(
        out,
        "state     {}",
        if summary.clean_end {
            "closed cleanly"
        } else {
            "NOT closed: the writer was killed, crashed or is still running"
        }
    )?;
    writeln!(
        out,
        "duration  {:.6} s (first to last record){}",
        secs(duration_ns),
        corrected_ns
            .map(|c| format!("; {:.6} s with monitoring's time removed", secs(c)))
            .unwrap_or_default()
    )?;
    writeln!(
        out,
        "records   {} in {} chunks ({:.0}/s); lost {}{}",
        records,
        summary.chunks,
        rate(records, duration_ns),
        lost_total,
        end.as_ref()
            .map(|e| format!("; filtered by rate limits {}", e.filtered))
            .unwrap_or_default()
    )?;
    writeln!(out)?;
    writeln!(
        out,
        "{:>4}  {:<24} {:>12} {:>12} {:>12} {:>12}",
        "id", "type", "count", "per second", "first (s)", "last (s)"
    )?;
    for (id, t) in &types {
        writeln!(
            out,
            "{:>4}  {:<24} {:>12} {:>12.1} {:>12.6} {:>12.6}",
            id,
            printable(&type_name(id)),
            t.count,
            rate(t.count, duration_ns),
            secs(t.first.unwrap_or(0)),
            secs(t.last)
        )?;
    }
    writeln!(out)?;
    writeln!(
        out,
        "{:>4}  {:<20} {:>8} {:>12} {:>10} {:>10} {:>8} {:>14}{}",
        "id",
        "thread",
        "os tid",
        "records",
        "first (s)",
        "last (s)",
        "lost",
        "perturbation",
        if args.correct {
            "  corrected first..last (s)"
        } else {
            ""
        }
    )?;
    for (id, t) in &threads {
        let info = thread_info.get(id);
        let pert_ms = (t.perturbation as f64 + t.last_seq as f64 * header.sensor_cost_ns) / 1e6;
        writeln!(
            out,
            "{:>4}  {:<20} {:>8} {:>12} {:>10.6} {:>10.6} {:>8} {:>11.3} ms{}",
            id,
            printable(info.map(|i| i.name.as_str()).unwrap_or("?")),
            info.map(|i| i.os_tid.to_string()).unwrap_or_default(),
            t.records,
            secs(t.first.unwrap_or(0)),
            secs(t.last),
            lost_by_thread.get(id).copied().unwrap_or(0),
            pert_ms,
            t.corrected
                .map(|(a, b)| format!("  {:>10.6}..{:.6}", secs(a), secs(b)))
                .unwrap_or_default()
        )?;
    }
    writeln!(out)?;
    writeln!(
        out,
        "perturbation = time blocked on full rings (measured) + events x sensor cost (estimated)"
    )?;
    out.flush()?;
    Ok(report_damage(&args.file, &summary))
}

/// Prints the records `gyr trace dump` selects.
struct Printer<'a, W: Write> {
    args: &'a DumpArgs,
    out: W,
    /// The ids of the types asked for (`--type`), if any were.
    wanted_ids: Option<Vec<u32>>,
    threads: HashMap<u64, String>,
    printed: u64,
    error: Option<std::io::Error>,
    /// The rank (or file) of the record being printed, in a merge of several files.
    rank: Option<u32>,
}

impl<W: Write> Printer<'_, W> {
    fn record(&mut self, thread: u64, h: &RecordHeader, schema: Option<&Schema>, payload: &[u8]) {
        let args = self.args;
        if self.error.is_some()
            || self
                .wanted_ids
                .as_ref()
                .is_some_and(|ids| !ids.contains(&h.type_id))
            || args.thread.is_some_and(|t| t != thread)
            || args.from.is_some_and(|t| h.timestamp < t.0)
            || args.to.is_some_and(|t| h.timestamp > t.0)
        {
            return;
        }
        let (name, values) = match schema {
            Some(s) => (
                s.name.as_str(),
                decode(s, payload).map_err(|e| e.to_string()),
            ),
            None => ("?", Err("no schema".to_owned())),
        };
        let out = &mut self.out;
        let r = if args.json {
            let fields = match (&values, schema) {
                (Ok(v), Some(s)) => serde_json::Value::Object(
                    s.fields
                        .iter()
                        .zip(v)
                        .map(|(f, v)| (f.name.clone(), crate::show::value_json(v)))
                        .collect(),
                ),
                (Err(e), _) => serde_json::json!({ "error": e }),
                _ => serde_json::Value::Null,
            };
            let mut line = serde_json::json!({
                "t_ns": h.timestamp, "thread": thread, "seq": h.seq, "type": name,
                "fields": fields, "perturbation_ns": h.perturbation,
            });
            if let Some(rank) = self.rank {
                line["rank"] = rank.into();
            }
            writeln!(out, "{line}")
        } else {
            let body = match (&values, schema) {
                (Ok(v), Some(s)) => s
                    .fields
                    .iter()
                    .zip(v)
                    .map(|(f, v)| format!("{}: {}", printable(&f.name), printable(&v.to_string())))
                    .collect::<Vec<_>>()
                    .join(", "),
                (Err(e), _) => format!("<{}>", printable(e)),
                _ => String::new(),
            };
            let tn = self.threads.get(&thread).cloned().unwrap_or_default();
            writeln!(
                out,
                "{:>14.9}  {}t{:<3} {:<12} #{:<8} {} {{ {} }}",
                h.timestamp as f64 / 1e9,
                self.rank.map(|r| format!("r{r:<3} ")).unwrap_or_default(),
                thread,
                printable(&tn),
                h.seq,
                printable(name),
                body
            )
        };
        match r {
            Ok(()) => self.printed += 1,
            Err(e) => self.error = Some(e),
        }
    }
}

pub(crate) fn dump(args: DumpArgs) -> Result<ExitCode, Failure> {
    crate::trace_clock::check_sync(args.sync, &args.sync_args)?;
    if args.sync || args.files.len() > 1 {
        return dump_merged(&args);
    }
    let file = &args.files[0];
    let mut reader = open(file)?;
    let out = std::io::stdout();
    let mut printer = Printer {
        args: &args,
        out: BufWriter::new(out.lock()),
        wanted_ids: if args.types.is_empty() {
            None
        } else {
            Some(Vec::new())
        },
        threads: HashMap::new(),
        printed: 0,
        error: None,
        rank: None,
    };
    let mut seen_types: Vec<String> = Vec::new();
    let limit = args.limit.unwrap_or(u64::MAX);
    // Ordered (or corrected): records go through the ordering filter, and are printed as it
    // releases them, with their schema found by type id.
    let mut causal = (args.ordered || args.correct).then(|| {
        CausalStream::new(
            gyr_trace::export::DEFAULT_MAX_HELD,
            args.correct.then_some(reader.header().sensor_cost_ns),
        )
    });
    let mut schemas: HashMap<u32, Schema> = HashMap::new();
    let mut released: Vec<Released> = Vec::new();
    reader.try_for_each_item(|item| {
        if printer.error.is_some() || printer.printed >= limit {
            // Read on: the damage report covers the whole file.
            return ControlFlow::Continue(());
        }
        match item {
            Item::Schema(s) => {
                seen_types.push(s.name.clone());
                if let Some(ids) = printer.wanted_ids.as_mut()
                    && args.types.contains(&s.name)
                {
                    ids.push(s.id);
                }
                if let Some(c) = causal.as_mut() {
                    c.add_schema(s);
                    schemas.insert(s.id, s.clone());
                }
            }
            Item::Thread(t) => {
                printer.threads.insert(t.id, t.name.clone());
            }
            Item::Record { schema, record } => match causal.as_mut() {
                None => printer.record(record.thread, &record.header, schema, record.payload),
                Some(c) => {
                    c.push(record.thread, record.header, record.payload, &mut released);
                    for r in released.drain(..) {
                        if printer.printed < limit {
                            let s = schemas.get(&r.header.type_id);
                            printer.record(r.thread, &r.header, s, &r.payload);
                        }
                    }
                }
            },
            Item::End(_) => {}
        }
        ControlFlow::Continue(())
    });
    if let Some(c) = causal.as_mut() {
        c.finish(&mut released);
        for r in released.drain(..) {
            if printer.printed < limit {
                let s = schemas.get(&r.header.type_id);
                printer.record(r.thread, &r.header, s, &r.payload);
            }
        }
        let o = c.order_stats();
        if o.forced > 0 {
            eprintln!(
                "gyr: note: {} events were released without their cause (lost, cut off or switched off)",
                o.forced
            );
        }
    }
    let Printer {
        mut out,
        wanted_ids,
        error,
        ..
    } = printer;
    if let Some(e) = error {
        return Err(anyhow::Error::from(e).context("writing to stdout").into());
    }
    out.flush().context("writing to stdout")?;
    if let Some(ids) = &wanted_ids
        && ids.is_empty()
    {
        return Err(Failure::input(anyhow::anyhow!(
            "no event type named {} in {}; its types are: {}",
            args.types.join(", "),
            file.display(),
            seen_types.join(", ")
        )));
    }
    Ok(report_damage(file, reader.summary()))
}

/// `gyr trace dump` of several files, or `--sync`: the k-way merge of `gyr_trace::merge`,
/// every record once, in time order on one clock (counted from the earliest file's timestamp
/// 0 on it), each with its rank.
fn dump_merged(args: &DumpArgs) -> Result<ExitCode, Failure> {
    if args.ordered || args.correct {
        return Err(Failure::input(anyhow::anyhow!(
            "--ordered and --correct follow the causes inside one process: dump one file with \
             them, or merge several files without them"
        )));
    }
    let readers = args
        .files
        .iter()
        .map(|p| open(p))
        .collect::<Result<Vec<_>, _>>()?;
    let (clock, ranks) = if args.sync {
        let report = args.sync_args.estimate(&args.files)?;
        crate::trace_clock::note(&report);
        let ranks = report.processes.iter().map(|p| p.rank).collect();
        (report.correction(), ranks)
    } else {
        let starts: Vec<u64> = readers.iter().map(|r| r.header().start_unix_ns).collect();
        (
            gyr_trace::ClockCorrection::placement(&starts),
            (0..readers.len() as u32).collect::<Vec<_>>(),
        )
    };
    let shift = clock.base_shift();
    let mut merge = gyr_trace::Merge::new(readers, clock);
    if !args.types.is_empty() {
        let names: Vec<&str> = args.types.iter().map(String::as_str).collect();
        merge = merge.only_types(&names);
    }
    let out = std::io::stdout();
    let mut printer = Printer {
        args,
        out: BufWriter::new(out.lock()),
        wanted_ids: None,
        threads: HashMap::new(),
        printed: 0,
        error: None,
        rank: None,
    };
    let limit = args.limit.unwrap_or(u64::MAX);
    while printer.printed < limit && printer.error.is_none() {
        let Some(rec) = merge.next() else {
            break;
        };
        let mut header = rec.header;
        header.timestamp = rec.time.saturating_add(shift).max(0) as u64;
        printer.rank = Some(ranks[rec.file]);
        let name = merge
            .threads(rec.file)
            .get(&rec.thread)
            .map(|t| t.name.clone())
            .unwrap_or_default();
        printer.threads.insert(rec.thread, name);
        printer.record(rec.thread, &header, merge.schema_of(&rec), &rec.payload);
    }
    let Printer { mut out, error, .. } = printer;
    if let Some(e) = error {
        return Err(anyhow::Error::from(e).context("writing to stdout").into());
    }
    out.flush().context("writing to stdout")?;
    let mut code = ExitCode::SUCCESS;
    for (i, path) in args.files.iter().enumerate() {
        let late = merge.stats(i).late;
        if late > 0 {
            eprintln!(
                "gyr: note: {}: {late} records came out of order (its threads were written far apart)",
                path.display()
            );
        }
        if report_damage(path, merge.summary(i)) != ExitCode::SUCCESS {
            code = ExitCode::from(2);
        }
    }
    Ok(code)
}
