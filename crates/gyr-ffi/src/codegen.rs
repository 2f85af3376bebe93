//! Typed sensor code from a spec file, for C, C++ and Fortran (`gyr gen`): Falcon's sensor
//! specification turned into code.
//!
//! For each event type of the spec, the generated code has one emit function taking the
//! fields as typed arguments (`gyr_emit_work_load(uint32_t domain, double load)`; Fortran:
//! `call emit_work_load(domain, load)`), which packs them in gyr's payload layout on the stack
//! and calls `gyr_emit`. The spec's text is embedded, so the program registers it with one call
//! (`gyr_sensors_init()`) and needs no file at run time.
//!
//! The generator lives beside the C ABI because what it writes calls that ABI: the two change
//! together, and `tests/examples.rs` compiles generated code against the header.
//!
//! - C (`Lang::C`): one header; `#define GYR_SENSORS_IMPLEMENTATION` before including it in
//!   exactly one file defines the handles and `gyr_sensors_init`.
//! - C++ (`Lang::Cpp`): the same header, plus `gyr_sensors::emit_*` overloads taking
//!   `std::string_view` for strings.
//! - Fortran (`Lang::Fortran`): a module `gyr_sensors` over the `gyr` module (`gyr.f90`).

use gyr_core::FieldType;
use gyr_core::spec::{SensorKind, Spec, SpecSensor};
use std::collections::HashMap;
use std::fmt::Write;

/// The language to generate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lang {
    /// A C99 header.
    C,
    /// A C++17 header.
    Cpp,
    /// A Fortran 2008 module.
    Fortran,
}

/// Why code could not be generated for a spec.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct GenError(String);

/// The largest payload of a sensor with strings or bytes that generated C code packs on the
/// stack, unless the program defines `GYR_SENSORS_MAX_PAYLOAD` itself: longer strings are cut
/// (at a character boundary) to fit, and bytes fields refused.
pub const DEFAULT_MAX_PAYLOAD: usize = 4096;

const C_KEYWORDS: &[&str] = &[
    "auto",
    "break",
    "case",
    "char",
    "const",
    "continue",
    "default",
    "do",
    "double",
    "else",
    "enum",
    "extern",
    "float",
    "for",
    "goto",
    "if",
    "inline",
    "int",
    "long",
    "register",
    "restrict",
    "return",
    "short",
    "signed",
    "sizeof",
    "static",
    "struct",
    "switch",
    "typedef",
    "union",
    "unsigned",
    "void",
    "volatile",
    "while",
    "bool",
    "true",
    "false",
    "class",
    "namespace",
    "new",
    "delete",
    "this",
    "template",
    "typename",
    "private",
    "public",
    "p",
    "n",
    "rc",
    "room",
    "len",
    "l",
];

/// A name as an identifier: letters, digits and `_`, never a keyword or one of the generated
/// code's own locals.
fn ident(name: &str) -> String {
    let mut s: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    if s.starts_with(|c: char| c.is_ascii_digit()) {
        s.insert(0, '_');
    }
    if C_KEYWORDS.contains(&s.as_str()) {
        s.push('_');
    }
    s
}

/// Checks that no two names of the spec become the same identifier (Fortran ignores case).
fn check_idents(spec: &Spec, lang: Lang) -> Result<(), GenError> {
    let key = |s: &str| {
        let i = ident(s);
        if lang == Lang::Fortran {
            i.to_ascii_lowercase()
        } else {
            i
        }
    };
    let mut seen: HashMap<String, &str> = HashMap::new();
    for s in &spec.sensors {
        if let Some(other) = seen.insert(key(&s.name), &s.name) {
            return Err(GenError(format!(
                "sensors `{other}` and `{}` would have the same function name `{}`: rename one",
                s.name,
                key(&s.name)
            )));
        }
        if lang == Lang::Fortran && ident(&s.name).len() + 5 > 63 {
            return Err(GenError(format!(
                "sensor `{}`: `emit_{}` is longer than Fortran's 63 characters: shorten the name",
                s.name,
                ident(&s.name)
            )));
        }
        let mut fields: HashMap<String, &str> = HashMap::new();
        for f in &s.fields {
            if let Some(other) = fields.insert(key(&f.name), &f.name) {
                return Err(GenError(format!(
                    "sensor `{}`: fields `{other}` and `{}` would have the same argument name: \
                     rename one",
                    s.name, f.name
                )));
            }
        }
    }
    Ok(())
}

