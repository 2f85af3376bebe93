//! The rules engine through its public API: windows, episodes, facts and refraction, agenda
//! order, bounds, reloading, and the errors a rules file can have, placed in the file.

use gyr_core::{Field, FieldType, Schema, Value};
use gyr_rules::rules::{MAX_CHAIN, MAX_WINDOW};
use gyr_rules::{Action, Engine, EventRef, Firing, RuleSet, Severity};

fn residual_schema() -> Schema {
    Schema::new(
        1,
        "solver.residual",
        vec![
            Field::new("iter", FieldType::U64),
            Field::new("rho", FieldType::F64),
            Field::new("instance", FieldType::U32),
        ],
    )
    .unwrap()
}

struct Feed {
    schema: Schema,
    pid: u32,
    program: String,
}

impl Feed {
    fn new() -> Feed {
        Feed {
            schema: residual_schema(),
            pid: 100,
            program: "solver".into(),
        }
    }

    fn one(&self, e: &mut Engine, iter: u64, rho: f64, instance: u32) -> Vec<Firing> {
        let values = [
            Value::UInt(iter),
            Value::Float(rho),
            Value::UInt(u64::from(instance)),
        ];
        e.event(&EventRef {
            pid: self.pid,
            program: &self.program,
            t_ns: iter * 1_000_000,
            schema: &self.schema,
            values: &values,
        })
    }
}

fn engine(rules: &str) -> Engine {
    Engine::new(RuleSet::parse(rules, "rules.toml").unwrap_or_else(|e| panic!("{e}")))
}

/// A residual falling 10x every 10 iterations for 60, then rising 10x every 2.
fn converge_then_diverge(i: u64) -> f64 {
    if i <= 60 {
        10f64.powf(-(i as f64) / 10.0)
    } else {
        1e-6 * 10f64.powf((i - 60) as f64 / 2.0)
    }
}

const WATCH: &str = r#"
[[rule]]
name = "converged"
on = "solver.residual"
when = 'dropped("rho", 4, 100)'
then = 'alert("info", `converged at ${iter}`);'

[[rule]]
name = "diverging"
on = "solver.residual"
salience = 10
when = 'rose("rho", 2, 20)'
then = '''
alert("error", `density residual rose 100x within 20 iterations (now ${rho})`);
'''
"#;

#[test]
fn convergence_and_divergence_fire_once_each_at_the_right_iteration() {
    let mut e = engine(WATCH);
    let f = Feed::new();
    let mut fired = Vec::new();
    for i in 0..=80 {
        for firing in f.one(&mut e, i, converge_then_diverge(i), 0) {
            fired.push((firing.rule.clone(), i, firing));
        }
    }
    let names: Vec<(&str, u64)> = fired.iter().map(|(r, i, _)| (r.as_str(), *i)).collect();
    // 1 -> 1e-4 at iteration 40; 1e-6 at 60 -> 1e-4 at 64.
    assert_eq!(names, vec![("converged", 40), ("diverging", 64)]);
    let (_, _, div) = &fired[1];
    assert!(
        div.why
            .starts_with("rose(\"rho\", 2, 20): 1e-6 -> 0.0001 (2.00 orders) in 20 values"),
        "{}",
        div.why
    );
    assert!(
        matches!(
            &div.actions[..],
            [Action::Alert { severity: Severity::Error, message }] if message.starts_with("density residual rose 100x within 20 iterations (now 0.0000999")
        ),
        "{:?}",
        div.actions
    );
    let states = e.rules();
    assert_eq!(states[0].fired, 1);
    assert_eq!(states[1].fired, 1);
    assert_eq!(states[1].last_firing.as_ref().unwrap().t_ns, 64_000_000);
    assert_eq!(states[0].errors + states[1].errors, 0);
}

#[test]
fn the_same_condition_through_rhai_fires_at_the_same_events() {
    // `program != ""` keeps the condition off the native path.
    let rules = WATCH.replace(
        "when = 'rose(\"rho\", 2, 20)'",
        "when = 'rose(\"rho\", 2, 20) && program != \"\"'",
    );
    let info = RuleSet::parse(&rules, "r").unwrap().info();
    assert!(info[0].native && !info[1].native);
    let (mut a, mut b) = (engine(WATCH), engine(&rules));
    let f = Feed::new();
    for i in 0..=80 {
        let x = converge_then_diverge(i);
        let fa: Vec<_> = f.one(&mut a, i, x, 0).into_iter().map(|f| f.rule).collect();
        let fb: Vec<_> = f.one(&mut b, i, x, 0).into_iter().map(|f| f.rule).collect();
        assert_eq!(fa, fb, "iteration {i}");
    }
}

