//! File globs: `*`, `?`, `[abc]` / `[a-z]` / `[!a]` within one path component, and one
//! `{instance}` placeholder that matches like `*` and names the run a file belongs to
//! (`runs/{instance}/residuals.dat`). Expanded component by component, so only the
//! directories the pattern can reach are read.

use std::path::{Path, PathBuf};

/// The most files one expansion returns.
pub const MAX_MATCHES: usize = 4096;
/// The most directory entries one expansion reads.
pub const MAX_ENTRIES: usize = 200_000;

const PLACEHOLDER: &str = "{instance}";

/// One component of a glob.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    /// Matched literally.
    Literal(String),
    /// Holds wildcards; `instance` says whether it holds the placeholder.
    Wild(String),
}

/// A compiled glob.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Glob {
    absolute: bool,
    parts: Vec<Part>,
}

/// A file a glob matched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Match {
    /// Its path (relative to the base the glob was expanded in, when the glob is relative).
    pub path: PathBuf,
    /// What `{instance}` matched, if the glob has it.
    pub instance: Option<String>,
}

fn is_wild(s: &str) -> bool {
    s.contains(['*', '?', '[']) || s.contains(PLACEHOLDER)
}

impl Glob {
    /// Compiles `pattern`, or says what is wrong with it.
    pub fn new(pattern: &str) -> Result<Glob, String> {
        if pattern.is_empty() {
            return Err("the glob is empty: give a file such as `run/residuals.dat`".into());
        }
        if pattern.matches(PLACEHOLDER).count() > 1 {
            return Err(format!(
                "`{pattern}` holds `{{instance}}` more than once: one part of the path names the run"
            ));
        }
        let absolute = pattern.starts_with('/');
        let mut parts = Vec::new();
        for c in pattern.split('/').filter(|c| !c.is_empty() && *c != ".") {
            if c == "**" {
                return Err(format!(
                    "`{pattern}`: `**` is not supported; write each level (`*/*/file`)"
                ));
            }
            if c.matches('[').count() != c.matches(']').count() {
                return Err(format!("`{pattern}`: a `[` is not closed in `{c}`"));
            }
            parts.push(if is_wild(c) {
                Part::Wild(c.to_owned())
            } else {
                Part::Literal(c.to_owned())
            });
        }
        if parts.is_empty() {
            return Err(format!("`{pattern}` names no file"));
        }
        Ok(Glob { absolute, parts })
    }

    /// Whether the glob can match more than one path.
    pub fn is_wild(&self) -> bool {
        self.parts.iter().any(|p| matches!(p, Part::Wild(_)))
    }

    /// The files (not directories) matching the glob under `base` (for a relative glob), at
    /// most [`MAX_MATCHES`], in natural order (`0.002` before `0.01`, `run2` before `run10`).
    pub fn expand(&self, base: &Path) -> Vec<Match> {
        let root = if self.absolute {
            PathBuf::from("/")
        } else {
            base.to_owned()
        };
        let mut out = Vec::new();
        let mut budget = MAX_ENTRIES;
        self.walk(&root, 0, None, &mut out, &mut budget);
        out.sort_by(|a, b| natural_cmp(&a.path.to_string_lossy(), &b.path.to_string_lossy()));
        out
    }

    fn walk(
        &self,
        dir: &Path,
        i: usize,
        instance: Option<String>,
        out: &mut Vec<Match>,
        budget: &mut usize,
    ) {
        if out.len() >= MAX_MATCHES {
            return;
        }
        let last = i + 1 == self.parts.len();
        match &self.parts[i] {
            Part::Literal(name) => {
                let p = dir.join(name);
                if last {
                    if p.is_file() {
                        out.push(Match { path: p, instance });
                    }
                } else if p.is_dir() {
                    self.walk(&p, i + 1, instance, out, budget);
                }
            }
            Part::Wild(pat) => {
                let Ok(entries) = std::fs::read_dir(dir) else {
                    return;
                };
                let mut names: Vec<(String, Option<String>)> = Vec::new();
                for e in entries.flatten() {
                    if *budget == 0 {
                        break;
                    }
                    *budget -= 1;
                    let name = e.file_name().to_string_lossy().into_owned();
                    if name.starts_with('.') && !pat.starts_with('.') {
                        continue;
                    }
                    if let Some(inst) = match_component(pat, &name) {
                        names.push((name, inst));
                    }
                }
                for (name, inst) in names {
                    let p = dir.join(&name);
                    let instance = inst.or_else(|| instance.clone());
                    if last {
                        if p.is_file() && out.len() < MAX_MATCHES {
                            out.push(Match { path: p, instance });
                        }
                    } else if p.is_dir() {
                        self.walk(&p, i + 1, instance, out, budget);
                    }
                }
            }
        }
    }
}

