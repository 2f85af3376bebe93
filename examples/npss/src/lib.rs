//! The NPSS example's programs: an engine cycle model ([`cycle`]) and the slower component code
//! it zooms into ([`compressor`]), joined by the component map ([`map`]). Neither program knows
//! gyr: they print residuals, write tables and read control files the way production codes do,
//! and gyr watches them from outside (`gyr watchdog`), warns and steers them with rules, and runs
//! the component code as an ensemble to build the cycle's map (`gyr ensemble`).

pub mod compressor;
pub mod cycle;
pub mod input;
pub mod map;
