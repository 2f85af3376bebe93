//! A bad spec is refused with the line and column of what is wrong: TOML syntax, unknown
//! keys, a regular expression that does not compile (its position inside the string mapped
//! to the file), a capture that is not a field, a type that does not exist.

use gyr_watchdog::Spec;

fn error(text: &str) -> ((usize, usize), String) {
    let e = Spec::parse(text).expect_err("the spec should be refused");
    (e.line_col.expect("a line and column"), e.message)
}

const GOOD: &str = r#"
[[event]]
name = "r"
pattern = '^(?P<iter>\d+)\s+(?P<res>\S+)'
fields = [{ name = "iter", type = "u32" }, { name = "res", type = "f64" }]
"#;

#[test]
fn a_good_spec_parses() {
    let s = Spec::parse(GOOD).unwrap();
    assert_eq!(s.events.len(), 1);
    // iter, res, then the watch-dog's `instance` and `run`.
    let names: Vec<_> = s.events[0]
        .schema_fields()
        .into_iter()
        .map(|f| f.name)
        .collect();
    assert_eq!(names, ["iter", "res", "instance", "run"]);
}

#[test]
fn a_toml_error_names_its_line_and_column() {
    let ((line, col), msg) = error("[[event]]\nname = \"r\"\npattern = 'x\n");
    assert_eq!(line, 3, "{msg}");
    assert!(col >= 11, "{col}: {msg}");
}

#[test]
fn an_unknown_key_names_its_line() {
    let text = GOOD.replace("name = \"r\"", "name = \"r\"\npatern = 'x'");
    let ((line, _), msg) = error(&text);
    assert_eq!(line, 4, "{msg}");
    assert!(msg.contains("patern"), "{msg}");
}

#[test]
fn a_bad_regex_points_inside_the_string() {
    // The unclosed group's `(` is the 4th character of the pattern, which starts at column
    // 12 (after `pattern = '`).
    let text =
        "[[event]]\nname = \"r\"\npattern = 'ab(cd'\nfields = [{ name = \"x\", type = \"f64\" }]\n";
    let ((line, col), msg) = error(text);
    assert_eq!((line, col), (3, 14), "{msg}");
    assert!(msg.contains("does not compile"), "{msg}");
    // In a basic string, escapes count as written: `\\d` is two characters of the file.
    let text = "[[event]]\nname = \"r\"\npattern = \"\\\\d+(x\"\nfields = [{ name = \"x\", type = \"f64\" }]\n";
    let ((line, col), msg) = error(text);
    assert_eq!((line, col), (3, 16), "{msg}");
    // A bad repetition in a multi-line literal on its second line.
    let text = "[[event]]\nname = \"r\"\npattern = '''\nab\n(x'''\nfields = [{ name = \"x\", type = \"f64\" }]\n";
    let ((line, col), msg) = error(text);
    assert_eq!(line, 5, "{msg}");
    assert_eq!(col, 1, "{msg}");
}

#[test]
fn a_capture_that_is_not_a_field_is_named() {
    let text = GOOD.replace("(?P<res>", "(?P<resid>");
    let ((line, col), msg) = error(&text);
    assert_eq!(line, 4, "{msg}");
    // `(?P<resid>` starts after `^(?P<iter>\d+)\s+`: column 12 + 17 + 4.
    assert_eq!(col, 12 + 17 + 4, "{msg}");
    assert!(
        msg.contains("resid") && msg.contains("not one of its fields"),
        "{msg}"
    );
}

#[test]
fn a_field_without_a_capture_is_refused() {
    let text = GOOD.replace(
        "{ name = \"res\", type = \"f64\" }",
        "{ name = \"res\", type = \"f64\" }, { name = \"extra\", type = \"f64\" }",
    );
    let (_, msg) = error(&text);
    assert!(msg.contains("extra") && msg.contains("no capture"), "{msg}");
}

#[test]
fn an_unknown_type_names_its_line_and_column() {
    let text = GOOD.replace("type = \"f64\"", "type = \"float64\"");
    let ((line, col), msg) = error(&text);
    assert_eq!(line, 5, "{msg}");
    let expect = GOOD.lines().nth(4).unwrap().find("\"f64\"").unwrap() + 1;
    assert_eq!(col, expect, "{msg}");
    assert!(msg.contains("float64") && msg.contains("f64"), "{msg}");
}

#[test]
fn other_mistakes_are_explained() {
    let cases = [
        (
            GOOD.replace("name = \"r\"", "name = \"gyr.r\""),
            "gyr's own",
        ),
        (
            GOOD.replace("pattern =", "source = \"nowhere\"\npattern ="),
            "no source `nowhere`",
        ),
        (
            GOOD.replace("pattern = ", "table = { header = 'x' }\npattern = "),
            "exactly one",
        ),
        (
            format!("{GOOD}\n[design]\n\"r.nope\" = 1.0\n"),
            "no such event field",
        ),
        ("[watchdog]\npoll_ms = 0\n".to_owned() + GOOD, "poll_ms"),
        ("# nothing\n".to_owned(), "no events"),
    ];
    for (text, expect) in cases {
        let e = Spec::parse(&text).expect_err(expect);
        assert!(
            e.message.contains(expect),
            "{expect:?} not in {:?}",
            e.message
        );
    }
    let big = "#".repeat(gyr_watchdog::spec::MAX_SPEC_BYTES + 1);
    assert!(Spec::parse(&big).unwrap_err().message.contains("larger"));
}

#[test]
fn design_points_are_public() {
    let text = r#"
[[event]]
name = "adpac.residual"
pattern = '(?P<rms>\S+) (?P<max>\S+)'
fields = [{ name = "rms", type = "f64", design = 1e-6, unit = "1" }, { name = "max", type = "f64" }]

[design]
"adpac.residual.max" = { design = 1e-5, min = 0.0, max = 1e-2 }
"#;
    let s = Spec::parse(text).unwrap();
    let d = s.design_points();
    assert_eq!(d.len(), 2);
    assert_eq!((d[0].field.as_str(), d[0].design), ("rms", Some(1e-6)));
    assert_eq!(
        (d[1].field.as_str(), d[1].design, d[1].max),
        ("max", Some(1e-5), Some(1e-2))
    );
}
