//! The rules file: its format, its parsing, and the positions of errors in it.
//!
//! A rules file is TOML: an array of `[[rule]]` tables whose conditions and actions are rhai
//! expressions and statements.
//!
//! ```toml
//! [[rule]]
//! name = "diverging"              # unique: letters, digits, `_` and `-`
//! on = "solver.residual"          # the event type it watches (exact name)
//! per = "instance"                # optional: windows and episodes per value of this field
//!                                  #   (or of several: "instance,run")
//! salience = 10                   # optional: higher fires first; ties in file order
//! repeat = false                  # optional: fire on every matching event, not per episode
//! target = "solver"               # optional: the program its actions address
//! when = 'rose("rho", 2, 20)'     # a rhai expression giving true or false
//! then = '''
//! alert("error", `density residual rose 100x within 20 iterations (now ${rho})`);
//! assert("diverged", #{ instance: instance });
//! '''
//! ```
//!
//! Keys: `name`, `when` and `then` are required; `on`, `per`, `salience`, `repeat` and
//! `target` are optional; any other key is an error (a misspelt key would otherwise be a rule
//! that silently does something else).
//!
//! - **Event rules** (with `on`): `when` is evaluated for every event of that type, with the
//!   event's fields as variables (`rho`, `iter`, `instance`; arrays as rhai arrays), plus
//!   `program` (the program's name), `pid` and `t` (seconds since the program's start, a
//!   float); a field of the same name hides these three. The rule fires when its condition
//!   turns true for its program and group, and again only after the condition has been false:
//!   one firing per episode (edge-triggered). `repeat = true` fires on every event for which
//!   it holds.
//! - **Fact rules** (without `on`): `when` reads working memory (`has`, `fact`, `facts`) and
//!   `program`, `pid`, `t`; it is evaluated whenever a program's memory changed, and the rule
//!   fires once per activation: once for each set of facts its condition read (refraction).
//!
//! Window functions take the field's name as a string and a literal `k`, and look at the last
//! `k` events of the rule's type for its program and group: `dropped(f, n, k)`,
//! `rose(f, n, k)`, `stalled(f, pct, k)`, `oscillates(f, k)`, `slope(f, k)`, `mean(f, k)`,
//! `min(f, k)`, `max(f, k)`, `last(f, k)`, `count(k)`; and two plain ones, `outside(x, lo, hi)`
//! and `rel_diff(a, b)`. Their exact definitions are in [`super::window`].
//!
//! Actions (in `then`): `alert(severity, message)` with severity `info`, `warning`, `error` or
//! `critical`; `set(path, value)`; `actuate(path, args...)` (rhai keeps the name `call` for its
//! function pointers); `sensor(type, on)` and `sensor(type, on, rate)`; `start()`, `stop()`,
//! `restart(args)`, `restart()`; `signal(name)`; `control(line)`; `set_input(file, key, value)`;
//! and on working memory, `assert(name, map)`, `assert(name)`, `retract(name)`,
//! `retract(name, map)`. Conditions and actions may read memory with `has(name)`,
//! `has(name, map)`, `fact(name)` (its map, or `()`) and `facts(name)` (an array of maps).
//!
//! # Errors
//!
//! A file is loaded whole or not at all. Every error names the file, the line and column in
//! it (a position inside a `when` or `then` string is mapped to the file), the rule, and what
//! to do: TOML that does not parse, an unknown key, a duplicate name, rhai that does not
//! parse, an unknown function or a wrong number of arguments, a condition that cannot give
//! true or false, a window larger than [`super::window::MAX_WINDOW`], a severity or signal
//! that does not exist, an `on` that is not an event type's name, window functions in a fact
//! rule.
//!
//! # Bounds
//!
//! At most [`MAX_FILE_BYTES`] bytes and [`MAX_RULES`] rules.

use serde::Deserialize;
use std::fmt;
use std::ops::Range;
use toml::Spanned;

/// Largest rules file, in bytes.
pub const MAX_FILE_BYTES: usize = 1 << 20;
/// Most rules in one file.
pub const MAX_RULES: usize = 10_000;

/// Why a rules file was rejected: where, which rule, what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct RulesError {
    /// The file's name as given (e.g. `rules.toml`).
    pub origin: String,
    /// Line in the file, from 1 (0: the file as a whole).
    pub line: usize,
    /// Column in the line, in characters from 1 (0: the line as a whole).
    pub column: usize,
    /// The rule concerned, when there is one.
    pub rule: Option<String>,
    /// What was wrong and what to do.
    pub message: String,
}

