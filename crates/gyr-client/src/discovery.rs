//! Where running gyr programs announce themselves, so that `gyr ps` can find them.
//!
//! Each program with a server writes `<pid>.sock` (the Unix socket), `<pid>.json` (what it
//! is) and, when it also listens on TCP, `<pid>.token` into one directory per user:
//! `$GYR_SOCKET_DIR`, else `$XDG_RUNTIME_DIR/gyr`, else `gyr-<uid>` in the temporary directory.
//! Connecting through the socket grants the steer permission, so the directory is trusted only
//! when it is private: owned by the user, mode 0700, and not a symbolic link. In a shared
//! temporary directory another user can create `gyr-<uid>` first; such a directory is refused
//! with a message saying what to do, and nothing in it is read, followed or deleted.
//!
//! # What discovery may touch
//!
//! An announcement is data written by a program, so the paths gyr acts on are never taken from
//! it: the socket of `<pid>.json` must be `<pid>.sock` in the same verified directory, and when
//! the program is dead only `<pid>.json`, `<pid>.sock` (if it is a socket) and `<pid>.token`
//! (if it is a regular file) in that directory are removed.

use serde::{Deserialize, Serialize};
use std::io::{self, Read};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The largest announcement read; a larger file is not an announcement.
const MAX_ANNOUNCEMENT_BYTES: u64 = 64 * 1024;

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

/// Why the announcement directory cannot be trusted.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DirError {
    /// Another user owns the directory.
    #[error(
        "the gyr socket directory {dir} belongs to uid {owner}, not to you (uid {me}): another user may have made it to intercept or remove your files; remove it if it is yours to remove, or set GYR_SOCKET_DIR to a private directory"
    )]
    NotOwned {
        /// The directory.
        dir: PathBuf,
        /// Its owner.
        owner: u32,
        /// This process's effective user.
        me: u32,
    },
    /// Others may enter or write the directory.
    #[error(
        "the gyr socket directory {dir} has mode {mode:03o}, so other users can reach it: run `chmod 700 {dir}`, or set GYR_SOCKET_DIR to a private directory"
    )]
    NotPrivate {
        /// The directory.
        dir: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// The path is a symbolic link, or not a directory at all.
    #[error(
        "the gyr socket directory {dir} is {what}, not a directory of yours: remove it, or set GYR_SOCKET_DIR to a private directory"
    )]
    NotADirectory {
        /// The path.
        dir: PathBuf,
        /// What it is instead.
        what: &'static str,
    },
    /// The directory could not be made or examined.
    #[error("cannot use the gyr socket directory {dir}: {source}")]
    Io {
        /// The directory.
        dir: PathBuf,
        /// Why.
        source: io::Error,
    },
}

impl From<DirError> for io::Error {
    fn from(e: DirError) -> io::Error {
        let kind = match &e {
            DirError::Io { source, .. } => source.kind(),
            _ => io::ErrorKind::PermissionDenied,
        };
        io::Error::new(kind, e)
    }
}

/// This process's effective user id.
pub fn uid() -> u32 {
    // SAFETY: geteuid has no preconditions, touches no memory of ours and cannot fail.
    unsafe { libc::geteuid() }
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

/// Checks that `dir` is a directory (not a link to one), owned by this user, that no one else
/// could write in; one that others could enter but not write in is closed to them (mode 0700).
pub fn verify_dir(dir: &Path) -> Result<(), DirError> {
    let m = std::fs::symlink_metadata(dir).map_err(|source| DirError::Io {
        dir: dir.to_owned(),
        source,
    })?;
    let ft = m.file_type();
    if ft.is_symlink() {
        return Err(DirError::NotADirectory {
            dir: dir.to_owned(),
            what: "a symbolic link",
        });
    }
    if !ft.is_dir() {
        return Err(DirError::NotADirectory {
            dir: dir.to_owned(),
            what: "a file",
        });
    }
    let me = uid();
    if m.uid() != me {
        return Err(DirError::NotOwned {
            dir: dir.to_owned(),
            owner: m.uid(),
            me,
        });
    }
    let mode = m.mode() & 0o7777;
    if mode & 0o022 != 0 {
        // Others could have put files in it: nothing in it can be trusted.
        return Err(DirError::NotPrivate {
            dir: dir.to_owned(),
            mode,
        });
    }
    if mode & 0o077 != 0 {
        // Only its owner could ever write in it (a `mkdir` under the usual umask): closing it
        // to others loses nothing and trusts nothing another user made.
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(
            |source| DirError::Io {
                dir: dir.to_owned(),
                source,
            },
        )?;
    }
    Ok(())
}

/// Makes `dir` (mode 0700 from its creation) unless it exists, then verifies it.
pub fn prepare_dir(dir: &Path) -> Result<(), DirError> {
    let io = |source| DirError::Io {
        dir: dir.to_owned(),
        source,
    };
    if std::fs::symlink_metadata(dir).is_err() {
        if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(io)?;
        }
        match std::fs::DirBuilder::new().mode(0o700).create(dir) {
            Ok(()) => {}
            // Made at the same moment by another program: verified below like any other.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(io(e)),
        }
    }
    verify_dir(dir)
}

