//! Input the way such codes take it: a `key = value` input file, options on the command line
//! that override it (`--relax 0.6` or `--relax=0.6`), and a control file read while running.

use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// The settings of one run: the input file's, then the command line's over them.
#[derive(Debug, Default, Clone)]
pub struct Settings {
    values: BTreeMap<String, String>,
}

impl Settings {
    /// Reads `--input FILE` (if given) and the other `--key value` options of `args` (the
    /// program's name excluded).
    pub fn from_args(args: &[String]) -> Result<Settings, String> {
        let mut s = Settings::default();
        let mut cli = Vec::new();
        let mut i = 0;
        while i < args.len() {
            let a = &args[i];
            let Some(key) = a.strip_prefix("--") else {
                return Err(format!(
                    "unexpected argument `{a}`: options are `--key value`"
                ));
            };
            let (key, value) = match key.split_once('=') {
                Some((k, v)) => (k.to_owned(), v.to_owned()),
                None => {
                    i += 1;
                    let v = args
                        .get(i)
                        .ok_or_else(|| format!("`--{key}` needs a value"))?;
                    (key.to_owned(), v.clone())
                }
            };
            cli.push((key, value));
            i += 1;
        }
        if let Some((_, file)) = cli.iter().find(|(k, _)| k == "input") {
            s.read_file(Path::new(file))?;
        }
        for (k, v) in cli {
            s.values.insert(k, v);
        }
        Ok(s)
    }

    fn read_file(&mut self, path: &Path) -> Result<(), String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read the input file {}: {e}", path.display()))?;
        for (n, line) in text.lines().enumerate() {
            let line = line.split(['#', '!']).next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let (k, v) = line
                .split_once('=')
                .ok_or_else(|| format!("{}:{}: expected `key = value`", path.display(), n + 1))?;
            self.values.insert(k.trim().to_owned(), v.trim().to_owned());
        }
        Ok(())
    }

    /// A number, or `default` when not given.
    pub fn f64(&self, key: &str, default: f64) -> Result<f64, String> {
        match self.values.get(key) {
            None => Ok(default),
            Some(v) => v
                .replace(['D', 'd'], "e")
                .parse()
                .map_err(|_| format!("`{key}` must be a number, not `{v}`")),
        }
    }

    /// A whole number, or `default` when not given.
    pub fn u64(&self, key: &str, default: u64) -> Result<u64, String> {
        match self.values.get(key) {
            None => Ok(default),
            Some(v) => v
                .parse()
                .map_err(|_| format!("`{key}` must be a whole number, not `{v}`")),
        }
    }

    /// Text, or `None`.
    pub fn text(&self, key: &str) -> Option<&str> {
        self.values.get(key).map(String::as_str)
    }

    /// A path, relative to the working directory.
    pub fn path(&self, key: &str, default: &str) -> PathBuf {
        PathBuf::from(self.text(key).unwrap_or(default))
    }
}

/// Lines appended to a control file since the last look: how an operator (or gyr's
/// watch-dog) talks to a running code that reads no socket.
#[derive(Debug)]
pub struct ControlFile {
    path: PathBuf,
    read: u64,
}

impl ControlFile {
    /// Watches `path`; what it already holds is ignored.
    pub fn new(path: PathBuf) -> Self {
        let read = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        ControlFile { path, read }
    }

    /// New complete lines, if any.
    pub fn poll(&mut self) -> Vec<String> {
        let Ok(mut f) = std::fs::File::open(&self.path) else {
            return Vec::new();
        };
        let len = f.metadata().map(|m| m.len()).unwrap_or(0);
        if len < self.read {
            self.read = 0;
        }
        if len == self.read || f.seek(SeekFrom::Start(self.read)).is_err() {
            return Vec::new();
        }
        let mut buf = String::new();
        if f.take(1 << 16).read_to_string(&mut buf).is_err() {
            return Vec::new();
        }
        let complete = buf.rfind('\n').map_or(0, |i| i + 1);
        self.read += complete as u64;
        buf[..complete]
            .lines()
            .map(|l| l.trim().to_owned())
            .filter(|l| !l.is_empty())
            .collect()
    }
}

/// A number the way Fortran codes print it in double precision: `1.2345D-04`.
pub fn fortran(x: f64) -> String {
    scientific(x, 4, 'D')
}

/// `x` with `digits` decimals and a signed two-digit exponent after `letter`: `1.56699E+00`.
pub fn scientific(x: f64, digits: usize, letter: char) -> String {
    if !x.is_finite() {
        return if x.is_nan() {
            "NaN".into()
        } else {
            "Infinity".into()
        };
    }
    let s = format!("{x:.digits$E}");
    let (m, e) = s.split_once('E').unwrap_or((&s, "0"));
    let e: i32 = e.parse().unwrap_or(0);
    format!("{m}{letter}{}{:02}", if e < 0 { '-' } else { '+' }, e.abs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_overrides_the_input_file() {
        let dir = std::env::temp_dir().join(format!("npss-input-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let input = dir.join("c.in");
        std::fs::write(&input, "# comment\nrelax = 1.2\nspeed = 0.9 ! trailing\n").unwrap();
        let args: Vec<String> = ["--input", input.to_str().unwrap(), "--relax=0.6"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let s = Settings::from_args(&args).unwrap();
        assert_eq!(s.f64("relax", 0.0).unwrap(), 0.6);
        assert_eq!(s.f64("speed", 0.0).unwrap(), 0.9);
        assert_eq!(s.f64("other", 7.0).unwrap(), 7.0);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn fortran_exponents() {
        assert_eq!(fortran(1.2345e-4), "1.2345D-04");
        assert_eq!(fortran(12.0), "1.2000D+01");
        assert_eq!(fortran(f64::NAN), "NaN");
    }
}
