//! `gyr run --threads [--trace FILE] -- PROGRAM ARGS...`: runs an unmodified program with
//! `libgyr_interpose.so` preloaded, forwards its exit status, and says where its trace went.
//! `gyr run --mpi [--trace PATTERN] -- mpirun -np 4 ./app`: the same for every rank of an MPI
//! job, with `libgyr_mpi.so` (gyr-interpose-mpi) preloaded.
//!
//! The library is `GYR_INTERPOSE_LIB` (`GYR_MPI_LIB` for `--mpi`) when set, else the one beside
//! the `gyr` binary (the same target directory, or its `deps/`, where `cargo build -p gyr-cli`
//! leaves it; the newer of the two). Before running
//! the program this checks what would make the preload silently fail: a statically linked
//! program, one of another architecture, a set-user-ID one.
//!
//! # MPI jobs
//!
//! With `--mpi` the command is a launcher. `LD_PRELOAD`, `GYR_TRACE` (the pattern, `%r` the
//! rank and `%j` the job; `gyr-mpi-%j.%r.gyr` by default), `GYR_MPI_JOB` (the job's name: the
//! `gyr` process's id, the same in every rank) and every other `GYR_*` variable are set for it;
//! for Open MPI's `mpirun`, `mpiexec` and `orterun`, `-x NAME` for each is inserted right after
//! the launcher, so that ranks on other hosts get them too. Other launchers (Slurm's `srun`,
//! say) must pass the environment to the ranks themselves (`srun` does by default). At the end
//! it lists the ranks' trace files.
//!
//! Exit status: the program's (128 + the signal's number when a signal ended it); 127 when the
//! program is not found, 126 when it cannot be run, 2 for other bad input (neither `--threads`
//! nor `--mpi`, a program the library cannot reach, `--mpi` without a launcher), 1 when the
//! library is missing.

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

/// The pthread interposer's file name.
const LIBRARY: &str = "libgyr_interpose.so";
/// The MPI interposer's file name.
const MPI_LIBRARY: &str = "libgyr_mpi.so";
/// The trace pattern of `--mpi` without `--trace`: job and rank.
const DEFAULT_MPI_TRACE: &str = "gyr-mpi-%j.%r.gyr";
/// Launchers that take Open MPI's `-x NAME` to pass a variable to every rank.
const OPEN_MPI_LAUNCHERS: [&str; 3] = ["mpirun", "mpiexec", "orterun"];
/// Launchers `--mpi` accepts (the others pass the environment to the ranks themselves).
const LAUNCHERS: [&str; 8] = [
    "mpirun",
    "mpiexec",
    "orterun",
    "srun",
    "prun",
    "prterun",
    "aprun",
    "mpiexec.hydra",
];

/// Which interposer a run preloads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Threads,
    Mpi,
}

impl Kind {
    fn library(self) -> &'static str {
        match self {
            Kind::Threads => LIBRARY,
            Kind::Mpi => MPI_LIBRARY,
        }
    }

    fn variable(self) -> &'static str {
        match self {
            Kind::Threads => "GYR_INTERPOSE_LIB",
            Kind::Mpi => "GYR_MPI_LIB",
        }
    }

    fn package(self) -> &'static str {
        match self {
            Kind::Threads => "gyr-interpose",
            Kind::Mpi => "gyr-interpose-mpi",
        }
    }
}

#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    /// Record the program's pthread events: threads, mutexes, condition variables, rwlocks,
    /// barriers.
    #[arg(long)]
    pub(crate) threads: bool,
    /// Record every rank of an MPI job (Open MPI; C, C++ and Fortran): its MPI calls, messages,
    /// requests, collectives and communicators. The program is the launcher:
    /// `gyr run --mpi -- mpirun -np 4 ./app`.
    #[arg(long, conflicts_with = "threads")]
    pub(crate) mpi: bool,
    /// Write the trace to FILE (a program it starts in turn writes FILE.<pid>); with --mpi a
    /// pattern, `%r` the rank and `%j` the job (default: gyr-mpi-%j.%r.gyr).
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
    if args.mpi {
        return run_mpi(args);
    }
    if !args.threads {
        return Err(Failure::input(anyhow!(
            "say what to record: `gyr run --threads -- PROGRAM` records its pthread events, \
             `gyr run --mpi -- mpirun -np 4 PROGRAM` an MPI job's calls and messages"
        )));
    }
    let name = &args.command[0];
    let program = find_program(name)?;
    let library = find_library(Kind::Threads)?;
    check_program(&program, &library).map_err(Failure::input)?;

    let mut cmd = std::process::Command::new(&program);
    cmd.arg0(name)
        .args(&args.command[1..])
        .env("LD_PRELOAD", preload_with(&library));
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
    let status = spawn_and_wait(&mut cmd, &program)?;
    let how = how_it_ended(status);
    let name = Path::new(name).display();
    match &trace {
        Some(t) => eprintln!("gyr: {name} {how}; {}", trace_summary(t, started)),
        None => eprintln!(
            "gyr: {name} {how}; no trace file (--trace FILE writes one; while it ran, `gyr ps` \
             listed it)"
        ),
    }
    Ok(exit_code(status))
}

