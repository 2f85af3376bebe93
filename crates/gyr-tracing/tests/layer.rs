//! The layer end to end in one process: a gyr runtime with a memory sink, a `tracing`
//! subscriber with the layer (beside `tracing`'s own fmt layer), and the events that arrive.

use gyr::MemorySink;
use gyr::control::{Target, set_enabled};
use gyr::gyr_core::{FieldType, Value};
use gyr_tracing::GyrLayer;
use std::sync::{Arc, Mutex, MutexGuard};
use tracing_subscriber::layer::SubscriberExt;

/// One runtime runs per process: each test takes this lock first.
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs `f` under a subscriber made of the layer and a fmt layer writing nowhere, with a gyr
/// runtime recording into memory; returns what was recorded.
fn record(layer: GyrLayer, f: impl FnOnce()) -> MemorySink {
    let mem = MemorySink::new();
    let rt = gyr::Builder::new()
        .serve(false)
        .sink(mem.clone())
        .start()
        .unwrap();
    let subscriber = tracing_subscriber::registry()
        .with(tracing_subscriber::fmt::layer().with_writer(std::io::sink))
        .with(layer);
    tracing::subscriber::with_default(subscriber, f);
    rt.shutdown();
    mem
}

/// The gyr type name of a call site in this file with `tail` (name or `L<line>`) and `level`.
fn ty(tail: &str, level: &str) -> String {
    format!("{}.{tail}.{level}", module_path!().replace("::", "."))
}

fn field_types(mem: &MemorySink, name: &str) -> Vec<(String, FieldType)> {
    let rec = mem.records();
    let id = rec
        .iter()
        .map(|r| r.type_id)
        .find(|&id| mem.schema(id).is_some_and(|s| s.name == name))
        .unwrap_or_else(|| panic!("no events of `{name}`"));
    mem.schema(id)
        .unwrap()
        .fields
        .into_iter()
        .map(|f| (f.name, f.ty))
        .collect()
}

#[derive(Debug)]
struct Point {
    #[allow(dead_code)] // read through `Debug`
    x: i32,
}

#[test]
fn events_keep_typed_fields_target_and_level() {
    let _g = serial();
    let mem = record(GyrLayer::new(), || {
        let label = "solver";
        tracing::warn!(
            name: "typed",
            signed = -5_i64,
            unsigned = 5_u64,
            ratio = 0.5,
            ok = true,
            label,
            at = ?Point { x: 3 },
            "step {} done",
            7
        );
    });
    let name = ty("typed", "warn");
    assert_eq!(
        field_types(&mem, &name),
        vec![
            ("message".into(), FieldType::Str),
            ("signed".into(), FieldType::I64),
            ("unsigned".into(), FieldType::U64),
            ("ratio".into(), FieldType::F64),
            ("ok".into(), FieldType::Bool),
            ("label".into(), FieldType::Str),
            ("at".into(), FieldType::Str),
        ]
    );
    let events = mem.events(&name);
    assert_eq!(events.len(), 1);
    assert_eq!(
        events[0].1,
        vec![
            Value::Str("step 7 done".into()),
            Value::Int(-5),
            Value::UInt(5),
            Value::Float(0.5),
            Value::Bool(true),
            Value::Str("solver".into()),
            Value::Str("Point { x: 3 }".into()),
        ]
    );
}

#[test]
fn unnamed_events_are_named_by_line() {
    let _g = serial();
    let line = line!() + 2;
    let mem = record(GyrLayer::new(), || {
        tracing::debug!(n = 1_u64);
    });
    let events = mem.events(&ty(&format!("L{line}"), "debug"));
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].1, vec![Value::UInt(1)]);
}

/// The values of the events of type `name`, first field only, in order.
fn firsts(mem: &MemorySink, name: &str) -> Vec<Value> {
    mem.events(name)
        .into_iter()
        .map(|(_, v)| v[0].clone())
        .collect()
}

