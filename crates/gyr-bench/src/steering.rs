//! `gyr-bench steering`: the cost of steering, in process.
//!
//! Measured here: the closed loop Falcon measured at 610 µs (sensor → event/action repository →
//! attribute changed, as the program sees it), probe reads and writes through the steering API,
//! and actuation through a synch point the program reaches at least every 10 µs. The figures
//! over the embedded server's transport join these when the server does.

use gyr::gyr_core::Value;
use gyr::steer::{self, Actuator, AttrType, Who};
use gyr::{Builder, Sensor};
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

#[derive(Sensor)]
#[sensor(name = "bench.demand")]
struct Demand {
    level: f64,
}

#[derive(gyr::Steerable)]
struct Plant {
    #[steer(min = 0.0, max = 1e12)]
    setpoint: f64,
    count: u64,
}

fn percentile(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

fn r3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

pub(crate) fn run(json: bool, quick: bool) -> anyhow::Result<()> {
    let n = if quick { 2_000 } else { 20_000 };
    let who = Who::new("bench");
    let rt = Builder::new().start()?;
    println!("gyr-bench steering: {n} operations per figure, in process");

    // Closed loop: emit, the rule sets the parameter, the program sees the new value.
    let supply = steer::param("bench_supply", 0.0f64).register()?;
    let rule = steer::repository::on_event(
        "bench-follow",
        "bench.demand",
        |_| true,
        |e, who| {
            steer::set(
                "bench_supply",
                Value::Float(e.f64("level").unwrap_or(0.0)),
                who,
            )
            .map(drop)
        },
    )?;
    let mut loop_us = Vec::with_capacity(n);
    for i in 1..=n {
        let level = i as f64;
        let t = Instant::now();
        Demand { level }.emit();
        while supply.get() != level {
            std::hint::spin_loop();
            anyhow::ensure!(
                t.elapsed() < Duration::from_secs(5),
                "the rule did not act within 5 s"
            );
        }
        loop_us.push(t.elapsed().as_secs_f64() * 1e6);
    }
    rule.remove();
    let closed_p50 = percentile(&mut loop_us, 0.5);
    let closed_p99 = percentile(&mut loop_us, 0.99);
    println!(
        "  closed loop (sensor -> rule -> attribute)      p50 {closed_p50:8.2} us   p99 {closed_p99:8.2} us   (Falcon: 610 us)"
    );

    // Probes through the API.
    let plant = steer::register(
        "bench_plant",
        Plant {
            setpoint: 0.0,
            count: 0,
        },
    )?;
    let mut write_us = Vec::with_capacity(n);
    let mut read_us = Vec::with_capacity(n);
    for i in 0..n {
        let t = Instant::now();
        steer::set("bench_plant.setpoint", Value::Float(i as f64), &who)?;
        write_us.push(t.elapsed().as_secs_f64() * 1e6);
        let t = Instant::now();
        std::hint::black_box(steer::get("bench_plant.setpoint")?);
        read_us.push(t.elapsed().as_secs_f64() * 1e6);
    }
    let write_p50 = percentile(&mut write_us, 0.5);
    let read_p50 = percentile(&mut read_us, 0.5);
    println!(
        "  probe write / read                             p50 {write_p50:8.2} / {read_p50:.2} us (Progress: 643 us)"
    );

    // Actuation: the program reaches a synch point at least every 10 us.
    plant.add_actuator(
        Actuator::new("bump", |p: &mut Plant, args| {
            p.count += args.get::<u64>(0)?;
            Ok(Value::UInt(p.count))
        })
        .param("by", AttrType::UInt),
    )?;
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    let program = std::thread::spawn(move || {
        while !s2.load(Ordering::Relaxed) {
            steer::sync_point("bench");
            let t = Instant::now();
            while t.elapsed() < Duration::from_micros(5) {
                std::hint::spin_loop();
            }
        }
    });
    let mut act_us = Vec::with_capacity(n / 4);
    for _ in 0..n / 4 {
        let t = Instant::now();
        steer::actuate("bench_plant.bump", &[Value::UInt(1)], &who)?
            .wait(Duration::from_secs(5))?;
        act_us.push(t.elapsed().as_secs_f64() * 1e6);
    }
    stop.store(true, Ordering::Relaxed);
    let _ = program.join();
    let act_p50 = percentile(&mut act_us, 0.5);
    println!(
        "  actuate (synch point every <= 10 us)           p50 {act_p50:8.2} us (Progress: 627 us)"
    );
    plant.unregister();
    supply.unregister();
    let summary = rt.shutdown();
    if json {
        println!(
            "{}",
            json!({
                "bench": "steering",
                "operations": n,
                "closed_loop_p50_us": r3(closed_p50),
                "closed_loop_p99_us": r3(closed_p99),
                "inproc_probe_write_p50_us": r3(write_p50),
                "inproc_probe_read_p50_us": r3(read_p50),
                "inproc_actuate_p50_us": r3(act_p50),
                "lost": summary.lost,
                "targets": { "closed_loop_p50_us<=5": closed_p50 <= 5.0 },
            })
        );
    }
    Ok(())
}