/// Runs `cmd` (which runs `program`), passing SIGTERM and SIGHUP on, until it ends.
fn spawn_and_wait(
    cmd: &mut std::process::Command,
    program: &Path,
) -> Result<std::process::ExitStatus, Failure> {
    let mut child = cmd.spawn().map_err(|e| Failure {
        code: 126,
        error: anyhow!("cannot run {}: {e}", program.display()),
    })?;
    forward_signals(child.id());
    Ok(child.wait()?)
}

/// How the program ended, in words.
fn how_it_ended(status: std::process::ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(c), _) => format!("exited with status {c}"),
        (None, Some(s)) => format!("was ended by signal {s}"),
        _ => "ended".to_owned(),
    }
}

/// The program's status as ours (128 + the signal's number when a signal ended it).
fn exit_code(status: std::process::ExitStatus) -> ExitCode {
    let code = match (status.code(), status.signal()) {
        (Some(c), _) => c,
        (None, Some(s)) => 128 + s,
        _ => 1,
    };
    ExitCode::from(code.clamp(0, 255) as u8)
}

/// `LD_PRELOAD` with `library` appended to what the environment has.
fn preload_with(library: &Path) -> OsString {
    let mut preload = OsString::new();
    if let Some(old) = std::env::var_os("LD_PRELOAD").filter(|v| !v.is_empty()) {
        preload.push(old);
        preload.push(":");
    }
    preload.push(library);
    preload
}

/// The launcher's name: the file name of the command's first word.
fn launcher_name(command: &OsString) -> String {
    Path::new(command)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The launcher's arguments, with `-x NAME` for each of `vars` in front for Open MPI's.
fn launcher_args(launcher: &str, rest: &[OsString], vars: &[String]) -> Vec<OsString> {
    let mut out = Vec::new();
    if OPEN_MPI_LAUNCHERS.contains(&launcher) {
        for v in vars {
            out.push(OsString::from("-x"));
            out.push(OsString::from(v));
        }
    }
    out.extend(rest.iter().cloned());
    out
}

/// `gyr run --mpi`: the launcher with the MPI interposer preloaded into every rank.
fn run_mpi(args: RunArgs) -> Result<ExitCode, Failure> {
    let name = &args.command[0];
    let launcher = launcher_name(name);
    if !LAUNCHERS.contains(&launcher.as_str()) {
        return Err(Failure::input(anyhow!(
            "`gyr run --mpi` runs an MPI launcher, not {launcher}: `gyr run --mpi -- mpirun -np \
             4 {}` (launchers: {})",
            Path::new(name).display(),
            LAUNCHERS.join(", ")
        )));
    }
    let program = find_program(name)?;
    let library = find_library(Kind::Mpi)?;
    let pattern = std::path::absolute(
        args.trace
            .clone()
            .unwrap_or_else(|| PathBuf::from(DEFAULT_MPI_TRACE)),
    )?;
    let job = std::env::var("GYR_MPI_JOB")
        .ok()
        .filter(|j| !j.is_empty())
        .unwrap_or_else(|| std::process::id().to_string());
    let mut cmd = std::process::Command::new(&program);
    cmd.arg0(name)
        .env("LD_PRELOAD", preload_with(&library))
        .env("GYR_TRACE", &pattern)
        .env("GYR_MPI_JOB", &job);
    let mut vars = vec![
        "LD_PRELOAD".to_owned(),
        "GYR_TRACE".to_owned(),
        "GYR_MPI_JOB".to_owned(),
    ];
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy().into_owned();
        if k.starts_with("GYR_") && !vars.contains(&k) {
            vars.push(k);
        }
    }
    vars.sort();
    cmd.args(launcher_args(&launcher, &args.command[1..], &vars));

    let started = SystemTime::now();
    let status = spawn_and_wait(&mut cmd, &program)?;
    let files = rank_files(&pattern, &job, started);
    let how = how_it_ended(status);
    if files.is_empty() {
        eprintln!(
            "gyr: {launcher} {how}; no rank wrote a trace at {} (did the ranks get LD_PRELOAD? \
             a launcher other than Open MPI's mpirun must pass it on)",
            pattern.display()
        );
    } else {
        eprintln!(
            "gyr: {launcher} {how}; traces of {} ranks: {} (`gyr trace stats` summarises each)",
            files.len(),
            files
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    Ok(exit_code(status))
}

/// The ranks' trace files that `pattern` (with `%j` as `job`) names, written since `started`,
/// in rank order.
fn rank_files(pattern: &Path, job: &str, started: SystemTime) -> Vec<PathBuf> {
    let text = pattern.to_string_lossy().replace("%j", job);
    let with_rank = if text.contains("%r") {
        text
    } else {
        format!("{text}.%r")
    };
    let path = Path::new(&with_rank);
    let (Some(dir), Some(base)) = (path.parent(), path.file_name()) else {
        return Vec::new();
    };
    let base = base.to_string_lossy();
    let Some((before, after)) = base.split_once("%r") else {
        return Vec::new();
    };
    let mut found: Vec<(u64, PathBuf)> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let rank = name.strip_prefix(before)?.strip_suffix(after)?;
            let rank: u64 = rank.parse().ok()?;
            let fresh = e
                .metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|m| m >= started);
            fresh.then(|| (rank, e.path()))
        })
        .collect();
    found.sort();
    found.into_iter().map(|(_, p)| p).collect()
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

