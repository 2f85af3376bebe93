//! Following files as solvers write them: lines written in pieces (a partial last line held
//! until its newline, given at the end), files created after the start, rotation (renamed
//! away and created again: the old file finished, the new read from its start), truncation
//! (read again from the start), time directories appearing, several files at once, and runs
//! told apart by `{instance}`.

use gyr_watchdog::glob::Glob;
use gyr_watchdog::tail::{FileEvent, FileSet, FileTail, Item, Watch};
use std::io::Write;
use std::path::Path;

#[derive(Debug, Default)]
struct Seen {
    lines: Vec<String>,
    events: Vec<FileEvent>,
}

fn poll(t: &mut FileTail, seen: &mut Seen) {
    let mut buf = Vec::new();
    t.poll(&mut buf, &mut |i| match i {
        Item::Line(l) => seen.lines.push(l.to_owned()),
        Item::File(e) => seen.events.push(e),
    });
}

fn append(path: &Path, text: &str) {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    f.write_all(text.as_bytes()).unwrap();
}

#[test]
fn a_partial_last_line_is_held_until_its_newline_and_given_at_the_end() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("out.log");
    let mut t = FileTail::new(path.clone(), 0, String::new(), false);
    let mut seen = Seen::default();
    poll(&mut t, &mut seen);
    assert!(seen.events.is_empty(), "no file yet");
    append(&path, "iter 1\niter");
    poll(&mut t, &mut seen);
    assert_eq!(seen.lines, ["iter 1"]);
    assert_eq!(seen.events, [FileEvent::Opened]);
    append(&path, " 2\r\nit");
    poll(&mut t, &mut seen);
    assert_eq!(seen.lines, ["iter 1", "iter 2"]);
    append(&path, "er 3");
    let mut buf = Vec::new();
    t.finish(&mut buf, &mut |i| {
        if let Item::Line(l) = i {
            seen.lines.push(l.to_owned())
        }
    });
    assert_eq!(seen.lines, ["iter 1", "iter 2", "iter 3"]);
}

#[test]
fn rotation_finishes_the_old_file_then_reads_the_new_from_its_start() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("out.log");
    append(&path, "a1\n");
    let mut t = FileTail::new(path.clone(), 0, String::new(), false);
    let mut seen = Seen::default();
    poll(&mut t, &mut seen);
    // Written after the last poll, just before the rename: still read, from the old file.
    append(&path, "a2\na3");
    std::fs::rename(&path, dir.path().join("out.log.1")).unwrap();
    append(&path, "b1\n");
    poll(&mut t, &mut seen);
    assert_eq!(seen.lines, ["a1", "a2", "a3", "b1"]);
    assert_eq!(seen.events, [FileEvent::Opened, FileEvent::Rotated]);
    // Deleted and created again counts as a rotation too.
    std::fs::remove_file(&path).unwrap();
    poll(&mut t, &mut seen);
    assert_eq!(seen.events.last(), Some(&FileEvent::Removed));
    append(&path, "c1\n");
    poll(&mut t, &mut seen);
    assert_eq!(seen.lines.last().map(String::as_str), Some("c1"));
    assert_eq!(seen.events.last(), Some(&FileEvent::Rotated));
}

#[test]
fn truncation_reads_the_file_again_from_its_start() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("res.dat");
    append(&path, "first run line 1\nfirst run line 2\n");
    let mut t = FileTail::new(path.clone(), 0, String::new(), false);
    let mut seen = Seen::default();
    poll(&mut t, &mut seen);
    std::fs::write(&path, "second\n").unwrap();
    poll(&mut t, &mut seen);
    assert_eq!(
        seen.lines,
        ["first run line 1", "first run line 2", "second"]
    );
    assert_eq!(seen.events, [FileEvent::Opened, FileEvent::Truncated]);
    append(&path, "third\n");
    poll(&mut t, &mut seen);
    assert_eq!(seen.lines.last().map(String::as_str), Some("third"));
}

