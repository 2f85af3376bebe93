//! A job of four ranks that publish MPI events as the MPI interposer would (`gyr.msg.*` and
//! `gyr.mpi.begin`/`end`), without MPI: they keep a schedule on the wall clock instead of
//! communicating. In each 60 ms step every rank sends to the next one around a ring and
//! receives from the previous one; rank 0 computes longest, so rank 1 waits for it (a late
//! sender), and rank 2 sends rank 3 a synchronous message that rank 3 posts late (a late
//! receiver).

use super::Program;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The child's rank, when this process is one.
pub(crate) const RANK: &str = "GYR_TEST_MPI_RANK";
/// The file whose content (the start, ms since the epoch) lets the ranks begin.
pub(crate) const GO: &str = "GYR_TEST_MPI_GO";
/// The job's name.
pub(crate) const JOB: &str = "ring-job";
/// Ranks in the job.
pub(crate) const SIZE: u32 = 4;
const STEP_MS: u64 = 60;

#[derive(gyr::Sensor)]
#[sensor(name = "gyr.mpi.begin")]
struct MpiBegin {
    call: &'static str,
}

#[derive(gyr::Sensor)]
#[sensor(name = "gyr.mpi.end")]
struct MpiEnd {
    call: &'static str,
    ret: i32,
}

/// This process's rank, if it is a rank.
pub(crate) fn child() -> Option<u32> {
    std::env::var(RANK).ok()?.parse().ok()
}

fn now_ms() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
        * 1e3
}

fn sleep_until(t_ms: f64) {
    let d = t_ms - now_ms();
    if d > 0.0 {
        std::thread::sleep(Duration::from_secs_f64(d / 1e3));
    }
}

fn call(name: &'static str, f: impl FnOnce()) {
    gyr::emit!(MpiBegin { call: name });
    f();
    gyr::emit!(MpiEnd { call: name, ret: 0 });
}

/// Rank `rank`'s program: waits for the go file, then runs the ring until killed.
pub(crate) fn run(rank: u32) -> ! {
    let _rt = gyr::init().expect("start gyr");
    let go = std::env::var(GO).unwrap();
    let start: f64 = loop {
        if let Some(t) = std::fs::read_to_string(&go)
            .ok()
            .and_then(|s| s.trim().parse().ok())
        {
            break t;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    gyr::msg::init(JOB, rank, SIZE);
    // When each rank's computation ends (and its ring send begins), ms into a step.
    let computes = |r: u32| if r == 0 { 25.0 } else { 2.0 };
    let (next, prev) = ((rank + 1) % SIZE, (rank + SIZE - 1) % SIZE);
    for k in 0u64.. {
        let step = start + (k * STEP_MS) as f64;
        sleep_until(step + computes(rank));
        call("MPI_Send", || {
            gyr::msg::send(next, 0, 1024 * u64::from(rank + 1))
        });
        call("MPI_Recv", || {
            sleep_until(step + computes(prev) + 1.0);
            gyr::msg::recv(prev, 0, 1024 * u64::from(prev + 1));
        });
        if rank == 2 {
            call("MPI_Ssend", || {
                gyr::msg::send(3, 7, 65536);
                sleep_until(step + 41.0);
            });
        }
        if rank == 3 {
            sleep_until(step + 40.0);
            call("MPI_Recv", || {
                sleep_until(step + 41.0);
                gyr::msg::recv(2, 7, 65536);
            });
        }
        call("MPI_Barrier", || sleep_until(step + 45.0));
    }
    unreachable!()
}

/// Starts the four ranks as children running test `test` of this binary, pushing to the
/// hub's gRPC address `hub`; they begin once [`go`] is called.
pub(crate) fn start(test: &str, hub: std::net::SocketAddr, dir: &Path) -> Vec<Program> {
    (0..SIZE)
        .map(|r| {
            Program(
                Command::new(std::env::current_exe().unwrap())
                    .args(["--exact", test, "--nocapture"])
                    .env(RANK, r.to_string())
                    .env(GO, dir.join("go"))
                    .env("GYR_HUB", hub.to_string())
                    .env("GYR_SOCKET_DIR", dir)
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .unwrap(),
            )
        })
        .collect()
}

/// Lets the ranks begin, a moment from now.
pub(crate) fn go(dir: &Path) {
    let tmp = dir.join("go.tmp");
    std::fs::write(&tmp, format!("{}", now_ms() + 100.0)).unwrap();
    std::fs::rename(tmp, dir.join("go")).unwrap();
}