#[test]
fn interpreted_rules_fire_as_the_native_ones_do() {
    let native = RuleSet::parse(WATCH, "r").unwrap();
    assert!(native.info().iter().any(|r| r.native));
    let interpreted = RuleSet::parse(WATCH, "r").unwrap().interpreted();
    assert!(interpreted.info().iter().all(|r| !r.native));
    let (mut a, mut b) = (Engine::new(native), Engine::new(interpreted));
    let f = Feed::new();
    for i in 0..=80 {
        let x = converge_then_diverge(i);
        assert_eq!(
            f.one(&mut a, i, x, 0),
            f.one(&mut b, i, x, 0),
            "iteration {i}"
        );
    }
}

#[test]
fn an_event_rule_fires_once_per_episode_unless_it_repeats() {
    let mut e = engine(
        r#"
[[rule]]
name = "high"
on = "solver.residual"
when = "rho > 1.0"
then = ""

[[rule]]
name = "every"
on = "solver.residual"
repeat = true
when = "rho > 1.0"
then = ""
"#,
    );
    let f = Feed::new();
    let series = [0.5, 2.0, 3.0, 0.5, 4.0, 5.0];
    let mut high = Vec::new();
    let mut every = Vec::new();
    for (i, x) in series.iter().enumerate() {
        for firing in f.one(&mut e, i as u64, *x, 0) {
            if firing.rule == "high" {
                high.push(i);
            } else {
                every.push(i);
            }
        }
    }
    assert_eq!(high, vec![1, 4]);
    assert_eq!(every, vec![1, 2, 4, 5]);
}

#[test]
fn windows_and_episodes_are_kept_per_group() {
    let mut e = engine(
        r#"
[[rule]]
name = "up"
on = "solver.residual"
per = "instance"
when = 'rose("rho", 1, 3)'
then = 'alert("warning", `instance ${instance}`);'
"#,
    );
    let f = Feed::new();
    // Interleaved: instance 0 rises 1 -> 10; instance 1 stays at 1.
    let mut fired = Vec::new();
    for (i, (x0, x1)) in [(1.0, 1.0), (3.0, 1.0), (10.0, 1.0)].iter().enumerate() {
        fired.extend(f.one(&mut e, i as u64, *x0, 0));
        fired.extend(f.one(&mut e, i as u64, *x1, 1));
    }
    assert_eq!(fired.len(), 1);
    assert!(
        matches!(&fired[0].actions[0], Action::Alert { message, .. } if message == "instance 0")
    );
}

#[test]
fn windows_can_be_kept_per_several_fields() {
    // `per = "instance,iter"` keys on both: here every iteration is a group of its own, so no
    // window ever holds two values and nothing can rise; per instance alone it would.
    let mut split = engine(
        r#"
[[rule]]
name = "up"
on = "solver.residual"
per = "instance, iter"
when = 'rose("rho", 1, 3)'
then = 'alert("warning", "up");'
"#,
    );
    let mut joined = engine(
        r#"
[[rule]]
name = "up"
on = "solver.residual"
per = "instance"
when = 'rose("rho", 1, 3)'
then = 'alert("warning", "up");'
"#,
    );
    let f = Feed::new();
    let (mut a, mut b) = (0, 0);
    for (i, x) in [1.0, 3.0, 10.0].iter().enumerate() {
        a += f.one(&mut split, i as u64, *x, 0).len();
        b += f.one(&mut joined, i as u64, *x, 0).len();
    }
    assert_eq!((a, b), (0, 1));
    let err = RuleSet::parse(
        "[[rule]]\nname = \"x\"\non = \"t\"\nper = \"a,b c\"\nwhen = 'true'\nthen = 'alert(\"info\", \"x\");'\n",
        "r.toml",
    )
    .unwrap_err();
    assert!(
        err.to_string().contains("`b c` is not a field name"),
        "{err}"
    );
}

