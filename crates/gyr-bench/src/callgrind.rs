//! Instructions per event, counted by callgrind (Debian's `valgrind`).
//!
//! A capture child runs under callgrind twice, emitting 200 k and then 400 k events on its main
//! thread; only the producer's loop is counted (`--toggle-collect` on `timed_loop`, one file per
//! thread), and the difference divided by 200 k leaves the cost of one event, without start-up,
//! registration or the consumers' work.

use crate::capture::{Peer, Shape, Spec};
use crate::sensors::{child_command, output_within};
use serde_json::{Map, Value, json};

/// The peers counted, by their name in the JSON.
const COUNTED: [(&str, Peer, Shape); 5] = [
    ("gyr", Peer::Gyr, Shape::Fields),
    ("gyr_array", Peer::Gyr, Shape::Array),
    ("floor", Peer::Floor, Shape::Fields),
    ("floor_header", Peer::FloorHeader, Shape::Fields),
    ("tracing", Peer::Tracing, Shape::Fields),
];

/// Instructions per event for gyr, the floors and `tracing`, or `None` without valgrind.
pub(crate) fn instructions_per_event(quick: bool) -> anyhow::Result<Option<Map<String, Value>>> {
    if std::process::Command::new("valgrind")
        .arg("--version")
        .output()
        .is_err()
    {
        return Ok(None);
    }
    let (small, large) = if quick {
        (50_000, 100_000)
    } else {
        (200_000, 400_000)
    };
    let mut out = Map::new();
    for (name, peer, shape) in COUNTED {
        let a = count(peer, shape, small)?;
        let b = count(peer, shape, large)?;
        let per = (b as f64 - a as f64) / (large - small) as f64;
        out.insert(name.into(), json!((per * 10.0).round() / 10.0));
    }
    Ok(Some(out))
}

/// Instructions the main thread executes inside `timed_loop` emitting `events` events.
fn count(peer: Peer, shape: Shape, events: u64) -> anyhow::Result<u64> {
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("cg.out");
    let spec = Spec {
        peer,
        shape,
        threads: 1,
        events,
        runs: 1,
        no_warmup: true,
        // Room for every event: the producer never waits for the consumer under callgrind,
        // which runs one thread at a time.
        ring: 256 << 20,
        tracy_port: 0,
    };
    let wrapper = [
        "valgrind".to_owned(),
        "--tool=callgrind".to_owned(),
        "--separate-threads=yes".to_owned(),
        "--toggle-collect=*timed_loop*".to_owned(),
        format!("--callgrind-out-file={}", file.display()),
    ];
    let out = output_within(
        child_command(&spec, Some(&wrapper))?,
        std::time::Duration::from_secs(600),
    )?;
    anyhow::ensure!(
        out.status.success(),
        "callgrind on the {peer:?} measurement failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr).trim()
    );
    // With --separate-threads, thread 1 (the main thread) writes `<file>-01`.
    let main = dir.path().join("cg.out-01");
    let text = std::fs::read_to_string(&main).map_err(|e| {
        anyhow::anyhow!(
            "reading callgrind's output {}: {e}; files there: {:?}",
            main.display(),
            std::fs::read_dir(dir.path())
                .map(|d| d
                    .filter_map(|e| e.ok().map(|e| e.file_name()))
                    .collect::<Vec<_>>())
                .unwrap_or_default()
        )
    })?;
    text.lines()
        .find_map(|l| {
            l.strip_prefix("summary:")
                .or_else(|| l.strip_prefix("totals:"))
        })
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .ok_or_else(|| anyhow::anyhow!("no instruction total in {}", main.display()))
}
