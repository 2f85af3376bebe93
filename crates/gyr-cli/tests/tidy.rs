//! Repository hygiene, checked on every test run: every Rust file says what lives in it, every
//! crate appears in ARCHITECTURE.md, the maps name only files that exist, no crate depends on
//! one it must not, and the top-level modules of `gyr` import each other without a cycle.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        let name = entry.file_name();
        if path.is_dir() {
            if name != "target"
                && name != "node_modules"
                && !name.to_string_lossy().starts_with('.')
            {
                rust_files(&path, out);
            }
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn every_rust_file_opens_with_a_module_doc() {
    let mut files = Vec::new();
    for dir in ["crates", "examples"] {
        rust_files(&root().join(dir), &mut files);
    }
    assert!(files.len() > 10);
    let missing: Vec<_> = files
        .iter()
        .filter(|f| {
            let text = std::fs::read_to_string(f).unwrap();
            // A crate root may take its doc from the crate's README.
            !(text.starts_with("//!")
                || text.starts_with("#![doc = include_str!(\"../README.md\")]"))
        })
        .map(|f| f.strip_prefix(root()).unwrap().display().to_string())
        .collect();
    assert!(
        missing.is_empty(),
        "these files do not open with a `//!` comment saying what they hold: {missing:?}"
    );
}

#[test]
fn architecture_md_names_every_crate() {
    let arch =
        std::fs::read_to_string(root().join("ARCHITECTURE.md")).expect("ARCHITECTURE.md exists");
    for dir in ["crates", "examples"] {
        for entry in std::fs::read_dir(root().join(dir)).unwrap().flatten() {
            if entry.path().join("Cargo.toml").exists() {
                let name = entry.file_name().to_string_lossy().into_owned();
                assert!(
                    arch.contains(&name),
                    "ARCHITECTURE.md does not mention {dir}/{name}"
                );
            }
        }
    }
}

/// One forbidden arrow of ARCHITECTURE.md's "Forbidden arrows" block: `FROM -> TO, ...` or
/// `FROM -> * except A, B`, where `*` on the left is every crate of ours and `examples/*` every
/// example.
#[derive(Debug)]
struct Rule {
    line: String,
    from: String,
    to: Vec<String>,
    any_but: Option<Vec<String>>,
    planned: bool,
}

fn forbidden_arrows(arch: &str) -> Vec<Rule> {
    let start = arch
        .find("## Forbidden arrows")
        .expect("ARCHITECTURE.md has a `## Forbidden arrows` section");
    let section = &arch[start..];
    let block_start = section
        .find("```text\n")
        .expect("the section holds a ```text block")
        + 8;
    let block = &section[block_start..];
    let block = &block[..block.find("```").expect("the ```text block ends")];
    let list = |s: &str| -> Vec<String> {
        s.split(',')
            .map(|w| w.trim().to_owned())
            .filter(|w| !w.is_empty())
            .collect()
    };
    block
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (rule, planned) = match l.strip_suffix("(planned)") {
                Some(r) => (r.trim(), true),
                None => (l, false),
            };
            let (from, to) = rule
                .split_once("->")
                .unwrap_or_else(|| panic!("`{l}` is not `FROM -> TO`"));
            let to = to.trim();
            let (to, any_but) = if to == "*" {
                (vec!["*".to_owned()], Some(vec![]))
            } else if let Some(rest) = to.strip_prefix("* except") {
                (vec!["*".to_owned()], Some(list(rest)))
            } else {
                (list(to), None)
            };
            Rule {
                line: l.to_owned(),
                from: from.trim().to_owned(),
                to,
                any_but,
                planned,
            }
        })
        .collect()
}

