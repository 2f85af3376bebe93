//! The MD example end to end: the integrator conserves energy and particles, `balance`
//! equalises the domains, the boundaries validator refuses bad lists, and the in-process
//! policy balances a running simulation once `auto_balance` is switched on.
//!
//! Every test registers the one `md` object, so they take turns; none asserts on timings.

use gyr::gyr_core::Value;
use gyr::steer::{self, Who};
use gyr_example_md::{BALANCE_THRESHOLD, Config, POLICY_RULE, install_policy, register, run};
use std::sync::atomic::AtomicBool;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

/// `md` can be registered once at a time, and a gyr runtime runs once per process.
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn who() -> Who {
    Who::new("test")
}

fn floats(v: &[f64]) -> Value {
    Value::Array(v.iter().copied().map(Value::Float).collect())
}

#[test]
fn energy_stays_bounded_and_particles_are_kept() {
    let _g = serial();
    let sim = register(&Config::new(400, 4)).unwrap();
    let stop = AtomicBool::new(false);
    let mut energies = Vec::new();
    for k in 1..=8 {
        run(&sim, 50 * k, &stop);
        let s = sim.read();
        let (kinetic, potential) = s.energy();
        energies.push(kinetic + potential);
        assert_eq!(s.domain_particles().iter().sum::<usize>(), 400);
        assert_eq!(s.particles, 400);
        assert_eq!(s.step, 50 * k);
    }
    let e0 = energies[0];
    let worst = energies.iter().map(|e| (e - e0).abs()).fold(0.0, f64::max);
    assert!(
        worst < 2e-4 * e0.abs(),
        "total energy wandered by {worst} from {e0}: {energies:?}"
    );
    sim.unregister();
}

#[test]
fn balance_equalises_the_domains_and_bad_boundaries_are_refused() {
    let _g = serial();
    let config = Config::new(2000, 4);
    let sim = register(&config).unwrap();
    let stop = AtomicBool::new(false);
    run(&sim, 5, &stop);
    let equal = config.equal_boundaries();
    assert_eq!(sim.read().boundaries, equal);
    assert!(sim.read().imbalance > 3.0, "the start is imbalanced");

    // The validator: wrong length, unsorted, outside the box; the value stays as it was.
    let width = sim.read().box_size()[0];
    for (bad, why) in [
        (vec![10.0, 20.0], "2 values given"),
        (vec![30.0, 20.0, 40.0], "30 is not below 20"),
        (vec![20.0, 20.0, 40.0], "20 is not below 20"),
        (vec![0.0, 20.0, 40.0], "0 is not inside the box"),
        (vec![10.0, 20.0, width + 1.0], "is not inside the box"),
    ] {
        let e = steer::set("md.boundaries", floats(&bad), &who())
            .unwrap_err()
            .to_string();
        assert!(e.contains(why), "{bad:?}: expected {why:?} in {e}");
        assert!(
            e.contains("give 3 strictly increasing numbers between 0 and")
                && e.contains("the value is unchanged"),
            "{e}"
        );
        assert_eq!(sim.read().boundaries, equal);
    }
    // A good list is taken, and the program follows it at the next step.
    steer::set("md.boundaries", floats(&[10.0, 20.0, 30.0]), &who()).unwrap();
    run(&sim, 6, &stop);
    let counts = sim.read().domain_particles();
    assert!(
        counts[1] > 300,
        "x in [10, 20) is inside the block: {counts:?}"
    );

    // `balance` runs at the synch point and returns the boundaries it set.
    let pending = steer::actuate("md.balance", &[], &who()).unwrap();
    run(&sim, 7, &stop);
    let got = pending.wait(Duration::from_secs(5)).unwrap();
    let b = sim.read().boundaries.clone();
    assert_eq!(got, floats(&b));
    assert!(b.windows(2).all(|w| w[0] < w[1]), "{b:?}");
    run(&sim, 8, &stop);
    let s = sim.read();
    let counts = s.domain_particles();
    let (min, max) = (
        counts.iter().min().copied().unwrap(),
        counts.iter().max().copied().unwrap(),
    );
    // Exact when it ran; one step later a few particles have crossed the new boundaries.
    assert!(max - min <= 20, "balance left {counts:?}");
    assert_eq!(counts.iter().sum::<usize>(), 2000);
    assert!(s.imbalance < 1.02, "{}", s.imbalance);
    drop(s);
    sim.unregister();
}

