//! The messages a web page sends the hub over its WebSocket, parsed as the hub parses them.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = gyr_hub::parse_page_command(text);
});
