//! `gyr hub`: runs the central monitor with its web UI and gRPC API until Ctrl-C; or replays
//! recorded traces in the same UI.

use crate::Failure;
use clap::Args;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

/// Options of `gyr hub`.
#[derive(Debug, Args)]
pub(crate) struct HubArgs {
    /// Where the web UI listens (port 0: any free port). Any address but loopback needs --token.
    #[arg(long, default_value = "127.0.0.1:7070")]
    listen: SocketAddr,
    /// Where the gRPC API listens: programs push to it (GYR_HUB=ADDR), clients steer through
    /// it (`gyr get PID@ADDR ...`, `gyr ps --hub ADDR`).
    #[arg(long, default_value = "127.0.0.1:7071")]
    grpc: SocketAddr,
    /// The steer token, required on any address but loopback (or set GYR_HUB_TOKEN); at least
    /// 16 characters (`openssl rand -hex 16` makes one). The web UI asks for it.
    #[arg(long, env = "GYR_HUB_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// A token that may watch but not steer.
    #[arg(long, env = "GYR_HUB_READ_TOKEN", hide_env_values = true)]
    read_token: Option<String>,
    /// Write everything received to trace files (one per program) in this directory.
    #[arg(long, value_name = "DIR")]
    record: Option<PathBuf>,
    /// Replay these trace files (the hub's recordings or programs' GYR_TRACE files) in the UI,
    /// instead of watching running programs.
    #[arg(long, value_name = "FILE", num_args = 1..)]
    replay: Vec<PathBuf>,
    /// Do not attach to the programs announced on this machine (take only those that push).
    #[arg(long)]
    no_discover: bool,
    /// Another name the web UI may be reached by, as NAME or NAME:PORT (an SSH tunnel's, a
    /// proxy's); repeatable. Requests naming other hosts (Host) or sent by other sites' pages
    /// (Origin) are refused.
    #[arg(long, value_name = "NAME[:PORT]")]
    allow_host: Vec<String>,
    /// Run these expert-system rules over every program's events (TOML with rhai
    /// expressions; see docs/rules.md); the file is read again when it changes.
    #[arg(long, value_name = "FILE")]
    rules: Option<PathBuf>,
}

pub(crate) fn run(a: HubArgs) -> Result<ExitCode, Failure> {
    if a.read_token.is_some() && a.token.is_none() {
        return Err(Failure::input(anyhow::anyhow!(
            "--read-token needs --token too: the read token watches, the steer token steers"
        )));
    }
    let replaying = !a.replay.is_empty();
    let hub = gyr_hub::Hub::start(gyr_hub::HubConfig {
        listen: a.listen,
        grpc: Some(a.grpc),
        socket_dir: gyr_client::discovery::socket_dir(),
        discover: !a.no_discover,
        token: a.token,
        read_token: a.read_token,
        record: a.record,
        replay: a.replay,
        allow_hosts: a.allow_host,
        rules: a.rules,
        ..Default::default()
    })
    .map_err(|e| match e {
        gyr_hub::HubError::Runtime(_) => Failure::from(anyhow::Error::from(e)),
        _ => Failure::input(e),
    })?;
    if replaying {
        println!(
            "gyr hub: replaying; open http://{} in a browser to play, pause, change speed and scrub (Ctrl-C stops)",
            hub.addr()
        );
    } else {
        println!(
            "gyr hub: open http://{} in a browser; it shows every gyr program of this user (Ctrl-C stops)",
            hub.addr()
        );
        if let Some(g) = hub.grpc_addr() {
            println!(
                "  gRPC API at {g}: programs started with GYR_HUB={g} push to it; `gyr ps --hub {g}` lists what it watches"
            );
        }
    }
    if let Some(d) = hub.record_dir() {
        println!("  recording every program's events into {}", d.display());
    }
    let (tx, rx) = std::sync::mpsc::channel();
    on_ctrl_c(tx);
    let _ = rx.recv();
    println!("gyr hub: stopped");
    Ok(ExitCode::SUCCESS)
}

/// Arguments of `gyr trace view`.
#[derive(Debug, Args)]
pub(crate) struct ViewArgs {
    /// The trace files (a program's GYR_TRACE file, the hub's recordings).
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
    /// Where the web UI listens (port 0: any free port).
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// Show each thread's timeline with the time monitoring took removed (blocked on full
    /// rings, sensor calls), following the causes between threads.
    #[arg(long)]
    correct: bool,
}

/// `gyr trace view`: the web UI on recordings, loaded whole (the replay seeked to the end and
/// paused): the thread life-time view, charts and statistics of the whole run; the replay bar
/// plays it again.
pub(crate) fn view(a: ViewArgs) -> Result<ExitCode, Failure> {
    for f in &a.files {
        if !f.is_file() {
            return Err(Failure::input(anyhow::anyhow!(
                "{} is not a trace file: give the files a program wrote (GYR_TRACE) or the hub recorded",
                f.display()
            )));
        }
    }
    let hub = gyr_hub::Hub::start(gyr_hub::HubConfig {
        listen: a.listen,
        grpc: None,
        socket_dir: gyr_client::discovery::socket_dir(),
        discover: false,
        replay: a.files,
        replay_corrected: a.correct,
        ..Default::default()
    })
    .map_err(|e| match e {
        gyr_hub::HubError::Runtime(_) => Failure::from(anyhow::Error::from(e)),
        _ => Failure::input(e),
    })?;
    // The whole recording at once: a seek past the end feeds every record.
    hub.replay_command("pause", None)
        .and_then(|_| hub.replay_command("seek", Some(f64::MAX)))
        .map_err(|e| Failure::from(anyhow::anyhow!(e)))?;
    println!(
        "gyr trace view: open http://{} in a browser: the thread life-time view and the charts show the whole recording; the replay bar plays it again (Ctrl-C stops)",
        hub.addr()
    );
    let (tx, rx) = std::sync::mpsc::channel();
    on_ctrl_c(tx);
    let _ = rx.recv();
    Ok(ExitCode::SUCCESS)
}

/// Waits for Ctrl-C on a thread and then sends on `tx`, so that the caller stops cleanly.
pub(crate) fn on_ctrl_c(tx: std::sync::mpsc::Sender<()>) {
    std::thread::spawn(move || {
        let rt = match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(rt) => rt,
            Err(_) => return,
        };
        rt.block_on(async {
            let _ = tokio::signal::ctrl_c().await;
        });
        let _ = tx.send(());
    });
}
