//! The engine cycle model as a program: `npss-cycle --map compressor.map --delay_ms 50`.

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    std::process::exit(gyr_example_npss::cycle::main(&args));
}