impl fmt::Display for RulesError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.origin)?;
        if self.line > 0 {
            write!(f, ":{}:{}", self.line, self.column.max(1))?;
        }
        if let Some(r) = &self.rule {
            write!(f, ": rule `{r}`")?;
        }
        write!(f, ": {}", self.message)
    }
}

/// A rules file being read: its text, for turning offsets into lines and columns.
#[derive(Debug, Clone)]
pub(crate) struct Source {
    pub(crate) origin: String,
    pub(crate) text: String,
}

impl Source {
    /// Line and column (from 1, in characters) of byte `at`.
    pub(crate) fn line_col(&self, at: usize) -> (usize, usize) {
        let at = at.min(self.text.len());
        let at = (0..=at)
            .rev()
            .find(|&i| self.text.is_char_boundary(i))
            .unwrap_or(0);
        let before = &self.text[..at];
        let line = before.matches('\n').count() + 1;
        let start = before.rfind('\n').map_or(0, |i| i + 1);
        (line, before[start..].chars().count() + 1)
    }

    pub(crate) fn error(&self, at: usize, rule: Option<&str>, message: String) -> RulesError {
        let (line, column) = self.line_col(at);
        RulesError {
            origin: self.origin.clone(),
            line,
            column,
            rule: rule.map(str::to_owned),
            message,
        }
    }
}

/// A string value of the file with, for each of its characters, where it is in the file, so
/// that rhai's positions (line and column within the string) become the file's.
#[derive(Debug, Clone)]
pub(crate) struct Located {
    pub(crate) text: String,
    /// Byte offset in the file of each character of `text`, then of the end.
    offsets: Vec<usize>,
}

impl Located {
    /// `value` as read by TOML from `span` of `file`.
    fn new(file: &str, span: Range<usize>, value: String) -> Located {
        let offsets = file
            .get(span.clone())
            .and_then(|raw| decode_offsets(raw, &value))
            .map(|o| o.into_iter().map(|i| i + span.start).collect())
            // A string written in a way the decoder does not follow: every position is the
            // string's start, which is still the right line for most.
            .unwrap_or_else(|| vec![span.start; value.chars().count() + 1]);
        Located {
            text: value,
            offsets,
        }
    }

    /// The file offset of rhai's `(line, column)` within the string (both from 1).
    pub(crate) fn offset(&self, line: usize, column: usize) -> usize {
        let mut l = 1;
        let mut c = 1;
        for (i, ch) in self.text.chars().enumerate() {
            if l == line && c == column.max(1) {
                return self.offsets[i];
            }
            if ch == '\n' {
                if l == line {
                    // Past the end of the line: its end.
                    return self.offsets[i];
                }
                l += 1;
                c = 1;
            } else {
                c += 1;
            }
        }
        *self.offsets.last().unwrap_or(&0)
    }

    /// The file offset of the string's first character.
    pub(crate) fn start(&self) -> usize {
        self.offsets.first().copied().unwrap_or(0)
    }

    /// The file offset of a rhai position (the string's start when it has none).
    pub(crate) fn at(&self, p: rhai::Position) -> usize {
        match (p.line(), p.position()) {
            (Some(l), Some(c)) => self.offset(l, c),
            (Some(l), None) => self.offset(l, 1),
            _ => self.start(),
        }
    }
}

/// For a TOML string written as `raw` (quotes included) and read as `value`, the offset in
/// `raw` of each character of `value`, then of the end; `None` when the two disagree.
fn decode_offsets(raw: &str, value: &str) -> Option<Vec<usize>> {
    let (quote, multi) = if raw.starts_with("'''") {
        ('\'', true)
    } else if raw.starts_with("\"\"\"") {
        ('"', true)
    } else if raw.starts_with('\'') {
        ('\'', false)
    } else if raw.starts_with('"') {
        ('"', false)
    } else {
        return None;
    };
    let open = if multi { 3 } else { 1 };
    let close = raw.len().checked_sub(open)?;
    let body = raw.get(open..close)?;
    let mut chars: Vec<(usize, char)> = body.char_indices().map(|(i, c)| (i + open, c)).collect();
    // A newline right after the opening delimiter of a multi-line string is not part of it.
    if multi {
        if chars.first().map(|c| c.1) == Some('\n') {
            chars.remove(0);
        } else if chars.len() >= 2 && chars[0].1 == '\r' && chars[1].1 == '\n' {
            chars.drain(..2);
        }
    }
    let mut out = Vec::with_capacity(value.len() + 1);
    let mut text = String::with_capacity(value.len());
    let mut i = 0;
    while i < chars.len() {
        let (at, c) = chars[i];
        if quote == '"' && c == '\\' {
            let (_, e) = *chars.get(i + 1)?;
            let simple = match e {
                'b' => Some('\u{8}'),
                't' => Some('\t'),
                'n' => Some('\n'),
                'f' => Some('\u{c}'),
                'r' => Some('\r'),
                '"' => Some('"'),
                '\\' => Some('\\'),
                'e' => Some('\u{1b}'),
                _ => None,
            };
            if let Some(s) = simple {
                text.push(s);
                out.push(at);
                i += 2;
            } else if e == 'u' || e == 'U' {
                let n = if e == 'u' { 4 } else { 8 };
                let hex: String = chars.get(i + 2..i + 2 + n)?.iter().map(|c| c.1).collect();
                text.push(char::from_u32(u32::from_str_radix(&hex, 16).ok()?)?);
                out.push(at);
                i += 2 + n;
            } else if multi && e.is_whitespace() {
                // A line-ending backslash: the whitespace and newlines after it go.
                i += 1;
                while i < chars.len() && chars[i].1.is_whitespace() {
                    i += 1;
                }
            } else {
                return None;
            }
        } else {
            text.push(c);
            out.push(at);
            i += 1;
        }
    }
    out.push(close);
    (text == value).then_some(out)
}

