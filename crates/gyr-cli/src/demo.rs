//! `gyr demo`: the main job. It starts the hub with its web UI and two steerable programs
//! (examples/md, deliberately imbalanced, and examples/nbody), prints the URL, and runs until
//! Ctrl-C. `--headless` runs the molecular-dynamics part without a browser: imbalanced first,
//! then with the balancing policy switched on as a client would, and prints what it measured.
//!
//! The programs run as child processes of `gyr` itself (`gyr demo-program md|nbody`), so
//! that they are real separate processes the hub attaches to, as it would to the user's own.
//!
//! # Sharing the cores
//!
//! What the demo shows, md's step time falling once its domains are balanced, needs md to get
//! the cores. md's domain threads meet at barriers several times a step, so a step lasts as
//! long as its slowest thread, and any other program on the cores delays each meeting: nbody
//! running flat out took the second core of a 2-core machine from the balanced md even at
//! the lowest priority (a woken thread waits for the running one's time slice), and
//! balancing then gained nothing. nbody therefore runs at [`NBODY_MAX_RATE`] steps a second
//! (its `max_rate`, steerable from the page), which keeps it to a few percent of one core.

use crate::Failure;
use crate::demo_heat::HeatArgs;
use clap::{Args, Subcommand};
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

/// Arguments of `gyr demo`.
#[derive(Debug, Args)]
pub(crate) struct DemoArgs {
    #[command(subcommand)]
    other: Option<OtherDemo>,
    /// Run without the browser: md imbalanced, then balanced by its policy; print the result.
    #[arg(long)]
    headless: bool,
    /// How long the headless run lasts, in seconds (about half before the policy acts).
    #[arg(long, default_value_t = 30)]
    duration: u64,
    /// With --headless: end with one JSON object as the last line.
    #[arg(long)]
    json: bool,
    /// Where the web UI listens.
    #[arg(long, default_value = "127.0.0.1:7070")]
    listen: SocketAddr,
    /// Another name the web UI may be reached by, as NAME or NAME:PORT (an SSH tunnel's, a
    /// proxy's); repeatable. Requests naming other hosts or from other sites' pages are refused.
    #[arg(long, value_name = "NAME[:PORT]")]
    allow_host: Vec<String>,
    /// Particles in the molecular-dynamics program.
    #[arg(long, default_value_t = gyr_example_md::DEFAULT_PARTICLES)]
    particles: usize,
    /// Domains (threads) of the molecular-dynamics program, 2 to 64.
    #[arg(long, default_value_t = gyr_example_md::DEFAULT_DOMAINS)]
    domains: usize,
}

/// nbody's pace in the demo, in steps a second: enough for lively charts, while its 256
/// bodies then take about 2 % of one core, and it leaves md the cores (see the module doc).
pub(crate) const NBODY_MAX_RATE: f64 = 50.0;

/// Other demos.
#[derive(Debug, Subcommand)]
enum OtherDemo {
    /// The heat-diffusion example with a live summary in the terminal, writing a trace.
    Heat(HeatArgs),
    /// The NPSS example: uninstrumented solvers watched through their output, rules that
    /// warn and restart a diverging one, an ensemble building the engine model's map.
    Npss(crate::demo_npss::NpssArgs),
}

/// Which program `gyr demo-program` runs.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub(crate) enum DemoProgram {
    /// examples/md until killed, or for --steps-before/--steps-after in headless form.
    Md,
    /// examples/nbody until killed.
    Nbody,
}

/// Arguments of the hidden `gyr demo-program`.
#[derive(Debug, Args)]
pub(crate) struct ProgramArgs {
    program: DemoProgram,
    #[arg(long, default_value_t = gyr_example_md::DEFAULT_PARTICLES)]
    particles: usize,
    #[arg(long, default_value_t = gyr_example_md::DEFAULT_DOMAINS)]
    domains: usize,
    /// Headless md: steps before the policy is switched on.
    #[arg(long, default_value_t = 0)]
    steps_before: u64,
    /// Headless md: steps after.
    #[arg(long, default_value_t = 0)]
    steps_after: u64,
}

/// A child program, killed when dropped.
struct Program(Child);

