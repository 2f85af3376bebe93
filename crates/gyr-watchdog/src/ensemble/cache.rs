//! The cache of maps: a map is kept under a key computed from everything that decides it,
//! so that the same request is answered at once the next time.
//!
//! The key is the SHA-256 (hex) of, each length-prefixed in this order: a format tag, the
//! command template (after `--`, placeholders unreplaced), the grid (each axis's name and
//! values as given), the overrides, the results and the `--from` file's name, the spec file's
//! bytes, the rules file's bytes (or none), and the program's resolved path, size and
//! modification time (in ns). What only decides how the members run (jobs, timeouts, the
//! hub) is not in it. The cache directory holds `<key>.map` and `<key>.json` (the inputs, in
//! words, and what the run gave), each written beside its place and renamed into it.

use super::grid::Grid;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// Changes when what a key covers, or how, changes: old entries are then never found.
const FORMAT: &str = "gyr ensemble cache 1";

/// The program, as the key sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgramId {
    /// Its path, resolved.
    pub path: PathBuf,
    /// Its size in bytes.
    pub size: u64,
    /// Its modification time, ns since the epoch.
    pub mtime_ns: u128,
}

impl ProgramId {
    /// The program at `path`, if it is a file.
    pub fn of(path: &Path) -> std::io::Result<ProgramId> {
        let meta = std::fs::metadata(path)?;
        if !meta.is_file() {
            return Err(std::io::Error::other("not a file"));
        }
        let mtime_ns = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        Ok(ProgramId {
            path: path.to_owned(),
            size: meta.len(),
            mtime_ns,
        })
    }
}

/// Everything the key covers.
#[derive(Debug, Clone, Copy)]
pub struct KeyInputs<'a> {
    /// The command template.
    pub command: &'a [String],
    /// The grid.
    pub grid: &'a Grid,
    /// The overrides, as given.
    pub overrides: &'a [String],
    /// The results' names.
    pub results: &'a [String],
    /// The result file's name.
    pub from: Option<&'a str>,
    /// The spec file's contents.
    pub spec: &'a [u8],
    /// The rules file's contents.
    pub rules: Option<&'a [u8]>,
    /// The program.
    pub program: &'a ProgramId,
}

fn put(h: &mut Sha256, bytes: &[u8]) {
    h.update((bytes.len() as u64).to_le_bytes());
    h.update(bytes);
}

/// The key of these inputs: 64 hex digits.
pub fn key(k: &KeyInputs<'_>) -> String {
    let mut h = Sha256::new();
    put(&mut h, FORMAT.as_bytes());
    put(&mut h, &(k.command.len() as u64).to_le_bytes());
    for w in k.command {
        put(&mut h, w.as_bytes());
    }
    put(&mut h, &(k.grid.axes.len() as u64).to_le_bytes());
    for a in &k.grid.axes {
        put(&mut h, a.name.as_bytes());
        put(&mut h, &(a.values.len() as u64).to_le_bytes());
        for v in &a.values {
            put(&mut h, v.text.as_bytes());
        }
    }
    put(&mut h, &(k.overrides.len() as u64).to_le_bytes());
    for o in k.overrides {
        put(&mut h, o.as_bytes());
    }
    put(&mut h, &(k.results.len() as u64).to_le_bytes());
    for r in k.results {
        put(&mut h, r.as_bytes());
    }
    match k.from {
        Some(f) => {
            put(&mut h, b"from");
            put(&mut h, f.as_bytes());
        }
        None => put(&mut h, b"no from"),
    }
    put(&mut h, k.spec);
    match k.rules {
        Some(r) => {
            put(&mut h, b"rules");
            put(&mut h, r);
        }
        None => put(&mut h, b"no rules"),
    }
    put(&mut h, k.program.path.as_os_str().as_encoded_bytes());
    put(&mut h, &k.program.size.to_le_bytes());
    put(&mut h, &k.program.mtime_ns.to_le_bytes());
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// The default cache directory: `$XDG_CACHE_HOME/gyr/ensemble`, else
/// `~/.cache/gyr/ensemble`.
pub fn default_dir() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|h| PathBuf::from(h).join(".cache"))
        })?;
    Some(base.join("gyr").join("ensemble"))
}

/// A cache directory.
#[derive(Debug, Clone)]
pub struct Cache {
    /// Where.
    pub dir: PathBuf,
}

/// The largest map the cache gives back (a grid of 10 000 points of 64 results is smaller).
const MAX_MAP_BYTES: u64 = 64 << 20;

/// A map found in the cache.
#[derive(Debug, Clone)]
pub struct Hit {
    /// The map file.
    pub map: PathBuf,
    /// What its JSON says (`null` when unreadable).
    pub about: serde_json::Value,
}

