//! The gRPC side: every request message decoded from bytes, the conversions from wire values
//! to gyr's values, and a batch of events decoded into records. The first byte picks the
//! message type; the rest is its encoding.
#![no_main]

use gyr_client::events::EventDecoder;
use gyr_proto::v1;
use libfuzzer_sys::fuzz_target;
use prost::Message;

fn values<'a>(vs: impl IntoIterator<Item = &'a v1::Value>) {
    for v in vs {
        let _ = v.to_core();
        let _ = v.incoming();
        let _ = v.to_string();
    }
}

fn decode<M: Message + Default>(bytes: &[u8]) -> Option<M> {
    M::decode(bytes).ok()
}

fuzz_target!(|data: &[u8]| {
    let Some((&which, bytes)) = data.split_first() else {
        return;
    };
    match which % 16 {
        0 => {
            decode::<v1::HandshakeRequest>(bytes);
        }
        1 => {
            decode::<v1::ListProcessesRequest>(bytes);
        }
        2 => {
            if let Some(v1::PublishMessage {
                kind: Some(v1::publish_message::Kind::Batch(batch)),
            }) = decode::<v1::PublishMessage>(bytes)
            {
                let _ = EventDecoder::default().batch(batch);
            }
        }
        3 => {
            decode::<v1::PingRequest>(bytes);
        }
        4 => {
            decode::<v1::StatusRequest>(bytes);
        }
        5 => {
            decode::<v1::ListObjectsRequest>(bytes);
        }
        6 => {
            decode::<v1::GetRequest>(bytes);
        }
        7 => {
            if let Some(m) = decode::<v1::SetRequest>(bytes) {
                values(m.writes.iter().filter_map(|w| w.value.as_ref()));
            }
        }
        8 => {
            if let Some(m) = decode::<v1::CallRequest>(bytes) {
                values(&m.args);
            }
        }
        9 => {
            decode::<v1::ControlRequest>(bytes);
        }
        10 => {
            decode::<v1::ListSensorsRequest>(bytes);
        }
        11 => {
            decode::<v1::SensorControlRequest>(bytes);
        }
        12 => {
            decode::<v1::SubscribeRequest>(bytes);
        }
        13 => {
            decode::<v1::LogRequest>(bytes);
        }
        14 => {
            if let Some(v) = decode::<v1::Value>(bytes) {
                values([&v]);
            }
        }
        _ => {
            // Two batches through one decoder: the second may use the first's schemas.
            let mut d = EventDecoder::default();
            let (a, b) = bytes.split_at(bytes.len() / 2);
            for part in [a, b] {
                if let Some(batch) = decode::<v1::EventBatch>(part) {
                    let _ = d.batch(batch);
                }
            }
        }
    }
});