#[test]
fn spans_pair_begin_and_end_and_carry_their_fields() {
    let _g = serial();
    let mem = record(GyrLayer::new(), || {
        let outer = tracing::info_span!("outer", domain = 3_u64, state = tracing::field::Empty);
        outer.record("state", "warm");
        let _o = outer.enter();
        {
            let _i = tracing::debug_span!("inner").entered();
            tracing::info!(name: "inside", k = 1_i64);
        }
    });
    assert_eq!(
        firsts(&mem, "gyr.span.begin"),
        vec![Value::Str("outer".into()), Value::Str("inner".into())]
    );
    assert_eq!(
        firsts(&mem, "gyr.span.end"),
        vec![Value::Str("inner".into()), Value::Str("outer".into())]
    );
    let fields = mem.events(&ty("outer", "info"));
    assert_eq!(fields.len(), 1);
    assert_eq!(fields[0].1, vec![Value::UInt(3), Value::Str("warm".into())]);
    // A span without fields records no field event.
    assert!(mem.events(&ty("inner", "debug")).is_empty());
    // On one thread, in order: begin outer, its fields, begin inner, the event, end, end.
    let order: Vec<String> = mem
        .records()
        .iter()
        .filter_map(|r| mem.schema(r.type_id))
        .map(|s| s.name)
        .filter(|n| n.starts_with("gyr.span") || n.contains("gyr_tracing") || n.contains("layer."))
        .collect();
    assert_eq!(
        order,
        vec![
            "gyr.span.begin".to_owned(),
            ty("outer", "info"),
            "gyr.span.begin".to_owned(),
            ty("inside", "info"),
            "gyr.span.end".to_owned(),
            "gyr.span.end".to_owned(),
        ]
    );
}

#[test]
fn each_enter_records_the_fields_as_record_left_them() {
    let _g = serial();
    let mem = record(GyrLayer::new(), || {
        let label = "x".repeat(100); // longer than the fields kept inline
        let span = tracing::info_span!(
            "polled",
            n = 1_u64,
            label = label.as_str(),
            done = tracing::field::Empty
        );
        span.in_scope(|| {});
        span.record("n", 2_u64);
        span.in_scope(|| {});
        span.record("done", true);
        span.record("label", "short");
        span.in_scope(|| {});
        // A value of another type.
        span.record("n", -1_i64);
        span.in_scope(|| {});
    });
    let long = Value::Str("x".repeat(100));
    let short = Value::Str("short".into());
    let values = |name: String| -> Vec<Vec<Value>> {
        mem.events(&name).into_iter().map(|(_, v)| v).collect()
    };
    let name = ty("polled", "info");
    assert_eq!(
        values(name.clone()),
        vec![
            vec![Value::UInt(1), long.clone()],
            vec![Value::UInt(2), long]
        ]
    );
    // Another set of present fields, then another type: the call site's next schemas.
    assert_eq!(
        values(format!("{name}-2")),
        vec![vec![Value::UInt(2), short.clone(), Value::Bool(true)]]
    );
    assert_eq!(
        values(format!("{name}-3")),
        vec![vec![Value::Int(-1), short, Value::Bool(true)]]
    );
    assert_eq!(mem.events("gyr.span.begin").len(), 4);
    assert_eq!(mem.events("gyr.span.end").len(), 4);
}

#[test]
fn exits_name_their_spans_in_any_order_and_at_any_depth() {
    let _g = serial();
    let mem = record(GyrLayer::new(), || {
        // Exited out of order: `a` before `b`.
        let a = tracing::info_span!("a").entered();
        let b = tracing::info_span!("b").entered();
        drop(a);
        drop(b);
        // Deeper than a thread's entries: the deepest exits look their spans up.
        let spans: Vec<tracing::Span> = (0..40)
            .map(|i| {
                let s = match i % 2 {
                    0 => tracing::info_span!("even", i),
                    _ => tracing::info_span!("odd", i),
                };
                s.in_scope(|| {});
                s
            })
            .collect();
        let mut guards = Vec::new();
        for s in &spans {
            guards.push(s.enter());
        }
        while guards.pop().is_some() {}
    });
    let ends: Vec<Value> = firsts(&mem, "gyr.span.end");
    assert_eq!(ends[..2], [Value::Str("a".into()), Value::Str("b".into())]);
    // 40 spans entered once alone, then all nested, then exited innermost first.
    let nested: Vec<Value> = (0..40)
        .rev()
        .map(|i| Value::Str(if i % 2 == 0 { "even" } else { "odd" }.into()))
        .collect();
    assert_eq!(ends.len(), 2 + 40 + 40);
    assert_eq!(ends[2 + 40..], nested[..]);
    assert_eq!(firsts(&mem, "gyr.span.begin").len(), ends.len());
}

