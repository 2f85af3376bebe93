//! Makes sure the web UI's npm packages are installed before they are embedded: on a fresh
//! clone this runs `npm ci` in `web/` once, from the lockfile (uPlot for the page,
//! playwright-core for the browser tests).

use std::path::Path;
use std::process::Command;

fn main() {
    let web = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../web");
    println!(
        "cargo:rerun-if-changed={}",
        web.join("package-lock.json").display()
    );
    println!(
        "cargo:rerun-if-changed={}",
        web.join("node_modules/uplot/dist").display()
    );
    let installed = [
        "uplot/dist/uPlot.iife.min.js",
        "playwright-core/package.json",
    ]
    .iter()
    .all(|f| web.join("node_modules").join(f).exists());
    if installed {
        return;
    }
    let status = Command::new("npm")
        .args(["ci", "--no-audit", "--no-fund", "--ignore-scripts"])
        .current_dir(&web)
        .status();
    match status {
        Ok(s) if s.success() => {}
        Ok(s) => panic!(
            "`npm ci` in {} failed ({s}): the web UI's packages could not be installed; check the network, then build again",
            web.display()
        ),
        Err(e) => panic!(
            "cannot run npm ({e}): the hub embeds the web UI's npm packages; install Node.js (which brings npm) and build again"
        ),
    }
}
