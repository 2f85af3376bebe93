//! `gyr run --threads [--trace FILE] -- PROGRAM ARGS...`: runs an unmodified program with
//! `libgyr_interpose.so` preloaded, forwards its exit status, and says where its trace went.
//!
//! The library is `GYR_INTERPOSE_LIB` when set, else the one beside the `gyr` binary (the same
//! target directory, or its `deps/`, where `cargo build -p gyr-cli` leaves it; the newer of
//! the two). Before running
//! the program this checks what would make the preload silently fail: a statically linked
//! program, one of another architecture, a set-user-ID one.
//!
//! Exit status: the program's (128 + the signal's number when a signal ended it); 127 when the
//! program is not found, 126 when it cannot be run, 2 for other bad input (no `--threads`, a
//! program the library cannot reach), 1 when the library is missing.

use crate::Failure;
use anyhow::anyhow;
use clap::Args;
use std::ffi::OsString;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::SystemTime;

/// The interposer's file name.
const LIBRARY: &str = "libgyr_interpose.so";

#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    /// Record the program's pthread events: threads, mutexes, condition variables, rwlocks,
    /// barriers.
    #[arg(long)]
    pub(crate) threads: bool,
    /// Write the trace to FILE (a program it starts in turn writes FILE.<pid>).
    #[arg(long, value_name = "FILE")]
    pub(crate) trace: Option<PathBuf>,
    /// The program and its arguments.
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "PROGRAM"
    )]
    pub(crate) command: Vec<OsString>,
}

pub(crate) fn run(args: RunArgs) -> Result<ExitCode, Failure> {
    if !args.threads {
        return Err(Failure::input(anyhow!(
            "say what to record: `gyr run --threads -- PROGRAM` records its pthread events"
        )));
    }
    let name = &args.command[0];
    let program = find_program(name)?;
    let library = find_library()?;
    check_program(&program, &library).map_err(Failure::input)?;

    let mut preload = OsString::new();
    if let Some(old) = std::env::var_os("LD_PRELOAD").filter(|v| !v.is_empty()) {
        preload.push(old);
        preload.push(":");
    }
    preload.push(&library);
    let mut cmd = std::process::Command::new(&program);
    cmd.arg0(name)
        .args(&args.command[1..])
        .env("LD_PRELOAD", preload);
    let trace = match &args.trace {
        Some(t) => Some(std::path::absolute(t)?),
        None => std::env::var_os("GYR_TRACE")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from),
    };
    if let (Some(_), Some(t)) = (&args.trace, &trace) {
        cmd.env("GYR_TRACE", t);
    }

    let started = SystemTime::now();
    let mut child = cmd.spawn().map_err(|e| Failure {
        code: 126,
        error: anyhow!("cannot run {}: {e}", program.display()),
    })?;
    forward_signals(child.id());
    let status = child.wait()?;

    let how = match (status.code(), status.signal()) {
        (Some(c), _) => format!("exited with status {c}"),
        (None, Some(s)) => format!("was ended by signal {s}"),
        _ => "ended".to_owned(),
    };
    let name = Path::new(name).display();
    match &trace {
        Some(t) => eprintln!("gyr: {name} {how}; {}", trace_summary(t, started)),
        None => eprintln!(
            "gyr: {name} {how}; no trace file (--trace FILE writes one; while it ran, `gyr ps` \
             listed it)"
        ),
    }
    let code = match (status.code(), status.signal()) {
        (Some(c), _) => c,
        (None, Some(s)) => 128 + s,
        _ => 1,
    };
    Ok(ExitCode::from(code.clamp(0, 255) as u8))
}

/// Where the trace went: the file and its size, and the files of programs it started.
fn trace_summary(trace: &Path, started: SystemTime) -> String {
    let Ok(meta) = std::fs::metadata(trace) else {
        return format!(
            "no trace at {}: it did not load {LIBRARY} (a program that clears LD_PRELOAD?)",
            trace.display()
        );
    };
    let mut line = format!(
        "trace in {} ({} bytes; `gyr trace stats` summarises it)",
        trace.display(),
        meta.len()
    );
    let others = descendants(trace, started);
    if !others.is_empty() {
        line.push_str(&format!(
            "; programs it started wrote {}",
            others.join(", ")
        ));
    }
    line
}

