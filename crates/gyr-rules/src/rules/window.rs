//! Windows: the last values of each numeric field a rule's window functions read, kept per
//! program, event type and group (the value of the rule's `per` field), and the built-in
//! window functions computed over them.
//!
//! A window is a ring of `f64`s as long as the largest `k` any rule uses on that field of that
//! type (so one ring serves every rule), at most [`MAX_WINDOW`]. The current event's value is
//! pushed before the rules run, so "the last k values" always include it. Groups are bounded
//! ([`MAX_GROUPS`] per program, type and `per` field): past it the least recently used group
//! is forgotten, and counted.
//!
//! Each function records what it saw in an [`Expl`] (a few numbers, no text), so that a
//! firing can say why without the cost of formatting when the condition is false.
//!
//! # Definitions
//!
//! Over the last `m = min(k, values present)` values `x[0..m]` (oldest first, `x[m-1]` the
//! current one):
//! - `dropped(f, n, k)`: `log10(max |x| / |x[m-1]|) >= n` (a current value of 0 below a
//!   non-zero maximum is infinitely many orders);
//! - `rose(f, n, k)`: `log10(|x[m-1]| / min |x|) >= n`, the minimum taken over non-zero
//!   magnitudes (none: false);
//! - `stalled(f, pct, k)`: false until `k` values are present; then
//!   `100 * (max x - min x) / mean |x| < pct` (all zero: stalled);
//! - `oscillates(f, k)`: false until `k` values are present; then, of the `k - 1` differences
//!   `x[i+1] - x[i]`, those that are not zero, taken in order, change sign at least `k / 2`
//!   times (integer division);
//! - `slope(f, k)`: the least-squares slope of `x` against the event index (per event; 0 with
//!   one value); `mean`, `min`, `max` over the `m` values;
//! - `last(f, k)`: the value `k` events back (`last(f, 0)` is the current one; `()` when the
//!   window holds fewer);
//! - `count(k)`: `min(k, events of this type seen for this program and group)`.
//!
//! A NaN among the values makes `dropped`, `rose` and `stalled` false.

/// Largest `k` a window function may use (values kept per field and group).
pub const MAX_WINDOW: usize = 10_000;
/// Most groups (values of a rule's `per` field) kept per program, event type and `per` field;
/// past it the least recently used is forgotten.
pub const MAX_GROUPS: usize = 10_000;

/// The last values of one field, newest last.
#[derive(Debug, Clone)]
pub(crate) struct Ring {
    buf: Vec<f64>,
    /// Where the next value goes.
    head: usize,
    len: usize,
}

impl Ring {
    pub(crate) fn new(cap: usize) -> Self {
        Ring {
            buf: vec![0.0; cap.max(1)],
            head: 0,
            len: 0,
        }
    }

    pub(crate) fn push(&mut self, x: f64) {
        self.buf[self.head] = x;
        self.head = (self.head + 1) % self.buf.len();
        self.len = (self.len + 1).min(self.buf.len());
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The value `back` events back (0: the newest).
    pub(crate) fn back(&self, back: usize) -> Option<f64> {
        (back < self.len).then(|| {
            let cap = self.buf.len();
            self.buf[(self.head + cap - 1 - back) % cap]
        })
    }

    /// The last `min(k, len)` values, oldest first, as two slices.
    pub(crate) fn last(&self, k: usize) -> (&[f64], &[f64]) {
        let m = k.min(self.len);
        let cap = self.buf.len();
        let start = (self.head + cap - m) % cap;
        if start + m <= cap {
            (&self.buf[start..start + m], &[])
        } else {
            (&self.buf[start..], &self.buf[..(start + m) - cap])
        }
    }

    /// The same values in a ring of capacity `cap` (the newest kept).
    pub(crate) fn resized(&self, cap: usize) -> Ring {
        let mut r = Ring::new(cap);
        let (a, b) = self.last(cap);
        a.iter().chain(b).for_each(|&x| r.push(x));
        r
    }
}

/// Which window function an [`Expl`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WinFn {
    Dropped,
    Rose,
    Stalled,
    Oscillates,
    Slope,
    Mean,
    Min,
    Max,
    Last,
}