/// Matches one component; `Some(instance)` on a match (the placeholder's text, if any).
fn match_component(pat: &str, name: &str) -> Option<Option<String>> {
    if let Some(at) = pat.find(PLACEHOLDER) {
        let (before, after) = (&pat[..at], &pat[at + PLACEHOLDER.len()..]);
        // Try every split of `name` for the placeholder, shortest prefix first.
        for (i, _) in name
            .char_indices()
            .chain(std::iter::once((name.len(), ' ')))
        {
            if !wild_match(before.as_bytes(), &name.as_bytes()[..i]) {
                continue;
            }
            for (j, _) in name[i..]
                .char_indices()
                .chain(std::iter::once((name.len() - i, ' ')))
            {
                let inst = &name[i..i + j];
                if !inst.is_empty() && wild_match(after.as_bytes(), &name.as_bytes()[i + j..]) {
                    return Some(Some(inst.to_owned()));
                }
            }
        }
        return None;
    }
    wild_match(pat.as_bytes(), name.as_bytes()).then_some(None)
}

/// `*`, `?` and `[...]` matching, iterative with one backtrack point for `*`.
fn wild_match(pat: &[u8], s: &[u8]) -> bool {
    let (mut p, mut i) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while i < s.len() {
        if p < pat.len() {
            match pat[p] {
                b'*' => {
                    star = Some((p, i));
                    p += 1;
                    continue;
                }
                b'?' => {
                    p += 1;
                    i += 1;
                    continue;
                }
                b'[' => {
                    if let Some((ok, next)) = class(&pat[p..], s[i])
                        && ok
                    {
                        p += next;
                        i += 1;
                        continue;
                    }
                }
                c if c == s[i] => {
                    p += 1;
                    i += 1;
                    continue;
                }
                _ => {}
            }
        }
        match star {
            Some((sp, si)) => {
                p = sp + 1;
                i = si + 1;
                star = Some((sp, si + 1));
            }
            None => return false,
        }
    }
    pat[p..].iter().all(|&c| c == b'*')
}

/// Matches `c` against the class at the start of `pat` (`[...]`): (matched, class length).
fn class(pat: &[u8], c: u8) -> Option<(bool, usize)> {
    let end = pat.iter().skip(1).position(|&b| b == b']')? + 1;
    let mut body = &pat[1..end];
    let negate = matches!(body.first(), Some(b'!' | b'^'));
    if negate {
        body = &body[1..];
    }
    let mut found = false;
    let mut k = 0;
    while k < body.len() {
        if k + 2 < body.len() && body[k + 1] == b'-' {
            found |= (body[k]..=body[k + 2]).contains(&c);
            k += 3;
        } else {
            found |= body[k] == c;
            k += 1;
        }
    }
    Some((found != negate, end + 1))
}

/// Compares strings with runs of digits (and decimal numbers such as `0.002`) by value.
pub fn natural_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    fn number(s: &[u8], i: usize) -> (f64, usize) {
        let mut j = i;
        while j < s.len() && (s[j].is_ascii_digit() || s[j] == b'.') {
            j += 1;
        }
        // Trailing dots (`file.`) are not part of the number.
        while j > i + 1 && s[j - 1] == b'.' {
            j -= 1;
        }
        let v = std::str::from_utf8(&s[i..j])
            .ok()
            .and_then(|t| t.parse::<f64>().ok())
            .unwrap_or(f64::NAN);
        (v, j)
    }
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        if a[i].is_ascii_digit() && b[j].is_ascii_digit() {
            let (x, ni) = number(a, i);
            let (y, nj) = number(b, j);
            match x.partial_cmp(&y) {
                Some(std::cmp::Ordering::Equal) | None => {}
                Some(o) => return o,
            }
            i = ni;
            j = nj;
        } else {
            match a[i].cmp(&b[j]) {
                std::cmp::Ordering::Equal => {}
                o => return o,
            }
            i += 1;
            j += 1;
        }
    }
    (a.len() - i).cmp(&(b.len() - j))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_components() {
        assert!(wild_match(b"*.dat", b"residuals.dat"));
        assert!(!wild_match(b"*.dat", b"residuals.dat.bak"));
        assert!(wild_match(b"r?n[0-9]", b"run7"));
        assert!(!wild_match(b"r?n[!0-9]", b"run7"));
        assert_eq!(
            match_component("run-{instance}", "run-a7"),
            Some(Some("a7".into()))
        );
        assert_eq!(
            match_component("{instance}.log", "case1.log"),
            Some(Some("case1".into()))
        );
        assert_eq!(match_component("{instance}.log", "case1.txt"), None);
    }

    #[test]
    fn sorts_time_directories_by_value() {
        let mut v = vec!["case/0.01/p", "case/0.002/p", "case/0.1/p", "case/0/p"];
        v.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(v, ["case/0/p", "case/0.002/p", "case/0.01/p", "case/0.1/p"]);
        let mut v = vec!["run10", "run2"];
        v.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(v, ["run2", "run10"]);
    }

    #[test]
    fn refuses_bad_globs() {
        assert!(Glob::new("").is_err());
        assert!(Glob::new("a/**/b").is_err());
        assert!(Glob::new("{instance}/{instance}").is_err());
        assert!(Glob::new("a[b").is_err());
    }
}