impl Drop for Program {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn(
    args: &[String],
    socket_dir: Option<&std::path::Path>,
    hub: Option<SocketAddr>,
    nice: bool,
) -> Result<Program, Failure> {
    let exe = std::env::current_exe()
        .map_err(|e| Failure::from(anyhow::anyhow!("cannot find the gyr binary: {e}")))?;
    // nbody runs at the lowest priority: it shares the machine with md, whose balancing the
    // demo is about, and must not take md's cores.
    let mut cmd = if nice {
        let mut c = Command::new("nice");
        c.args(["-n", "19"]).arg(exe);
        c
    } else {
        Command::new(exe)
    };
    cmd.arg("demo-program").args(args).stdin(Stdio::null());
    if let Some(d) = socket_dir {
        cmd.env("GYR_SOCKET_DIR", d);
    }
    if let Some(h) = hub {
        cmd.env("GYR_HUB", h.to_string());
    }
    cmd.stdout(Stdio::piped()).stderr(Stdio::inherit());
    cmd.spawn()
        .map(Program)
        .map_err(|e| Failure::from(anyhow::anyhow!("cannot start a demo program: {e}")))
}

fn start_hub(
    listen: SocketAddr,
    allow_hosts: Vec<String>,
    socket_dir: std::path::PathBuf,
) -> Result<gyr_hub::Hub, Failure> {
    gyr_hub::Hub::start(gyr_hub::HubConfig {
        listen,
        // Any free port: md pushes its stream there (GYR_HUB), nbody is attached to.
        grpc: Some(SocketAddr::from(([127, 0, 0, 1], 0))),
        socket_dir,
        allow_hosts,
        ..Default::default()
    })
    .map_err(|e| match e {
        gyr_hub::HubError::Runtime(_) => Failure::from(anyhow::Error::from(e)),
        _ => Failure::input(e),
    })
}

pub(crate) fn run(a: DemoArgs) -> Result<ExitCode, Failure> {
    match a.other {
        Some(OtherDemo::Heat(h)) => return crate::demo_heat::run(h),
        Some(OtherDemo::Npss(n)) => return crate::demo_npss::run(n),
        None => {}
    }
    if a.particles < 100 {
        return Err(Failure::input(anyhow::anyhow!(
            "--particles {}: give at least 100",
            a.particles
        )));
    }
    if !(2..=gyr_example_md::MAX_DOMAINS).contains(&a.domains) {
        return Err(Failure::input(anyhow::anyhow!(
            "--domains {}: give 2 to {} (one domain has nothing to balance)",
            a.domains,
            gyr_example_md::MAX_DOMAINS
        )));
    }
    if a.headless {
        return headless(&a);
    }
    let hub = start_hub(
        a.listen,
        a.allow_host.clone(),
        gyr_client::discovery::socket_dir(),
    )?;
    let md = spawn(
        &[
            "md".into(),
            "--particles".into(),
            a.particles.to_string(),
            "--domains".into(),
            a.domains.to_string(),
        ],
        None,
        hub.grpc_addr(),
        false,
    )?;
    let nbody = spawn(&["nbody".into()], None, None, true)?;
    let (md_pid, nbody_pid) = (md.0.id(), nbody.0.id());
    println!("gyr demo: open http://{} in a browser", hub.addr());
    if let Some(g) = hub.grpc_addr() {
        println!(
            "  md (pid {md_pid}) pushes its events to the hub's gRPC API at {g}; the hub found nbody (pid {nbody_pid}) and attached to it."
        );
    }
    println!(
        "  md (molecular dynamics) starts imbalanced: most particles sit in the first of its {} domains (see Load balance).",
        a.domains
    );
    println!(
        "  Steer it: set md.auto_balance to true (the in-process policy balances it; or `gyr set {md_pid} md.auto_balance true`),"
    );
    println!(
        "  press md.balance, or edit md.boundaries; then watch step_time.ms fall (`gyr watch {md_pid} step_time`)."
    );
    println!(
        "  nbody runs beside it at {NBODY_MAX_RATE} steps/s (nbody.max_rate; 0 lets it take the cores). Ctrl-C stops everything."
    );
    let (tx, rx) = std::sync::mpsc::channel();
    crate::hub_cmd::on_ctrl_c(tx);
    let _ = rx.recv();
    println!("gyr demo: stopped");
    Ok(ExitCode::SUCCESS)
}

fn headless(a: &DemoArgs) -> Result<ExitCode, Failure> {
    if a.duration < 4 {
        return Err(Failure::input(anyhow::anyhow!(
            "--duration {}: give at least 4 seconds",
            a.duration
        )));
    }
    // Steps from the duration, at the step times this demo shows on 2 cores (about 13 ms
    // imbalanced, 8 ms balanced with 60 000 particles), scaled with the particle count.
    let scale = a.particles as f64 / gyr_example_md::DEFAULT_PARTICLES as f64;
    let half_ms = a.duration as f64 * 500.0;
    let steps_before = ((half_ms / (13.0 * scale)) as u64).clamp(50, 4000);
    let steps_after = ((half_ms / (8.0 * scale)) as u64).clamp(60, 5000);
    let dir = tempfile::tempdir()
        .map_err(|e| Failure::from(anyhow::anyhow!("cannot make a temporary directory: {e}")))?;
    let hub = start_hub(
        "127.0.0.1:0".parse().expect("an address"),
        Vec::new(),
        dir.path().to_owned(),
    )?;
    let mut md = spawn(
        &[
            "md".into(),
            "--particles".into(),
            a.particles.to_string(),
            "--domains".into(),
            a.domains.to_string(),
            "--steps-before".into(),
            steps_before.to_string(),
            "--steps-after".into(),
            steps_after.to_string(),
        ],
        Some(dir.path()),
        hub.grpc_addr(),
        false,
    )?;
    let pid = md.0.id();
    let started = Instant::now();
    if !a.json {
        println!(
            "gyr demo --headless: md (pid {pid}, {} particles) {steps_before} steps imbalanced, then {steps_after} with the balancing policy on; the hub at http://{} watches",
            a.particles,
            hub.addr()
        );
    }
    let out = md.0.stdout.take().expect("piped");
    let mut report = None;
    for line in BufReader::new(out).lines().map_while(Result::ok) {
        if let Some(j) = line.strip_prefix("report ") {
            report = serde_json::from_str::<serde_json::Value>(j).ok();
        }
    }
    let status =
        md.0.wait()
            .map_err(|e| Failure::from(anyhow::anyhow!("{e}")))?;
    let Some(report) = report.filter(|_| status.success()) else {
        return Err(Failure::from(anyhow::anyhow!(
            "the md program failed ({status}); its messages are above"
        )));
    };
    // Let the hub take in the last batches.
    std::thread::sleep(Duration::from_millis(600));
    let received = hub
        .programs()
        .iter()
        .find(|(p, _, _)| *p == pid)
        .map(|(_, _, n)| *n)
        .unwrap_or(0);
    let missed = hub.snapshot()["processes"]
        .as_array()
        .and_then(|ps| ps.iter().find(|p| p["pid"] == pid))
        .and_then(|p| p["missed"].as_u64())
        .unwrap_or(0);
    let lost = report["lost"].as_u64().unwrap_or(0) + missed;
    let before = report["step_ms_before"].as_f64().unwrap_or(f64::NAN);
    let after = report["step_ms_after"].as_f64().unwrap_or(f64::NAN);
    println!(
        "  imbalanced: {before:.2} ms a step (imbalance {:.2}); balanced from step {}: {after:.2} ms a step (imbalance {:.2}), {:.0} % less",
        report["imbalance_before"].as_f64().unwrap_or(0.0),
        report["balanced_at"].as_u64().unwrap_or(0),
        report["imbalance_after"].as_f64().unwrap_or(0.0),
        (1.0 - after / before) * 100.0
    );
    println!(
        "  {} steps in {:.1} s; the hub received {received} events, {lost} lost",
        report["steps"],
        started.elapsed().as_secs_f64()
    );
    if a.json {
        println!(
            "{}",
            serde_json::json!({
                "steps": report["steps"],
                "step_ms_before": before,
                "step_ms_after": after,
                "imbalance_before": report["imbalance_before"],
                "imbalance_after": report["imbalance_after"],
                "events_received": received,
                "lost": lost,
            })
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `gyr demo-program`: one of the demo's programs, in this process.
pub(crate) fn program(a: ProgramArgs) -> Result<ExitCode, Failure> {
    let rt = gyr::init().map_err(|e| Failure::from(anyhow::anyhow!("cannot start gyr: {e}")))?;
    let stop = std::sync::atomic::AtomicBool::new(false);
    match a.program {
        DemoProgram::Nbody => {
            let sim = gyr_example_nbody::register(256)
                .map_err(|e| Failure::from(anyhow::anyhow!("{e}")))?;
            sim.write().max_rate = NBODY_MAX_RATE;
            gyr_example_nbody::run(&sim, 2, 0, &stop);
        }
        DemoProgram::Md if a.steps_before > 0 => {
            let config = gyr_example_md::Config::new(a.particles, a.domains);
            let r = gyr_example_md::run_headless(&config, a.steps_before, a.steps_after)
                .map_err(|e| Failure::from(anyhow::anyhow!("{e}")))?;
            let summary = rt.shutdown();
            println!(
                "report {}",
                serde_json::json!({
                    "steps": r.steps,
                    "step_ms_before": r.step_ms_before,
                    "step_ms_after": r.step_ms_after,
                    "imbalance_before": r.imbalance_before,
                    "imbalance_after": r.imbalance_after,
                    "balanced_at": r.balanced_at,
                    "lost": summary.lost,
                })
            );
            return Ok(ExitCode::SUCCESS);
        }
        DemoProgram::Md => {
            let config = gyr_example_md::Config::new(a.particles, a.domains);
            let sim = gyr_example_md::register(&config)
                .map_err(|e| Failure::from(anyhow::anyhow!("{e}")))?;
            let _policy = gyr_example_md::install_policy()
                .map_err(|e| Failure::from(anyhow::anyhow!("{e}")))?;
            gyr_example_md::run(&sim, 0, &stop);
        }
    }
    drop(rt);
    Ok(ExitCode::SUCCESS)
}
