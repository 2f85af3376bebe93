//! `GET /metrics` as Prometheus scrapes it: the read token (as a bearer token or the `token`
//! parameter) is asked for where the hub has tokens, the `Host` is checked as for every
//! request, and the text is strictly the exposition format (checked line by line here, and by
//! `promtool check metrics` when Prometheus's tool is installed, and scraped by Prometheus itself
//! with the README's configuration), with the counts of what the hub took in and label values
//! escaped.

mod common;

use common::wait_for;
use gyr_core::record::push_record;
use gyr_core::schema::ScalarType;
use gyr_core::trace::{TraceEnd, TraceHeader, TraceWriter};
use gyr_core::{Field, FieldType, Schema, ThreadInfo};
use std::collections::{HashMap, HashSet};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

const TOKEN: &str = "steer-token-0123456789abcdef";
const READ: &str = "read-token-0123456789abcdef";

fn get(addr: SocketAddr, path: &str, headers: &[String]) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut req = format!("GET {path} HTTP/1.0\r\n");
    for h in headers {
        req += &format!("{h}\r\n");
    }
    req += "\r\n";
    s.write_all(req.as_bytes()).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let status = out[9..12].parse().unwrap();
    let body = out.split_once("\r\n\r\n").map_or("", |(_, b)| b).to_owned();
    (status, body)
}

/// A short trace of a program whose command's name needs escaping: 50 `work` events.
fn trace(dir: &std::path::Path) -> std::path::PathBuf {
    let header = TraceHeader {
        pid: 4321,
        command_line: vec!["/opt/we\"ird\\na\nme".into()],
        start_unix_ns: 1_700_000_000_000_000_000,
        ..TraceHeader::default()
    };
    let work = Schema::new(
        3,
        "work",
        vec![
            Field::new("domain", FieldType::Scalar(ScalarType::U32)),
            Field::new("seconds", FieldType::Scalar(ScalarType::F64)),
            Field::new("note", FieldType::Str),
        ],
    )
    .unwrap();
    let mut w = TraceWriter::new(Vec::new(), &header).unwrap();
    w.schema(&work).unwrap();
    w.thread(&ThreadInfo {
        id: 1,
        name: "main".into(),
        os_tid: 1,
    })
    .unwrap();
    let mut block = Vec::new();
    for i in 0..50u64 {
        let mut p = ((i % 4) as u32).to_le_bytes().to_vec();
        p.extend((i as f64 * 0.5).to_le_bytes());
        p.extend(2u32.to_le_bytes());
        p.extend(b"hi");
        push_record(&mut block, 3, 1_000 * (i + 1), i + 1, 0, &p);
    }
    w.records(1, &block).unwrap();
    let bytes = w.finish(&TraceEnd::default()).unwrap();
    let path = dir.join("weird.gyr");
    std::fs::write(&path, bytes).unwrap();
    path
}