/// `FILE.<pid>` files written since `started`: the traces of programs the program started.
fn descendants(trace: &Path, started: SystemTime) -> Vec<String> {
    let (Some(dir), Some(base)) = (trace.parent(), trace.file_name()) else {
        return Vec::new();
    };
    let prefix = format!("{}.", base.to_string_lossy());
    let mut found: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.strip_prefix(&prefix)
                .is_some_and(|pid| !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()))
                && e.metadata()
                    .and_then(|m| m.modified())
                    .is_ok_and(|m| m >= started)
        })
        .map(|e| e.path().display().to_string())
        .collect();
    found.sort();
    found
}

/// The program to run: `name` itself when it holds a `/`, else the first match in `PATH`.
fn find_program(name: &OsString) -> Result<PathBuf, Failure> {
    let not_found = |what: String| Failure {
        code: 127,
        error: anyhow!(what),
    };
    let path = Path::new(name);
    if name.as_encoded_bytes().contains(&b'/') {
        return if path.is_file() {
            Ok(path.to_owned())
        } else {
            Err(not_found(format!("{}: no such file", path.display())))
        };
    }
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|d| d.join(path))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
        .ok_or_else(|| {
            not_found(format!(
                "{}: not found in PATH (give its path, such as ./{0})",
                path.display()
            ))
        })
}

/// `libgyr_interpose.so`: `GYR_INTERPOSE_LIB`, or beside this binary.
fn find_library() -> Result<PathBuf, Failure> {
    let found = match std::env::var_os("GYR_INTERPOSE_LIB").filter(|v| !v.is_empty()) {
        Some(v) => {
            let p = PathBuf::from(&v);
            if !p.is_file() {
                return Err(Failure::input(anyhow!(
                    "GYR_INTERPOSE_LIB={} is not a file: point it at {LIBRARY}",
                    p.display()
                )));
            }
            p
        }
        None => {
            let exe = std::env::current_exe()?;
            let dir = exe.parent().unwrap_or(Path::new("."));
            // Both exist when the library was also built on its own: the newer one is the
            // one built with this binary.
            [dir.join(LIBRARY), dir.join("deps").join(LIBRARY)]
                .into_iter()
                .filter_map(|p| Some((std::fs::metadata(&p).ok()?.modified().ok()?, p)))
                .max_by_key(|(modified, _)| *modified)
                .map(|(_, p)| p)
                .ok_or_else(|| {
                    anyhow!(
                        "{LIBRARY} is not beside {} (nor in its deps/): build it with `cargo build \
                         --release -p gyr-interpose` and copy target/release/{LIBRARY} there, or \
                         set GYR_INTERPOSE_LIB to its path",
                        exe.display()
                    )
                })?
        }
    };
    let path = std::fs::canonicalize(&found)?;
    let text = path.to_string_lossy();
    if text.contains([' ', ':']) {
        return Err(Failure::input(anyhow!(
            "{text} holds a space or a colon, which LD_PRELOAD cannot carry: copy {LIBRARY} \
             elsewhere and set GYR_INTERPOSE_LIB to it"
        )));
    }
    Ok(path)
}

/// What matters of an ELF file here.
#[derive(Debug, PartialEq, Eq)]
struct Elf {
    /// 1: 32-bit, 2: 64-bit.
    class: u8,
    machine: u16,
    /// Whether it names a dynamic loader (PT_INTERP): a statically linked program does not.
    dynamic: bool,
}

/// Reads the ELF header and program headers of `file`; `None` if it is not ELF.
fn elf(mut file: impl Read + std::io::Seek) -> std::io::Result<Option<Elf>> {
    let mut h = [0u8; 64];
    let n = file.read(&mut h)?;
    if n < 52 || &h[..4] != b"\x7fELF" {
        return Ok(None);
    }
    let (class, big) = (h[4], h[5] == 2);
    let uint_at = |b: &[u8], at: usize, len: usize| {
        let bytes = &b[at..at + len];
        let fold = |acc: u64, b: &u8| (acc << 8) | u64::from(*b);
        if big {
            bytes.iter().fold(0, fold)
        } else {
            bytes.iter().rev().fold(0, fold)
        }
    };
    let (phoff, phentsize, phnum) = match class {
        2 if n >= 64 => (uint_at(&h, 32, 8), uint_at(&h, 54, 2), uint_at(&h, 56, 2)),
        1 => (uint_at(&h, 28, 4), uint_at(&h, 42, 2), uint_at(&h, 44, 2)),
        _ => return Ok(None),
    };
    let machine = uint_at(&h, 18, 2) as u16;
    let mut dynamic = false;
    if phentsize >= 4 && phnum > 0 {
        let mut table = vec![0u8; (phentsize * phnum) as usize];
        file.seek(std::io::SeekFrom::Start(phoff))?;
        file.read_exact(&mut table)?;
        dynamic = table
            .chunks(phentsize as usize)
            .any(|ph| uint_at(ph, 0, 4) == 3 /* PT_INTERP */);
    }
    Ok(Some(Elf {
        class,
        machine,
        dynamic,
    }))
}

