//! The timestamp clock: the TSC where the CPU has an invariant one (read through `quanta`),
//! calibrated to nanoseconds once, at start-up.
//!
//! # Time and clocks
//!
//! Sensors store raw ticks (a single `rdtsc`, the cheapest timestamp there is); local monitors
//! convert them to ns since the clock was first used in this process ("timestamp 0") when they
//! drain a ring. The trace header anchors timestamp 0 to wall-clock time.

use std::sync::OnceLock;

#[derive(Debug)]
pub(crate) struct Clock {
    pub(crate) q: quanta::Clock,
    /// Whether `q` reads the TSC: sensors then read it themselves, inlined, rather than through
    /// `quanta`'s (not inlined) dispatch over its clock sources.
    tsc: bool,
    pub(crate) start_raw: u64,
    pub(crate) start_unix_ns: u64,
}

static CLOCK: OnceLock<Clock> = OnceLock::new();

pub(crate) fn clock() -> &'static Clock {
    CLOCK.get_or_init(|| {
        let q = quanta::Clock::new();
        let start_raw = q.raw();
        // quanta's monotonic source counts ns; its TSC source ticks at another rate.
        let tsc = cfg!(target_arch = "x86_64") && q.delta_as_nanos(0, 1 << 40) != 1 << 40;
        let start_unix_ns = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        Clock {
            q,
            tsc,
            start_raw,
            start_unix_ns,
        }
    })
}

impl Clock {
    #[inline(always)]
    pub(crate) fn raw(&self) -> u64 {
        #[cfg(target_arch = "x86_64")]
        if self.tsc {
            // SAFETY: `rdtsc` exists on every x86_64 CPU and only reads the time-stamp counter;
            // it is the same instruction quanta's TSC source runs.
            return unsafe { std::arch::x86_64::_rdtsc() };
        }
        self.q.raw()
    }

    /// Raw ticks to ns since timestamp 0.
    #[inline]
    pub(crate) fn to_ns(&self, raw: u64) -> u64 {
        self.q.delta_as_nanos(self.start_raw, raw)
    }

    /// A tick count (a duration) to ns.
    #[inline]
    pub(crate) fn ticks_to_ns(&self, ticks: u64) -> u64 {
        self.q.delta_as_nanos(0, ticks)
    }

    pub(crate) fn now_ns(&self) -> u64 {
        self.to_ns(self.raw())
    }

    pub(crate) fn ticks_per_second(&self) -> f64 {
        let ns = self.ticks_to_ns(1 << 40);
        if ns == 0 {
            1e9
        } else {
            (1u64 << 40) as f64 * 1e9 / ns as f64
        }
    }

    /// `tsc` when ticks are not nanoseconds (quanta found an invariant TSC), else `monotonic`.
    pub(crate) fn source(&self) -> &'static str {
        if (self.ticks_per_second() - 1e9).abs() < 1e3 {
            "monotonic"
        } else {
            "tsc"
        }
    }
}

/// Nanoseconds since timestamp 0, the time base of every record.
pub fn now_ns() -> u64 {
    clock().now_ns()
}

/// One reading of the events' clock, for several events that happen at one instant (an MPI
/// call's begin and the message it sends): [`emit_at`](crate::sensor::emit_at) stamps an event
/// with it instead of reading the clock again, which costs as much as the rest of a sensor on
/// some machines (`rdtsc` takes about 16 ns on a virtual machine). Opaque, so that it always
/// comes from the clock every record is stamped with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Stamp(pub(crate) u64);

impl Stamp {
    /// The clock now.
    #[inline(always)]
    pub fn now() -> Stamp {
        Stamp(clock().raw())
    }
}