/// Generates the code for `spec` in `lang`; `source` names the spec in the generated comment.
pub fn generate(
    spec: &Spec,
    spec_text: &str,
    source: &str,
    lang: Lang,
) -> Result<String, GenError> {
    check_idents(spec, lang)?;
    Ok(match lang {
        Lang::C => c_header(spec, spec_text, source, false),
        Lang::Cpp => c_header(spec, spec_text, source, true),
        Lang::Fortran => fortran_module(spec, spec_text, source),
    })
}

fn emitted(spec: &Spec) -> impl Iterator<Item = &SpecSensor> {
    spec.sensors
        .iter()
        .filter(|s| s.kind != SensorKind::Sampling)
}

fn c_string(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n\"\n    \""),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\{:03o}", c as u32);
            }
            // Octal escapes for every byte outside ASCII: no source-charset questions.
            c if !c.is_ascii() => {
                let mut buf = [0u8; 4];
                for b in c.encode_utf8(&mut buf).bytes() {
                    let _ = write!(out, "\\{b:03o}");
                }
            }
            '?' => out.push_str("\\?"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The C argument list of a sensor's emit function.
fn c_params(s: &SpecSensor) -> String {
    let params: Vec<String> = s
        .fields
        .iter()
        .map(|f| {
            let n = ident(&f.name);
            match f.ty {
                FieldType::Str => format!("const char *{n}"),
                FieldType::Bytes => format!("const void *{n}, uint32_t {n}_len"),
                FieldType::Array(_, len) => {
                    let (t, _) = crate::sensor::c_scalar(f.ty).unwrap_or(("uint8_t", 1));
                    format!("const {t} {n}[{len}]")
                }
                _ => {
                    let (t, _) = crate::sensor::c_scalar(f.ty).unwrap_or(("uint8_t", 1));
                    format!("{t} {n}")
                }
            }
        })
        .collect();
    if params.is_empty() {
        "void".into()
    } else {
        params.join(", ")
    }
}

fn c_emit_function(out: &mut String, s: &SpecSensor) {
    let name = ident(&s.name);
    if let Some(d) = &s.description {
        let _ = writeln!(out, "/* {} */", d.replace("*/", "* /"));
    }
    let _ = writeln!(
        out,
        "static inline int32_t gyr_emit_{name}({}) {{",
        c_params(s)
    );
    let fixed: Option<usize> = s.fields.iter().map(|f| f.ty.fixed_size()).sum();
    match fixed {
        Some(size) => {
            let _ = writeln!(out, "    unsigned char p[{}];", size.max(1));
            let mut at = 0;
            for f in &s.fields {
                let n = ident(&f.name);
                let size = f.ty.fixed_size().unwrap_or(0);
                let src = if matches!(f.ty, FieldType::Array(..)) {
                    n.clone()
                } else {
                    format!("&{n}")
                };
                let _ = writeln!(out, "    memcpy(p + {at}, {src}, {size});");
                at += size;
            }
            let _ = writeln!(out, "    return gyr_emit(gyr_sensor_{name}, p, {at});");
        }
        None => {
            // Strings and bytes: packed into a bounded stack buffer.
            let _ = writeln!(out, "    unsigned char p[GYR_SENSORS_MAX_PAYLOAD];");
            let _ = writeln!(out, "    size_t n = 0;");
            let fixed_total: usize = s.fields.iter().filter_map(|f| f.ty.fixed_size()).sum();
            let var_count = s
                .fields
                .iter()
                .filter(|f| f.ty.fixed_size().is_none())
                .count();
            let _ = writeln!(
                out,
                "    size_t room = GYR_SENSORS_MAX_PAYLOAD - {};",
                fixed_total + 4 * var_count
            );
            for f in &s.fields {
                let n = ident(&f.name);
                match f.ty {
                    FieldType::Str => {
                        let _ = writeln!(
                            out,
                            "    {{ size_t len = {n} ? strlen({n}) : 0; uint32_t l;\n      \
                             if (len > room) {{ len = room; while (len > 0 && (((const unsigned char *){n})[len] & 0xC0) == 0x80) len--; }}\n      \
                             room -= len; l = (uint32_t)len; memcpy(p + n, &l, 4); if (len) memcpy(p + n + 4, {n}, len); n += 4 + len; }}"
                        );
                    }
                    FieldType::Bytes => {
                        let _ = writeln!(
                            out,
                            "    {{ if ({n}_len > room) return GYR_E_INVALID; room -= {n}_len;\n      \
                             memcpy(p + n, &{n}_len, 4); if ({n}_len) memcpy(p + n + 4, {n}, {n}_len); n += 4 + {n}_len; }}"
                        );
                    }
                    FieldType::Array(..) => {
                        let size = f.ty.fixed_size().unwrap_or(0);
                        let _ = writeln!(out, "    memcpy(p + n, {n}, {size}); n += {size};");
                    }
                    _ => {
                        let size = f.ty.fixed_size().unwrap_or(0);
                        let _ = writeln!(out, "    memcpy(p + n, &{n}, {size}); n += {size};");
                    }
                }
            }
            let _ = writeln!(out, "    return gyr_emit(gyr_sensor_{name}, p, n);");
        }
    }
    let _ = writeln!(out, "}}\n");
}

fn c_header(spec: &Spec, spec_text: &str, source: &str, cpp: bool) -> String {
    let lang = if cpp { "cpp" } else { "c" };
    let mut out = String::new();
    let _ = writeln!(
        out,
        "/* Sensors of {source}, generated by `gyr gen --lang {lang}`: do not edit, generate again.\n \
         * Call gyr_sensors_init() once after gyr_init(), then gyr_emit_NAME(...) for each event.\n \
         * #define GYR_SENSORS_IMPLEMENTATION before including this file in exactly one source file. */"
    );
    let _ = writeln!(out, "#ifndef GYR_SENSORS_H\n#define GYR_SENSORS_H\n");
    if cpp {
        let _ = writeln!(
            out,
            "#include <cstdint>\n#include <cstring>\n#include <string_view>"
        );
    } else {
        let _ = writeln!(
            out,
            "#include <stdbool.h>\n#include <stdint.h>\n#include <string.h>"
        );
    }
    let _ = writeln!(out, "#include \"gyr.h\"\n");
    let _ = writeln!(
        out,
        "#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__\n\
         #error \"gyr's generated sensors pack payloads on little-endian machines only\"\n#endif\n"
    );
    let _ = writeln!(
        out,
        "#ifndef GYR_SENSORS_MAX_PAYLOAD\n#define GYR_SENSORS_MAX_PAYLOAD {DEFAULT_MAX_PAYLOAD}\n#endif\n"
    );
    let _ = writeln!(out, "#ifdef __cplusplus\nextern \"C\" {{\n#endif\n");
    let _ = writeln!(out, "#ifdef GYR_SENSORS_IMPLEMENTATION");
    for s in emitted(spec) {
        let _ = writeln!(out, "gyr_sensor *gyr_sensor_{} = 0;", ident(&s.name));
    }
    let _ = writeln!(
        out,
        "\n/* The spec, registered by gyr_sensors_init(). */\nstatic const char gyr_sensors_spec[] =\n    {};\n",
        c_string(spec_text)
    );
    let _ = writeln!(
        out,
        "int32_t gyr_sensors_init(void) {{\n    int32_t rc = gyr_spec_register(gyr_sensors_spec);\n    if (rc != GYR_OK) return rc;"
    );
    for s in emitted(spec) {
        let _ = writeln!(
            out,
            "    if (!(gyr_sensor_{} = gyr_sensor_find({}))) return GYR_E_NOT_FOUND;",
            ident(&s.name),
            c_string(&s.name)
        );
    }
    let _ = writeln!(out, "    return GYR_OK;\n}}\n#else");
    for s in emitted(spec) {
        let _ = writeln!(out, "extern gyr_sensor *gyr_sensor_{};", ident(&s.name));
    }
    let _ = writeln!(out, "int32_t gyr_sensors_init(void);\n#endif\n");
    for s in emitted(spec) {
        c_emit_function(&mut out, s);
    }
    for s in spec
        .sensors
        .iter()
        .filter(|s| s.kind == SensorKind::Sampling)
    {
        let _ = writeln!(
            out,
            "/* `{}` is a sampling sensor: gyr_sample_double(\"{}\", initial) or gyr_sample_int64 \
             makes its cell, gyr_sample_set() updates it. */\n",
            s.name, s.name
        );
    }
    let _ = writeln!(out, "#ifdef __cplusplus\n}}\n#endif\n");
    if cpp {
        let _ = writeln!(out, "namespace gyr_sensors {{\n");
        let _ = writeln!(
            out,
            "inline int32_t init() {{ return ::gyr_sensors_init(); }}\n"
        );
        for s in emitted(spec) {
            let name = ident(&s.name);
            let has_str = s.fields.iter().any(|f| f.ty == FieldType::Str);
            let params = c_params(s);
            let args: Vec<String> = s
                .fields
                .iter()
                .map(|f| {
                    let n = ident(&f.name);
                    if f.ty == FieldType::Bytes {
                        format!("{n}, {n}_len")
                    } else {
                        n
                    }
                })
                .collect();
            let _ = writeln!(
                out,
                "inline int32_t emit_{name}({}) {{ return ::gyr_emit_{name}({}); }}",
                if params == "void" { "" } else { &params },
                args.join(", ")
            );
            if has_str {
                // A string_view need not end in NUL: copied into a bounded buffer first.
                let sv_params: Vec<String> = s
                    .fields
                    .iter()
                    .map(|f| {
                        let n = ident(&f.name);
                        if f.ty == FieldType::Str {
                            format!("std::string_view {n}")
                        } else {
                            c_params(&SpecSensor {
                                fields: vec![f.clone()],
                                ..s.clone()
                            })
                        }
                    })
                    .collect();
                let mut body = String::new();
                let mut call_args = Vec::new();
                for f in &s.fields {
                    let n = ident(&f.name);
                    if f.ty == FieldType::Str {
                        let _ = write!(
                            body,
                            " char {n}_z[GYR_SENSORS_MAX_PAYLOAD]; size_t {n}_n = {n}.size() < sizeof {n}_z ? {n}.size() : sizeof {n}_z - 1; std::memcpy({n}_z, {n}.data(), {n}_n); {n}_z[{n}_n] = 0;"
                        );
                        call_args.push(format!("{n}_z"));
                    } else if f.ty == FieldType::Bytes {
                        call_args.push(format!("{n}, {n}_len"));
                    } else {
                        call_args.push(n);
                    }
                }
                let _ = writeln!(
                    out,
                    "inline int32_t emit_{name}({}) {{{body} return ::gyr_emit_{name}({}); }}",
                    sv_params.join(", "),
                    call_args.join(", ")
                );
            }
        }
        let _ = writeln!(out, "\n}}  // namespace gyr_sensors\n");
    }
    let _ = writeln!(out, "#endif /* GYR_SENSORS_H */");
    out
}

/// A Fortran scalar type for a field, and its size.
fn fortran_type(ty: FieldType) -> (&'static str, usize) {
    use gyr_core::schema::ScalarType as S;
    let scalar = match ty {
        FieldType::Array(s, _) => Some(s),
        _ => ty.scalar(),
    };
    match scalar {
        Some(S::I8 | S::U8) => ("integer(c_int8_t)", 1),
        Some(S::I16 | S::U16) => ("integer(c_int16_t)", 2),
        Some(S::I32 | S::U32) => ("integer(c_int32_t)", 4),
        Some(S::I64 | S::U64) => ("integer(c_int64_t)", 8),
        Some(S::F32) => ("real(c_float)", 4),
        Some(S::F64) => ("real(c_double)", 8),
        Some(S::Bool) => ("logical(c_bool)", 1),
        _ => ("character(len=*)", 0),
    }
}

/// A Fortran character constant, quotes doubled, split into pieces short enough for a line.
fn fortran_pieces(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    chars
        .chunks(60)
        .map(|chunk| {
            let mut s = String::from("\"");
            for &c in chunk {
                if c == '"' {
                    s.push_str("\"\"");
                } else {
                    s.push(c);
                }
            }
            s.push('"');
            s
        })
        .collect()
}

fn fortran_module(spec: &Spec, spec_text: &str, source: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "! Sensors of {source}, generated by `gyr gen --lang fortran`: do not edit, generate again.\n\
         ! Call gyr_sensors_init() once after gyr_init(), then emit_NAME(...) for each event."
    );
    let _ = writeln!(
        out,
        "module gyr_sensors\n  use iso_c_binding\n  use gyr\n  implicit none\n  private"
    );
    let mut public = vec!["gyr_sensors_init".to_owned()];
    for s in emitted(spec) {
        public.push(format!("emit_{}", ident(&s.name)));
    }
    for p in &public {
        let _ = writeln!(out, "  public :: {p}");
    }
    for s in emitted(spec) {
        let _ = writeln!(
            out,
            "  type(c_ptr), save :: h_{} = c_null_ptr",
            ident(&s.name)
        );
    }
    let _ = writeln!(out, "contains\n");
    let _ = writeln!(
        out,
        "  ! Registers the spec and finds each event type's handle; returns GYR_OK or an error code.\n  \
         function gyr_sensors_init() result(rc)\n    integer(c_int32_t) :: rc\n    \
         character(len=:, kind=c_char), allocatable :: spec\n    spec = \"\""
    );
    for line in spec_text.lines() {
        for piece in fortran_pieces(line) {
            let _ = writeln!(out, "    spec = spec // {piece}");
        }
        let _ = writeln!(out, "    spec = spec // c_new_line");
    }
    let _ = writeln!(
        out,
        "    rc = gyr_spec_register(spec // c_null_char)\n    if (rc /= GYR_OK) return"
    );
    for s in emitted(spec) {
        let n = ident(&s.name);
        let pieces = fortran_pieces(&s.name).join(" // ");
        let _ = writeln!(
            out,
            "    h_{n} = gyr_sensor_find({pieces} // c_null_char)\n    if (.not. c_associated(h_{n})) then\n      rc = GYR_E_NOT_FOUND\n      return\n    end if"
        );
    }
    let _ = writeln!(out, "    rc = GYR_OK\n  end function gyr_sensors_init\n");
    for s in emitted(spec) {
        let name = ident(&s.name);
        let args: Vec<String> = s.fields.iter().map(|f| ident(&f.name)).collect();
        if let Some(d) = &s.description {
            let _ = writeln!(out, "  ! {}", d.replace('\n', " "));
        }
        let _ = writeln!(out, "  subroutine emit_{name}({})", args.join(", "));
        for f in &s.fields {
            let n = ident(&f.name);
            match f.ty {
                FieldType::Str | FieldType::Bytes => {
                    let _ = writeln!(out, "    character(len=*), intent(in) :: {n}");
                }
                FieldType::Array(_, len) => {
                    let (t, _) = fortran_type(f.ty);
                    let _ = writeln!(out, "    {t}, intent(in) :: {n}({len})");
                }
                _ => {
                    let (t, _) = fortran_type(f.ty);
                    let _ = writeln!(out, "    {t}, intent(in) :: {n}");
                }
            }
        }
        // The payload's size: fixed fields, plus a length and the text of each string.
        let fixed: usize = s.fields.iter().filter_map(|f| f.ty.fixed_size()).sum();
        let mut size = fixed.to_string();
        for f in s.fields.iter().filter(|f| f.ty.fixed_size().is_none()) {
            let _ = write!(size, " + 4 + len({})", ident(&f.name));
        }
        let _ = writeln!(
            out,
            "    integer(c_int8_t), target :: p_({size})\n    integer :: at_\n    integer(c_int32_t) :: rc_\n    at_ = 1"
        );
        for f in &s.fields {
            let n = ident(&f.name);
            match f.ty {
                FieldType::Str | FieldType::Bytes => {
                    let _ = writeln!(
                        out,
                        "    p_(at_:at_ + 3) = transfer(int(len({n}), c_int32_t), p_(1:4))\n    \
                         at_ = at_ + 4\n    \
                         if (len({n}) > 0) p_(at_:at_ + len({n}) - 1) = transfer({n}, p_(1:len({n})))\n    \
                         at_ = at_ + len({n})"
                    );
                }
                _ => {
                    let size = f.ty.fixed_size().unwrap_or(0);
                    let _ = writeln!(
                        out,
                        "    p_(at_:at_ + {}) = transfer({n}, p_(1:{size}))\n    at_ = at_ + {size}",
                        size - 1
                    );
                }
            }
        }
        let _ = writeln!(
            out,
            "    rc_ = gyr_emit(h_{name}, c_loc(p_), int(at_ - 1, c_size_t))\n  end subroutine emit_{name}\n"
        );
    }
    let _ = writeln!(out, "end module gyr_sensors");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPEC: &str = r#"
[[sensor]]
name = "work_load"
description = "work done by one domain"
fields = [{ name = "domain", type = "u32" }, { name = "load", type = "f64" }, { name = "hist", type = "[u16; 4]" }]

[[sensor]]
name = "note.text"
fields = [{ name = "int", type = "string" }, { name = "ok", type = "bool" }]

[[sensor]]
name = "queue"
kind = "sampling"
fields = [{ name = "value", type = "u64" }]
"#;

    #[test]
    fn c_has_one_typed_function_per_emitted_sensor() {
        let spec = Spec::parse(SPEC).unwrap();
        let c = generate(&spec, SPEC, "sensors.toml", Lang::C).unwrap();
        assert!(c.contains(
            "static inline int32_t gyr_emit_work_load(uint32_t domain, double load, const uint16_t hist[4]) {"
        ), "{c}");
        assert!(c.contains("memcpy(p + 12, hist, 8);"), "{c}");
        assert!(
            c.contains("return gyr_emit(gyr_sensor_work_load, p, 20);"),
            "{c}"
        );
        assert!(
            c.contains("gyr_emit_note_text(const char *int_, bool ok)"),
            "{c}"
        );
        assert!(
            !c.contains("gyr_emit_queue"),
            "sampling sensors are not emitted"
        );
        assert!(c.contains("gyr_sample_double(\"queue\""));
        let cpp = generate(&spec, SPEC, "sensors.toml", Lang::Cpp).unwrap();
        assert!(
            cpp.contains("inline int32_t emit_note_text(std::string_view int_, bool ok)"),
            "{cpp}"
        );
        let f = generate(&spec, SPEC, "sensors.toml", Lang::Fortran).unwrap();
        assert!(
            f.contains("subroutine emit_work_load(domain, load, hist)"),
            "{f}"
        );
        assert!(
            f.contains("integer(c_int16_t), intent(in) :: hist(4)"),
            "{f}"
        );
        assert!(
            f.contains("integer(c_int8_t), target :: p_(1 + 4 + len(int_))"),
            "{f}"
        );
    }

    #[test]
    fn clashing_names_are_refused() {
        let text = "[[sensor]]\nname = \"a.b\"\n[[sensor]]\nname = \"a-b\"\n";
        let spec = Spec::parse(text).unwrap();
        let e = generate(&spec, text, "s.toml", Lang::C)
            .unwrap_err()
            .to_string();
        assert!(e.contains("same function name `a_b`"), "{e}");
        let text = "[[sensor]]\nname = \"Ab\"\n[[sensor]]\nname = \"ab\"\n";
        let spec = Spec::parse(text).unwrap();
        assert!(generate(&spec, text, "s.toml", Lang::C).is_ok());
        assert!(generate(&spec, text, "s.toml", Lang::Fortran).is_err());
    }

    #[test]
    fn spec_text_survives_quoting() {
        assert_eq!(c_string("a\"b\\c"), "\"a\\\"b\\\\c\"");
        assert_eq!(c_string("é"), "\"\\303\\251\"");
        assert_eq!(
            fortran_pieces("say \"hi\""),
            vec!["\"say \"\"hi\"\"\"".to_owned()]
        );
        assert_eq!(fortran_pieces(&"x".repeat(130)).len(), 3);
    }
}