impl WinFn {
    pub(crate) fn from_name(name: &str) -> Option<WinFn> {
        Some(match name {
            "dropped" => WinFn::Dropped,
            "rose" => WinFn::Rose,
            "stalled" => WinFn::Stalled,
            "oscillates" => WinFn::Oscillates,
            "slope" => WinFn::Slope,
            "mean" => WinFn::Mean,
            "min" => WinFn::Min,
            "max" => WinFn::Max,
            "last" => WinFn::Last,
            _ => return None,
        })
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            WinFn::Dropped => "dropped",
            WinFn::Rose => "rose",
            WinFn::Stalled => "stalled",
            WinFn::Oscillates => "oscillates",
            WinFn::Slope => "slope",
            WinFn::Mean => "mean",
            WinFn::Min => "min",
            WinFn::Max => "max",
            WinFn::Last => "last",
        }
    }

    /// Arguments: field name, then `(n | pct)` for some, then `k`.
    pub(crate) fn arity(self) -> usize {
        match self {
            WinFn::Dropped | WinFn::Rose | WinFn::Stalled => 3,
            _ => 2,
        }
    }

    /// Values the ring must hold for a call with this `k`.
    pub(crate) fn needs(self, k: usize) -> usize {
        match self {
            WinFn::Last => k + 1,
            _ => k,
        }
    }
}

/// What one built-in saw, for a firing's `why`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Expl {
    /// `dropped` / `rose`: from the extreme to the current value, `orders` orders of magnitude.
    Orders {
        f: WinFn,
        field: u32,
        n: f64,
        k: u32,
        from: f64,
        to: f64,
        orders: f64,
        values: u32,
        result: bool,
    },
    Stalled {
        field: u32,
        pct: f64,
        k: u32,
        change_pct: f64,
        values: u32,
        result: bool,
    },
    Oscillates {
        field: u32,
        k: u32,
        changes: u32,
        values: u32,
        result: bool,
    },
    /// `slope`, `mean`, `min`, `max`, `last`: the number it gave (NaN for `()`).
    Stat {
        f: WinFn,
        field: u32,
        k: u32,
        value: f64,
        values: u32,
    },
    Count {
        k: u32,
        value: i64,
    },
    Outside {
        x: f64,
        lo: f64,
        hi: f64,
        result: bool,
    },
    RelDiff {
        a: f64,
        b: f64,
        value: f64,
    },
}

/// Most explanations kept per evaluation (a condition with more calls explains the first).
pub(crate) const MAX_EXPLS: usize = 32;

fn short(x: f64) -> gyr_core::value::ShortFloat {
    let r = if x.is_finite() && x != 0.0 {
        // Four significant digits are what a user reads.
        let mag = 10f64.powi(3 - x.abs().log10().floor() as i32);
        if mag.is_finite() && mag > 0.0 {
            (x * mag).round() / mag
        } else {
            x
        }
    } else {
        x
    };
    gyr_core::value::ShortFloat(r)
}

impl Expl {
    /// The explanation in words; `fields` names the window's fields.
    pub(crate) fn describe(&self, fields: &[String]) -> String {
        let name = |i: u32| fields.get(i as usize).map_or("?", |s| s.as_str());
        match *self {
            Expl::Orders {
                f,
                field,
                n,
                k,
                from,
                to,
                orders,
                values,
                result,
            } => format!(
                "{}(\"{}\", {}, {k}): {} -> {} ({} orders) in {values} values{}",
                f.name(),
                name(field),
                short(n),
                short(from),
                short(to),
                if orders.is_infinite() {
                    "infinitely many".to_owned()
                } else {
                    format!("{:.2}", orders)
                },
                if result { "" } else { " (false)" }
            ),
            Expl::Stalled {
                field,
                pct,
                k,
                change_pct,
                values,
                result,
            } => format!(
                "stalled(\"{}\", {}, {k}): changed {}% in {values} values{}",
                name(field),
                short(pct),
                short(change_pct),
                if result { "" } else { " (false)" }
            ),
            Expl::Oscillates {
                field,
                k,
                changes,
                values,
                result,
            } => format!(
                "oscillates(\"{}\", {k}): {changes} sign changes in {values} values{}",
                name(field),
                if result { "" } else { " (false)" }
            ),
            Expl::Stat {
                f,
                field,
                k,
                value,
                values,
            } => {
                let v = if value.is_nan() && f == WinFn::Last {
                    "()".to_owned()
                } else {
                    short(value).to_string()
                };
                format!(
                    "{}(\"{}\", {k}) = {v} over {values} values",
                    f.name(),
                    name(field)
                )
            }
            Expl::Count { k, value } => format!("count({k}) = {value}"),
            Expl::Outside { x, lo, hi, result } => format!(
                "outside({}, {}, {}) = {result}",
                short(x),
                short(lo),
                short(hi)
            ),
            Expl::RelDiff { a, b, value } => {
                format!("rel_diff({}, {}) = {}", short(a), short(b), short(value))
            }
        }
    }
}