#[test]
fn from_end_skips_what_a_file_held_when_first_seen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("res.dat");
    append(&path, "old\n");
    let mut t = FileTail::new(path.clone(), 0, String::new(), true);
    let mut seen = Seen::default();
    poll(&mut t, &mut seen);
    append(&path, "new\n");
    poll(&mut t, &mut seen);
    assert_eq!(seen.lines, ["new"]);
}

fn scan_lines(set: &mut FileSet, tails: &mut Vec<FileTail>, seen: &mut Vec<(String, String)>) {
    tails.extend(set.scan());
    let mut buf = Vec::new();
    for t in tails.iter_mut() {
        let name = t.path.display().to_string();
        let inst = t.instance.clone();
        t.poll(&mut buf, &mut |i| {
            if let Item::Line(l) = i {
                seen.push((
                    format!(
                        "{inst}|{}",
                        Path::new(&name).file_name().unwrap().to_string_lossy()
                    ),
                    l.to_owned(),
                ))
            }
        });
    }
}

#[test]
fn files_and_time_directories_created_after_the_start_are_found() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path();
    let watches = vec![Watch {
        glob: Glob::new("case/postProcessing/residuals/*/solverInfo.dat").unwrap(),
        source: 2,
        from_end: false,
    }];
    let mut set = FileSet::new(base, watches, "case1", None);
    let mut tails = Vec::new();
    let mut seen = Vec::new();
    scan_lines(&mut set, &mut tails, &mut seen);
    assert!(tails.is_empty());
    let t0 = base.join("case/postProcessing/residuals/0");
    std::fs::create_dir_all(&t0).unwrap();
    append(&t0.join("solverInfo.dat"), "# Time p\n1 0.5\n");
    scan_lines(&mut set, &mut tails, &mut seen);
    assert_eq!(tails.len(), 1);
    // The solver restarts from a later time: a new time directory appears.
    let t1 = base.join("case/postProcessing/residuals/0.002");
    std::fs::create_dir_all(&t1).unwrap();
    append(&t1.join("solverInfo.dat"), "# Time p\n0.003 0.25\n");
    append(&t0.join("solverInfo.dat"), "2 0.4\n");
    scan_lines(&mut set, &mut tails, &mut seen);
    assert_eq!(tails.len(), 2);
    let lines: Vec<&str> = seen.iter().map(|(_, l)| l.as_str()).collect();
    assert_eq!(
        lines,
        ["# Time p", "1 0.5", "2 0.4", "# Time p", "0.003 0.25"]
    );
    assert!(seen.iter().all(|(k, _)| k.starts_with("case1|")));
    // Time directories are taken in numeric order.
    let t2 = base.join("case/postProcessing/residuals/0.01");
    let t3 = base.join("case/postProcessing/residuals/0.005");
    for t in [&t2, &t3] {
        std::fs::create_dir_all(t).unwrap();
        append(&t.join("solverInfo.dat"), "x\n");
    }
    let new = set.scan();
    let order: Vec<String> = new
        .iter()
        .map(|t| {
            t.path
                .parent()
                .unwrap()
                .file_name()
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    assert_eq!(order, ["0.005", "0.01"]);
}

#[test]
fn each_run_of_a_glob_is_an_instance() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path();
    for run in ["a", "b", "c"] {
        std::fs::create_dir_all(base.join("runs").join(run)).unwrap();
        append(
            &base.join("runs").join(run).join("residuals.dat"),
            &format!("{run} 1\n"),
        );
    }
    let watches = || {
        vec![Watch {
            glob: Glob::new("runs/{instance}/residuals.dat").unwrap(),
            source: 2,
            from_end: false,
        }]
    };
    let mut set = FileSet::new(base, watches(), "", None);
    let mut tails = Vec::new();
    let mut seen = Vec::new();
    scan_lines(&mut set, &mut tails, &mut seen);
    let mut got: Vec<String> = seen.iter().map(|(k, l)| format!("{k} {l}")).collect();
    got.sort();
    assert_eq!(
        got,
        [
            "a|residuals.dat a 1",
            "b|residuals.dat b 1",
            "c|residuals.dat c 1"
        ]
    );
    let mut only = FileSet::new(base, watches(), "", Some("b".into()));
    let found = only.scan();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].instance, "b");
}
