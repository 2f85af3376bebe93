//! `gyr demo npss`: the NPSS example watched live (the first paper of the seeds: watch-dogs over
//! codes nobody may change, expert-system rules that warn and then steer, zooming).
//!
//! Three acts, all in the hub's web UI (or measured, `--headless --json`):
//! 1. zooming: `gyr ensemble` runs the compressor solver over a grid of speeds and back
//!    pressures, side by side, and builds the cycle model's compressor map;
//! 2. the compressor solver, started with too large a relaxation factor, diverges; the hub's
//!    rules catch it, raise an alert and restart it through its watch-dog with half the factor,
//!    and it converges;
//! 3. the engine cycle model runs its throttle schedule on the ensemble's map, watched with
//!    gauges at the spec's design points and the rules' physical checks.
//!
//! The programs are `npss-compressor` and `npss-cycle` of examples/npss, run as
//! `gyr npss-program compressor|cycle ARGS` (the gyr binary does not start gyr's runtime for
//! them: they are as uninstrumented as any production code).

use crate::Failure;
use clap::Args;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

const RULES: &str = include_str!("../../../examples/npss/watch/rules.toml");
const COMPRESSOR_SPEC: &str = include_str!("../../../examples/npss/watch/compressor.toml");
const CYCLE_SPEC: &str = include_str!("../../../examples/npss/watch/cycle.toml");

/// Arguments of `gyr demo npss`.
#[derive(Debug, Args)]
pub(crate) struct NpssArgs {
    /// Where the web UI listens.
    #[arg(long, default_value = "127.0.0.1:7070")]
    listen: SocketAddr,
    /// Another name the web UI may be reached by, as NAME or NAME:PORT.
    #[arg(long, value_name = "NAME[:PORT]")]
    allow_host: Vec<String>,
    /// Run without waiting for a browser, and end once the cycle model has run its schedule.
    #[arg(long)]
    headless: bool,
    /// With --headless: end with one JSON object as the last line.
    #[arg(long)]
    json: bool,
    /// A shorter run (a smaller grid, faster programs): what the tests use.
    #[arg(long)]
    quick: bool,
    /// Keep the programs' files in this directory (default: a temporary one, removed at the end).
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
}

/// `gyr npss-program compressor|cycle ARGS...`: one of the example's programs, without gyr.
pub(crate) fn program(which: &str, args: &[String]) -> Result<ExitCode, Failure> {
    let code = match which {
        "compressor" => gyr_example_npss::compressor::main(args),
        "cycle" => gyr_example_npss::cycle::main(args),
        other => {
            return Err(Failure::input(anyhow::anyhow!(
                "no NPSS program `{other}`: compressor or cycle"
            )));
        }
    };
    Ok(ExitCode::from(code.clamp(0, 255) as u8))
}

/// A child process, killed when dropped.
struct Child_(Child);

