//! Run-until conditions as clients write them (`body.step >= 1000 or body.energy < -2`),
//! parsed and evaluated against a registered object of every attribute kind.
#![no_main]

use gyr::steer;
use libfuzzer_sys::fuzz_target;
use std::sync::Once;

#[derive(gyr::Steerable)]
struct Body {
    step: u64,
    #[steer(min = -10.0, max = 10.0)]
    energy: f64,
    level: i32,
    on: bool,
    label: String,
    weights: Vec<f64>,
}

static REGISTER: Once = Once::new();

fuzz_target!(|data: &[u8]| {
    REGISTER.call_once(|| {
        let body = Body {
            step: 7,
            energy: -1.5,
            level: 3,
            on: true,
            label: "x".into(),
            weights: vec![0.5, 1.5],
        };
        // Kept registered for the whole run.
        std::mem::forget(steer::register("body", body).expect("registers once"));
        std::mem::forget(
            steer::param("gain", 2.0f64)
                .register()
                .expect("registers once"),
        );
    });
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match steer::Condition::parse(text) {
        Ok(c) => {
            let _ = c.holds();
            let _ = c.text();
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }
});
