//! `gyr trace info`, `gyr trace export` and `gyr trace import`: printing and arguments around
//! `gyr_trace::{info, export, import}`.

use crate::Failure;
use crate::show::{command_line, printable};
use anyhow::Context;
use clap::Args;
use gyr_trace::export::{self, Format, Options, Progress};
use gyr_trace::info::{self, TraceInfo};
use gyr_trace::{ImportError, ImportFormat, Need};
use std::io::{BufWriter, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

/// Arguments of `gyr trace info`.
#[derive(Debug, Args)]
pub(crate) struct InfoArgs {
    /// The trace file.
    file: PathBuf,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
}

/// Arguments of `gyr trace export`.
#[derive(Debug, Args)]
pub(crate) struct ExportArgs {
    /// The output format: perfetto, chrome, sddf-ascii or sddf-binary (one file), or csv or
    /// parquet (a directory of tables: one file per event type, named after it, such as
    /// `gyr.steer.csv`, with typed columns and the time, wall-clock time, pid, thread, thread
    /// name and sequence number of each record; parquet needs a gyr built with the feature
    /// `parquet`), or OpenTelemetry's otlp-json (spans and selected events as OTLP/JSON
    /// lines, for a collector's otlpjsonfile receiver) or otlp (the same sent to a collector
    /// over gRPC: --endpoint).
    #[arg(long, short)]
    format: Format,
    /// The trace files, one process each.
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// The file to write; for csv and parquet the directory to create (or an empty one);
    /// none for otlp.
    #[arg(long, short)]
    output: Option<PathBuf>,
    /// otlp: the collector's OTLP/gRPC endpoint, such as http://127.0.0.1:4317, or
    /// https://HOST:PORT (TLS).
    #[arg(long, value_name = "URL")]
    endpoint: Option<String>,
    /// otlp: a header sent with every request, KEY=VALUE (such as `authorization=Bearer
    /// TOKEN`); repeat for more. Sent over https://, or in clear only to this machine.
    #[arg(long = "header", value_name = "KEY=VALUE")]
    headers: Vec<crate::otlp_send::Header>,
    /// otlp over https://: the PEM file of the CA the collector's certificate must chain to
    /// (a private CA or a self-signed certificate), instead of the system's CAs.
    #[arg(long, value_name = "FILE")]
    ca_cert: Option<PathBuf>,
    /// otlp: how long to wait for the collector to connect and to answer each request.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = humantime::parse_duration)]
    timeout: std::time::Duration,
    /// otlp and otlp-json: the events that become log records besides the spans, globs of
    /// event type names separated by commas (`*` any text, `?` one character), such as
    /// `gyr.alert,app.*`; `*` for all. Default: none, spans only.
    #[arg(long, value_name = "GLOBS", value_parser = export::otlp::EventFilter::parse)]
    events: Option<export::otlp::EventFilter>,
    /// otlp and otlp-json: the most spans or log records in one request (or line).
    #[arg(long, value_name = "N", default_value_t = export::otlp::DEFAULT_BATCH)]
    batch: usize,
    /// Put every event after its causes first (Falcon's ordering filter).
    #[arg(long)]
    ordered: bool,
    /// The most events the ordering filter holds back before it releases the oldest.
    #[arg(long, value_name = "N", default_value_t = export::DEFAULT_MAX_HELD)]
    max_held: usize,
    /// Remove from each thread's timeline the time monitoring took (blocked on full rings,
    /// sensor calls), following the causes between threads; implies --ordered.
    #[arg(long)]
    correct: bool,
    /// Put every process on the reference process's clock, estimated from the messages
    /// between them (see `gyr trace clock`), instead of placing them by wall-clock start.
    #[arg(long)]
    sync: bool,
    #[command(flatten)]
    sync_args: crate::trace_clock::SyncArgs,
}

/// Arguments of `gyr trace import`.
#[derive(Debug, Args)]
pub(crate) struct ImportArgs {
    /// The input format: sddf-ascii, sddf-binary or picl.
    #[arg(long, short)]
    format: ImportFormat,
    /// The file to read.
    input: PathBuf,
    /// The gyr trace file to write.
    #[arg(long, short)]
    output: PathBuf,
}

fn secs(ns: Option<u64>) -> String {
    ns.map(|t| format!("{:.9}", t as f64 / 1e9))
        .unwrap_or_else(|| "-".into())
}

pub(crate) fn info(args: InfoArgs) -> Result<ExitCode, Failure> {
    let info = info::read_file(&args.file).map_err(Failure::input)?;
    let out = std::io::stdout();
    let mut out = BufWriter::new(out.lock());
    if args.json {
        writeln!(out, "{}", info.to_json(&args.file)).context("writing to stdout")?;
    } else {
        info_text(&mut out, &args.file, &info).context("writing to stdout")?;
    }
    out.flush().context("writing to stdout")?;
    Ok(if info.summary.is_corrupt() {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    })
}

fn info_text(out: &mut impl Write, file: &Path, info: &TraceInfo) -> std::io::Result<()> {
    let h = &info.header;
    let size = info
        .file_bytes
        .map(|b| format!(", {b} bytes"))
        .unwrap_or_default();
    writeln!(
        out,
        "trace     {}{size}, format version {}",
        file.display(),
        info.format_version
    )?;
    writeln!(
        out,
        "process   pid {} on {}, written by gyr {}",
        h.pid,
        printable(&h.host),
        printable(&h.gyr_version)
    )?;
    writeln!(out, "command   {}", command_line(&h.command_line))?;
    writeln!(
        out,
        "started   {} ns since the Unix epoch (the trace's timestamp 0)",
        h.start_unix_ns
    )?;
    writeln!(
        out,
        "clock     {}, calibrated at {:.6} GHz; sensor cost {:.1} ns/event; ring-full policy {}",
        printable(&h.clock_source),
        h.ticks_per_second / 1e9,
        h.sensor_cost_ns,
        printable(&h.policy)
    )?;
    writeln!(
        out,
        "records   {} in {} chunks, from {} s to {} s",
        info.span.records,
        info.summary.chunks,
        secs(info.span.first_ns),
        secs(info.span.last_ns)
    )?;
    let state = if info.clean_end() {
        "closed cleanly".to_owned()
    } else if info.cut_off() {
        format!(
            "CUT OFF: the writer did not finish (killed, crashed or still running); {} chunk(s), {} bytes unreadable",
            info.unreadable_chunks(),
            info.unreadable_bytes()
        )
    } else {
        "NOT closed: no end block (the writer did not finish)".to_owned()
    };
    writeln!(out, "state     {state}")?;
    for d in &info.summary.damage {
        writeln!(out, "damage    {d}")?;
    }
    match &info.end {
        Some(e) => writeln!(
            out,
            "losses    {} events reported by gyr.lost; the end block says {} records, {} lost, {} filtered by rate limits",
            info.lost_reported, e.records, e.lost, e.filtered
        )?,
        None => writeln!(
            out,
            "losses    {} events reported by gyr.lost (no end block with the writer's totals)",
            info.lost_reported
        )?,
    }
    writeln!(out)?;
    writeln!(
        out,
        "{:>5}  {:<28} {:>10} {:>14} {:>14}  fields",
        "id", "schema", "records", "first (s)", "last (s)"
    )?;
    for s in info.schemas.values() {
        let fields: Vec<String> = s
            .schema
            .fields
            .iter()
            .map(|f| format!("{}: {}", printable(&f.name), f.ty))
            .collect();
        writeln!(
            out,
            "{:>5}  {:<28} {:>10} {:>14} {:>14}  {}",
            s.schema.id,
            printable(&s.schema.name),
            s.span.records,
            secs(s.span.first_ns),
            secs(s.span.last_ns),
            fields.join(", ")
        )?;
    }
    writeln!(out)?;
    writeln!(
        out,
        "{:>5}  {:<24} {:>8} {:>10} {:>14} {:>14} {:>8}",
        "id", "thread", "os tid", "records", "first (s)", "last (s)", "lost"
    )?;
    for t in info.threads.values() {
        writeln!(
            out,
            "{:>5}  {:<24} {:>8} {:>10} {:>14} {:>14} {:>8}",
            t.id,
            printable(t.info.as_ref().map_or("?", |i| i.name.as_str())),
            t.info
                .as_ref()
                .map(|i| i.os_tid.to_string())
                .unwrap_or_default(),
            t.span.records,
            secs(t.span.first_ns),
            secs(t.span.last_ns),
            t.lost
        )?;
    }
    Ok(())
}

/// A progress line on a terminal: rewritten in place, about once a second.
struct ProgressLine {
    tty: bool,
    shown: bool,
    names: Vec<String>,
}

impl ProgressLine {
    fn show(&mut self, p: &Progress) {
        if !self.tty {
            return;
        }
        let rate = p.records as f64 / p.elapsed.as_secs_f64().max(1e-9);
        let part = if p.bytes_total > 0 {
            format!(
                "{:.0}% ({} of {} MB)",
                100.0 * p.bytes_read as f64 / p.bytes_total as f64,
                p.bytes_read >> 20,
                p.bytes_total >> 20
            )
        } else {
            String::new()
        };
        eprint!(
            "\r\x1b[Kgyr: exporting {} ({}/{}): {part}, {} records, {:.1} M records/s",
            self.names.get(p.file).map_or("", String::as_str),
            p.file + 1,
            p.files,
            p.records,
            rate / 1e6
        );
        self.shown = true;
    }

    fn done(&mut self) {
        if self.shown {
            eprint!("\r\x1b[K");
            self.shown = false;
        }
    }
}

fn need_text(n: &Need) -> String {
    match *n {
        Need::Fork { child } => format!("the fork of thread {child}"),
        Need::Exit { thread } => format!("the exit of thread {thread}"),
        Need::Release { mutex, n } => format!("release {n} of lock {mutex}"),
        Need::Signal { cond, n } => format!("signal {n} of condition {cond}"),
        Need::Arrivals {
            barrier,
            generation,
            parties,
        } => format!("{parties} arrivals at barrier {barrier} (generation {generation})"),
    }
}

/// Makes the directory of a table export: new, or empty (stale tables of another trace would
/// be taken for this one's).
fn table_dir(dir: &Path) -> Result<(), Failure> {
    match std::fs::read_dir(dir) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                return Err(Failure::input(anyhow::anyhow!(
                    "{} is not empty: give a new directory (or an empty one) to write the tables into",
                    dir.display()
                )));
            }
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create the directory {}", dir.display()))
            .map_err(Failure::from),
        Err(e) => Err(Failure::input(anyhow::anyhow!(
            "cannot use {} as the directory of the tables: {e}",
            dir.display()
        ))),
    }
}