#[test]
fn auto_balance_makes_the_policy_balance_the_domains() {
    let _g = serial();
    let rt = gyr::Builder::new().serve(false).start().unwrap();
    let sim = register(&Config::new(4000, 4)).unwrap();
    install_policy().unwrap();
    let stop = AtomicBool::new(false);
    // Off by default: the policy leaves the imbalance alone.
    run(&sim, 40, &stop);
    let before = sim.read().imbalance;
    assert!(before > 3.0, "{before}");
    assert_eq!(
        sim.read().boundaries,
        Config::new(4000, 4).equal_boundaries()
    );
    // Switched on as a client would: it acts within a few steps.
    steer::set("md.auto_balance", Value::Bool(true), &Who::new("cli")).unwrap();
    let mut at = 40;
    while sim.read().imbalance > BALANCE_THRESHOLD {
        assert!(at < 400, "the policy did not act by step {at}");
        at += 5;
        run(&sim, at, &stop);
    }
    run(&sim, at + 20, &stop);
    let after = sim.read().imbalance;
    assert!(after < BALANCE_THRESHOLD, "{before} -> {after}");
    let rule = steer::repository::rules()
        .into_iter()
        .find(|r| r.name == POLICY_RULE)
        .unwrap();
    assert!(rule.fired >= 1 && rule.failed == 0, "{rule:?}");
    assert!(
        steer::log::entries(0)
            .iter()
            .any(|e| e.who == format!("rule {POLICY_RULE}")),
        "the steering log names the rule"
    );
    steer::repository::remove(POLICY_RULE);
    sim.unregister();

    // The headless demo, first inside this runtime, then with a runtime of its own.
    // Generous steps after the switch: the policy acts on its own thread, whenever the
    // scheduler of a busy machine lets it.
    let report = gyr_example_md::run_headless(&Config::new(4000, 4), 20, 200).unwrap();
    assert_eq!(report.steps, 220);
    assert!(report.imbalance_before > 3.0, "{report:?}");
    assert!(report.imbalance_after < BALANCE_THRESHOLD, "{report:?}");
    assert!(
        report.balanced_at > 20 && report.balanced_at < 220,
        "{report:?}"
    );
    assert!(report.step_ms_before > 0.0 && report.step_ms_after > 0.0);
    assert_eq!(rt.shutdown().lost, 0);
    let report = gyr_example_md::run_headless(&Config::new(1000, 3), 10, 300).unwrap();
    assert!(report.imbalance_after < BALANCE_THRESHOLD, "{report:?}");
    assert!(
        gyr_example_md::run_headless(&Config::new(1000, 3), 2, 40)
            .unwrap_err()
            .to_string()
            .contains("run more than")
    );
}

#[test]
fn bad_configurations_are_refused() {
    let _g = serial();
    let e = |c: Config| register(&c).unwrap_err().to_string();
    assert!(e(Config::new(100, 0)).contains("domains must be 1 to 64"));
    assert!(e(Config::new(2, 4)).contains("at least one particle per domain"));
    let mut c = Config::new(100, 2);
    c.dt = 1.0;
    assert!(e(c).contains("dt must be"));
    let mut c = Config::new(100_000, 2);
    c.width = 50.0;
    assert!(e(c).contains("more than 60% of the box width"));
    // One domain has no inner boundaries, and balancing it is a no-op.
    let sim = register(&Config::new(200, 1)).unwrap();
    run(&sim, 3, &AtomicBool::new(false));
    assert_eq!(sim.read().domain_particles(), vec![200]);
    assert_eq!(sim.read().imbalance, 1.0);
    sim.unregister();
}
