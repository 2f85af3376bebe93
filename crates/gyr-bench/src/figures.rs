//! Turning measurements into the figures the benchmarks print.

/// The `p` quantile (0..=1) of `v`, sorting it; NaN when empty.
pub(crate) fn percentile(v: &mut [f64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

/// Rounded to three decimals, for the JSON line.
pub(crate) fn r3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}
