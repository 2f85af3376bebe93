//! The live MPI views end to end: four programs publish a ring job's MPI events to a hub (as
//! the MPI interposer would, see `common/ranks.rs`), and the job's view, read through the API
//! and over HTTP, has every rank, the ring in its communication matrix, time per call, matched
//! messages, and the late sender and late receiver the schedule makes; and its per-rank
//! timelines (`/api/mpi/timeline`) a row per rank with the calls and one arrow per message.

mod common;

use common::{http_get, ranks, wait_for};
use serde_json::Value;

const TEST: &str = "a_ring_job_shows_its_matrix_times_and_late_messages";

#[test]
fn a_ring_job_shows_its_matrix_times_and_late_messages() {
    if let Some(r) = ranks::child() {
        ranks::run(r);
    }
    let dir = tempfile::tempdir().unwrap();
    let hub = gyr_hub::Hub::start(gyr_hub::HubConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        grpc: Some("127.0.0.1:0".parse().unwrap()),
        socket_dir: dir.path().to_owned(),
        discover: false,
        ..Default::default()
    })
    .unwrap();
    let programs = ranks::start(TEST, hub.grpc_addr().unwrap(), dir.path());
    let pids: Vec<u32> = programs.iter().map(|p| p.0.id()).collect();
    wait_for("the four ranks to publish", || {
        let known = hub.programs();
        pids.iter()
            .all(|pid| known.iter().any(|(p, alive, _)| p == pid && *alive))
            .then_some(())
    });
    ranks::go(dir.path());
    // Every rank, the ring's four flows, both kinds of late message.
    let last = std::cell::RefCell::new(None);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let view = wait_for("the job's view to fill", || {
        let v = hub.mpi_view(pids[0]);
        assert!(
            std::time::Instant::now() < deadline,
            "the job's view did not fill: {:#}",
            last.borrow().clone().unwrap_or_default()
        );
        *last.borrow_mut() = v.clone();
        let v = v?;
        let pair =
            |key: &str, s: u64, r: u64| {
                v[key].as_array().unwrap().iter().any(|p| {
                    p["sender"] == s && p["receiver"] == r && p["count"].as_u64() > Some(0)
                })
            };
        let filled = v["ranks"].as_array().unwrap().len() == 4
            && v["matrix"].as_array().unwrap().len() == 4
            && v["matched"].as_u64() > Some(20)
            && pair("late_senders", 0, 1)
            && pair("late_receivers", 2, 3);
        filled.then_some(v)
    });
    assert_eq!(view["job"], ranks::JOB);
    assert_eq!(view["size"], 4);
    let ranks_seen: Vec<_> = view["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["rank"].as_u64().unwrap(),
                r["pid"].as_u64().unwrap() as u32,
            )
        })
        .collect();
    assert_eq!(
        ranks_seen,
        (0..4).map(|r| (r, pids[r as usize])).collect::<Vec<_>>()
    );
    for (from, to) in [(0, 1), (1, 2), (2, 3), (3, 0)] {
        let c = view["matrix"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["from"] == from && c["to"] == to)
            .unwrap_or_else(|| panic!("no cell {from} → {to}: {}", view["matrix"]));
        let (bytes, messages) = (
            c["bytes"].as_u64().unwrap(),
            c["messages"].as_u64().unwrap(),
        );
        // The ring's messages from rank r carry 1024 × (r + 1) bytes; 2 → 3 also the Ssends.
        if from != 2 {
            assert_eq!(bytes, messages * 1024 * (from + 1), "{c}");
        }
    }
    for r in view["ranks"].as_array().unwrap() {
        let calls: Vec<&str> = r["calls"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["call"].as_str().unwrap())
            .collect();
        for c in ["MPI_Send", "MPI_Recv", "MPI_Barrier"] {
            assert!(
                calls.contains(&c),
                "rank {} has no {c}: {calls:?}",
                r["rank"]
            );
        }
        assert!(r["in_mpi_s"].as_f64().unwrap() > 0.0, "{r}");
    }
    let recent = view["recent"].as_array().unwrap();
    assert!(
        recent
            .iter()
            .any(|l| l["kind"] == "late sender" && l["call"] == "MPI_Recv")
    );
    assert!(recent.iter().any(|l| l["kind"] == "late receiver"));
    // Every rank's page sees the same job; over HTTP too, and a program that is no rank is
    // told so.
    let again = hub.mpi_view(pids[3]).unwrap();
    assert_eq!(again["job"], ranks::JOB);
    let body = http_get(hub.addr(), &format!("/api/mpi?pid={}", pids[2]));
    assert!(body.starts_with("HTTP/1.0 200"), "{body}");
    assert!(body.contains("\"late_senders\""), "{body}");
    let body = http_get(hub.addr(), "/api/mpi?pid=1");
    assert!(body.starts_with("HTTP/1.0 404"), "{body}");
    assert!(body.contains("no rank of an MPI job"), "{body}");
    rank_timelines(hub.addr(), &pids);
    drop(programs);
}

