#![doc = include_str!("../README.md")]
//!
//! `GYR_TRACE=light.gyr cargo run --release -p gyr-example-light`, then `gyr trace info
//! light.gyr`. The program is a 1-D Jacobi relaxation; each sweep is a span and reports its
//! residual.

/// One sweep of the relaxation.
#[derive(gyr::Sensor)]
struct Sweep {
    sweep: u64,
    residual: f64,
}

fn main() {
    let rt = match gyr::init() {
        Ok(rt) => Some(rt),
        Err(e) => {
            eprintln!("light: monitoring is off: {e}");
            None
        }
    };
    let sweeps: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(2000);
    // A rod held at 1 on the left and 0 on the right, relaxed towards the straight line.
    let n = 512;
    let mut u = vec![0.0f64; n];
    u[0] = 1.0;
    let mut next = u.clone();
    let mut residual = f64::MAX;
    for sweep in 0..sweeps {
        let _span = gyr::span!("sweep");
        residual = 0.0;
        for i in 1..n - 1 {
            next[i] = 0.5 * (u[i - 1] + u[i + 1]);
            residual = f64::max(residual, (next[i] - u[i]).abs());
        }
        std::mem::swap(&mut u, &mut next);
        gyr::emit!(Sweep { sweep, residual });
    }
    println!("{sweeps} sweeps, residual {residual:.3e}");
    if let Some(rt) = rt {
        let s = rt.shutdown();
        println!("gyr: {} records, {} lost", s.records, s.lost);
    }
}