fn fold(ring: &Ring, k: usize, mut f: impl FnMut(f64)) -> usize {
    let (a, b) = ring.last(k);
    a.iter().chain(b).for_each(|&x| f(x));
    a.len() + b.len()
}

/// `dropped` and `rose`.
pub(crate) fn orders(f: WinFn, field: u32, ring: &Ring, n: f64, k: usize) -> (bool, Expl) {
    let cur = ring.back(0).unwrap_or(f64::NAN).abs();
    let mut nan = cur.is_nan();
    let mut extreme = if f == WinFn::Dropped {
        0.0f64
    } else {
        f64::INFINITY
    };
    let values = fold(ring, k, |x| {
        let m = x.abs();
        if m.is_nan() {
            nan = true;
        } else if f == WinFn::Dropped {
            extreme = extreme.max(m);
        } else if m > 0.0 {
            extreme = extreme.min(m);
        }
    });
    let orders = if f == WinFn::Dropped {
        if extreme == 0.0 {
            0.0
        } else {
            (extreme / cur).log10()
        }
    } else if extreme.is_infinite() || cur == 0.0 {
        0.0
    } else {
        (cur / extreme).log10()
    };
    let result = !nan && orders >= n;
    let from = if extreme.is_infinite() { 0.0 } else { extreme };
    (
        result,
        Expl::Orders {
            f,
            field,
            n,
            k: k as u32,
            from,
            to: cur,
            orders,
            values: values as u32,
            result,
        },
    )
}

/// `stalled`.
pub(crate) fn stalled(field: u32, ring: &Ring, pct: f64, k: usize) -> (bool, Expl) {
    let (mut lo, mut hi, mut sum_abs, mut nan) = (f64::INFINITY, f64::NEG_INFINITY, 0.0, false);
    let values = fold(ring, k, |x| {
        nan |= x.is_nan();
        lo = lo.min(x);
        hi = hi.max(x);
        sum_abs += x.abs();
    });
    let mean_abs = sum_abs / values.max(1) as f64;
    let change_pct = if values == 0 || mean_abs == 0.0 {
        0.0
    } else {
        100.0 * (hi - lo) / mean_abs
    };
    let result = values >= k && !nan && change_pct < pct;
    (
        result,
        Expl::Stalled {
            field,
            pct,
            k: k as u32,
            change_pct,
            values: values as u32,
            result,
        },
    )
}

/// `oscillates`.
pub(crate) fn oscillates(field: u32, ring: &Ring, k: usize) -> (bool, Expl) {
    let (mut prev, mut prev_sign, mut changes) = (None::<f64>, 0i8, 0u32);
    let values = fold(ring, k, |x| {
        if let Some(p) = prev {
            let d = x - p;
            let s = if d > 0.0 {
                1
            } else if d < 0.0 {
                -1
            } else {
                0
            };
            if s != 0 {
                if prev_sign != 0 && s != prev_sign {
                    changes += 1;
                }
                prev_sign = s;
            }
        }
        prev = Some(x);
    });
    let result = values >= k && k >= 2 && changes as usize >= k / 2;
    (
        result,
        Expl::Oscillates {
            field,
            k: k as u32,
            changes,
            values: values as u32,
            result,
        },
    )
}

