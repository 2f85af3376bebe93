//! The page's vendored files (`web/vendor`, embedded in the hub so that building gyr needs no
//! Node.js) are byte for byte the files of the npm packages `web/package-lock.json` locks.

use std::path::{Path, PathBuf};

fn web() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../web")
}

#[test]
fn vendored_web_files_are_the_locked_packages() {
    let installed = web().join("node_modules/uplot");
    if !installed.exists() {
        // CI installs the packages (scripts/test runs `npm ci`); elsewhere, say what was skipped.
        assert!(
            std::env::var_os("CI").is_none(),
            "web/node_modules is missing: scripts/test runs `npm ci` in web/ before the tests"
        );
        eprintln!("skipped: web/node_modules is missing (`npm ci` in web/ installs it)");
        return;
    }
    let lock = std::fs::read_to_string(web().join("package-lock.json")).unwrap();
    let lock: serde_json::Value = serde_json::from_str(&lock).unwrap();
    let locked = lock["packages"]["node_modules/uplot"]["version"]
        .as_str()
        .expect("package-lock.json locks uplot");
    let package: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(installed.join("package.json")).unwrap())
            .unwrap();
    assert_eq!(
        package["version"].as_str(),
        Some(locked),
        "web/node_modules holds another uplot than the lockfile: run `npm ci` in web/"
    );
    for (vendored, original) in [
        ("uPlot.iife.min.js", "dist/uPlot.iife.min.js"),
        ("uPlot.min.css", "dist/uPlot.min.css"),
        ("uPlot.LICENSE", "LICENSE"),
    ] {
        let v = std::fs::read(web().join("vendor").join(vendored)).unwrap();
        let o = std::fs::read(installed.join(original)).unwrap();
        assert!(
            v == o,
            "web/vendor/{vendored} is not uplot {locked}'s {original}: run scripts/vendor-web and commit web/vendor"
        );
    }
}