#[test]
fn a_span_entered_on_another_thread_begins_and_ends_there() {
    let _g = serial();
    let threads = Arc::new(Mutex::new(Vec::new()));
    let seen = threads.clone();
    let mem = record(GyrLayer::new(), move || {
        let span = tracing::info_span!("moved", job = 9_u64);
        let dispatch = tracing::dispatcher::get_default(|d| d.clone());
        std::thread::spawn(move || {
            tracing::dispatcher::with_default(&dispatch, || {
                let _e = span.enter();
                tracing::info!(name: "work", n = 1_u64);
            });
            // The gyr thread id, known once the thread has recorded an event.
            seen.lock().unwrap().push(gyr::thread::current_id());
        })
        .join()
        .unwrap();
    });
    let worker = threads.lock().unwrap()[0];
    assert_ne!(worker, 0);
    let begins = mem.events("gyr.span.begin");
    let ends = mem.events("gyr.span.end");
    assert_eq!(begins.len(), 1);
    assert_eq!(ends.len(), 1);
    assert_eq!(begins[0].0.thread, worker);
    assert_eq!(ends[0].0.thread, worker);
    assert!(begins[0].0.timestamp <= ends[0].0.timestamp);
    let fields = mem.events(&ty("moved", "info"));
    assert_eq!(fields.len(), 1);
    assert_eq!(fields[0].0.thread, worker);
    assert_eq!(fields[0].1, vec![Value::UInt(9)]);
}

#[test]
fn a_switched_off_schema_records_nothing() {
    let _g = serial();
    let name = ty("quiet", "info");
    let emit = |n: u64| tracing::info!(name: "quiet", n);
    // The first run registers the schema.
    let mem = record(GyrLayer::new(), || emit(1));
    assert_eq!(mem.events(&name).len(), 1);
    set_enabled(&Target::Type(name.clone()), false);
    let mem = record(GyrLayer::new(), || {
        emit(2);
        tracing::info!(name: "loud", n = 3_u64);
    });
    set_enabled(&Target::Type(name.clone()), true);
    assert!(mem.events(&name).is_empty());
    assert_eq!(mem.events(&ty("loud", "info")).len(), 1);
}

/// One call site whose field takes the type of its argument.
fn vary<T: tracing::Value>(x: T) {
    tracing::info!(name: "vary", x);
}

#[test]
fn field_types_that_vary_get_schemas_up_to_the_bound() {
    let _g = serial();
    let layer = GyrLayer::new();
    let mem = record(layer.clone(), || {
        vary(1_i64);
        vary(2_u64);
        vary(1_i64);
        vary(0.5_f64);
        vary("text");
        vary(true); // a fifth set of types: over the bound of 4
    });
    let name = ty("vary", "info");
    assert_eq!(firsts(&mem, &name), vec![Value::Int(1), Value::Int(1)]);
    assert_eq!(firsts(&mem, &format!("{name}-2")), vec![Value::UInt(2)]);
    assert_eq!(firsts(&mem, &format!("{name}-3")), vec![Value::Float(0.5)]);
    assert_eq!(
        firsts(&mem, &format!("{name}-4")),
        vec![Value::Str("text".into())]
    );
    assert_eq!(layer.unrecorded(), 1);
}

