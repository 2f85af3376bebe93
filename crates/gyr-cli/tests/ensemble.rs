//! `gyr ensemble` end to end, over the NPSS compressor: a grid of runs where one member hangs,
//! one crashes and one diverges; the hung and crashed members are retried, left out and their
//! points filled, the diverged one is retried with the rules' remedy (`--relax 0.6` from
//! examples/npss/watch/rules.toml) and converges; the map holds every grid point and the cycle
//! model reads it; the same request again is served from the cache. Also: a whole line left
//! out fails with exit status 1, and mistakes in the request with 2.
//!
//! This test has its own `main` (`harness = false` in Cargo.toml): run as
//! `ensemble npss-compressor ARGS...`, it is the compressor (the example's binaries are not
//! built for gyr-cli's tests), which the ensembles it starts run.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("npss-compressor") {
        std::process::exit(gyr_example_npss::compressor::main(&args[2..]));
    }
    let filters: Vec<&str> = args[1..]
        .iter()
        .map(String::as_str)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let tests: [(&str, fn()); 3] = [
        (
            "zooms_over_hung_crashed_and_diverged_members",
            zooms_over_hung_crashed_and_diverged_members,
        ),
        ("a_whole_line_left_out_fails", a_whole_line_left_out_fails),
        ("mistakes_are_bad_input", mistakes_are_bad_input),
    ];
    let mut failed = Vec::new();
    let mut ran = 0;
    for (name, test) in tests {
        if !filters.is_empty() && !filters.iter().any(|f| name.contains(f)) {
            continue;
        }
        ran += 1;
        eprintln!("test {name} ...");
        match std::panic::catch_unwind(test) {
            Ok(()) => eprintln!("test {name} ... ok"),
            Err(_) => {
                eprintln!("test {name} ... FAILED");
                failed.push(name);
            }
        }
    }
    eprintln!(
        "test result: {}. {} passed; {} failed",
        if failed.is_empty() { "ok" } else { "FAILED" },
        ran - failed.len(),
        failed.len()
    );
    if !failed.is_empty() {
        std::process::exit(1);
    }
}

fn watch_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/npss/watch")
}

fn compressor() -> String {
    std::env::current_exe()
        .expect("the test knows its path")
        .display()
        .to_string()
}

fn gyr(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gyr"))
        .current_dir(dir)
        .args(args)
        .env("GYR_SOCKET_DIR", dir.join("sock"))
        .env("XDG_CACHE_HOME", dir.join("xdg"))
        .env_remove("GYR_HUB")
        .env_remove("GYR_TRACE")
        .output()
        .expect("gyr runs")
}

fn text(o: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn setup() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("sock")).unwrap();
    dir
}

/// The request: 2 speeds × 3 back pressures, one member hanging at iteration 50, one
/// crashing there, one started with a relaxation factor that diverges.
fn request(dir: &Path, out: &str) -> Vec<String> {
    let spec = watch_dir().join("compressor.toml");
    let rules = watch_dir().join("rules.toml");
    let a: Vec<String> = vec![
        "ensemble".into(),
        "--spec".into(),
        spec.display().to_string(),
        "--rules".into(),
        rules.display().to_string(),
        "--grid".into(),
        "speed=0.9,1.0".into(),
        "--grid".into(),
        "back_pressure=1.2:1.6:3".into(),
        "--result".into(),
        "mass_flow,recovery".into(),
        "--from".into(),
        "result.dat".into(),
        "--jobs".into(),
        "2".into(),
        // Generous: a member that runs prints a line every 10 iterations, within milliseconds.
        "--timeout".into(),
        "8".into(),
        "--cache".into(),
        dir.join("cache").display().to_string(),
        "--out".into(),
        out.into(),
        "--json".into(),
        "--override".into(),
        "speed=0.9,back_pressure=1.4: --fault hang".into(),
        "--override".into(),
        "speed=1.0,back_pressure=1.2: --fault crash".into(),
        "--override".into(),
        "speed=1.0,back_pressure=1.6: --relax 1.2".into(),
        "--".into(),
        compressor(),
        "npss-compressor".into(),
        "--speed".into(),
        "{speed}".into(),
        "--back_pressure".into(),
        "{back_pressure}".into(),
        "--relax".into(),
        "0.8".into(),
    ];
    a
}

fn member<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["members"]
        .as_array()
        .expect("members")
        .iter()
        .find(|m| m["name"] == name)
        .unwrap_or_else(|| panic!("no member {name} in {report:#}"))
}

