//! `gyr hub`: runs the central monitor with its web UI until Ctrl-C.

use crate::Failure;
use clap::Args;
use std::net::SocketAddr;
use std::process::ExitCode;

/// Options of `gyr hub`.
#[derive(Debug, Args)]
pub(crate) struct HubArgs {
    /// Where the web UI listens (port 0: any free port).
    #[arg(long, default_value = "127.0.0.1:7070")]
    listen: SocketAddr,
}

pub(crate) fn run(a: HubArgs) -> Result<ExitCode, Failure> {
    let hub = gyr_hub::Hub::start(gyr_hub::HubConfig {
        listen: a.listen,
        ..Default::default()
    })
    .map_err(|e| match e {
        gyr_hub::HubError::Runtime(_) => Failure::from(anyhow::Error::from(e)),
        _ => Failure::input(e),
    })?;
    println!(
        "gyr hub: open http://{} in a browser; it shows every gyr program of this user (Ctrl-C stops)",
        hub.addr()
    );
    let (tx, rx) = std::sync::mpsc::channel();
    on_ctrl_c(tx);
    let _ = rx.recv();
    println!("gyr hub: stopped");
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