/// `slope`, `mean`, `min`, `max`, `last` (NaN for `last` past the window: the caller gives
/// `()`).
pub(crate) fn stat(f: WinFn, field: u32, ring: &Ring, k: usize) -> (f64, Expl) {
    let (value, values) = match f {
        WinFn::Last => (ring.back(k).unwrap_or(f64::NAN), ring.len().min(k + 1)),
        WinFn::Mean => {
            let mut s = 0.0;
            let n = fold(ring, k, |x| s += x);
            (if n == 0 { f64::NAN } else { s / n as f64 }, n)
        }
        WinFn::Min => {
            let mut m = f64::INFINITY;
            let n = fold(ring, k, |x| m = m.min(x));
            (if n == 0 { f64::NAN } else { m }, n)
        }
        WinFn::Max => {
            let mut m = f64::NEG_INFINITY;
            let n = fold(ring, k, |x| m = m.max(x));
            (if n == 0 { f64::NAN } else { m }, n)
        }
        _ => {
            // Least squares of x against i = 0..n.
            let (mut sx, mut sy, mut sxx, mut sxy, mut i) = (0.0, 0.0, 0.0, 0.0, 0.0);
            let n = fold(ring, k, |y| {
                sx += i;
                sy += y;
                sxx += i * i;
                sxy += i * y;
                i += 1.0;
            });
            let nf = n as f64;
            let den = nf * sxx - sx * sx;
            (
                if n < 2 || den == 0.0 {
                    0.0
                } else {
                    (nf * sxy - sx * sy) / den
                },
                n,
            )
        }
    };
    (
        value,
        Expl::Stat {
            f,
            field,
            k: k as u32,
            value,
            values: values as u32,
        },
    )
}

/// `outside(x, lo, hi)`.
pub(crate) fn outside(x: f64, lo: f64, hi: f64) -> (bool, Expl) {
    let result = x < lo || x > hi;
    (result, Expl::Outside { x, lo, hi, result })
}

/// `rel_diff(a, b)`: `|a - b| / max(|a|, |b|)`, 0 when both are 0.
pub(crate) fn rel_diff(a: f64, b: f64) -> (f64, Expl) {
    let m = a.abs().max(b.abs());
    let value = if m == 0.0 { 0.0 } else { (a - b).abs() / m };
    (value, Expl::RelDiff { a, b, value })
}

/// A group's key: the value of the rule's `per` field (or none).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum GroupKey {
    All,
    Int(i64),
    UInt(u64),
    /// A float's bits.
    Float(u64),
    Bool(bool),
    Str(String),
    /// Bytes and arrays, as their text.
    Other(String),
}

impl GroupKey {
    pub(crate) fn of(v: &gyr_core::Value) -> GroupKey {
        use gyr_core::Value;
        match v {
            Value::Int(i) => GroupKey::Int(*i),
            Value::UInt(u) => GroupKey::UInt(*u),
            Value::Float(x) => GroupKey::Float(x.to_bits()),
            Value::Bool(b) => GroupKey::Bool(*b),
            Value::Str(s) => GroupKey::Str(s.clone()),
            other => GroupKey::Other(other.to_string()),
        }
    }

    /// Whether `v` is this key, without building one.
    pub(crate) fn is(&self, v: &gyr_core::Value) -> bool {
        use gyr_core::Value;
        match (self, v) {
            (GroupKey::Int(a), Value::Int(b)) => a == b,
            (GroupKey::UInt(a), Value::UInt(b)) => a == b,
            (GroupKey::Float(a), Value::Float(b)) => *a == b.to_bits(),
            (GroupKey::Bool(a), Value::Bool(b)) => a == b,
            (GroupKey::Str(a), Value::Str(b)) => a == b,
            _ => false,
        }
    }
}

/// The windows of one group, with the rules' episode state in it.
#[derive(Debug, Clone)]
pub(crate) struct Group {
    pub(crate) key: GroupKey,
    /// One ring per field of the partition, in the partition's order.
    pub(crate) rings: Vec<Ring>,
    /// Events seen.
    pub(crate) seen: u64,
    /// Per rule of the partition: its condition was true at the last evaluation.
    pub(crate) active: Vec<bool>,
    pub(crate) last_used: u64,
}

/// The groups of one program for one partition (event type and `per` field).
#[derive(Debug, Clone, Default)]
pub(crate) struct Groups {
    pub(crate) slab: Vec<Group>,
    index: std::collections::HashMap<GroupKey, usize>,
    tick: u64,
    /// The slot the last event used, tried first (events of one group tend to come together).
    last: Option<usize>,
    /// Groups forgotten to stay within [`MAX_GROUPS`].
    pub(crate) forgotten: u64,
}