/// Writes `a` as `<pid>.json` into `dir` (a verified directory): whole or not at all, since
/// readers may look at any moment.
pub fn announce(dir: &Path, a: &Announcement) -> io::Result<PathBuf> {
    let path = dir.join(format!("{}.json", a.pid));
    let tmp = dir.join(format!(".{}.json.tmp", a.pid));
    let _ = std::fs::remove_file(&tmp);
    write_private(
        &tmp,
        &serde_json::to_vec_pretty(a).map_err(io::Error::other)?,
    )?;
    std::fs::rename(&tmp, &path)?;
    Ok(path)
}

/// Writes a new file readable by its owner alone from the moment it exists.
pub fn write_private(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)?;
    f.write_all(bytes)
}

fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// The programs announced in [`socket_dir`] whose process is still running; the files of
/// programs that died without cleaning up are removed. A directory that does not exist yet
/// holds no programs; one that is not private is refused.
pub fn discover() -> Result<Vec<Announcement>, DirError> {
    discover_in(&socket_dir())
}

/// [`discover`] in a given directory.
pub fn discover_in(dir: &Path) -> Result<Vec<Announcement>, DirError> {
    if std::fs::symlink_metadata(dir).is_err_and(|e| e.kind() == io::ErrorKind::NotFound) {
        return Ok(Vec::new());
    }
    verify_dir(dir)?;
    let entries = std::fs::read_dir(dir).map_err(|source| DirError::Io {
        dir: dir.to_owned(),
        source,
    })?;
    let me = uid();
    let mut out = Vec::new();
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_suffix(".json"))
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        let path = dir.join(&name);
        let Some(a) = read_announcement(&path, me) else {
            continue;
        };
        let socket = dir.join(format!("{pid}.sock"));
        if a.pid != pid || a.socket != socket {
            // Not what a gyr program writes: never follow it, never remove what it names.
            continue;
        }
        if alive(pid) {
            out.push(a);
        } else {
            remove_stale(dir, pid, me);
        }
    }
    out.sort_by_key(|a| a.pid);
    Ok(out)
}