#[test]
fn call_sites_beyond_the_bound_are_counted_not_recorded() {
    let _g = serial();
    let layer = GyrLayer::with_limits(2, 100);
    let mem = record(layer.clone(), || {
        for _ in 0..3 {
            tracing::info!(name: "first", n = 1_u64);
            tracing::info!(name: "second", n = 2_u64);
            tracing::info!(name: "third", n = 3_u64);
        }
    });
    assert_eq!(mem.events(&ty("first", "info")).len(), 3);
    assert_eq!(mem.events(&ty("second", "info")).len(), 3);
    assert!(mem.events(&ty("third", "info")).is_empty());
    assert_eq!(layer.unrecorded(), 3);
}

#[test]
fn schemas_beyond_the_bound_are_counted_not_recorded() {
    let _g = serial();
    let layer = GyrLayer::with_limits(100, 1);
    let mem = record(layer.clone(), || {
        tracing::info!(name: "kept", n = 1_u64);
        tracing::info!(name: "refused", n = 2_u64);
    });
    assert_eq!(mem.events(&ty("kept", "info")).len(), 1);
    assert!(mem.events(&ty("refused", "info")).is_empty());
    assert_eq!(layer.unrecorded(), 1);
}

#[test]
fn without_a_runtime_nothing_is_recorded_and_nothing_fails() {
    let _g = serial();
    let layer = GyrLayer::new();
    let subscriber = tracing_subscriber::registry().with(layer.clone());
    tracing::subscriber::with_default(subscriber, || {
        let _s = tracing::info_span!("idle", n = 1_u64).entered();
        tracing::info!(name: "idle_event", n = 1_u64);
    });
    assert_eq!(layer.unrecorded(), 0);
}

#[test]
fn spans_beyond_the_table_keep_their_fields_and_records() {
    let _g = serial();
    // More spans open at once than the layer's table has slots: some share a slot and keep
    // their fields in the registry's extensions; every one records its own values.
    let n = 1000_u64;
    let mem = record(GyrLayer::new(), || {
        let spans: Vec<tracing::Span> = (0..n)
            .map(|i| tracing::info_span!("many", i, later = tracing::field::Empty))
            .collect();
        for (i, s) in spans.iter().enumerate() {
            s.record("later", i as u64 * 10);
        }
        for s in &spans {
            s.in_scope(|| {});
        }
    });
    let fields = mem.events(&ty("many", "info"));
    assert_eq!(fields.len(), n as usize);
    let mut seen: Vec<(u64, u64)> = fields
        .iter()
        .map(|(_, v)| match v[..] {
            [Value::UInt(i), Value::UInt(later)] => (i, later),
            ref other => panic!("unexpected fields {other:?}"),
        })
        .collect();
    seen.sort();
    let want: Vec<(u64, u64)> = (0..n).map(|i| (i, i * 10)).collect();
    assert_eq!(seen, want);
}

#[test]
fn clones_in_two_registries_keep_their_spans_apart() {
    let _g = serial();
    let mem = MemorySink::new();
    let rt = gyr::Builder::new()
        .serve(false)
        .sink(mem.clone())
        .start()
        .unwrap();
    let layer = GyrLayer::new();
    let a = tracing::Dispatch::new(tracing_subscriber::registry().with(layer.clone()));
    let b = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    // Both registries give their first span the same id.
    let sa = tracing::dispatcher::with_default(&a, || tracing::info_span!("twin", who = 1_u64));
    let sb = tracing::dispatcher::with_default(&b, || tracing::info_span!("twin", who = 2_u64));
    assert_eq!(sa.id(), sb.id());
    tracing::dispatcher::with_default(&a, || sa.in_scope(|| {}));
    tracing::dispatcher::with_default(&b, || sb.in_scope(|| {}));
    drop((sa, sb));
    rt.shutdown();
    let who: Vec<Value> = firsts(&mem, &ty("twin", "info"));
    assert_eq!(who, vec![Value::UInt(1), Value::UInt(2)]);
}