/// Checks `text` against the text exposition format 0.0.4 strictly: every line a `# HELP`,
/// a `# TYPE` (once per family, before its samples) or a sample of a typed family with
/// well-formed labels and value; no series twice. Returns the samples: (name, labels, value).
fn parse_exposition(text: &str) -> Vec<(String, HashMap<String, String>, f64)> {
    let metric_name = |n: &str| {
        !n.is_empty()
            && n.chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
            && n.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
    };
    let label_name = |n: &str| {
        n.chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    };
    assert!(text.ends_with('\n'), "the text ends with a line feed");
    let mut typed: HashMap<String, String> = HashMap::new();
    let mut helped = HashSet::new();
    let mut seen = HashSet::new();
    let mut samples = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, _) = rest.split_once(' ').expect("HELP has a text");
            assert!(metric_name(name), "{line}");
            assert!(helped.insert(name.to_owned()), "HELP twice: {line}");
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("TYPE has a type");
            assert!(metric_name(name), "{line}");
            assert!(
                ["counter", "gauge", "histogram", "summary", "untyped"].contains(&kind),
                "{line}"
            );
            assert!(
                typed.insert(name.to_owned(), kind.to_owned()).is_none(),
                "TYPE twice: {line}"
            );
            continue;
        }
        assert!(!line.starts_with('#') && !line.is_empty(), "{line:?}");
        let name_end = line
            .find(['{', ' '])
            .unwrap_or_else(|| panic!("no value: {line}"));
        let name = &line[..name_end];
        assert!(metric_name(name), "{line}");
        assert!(typed.contains_key(name), "a sample before its TYPE: {line}");
        if typed[name] == "counter" {
            assert!(
                name.ends_with("_total"),
                "a counter's name ends in _total: {line}"
            );
        }
        let mut rest = &line[name_end..];
        let mut labels = HashMap::new();
        if let Some(r) = rest.strip_prefix('{') {
            let mut chars = r.char_indices().peekable();
            let end;
            loop {
                // A label name up to '='.
                let start = chars.peek().map(|(i, _)| *i).unwrap();
                if r[start..].starts_with('}') {
                    end = Some(start + 1);
                    break;
                }
                let eq = r[start..].find('=').expect("label=") + start;
                let lname = &r[start..eq];
                assert!(label_name(lname), "label name {lname:?} in {line}");
                while chars.peek().is_some_and(|(i, _)| *i <= eq) {
                    chars.next();
                }
                assert_eq!(chars.next().map(|(_, c)| c), Some('"'), "{line}");
                let mut value = String::new();
                loop {
                    match chars.next().expect("a closed label value").1 {
                        '\\' => match chars.next().unwrap().1 {
                            '\\' => value.push('\\'),
                            '"' => value.push('"'),
                            'n' => value.push('\n'),
                            c => panic!("escape \\{c} in {line}"),
                        },
                        '"' => break,
                        '\n' => panic!("a raw line feed in {line}"),
                        c => value.push(c),
                    }
                }
                assert!(
                    labels.insert(lname.to_owned(), value).is_none(),
                    "a label twice: {line}"
                );
                match chars.next().map(|(_, c)| c) {
                    Some(',') => continue,
                    Some('}') => {
                        end = chars.peek().map(|(i, _)| *i).or(Some(r.len()));
                        break;
                    }
                    other => panic!("{other:?} after a label in {line}"),
                }
            }
            rest = &r[end.unwrap()..];
        }
        let value = rest.strip_prefix(' ').expect("one space before the value");
        let v: f64 = match value {
            "NaN" => f64::NAN,
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            v => v
                .parse()
                .unwrap_or_else(|_| panic!("value {v:?} in {line}")),
        };
        let mut key: Vec<_> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        key.sort();
        assert!(
            seen.insert(format!("{name}{key:?}")),
            "a series twice: {line}"
        );
        samples.push((name.to_owned(), labels, v));
    }
    samples
}

#[test]
fn metrics_are_prometheus_text_behind_the_read_token() {
    let dir = tempfile::tempdir().unwrap();
    let hub = gyr_hub::Hub::start(gyr_hub::HubConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        grpc: None,
        discover: false,
        token: Some(TOKEN.into()),
        read_token: Some(READ.into()),
        replay: vec![trace(dir.path())],
        ..Default::default()
    })
    .unwrap();
    let web = hub.addr();

    let (status, body) = get(web, "/metrics", &[]);
    assert_eq!(status, 401, "{body}");
    assert!(body.contains("needs a token"), "{body}");
    let (status, _) = get(
        web,
        "/metrics",
        &["Authorization: Bearer wrong-token-0123456789".into()],
    );
    assert_eq!(status, 401);
    // Another name for the hub is refused, as for every request (DNS rebinding).
    let (status, _) = get(
        web,
        "/metrics",
        &[
            "Host: evil.example".into(),
            format!("Authorization: Bearer {READ}"),
        ],
    );
    assert_eq!(status, 403);

    let samples = wait_for("the replay's 50 events in /metrics", || {
        let (status, body) = get(
            web,
            "/metrics",
            &[
                format!("Host: {web}"),
                format!("Authorization: Bearer {READ}"),
            ],
        );
        assert_eq!(status, 200, "{body}");
        let samples = parse_exposition(&body);
        samples
            .iter()
            .any(|(n, l, v)| n == "gyr_events_total" && l["event"] == "work" && *v == 50.0)
            .then_some(samples)
    });
    let one = |name: &str, want: &[(&str, &str)]| {
        let found: Vec<_> = samples
            .iter()
            .filter(|(n, l, _)| {
                n == name
                    && want
                        .iter()
                        .all(|(k, v)| l.get(*k).map(String::as_str) == Some(*v))
            })
            .collect();
        assert_eq!(found.len(), 1, "{name} {want:?}: {found:?}");
        found[0].2
    };
    // The command's name comes back exactly, escaped on the wire.
    let command = "we\"ird\\na\nme";
    let who = [("program", "4321"), ("command", command)];
    assert_eq!(one("gyr_hub_programs", &[]), 1.0);
    assert_eq!(one("gyr_hub_events_received_total", &[]), 50.0);
    assert_eq!(one("gyr_program_events_received_total", &who), 50.0);
    assert_eq!(one("gyr_program_events_lost_total", &who), 0.0);
    assert!(one("gyr_event_rate", &[("event", "work")]) >= 0.0);
    // The latest values of the numeric fields; the string field has none.
    assert_eq!(
        one(
            "gyr_field_value",
            &[("event", "work"), ("field", "seconds")]
        ),
        49.0 * 0.5
    );
    assert_eq!(
        one("gyr_field_value", &[("event", "work"), ("field", "domain")]),
        1.0
    );
    assert!(
        !samples
            .iter()
            .any(|(_, l, _)| l.get("field").is_some_and(|f| f == "note"))
    );

    // The token as a query parameter, and the steer token, are taken too.
    let (status, body) = get(web, &format!("/metrics?token={READ}"), &[]);
    assert_eq!(status, 200);
    let (status2, _) = get(web, "/metrics", &[format!("Authorization: Bearer {TOKEN}")]);
    assert_eq!(status2, 200);

    // Prometheus's own checker, where it is installed.
    match std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
    {
        Ok(mut child) => {
            child
                .stdin
                .take()
                .unwrap()
                .write_all(body.as_bytes())
                .unwrap();
            let o = child.wait_with_output().unwrap();
            assert!(
                o.status.success(),
                "promtool check metrics failed:\n{}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            );
        }
        Err(e) => eprintln!("promtool not run ({e}): the format was checked by this test alone"),
    }
}