/// Our crates (name, whether an example) and the crates of ours each depends on, for building
/// or running (not for its tests), as `cargo metadata` reports them.
fn our_dependency_graph() -> Vec<(String, bool, Vec<String>)> {
    let out = std::process::Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(root())
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let packages = meta["packages"].as_array().unwrap();
    let ours: Vec<String> = packages
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_owned())
        .collect();
    packages
        .iter()
        .map(|p| {
            let name = p["name"].as_str().unwrap().to_owned();
            let example = p["manifest_path"].as_str().unwrap().contains("/examples/");
            let deps = p["dependencies"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|d| d["kind"].as_str() != Some("dev"))
                .map(|d| d["name"].as_str().unwrap().to_owned())
                .filter(|d| ours.contains(d))
                .collect();
            (name, example, deps)
        })
        .collect()
}

/// Which arrows of `graph` the `rules` forbid, as "from -> to (rule)".
fn violations(rules: &[Rule], graph: &[(String, bool, Vec<String>)]) -> Vec<String> {
    let mut found = Vec::new();
    for (from, example, deps) in graph {
        for rule in rules {
            let applies = match rule.from.as_str() {
                "*" => true,
                "examples/*" => *example,
                name => name == from,
            };
            if !applies {
                continue;
            }
            for dep in deps {
                let forbidden = match &rule.any_but {
                    Some(allowed) => !allowed.contains(dep),
                    None => rule.to.contains(dep),
                };
                if forbidden {
                    found.push(format!("{from} -> {dep} (forbidden by `{}`)", rule.line));
                }
            }
        }
    }
    found
}

#[test]
fn no_crate_depends_on_one_it_must_not() {
    let arch = std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    let rules = forbidden_arrows(&arch);
    assert!(rules.len() >= 6, "too few rules read: {rules:?}");
    let graph = our_dependency_graph();
    let names: Vec<&str> = graph.iter().map(|(n, _, _)| n.as_str()).collect();
    for rule in &rules {
        for name in std::iter::once(&rule.from).chain(&rule.to) {
            let known = matches!(name.as_str(), "*" | "examples/*") || names.contains(&&**name);
            assert!(
                known || rule.planned,
                "`{}` in ARCHITECTURE.md names `{name}`, which is not a crate of the workspace \
                 (mark a rule for a crate still to come `(planned)`)",
                rule.line
            );
        }
    }
    let found = violations(&rules, &graph);
    assert!(
        found.is_empty(),
        "dependencies ARCHITECTURE.md forbids: {found:#?}"
    );
}

#[test]
fn the_arrows_check_catches_a_forbidden_dependency() {
    let rules = forbidden_arrows(
        "## Forbidden arrows\n```text\ngyr-core -> *\ngyr-proto -> * except gyr-core\n\
         gyr-hub -> gyr\n* -> gyr-cli\nexamples/* -> gyr-hub\n```\n",
    );
    let graph = |from: &str, example: bool, deps: &[&str]| {
        vec![(
            from.to_owned(),
            example,
            deps.iter().map(|d| d.to_string()).collect(),
        )]
    };
    assert_eq!(
        violations(&rules, &graph("gyr-hub", false, &["gyr"])).len(),
        1
    );
    assert_eq!(
        violations(&rules, &graph("gyr-core", false, &["gyr-proto"])).len(),
        1
    );
    assert!(violations(&rules, &graph("gyr-proto", false, &["gyr-core"])).is_empty());
    assert_eq!(
        violations(&rules, &graph("gyr-proto", false, &["gyr"])).len(),
        1
    );
    assert_eq!(
        violations(&rules, &graph("gyr-bench", false, &["gyr-cli"])).len(),
        1
    );
    assert_eq!(violations(&rules, &graph("x", true, &["gyr-hub"])).len(), 1);
    assert!(violations(&rules, &graph("x", false, &["gyr-hub"])).is_empty());
}

/// `{a,b}` in a path, expanded: `web/src/{app.js,app.css}` is two paths.
fn expand_braces(path: &str) -> Vec<String> {
    let Some(open) = path.find('{') else {
        return vec![path.to_owned()];
    };
    let Some(close) = path[open..].find('}').map(|c| open + c) else {
        return vec![path.to_owned()];
    };
    path[open + 1..close]
        .split(',')
        .flat_map(|alt| expand_braces(&format!("{}{alt}{}", &path[..open], &path[close + 1..])))
        .collect()
}