const CHAIN: &str = r#"
[[rule]]
name = "diverging"
on = "solver.residual"
when = 'rose("rho", 2, 20)'
then = 'assert("diverged", #{ instance: instance });'

[[rule]]
name = "restart-smaller"
when = 'has("diverged") && !has("restarting")'
then = '''
let d = fact("diverged");
set_input("solver.in", "relax", 0.4);
restart("--relax 0.4");
assert("restarting", #{ instance: d.instance });
'''

[[rule]]
name = "announce"
salience = 5
when = 'has("diverged")'
then = 'alert("critical", "diverged");'
"#;

#[test]
fn a_fact_makes_another_rule_fire_once_in_salience_order() {
    let mut e = engine(CHAIN);
    let f = Feed::new();
    let mut all = Vec::new();
    for i in 0..=80 {
        for firing in f.one(&mut e, i, converge_then_diverge(i), 7) {
            all.push((i, firing));
        }
    }
    let names: Vec<(u64, &str)> = all.iter().map(|(i, f)| (*i, f.rule.as_str())).collect();
    // The event rule, then the fact rules by salience, all on the same event; never again.
    assert_eq!(
        names,
        vec![(64, "diverging"), (64, "announce"), (64, "restart-smaller")]
    );
    let restart = &all[2].1;
    assert_eq!(
        restart.actions[..2],
        [
            Action::SetInput {
                file: "solver.in".into(),
                key: "relax".into(),
                value: "0.4".into()
            },
            Action::Restart {
                args: "--relax 0.4".into()
            }
        ]
    );
    assert!(
        restart.why.contains("diverged { instance: 7 }"),
        "{}",
        restart.why
    );
    let facts = e.facts(Some(100));
    assert_eq!(
        facts.iter().map(|f| f.name.as_str()).collect::<Vec<_>>(),
        ["diverged", "restarting"]
    );
    assert!(e.facts(Some(101)).is_empty(), "memories are per program");
}

#[test]
fn retracting_and_asserting_again_fires_again() {
    let mut e = engine(
        r#"
[[rule]]
name = "mark"
on = "solver.residual"
repeat = true
when = "rho > 1.0"
then = 'assert("high");'

[[rule]]
name = "clear"
on = "solver.residual"
repeat = true
when = "rho <= 1.0"
then = 'retract("high");'

[[rule]]
name = "seen"
when = 'has("high")'
then = ""
"#,
    );
    let f = Feed::new();
    let mut seen = Vec::new();
    for (i, x) in [2.0, 3.0, 0.5, 2.0, 2.0].iter().enumerate() {
        for firing in f.one(&mut e, i as u64, *x, 0) {
            if firing.rule == "seen" {
                seen.push(i);
            }
        }
    }
    // The same fact at 1 (asserted again: identical, no new fact); a new one at 3.
    assert_eq!(seen, vec![0, 3]);
}

#[test]
fn a_chain_of_new_facts_is_stopped_at_the_bound() {
    let mut e = engine(
        r#"
[[rule]]
name = "start"
on = "solver.residual"
when = "true"
then = 'assert("ping");'

[[rule]]
name = "ping"
when = 'has("ping")'
then = 'retract("ping"); assert("pong");'

[[rule]]
name = "pong"
when = 'has("pong")'
then = 'retract("pong"); assert("ping");'
"#,
    );
    let fired = Feed::new().one(&mut e, 0, 1.0, 0);
    assert_eq!(fired.len(), 1 + MAX_CHAIN);
    let states = e.rules();
    let errors: u64 = states.iter().map(|s| s.errors).sum();
    assert_eq!(errors, 1);
    let msg = states.iter().find_map(|s| s.last_error.clone()).unwrap();
    assert!(msg.contains("chain was stopped"), "{msg}");
}

