//! Chunk and block decoding: the input becomes the payload of a chunk with a correct checksum
//! after a valid header chunk, so that the fuzzer reaches the blocks and records inside instead
//! of stopping at the checksum. The input's first byte chooses the format version the preamble
//! states (odd: 1, the fixed records; even: 2, the compact ones), so both decoders are fuzzed.
#![no_main]

use gyr_core::TraceHeader;
use gyr_core::trace::{
    CHUNK_MAGIC, FIRST_FORMAT_VERSION, FORMAT_VERSION, Item, TraceReader, TraceWriter,
};
use libfuzzer_sys::fuzz_target;
use std::io::Cursor;

fuzz_target!(|data: &[u8]| {
    let Some((&choice, data)) = data.split_first() else {
        return;
    };
    let version = if choice & 1 == 1 {
        FIRST_FORMAT_VERSION
    } else {
        FORMAT_VERSION
    };
    let mut file = TraceWriter::new(Vec::new(), &TraceHeader::default())
        .expect("a header chunk is written to memory")
        .finish(&Default::default())
        .expect("written to memory");
    file[8..12].copy_from_slice(&version.to_le_bytes());
    // Keep the preamble and the header chunk, drop the end chunk.
    let header_len = u32::from_le_bytes(file[20..24].try_into().unwrap()) as usize;
    file.truncate(32 + header_len);
    let mut payload = data.to_vec();
    payload.resize(data.len().next_multiple_of(8), 0);
    file.extend_from_slice(&CHUNK_MAGIC);
    file.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    file.extend_from_slice(&crc32(&payload).to_le_bytes());
    file.extend_from_slice(&1u32.to_le_bytes());
    file.extend_from_slice(&payload);
    let mut r = TraceReader::new(Cursor::new(file)).expect("the header chunk is valid");
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
});

/// CRC-32 (IEEE), bit by bit: the fuzz target needs no dependency for it.
fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = (crc >> 1) ^ (0xedb8_8320 & (crc & 1).wrapping_neg());
        }
    }
    !crc
}