/// Refuses a program the library cannot reach, saying why and what to do.
fn check_program(program: &Path, library: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(program)?;
    // SAFETY: getuid and getgid have no preconditions and cannot fail.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    let mode = meta.permissions().mode();
    if (mode & 0o4000 != 0 && meta.uid() != uid) || (mode & 0o2000 != 0 && meta.gid() != gid) {
        anyhow::bail!(
            "{} is set-user-ID or set-group-ID: the dynamic loader ignores LD_PRELOAD for it; \
             run a copy without those bits",
            program.display()
        );
    }
    let Some(prog) = elf(std::fs::File::open(program)?)? else {
        // A script: its interpreter is what runs, and is looked at when it does.
        return Ok(());
    };
    if !prog.dynamic {
        anyhow::bail!(
            "{} is statically linked: LD_PRELOAD cannot reach its pthread calls; link it \
             dynamically (without -static) to record it",
            program.display()
        );
    }
    if let Some(lib) = elf(std::fs::File::open(library)?)?
        && (lib.class, lib.machine) != (prog.class, prog.machine)
    {
        anyhow::bail!(
            "{} is built for another architecture than {} (ELF class {} machine {} against \
             class {} machine {}): build gyr-interpose for the program's target",
            program.display(),
            library.display(),
            prog.class,
            prog.machine,
            lib.class,
            lib.machine
        );
    }
    Ok(())
}

/// The running program, for the signal handler.
static CHILD: AtomicI32 = AtomicI32::new(0);

/// While the program runs: SIGINT and SIGQUIT, which a terminal sends to the program too, do
/// not end `gyr` before it (it reports the program's end); SIGTERM and SIGHUP sent to `gyr`
/// are passed on to the program. The handlers are reset to the default in the program by
/// `exec` (it was spawned before they were installed anyway).
fn forward_signals(child: u32) {
    CHILD.store(child as i32, Ordering::SeqCst);
    extern "C" fn on_signal(sig: libc::c_int) {
        let pid = CHILD.load(Ordering::SeqCst);
        if pid > 0 && (sig == libc::SIGTERM || sig == libc::SIGHUP) {
            // SAFETY: kill is async-signal-safe; errno is saved and restored around it.
            unsafe {
                let errno = *libc::__errno_location();
                libc::kill(pid, sig);
                *libc::__errno_location() = errno;
            }
        }
    }
    for sig in [libc::SIGINT, libc::SIGQUIT, libc::SIGTERM, libc::SIGHUP] {
        let handler: extern "C" fn(libc::c_int) = on_signal;
        // SAFETY: the handler only reads an atomic and calls kill; SA_RESTART keeps the wait
        // for the program going.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = handler as libc::sighandler_t;
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(sig, &action, std::ptr::null_mut());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[test]
    fn the_program_and_its_arguments_follow_the_options() {
        let a = crate::Args::try_parse_from([
            "gyr",
            "run",
            "--threads",
            "--trace",
            "t.gyr",
            "--",
            "./prog",
            "-x",
            "--y",
        ])
        .unwrap();
        let crate::Command::Run(r) = a.command else {
            panic!("run")
        };
        assert!(r.threads);
        assert_eq!(r.trace, Some(PathBuf::from("t.gyr")));
        assert_eq!(r.command, vec!["./prog", "-x", "--y"]);
        assert!(crate::Args::try_parse_from(["gyr", "run", "--threads"]).is_err());
    }

    #[test]
    fn reads_elf_headers() {
        let me = std::env::current_exe().unwrap();
        let e = elf(std::fs::File::open(&me).unwrap()).unwrap().unwrap();
        assert_eq!(
            e.class,
            if cfg!(target_pointer_width = "64") {
                2
            } else {
                1
            }
        );
        assert!(e.dynamic, "test binaries link dynamically");
        let script = std::io::Cursor::new(b"#!/bin/sh\necho hi\n".to_vec());
        assert_eq!(elf(script).unwrap(), None);
        // A 64-bit little-endian header without program headers: a static-looking file.
        let mut h = vec![0u8; 64];
        h[..4].copy_from_slice(b"\x7fELF");
        h[4] = 2;
        h[5] = 1;
        assert_eq!(
            elf(std::io::Cursor::new(h)).unwrap(),
            Some(Elf {
                class: 2,
                machine: 0,
                dynamic: false
            })
        );
    }
}