#[test]
fn a_rule_that_loops_forever_is_stopped_and_the_others_run() {
    let mut e = engine(
        r#"
[[rule]]
name = "forever"
on = "solver.residual"
salience = 1
repeat = true
when = "true"
then = '''
let n = 0;
loop { n += 1; }
'''

[[rule]]
name = "missing"
on = "solver.residual"
repeat = true
when = "pressure > 1"
then = ""

[[rule]]
name = "fine"
on = "solver.residual"
repeat = true
when = "true"
then = 'alert("info", "ok");'
"#,
    );
    let f = Feed::new();
    for i in 0..3 {
        let fired = f.one(&mut e, i, 1.0, 0);
        assert_eq!(fired.len(), 1);
        assert_eq!(fired[0].rule, "fine");
    }
    let s = e.rules();
    assert_eq!((s[0].fired, s[0].errors), (0, 3));
    let msg = s[0].last_error.as_deref().unwrap();
    assert!(msg.contains("operations"), "{msg}");
    assert!(msg.starts_with("rules.toml:10:"), "{msg}");
    assert_eq!(s[1].errors, 3);
    let msg = s[1].last_error.as_deref().unwrap();
    assert!(msg.starts_with("rules.toml:17:9:"), "{msg}");
    assert!(msg.contains("pressure"), "{msg}");
    assert_eq!(s[2].fired, 3);
}

#[test]
fn replacing_the_rules_keeps_windows_facts_and_counters() {
    let mut e = engine(CHAIN);
    let f = Feed::new();
    for i in 0..=70 {
        f.one(&mut e, i, converge_then_diverge(i), 0);
    }
    assert_eq!(e.rules()[0].fired, 1);
    // The new set: `diverging` kept, a new rule reading the same window.
    let new = RuleSet::parse(
        &format!(
            "{CHAIN}\n[[rule]]\nname = \"mean\"\non = \"solver.residual\"\nwhen = 'mean(\"rho\", 20) > 0.0'\nthen = ''\n"
        ),
        "rules.toml",
    )
    .unwrap();
    // A broken file is rejected: the host keeps the engine it had.
    let bad = RuleSet::parse(
        "[[rule]]\nname = \"x\"\nwhen = 'rho >'\nthen = ''\n",
        "rules.toml",
    );
    assert!(bad.is_err());
    assert_eq!(f.one(&mut e, 71, 1.0, 0).len(), 0, "the old set still runs");
    e.replace(new);
    let s = e.rules();
    assert_eq!(s[0].name, "diverging");
    assert_eq!(s[0].fired, 1, "counters kept by name");
    assert_eq!(e.facts(None).len(), 2, "facts kept");
    // The window was kept: the mean of 20 values already there fires at once, and the
    // episode of `diverging` (still true) does not fire again.
    let fired: Vec<String> = f
        .one(&mut e, 72, 1.0, 0)
        .into_iter()
        .map(|f| f.rule)
        .collect();
    assert_eq!(fired, vec!["mean"]);
    let st = e.rules();
    assert!(st[3].last_firing.is_some());
}

#[test]
fn forgetting_a_program_drops_its_windows_and_facts() {
    let mut e = engine(CHAIN);
    let f = Feed::new();
    for i in 0..=70 {
        f.one(&mut e, i, converge_then_diverge(i), 0);
    }
    assert!(!e.facts(None).is_empty());
    e.forget_program(100);
    assert!(e.facts(None).is_empty());
    // A fresh window: nothing rose within it.
    assert!(f.one(&mut e, 71, 1.0, 0).is_empty());
}

#[test]
fn array_fields_are_rhai_arrays() {
    let schema = Schema::new(
        2,
        "fan.pressure",
        vec![Field::new(
            "p",
            FieldType::Array(gyr_core::schema::ScalarType::F64, 4),
        )],
    )
    .unwrap();
    let mut e = engine(
        r#"
[[rule]]
name = "ratio"
on = "fan.pressure"
when = "p[3] / p[0] < 1.0"
then = 'alert("warning", `pressure ratio ${p[3] / p[0]}`);'
"#,
    );
    let values = [Value::Array(
        [2.0, 1.8, 1.5, 1.2].map(Value::Float).to_vec(),
    )];
    let fired = e.event(&EventRef {
        pid: 1,
        program: "fan",
        t_ns: 0,
        schema: &schema,
        values: &values,
    });
    assert_eq!(fired.len(), 1);
    assert!(
        matches!(&fired[0].actions[0], Action::Alert { message, .. } if message == "pressure ratio 0.6")
    );
}