impl Groups {
    /// The group for `key` (`None`: the partition has no `per`), created if new.
    pub(crate) fn find(
        &mut self,
        key: Option<&gyr_core::Value>,
        caps: &[usize],
        rules: usize,
    ) -> usize {
        self.tick += 1;
        let tick = self.tick;
        if let Some(i) = self.last {
            let g = &self.slab[i];
            let hit = match key {
                None => g.key == GroupKey::All,
                Some(v) => g.key.is(v),
            };
            if hit {
                self.slab[i].last_used = tick;
                return i;
            }
        }
        let k = key.map_or(GroupKey::All, GroupKey::of);
        if let Some(&i) = self.index.get(&k) {
            self.slab[i].last_used = tick;
            self.last = Some(i);
            return i;
        }
        let group = Group {
            key: k.clone(),
            rings: caps.iter().map(|&c| Ring::new(c)).collect(),
            seen: 0,
            active: vec![false; rules],
            last_used: tick,
        };
        let i = if self.slab.len() >= MAX_GROUPS {
            // Forget the least recently used group and reuse its slot.
            let (i, _) = self
                .slab
                .iter()
                .enumerate()
                .min_by_key(|(_, g)| g.last_used)
                .expect("MAX_GROUPS is not 0");
            self.index.remove(&self.slab[i].key);
            self.forgotten += 1;
            self.slab[i] = group;
            i
        } else {
            self.slab.push(group);
            self.slab.len() - 1
        };
        self.index.insert(k, i);
        self.last = Some(i);
        i
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ring(xs: &[f64], cap: usize) -> Ring {
        let mut r = Ring::new(cap);
        xs.iter().for_each(|&x| r.push(x));
        r
    }

    #[test]
    fn the_ring_keeps_the_newest_values_in_order() {
        let r = ring(&[1.0, 2.0, 3.0, 4.0, 5.0], 3);
        let (a, b) = r.last(3);
        assert_eq!([a, b].concat(), vec![3.0, 4.0, 5.0]);
        let (a, b) = r.last(2);
        assert_eq!([a, b].concat(), vec![4.0, 5.0]);
        assert_eq!(r.back(0), Some(5.0));
        assert_eq!(r.back(2), Some(3.0));
        assert_eq!(r.back(3), None);
        let big = r.resized(5);
        let (a, b) = big.last(5);
        assert_eq!([a, b].concat(), vec![3.0, 4.0, 5.0]);
    }

    #[test]
    fn dropped_counts_orders_from_the_window_maximum() {
        // max 1e-1, current 1e-4: 3 orders.
        let r = ring(&[1e-2, 1e-1, 1e-2, 1e-3, 1e-4], 10);
        let (yes, e) = orders(WinFn::Dropped, 0, &r, 3.0, 5);
        assert!(yes, "{e:?}");
        let Expl::Orders {
            orders: o, from, ..
        } = e
        else {
            panic!()
        };
        assert!((o - 3.0).abs() < 1e-12);
        assert_eq!(from, 1e-1);
        // Within the last 3 values only 1e-2 -> 1e-4: 2 orders.
        assert!(!orders(WinFn::Dropped, 0, &r, 3.0, 3).0);
        assert!(orders(WinFn::Dropped, 0, &r, 2.0, 3).0);
        // A current value of zero is infinitely many orders below.
        assert!(orders(WinFn::Dropped, 0, &ring(&[1.0, 0.0], 4), 10.0, 4).0);
    }

    #[test]
    fn rose_counts_orders_from_the_window_minimum() {
        let r = ring(&[3.1e-5, 1e-5, 4.2e-3], 20);
        let (yes, e) = orders(WinFn::Rose, 0, &r, 2.0, 20);
        assert!(yes);
        let Expl::Orders { orders: o, .. } = e else {
            panic!()
        };
        assert!((o - (4.2e-3f64 / 1e-5).log10()).abs() < 1e-12);
        assert!(!orders(WinFn::Rose, 0, &r, 3.0, 20).0);
        // Zeros are ignored for the minimum; a window of zeros never rose.
        assert!(!orders(WinFn::Rose, 0, &ring(&[0.0, 0.0], 4), 1.0, 4).0);
        // NaN: false.
        assert!(!orders(WinFn::Rose, 0, &ring(&[1e-5, f64::NAN, 1.0], 4), 1.0, 4).0);
    }

    #[test]
    fn stalled_needs_k_values_and_a_small_relative_change() {
        let r = ring(&[10.0, 10.1, 10.05, 10.0], 8);
        // change 0.1 over mean |x| 10.0375: 0.996 %.
        assert!(!stalled(0, &r, 1.0, 5).0, "only 4 values");
        let (yes, e) = stalled(0, &r, 1.0, 4);
        assert!(yes, "{e:?}");
        let Expl::Stalled { change_pct, .. } = e else {
            panic!()
        };
        assert!((change_pct - 100.0 * 0.1 / 10.0375).abs() < 1e-9);
        assert!(!stalled(0, &r, 0.5, 4).0);
        assert!(stalled(0, &ring(&[0.0, 0.0, 0.0], 3), 1.0, 3).0);
    }

    #[test]
    fn oscillates_counts_sign_changes_of_the_differences() {
        // differences + - + - + : 4 changes over 6 values; k/2 = 3.
        let r = ring(&[0.0, 1.0, 0.0, 1.0, 0.0, 1.0], 6);
        let (yes, e) = oscillates(0, &r, 6);
        assert!(yes);
        assert!(matches!(e, Expl::Oscillates { changes: 4, .. }));
        // monotone: no change.
        assert!(!oscillates(0, &ring(&[1.0, 2.0, 3.0, 4.0], 4), 4).0);
        // zero differences are skipped: + 0 - : one change, k/2 = 2.
        let (yes, e) = oscillates(0, &ring(&[0.0, 1.0, 1.0, 0.0], 4), 4);
        assert!(!yes);
        assert!(matches!(e, Expl::Oscillates { changes: 1, .. }));
        // fewer than k values: false.
        assert!(!oscillates(0, &ring(&[0.0, 1.0, 0.0], 4), 4).0);
    }

    #[test]
    fn statistics_over_the_window() {
        let r = ring(&[5.0, 1.0, 2.0, 3.0, 4.0], 8);
        assert_eq!(stat(WinFn::Mean, 0, &r, 4).0, 2.5);
        assert_eq!(stat(WinFn::Min, 0, &r, 4).0, 1.0);
        assert_eq!(stat(WinFn::Max, 0, &r, 4).0, 4.0);
        assert_eq!(stat(WinFn::Max, 0, &r, 5).0, 5.0);
        assert_eq!(stat(WinFn::Slope, 0, &r, 4).0, 1.0);
        // 5,1,2,3,4 against 0..5: slope = (5*sxy - sx*sy)/(5*sxx - sx^2) = (5*30-10*15)/(5*30-100) = 0.
        assert_eq!(stat(WinFn::Slope, 0, &r, 5).0, 0.0);
        assert_eq!(stat(WinFn::Slope, 0, &ring(&[7.0], 2), 2).0, 0.0);
        assert_eq!(stat(WinFn::Last, 0, &r, 0).0, 4.0);
        assert_eq!(stat(WinFn::Last, 0, &r, 4).0, 5.0);
        assert!(stat(WinFn::Last, 0, &r, 5).0.is_nan());
    }

    #[test]
    fn outside_and_rel_diff() {
        assert!(outside(1.5, 0.0, 1.0).0);
        assert!(!outside(1.0, 0.0, 1.0).0);
        assert!(outside(-0.1, 0.0, 1.0).0);
        assert_eq!(rel_diff(10.0, 8.0).0, 0.2);
        assert_eq!(rel_diff(-2.0, 2.0).0, 2.0);
        assert_eq!(rel_diff(0.0, 0.0).0, 0.0);
    }

    #[test]
    fn explanations_read_as_the_call() {
        let r = ring(&[3.1e-5, 4.2e-3], 20);
        let (_, e) = orders(WinFn::Rose, 0, &r, 2.0, 20);
        assert_eq!(
            e.describe(&["rho".to_owned()]),
            "rose(\"rho\", 2, 20): 3.1e-5 -> 0.0042 (2.13 orders) in 2 values"
        );
    }

    #[test]
    fn groups_are_bounded_and_the_least_recently_used_goes() {
        let mut g = Groups::default();
        for i in 0..MAX_GROUPS as i64 {
            g.find(Some(&gyr_core::Value::Int(i)), &[1], 0);
        }
        // Touch group 0 so that group 1 is the oldest.
        let zero = g.find(Some(&gyr_core::Value::Int(0)), &[1], 0);
        let new = g.find(Some(&gyr_core::Value::Int(-1)), &[1], 0);
        assert_eq!(g.forgotten, 1);
        assert_eq!(g.slab.len(), MAX_GROUPS);
        assert_ne!(new, zero);
        assert_eq!(g.find(Some(&gyr_core::Value::Int(0)), &[1], 0), zero);
        assert_eq!(g.forgotten, 1);
        g.find(Some(&gyr_core::Value::Int(1)), &[1], 0);
        assert_eq!(g.forgotten, 2, "group 1 had been forgotten");
    }
}
