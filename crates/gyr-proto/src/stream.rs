//! The event stream's descriptions on the wire: schemas and threads, converted once at each
//! boundary (a program's sinks send them, the hub and the clients' decoder read them).

use crate::v1;
use gyr_core::{Field, FieldType, Schema, ThreadInfo};

/// A schema as the stream carries it.
pub fn wire_schema(s: &Schema) -> v1::Schema {
    v1::Schema {
        id: s.id,
        name: s.name.clone(),
        fields: s
            .fields
            .iter()
            .map(|f| v1::FieldInfo {
                name: f.name.clone(),
                r#type: f.ty.to_string(),
            })
            .collect(),
    }
}

/// A schema from the stream; `None` if it is not a valid schema. A field type this version
/// does not know is read as bytes.
pub fn schema(s: &v1::Schema) -> Option<Schema> {
    let fields = s
        .fields
        .iter()
        .map(|f| {
            Field::new(
                f.name.clone(),
                FieldType::parse(&f.r#type).unwrap_or(FieldType::Bytes),
            )
        })
        .collect();
    Schema::new(s.id, s.name.clone(), fields).ok()
}

/// A thread as the stream carries it.
pub fn wire_thread(t: &ThreadInfo) -> v1::ThreadInfo {
    v1::ThreadInfo {
        id: t.id,
        name: t.name.clone(),
        os_tid: t.os_tid,
        role: None,
        role_index: None,
    }
}

/// A thread as the stream carries it, with the role and index it named, if it did.
pub fn wire_thread_with_role(t: &ThreadInfo, role: Option<(&str, u64)>) -> v1::ThreadInfo {
    let mut w = wire_thread(t);
    if let Some((role, index)) = role {
        w.role = Some(role.to_owned());
        w.role_index = Some(index);
    }
    w
}

/// The role and index a thread from the stream named, if it did (a sender older than roles
/// in descriptions sends none: its consumers learn roles from `gyr.thread.role` records only).
pub fn thread_role(t: &v1::ThreadInfo) -> Option<(&str, u64)> {
    Some((t.role.as_deref()?, t.role_index.unwrap_or(0)))
}

/// A thread from the stream.
pub fn thread(t: &v1::ThreadInfo) -> ThreadInfo {
    ThreadInfo {
        id: t.id,
        name: t.name.clone(),
        os_tid: t.os_tid,
    }
}

/// The records of `blocks`, decoded with the types `schema` finds by id (what a subscriber
/// asking for decoded events gets), and how many could not be: their type unknown or their
/// payload not matching it.
pub fn decode_blocks<'a>(
    blocks: &[v1::RecordBlock],
    schema: impl Fn(u32) -> Option<&'a Schema>,
) -> (Vec<v1::DecodedEvent>, u64) {
    let mut events = Vec::new();
    let mut undecodable = 0;
    for block in blocks {
        for r in gyr_core::record::Records::new(block.thread, &block.records) {
            let Ok(r) = r else {
                undecodable += 1;
                // A damaged block: nothing after this record can be found.
                break;
            };
            let h = r.header;
            let decoded = schema(h.type_id).and_then(|s| {
                let values = gyr_core::value::decode(s, r.payload).ok()?;
                Some((s, values))
            });
            let Some((s, values)) = decoded else {
                undecodable += 1;
                continue;
            };
            events.push(v1::DecodedEvent {
                thread: block.thread,
                type_id: h.type_id,
                r#type: s.name.clone(),
                timestamp: h.timestamp,
                seq: h.seq,
                perturbation: h.perturbation,
                fields: s
                    .fields
                    .iter()
                    .zip(values)
                    .map(|(f, v)| v1::EventField {
                        name: f.name.clone(),
                        value: Some(v.into()),
                    })
                    .collect(),
            });
        }
    }
    (events, undecodable)
}
