//! Turning measurements into the figures the benchmarks print.

/// The `p` quantile (0..=1) of `v`, sorting it; NaN when empty.
pub(crate) fn percentile(v: &mut [f64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

/// The median of `v`, sorting it: the mean of the two middle values for an even count; NaN
/// when empty.
pub(crate) fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// Rounded to three decimals, for the JSON line.
pub(crate) fn r3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}