#[test]
fn mass_balance_with_rel_diff_explains_itself() {
    let schema = Schema::new(
        3,
        "fan.mass",
        vec![
            Field::new("mass_in", FieldType::F64),
            Field::new("mass_out", FieldType::F64),
        ],
    )
    .unwrap();
    let mut e = engine(
        r#"
[[rule]]
name = "mass"
on = "fan.mass"
when = "rel_diff(mass_in, mass_out) > 0.02"
then = 'alert("error", "mass is not conserved");'
"#,
    );
    let mut go = |a: f64, b: f64| {
        e.event(&EventRef {
            pid: 1,
            program: "fan",
            t_ns: 0,
            schema: &schema,
            values: &[Value::Float(a), Value::Float(b)],
        })
    };
    assert!(go(100.0, 99.0).is_empty());
    let f = go(100.0, 90.0);
    assert_eq!(
        f[0].why,
        "rel_diff(mass_in, mass_out) > 0.02: rel_diff(100, 90) = 0.1; mass_in = 100; mass_out = 90"
    );
}

fn load_error(rules: &str) -> gyr_rules::RulesError {
    match RuleSet::parse(rules, "rules.toml") {
        Ok(_) => panic!("loaded:\n{rules}"),
        Err(e) => e,
    }
}

#[test]
fn broken_files_are_rejected_with_file_line_and_column() {
    // TOML syntax.
    let e = load_error("[[rule]]\nname = \"a\nwhen = 'x'\n");
    assert_eq!((e.origin.as_str(), e.line), ("rules.toml", 2), "{e}");

    // Unknown key.
    let e = load_error("[[rule]]\nname = \"a\"\nwhen = 'true'\nthen = ''\nsalince = 3\n");
    assert_eq!(
        (e.line, e.column, e.rule.as_deref()),
        (5, 1, Some("a")),
        "{e}"
    );
    assert!(e.message.contains("unknown field `salince`"), "{e}");

    // rhai syntax in `when`: line 4, column 20 of the file (the `)` the parser did not want).
    let e = load_error(
        "[[rule]]\nname = \"bad-when\"\non = \"solver.residual\"\nwhen = 'rho > (1 + )'\nthen = ''\n",
    );
    assert_eq!((e.line, e.column), (4, 20), "{e}");
    assert_eq!(e.rule.as_deref(), Some("bad-when"));
    assert!(
        e.to_string()
            .starts_with("rules.toml:4:20: rule `bad-when`: `when`: "),
        "{e}"
    );

    // rhai syntax on the second line of a multi-line `then`.
    let e = load_error(
        "[[rule]]\nname = \"a\"\non = \"t\"\nwhen = 'true'\nthen = '''\nalert(\"info\", \"x\");\nlet = 3;\n'''\n",
    );
    assert_eq!(e.line, 7, "{e}");

    // Unknown function, placed at its name.
    let e = load_error(
        "[[rule]]\nname = \"a\"\non = \"t\"\nwhen = 'x > 1 && risen(\"x\", 2, 3)'\nthen = ''\n",
    );
    assert_eq!((e.line, e.column), (4, 18), "{e}");
    assert!(e.message.contains("unknown function `risen`"), "{e}");

    // Wrong arity.
    let e = load_error("[[rule]]\nname = \"a\"\non = \"t\"\nwhen = 'rose(\"x\", 20)'\nthen = ''\n");
    assert!(e.message.contains("`rose` takes 3 arguments"), "{e}");

    // A condition that gives a number.
    let e = load_error("[[rule]]\nname = \"a\"\non = \"t\"\nwhen = 'mean(\"x\", 10)'\nthen = ''\n");
    assert_eq!((e.line, e.column), (4, 9), "{e}");
    assert!(
        e.message.contains("gives a number, not true or false"),
        "{e}"
    );

    // A severity that does not exist.
    let e = load_error(
        "[[rule]]\nname = \"a\"\non = \"t\"\nwhen = 'true'\nthen = '''\nalert(\"fatal\", \"x\");\n'''\n",
    );
    assert_eq!((e.line, e.column), (6, 7), "{e}");
    assert!(
        e.message.contains("info, warning, error or critical"),
        "{e}"
    );

    // A window over the cap.
    let e = load_error(&format!(
        "[[rule]]\nname = \"a\"\non = \"t\"\nwhen = 'rose(\"x\", 2, {})'\nthen = ''\n",
        MAX_WINDOW + 1
    ));
    assert!(e.message.contains(&format!("{MAX_WINDOW}")), "{e}");

    // A window function in a fact rule; an action in a condition; a computed field name.
    let e = load_error("[[rule]]\nname = \"a\"\nwhen = 'rose(\"x\", 2, 3)'\nthen = ''\n");
    assert!(e.message.contains("no `on`"), "{e}");
    let e = load_error("[[rule]]\nname = \"a\"\non = \"t\"\nwhen = 'stop()'\nthen = ''\n");
    assert!(e.message.contains("put it in `then`"), "{e}");
    let e = load_error("[[rule]]\nname = \"a\"\non = \"t\"\nwhen = 'rose(f, 2, 3)'\nthen = ''\n");
    assert!(e.message.contains("field's name as a string"), "{e}");

    // An `on` that is no event type name; duplicate names.
    let e =
        load_error("[[rule]]\nname = \"a\"\non = \"solver residual\"\nwhen = 'true'\nthen = ''\n");
    assert_eq!((e.line, e.column), (3, 6), "{e}");
}

