#![doc = include_str!("../README.md")]
#![warn(missing_debug_implementations, rust_2018_idioms)]

pub mod causal_stream;
pub mod clock;
pub mod export;
pub mod import;
pub mod info;
pub mod merge;
pub mod order;
pub mod perturbation;
pub mod sync_events;
pub mod timeline;

pub use causal_stream::{CausalStream, Released};
pub use clock::{
    ClockCorrection, ClockError, ClockOptions, ClockReport, LinearClock, estimate_files,
};
pub use export::{Format, Options, Report, export, export_files};
pub use import::{ImportError, ImportFormat, ImportReport};
pub use info::TraceInfo;
pub use merge::{Merge, MergedRecord};
pub use order::{Event, Need, OrderFilter, OrderSizes, OrderStats, Stall, SyncEvent};
pub use perturbation::{CorrectionStats, Corrector};
pub use sync_events::{SyncDecoder, ViewEvent, WaitOn};
pub use timeline::{
    Arrow, ArrowKind, Forgotten, Run, Segment, State, Tile, Timeline, TimelineSizes,
};

/// Imports `input` (in `format`) into a gyr trace written to `out`; `source` names the input
/// in the trace's header when the input has no header of its own.
pub fn import<R: std::io::Read, W: std::io::Write>(
    format: ImportFormat,
    input: R,
    out: W,
    source: &str,
) -> Result<(W, ImportReport), ImportError> {
    match format {
        ImportFormat::SddfAscii => import::sddf::import_ascii(input, out, source),
        ImportFormat::SddfBinary => import::sddf::import_binary(input, out, source),
        ImportFormat::Picl => import::picl::import(input, out, source),
    }
}
