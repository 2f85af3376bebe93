//! Decoding the live event stream (`Subscribe`): each batch may introduce schemas and thread
//! names that later batches rely on, so a decoder keeps them. Used by every client that shows
//! events: the CLI, steering scripts, the benchmarks.

use gyr_core::record::Records;
use gyr_core::value::decode;
use gyr_core::{Schema, Value};
use gyr_proto::stream::schema;
use gyr_proto::v1;
use std::collections::HashMap;

/// One decoded event.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// Nanoseconds since the program's clock started.
    pub t_ns: u64,
    /// The thread that emitted it.
    pub thread: u64,
    /// That thread's name, if it has one.
    pub thread_name: String,
    /// The event type.
    pub type_name: String,
    /// Field names and values, in schema order.
    pub fields: Vec<(String, Value)>,
}

/// What one batch of the stream held.
#[derive(Debug, Clone, Default)]
pub struct Batch {
    /// Events this client was not sent because it fell behind.
    pub lost: u64,
    /// The events, in stream order.
    pub events: Vec<Event>,
    /// Records of a type whose schema never reached this client: they cannot be shown, so
    /// they are counted (a stream that introduces every type before its records has none).
    pub unreadable: u64,
}

/// Decodes the live stream, remembering the schemas and thread names it introduces.
#[derive(Debug, Default)]
pub struct EventDecoder {
    schemas: HashMap<u32, Schema>,
    names: HashMap<u64, String>,
}

impl EventDecoder {
    /// Decodes one batch. Records of a type whose schema never arrived are counted in
    /// [`Batch::unreadable`].
    pub fn batch(&mut self, batch: v1::EventBatch) -> Batch {
        for s in &batch.schemas {
            if let Some(schema) = schema(s) {
                self.schemas.insert(schema.id, schema);
            }
        }
        for th in batch.threads {
            self.names.insert(th.id, th.name);
        }
        let mut events = Vec::new();
        let mut unreadable = 0;
        for block in batch.blocks {
            for r in Records::new(block.thread, &block.records).flatten() {
                let Some(s) = self.schemas.get(&r.header.type_id) else {
                    unreadable += 1;
                    continue;
                };
                let values = decode(s, r.payload).unwrap_or_default();
                events.push(Event {
                    t_ns: r.header.timestamp,
                    thread: block.thread,
                    thread_name: self.names.get(&block.thread).cloned().unwrap_or_default(),
                    type_name: s.name.clone(),
                    fields: s
                        .fields
                        .iter()
                        .map(|f| f.name.clone())
                        .zip(values)
                        .collect(),
                });
            }
        }
        Batch {
            lost: batch.lost,
            events,
            unreadable,
        }
    }

    /// The schemas seen so far.
    pub fn schemas(&self) -> impl Iterator<Item = &Schema> {
        self.schemas.values()
    }
}
