//! `gyr trace clock`: each process's clock offset and drift from the messages of its trace
//! files, and the `--sync` options that `gyr trace dump` and `gyr trace export` share.

use crate::Failure;
use crate::show::printable;
use crate::trace_cmd::Time;
use anyhow::Context;
use clap::Args;
use gyr_trace::clock::{self, ClockError, ClockOptions, ClockReport, Violation, Violations};
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `gyr trace clock`.
#[derive(Debug, Args)]
pub(crate) struct ClockArgs {
    /// The trace files, one process (rank) each.
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    sync: SyncArgs,
}

/// How clocks are estimated, for `clock` and for `--sync`.
#[derive(Debug, Args, Clone, Default)]
pub(crate) struct SyncArgs {
    /// The rank whose clock the others are put on (default: rank 0).
    #[arg(long, value_name = "RANK")]
    pub(crate) reference: Option<u32>,
    /// The least time a message takes (1us, 200ns; a bare number is seconds): receives less
    /// than this after their sends count as violations.
    #[arg(long, value_name = "DUR")]
    pub(crate) min_latency: Option<Time>,
}

impl SyncArgs {
    fn options(&self) -> ClockOptions {
        ClockOptions {
            reference: self.reference,
            min_latency_ns: self.min_latency.map_or(0, |t| t.0),
            ..ClockOptions::default()
        }
    }

    /// Estimates the clocks of `files`; a user's mistake is a bad-input failure.
    pub(crate) fn estimate(&self, files: &[PathBuf]) -> Result<ClockReport, Failure> {
        clock::estimate_files(files, &self.options()).map_err(|e| match e {
            ClockError::Open(_) => Failure::input(e),
            other => {
                Failure::input(anyhow::Error::from(other).context("cannot correct the clocks"))
            }
        })
    }
}

fn ns(v: f64) -> String {
    let a = v.abs();
    if a >= 1e9 {
        format!("{:.6} s", v / 1e9)
    } else if a >= 1e6 {
        format!("{:.3} ms", v / 1e6)
    } else if a >= 1e3 {
        format!("{:.3} us", v / 1e3)
    } else {
        format!("{v:.0} ns")
    }
}

fn violation_line(v: &Violations, min_latency: u64) -> String {
    let mut s = format!(
        "{} of {} receives before their sends",
        v.reversed, v.checked
    );
    if min_latency > 0 {
        s.push_str(&format!(
            ", {} less than {} after",
            v.under_latency,
            ns(min_latency as f64)
        ));
    }
    if let Some(w) = v.worst {
        s.push_str(&format!("; worst {}", worst(&w)));
    } else if let Some(d) = v.min_delay_ns {
        s.push_str(&format!("; smallest delay {}", ns(d as f64)));
    }
    s
}

fn worst(w: &Violation) -> String {
    format!(
        "rank {} -> rank {} (comm {}, tag {}): received {} {} its send",
        w.from,
        w.to,
        w.comm,
        w.tag,
        ns(w.delay_ns().unsigned_abs() as f64),
        if w.delay_ns() < 0 { "before" } else { "after" }
    )
}

fn violations_json(v: &Violations) -> serde_json::Value {
    serde_json::json!({
        "checked": v.checked,
        "reversed": v.reversed,
        "under_latency": v.under_latency,
        "min_delay_ns": v.min_delay_ns,
        "worst": v.worst.map(|w| serde_json::json!({
            "from": w.from, "to": w.to, "comm": w.comm, "tag": w.tag,
            "send_ns": w.send_ns, "recv_ns": w.recv_ns, "delay_ns": w.delay_ns(),
        })),
    })
}

/// The report as one JSON object.
pub(crate) fn report_json(r: &ClockReport) -> serde_json::Value {
    serde_json::json!({
        "job": r.job,
        "reference_rank": r.processes[r.reference].rank,
        "matched": r.matched,
        "unmatched_sends": r.unmatched_sends,
        "unmatched_recvs": r.unmatched_recvs,
        "dropped": r.dropped,
        "unknown_peers": r.unknown_peers,
        "undecoded": r.undecoded,
        "min_latency_ns": r.min_latency_ns,
        "processes": r.processes.iter().map(|p| serde_json::json!({
            "file": p.file,
            "rank": p.rank,
            "rank_from_event": p.rank_from_event,
            "shift_ns": p.clock.shift_ns,
            "offset_ns": p.clock.offset_ns,
            "drift_ppm": p.drift_ppm(),
            "messages": p.messages,
            "from_rank": p.from.map(|f| r.processes[f.peer].rank),
            "received_from": p.from.map(|f| f.received),
            "sent_to": p.from.map(|f| f.sent),
            "method": p.from.map(|f| f.line.method.name()),
            "margin_ns": p.from.map(|f| f.line.margin_ns),
            "pair_drift_range_ppm": p.from.and_then(|f| f.line.drift_range).map(|(a, b)| [a * 1e6, b * 1e6]),
        })).collect::<Vec<_>>(),
        "before": violations_json(&r.before),
        "after": violations_json(&r.after),
    })
}