/// Reads `<pid>.json` if it is a small regular file of this user's.
fn read_announcement(path: &Path, me: u32) -> Option<Announcement> {
    let m = std::fs::symlink_metadata(path).ok()?;
    if !m.file_type().is_file() || m.uid() != me || m.len() > MAX_ANNOUNCEMENT_BYTES {
        return None;
    }
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .ok()?;
    let mut bytes = Vec::new();
    f.take(MAX_ANNOUNCEMENT_BYTES)
        .read_to_end(&mut bytes)
        .ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// Removes the files a dead program left behind, each only if it is of the kind gyr writes.
fn remove_stale(dir: &Path, pid: u32, me: u32) {
    type IsKind = fn(&std::fs::FileType) -> bool;
    let kinds: [(&str, IsKind); 3] = [
        ("sock", |t| t.is_socket()),
        ("token", |t| t.is_file()),
        ("json", |t| t.is_file()),
    ];
    for (ext, is_kind) in kinds {
        let path = dir.join(format!("{pid}.{ext}"));
        if let Ok(m) = std::fs::symlink_metadata(&path)
            && m.uid() == me
            && is_kind(&m.file_type())
        {
            let _ = std::fs::remove_file(&path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn private_dir() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        d
    }

    fn dead_pid() -> u32 {
        // A child that has exited and been reaped: its pid is not running.
        let mut c = std::process::Command::new("true").spawn().unwrap();
        let pid = c.id();
        c.wait().unwrap();
        pid
    }

    /// An announcement of program `pid` in `dir` naming `socket`, as another user could write.
    fn plant_announcement(dir: &Path, pid: u32, socket: &Path) {
        let a = Announcement {
            pid,
            command_line: vec![],
            socket: socket.to_owned(),
            tcp: None,
            started_unix_ns: 0,
            gyr_version: "0".into(),
        };
        std::fs::write(
            dir.join(format!("{pid}.json")),
            serde_json::to_vec(&a).unwrap(),
        )
        .unwrap();
    }

    #[test]
    fn an_open_directory_is_refused_and_nothing_in_it_is_removed() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("gyr-shared");
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        let victim = d.path().join("precious.txt");
        std::fs::write(&victim, "keep me").unwrap();
        plant_announcement(&dir, dead_pid(), &victim);
        let e = discover_in(&dir).unwrap_err();
        assert!(matches!(e, DirError::NotPrivate { mode: 0o777, .. }), "{e}");
        assert!(e.to_string().contains("chmod 700"), "{e}");
        assert!(
            victim.exists(),
            "discovery removed a file outside its directory"
        );
        // A program refuses to serve from it too.
        assert!(prepare_dir(&dir).is_err());
    }

    #[test]
    fn an_announcement_naming_a_foreign_path_is_never_followed_or_removed() {
        let d = private_dir();
        let outside = tempfile::tempdir().unwrap();
        let victim = outside.path().join("precious.txt");
        std::fs::write(&victim, "keep me").unwrap();
        plant_announcement(d.path(), dead_pid(), &victim);
        assert!(discover_in(d.path()).unwrap().is_empty());
        assert!(victim.exists());
        // A live pid naming a foreign socket is not listed either: clients would connect there.
        plant_announcement(d.path(), std::process::id(), &victim);
        assert!(discover_in(d.path()).unwrap().is_empty());
    }

    #[test]
    fn a_directory_of_another_user_is_refused() {
        let d = private_dir();
        let dir = d.path().join("gyr-0");
        prepare_dir(&dir).unwrap();
        let other = if uid() == 0 { 65534 } else { 0 };
        match std::os::unix::fs::chown(&dir, Some(other), None) {
            Ok(()) => {
                let e = discover_in(&dir).unwrap_err();
                assert!(
                    matches!(e, DirError::NotOwned { owner, .. } if owner == other),
                    "{e}"
                );
                assert!(prepare_dir(&dir).is_err());
            }
            // Only root may give a directory away; others check what they can.
            Err(e) => assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{e}"),
        }
    }

    #[test]
    fn a_directory_only_its_owner_could_write_is_closed_to_others() {
        let d = private_dir();
        let dir = d.path().join("made-by-mkdir");
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert!(discover_in(&dir).unwrap().is_empty());
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        // Writable by the group: refused, never tightened (files may already be planted).
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o770)).unwrap();
        assert!(prepare_dir(&dir).is_err());
    }

    #[test]
    fn a_symlinked_directory_is_refused() {
        let d = private_dir();
        let target = d.path().join("real");
        std::fs::create_dir(&target).unwrap();
        let link = d.path().join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let e = discover_in(&link).unwrap_err();
        assert!(matches!(e, DirError::NotADirectory { .. }), "{e}");
        assert!(prepare_dir(&link).is_err());
    }

    #[test]
    fn a_missing_directory_is_made_private_and_holds_nothing() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("a/b/gyr");
        assert!(discover_in(&dir).unwrap().is_empty());
        prepare_dir(&dir).unwrap();
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        verify_dir(&dir).unwrap();
    }

    #[test]
    fn a_dead_programs_own_files_are_removed() {
        let d = private_dir();
        let pid = dead_pid();
        let socket = d.path().join(format!("{pid}.sock"));
        let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        let a = Announcement {
            pid,
            command_line: vec!["x".into()],
            socket: socket.clone(),
            tcp: None,
            started_unix_ns: 1,
            gyr_version: "0".into(),
        };
        announce(d.path(), &a).unwrap();
        write_private(&d.path().join(format!("{pid}.token")), b"t").unwrap();
        assert!(discover_in(d.path()).unwrap().is_empty());
        let left: Vec<_> = std::fs::read_dir(d.path()).unwrap().flatten().collect();
        assert!(left.is_empty(), "left behind: {left:?}");
    }

    #[test]
    fn written_files_are_private_from_their_creation() {
        let d = private_dir();
        let p = d.path().join("1.token");
        write_private(&p, b"secret").unwrap();
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        // Never through a link planted in its place.
        let link = d.path().join("2.token");
        std::os::unix::fs::symlink(d.path().join("elsewhere"), &link).unwrap();
        assert!(write_private(&link, b"secret").is_err());
        assert!(!d.path().join("elsewhere").exists());
    }
}
