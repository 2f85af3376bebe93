//! Where running gyr programs announce themselves, so that `gyr ps` can find them.
//!
//! Each program with a server writes `<pid>.sock` (the Unix socket) and `<pid>.json` (what it
//! is) into one directory per user: `$GYR_SOCKET_DIR`, else `$XDG_RUNTIME_DIR/gyr`, else
//! `/tmp/gyr-<uid>`. The directory is made private (mode 0700), so the socket's users are the
//! program's own user: connecting through it grants the steer permission.

use serde::{Deserialize, Serialize};
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// What a running program says about itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Announcement {
    /// Process id.
    pub pid: u32,
    /// Command line.
    pub command_line: Vec<String>,
    /// The Unix socket it serves on.
    pub socket: PathBuf,
    /// The TCP address it also serves on, if any.
    pub tcp: Option<String>,
    /// When it started, ns since the Unix epoch.
    pub started_unix_ns: u64,
    /// gyr's version.
    pub gyr_version: String,
}

fn uid() -> u32 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))?
                .split_whitespace()
                .nth(1)?
                .parse()
                .ok()
        })
        .unwrap_or(0)
}

/// The directory programs announce themselves in.
pub fn socket_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("GYR_SOCKET_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    if let Some(d) = std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(d).join("gyr");
    }
    std::env::temp_dir().join(format!("gyr-{}", uid()))
}

pub(crate) fn prepare_dir(dir: &Path) -> io::Result<()> {
    std::fs::create_dir_all(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
}

pub(crate) fn announce(dir: &Path, a: &Announcement) -> io::Result<PathBuf> {
    let path = dir.join(format!("{}.json", a.pid));
    let tmp = dir.join(format!(".{}.json.tmp", a.pid));
    std::fs::write(
        &tmp,
        serde_json::to_vec_pretty(a).map_err(io::Error::other)?,
    )?;
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600))?;
    std::fs::rename(&tmp, &path)?;
    Ok(path)
}

fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// The programs announced in [`socket_dir`] whose process is still running; announcements of
/// programs that died without cleaning up are removed.
pub fn discover() -> Vec<Announcement> {
    discover_in(&socket_dir())
}

/// [`discover`] in a given directory.
pub fn discover_in(dir: &Path) -> Vec<Announcement> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in entries.flatten() {
        let path = e.path();
        if path.extension().is_none_or(|x| x != "json") {
            continue;
        }
        let Some(a) = std::fs::read(&path)
            .ok()
            .and_then(|b| serde_json::from_slice::<Announcement>(&b).ok())
        else {
            continue;
        };
        if alive(a.pid) {
            out.push(a);
        } else {
            let _ = std::fs::remove_file(&path);
            let _ = std::fs::remove_file(&a.socket);
        }
    }
    out.sort_by_key(|a| a.pid);
    out
}