/// The interposer of `kind`: its variable (`GYR_INTERPOSE_LIB`, `GYR_MPI_LIB`), or beside
/// this binary.
fn find_library(kind: Kind) -> Result<PathBuf, Failure> {
    let (library, variable, package) = (kind.library(), kind.variable(), kind.package());
    let found = match std::env::var_os(variable).filter(|v| !v.is_empty()) {
        Some(v) => {
            let p = PathBuf::from(&v);
            if !p.is_file() {
                return Err(Failure::input(anyhow!(
                    "{variable}={} is not a file: point it at {library}",
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
            [dir.join(library), dir.join("deps").join(library)]
                .into_iter()
                .filter_map(|p| Some((std::fs::metadata(&p).ok()?.modified().ok()?, p)))
                .max_by_key(|(modified, _)| *modified)
                .map(|(_, p)| p)
                .ok_or_else(|| {
                    anyhow!(
                        "{library} is not beside {} (nor in its deps/): build it with `cargo \
                         build --release -p {package}` and copy target/release/{library} there, \
                         or set {variable} to its path",
                        exe.display()
                    )
                })?
        }
    };
    let path = std::fs::canonicalize(&found)?;
    let text = path.to_string_lossy();
    if text.contains([' ', ':']) {
        return Err(Failure::input(anyhow!(
            "{text} holds a space or a colon, which LD_PRELOAD cannot carry: copy {library} \
             elsewhere and set {variable} to it"
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
    fn open_mpi_launchers_get_the_variables_right_after_them() {
        let rest: Vec<OsString> = ["-np", "4", "./app"].iter().map(|s| s.into()).collect();
        let vars = vec!["GYR_TRACE".to_owned(), "LD_PRELOAD".to_owned()];
        assert_eq!(
            launcher_args("mpirun", &rest, &vars),
            ["-x", "GYR_TRACE", "-x", "LD_PRELOAD", "-np", "4", "./app"]
        );
        assert_eq!(launcher_args("srun", &rest, &vars), rest);
        let a = crate::Args::try_parse_from(["gyr", "run", "--mpi", "--", "mpirun", "-np", "2"])
            .unwrap();
        let crate::Command::Run(r) = a.command else {
            panic!("run")
        };
        assert!(r.mpi && !r.threads);
        assert!(
            crate::Args::try_parse_from(["gyr", "run", "--mpi", "--threads", "--", "x"]).is_err()
        );
    }

    #[test]
    fn rank_files_are_found_by_the_pattern() {
        let dir = tempfile::tempdir().unwrap();
        let started = SystemTime::now() - std::time::Duration::from_secs(5);
        for name in [
            "t-9.1.gyr",
            "t-9.0.gyr",
            "t-9.10.gyr",
            "t-8.0.gyr",
            "t-9.x.gyr",
        ] {
            std::fs::write(dir.path().join(name), b"").unwrap();
        }
        let found = rank_files(&dir.path().join("t-%j.%r.gyr"), "9", started);
        let names: Vec<_> = found
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["t-9.0.gyr", "t-9.1.gyr", "t-9.10.gyr"]);
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