/// Refuses options that do not go with `args.format`, before anything is read or written.
fn check_export_args(args: &ExportArgs) -> Result<(), Failure> {
    let bad = |m: String| Err(Failure::input(anyhow::anyhow!(m)));
    let otlp = matches!(args.format, Format::Otlp | Format::OtlpJson);
    if args.format == Format::Otlp {
        if args.endpoint.is_none() {
            return bad("--format otlp sends to a collector: give its endpoint, such as --endpoint http://127.0.0.1:4317 (or write a file with --format otlp-json -o FILE)".into());
        }
        if let Some(o) = &args.output {
            return bad(format!(
                "--format otlp sends to --endpoint and writes no file: leave out -o {} (or use --format otlp-json)",
                o.display()
            ));
        }
    } else {
        if args.output.is_none() {
            return bad(format!(
                "--format {} writes a file: give it with -o FILE",
                args.format
            ));
        }
        if args.endpoint.is_some() || !args.headers.is_empty() || args.ca_cert.is_some() {
            return bad(
                "--endpoint, --header and --ca-cert are for --format otlp (sending to a collector)"
                    .into(),
            );
        }
    }
    if !otlp && args.events.is_some() {
        return bad("--events selects the events of --format otlp and otlp-json; the other formats write every event".into());
    }
    if !(1..=export::otlp::MAX_BATCH).contains(&args.batch) {
        return bad(format!(
            "--batch {} is out of range: give 1 to {} (a collector's default limit on a request is 4 MiB)",
            args.batch,
            export::otlp::MAX_BATCH
        ));
    }
    if args.headers.len() > crate::otlp_send::MAX_HEADERS {
        return bad(format!(
            "{} headers given: at most {} are sent",
            args.headers.len(),
            crate::otlp_send::MAX_HEADERS
        ));
    }
    Ok(())
}

