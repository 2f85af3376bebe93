//! Sensor specification files: parsing and checking arbitrary text never panics.
#![no_main]

use gyr_core::spec::Spec;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match Spec::parse(text) {
        Ok(spec) => {
            for sensor in &spec.sensors {
                let schema = sensor.schema(1).expect("a parsed spec's sensors are valid");
                let _ = schema.fixed_size();
            }
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }
});