/// Whether a file named `name` (or a path ending in it) is anywhere below `dir`.
fn found_below(dir: &Path, tail: &Path) -> bool {
    if dir.join(tail).exists() {
        return true;
    }
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .any(|e| {
            let name = e.file_name();
            let path = e.path();
            path.is_dir()
                && name != "target"
                && name != "node_modules"
                && !name.to_string_lossy().starts_with('.')
                && found_below(&path, tail)
        })
}

/// The files a map names in backticks (`crates/gyr/src/ring.rs`, or `input.rs` under the
/// `### crates/gyr-hub` heading) that do not exist: a map that names a file since moved or
/// renamed sends a newcomer nowhere.
fn missing_files(map: &str, root: &Path) -> Vec<String> {
    const ROOTS: [&str; 6] = ["crates/", "examples/", "web/", "scripts/", "fuzz/", ".ci/"];
    const FILES: [&str; 8] = [
        ".rs", ".js", ".mjs", ".ts", ".toml", ".proto", ".html", ".css",
    ];
    let mut section = root.to_owned();
    let mut missing = Vec::new();
    for line in map.lines() {
        if let Some(h) = line.strip_prefix("### ") {
            let dir = root.join(h.trim());
            section = if dir.is_dir() { dir } else { root.to_owned() };
            continue;
        }
        for (i, token) in line.split('`').enumerate() {
            // Odd pieces are inside backticks; a token with a space is code, not a path.
            // A token with a quote is JSON or code, not a path.
            if i % 2 == 0
                || token.contains(' ')
                || token.contains('*')
                || token.contains("::")
                || token.contains('"')
            {
                continue;
            }
            // `fuzz/seeds/TARGET`: a placeholder, not a file.
            let placeholder = token.split('/').any(|seg| {
                seg.len() > 1 && seg.chars().all(|c| c.is_ascii_uppercase() || c == '_')
            });
            if placeholder {
                continue;
            }
            for path in expand_braces(token) {
                let named_file = FILES.iter().any(|ext| path.ends_with(ext));
                let ok = if ROOTS.iter().any(|r| path.starts_with(r)) {
                    root.join(&path).exists()
                } else if named_file {
                    found_below(&section, Path::new(&path))
                } else {
                    true
                };
                if !ok {
                    missing.push(path);
                }
            }
        }
    }
    missing
}

#[test]
fn the_maps_name_only_files_that_exist() {
    for map in ["ARCHITECTURE.md", "README.md"] {
        let text = std::fs::read_to_string(root().join(map)).unwrap();
        let missing = missing_files(&text, &root());
        assert!(
            missing.is_empty(),
            "{map} names files that do not exist (moved or renamed?): {missing:?}"
        );
    }
}

#[test]
fn the_file_check_catches_a_stale_name() {
    let map = "### crates/gyr-hub\n\n- `model.rs`: gone.\n- `lib.rs`, `crates/gyr/src/{ring,nope}.rs`\n\
         `{\"a\":{\"b\":1},\"c\":2}` `x}y{z`";
    assert_eq!(
        missing_files(map, &root()),
        ["model.rs", "crates/gyr/src/nope.rs"]
    );
}

