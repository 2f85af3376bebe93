//! The checked-in C header `include/gyr.h` is what cbindgen makes of this crate now: the test
//! fails when it is stale, and `GYR_BLESS=1` writes it again.

use std::path::Path;

#[test]
fn header_is_current() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(dir.join("cbindgen.toml")).expect("cbindgen.toml");
    let bindings = cbindgen::Builder::new()
        .with_crate(dir)
        .with_config(config)
        .generate()
        .expect("cbindgen reads the crate");
    let mut fresh = Vec::new();
    bindings.write(&mut fresh);
    let path = dir.join("include/gyr.h");
    if std::env::var_os("GYR_BLESS").is_some() {
        std::fs::write(&path, &fresh).unwrap();
        return;
    }
    let current = std::fs::read(&path).unwrap_or_default();
    assert!(
        current == fresh,
        "crates/gyr-ffi/include/gyr.h is stale: run `GYR_BLESS=1 cargo test -p gyr-ffi --test header` and commit it"
    );
}