/// One `[[rule]]` table as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRule {
    name: Spanned<String>,
    on: Option<Spanned<String>>,
    per: Option<Spanned<String>>,
    salience: Option<Spanned<i64>>,
    repeat: Option<bool>,
    target: Option<Spanned<String>>,
    when: Spanned<String>,
    then: Spanned<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    rule: Vec<Spanned<RawRule>>,
}

/// Only the names, to say which rule a TOML error is in.
#[derive(Debug, Deserialize)]
struct LooseRule {
    name: Option<String>,
}

#[derive(Debug, Deserialize)]
struct LooseFile {
    #[serde(default)]
    rule: Vec<Spanned<LooseRule>>,
}

/// A rule as read from the file, before its rhai is compiled.
#[derive(Debug, Clone)]
pub(crate) struct ParsedRule {
    pub(crate) name: String,
    pub(crate) on: Option<(String, usize)>,
    pub(crate) per: Option<(String, usize)>,
    pub(crate) salience: i64,
    pub(crate) repeat: bool,
    pub(crate) target: Option<String>,
    pub(crate) when: Located,
    pub(crate) then: Located,
}

fn valid_rule_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 128
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// Reads the file's rules: TOML shape, names, keys; rhai is compiled by the caller.
pub(crate) fn parse(src: &Source) -> Result<Vec<ParsedRule>, RulesError> {
    if src.text.len() > MAX_FILE_BYTES {
        return Err(RulesError {
            origin: src.origin.clone(),
            line: 0,
            column: 0,
            rule: None,
            message: format!(
                "the file has {} bytes, more than the {} a rules file may have: split it",
                src.text.len(),
                MAX_FILE_BYTES
            ),
        });
    }
    let raw: RawFile = toml::from_str(&src.text).map_err(|e| {
        let at = e.span().map_or(0, |s| s.start);
        let rule = toml::from_str::<LooseFile>(&src.text).ok().and_then(|f| {
            f.rule
                .into_iter()
                .find(|r| r.span().contains(&at))
                .and_then(|r| r.into_inner().name)
        });
        let mut message = e.message().trim().to_owned();
        if message.starts_with("unknown field") {
            message.push_str("; see docs/rules.md for the keys a rule has");
        } else if message.starts_with("missing field") {
            message.push_str(": every rule has `name`, `when` and `then`");
        } else if !message.contains("expected") || message.contains("invalid") {
            message.push_str(" (the file is not valid TOML here)");
        }
        src.error(at, rule.as_deref(), message)
    })?;
    if raw.rule.len() > MAX_RULES {
        return Err(src.error(
            raw.rule[MAX_RULES].span().start,
            None,
            format!("more than {MAX_RULES} rules, the most a file may have: split the file"),
        ));
    }
    let mut seen = std::collections::HashMap::new();
    let mut out = Vec::with_capacity(raw.rule.len());
    for r in raw.rule {
        let r = r.into_inner();
        let name = r.name.get_ref().clone();
        let name_at = r.name.span().start;
        if !valid_rule_name(&name) {
            return Err(src.error(
                name_at,
                None,
                format!(
                    "`{name}` is not a rule name: use letters, digits, `_` and `-` (at most 128)"
                ),
            ));
        }
        if let Some(first) = seen.insert(name.clone(), name_at) {
            let (line, _) = src.line_col(first);
            return Err(src.error(
                name_at,
                Some(&name),
                format!("a rule of this name is already on line {line}: rename one"),
            ));
        }
        let spanned = |s: Option<Spanned<String>>| s.map(|s| (s.get_ref().clone(), s.span().start));
        let on = spanned(r.on);
        if let Some((on, at)) = &on
            && gyr_core::Schema::new(1, on.clone(), vec![]).is_err()
        {
            return Err(src.error(
                    *at,
                    Some(&name),
                    format!(
                        "`{on}` is not an event type's name: use letters, digits, `_`, `.` and `-`, starting with a letter (as `gyr trace stats` lists them)"
                    ),
                ));
        }
        let per = spanned(r.per);
        if let Some((per, at)) = &per {
            if on.is_none() {
                return Err(src.error(
                    *at,
                    Some(&name),
                    "`per` groups an event rule's windows by a field: a rule without `on` has no fields; remove `per` or add `on`".to_owned(),
                ));
            }
            for f in per.split(',').map(str::trim) {
                let ok = f
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                    && f.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
                if !ok {
                    return Err(src.error(
                        *at,
                        Some(&name),
                        format!(
                            "`{f}` is not a field name: use letters, digits and `_` (several fields: \"instance,run\")"
                        ),
                    ));
                }
            }
        }
        let located = |s: Spanned<String>| {
            let span = s.span();
            Located::new(&src.text, span, s.into_inner())
        };
        out.push(ParsedRule {
            name,
            on,
            per,
            salience: r.salience.map_or(0, |s| *s.get_ref()),
            repeat: r.repeat.unwrap_or(false),
            target: r.target.map(|t| t.into_inner()),
            when: located(r.when),
            then: located(r.then),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn src(text: &str) -> Source {
        Source {
            origin: "rules.toml".into(),
            text: text.into(),
        }
    }

    fn located(file: &str, key: &str) -> Located {
        let start = file.find(key).unwrap() + key.len();
        let t: toml::Table = toml::from_str(file).unwrap();
        let value = t["r"].as_str().unwrap().to_owned();
        // The value's span: from after `= ` to the end of the line, or of the document.
        let end = file.len() - usize::from(file.ends_with('\n'));
        Located::new(file, start..end, value)
    }

    #[test]
    fn positions_inside_strings_map_to_the_file() {
        // Literal string: column 3 of the string is column 3 + 5 of the file.
        let f = "r = 'a + b'\n";
        let l = located(f, "r = ");
        assert_eq!(src(f).line_col(l.offset(1, 3)), (1, 8));
        // Multi-line literal: the newline after ''' is not part of the string.
        let f = "r = '''\nfirst\n  second'''";
        let l = located(f, "r = ");
        assert_eq!(l.text, "first\n  second");
        assert_eq!(src(f).line_col(l.offset(2, 3)), (3, 3));
        // Basic string with escapes: each escape is one character of the value.
        let f = "r = \"a\\tb \\u00e9 c\"";
        let l = located(f, "r = ");
        assert_eq!(l.text, "a\tb é c");
        assert_eq!(src(f).line_col(l.offset(1, 7)), (1, 18));
        assert_eq!(src(f).line_col(l.offset(1, 5)), (1, 11));
        // Multi-line basic string with a line-ending backslash.
        let f = "r = \"\"\"\nx + \\\n    y\"\"\"";
        let l = located(f, "r = ");
        assert_eq!(l.text, "x + y");
        assert_eq!(src(f).line_col(l.offset(1, 5)), (3, 5));
    }

    #[test]
    fn errors_name_the_file_line_column_and_rule() {
        let e = parse(&src(
            "[[rule]]\nname = \"a\"\nwhen = 'x'\nthen = ''\nbogus = 3\n",
        ))
        .unwrap_err();
        assert_eq!((e.line, e.column), (5, 1));
        assert_eq!(e.rule.as_deref(), Some("a"));
        assert!(e.message.contains("unknown field `bogus`"), "{e}");
        assert!(
            e.to_string()
                .starts_with("rules.toml:5:1: rule `a`: unknown field"),
            "{e}"
        );

        let e = parse(&src("[[rule]]\nname = \"a\"\nwhen = 'x\n")).unwrap_err();
        assert_eq!(e.line, 3, "{e}");

        let e = parse(&src(
            "[[rule]]\nname = \"a\"\nwhen = 'x'\nthen = ''\n[[rule]]\nname = \"a\"\nwhen = 'x'\nthen = ''\n",
        ))
        .unwrap_err();
        assert_eq!((e.line, e.column), (6, 8));
        assert!(e.message.contains("already on line 2"), "{e}");

        let e = parse(&src(
            "[[rule]]\nname = \"a\"\non = \"9bad\"\nwhen = 'x'\nthen = ''\n",
        ))
        .unwrap_err();
        assert_eq!((e.line, e.column), (3, 6));
        assert!(e.message.contains("not an event type"), "{e}");
    }
}