fn verdicts(m: &Value) -> Vec<String> {
    m["attempts"]
        .as_array()
        .expect("attempts")
        .iter()
        .map(|a| a["verdict"].as_str().unwrap_or("").to_owned())
        .collect()
}

/// The map's points: (speed, back pressure) → (mass flow, recovery).
fn points(map: &str) -> Vec<[f64; 4]> {
    map.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let v: Vec<f64> = l
                .split_whitespace()
                .map(|x| x.parse().expect("a number"))
                .collect();
            [v[0], v[1], v[2], v[3]]
        })
        .collect()
}

fn zooms_over_hung_crashed_and_diverged_members() {
    let dir = setup();
    let d = dir.path();
    let args = request(d, "compressor.map");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = gyr(d, &args);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let report: Value = serde_json::from_slice(&o.stdout).expect("one JSON object");
    assert_eq!(report["cached"], false);
    assert_eq!(report["map_error"], Value::Null, "{}", text(&o));

    // Converged at once.
    for name in [
        "speed=0.9,back_pressure=1.2",
        "speed=0.9,back_pressure=1.6",
        "speed=1.0,back_pressure=1.4",
    ] {
        let m = member(&report, name);
        assert_eq!(m["status"], "ok", "{m:#}");
        assert_eq!(verdicts(m), ["ok"]);
    }
    // Hung twice: retried, then left out and filled.
    let hung = member(&report, "speed=0.9,back_pressure=1.4");
    assert_eq!(hung["status"], "left out", "{hung:#}");
    assert_eq!(verdicts(hung), ["hung", "hung"]);
    assert!(
        hung["attempts"][0]["why"]
            .as_str()
            .unwrap()
            .contains("no output for 8 s"),
        "{hung:#}"
    );
    assert!(
        hung["filled"]
            .as_str()
            .unwrap_or("")
            .contains("interpolated along back_pressure"),
        "{hung:#}"
    );
    // Crashed twice: the same.
    let crashed = member(&report, "speed=1.0,back_pressure=1.2");
    assert_eq!(crashed["status"], "left out", "{crashed:#}");
    assert_eq!(verdicts(crashed), ["failed", "failed"]);
    assert!(
        crashed["attempts"][1]["why"]
            .as_str()
            .unwrap()
            .contains("SIGABRT"),
        "{crashed:#}"
    );
    assert!(crashed["filled"].is_string(), "{crashed:#}");
    // Diverged: the rules asked for half the relaxation factor, and the retry converged.
    let diverged = member(&report, "speed=1.0,back_pressure=1.6");
    assert_eq!(diverged["status"], "retried ok", "{diverged:#}");
    assert_eq!(verdicts(diverged), ["diverged", "ok"]);
    assert!(
        diverged["attempts"][0]["why"]
            .as_str()
            .unwrap()
            .contains("--relax 0.6"),
        "{diverged:#}"
    );
    let retry = diverged["attempts"][1]["command"].as_str().unwrap();
    assert!(retry.contains("--relax 0.6"), "{retry}");
    assert!(!retry.contains("1.2 --relax"), "{retry}");
    assert!(diverged["results"]["mass_flow"].as_f64().unwrap() > 0.5);

    // The plain progress said so too.
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("speed=0.9,back_pressure=1.4: hung (no output for 8 s): retrying"),
        "{err}"
    );
    assert!(
        err.contains("speed=1.0,back_pressure=1.6: diverged"),
        "{err}"
    );
    assert!(err.contains("2 filled"), "{err}");

    // Every grid point is in the map, the filled ones said so, and the cycle reads it.
    let map = std::fs::read_to_string(d.join("compressor.map")).unwrap();
    assert!(
        map.starts_with("# speed back_pressure mass_flow recovery\n"),
        "{map}"
    );
    let p = points(&map);
    let mut grid: Vec<(f64, f64)> = p.iter().map(|q| (q[0], q[1])).collect();
    grid.sort_by(|a, b| a.partial_cmp(b).unwrap());
    assert_eq!(
        grid,
        [
            (0.9, 1.2),
            (0.9, 1.4),
            (0.9, 1.6),
            (1.0, 1.2),
            (1.0, 1.4),
            (1.0, 1.6)
        ]
    );
    assert!(
        map.contains("# filled: speed=0.9,back_pressure=1.4, interpolated"),
        "{map}"
    );
    assert!(
        map.contains("# filled: speed=1.0,back_pressure=1.2"),
        "{map}"
    );
    let at = |s: f64, b: f64| *p.iter().find(|q| q[0] == s && q[1] == b).unwrap();
    let (lo, mid, hi) = (at(0.9, 1.2), at(0.9, 1.4), at(0.9, 1.6));
    for k in [2, 3] {
        assert!(
            (mid[k] - (lo[k] + hi[k]) / 2.0).abs() < 1e-9,
            "the hung member's point is halfway: {map}"
        );
    }
    for q in &p {
        assert!(q[2].is_finite() && q[2] > 0.0 && q[3] > 0.5, "{map}");
    }
    let cycle_map = gyr_example_npss::map::Map::read(&d.join("compressor.map"))
        .expect("the cycle model reads the map");
    assert!((cycle_map.at(0.9, 1.2).0 - lo[2]).abs() < 1e-9);

    // The same request again: from the cache, at once, the same map.
    std::fs::remove_file(d.join("compressor.map")).unwrap();
    let o2 = gyr(d, &args);
    assert_eq!(o2.status.code(), Some(0), "{}", text(&o2));
    let again: Value = serde_json::from_slice(&o2.stdout).expect("one JSON object");
    assert_eq!(again["cached"], true, "{}", text(&o2));
    assert_eq!(again["key"], report["key"]);
    assert!(
        String::from_utf8_lossy(&o2.stderr).contains("the map is in the cache"),
        "{}",
        text(&o2)
    );
    assert_eq!(
        std::fs::read_to_string(d.join("compressor.map")).unwrap(),
        map
    );
    let key = report["key"].as_str().unwrap();
    assert!(d.join("cache").join(format!("{key}.map")).is_file());
    let about: Value = serde_json::from_slice(
        &std::fs::read(d.join("cache").join(format!("{key}.json"))).unwrap(),
    )
    .unwrap();
    assert_eq!(about["members"], 6);
    assert_eq!(about["filled"].as_array().map(Vec::len), Some(2));
}

