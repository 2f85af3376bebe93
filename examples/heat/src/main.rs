//! Runs the heat-diffusion example with gyr configured from the environment:
//! `GYR_TRACE=heat.gyr cargo run --release -p gyr-example-heat`.

fn main() {
    let rt = match gyr::init() {
        Ok(rt) => Some(rt),
        Err(e) => {
            eprintln!("heat: monitoring is off: {e}");
            None
        }
    };
    let progress = std::sync::Arc::new(gyr_example_heat::Progress::default());
    let out = gyr_example_heat::run(&gyr_example_heat::Config::default(), &progress);
    println!(
        "{} steps, residual {:.3e}, mean temperature {:.3}",
        out.steps, out.residual, out.mean_temperature
    );
    if let Some(rt) = rt {
        let s = rt.shutdown();
        println!("gyr: {} records, {} lost", s.records, s.lost);
    }
}
