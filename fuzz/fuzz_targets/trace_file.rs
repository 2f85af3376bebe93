//! The trace reader over arbitrary bytes: it never panics, and its work stays linear in the
//! input's size however the bytes are laid out.
#![no_main]

use gyr_core::trace::{Item, TraceReader};
use libfuzzer_sys::fuzz_target;
use std::io::Cursor;

fuzz_target!(|data: &[u8]| {
    let Ok(mut r) = TraceReader::new(Cursor::new(data)) else {
        return;
    };
    r.for_each_item(|item| {
        if let Item::Record {
            schema: Some(s),
            record,
        } = item
        {
            let _ = gyr_core::value::decode(s, record.payload);
        }
    });
    for d in &r.summary().damage {
        let _ = d.to_string();
    }
    let len = data.len() as u64;
    assert!(
        r.bytes_examined() <= 4 * len + 64,
        "{} bytes examined for {len}",
        r.bytes_examined()
    );
});
