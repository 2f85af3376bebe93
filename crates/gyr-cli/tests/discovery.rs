//! `gyr ps` and friends against a socket directory another local user prepared: refused with a
//! message, and nothing outside the directory is touched.

use std::os::unix::fs::PermissionsExt;
use std::process::Command;

#[test]
fn a_socket_directory_others_can_write_is_refused_and_no_file_is_removed() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("gyr-0");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let victim = d.path().join("thesis.tex");
    std::fs::write(&victim, "years of work").unwrap();
    // An announcement of a dead program that names the victim's file as its socket.
    let announcement = serde_json::json!({
        "pid": 999_999_999u32,
        "command_line": ["x"],
        "socket": victim,
        "tcp": null,
        "started_unix_ns": 0,
        "gyr_version": "0.1.0",
    });
    std::fs::write(dir.join("999999999.json"), announcement.to_string()).unwrap();
    for args in [&["ps"][..], &["status", "999999999"][..]] {
        let o = Command::new(env!("CARGO_BIN_EXE_gyr"))
            .args(args)
            .env("GYR_SOCKET_DIR", &dir)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            !o.status.success(),
            "gyr {args:?} accepted an open directory"
        );
        assert!(err.contains("chmod 700"), "gyr {args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "years of work");
}
