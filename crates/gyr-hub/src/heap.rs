//! The hub's heap, kept from creeping: a hub runs for days, and what it allocates most are
//! event batches of tens to hundreds of KiB that live a few milliseconds (decoded, fanned out
//! to pages, subscribers and the recorder, then dropped).
//!
//! glibc's malloc serves blocks above its mmap threshold with `mmap`, and returns them to the
//! system on free; but it raises that threshold each time such a block is freed, so after the
//! first large batches they come from the arenas instead, and a peak in the queues leaves
//! the arenas fragmented: the 5-minute soak (`gyr-bench soak --minutes 5`) saw the hub's RSS
//! grow 6–10 MB that way. Fixing the threshold at 128 KiB (glibc's default starting point)
//! stops the adjustment; the same soak then holds the hub within about 1 MB, at the cost of
//! one `mmap`/`munmap` pair per large batch (some hundreds a second at 1M events/s).

/// Fixes the mmap threshold (see the module's doc); the first call does it, later ones
/// nothing. A no-op but on glibc.
pub(crate) fn bound_growth() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        {
            // SAFETY: mallopt only sets a tunable of the allocator, which glibc guards with the
            // arenas' own locks; it reads no memory of ours and is safe from any thread.
            // glibc accepts any threshold up to 32 MiB; were it refused, the hub would only
            // use more memory, so there is nothing to report.
            let _ = unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD) };
        }
    });
}

/// Blocks at least this big are mapped, and unmapped when freed.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const MMAP_THRESHOLD: libc::c_int = 128 * 1024;

#[cfg(test)]
mod tests {
    /// The call succeeds, repeats harmlessly, and large blocks still allocate and free.
    #[test]
    fn bound_growth_is_idempotent_and_allocation_still_works() {
        super::bound_growth();
        super::bound_growth();
        let threads: Vec<_> = (0..4)
            .map(|t| {
                std::thread::spawn(move || {
                    for i in 0..200usize {
                        let v = vec![t as u8; 64 * 1024 + i * 1024];
                        assert_eq!(v[v.len() - 1], t as u8);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
    }

    /// The threshold is really applied: glibc reports it through `mallinfo2`'s mapped
    /// bytes, which a block above the threshold raises while it lives.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn large_blocks_are_mapped_after_bound_growth() {
        super::bound_growth();
        // Free one big block first: without the fix this would raise the threshold above it.
        drop(vec![1u8; 4 << 20]);
        // Other tests free mapped blocks concurrently, which can hide one rise: try a few times.
        let mut seen = Vec::new();
        for _ in 0..5 {
            // SAFETY: mallinfo2 only reads the allocator's counters.
            let before = unsafe { libc::mallinfo2() }.hblkhd;
            let big = std::hint::black_box(vec![2u8; 1 << 20]);
            // SAFETY: as above.
            let during = unsafe { libc::mallinfo2() }.hblkhd;
            drop(big);
            if during >= before + (1 << 20) {
                return;
            }
            seen.push((before, during));
        }
        panic!("a 1 MiB block was never mapped (mapped bytes before, during: {seen:?})");
    }
}