impl Cache {
    /// The map kept under `key`, if any.
    pub fn lookup(&self, key: &str) -> Option<Hit> {
        let map = self.dir.join(format!("{key}.map"));
        let meta = std::fs::metadata(&map).ok()?;
        if !meta.is_file() || meta.len() > MAX_MAP_BYTES {
            return None;
        }
        let about = std::fs::read(self.dir.join(format!("{key}.json")))
            .ok()
            .filter(|b| b.len() < (1 << 20))
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or(serde_json::Value::Null);
        Some(Hit { map, about })
    }

    /// Keeps `map` (the file's text) and `about` under `key`.
    pub fn store(&self, key: &str, map: &str, about: &serde_json::Value) -> std::io::Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        let json = serde_json::to_string_pretty(about).map_err(std::io::Error::other)?;
        write_atomically(&self.dir.join(format!("{key}.json")), json.as_bytes())?;
        write_atomically(&self.dir.join(format!("{key}.map")), map.as_bytes())
    }
}

/// Writes `bytes` beside `path`, then renames it into place: a reader sees the old file or
/// the new one, never half of one.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    std::io::Write::write_all(&mut tmp, bytes)?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ensemble::grid::parse_axis;

    fn inputs<'a>(
        command: &'a [String],
        grid: &'a Grid,
        spec: &'a [u8],
        program: &'a ProgramId,
    ) -> KeyInputs<'a> {
        KeyInputs {
            command,
            grid,
            overrides: &[],
            results: &[],
            from: Some("result.dat"),
            spec,
            rules: None,
            program,
        }
    }

    #[test]
    fn keys_change_with_every_input_and_only_then() {
        let cmd: Vec<String> = vec!["solver".into(), "--speed".into(), "{speed}".into()];
        let g = Grid::new(vec![parse_axis("speed=0.6,1.0").unwrap()]).unwrap();
        let p = ProgramId {
            path: "/bin/solver".into(),
            size: 100,
            mtime_ns: 5,
        };
        let base = key(&inputs(&cmd, &g, b"spec", &p));
        assert_eq!(base.len(), 64);
        // Stable: the same inputs give the same key, in any process, on any day.
        assert_eq!(base, key(&inputs(&cmd, &g, b"spec", &p)));
        assert_eq!(
            base, "e72f2086403e04722c95bdd8af59bacd9a88bba7c48fa6c7032c94738ea39a0e",
            "the key's encoding changed: change FORMAT too, so that old entries are not misread"
        );
        let mut seen = vec![base.clone()];
        let mut differs = |k: String| {
            assert!(!seen.contains(&k));
            seen.push(k);
        };
        differs(key(&inputs(&cmd, &g, b"spec2", &p)));
        let cmd2: Vec<String> = vec![
            "solver".into(),
            "--speed".into(),
            "{speed}".into(),
            "x".into(),
        ];
        differs(key(&inputs(&cmd2, &g, b"spec", &p)));
        // Words are not merely concatenated.
        let cmd3: Vec<String> = vec!["solver".into(), "--speed{speed}".into()];
        differs(key(&inputs(&cmd3, &g, b"spec", &p)));
        let g2 = Grid::new(vec![parse_axis("speed=0.6,1.2").unwrap()]).unwrap();
        differs(key(&inputs(&cmd, &g2, b"spec", &p)));
        let p2 = ProgramId {
            mtime_ns: 6,
            ..p.clone()
        };
        differs(key(&inputs(&cmd, &g, b"spec", &p2)));
        let p3 = ProgramId {
            size: 101,
            ..p.clone()
        };
        differs(key(&inputs(&cmd, &g, b"spec", &p3)));
        let mut k = inputs(&cmd, &g, b"spec", &p);
        k.rules = Some(b"");
        differs(key(&k));
        k.rules = Some(b"[[rule]]");
        differs(key(&k));
        let mut k = inputs(&cmd, &g, b"spec", &p);
        let o = ["speed=0.6: --relax 0.4".to_string()];
        k.overrides = &o;
        differs(key(&k));
        let mut k = inputs(&cmd, &g, b"spec", &p);
        let r = ["mass_flow".to_string()];
        k.results = &r;
        differs(key(&k));
        k.from = None;
        differs(key(&k));
    }

    #[test]
    fn stores_and_finds_maps() {
        let dir = tempfile::tempdir().unwrap();
        let c = Cache {
            dir: dir.path().join("a/b"),
        };
        assert!(c.lookup("k").is_none());
        c.store("k", "# x y\n1 2\n", &serde_json::json!({"members": 1}))
            .unwrap();
        let hit = c.lookup("k").unwrap();
        assert_eq!(std::fs::read_to_string(hit.map).unwrap(), "# x y\n1 2\n");
        assert_eq!(hit.about["members"], 1);
        assert!(c.lookup("other").is_none());
    }
}
