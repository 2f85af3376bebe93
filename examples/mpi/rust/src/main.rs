//! A halo exchange in Rust, on rsmpi: every rank holds a strip of a 1-D field, swaps its edges
//! with its two neighbours each step (`MPI_Sendrecv` both ways), works on its strip, and every
//! tenth step the ranks agree on the largest change (`MPI_Allreduce`). The same pattern as
//! `halo.c`, for `gyr run --mpi` (which records it without a change: rsmpi calls the MPI
//! library's C functions) and `gyr sim`.
//!
//! Usage: `halo-rs [STEPS] [BYTES] [WORK]`: steps, bytes per edge, and work per step (loop
//! iterations of a few floating-point operations).

use mpi::collective::SystemOperation;
use mpi::traits::*;

fn arg(n: usize, default: u64) -> u64 {
    std::env::args()
        .nth(n)
        .and_then(|a| a.parse().ok())
        .unwrap_or(default)
}

/// `iterations` of arithmetic the compiler cannot drop: the computing between messages.
fn work(iterations: u64, mut x: f64) -> f64 {
    for i in 0..iterations {
        x = x * 0.999_999 + (i as f64).sqrt() * 1e-9;
    }
    std::hint::black_box(x)
}

fn main() {
    let Some(universe) = mpi::initialize() else {
        eprintln!("halo-rs: MPI was already initialised");
        std::process::exit(2);
    };
    let world = universe.world();
    let (rank, size) = (world.rank(), world.size());
    let (steps, bytes, iterations) = (arg(1, 200), arg(2, 8192) as usize, arg(3, 200_000));
    let (left, right) = ((rank + size - 1) % size, (rank + 1) % size);
    let edge = vec![rank as u8; bytes];
    let (mut from_left, mut from_right) = (vec![0u8; bytes], vec![0u8; bytes]);
    let mut x = f64::from(rank);
    let mut change = 0.0f64;
    for step in 0..steps {
        mpi::point_to_point::send_receive_into(
            &edge[..],
            &world.process_at_rank(right),
            &mut from_left[..],
            &world.process_at_rank(left),
        );
        mpi::point_to_point::send_receive_into(
            &edge[..],
            &world.process_at_rank(left),
            &mut from_right[..],
            &world.process_at_rank(right),
        );
        let before = x;
        x = work(
            iterations,
            x + f64::from(from_left[0]) - f64::from(from_right[0]),
        );
        if step % 10 == 9 {
            let mine = (x - before).abs();
            world.all_reduce_into(&mine, &mut change, SystemOperation::max());
        }
    }
    if rank == 0 {
        println!("halo-rs: {steps} steps on {size} ranks, largest change {change:.3e}");
    }
}
