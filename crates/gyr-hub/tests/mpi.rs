//! The live MPI views end to end: four programs publish a ring job's MPI events to a hub (as
//! the MPI interposer would, see `common/ranks.rs`), and the job's view, read through the API
//! and over HTTP, has every rank, the ring in its communication matrix, time per call, matched
//! messages, and the late sender and late receiver the schedule makes.

mod common;

use common::{http_get, ranks, wait_for};

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
    drop(programs);
}
