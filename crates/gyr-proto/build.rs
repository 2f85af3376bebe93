//! Compiles the `.proto` files with the pure-Rust `protox`, so that building needs no `protoc`,
//! and keeps their descriptor set (with comments) for server reflection and for tools.

use prost::Message;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto");
    let fds = protox::compile(["gyr/v1/service.proto"], ["proto"])?;
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(out.join("gyr_v1.binpb"), fds.encode_to_vec())?;
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        // Record blocks are shared, not copied, when a hub fans one batch out to many clients.
        .bytes(".gyr.v1.RecordBlock.records")
        .compile_fds(fds)?;
    // OTLP (feature `otlp`, for `gyr trace export --format otlp`): the collector's trace and
    // logs services, vendored from opentelemetry-proto 1.10 (Apache-2.0, `proto/opentelemetry`,
    // LICENSE beside them).
    if std::env::var_os("CARGO_FEATURE_OTLP").is_some() {
        let otlp = protox::compile(
            [
                "opentelemetry/proto/collector/trace/v1/trace_service.proto",
                "opentelemetry/proto/collector/logs/v1/logs_service.proto",
            ],
            ["proto"],
        )?;
        tonic_prost_build::configure()
            .build_server(true)
            .build_client(true)
            .compile_fds(otlp)?;
    }
    Ok(())
}
