//! Imports of other tools' traces (`gyr trace import`): SDDF as text, binary SDDF and PICL,
//! chosen by the first byte; any input ends in a trace or an error naming where, never a panic
//! or an allocation beyond the importers' bounds.
#![no_main]

use gyr_trace::ImportFormat;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&which, input)) = data.split_first() else {
        return;
    };
    let format = match which % 3 {
        0 => ImportFormat::SddfAscii,
        1 => ImportFormat::SddfBinary,
        _ => ImportFormat::Picl,
    };
    match gyr_trace::import(format, input, Vec::new(), "fuzz") {
        Ok((trace, _)) => {
            // What an import writes is a trace gyr reads back.
            let mut r = gyr_core::TraceReader::new(std::io::Cursor::new(trace))
                .expect("an imported trace opens");
            r.for_each_item(|_| {});
            assert!(!r.summary().is_corrupt(), "an imported trace is intact");
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }
});