/// A rank tile over HTTP, as the page asks for it.
fn tile(hub: std::net::SocketAddr, query: &str) -> Value {
    let body = http_get(hub, &format!("/api/mpi/timeline?{query}"));
    assert!(body.starts_with("HTTP/1.0 200"), "{query}: {body}");
    let json = body.split_once("\r\n\r\n").unwrap().1;
    serde_json::from_str(json).unwrap()
}

/// `(sender, receiver, tag, bytes, send_s, recv_s)` of a tile's arrows.
fn arrows(t: &Value) -> Vec<(u64, u64, i64, u64, f64, f64)> {
    t["arrows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["sender"].as_u64().unwrap(),
                a["receiver"].as_u64().unwrap(),
                a["tag"].as_i64().unwrap(),
                a["bytes"].as_u64().unwrap(),
                a["send_s"].as_f64().unwrap(),
                a["recv_s"].as_f64().unwrap(),
            )
        })
        .collect()
}

/// The state and call drawn at time `s` in row `row` of tile `t`.
fn state_at(t: &Value, row: usize, s: f64) -> Option<(u64, String)> {
    let (t0, t1) = (t["t0_s"].as_f64().unwrap(), t["t1_s"].as_f64().unwrap());
    let x = ((s - t0) / (t1 - t0) * t["width"].as_f64().unwrap()) as u64;
    let run = t["rows"][row]["runs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r[0].as_u64().unwrap() <= x && x < r[1].as_u64().unwrap())?;
    let call = run[3].as_u64().unwrap() as usize;
    let name = match call {
        0 => String::new(),
        c => t["calls"][c - 1].as_str().unwrap().to_owned(),
    };
    Some((run[2].as_u64().unwrap(), name))
}

/// The job's rank timelines, asked through any rank: a row per rank, the calls where the
/// schedule put them, one arrow per message in the window, and the endpoint's bounds.
fn rank_timelines(hub: std::net::SocketAddr, pids: &[u32]) {
    // The whole run so far, once it has run a while: every message is in the window.
    let all = wait_for("a second and a half of the job", || {
        let t = tile(hub, &format!("pid={}&w=1000&arrows=5000", pids[3]));
        (t["now_s"].as_f64().unwrap() > 1.5).then_some(t)
    });
    assert_eq!(all["job"], ranks::JOB);
    let labels: Vec<&str> = all["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["label"].as_str().unwrap())
        .collect();
    assert_eq!(labels, ["rank 0", "rank 1", "rank 2", "rank 3"]);
    assert_eq!(
        (all["total_rows"].as_u64(), all["first_row"].as_u64()),
        (Some(4), Some(0))
    );
    let every = arrows(&all);
    assert_eq!(all["arrows_omitted"], 0);
    assert_eq!(every.len() as u64, all["messages"].as_u64().unwrap());
    assert!(every.len() > 20, "{}", every.len());
    for &(from, to, tag, bytes, _, _) in &every {
        match tag {
            0 => {
                assert_eq!(to, (from + 1) % 4);
                assert_eq!(bytes, 1024 * (from + 1));
            }
            7 => assert_eq!((from, to, bytes), (2, 3, 65536)),
            _ => panic!("no message has tag {tag}"),
        }
    }
    // Zoomed in around rank 0's sends to rank 1, well before the live end: the window's arrows
    // are exactly the whole run's that fall in it, and where the schedule held (it may not on
    // a loaded machine, hence several), rank 1 waits in MPI_Recv while rank 0 still computes.
    let now = all["now_s"].as_f64().unwrap();
    let mut waits_seen = 0;
    let sends = every
        .iter()
        .filter(|a| a.0 == 0 && a.1 == 1 && a.5 < now - 0.3 && a.4 > 0.1)
        .take(5);
    for &(_, _, _, _, send, recv) in sends {
        let (t0, t1) = (send - 0.010, recv.max(send) + 0.010);
        let near = tile(
            hub,
            &format!("pid={}&t0={t0}&t1={t1}&w=400&arrows=5000", pids[0]),
        );
        let inside = |s: f64| t0 <= s && s < t1;
        let mut expected: Vec<_> = every
            .iter()
            .filter(|a| inside(a.4) || inside(a.5))
            .copied()
            .collect();
        let mut got = arrows(&near);
        let key = |a: &(u64, u64, i64, u64, f64, f64)| (a.0, a.1, (a.4 * 1e9) as i64);
        expected.sort_by_key(key);
        got.sort_by_key(key);
        assert_eq!(got, expected);
        let this = |a: &&(u64, u64, i64, u64, f64, f64)| (a.0, a.1, a.4) == (0, 1, send);
        assert_eq!(got.iter().filter(this).count(), 1);
        if state_at(&near, 1, send - 0.004) == Some((2, "MPI_Recv".into()))
            && state_at(&near, 0, send - 0.004).map(|s| s.0) == Some(0)
        {
            waits_seen += 1;
        }
    }
    assert!(waits_seen > 0, "rank 1 never shows waiting for rank 0");
    // Zoomed out over the run, the long calls show: rank 2's MPI_Ssend, every rank's barrier.
    let kinds = |row: usize| -> Vec<(u64, String)> {
        let mut v: Vec<_> = all["rows"][row]["runs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                let c = r[3].as_u64().unwrap() as usize;
                let name = if c == 0 {
                    ""
                } else {
                    all["calls"][c - 1].as_str().unwrap()
                };
                (r[2].as_u64().unwrap(), name.to_owned())
            })
            .collect();
        v.sort();
        v.dedup();
        v
    };
    for row in 0..4 {
        assert!(
            kinds(row).contains(&(4, "MPI_Barrier".into())),
            "rank {row}: {:?}",
            kinds(row)
        );
    }
    assert!(
        kinds(2).contains(&(1, "MPI_Ssend".into())),
        "{:?}",
        kinds(2)
    );
    assert!(kinds(0).iter().any(|k| k.0 == 0), "rank 0 computes");
    // The bounds: arrows past the number asked for are counted, not sent; the width, the rows
    // and the arrows asked for are capped; rows past the job are empty.
    let few = tile(hub, &format!("pid={}&t1={now}&arrows=3", pids[1]));
    assert!(arrows(&few).is_empty());
    assert!(few["arrows_omitted"].as_u64().unwrap() >= every.len() as u64);
    let big = tile(
        hub,
        &format!("pid={}&w=100000&r1=100000&arrows=100000", pids[1]),
    );
    assert_eq!(big["width"], 8192);
    assert_eq!(big["rows"].as_array().unwrap().len(), 4);
    // Only the rows shown, and the messages between them.
    let two = tile(hub, &format!("pid={}&r0=2&r1=4&t1={now}", pids[1]));
    assert_eq!(two["first_row"], 2);
    assert_eq!(two["rows"][0]["label"], "rank 2");
    assert!(
        arrows(&two).iter().all(|a| (a.0, a.1) == (2, 3)),
        "{}",
        two["arrows"]
    );
    assert!(!arrows(&two).is_empty());
    let past = tile(hub, &format!("pid={}&r0=10&r1=20", pids[1]));
    assert!(past["rows"].as_array().unwrap().is_empty());
    // Hostile numbers are answered, not crashed on.
    tile(
        hub,
        &format!("pid={}&t0=NaN&t1=inf&w=0&r0=18446744073709551615", pids[2]),
    );
}
