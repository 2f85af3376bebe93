//! The compressor passage solver as a program: `npss-compressor --speed 0.9 --back_pressure 1.3`.

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    std::process::exit(gyr_example_npss::compressor::main(&args));
}