fn a_whole_line_left_out_fails() {
    let dir = setup();
    let d = dir.path();
    let spec = watch_dir().join("compressor.toml");
    let exe = compressor();
    let o = gyr(
        d,
        &[
            "ensemble",
            "--spec",
            spec.to_str().unwrap(),
            "--grid",
            "speed=0.9,1.0",
            "--grid",
            "back_pressure=1.2,1.4",
            "--result",
            "mass_flow,recovery",
            "--from",
            "result.dat",
            "--out",
            "m.map",
            "--override",
            "speed=0.9: --fault crash",
            "--",
            &exe,
            "npss-compressor",
            "--speed",
            "{speed}",
            "--back_pressure",
            "{back_pressure}",
        ],
    );
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let t = text(&o);
    assert!(t.contains("the map cannot be built"), "{t}");
    assert!(t.contains("line speed=0.9"), "{t}");
    assert!(!d.join("m.map").exists());
    // Nothing was cached (the default cache, under XDG_CACHE_HOME).
    assert!(
        !d.join("xdg/gyr/ensemble").exists()
            || std::fs::read_dir(d.join("xdg/gyr/ensemble"))
                .unwrap()
                .next()
                .is_none()
    );
}

fn mistakes_are_bad_input() {
    let dir = setup();
    let d = dir.path();
    let spec = watch_dir().join("compressor.toml");
    let spec = spec.to_str().unwrap();
    let exe = compressor();
    let base = |grid: &str, result: &str, command: &[&str]| -> Output {
        let mut a = vec![
            "ensemble",
            "--spec",
            spec,
            "--grid",
            grid,
            "--result",
            result,
            "--from",
            "result.dat",
            "--out",
            "m.map",
            "--",
        ];
        a.extend_from_slice(command);
        gyr(d, &a)
    };
    let cases: [(Output, &str); 6] = [
        (
            base("speed=0.9,1.0", "mass_flow", &[&exe, "--speed", "{sped}"]),
            "no placeholder `{sped}`",
        ),
        (
            base("speed=0.9,1.0", "mass_flow", &[&exe, "--speed", "1"]),
            "appears nowhere in the command",
        ),
        (
            base("speed=0.9:1.0", "mass_flow", &[&exe, "{speed}"]),
            "LO:HI:COUNT",
        ),
        (
            base("speed=fast", "mass_flow", &[&exe, "{speed}"]),
            "not a number",
        ),
        (
            base("speed=1", "mass_flow", &["no-such-program-here", "{speed}"]),
            "cannot find the program",
        ),
        (
            base("speed=0:1:20000", "mass_flow", &[&exe, "{speed}"]),
            "10000",
        ),
    ];
    for (o, want) in cases {
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        let t = text(&o);
        assert!(t.contains(want), "want {want:?} in {t}");
    }
}