pub(crate) fn export(args: ExportArgs) -> Result<ExitCode, Failure> {
    args.format
        .check_built()
        .map_err(|e| Failure::input(anyhow::anyhow!(e)))?;
    check_export_args(&args)?;
    crate::trace_clock::check_sync(args.sync, &args.sync_args)?;
    // Estimate the clocks and open the inputs before creating the output, so that a wrong
    // path or a run without messages leaves no file behind.
    let clock = if args.sync {
        let report = args.sync_args.estimate(&args.files)?;
        crate::trace_clock::note(&report);
        Some(report.correction())
    } else {
        None
    };
    let inputs = args
        .files
        .iter()
        .map(|p| export::open_input(p))
        .collect::<Result<Vec<_>, _>>()
        .map_err(Failure::input)?;
    let mut line = ProgressLine {
        tty: std::io::stderr().is_terminal(),
        shown: false,
        names: args.files.iter().map(|p| p.display().to_string()).collect(),
    };
    let started = Instant::now();
    let options = Options {
        ordered: args.ordered,
        max_held: args.max_held,
        correct: args.correct,
    };
    let otlp_options = export::otlp::OtlpOptions {
        events: args.events.clone().unwrap_or_default(),
        batch: args.batch,
    };
    // Where the export went, as the last line names it.
    let destination = match (&args.output, &args.endpoint) {
        (Some(o), _) => o.display().to_string(),
        (None, Some(e)) => e.clone(),
        (None, None) => String::new(),
    };
    let mut tables = None;
    let mut otlp = None;
    let mut sent = None;
    let result = if args.format == Format::Otlp {
        let sink = crate::otlp_send::GrpcSink::connect(crate::otlp_send::Target {
            endpoint: destination.clone(),
            headers: args.headers.clone(),
            timeout: args.timeout,
            ca_cert: args.ca_cert.clone(),
        })?;
        export::otlp::export_otlp(
            inputs,
            sink,
            otlp_options,
            options,
            clock.as_ref(),
            &mut |p| line.show(p),
        )
        .map(|(report, stats, sink)| {
            otlp = Some(stats);
            sent = Some(sink.sent);
            report
        })
    } else if args.format.is_tables() {
        table_dir(Path::new(&destination))?;
        export::export_tables(
            inputs,
            args.format,
            Path::new(&destination),
            options,
            clock.as_ref(),
            &mut |p| line.show(p),
        )
        .map(|(report, t)| {
            tables = Some(t);
            report
        })
    } else {
        let file = std::fs::File::create(&destination)
            .with_context(|| format!("cannot create {destination}"))?;
        if args.format == Format::OtlpJson {
            export::otlp::export_otlp(
                inputs,
                export::otlp::JsonLines::new(BufWriter::with_capacity(1 << 20, file)),
                otlp_options,
                options,
                clock.as_ref(),
                &mut |p| line.show(p),
            )
            .map(|(report, stats, _)| {
                otlp = Some(stats);
                report
            })
        } else {
            export::export_inputs_on_clock(
                inputs,
                args.format,
                file,
                options,
                clock.as_ref(),
                &mut |p| line.show(p),
            )
        }
    };
    line.done();
    let report = result.with_context(|| match args.format {
        Format::Otlp => format!("sending to {destination} failed"),
        _ => format!("writing {destination} failed"),
    })?;
    let secs = started.elapsed().as_secs_f64();
    let mut corrupt = false;
    for f in &report.files {
        let s = &f.summary;
        for d in &s.damage {
            eprintln!("gyr: warning: {}: {d}", f.name);
        }
        if s.is_corrupt() {
            corrupt = true;
            eprintln!(
                "gyr: {}: the trace is damaged; the {} records of its {} valid chunks were exported",
                f.name, s.records, s.chunks
            );
        } else if !s.clean_end {
            eprintln!(
                "gyr: note: {}: the trace was not closed (its writer was killed, crashed or is still running); the {} records of its complete chunks were exported",
                f.name, s.records
            );
        }
        if let Some(o) = &f.order {
            eprintln!(
                "gyr: ordering {}: {} events, held back {} times (hold-back ratio {:.3}), at most {} held at once; {} released without their cause",
                f.name,
                o.events,
                o.holds,
                o.hold_back_ratio(),
                o.peak_held,
                o.forced
            );
            for st in &f.stalls {
                eprintln!(
                    "gyr:   stall: thread {} waited for {} ({} events held)",
                    st.thread,
                    need_text(&st.waited_for),
                    st.held
                );
            }
            if o.threads_forgotten > 0 || o.objects_forgotten > 0 {
                eprintln!(
                    "gyr:   to stay within its bounds the filter forgot {} idle threads and the state of {} objects",
                    o.threads_forgotten, o.objects_forgotten
                );
            }
            if o.forced > f.stalls.len() as u64 {
                eprintln!(
                    "gyr:   ... and {} more stalls",
                    o.forced - f.stalls.len() as u64
                );
            }
        }
        if let Some(c) = &f.correction {
            eprintln!(
                "gyr: corrected {}: {:.3} ms of monitoring removed from its threads; {} waits moved after their corrected cause",
                f.name,
                c.removed_ns as f64 / 1e6,
                c.waits_moved
            );
        }
    }
    if let Some(t) = &tables {
        for (name, path) in &t.tables {
            eprintln!("gyr: table {}: {}", printable(name), path.display());
        }
        if t.skipped > 0 {
            eprintln!(
                "gyr: note: {} records were left out: their payload did not match their event type, or their type was never described",
                t.skipped
            );
        }
        eprintln!(
            "gyr: wrote {}: {} records of {} file(s) as {} rows in {} {} tables in {:.2} s ({:.1} M records/s)",
            destination,
            report.records,
            report.files.len(),
            t.rows,
            t.tables.len(),
            args.format,
            secs,
            report.records as f64 / secs.max(1e-9) / 1e6
        );
        return Ok(if corrupt {
            ExitCode::from(2)
        } else {
            ExitCode::SUCCESS
        });
    }
    if let Some(o) = &otlp {
        return Ok(otlp_summary(
            &destination,
            &report,
            o,
            sent.as_ref(),
            secs,
            corrupt,
        ));
    }
    eprintln!(
        "gyr: wrote {}: {} records of {} file(s) as {} {} events in {:.2} s ({:.1} M records/s)",
        destination,
        report.records,
        report.files.len(),
        report.events,
        args.format,
        secs,
        report.records as f64 / secs.max(1e-9) / 1e6
    );
    Ok(if corrupt {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    })
}

