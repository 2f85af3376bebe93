//! The tracing example: `GYR_TRACE=t.gyr cargo run --release -p gyr-example-tracing` writes a
//! trace; with `GYR_HUB=127.0.0.1:7071` it shows in the hub (see [`gyr_example_tracing::app`]).

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    std::process::exit(gyr_example_tracing::app::main(&args));
}