impl Drop for Child_ {
    fn drop(&mut self) {
        // A watch-dog passes SIGTERM on to its program; kill() would leave it orphaned.
        // SAFETY: kill has no memory-safety preconditions; the pid is our child's.
        unsafe {
            libc::kill(self.0.id() as i32, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn exe() -> Result<PathBuf, Failure> {
    std::env::current_exe()
        .map_err(|e| Failure::from(anyhow::anyhow!("cannot find the gyr binary: {e}")))
}

/// `gyr watchdog --spec SPEC --hub HUB --quiet -- gyr npss-program WHICH ARGS`, in `dir`.
fn watched(
    dir: &Path,
    spec: &Path,
    hub: SocketAddr,
    which: &str,
    args: &[&str],
) -> Result<Child_, Failure> {
    let exe = exe()?;
    let mut cmd = Command::new(&exe);
    cmd.args(["watchdog", "--spec"])
        .arg(spec)
        .args(["--hub", &hub.to_string(), "--quiet", "--linger", "5", "--"])
        .arg(&exe)
        .args(["npss-program", which])
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    cmd.spawn()
        .map(Child_)
        .map_err(|e| Failure::from(anyhow::anyhow!("cannot start a watch-dog: {e}")))
}

fn write(path: &Path, text: &str) -> Result<(), Failure> {
    std::fs::write(path, text)
        .map_err(|e| Failure::from(anyhow::anyhow!("cannot write {}: {e}", path.display())))
}

fn mkdir(path: &Path) -> Result<(), Failure> {
    std::fs::create_dir_all(path)
        .map_err(|e| Failure::from(anyhow::anyhow!("cannot create {}: {e}", path.display())))
}

/// The alerts the hub keeps, printed as they come.
struct Alerts {
    session: gyr_client::Session,
    seen: usize,
    echo: bool,
    all: Vec<gyr_proto::v1::AlertInfo>,
}

impl Alerts {
    fn poll(&mut self) {
        let Ok(alerts) = self.session.alerts(0, 0) else {
            return;
        };
        for a in alerts.iter().skip(self.seen) {
            if self.echo {
                let rule = if a.rule.is_empty() { "-" } else { &a.rule };
                println!(
                    "    alert  {:<8} {:<32} {}",
                    a.severity,
                    rule,
                    crate::show::printable(&a.message)
                );
            }
            self.all.push(a.clone());
        }
        self.seen = self.seen.max(alerts.len());
    }

    fn fired(&self, rule: &str) -> bool {
        self.all.iter().any(|a| a.rule == rule)
    }
}

/// Waits for `child` to end (printing alerts meanwhile), at most `limit`; its exit code.
fn wait(child: &mut Child_, alerts: &mut Alerts, limit: Duration) -> Option<i32> {
    let deadline = Instant::now() + limit;
    loop {
        alerts.poll();
        if let Ok(Some(status)) = child.0.try_wait() {
            std::thread::sleep(Duration::from_millis(300));
            alerts.poll();
            return status.code();
        }
        if Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

pub(crate) fn run(a: NpssArgs) -> Result<ExitCode, Failure> {
    let temp;
    let root = match &a.dir {
        Some(d) => {
            mkdir(d)?;
            std::path::absolute(d)?
        }
        None => {
            temp = tempfile::tempdir()?;
            temp.path().to_owned()
        }
    };
    let say = !a.json;
    let rules = root.join("rules.toml");
    let compressor_spec = root.join("compressor.toml");
    let cycle_spec = root.join("cycle.toml");
    write(&rules, RULES)?;
    write(&compressor_spec, COMPRESSOR_SPEC)?;
    write(&cycle_spec, CYCLE_SPEC)?;
    let hub = gyr_hub::Hub::start(gyr_hub::HubConfig {
        listen: a.listen,
        grpc: Some(SocketAddr::from(([127, 0, 0, 1], 0))),
        discover: false,
        rules: Some(rules.clone()),
        allow_hosts: a.allow_host.clone(),
        ..Default::default()
    })
    .map_err(|e| match e {
        gyr_hub::HubError::Runtime(_) => Failure::from(anyhow::Error::from(e)),
        _ => Failure::input(e),
    })?;
    let grpc = hub
        .grpc_addr()
        .ok_or_else(|| Failure::from(anyhow::anyhow!("the hub serves no gRPC API")))?;
    let mut alerts = Alerts {
        session: gyr_client::Session::connect(&grpc.to_string(), None, "gyr demo npss")?,
        seen: 0,
        echo: say,
        all: Vec::new(),
    };
    if say {
        println!("gyr demo npss: open http://{} in a browser", hub.addr());
        println!(
            "  The programs are examples/npss's, which know nothing of gyr: watch-dogs turn their output into events, the hub's rules ({}) warn and steer.",
            rules.display()
        );
    }
    let (delay_compressor, delay_cycle, t_end) = if a.quick {
        ("2", "10", "6")
    } else {
        ("20", "100", "30")
    };

    // Act 1: zooming.
    let map = root.join("compressor.map");
    let ensemble_dir = root.join("ensemble");
    mkdir(&ensemble_dir)?;
    if say {
        println!(
            "\n1. Zooming: the compressor solver over a grid of speeds and back pressures, side by side (one instance each), builds the cycle model's map."
        );
    }
    let ensemble_exit = ensemble(
        &a,
        &root,
        &ensemble_dir,
        &map,
        &compressor_spec,
        &rules,
        grpc,
    )?;
    alerts.poll();

    // Act 2: a diverging solver, caught and restarted by the rules.
    let compressor_dir = root.join("compressor");
    mkdir(&compressor_dir)?;
    write(
        &compressor_dir.join("compressor.in"),
        &format!(
            "# npss-compressor input\nspeed = 1.0\nback_pressure = 1.4\nrelax = 1.2\ndelay_ms = {delay_compressor}\n"
        ),
    )?;
    if say {
        println!(
            "\n2. The compressor solver, started with relax = 1.2 (above 1 its scheme diverges): the rules catch the divergence, alert, and restart it through its watch-dog with half the factor."
        );
    }
    let mut compressor = watched(
        &compressor_dir,
        &compressor_spec,
        grpc,
        "compressor",
        &["--input", "compressor.in"],
    )?;
    let compressor_exit = wait(&mut compressor, &mut alerts, Duration::from_secs(300));
    let caught = alerts.fired("diverging");
    let restarted = alerts.fired("restart-with-smaller-relaxation");
    if say {
        println!(
            "   divergence caught: {}; restarted with a smaller factor: {}; the solver {}",
            yes(caught),
            yes(restarted),
            match compressor_exit {
                Some(0) => "converged".to_owned(),
                Some(c) => format!("ended with status {c}"),
                None => "did not end in time".to_owned(),
            }
        );
    }

    // Act 3: the cycle model on the ensemble's map.
    let cycle_dir = root.join("cycle");
    mkdir(&cycle_dir)?;
    if say {
        println!(
            "\n3. The engine cycle model runs its throttle schedule on the ensemble's map: gauges at the spec's design points, the rules' mass-balance and pressure-ratio checks."
        );
    }
    let map_arg = map.display().to_string();
    let mut cycle_args = vec!["--delay_ms", delay_cycle, "--t_end", t_end];
    if map.exists() {
        cycle_args.extend(["--map", map_arg.as_str()]);
    }
    let mut cycle = watched(&cycle_dir, &cycle_spec, grpc, "cycle", &cycle_args)?;
    let cycle_exit = wait(&mut cycle, &mut alerts, Duration::from_secs(600));
    let mut by_rule = std::collections::BTreeMap::<String, u64>::new();
    for x in &alerts.all {
        let rule = if x.rule.is_empty() {
            "(program)"
        } else {
            &x.rule
        };
        *by_rule.entry(rule.to_owned()).or_default() += 1;
    }
    let ok = ensemble_exit == Some(0)
        && caught
        && restarted
        && compressor_exit == Some(0)
        && cycle_exit == Some(0);
    if a.json {
        println!(
            "{}",
            serde_json::json!({
                "demo": "npss",
                "ensemble_exit": ensemble_exit,
                "map_built": map.exists(),
                "divergence_caught": caught,
                "restarted_by_rule": restarted,
                "compressor_exit": compressor_exit,
                "cycle_exit": cycle_exit,
                "alerts": alerts.all.len(),
                "alerts_by_rule": by_rule,
                "ok": ok,
            })
        );
    } else if a.headless {
        println!("\ngyr demo npss: done ({} alerts).", alerts.all.len());
    } else {
        println!(
            "\ngyr demo npss: done ({} alerts). The page stays up: Ctrl-C ends.",
            alerts.all.len()
        );
    }
    if !a.headless {
        loop {
            std::thread::sleep(Duration::from_secs(3600));
        }
    }
    drop(hub);
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn yes(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

/// Act 1: `gyr ensemble` over the compressor solver; its exit code.
#[allow(clippy::too_many_arguments)]
fn ensemble(
    a: &NpssArgs,
    root: &Path,
    dir: &Path,
    map: &Path,
    spec: &Path,
    rules: &Path,
    hub: SocketAddr,
) -> Result<Option<i32>, Failure> {
    let exe = exe()?;
    let (speeds, pressures, delay) = if a.quick {
        ("0.8,1.0", "1.3:1.7:3", "0")
    } else {
        ("0.6,0.8,1.0,1.2", "1.2:1.8:5", "1")
    };
    let mut cmd = Command::new(&exe);
    cmd.arg("ensemble")
        .arg("--spec")
        .arg(spec)
        .arg("--rules")
        .arg(rules)
        .args(["--grid", &format!("speed={speeds}")])
        .args(["--grid", &format!("back_pressure={pressures}")])
        .args(["--result", "mass_flow,recovery", "--from", "result.dat"])
        .args(["--timeout", "60", "--hub", &hub.to_string()])
        // One member started with too large a factor: the rules mark it diverged, and its
        // retry runs with their remedy.
        .args([
            "--override",
            &format!(
                "speed={},back_pressure={}: --relax 1.2",
                first(speeds),
                first_of_range(pressures)
            ),
        ])
        .arg("--keep")
        .arg(dir)
        .arg("--cache")
        .arg(root.join("cache"))
        .arg("--out")
        .arg(map)
        .arg("--")
        .arg(&exe)
        .args([
            "npss-program",
            "compressor",
            "--speed",
            "{speed}",
            "--back_pressure",
            "{back_pressure}",
            "--relax",
            "0.8",
            "--delay_ms",
            delay,
        ])
        .stdin(Stdio::null());
    if a.json {
        cmd.stdout(Stdio::null()).stderr(Stdio::null());
    }
    let status = cmd
        .status()
        .map_err(|e| Failure::from(anyhow::anyhow!("cannot start gyr ensemble: {e}")))?;
    Ok(status.code())
}

/// The first value of a list `a,b,c`.
fn first(list: &str) -> &str {
    list.split(',').next().unwrap_or(list)
}

/// The first value of a range `lo:hi:count`.
fn first_of_range(range: &str) -> &str {
    range.split(':').next().unwrap_or(range)
}