#[test]
fn bounds_of_the_file() {
    let big = "#".repeat(gyr_rules::rules::MAX_FILE_BYTES + 1);
    assert!(load_error(&big).message.contains("split it"));
}

/// Throughput: 50 rules over 10 event types, each event meeting 5 rules with windows, two of
/// them asserting facts read by fact rules. Prints events per second; asserts nothing about
/// time. `cargo test --release -p gyr-rules --test rules -- --ignored --nocapture`
#[test]
#[ignore]
fn throughput() {
    let mut rules = String::new();
    for t in 0..10 {
        let on = format!("t{t}");
        let shapes: [&str; 5] = [
            "rose(\"x\", 2, 20)",
            "dropped(\"x\", 4, 100)",
            "stalled(\"y\", 0.1, 50) && iter > 100",
            "oscillates(\"y\", 10) || mean(\"x\", 10) > 1e6",
            "outside(y, -1e9, 1e9) || rel_diff(x, y) > 1e9",
        ];
        for (i, when) in shapes.iter().enumerate() {
            let then = if i == 0 {
                format!("assert(\"rose{t}\", #{{ iter: iter }});")
            } else {
                String::new()
            };
            rules.push_str(&format!(
                "[[rule]]\nname = \"r{t}-{i}\"\non = \"{on}\"\nwhen = '{when}'\nthen = '{then}'\n\n"
            ));
        }
    }
    rules.push_str(
        "[[rule]]\nname = \"facts\"\nwhen = 'has(\"rose0\")'\nthen = 'retract(\"rose0\");'\n",
    );
    let set = RuleSet::parse(&rules, "bench").unwrap();
    assert!(
        set.info()
            .iter()
            .filter(|r| r.on.is_some())
            .all(|r| r.native)
    );
    let mut e = Engine::new(set);
    let schemas: Vec<Schema> = (0..10)
        .map(|t| {
            Schema::new(
                t + 1,
                format!("t{t}"),
                vec![
                    Field::new("iter", FieldType::U64),
                    Field::new("x", FieldType::F64),
                    Field::new("y", FieldType::F64),
                ],
            )
            .unwrap()
        })
        .collect();
    let n = 2_000_000u64;
    let mut fired = 0usize;
    let start = std::time::Instant::now();
    for i in 0..n {
        let s = &schemas[(i % 10) as usize];
        let it = i / 10;
        let x = if it % 500 < 400 {
            1.0 / (1 + it % 500) as f64
        } else {
            (it % 500) as f64
        };
        let values = [
            Value::UInt(it),
            Value::Float(x),
            Value::Float((it % 7) as f64),
        ];
        fired += e
            .event(&EventRef {
                pid: 1 + (i % 2) as u32,
                program: "p",
                t_ns: i,
                schema: s,
                values: &values,
            })
            .len();
    }
    let secs = start.elapsed().as_secs_f64();
    let errors: u64 = e.rules().iter().map(|r| r.errors).sum();
    println!(
        "{n} events through 51 rules (5 per event) in {secs:.3} s: {:.0} events/s; {fired} firings, {errors} errors",
        n as f64 / secs
    );
    assert_eq!(errors, 0);
    assert!(fired > 0);
}