/// The last lines of an OTLP export: what was made, left out, and refused.
fn otlp_summary(
    destination: &str,
    report: &export::Report,
    o: &export::otlp::OtlpStats,
    sent: Option<&crate::otlp_send::Sent>,
    secs: f64,
    corrupt: bool,
) -> ExitCode {
    if o.unended + o.unmatched_ends + o.too_deep > 0 {
        eprintln!(
            "gyr: note: {} spans never ended (exported with gyr.span.unended = true), {} ends without their begin skipped, {} spans nested deeper than {} skipped",
            o.unended,
            o.unmatched_ends,
            o.too_deep,
            export::otlp::MAX_DEPTH
        );
    }
    if o.undecodable > 0 {
        eprintln!(
            "gyr: note: {} records were left out: their payload did not match their event type, or their type was never described",
            o.undecodable
        );
    }
    let verb = if sent.is_some() { "sent to" } else { "wrote" };
    eprintln!(
        "gyr: {verb} {destination}: {} records of {} file(s) as {} spans and {} log records in {} requests in {:.2} s",
        report.records,
        report.files.len(),
        o.spans,
        o.logs,
        o.span_batches + o.log_batches,
        secs
    );
    let mut rejected = false;
    if let Some(s) = sent {
        if s.retries > 0 {
            eprintln!(
                "gyr: note: the collector was busy or unavailable {} times; those requests were sent again",
                s.retries
            );
        }
        if s.rejected_spans > 0 || s.rejected_logs > 0 {
            rejected = true;
            eprintln!(
                "gyr: the collector accepted the requests but rejected {} spans and {} log records",
                s.rejected_spans, s.rejected_logs
            );
        }
        for m in &s.messages {
            eprintln!("gyr: the collector said: {}", printable(m));
        }
    }
    if corrupt || rejected {
        ExitCode::from(if corrupt { 2 } else { 1 })
    } else {
        ExitCode::SUCCESS
    }
}

