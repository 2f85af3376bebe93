//! The hub's expert system end to end: a rules file run over a live program's events raises an
//! alert (the page gets it, `ListAlerts` lists it) and steers the program through the hub (the
//! program's steering log names the rule); a broken new version of the file is refused with its
//! line and column while the rules in force go on; a fixed version is taken.

mod common;

use common::{Program, wait_for};
use gyr_proto::v1;
use std::process::{Command, Stdio};
use std::time::Duration;

const CHILD: &str = "GYR_TEST_RULES_CHILD";

#[derive(gyr::Sensor)]
struct Work {
    domain: u32,
    seconds: f64,
}

/// The watched program: per-domain work scaled by a steerable gain.
fn child_program() -> ! {
    let rt = gyr::init().expect("start gyr");
    let gain = gyr::steer::param("gain", 1.0f64)
        .range(0.0, 10.0)
        .register()
        .expect("register gain");
    for i in 0u64.. {
        let g = gain.get();
        gyr::emit!(Work {
            domain: (i % 4) as u32,
            seconds: g * (1 + i % 4) as f64,
        });
        gyr::steer::sync_point("step");
        std::thread::sleep(Duration::from_micros(500));
    }
    drop(rt);
    std::process::exit(0);
}

const RULES: &str = r#"
[[rule]]
name = "too-slow"
on = "work"
per = "domain"
when = 'seconds > 3.5'
then = '''
alert("warning", `domain ${domain} took ${seconds} s`);
set("gain", 0.5);
'''
"#;

fn grpc(addr: std::net::SocketAddr) -> gyr_client::Session {
    gyr_client::Session::connect(&addr.to_string(), None, "rules-test").unwrap()
}

#[test]
fn hub_rules_alert_steer_and_survive_a_broken_reload() {
    if std::env::var_os(CHILD).is_some() {
        child_program();
    }
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("rules.toml");
    std::fs::write(&rules, RULES).unwrap();
    let child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "hub_rules_alert_steer_and_survive_a_broken_reload",
            "--nocapture",
        ])
        .env(CHILD, "1")
        .env("GYR_SOCKET_DIR", dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let program = Program(child);
    let pid = program.0.id();
    let hub = gyr_hub::Hub::start(gyr_hub::HubConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        grpc: Some("127.0.0.1:0".parse().unwrap()),
        socket_dir: dir.path().to_owned(),
        rules: Some(rules.clone()),
        ..Default::default()
    })
    .unwrap();
    let addr = hub.grpc_addr().unwrap();
    let mut s = grpc(addr);
    // The rule fires for domain 3 (4 s with gain 1): an alert, and the gain halved.
    let alert = wait_for("the rule's alert", || {
        s.alerts(pid, 0)
            .unwrap()
            .into_iter()
            .find(|a| a.rule == "too-slow")
    });
    assert_eq!(alert.severity, "warning");
    assert!(alert.message.starts_with("domain 3 took 4"), "{alert:?}");
    let mut program_session =
        gyr_client::Session::connect(&format!("{pid}@{addr}"), None, "t").unwrap();
    wait_for("the gain set by the rule", || {
        let v = program_session.get(vec!["gain".to_owned()]).ok()?;
        (format!("{v:?}").contains("0.5")).then_some(())
    });
    // The program's steering log names the rule (the hub follows the log a moment later).
    wait_for("the rule in the program's steering log", || {
        let mut stream = program_session.log(0, false).ok()?;
        let mut log: Vec<v1::LogEntry> = Vec::new();
        while let Ok(Some(e)) = program_session.next(&mut stream) {
            log.push(e);
        }
        log.iter()
            .any(|e| e.who.contains("rule too-slow (hub)") && e.action.contains("gain"))
            .then_some(())
    });
    // The page got the alert too.
    let snap = hub.snapshot();
    assert!(
        snap["alerts"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["fields"]["rule"] == "too-slow"),
        "{}",
        snap["alerts"]
    );
    let fired = |s: &mut gyr_client::Session| {
        s.rules()
            .unwrap()
            .rules
            .iter()
            .find(|r| r.name == "too-slow")
            .map(|r| r.fired)
    };
    wait_for("the rule's counter in ListRules", || {
        (fired(&mut s).unwrap_or(0) >= 1).then_some(())
    });
    // A broken version: refused with its line and column; the rule in force stays.
    std::fs::write(&rules, RULES.replace("seconds > 3.5", "seconds >")).unwrap();
    let refused = wait_for("the broken version refused", || {
        let r = s.rules().unwrap();
        (!r.load_error.is_empty()).then_some(r)
    });
    assert!(
        refused.load_error.contains("rules.toml:6:"),
        "{}",
        refused.load_error
    );
    assert_eq!(refused.rules.len(), 1);
    assert_eq!(refused.rules[0].name, "too-slow");
    // Fixed, with a second rule: taken.
    let fixed = format!(
        "{RULES}\n[[rule]]\nname = \"any-work\"\non = \"work\"\nwhen = 'seconds > 0.0'\nthen = 'alert(\"info\", \"working\");'\n"
    );
    std::fs::write(&rules, fixed).unwrap();
    wait_for("the fixed version taken", || {
        let r = s.rules().unwrap();
        (r.load_error.is_empty() && r.rules.len() == 2).then_some(())
    });
    wait_for("the new rule firing", || {
        s.alerts(pid, 0)
            .unwrap()
            .into_iter()
            .find(|a| a.rule == "any-work")
    });
    // The old rule kept its counters across the reload.
    assert!(fired(&mut s).unwrap_or(0) >= 1);
}