/// Prints the report as a table.
pub(crate) fn print_report(out: &mut dyn Write, r: &ClockReport) -> std::io::Result<()> {
    let reference = &r.processes[r.reference];
    writeln!(
        out,
        "job        {} ({} processes; reference rank {})",
        r.job
            .as_deref()
            .map(printable)
            .unwrap_or_else(|| "-".into()),
        r.processes.len(),
        reference.rank
    )?;
    writeln!(
        out,
        "messages   {} matched; unmatched {} sends, {} receives{}{}",
        r.matched,
        r.unmatched_sends,
        r.unmatched_recvs,
        if r.dropped > 0 {
            format!(" ({} dropped: too many waiting at once)", r.dropped)
        } else {
            String::new()
        },
        if r.unknown_peers > 0 {
            format!("; {} to or from ranks without a file", r.unknown_peers)
        } else {
            String::new()
        }
    )?;
    writeln!(out)?;
    writeln!(
        out,
        "{:>5}  {:<24} {:>16} {:>12}  {:<10} {:>14}  method",
        "rank", "file", "offset", "drift (ppm)", "from", "in/out"
    )?;
    for p in &r.processes {
        let (from, inout, method) = match p.from {
            Some(f) => (
                format!("rank {}", r.processes[f.peer].rank),
                format!("{}/{}", f.received, f.sent),
                match f.line.drift_range {
                    Some((a, b)) => format!(
                        "{} (pair drift {:+.3}, feasible {:+.3}..{:+.3} ppm)",
                        f.line.method.name(),
                        f.line.drift * 1e6,
                        a * 1e6,
                        b * 1e6
                    ),
                    None => f.line.method.name().to_owned(),
                },
            ),
            None if std::ptr::eq(p, reference) => {
                ("reference".into(), String::new(), String::new())
            }
            None => (
                "-".into(),
                String::new(),
                "uncorrected: no message with the others".into(),
            ),
        };
        writeln!(
            out,
            "{:>5}  {:<24} {:>16} {:>12.3}  {:<10} {:>14}  {}",
            p.rank,
            printable(&p.file),
            ns(p.clock.offset_ns),
            p.drift_ppm(),
            from,
            inout,
            method
        )?;
    }
    writeln!(out)?;
    writeln!(
        out,
        "before     {}",
        violation_line(&r.before, r.min_latency_ns)
    )?;
    writeln!(
        out,
        "after      {}",
        violation_line(&r.after, r.min_latency_ns)
    )?;
    writeln!(
        out,
        "\nt_ref = t + shift + offset + drift * (t + shift): t is a process's time, shift places it by \
         its wall-clock start relative to the reference's"
    )
}

pub(crate) fn clock(args: ClockArgs) -> Result<ExitCode, Failure> {
    let report = args.sync.estimate(&args.files)?;
    let out = std::io::stdout();
    let mut out = BufWriter::new(out.lock());
    if args.json {
        writeln!(out, "{}", report_json(&report)).context("writing to stdout")?;
    } else {
        print_report(&mut out, &report).context("writing to stdout")?;
    }
    out.flush().context("writing to stdout")?;
    if report.after.reversed > 0 {
        eprintln!(
            "gyr: warning: {} receives still come before their sends: the clocks did not run at \
             constant rates (or a file holds another run)",
            report.after.reversed
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// One line on stderr saying what `--sync` did.
pub(crate) fn note(report: &ClockReport) {
    eprintln!(
        "gyr: clocks corrected from {} messages against rank {}: {} receives before their sends \
         before, {} after (`gyr trace clock` shows the estimates)",
        report.matched,
        report.processes[report.reference].rank,
        report.before.reversed,
        report.after.reversed
    );
}

/// Refuses `--reference` and `--min-latency` without `--sync`.
pub(crate) fn check_sync(sync: bool, args: &SyncArgs) -> Result<(), Failure> {
    if !sync && (args.reference.is_some() || args.min_latency.is_some()) {
        return Err(Failure::input(anyhow::anyhow!(
            "--reference and --min-latency choose how --sync corrects the clocks: add --sync"
        )));
    }
    Ok(())
}