pub(crate) fn import(args: ImportArgs) -> Result<ExitCode, Failure> {
    let input = std::fs::File::open(&args.input).map_err(|e| {
        Failure::input(anyhow::anyhow!("cannot read {}: {e}", args.input.display()))
    })?;
    let out = std::fs::File::create(&args.output)
        .with_context(|| format!("cannot create {}", args.output.display()))?;
    let source = args.input.display().to_string();
    let result = gyr_trace::import(
        args.format,
        std::io::BufReader::new(input),
        BufWriter::with_capacity(1 << 20, out),
        &source,
    );
    let (out, report) = match result {
        Ok(r) => r,
        Err(e) => {
            // No half-written trace is left behind.
            let _ = std::fs::remove_file(&args.output);
            return Err(match e {
                ImportError::Bad { .. } | ImportError::Read(_) => Failure::input(anyhow::anyhow!(
                    "{}: {e} (reading it as {})",
                    args.input.display(),
                    format_name(args.format)
                )),
                other => anyhow::Error::from(other)
                    .context(format!("writing {}", args.output.display()))
                    .into(),
            });
        }
    };
    out.into_inner()
        .map_err(|e| e.into_error())
        .and_then(|f| f.sync_all())
        .with_context(|| format!("writing {}", args.output.display()))?;
    eprintln!(
        "gyr: wrote {}: {} schemas, {} threads, {} records",
        args.output.display(),
        report.schemas,
        report.threads,
        report.records
    );
    Ok(ExitCode::SUCCESS)
}

fn format_name(f: ImportFormat) -> &'static str {
    match f {
        ImportFormat::SddfAscii => "sddf-ascii",
        ImportFormat::SddfBinary => "sddf-binary",
        ImportFormat::Picl => "picl",
    }
}
