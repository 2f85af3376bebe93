//! `gyr api`: what a client written without gyr needs of its gRPC API, for tools that take a
//! descriptor file instead of asking the server by reflection (grpcurl `-protoset`, Postman,
//! `buf`), and for releases to ship beside the binary.

use crate::Failure;
use anyhow::{Context, anyhow};
use std::io::{IsTerminal, Write};
use std::path::Path;
use std::process::ExitCode;

/// Writes `gyr.v1`'s encoded `FileDescriptorSet` (imports and comments included) to `output`,
/// or to standard output for `-`, unless that is a terminal.
pub(crate) fn descriptor_set(output: &Path) -> Result<ExitCode, Failure> {
    let bytes = gyr_proto::FILE_DESCRIPTOR_SET;
    if output == Path::new("-") {
        let mut out = std::io::stdout().lock();
        if out.is_terminal() {
            return Err(Failure::input(anyhow!(
                "the descriptor set is binary: write it to a file (`-o gyr.binpb`) or a pipe"
            )));
        }
        out.write_all(bytes)?;
        out.flush()?;
        return Ok(ExitCode::SUCCESS);
    }
    std::fs::write(output, bytes)
        .with_context(|| format!("cannot write the descriptor set to {}", output.display()))?;
    eprintln!(
        "{}: gyr.v1's descriptor set ({} bytes), for grpcurl -protoset and the like",
        output.display(),
        bytes.len()
    );
    Ok(ExitCode::SUCCESS)
}