#[test]
fn the_format_checker_finds_what_it_should() {
    let ok = "# HELP a_total An a.\n# TYPE a_total counter\na_total{x=\"q\\\"\\\\\\n\"} 1\n";
    let s = parse_exposition(ok);
    assert_eq!(s[0].1["x"], "q\"\\\n");
    for bad in [
        "a_total 1\n",                      // no TYPE
        "# TYPE a gauge\na{x=\"\\t\"} 1\n", // a bad escape
        "# TYPE a gauge\na 1\na 2\n",       // a series twice
        "# TYPE a gauge\na{1x=\"v\"} 1\n",  // a bad label name
        "# TYPE a gauge\na 1,5\n",          // no number
        "# TYPE a counter\na 1\n",          // a counter not _total
    ] {
        assert!(
            std::panic::catch_unwind(|| parse_exposition(bad)).is_err(),
            "{bad:?} passed"
        );
    }
}

/// Prometheus itself, where it is installed, scrapes the hub with the README's configuration
/// (the read token from a credentials file): the target is up and its series are queryable,
/// with the program's escaped command name intact.
#[test]
fn prometheus_scrapes_the_hub_with_the_read_token() {
    if std::process::Command::new("prometheus")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("prometheus not run (not installed): /metrics was checked by the test above");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let hub = gyr_hub::Hub::start(gyr_hub::HubConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        grpc: None,
        discover: false,
        token: Some(TOKEN.into()),
        read_token: Some(READ.into()),
        replay: vec![trace(dir.path())],
        ..Default::default()
    })
    .unwrap();
    let token_file = dir.path().join("gyr-read-token");
    std::fs::write(&token_file, READ).unwrap();
    let config = dir.path().join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: gyr\n    \
             static_configs:\n      - targets: [\"{}\"]\n    authorization:\n      \
             credentials_file: {}\n",
            hub.addr(),
            token_file.display()
        ),
    )
    .unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let log = std::fs::File::create(dir.path().join("prometheus.log")).unwrap();
    let child = std::process::Command::new("prometheus")
        .arg(format!("--config.file={}", config.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.path().join("tsdb").display()
        ))
        .arg(format!("--web.listen-address={port}"))
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap();
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _prometheus = Kill(child);
    // An instant query's samples, once Prometheus answers and has them.
    let query = |q: &str| -> Option<Vec<serde_json::Value>> {
        // Not listening yet: asked again.
        drop(TcpStream::connect(port).ok()?);
        let (status, body) = get(port, &format!("/api/v1/query?query={q}"), &[]);
        let v: serde_json::Value = serde_json::from_str(&body).ok()?;
        let result = v["data"]["result"].as_array()?.clone();
        (status == 200 && !result.is_empty()).then_some(result)
    };
    let up = wait_for("Prometheus to scrape the hub", || {
        query("up%7Bjob%3D%22gyr%22%7D").filter(|r| r[0]["value"][1] == "1")
    });
    assert_eq!(up.len(), 1, "{up:?}");
    let received = wait_for("the replay's 50 events in Prometheus", || {
        query("gyr_program_events_received_total").filter(|r| r[0]["value"][1] == "50")
    });
    assert_eq!(
        received[0]["metric"]["command"], "we\"ird\\na\nme",
        "{received:?}"
    );
    assert_eq!(received[0]["metric"]["program"], "4321");
}
