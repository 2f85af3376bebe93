//! Steering end to end in one process: probes against a running program, actuators and their
//! conditions, synch-point control, functions, and the steering log.

mod support;

use gyr::gyr_core::Value;
use gyr::steer::{self, Actuator, AttrType, RunState, SteerError, Who};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

fn who() -> Who {
    Who::new("test")
}

fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn is_valid_split(v: &i64) -> Result<(), String> {
    if *v % 2 == 0 {
        Ok(())
    } else {
        Err(format!("{v} is odd; splits must be even"))
    }
}

#[derive(gyr::Steerable)]
struct Split {
    #[steer(min = 0, max = 100, validate = is_valid_split)]
    left: i64,
    #[steer(min = 0, max = 100)]
    right: i64,
    #[steer(read_only, description = "how many times the program read the split")]
    reads: u64,
    #[steer(nested)]
    limits: Limits,
    #[steer(skip)]
    #[allow(dead_code)]
    scratch: Vec<u8>,
}

#[derive(gyr::Steerable)]
struct Limits {
    #[steer(unit = "s", min = 0.0)]
    timeout: f64,
    label: String,
    weights: Vec<f64>,
}

/// Probe writes of two attributes in one request never show half-applied to the program, and a
/// parameter's value is never torn.
#[test]
fn concurrent_probes_never_tear_values() {
    let _g = support::serial();
    let split = steer::register(
        "split",
        Split {
            left: 50,
            right: 50,
            reads: 0,
            limits: Limits {
                timeout: 1.0,
                label: "x".into(),
                weights: vec![1.0],
            },
            scratch: Vec::new(),
        },
    )
    .unwrap();
    let gain = steer::param("gain", 1.0f64)
        .range(0.0, 1e6)
        .register()
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let bad = Arc::new(AtomicU64::new(0));
    let (s2, st2, b2, g2) = (split.clone(), stop.clone(), bad.clone(), gain.clone());
    let program = std::thread::spawn(move || {
        let mut n = 0u64;
        while !st2.load(Ordering::Relaxed) {
            {
                let s = s2.read();
                if s.left + s.right != 100 {
                    b2.fetch_add(1, Ordering::Relaxed);
                }
            }
            let g = g2.get();
            if g != 1.0 && g != 123456.0 {
                b2.fetch_add(1, Ordering::Relaxed);
            }
            n += 1;
        }
        n
    });
    for i in 0..2000i64 {
        let left = (i % 50) * 2;
        steer::set_many(
            &[
                ("split.left".into(), Value::Int(left)),
                ("split.right".into(), Value::Int(100 - left)),
            ],
            &who(),
        )
        .unwrap();
        let snapshot = steer::get_all("split").unwrap();
        let l = snapshot
            .iter()
            .find(|(n, _)| n == "left")
            .unwrap()
            .1
            .as_f64()
            .unwrap();
        let r = snapshot
            .iter()
            .find(|(n, _)| n == "right")
            .unwrap()
            .1
            .as_f64()
            .unwrap();
        assert_eq!(l + r, 100.0);
        steer::set(
            "gain",
            Value::Float(if i % 2 == 0 { 123456.0 } else { 1.0 }),
            &who(),
        )
        .unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    assert!(program.join().unwrap() > 0);
    assert_eq!(
        bad.load(Ordering::Relaxed),
        0,
        "the program saw a torn or half-applied write"
    );
    split.unregister();
    gain.unregister();
}

#[test]
fn rejected_writes_leave_values_intact_and_say_why() {
    let _g = support::serial();
    let split = steer::register(
        "split2",
        Split {
            left: 40,
            right: 60,
            reads: 0,
            limits: Limits {
                timeout: 1.0,
                label: "x".into(),
                weights: vec![1.0, 2.0],
            },
            scratch: Vec::new(),
        },
    )
    .unwrap();
    let err = |path: &str, v: Value| steer::set(path, v, &who()).unwrap_err().to_string();
    assert_eq!(
        err("split2.left", Value::Int(102)),
        "`split2.left` out of range: 102 is above the maximum 100; the value is unchanged"
    );
    assert!(err("split2.left", Value::Float(3.5)).contains("is of type int: expected an int"));
    assert_eq!(
        err("split2.reads", Value::UInt(1)),
        "`split2.reads` is read-only"
    );
    assert!(err("split2.left", Value::Int(7)).contains("refused the value: 7 is odd"));
    assert!(
        err("split2.nope", Value::Int(1))
            .contains("its attributes: left, right, reads, limits.timeout")
    );
    assert!(err("nosuch.x", Value::Int(1)).contains("no steering object named `nosuch`"));
    assert!(err("split2.limits.timeout", Value::Float(-1.0)).contains("below the minimum 0 s"));
    // A multi-write whose second part fails changes nothing.
    let e = steer::set_many(
        &[
            ("split2.right".into(), Value::Int(10)),
            ("split2.left".into(), Value::Int(9)),
        ],
        &who(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("9 is odd"), "{e}");
    assert_eq!((split.read().left, split.read().right), (40, 60));
    // Nested, string and list attributes, and text typed by a user.
    steer::set("split2.limits.label", Value::Str("hot".into()), &who()).unwrap();
    let v = steer::parse_value("split2.limits.weights", "[0.5, 2]").unwrap();
    steer::set("split2.limits.weights", v, &who()).unwrap();
    assert_eq!(split.read().limits.weights, vec![0.5, 2.0]);
    assert_eq!(
        steer::get("split2.limits.label").unwrap(),
        Value::Str("hot".into())
    );
    assert!(
        steer::parse_value("split2.left", "ten")
            .unwrap_err()
            .to_string()
            .contains("`ten` is not an int")
    );
    let info = steer::objects()
        .into_iter()
        .find(|o| o.name == "split2")
        .unwrap();
    let timeout = info
        .attributes
        .iter()
        .find(|a| a.name == "limits.timeout")
        .unwrap();
    assert_eq!(
        (timeout.ty, timeout.unit.as_deref()),
        (AttrType::Float, Some("s"))
    );
    // The log shows old -> new and the refusals.
    let log = steer::log::entries(0);
    assert!(
        log.iter()
            .any(|e| e.action.to_string() == "set split2.limits.label: \"x\" -> \"hot\"")
    );
    assert!(
        log.iter()
            .any(|e| e.result.as_ref().is_err_and(|m| m.contains("9 is odd")))
    );
    split.unregister();
}

#[derive(gyr::Steerable)]
struct Bodies {
    #[steer(read_only)]
    count: u64,
    #[steer(min = 1, max = 10)]
    max: u64,
}

#[test]
fn actuators_run_at_synch_points_with_their_conditions() {
    let _g = support::serial();
    let bodies = steer::register("bodies", Bodies { count: 2, max: 3 }).unwrap();
    bodies
        .add_actuator(
            Actuator::new("add", |b: &mut Bodies, args| {
                b.count += args.get::<u64>(0)?;
                Ok(Value::UInt(b.count))
            })
            .param("n", AttrType::UInt)
            .pre(|b, args| {
                let n = args.get::<u64>(0)?;
                if b.count + n > b.max {
                    Err(format!(
                        "{} + {n} bodies exceed the maximum {}",
                        b.count, b.max
                    ))
                } else {
                    Ok(())
                }
            })
            .post(|b| {
                if b.count == 3 {
                    Err("3 bodies are unstable".into())
                } else {
                    Ok(())
                }
            }),
        )
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    let program = std::thread::spawn(move || {
        while !s2.load(Ordering::Relaxed) {
            steer::sync_point("step");
            std::thread::sleep(Duration::from_micros(50));
        }
    });
    let t = Duration::from_secs(5);
    let r = steer::actuate("bodies.add", &[Value::UInt(5)], &who())
        .unwrap()
        .wait(t)
        .unwrap_err();
    assert!(matches!(r, SteerError::PreconditionFailed { .. }), "{r}");
    assert_eq!(
        bodies.read().count,
        2,
        "a failed pre-condition runs nothing"
    );
    let r = steer::actuate("bodies.add", &[Value::UInt(1)], &who())
        .unwrap()
        .wait(t)
        .unwrap_err();
    assert!(
        r.to_string()
            .contains("post-condition of `bodies.add` failed after it ran: 3 bodies are unstable"),
        "{r}"
    );
    steer::set("bodies.max", Value::UInt(10), &who()).unwrap();
    assert_eq!(
        steer::actuate("bodies.add", &[Value::UInt(2)], &who())
            .unwrap()
            .wait(t)
            .unwrap(),
        Value::UInt(5)
    );
    // Arguments are checked when the request is made, not at the synch point.
    assert!(
        steer::actuate("bodies.add", &[], &who())
            .unwrap_err()
            .to_string()
            .contains("it takes 1 arguments (n: uint)")
    );
    assert!(
        steer::actuate("bodies.remove", &[], &who())
            .unwrap_err()
            .to_string()
            .contains("available: add")
    );
    stop.store(true, Ordering::Relaxed);
    program.join().unwrap();
    // Nobody reaches a synch point now: the caller is told so.
    let r = steer::actuate("bodies.add", &[Value::UInt(1)], &who())
        .unwrap()
        .wait(Duration::from_millis(50))
        .unwrap_err();
    assert!(
        r.to_string().contains("has not reached a synch point"),
        "{r}"
    );
    steer::sync_point("drain"); // run it, so later tests start with an empty queue
    bodies.unregister();
}

#[test]
fn pause_step_and_run_until_act_at_synch_points() {
    let _g = support::serial();
    let steps = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let (s2, st2) = (steps.clone(), stop.clone());
    let program = std::thread::spawn(move || {
        while !st2.load(Ordering::Relaxed) {
            steer::sync_point("step");
            s2.fetch_add(1, Ordering::Relaxed);
        }
    });
    wait_for("the program to start", || {
        steps.load(Ordering::Relaxed) > 10
    });
    steer::pause(&who());
    wait_for("the pause", || {
        matches!(steer::state(), RunState::Paused { .. })
    });
    let at = steps.load(Ordering::Relaxed);
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(
        steps.load(Ordering::Relaxed),
        at,
        "a paused program does not move"
    );
    steer::step(3, &who());
    wait_for("three steps", || {
        steps.load(Ordering::Relaxed) == at + 3 && matches!(steer::state(), RunState::Paused { .. })
    });
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(steps.load(Ordering::Relaxed), at + 3);
    let target = at + 1000;
    let s3 = steps.clone();
    steer::run_until(
        "steps >= target",
        move || s3.load(Ordering::Relaxed) >= target,
        &who(),
    );
    wait_for("run-until", || {
        matches!(steer::state(), RunState::Paused { .. }) && steps.load(Ordering::Relaxed) >= target
    });
    assert_eq!(steps.load(Ordering::Relaxed), target);
    steer::resume(&who());
    wait_for("resume", || steps.load(Ordering::Relaxed) > target + 100);
    assert_eq!(steer::state(), RunState::Running);
    stop.store(true, Ordering::Relaxed);
    program.join().unwrap();
    let log: Vec<String> = steer::log::entries(0)
        .iter()
        .map(|e| e.action.to_string())
        .collect();
    assert!(
        log.iter().any(|l| l == "step 3") && log.iter().any(|l| l.starts_with("paused step #")),
        "{log:?}"
    );
}

/// A stall the caller gives up (Python's Ctrl-C): the program resumes, and the log says who
/// resumed it; a synch point that does not stall never asks.
#[test]
fn an_interrupted_stall_resumes_the_program() {
    let _g = support::serial();
    let asked = Arc::new(AtomicU64::new(0));
    assert!(!steer::sync_point_interruptible("free", || {
        asked.fetch_add(1, Ordering::Relaxed);
        true
    }));
    assert_eq!(asked.load(Ordering::Relaxed), 0, "not paused: never asked");
    let give_up = Arc::new(AtomicBool::new(false));
    let (a2, g2) = (asked.clone(), give_up.clone());
    steer::pause(&who());
    let program = std::thread::spawn(move || {
        steer::sync_point_interruptible("step", || {
            a2.fetch_add(1, Ordering::Relaxed);
            g2.load(Ordering::Relaxed)
        })
    });
    wait_for("the pause", || {
        matches!(steer::state(), RunState::Paused { .. }) && asked.load(Ordering::Relaxed) > 1
    });
    give_up.store(true, Ordering::Relaxed);
    assert!(program.join().unwrap(), "the stall was given up");
    assert_eq!(steer::state(), RunState::Running);
    let last = steer::log::entries(0).last().map(|e| e.action.to_string());
    assert_eq!(last.as_deref(), Some("resume"));
}

#[test]
fn textual_conditions_compare_attributes_joined_by_and_or() {
    let _g = support::serial();
    let level = steer::param("cond_level", 5i64).register().unwrap();
    let count = steer::param("cond_count", 5u64).register().unwrap();
    #[derive(gyr::Steerable)]
    struct Mode {
        name: String,
    }
    let mode = steer::register(
        "cond_mode",
        Mode {
            name: "slow".into(),
        },
    )
    .unwrap();
    let holds = |text: &str| steer::Condition::parse(text).unwrap().holds();
    assert!(holds("cond_level >= 5"));
    assert!(!holds("cond_level > 5"));
    assert!(holds("cond_level == 5.0"), "numbers compare as numbers");
    assert!(holds(r#"cond_mode.name == "slow" and cond_level < 6"#));
    assert!(!holds(r#"cond_mode.name != "slow" && cond_level < 6"#));
    assert!(holds(
        "cond_level > 100 or cond_level <= -1 or cond_level == 5"
    ));
    // `and` binds tighter than `or`.
    assert!(holds(
        "cond_level > 100 and cond_level < 0 or cond_level == 5"
    ));
    level.set(7);
    assert!(holds("cond_level > 5"));
    for (bad, why) in [
        ("cond_level >> 5", "not a comparison"),
        (r#"cond_mode.name < "x""#, "only == and !="),
        (
            "cond_level > 5 but cond_level < 9",
            "expected `and` or `or`",
        ),
        ("cond_level > five", "cond_level"),
        ("nowhere.x > 1", "no steering object"),
        // A literal the attribute's type can never hold.
        ("cond_count == -1", "`cond_count` is a uint, from 0 to"),
        ("cond_count > -0.5", "it is never -0.5"),
        ("cond_count < 1e30", "never 1e30"),
        ("cond_level > 1e300", "`cond_level` is an int"),
    ] {
        let e = steer::Condition::parse(bad).unwrap_err().to_string();
        assert!(e.contains(why), "{bad}: expected {why:?} in {e}");
    }
    assert!(holds("cond_count > 1e3 or cond_count >= 4.5"));
    level.unregister();
    count.unregister();
    mode.unregister();
}

#[test]
fn functions_are_called_with_checked_arguments() {
    let _g = support::serial();
    steer::Function::new("scale", |args| {
        Ok(Value::Float(args.get::<f64>(0)? * args.get::<f64>(1)?))
    })
    .param("x", AttrType::Float)
    .param("factor", AttrType::Float)
    .description("x times factor")
    .register()
    .unwrap();
    assert_eq!(
        steer::call("scale", &[Value::Int(3), Value::Float(0.5)], &who()).unwrap(),
        Value::Float(1.5)
    );
    assert!(
        steer::call("scale", &[Value::Str("a".into()), Value::Int(1)], &who())
            .unwrap_err()
            .to_string()
            .contains("x: expected a float")
    );
    assert!(
        steer::call("nope", &[], &who())
            .unwrap_err()
            .to_string()
            .contains("available: scale")
    );
    assert!(
        steer::Function::new("scale", |_| Ok(Value::Bool(true)))
            .register()
            .is_err()
    );
    assert!(
        steer::param("bad.name", 1u64)
            .register()
            .unwrap_err()
            .to_string()
            .contains("no dots")
    );
}

#[derive(gyr::Sensor)]
struct Demand {
    level: f64,
}

/// Falcon's closed loop in one process: sensor → event/action repository → attribute changed,
/// as the program sees it; a failing or panicking rule is counted, never fatal.
#[test]
fn rules_steer_the_program_from_its_own_events() {
    let _g = support::serial();
    let rt = gyr::Builder::new().start().unwrap();
    let supply = steer::param("supply", 0.0f64)
        .range(0.0, 100.0)
        .register()
        .unwrap();
    let rule = steer::repository::on_event(
        "follow-demand",
        "demand",
        |e| e.f64("level").is_some_and(|l| l >= 0.0),
        |e, who| steer::set("supply", Value::Float(e.f64("level").unwrap()), who).map(drop),
    )
    .unwrap();
    for i in 1..=50 {
        let level = i as f64;
        Demand { level }.emit();
        wait_for("the rule to act", || supply.get() == level);
    }
    // Out of range: the rule fails, the value stays, the failure is counted and explained.
    Demand { level: 500.0 }.emit();
    wait_for("the failed rule", || {
        steer::repository::rules()
            .iter()
            .any(|r| r.name == "follow-demand" && r.failed == 1)
    });
    assert_eq!(supply.get(), 50.0);
    let info = steer::repository::rules()
        .into_iter()
        .find(|r| r.name == "follow-demand")
        .unwrap();
    assert_eq!(info.fired, 51);
    assert!(info.last_error.unwrap().contains("above the maximum 100"));
    // Events below the predicate do not fire it.
    Demand { level: -1.0 }.emit();
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(
        steer::repository::rules()
            .into_iter()
            .find(|r| r.name == "follow-demand")
            .unwrap()
            .fired,
        51
    );
    rule.remove();
    steer::repository::on_event("boom", "demand", |_| true, |_, _| panic!("a bug in a rule"))
        .unwrap();
    Demand { level: 1.0 }.emit();
    wait_for("the panicking rule", || {
        steer::repository::rules()
            .iter()
            .any(|r| r.name == "boom" && r.failed == 1)
    });
    steer::repository::remove("boom");
    // The steering shows up in the steering log with the rule as "who".
    assert!(
        steer::log::entries(0)
            .iter()
            .any(|e| e.who == "rule follow-demand")
    );
    supply.unregister();
    let summary = rt.shutdown();
    assert_eq!(summary.lost, 0);
}

#[derive(gyr::Sensor)]
struct Backlog {
    n: u64,
}

/// The rules' queue is bounded: while a rule is stuck in its action, later events of its type
/// miss the rules (counted) instead of holding the program up, and every event is recorded.
#[test]
fn a_stuck_rule_never_holds_the_program_up() {
    let _g = support::serial();
    let mem = gyr::MemorySink::new();
    let rt = gyr::Builder::new().sink(mem.clone()).start().unwrap();
    let entered = Arc::new(AtomicBool::new(false));
    let release = Arc::new(AtomicBool::new(false));
    let (e, r) = (entered.clone(), release.clone());
    let rule = steer::repository::on_event(
        "stuck",
        "backlog",
        |_| true,
        move |_, _| {
            e.store(true, Ordering::SeqCst);
            while !r.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(1));
            }
            Ok(())
        },
    )
    .unwrap();
    Backlog { n: 0 }.emit();
    wait_for("the rule to start", || entered.load(Ordering::SeqCst));
    let before = steer::repository::missed();
    let n = steer::repository::DEFAULT_TAP_QUEUE as u64 + 100;
    for i in 1..=n {
        Backlog { n: i }.emit();
    }
    assert!(steer::repository::missed() - before >= 100);
    release.store(true, Ordering::SeqCst);
    rule.remove();
    let summary = rt.shutdown();
    assert_eq!(mem.events("backlog").len() as u64, n + 1);
    assert_eq!(summary.lost, 0);
}

#[derive(gyr::Sensor)]
struct Note {
    text: String,
}

/// A watched event too large to be handed over in place reaches the rules whole.
#[test]
fn rules_see_large_events_whole() {
    let _g = support::serial();
    let rt = gyr::Builder::new().start().unwrap();
    let seen = Arc::new(AtomicU64::new(0));
    let s = seen.clone();
    let rule = steer::repository::on_event(
        "long-note",
        "note",
        |_| true,
        move |e, _| {
            if let Some(Value::Str(t)) = e.get("text") {
                s.store(t.len() as u64, Ordering::SeqCst);
            }
            Ok(())
        },
    )
    .unwrap();
    Note {
        text: "x".repeat(300),
    }
    .emit();
    wait_for("the rule to see the note", || {
        seen.load(Ordering::SeqCst) == 300
    });
    rule.remove();
    rt.shutdown();
}

#[derive(gyr::Steerable)]
struct Counter {
    count: u64,
}

/// An actuation queued while the program is leaving a synch point is never forgotten: the
/// program clearing the "something is queued" flag and a client setting it used to race, and
/// the client then waited for a synch point that no longer looked at the queue.
#[test]
fn actuations_queued_during_a_synch_point_are_never_lost() {
    let _g = support::serial();
    let counter = steer::register("stress_counter", Counter { count: 0 }).unwrap();
    counter
        .add_actuator(Actuator::new("bump", |c: &mut Counter, _| {
            c.count += 1;
            Ok(Value::UInt(c.count))
        }))
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    // A program reaching synch points as fast as it can: the window for the race is widest.
    let program = std::thread::spawn(move || {
        while !s2.load(Ordering::Relaxed) {
            steer::sync_point("stress");
        }
    });
    // One client, so that a lost flag is never rescued by another client's actuation, and
    // threads keeping both cores busy, so that the program is often preempted inside the window.
    let load: Vec<_> = (0..2)
        .map(|_| {
            let s = stop.clone();
            std::thread::spawn(move || {
                while !s.load(Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            })
        })
        .collect();
    let n = 20_000;
    for i in 1..=n {
        let r = steer::actuate("stress_counter.bump", &[], &who())
            .unwrap()
            .wait(Duration::from_secs(10));
        assert_eq!(r.unwrap(), Value::UInt(i), "actuation {i} of {n}");
    }
    stop.store(true, Ordering::Relaxed);
    program.join().unwrap();
    for l in load {
        l.join().unwrap();
    }
    assert_eq!(counter.read().count, n);
    counter.unregister();
}

#[cfg(feature = "rules")]
#[derive(gyr::Sensor)]
struct Pressure {
    p: f64,
}

#[cfg(feature = "rules")]
#[derive(gyr::Steerable)]
struct Valve {
    opened: u64,
}

/// A rules file in the program's own steering thread: over a sensor's events it raises an
/// alert (a `gyr.alert` event), sets an attribute and queues an actuator without waiting for
/// it; program control is counted as the rule's error; its state is listed. A broken rewrite
/// is refused with its line and the old rules go on; a fixed one is taken.
#[cfg(feature = "rules")]
#[test]
fn a_rules_file_steers_the_program_and_is_reloaded_when_it_changes() {
    use steer::repository::{self, FileRuleInfo};
    let _g = support::serial();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rules.toml");
    let rule = |name: &str| -> FileRuleInfo {
        repository::rules_file()
            .and_then(|s| s.rules.into_iter().find(|r| r.name == name))
            .unwrap_or_else(|| panic!("no rule {name} listed"))
    };

    // Refused at once, with its place, and nothing runs.
    std::fs::write(
        &path,
        "[[rule]]\nname = \"bad\"\non = \"pressure\"\nwhen = \"p >\"\nthen = 'alert(\"info\", \"x\");'\n",
    )
    .unwrap();
    let e = repository::load_rules(&path).unwrap_err();
    assert_eq!(e.line, 4, "{e}");
    assert!(e.to_string().contains("rules.toml:4:"), "{e}");
    assert!(repository::rules_file().is_none());

    let mem = gyr::MemorySink::new();
    let rt = gyr::Builder::new().sink(mem.clone()).start().unwrap();
    let relief = steer::param("relief", 0.0f64).register().unwrap();
    let valve = steer::register("valve", Valve { opened: 0 }).unwrap();
    valve
        .add_actuator(Actuator::new("open", |v: &mut Valve, _| {
            v.opened += 1;
            Ok(Value::UInt(v.opened))
        }))
        .unwrap();
    std::fs::write(
        &path,
        r#"[[rule]]
name = "high"
on = "pressure"
when = "p > 10.0"
then = '''
alert("warning", `pressure ${p} above 10`);
set("relief", p / 2.0);
'''

[[rule]]
name = "burst"
on = "pressure"
when = "p > 1000.0"
then = 'actuate("valve.open"); restart();'
"#,
    )
    .unwrap();
    let handle = repository::load_rules(&path).unwrap();
    let state = repository::rules_file().unwrap();
    assert_eq!(state.origin, path.display().to_string());
    assert_eq!(state.rules.len(), 2);
    assert_eq!(state.rules[0].when, "p > 10.0");

    Pressure { p: 20.0 }.emit();
    wait_for("the rule to set relief", || relief.get() == 10.0);
    wait_for("the firing to be listed", || rule("high").fired == 1);
    assert!(rule("high").last_fired_unix_ns > 0);
    assert!(
        steer::log::entries(0).iter().any(|e| e.who == "rule high"),
        "the write is in the steering log under the rule's name"
    );

    // Program control is a watch-dog's: counted as the rule's error. The actuator is queued
    // and never waited for: the rules go on while the program has not reached a synch point.
    Pressure { p: 2000.0 }.emit();
    wait_for("the program-control error", || rule("burst").errors == 1);
    let burst = rule("burst");
    assert!(
        burst.last_error.as_deref().unwrap().contains("watch-dog"),
        "{burst:?}"
    );
    Pressure { p: 5.0 }.emit();
    Pressure { p: 40.0 }.emit();
    wait_for("the rules to go on", || relief.get() == 20.0);
    steer::sync_point("test");
    assert_eq!(valve.read().opened, 1);
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(rule("burst").errors, 1, "the actuator ran: no error");

    // A broken rewrite: refused with its line, the old rules keep firing.
    std::fs::write(
        &path,
        "[[rule]]\nname = \"high\"\non = \"pressure\"\nwhen = \"p > \"\nthen = 'set(\"relief\", 1.0);'\n",
    )
    .unwrap();
    wait_for("the broken version to be refused", || {
        repository::rules_file().is_some_and(|s| s.load_error.is_some())
    });
    let refused = repository::rules_file().unwrap().load_error.unwrap();
    assert!(refused.contains("rules.toml:4:"), "{refused}");
    Pressure { p: 5.0 }.emit();
    Pressure { p: 60.0 }.emit();
    wait_for("the old rule to fire", || relief.get() == 30.0);
    wait_for("its count", || rule("high").fired == 3);

    // A fixed rewrite is taken: the rule keeps its counters.
    std::fs::write(
        &path,
        r#"[[rule]]
name = "high"
on = "pressure"
when = "p > 100.0"
then = 'set("relief", p / 4.0);'
"#,
    )
    .unwrap();
    wait_for("the fixed version to be taken", || {
        repository::rules_file().is_some_and(|s| s.load_error.is_none() && s.rules.len() == 1)
    });
    assert_eq!(rule("high").when, "p > 100.0");
    Pressure { p: 5.0 }.emit();
    Pressure { p: 60.0 }.emit();
    Pressure { p: 200.0 }.emit();
    wait_for("the new rule to fire", || relief.get() == 50.0);
    wait_for("its count", || rule("high").fired == 4);

    rt.flush();
    let alerts = mem.events("gyr.alert");
    assert_eq!(alerts.len(), 3, "one alert per firing of the first version");
    let (_, first) = &alerts[0];
    assert_eq!(first[0], Value::Str("warning".into()));
    assert!(
        matches!(&first[1], Value::Str(m) if m.starts_with("pressure 20") && m.ends_with("above 10")),
        "{first:?}"
    );
    assert_eq!(first[2], Value::Str("high".into()));

    handle.unload();
    assert!(repository::rules_file().is_none());
    relief.unregister();
    valve.unregister();
    rt.shutdown();
}