/// The modules of `src` that `crate::` paths name: each top-level file or directory.
fn module_imports(src: &Path) -> Vec<(String, Vec<String>)> {
    let mut modules: Vec<String> = std::fs::read_dir(src)
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let name = name.strip_suffix(".rs").map(str::to_owned).unwrap_or(name);
            (name != "lib" && name != "main").then_some(name)
        })
        .collect();
    modules.sort();
    let mut graph = Vec::new();
    for module in &modules {
        let mut files = Vec::new();
        let dir = src.join(module);
        if dir.is_dir() {
            rust_files(&dir, &mut files);
        } else {
            files.push(src.join(format!("{module}.rs")));
        }
        let mut imports = Vec::new();
        for file in files {
            for line in std::fs::read_to_string(file).unwrap().lines() {
                // Code only: doc links name modules without importing them.
                let code = line.split("//").next().unwrap_or("");
                let mut rest = code;
                while let Some(at) = rest.find("crate::") {
                    let preceded = rest[..at]
                        .chars()
                        .last()
                        .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$');
                    rest = &rest[at + "crate::".len()..];
                    if preceded {
                        continue;
                    }
                    // `crate::name` or the names of `crate::{a, b::c}`.
                    let names: Vec<&str> = match rest.strip_prefix('{') {
                        Some(group) => group
                            .split('}')
                            .next()
                            .unwrap_or("")
                            .split(',')
                            .map(|n| n.trim().split("::").next().unwrap_or(""))
                            .collect(),
                        None => vec![
                            rest.split(|c: char| !(c.is_alphanumeric() || c == '_'))
                                .next()
                                .unwrap_or(""),
                        ],
                    };
                    for name in names {
                        if name != module
                            && modules.iter().any(|m| m == name)
                            && !imports.iter().any(|i| i == name)
                        {
                            imports.push(name.to_owned());
                        }
                    }
                }
            }
        }
        graph.push((module.clone(), imports));
    }
    graph
}

/// A cycle in `graph`, as the modules along it, if there is one.
fn import_cycle(graph: &[(String, Vec<String>)]) -> Option<Vec<String>> {
    fn visit(
        at: &str,
        graph: &[(String, Vec<String>)],
        path: &mut Vec<String>,
        done: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|p| p == at) {
            let mut cycle = path[i..].to_vec();
            cycle.push(at.to_owned());
            return Some(cycle);
        }
        if done.iter().any(|d| d == at) {
            return None;
        }
        path.push(at.to_owned());
        let imports = graph
            .iter()
            .find(|(m, _)| m == at)
            .map(|(_, i)| i.as_slice());
        for next in imports.unwrap_or_default() {
            if let Some(c) = visit(next, graph, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.push(at.to_owned());
        None
    }
    let mut done = Vec::new();
    graph
        .iter()
        .find_map(|(m, _)| visit(m, graph, &mut Vec::new(), &mut done))
}

#[test]
fn gyr_modules_import_each_other_without_a_cycle() {
    let graph = module_imports(&root().join("crates/gyr/src"));
    let names: Vec<&str> = graph.iter().map(|(m, _)| m.as_str()).collect();
    for expected in ["runtime", "state", "sensor", "registry", "sink", "steer"] {
        assert!(
            names.contains(&expected),
            "no module `{expected}` in {names:?}"
        );
    }
    let runtime = &graph.iter().find(|(m, _)| m == "runtime").unwrap().1;
    assert!(
        runtime.iter().any(|i| i == "state"),
        "the import reader missed `runtime` -> `state`: {graph:?}"
    );
    if let Some(cycle) = import_cycle(&graph) {
        panic!(
            "modules of gyr import each other in a loop: {}; move what they share into a \
             module below them, or hand the lower one a hook",
            cycle.join(" -> ")
        );
    }
}

#[test]
fn the_cycle_check_catches_a_loop() {
    let graph = |edges: &[(&str, &[&str])]| -> Vec<(String, Vec<String>)> {
        edges
            .iter()
            .map(|(m, i)| (m.to_string(), i.iter().map(|s| s.to_string()).collect()))
            .collect()
    };
    assert!(import_cycle(&graph(&[("a", &["b"]), ("b", &["c"]), ("c", &[])])).is_none());
    assert_eq!(
        import_cycle(&graph(&[("a", &["b"]), ("b", &["c"]), ("c", &["a"])])).unwrap(),
        ["a", "b", "c", "a"]
    );
}
