//! The molecular dynamics itself, apart from steering: the periodic box and its cell grid, the
//! deterministic imbalanced initial state, and the per-domain particle store with the velocity
//! Verlet and Lennard-Jones kernels each domain thread runs on its own particles.
//!
//! Reduced units throughout (σ = ε = m = k_B = 1). The potential is cut at [`CUTOFF`] and
//! shifted so the energy is continuous there.

use std::ops::Range;

/// Interaction cutoff, in σ.
pub const CUTOFF: f64 = 2.5;
const CUTOFF2: f64 = CUTOFF * CUTOFF;
/// Density of the packed block the particles start in (a triangular lattice near the
/// Lennard-Jones minimum, so it neither explodes nor collapses).
pub const BLOCK_DENSITY: f64 = 0.8;
/// Share of the particles that start in the block; the rest start as a sparse gas.
pub const BLOCK_SHARE: f64 = 0.95;

/// `4 (rc⁻¹² − rc⁻⁶)`: subtracted from every pair energy so the potential is 0 at the cutoff.
fn energy_shift() -> f64 {
    let ir6 = 1.0 / CUTOFF2.powi(3);
    4.0 * ir6 * (ir6 - 1.0)
}

/// The periodic box and its grid of cells at least [`CUTOFF`] wide, numbered column by column
/// (`column * rows + row`) so a vertical slab owns a contiguous run of cells.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Grid {
    pub(crate) width: f64,
    pub(crate) height: f64,
    pub(crate) columns: usize,
    pub(crate) rows: usize,
    cell_w: f64,
    cell_h: f64,
}

impl Grid {
    /// The grid for a `width` × `height` box; needs three cells a side so that the nine
    /// neighbour cells of a cell are distinct under the periodic wrap.
    pub(crate) fn new(width: f64, height: f64) -> Result<Grid, String> {
        let columns = (width / CUTOFF).floor();
        let rows = (height / CUTOFF).floor();
        if !(columns >= 3.0 && rows >= 3.0 && width.is_finite() && height.is_finite()) {
            return Err(format!(
                "the box must be at least {} σ on each side (3 cutoffs), got {width} × {height}",
                3.0 * CUTOFF
            ));
        }
        Ok(Grid {
            width,
            height,
            columns: columns as usize,
            rows: rows as usize,
            cell_w: width / columns,
            cell_h: height / rows,
        })
    }

    fn column(&self, x: f64) -> usize {
        ((x / self.cell_w) as usize).min(self.columns - 1)
    }

    fn row(&self, y: f64) -> usize {
        ((y / self.cell_h) as usize).min(self.rows - 1)
    }
}

/// Puts `v` back into `[0, l)`.
fn wrap(v: f64, l: f64) -> f64 {
    let w = v.rem_euclid(l);
    // rem_euclid of a tiny negative number rounds to `l` itself.
    if w >= l { 0.0 } else { w }
}

/// The domain that owns position `x`: domain `k` holds `b_k <= x < b_{k+1}`.
pub(crate) fn owner(boundaries: &[f64], x: f64) -> usize {
    boundaries.partition_point(|&b| b <= x)
}

/// A particle on its way from one domain to another.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Moving {
    pos: [f64; 2],
    vel: [f64; 2],
    acc: [f64; 2],
}

/// A particle's position and velocity.
pub(crate) type PosVel = ([f64; 2], [f64; 2]);

/// SplitMix64: a fixed, seed-free source of initial velocities, so every run starts alike.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn unit(z: u64) -> f64 {
    (z >> 11) as f64 / (1u64 << 53) as f64 - 0.5
}

/// Positions and velocities of `n` particles in the box: [`BLOCK_SHARE`] of them packed in a
/// block spanning the box's height near its left edge, the rest a sparse gas to its right,
/// with velocities for `temperature` and no net momentum.
pub(crate) fn initial_state(
    n: usize,
    width: f64,
    height: f64,
    temperature: f64,
) -> Result<Vec<PosVel>, String> {
    let in_block = ((n as f64 * BLOCK_SHARE).round() as usize).min(n);
    let in_gas = n - in_block;
    // A triangular lattice: rows `h` apart (an even number of them, so it wraps in y), sites
    // `a` apart along each row, every other row shifted by a/2.
    let ideal_h = (2.0 / (3f64.sqrt() * BLOCK_DENSITY)).sqrt() * 3f64.sqrt() / 2.0;
    let rows = (((height / ideal_h) / 2.0).round() as usize * 2).max(2);
    let h = height / rows as f64;
    let a = 1.0 / (BLOCK_DENSITY * h);
    let x0 = 0.02 * width;
    let block_w = in_block.div_ceil(rows) as f64 * a;
    let gas_x0 = x0 + block_w + 2.0;
    let gas_x1 = 0.98 * width;
    if x0 + block_w > 0.6 * width {
        return Err(format!(
            "{in_block} particles at density {BLOCK_DENSITY} need a block {block_w:.1} σ wide, more than 60% of the box width {width}"
        ));
    }
    let mut out = Vec::with_capacity(n);
    for k in 0..in_block {
        let (col, row) = ((k / rows) as f64, k % rows);
        let shift = if row % 2 == 1 { 0.5 } else { 0.0 };
        out.push([x0 + (col + 0.25 + shift) * a, (row as f64 + 0.5) * h]);
    }
    if in_gas > 0 {
        let gw = gas_x1 - gas_x0;
        let cols = ((in_gas as f64 * gw / height).sqrt().ceil() as usize).max(1);
        let grows = in_gas.div_ceil(cols);
        let (sx, sy) = (gw / cols as f64, height / grows as f64);
        if sx.min(sy) < 1.0 {
            return Err(format!(
                "no room for a gas of {in_gas} particles beside the block: make the box larger"
            ));
        }
        for k in 0..in_gas {
            let (c, r) = ((k % cols) as f64, (k / cols) as f64);
            out.push([gas_x0 + (c + 0.5) * sx, (r + 0.5) * sy]);
        }
    }
    let mut vel: Vec<[f64; 2]> = (0..n as u64)
        .map(|i| [unit(mix(2 * i)), unit(mix(2 * i + 1))])
        .collect();
    if n > 1 {
        let mean = vel.iter().fold([0.0; 2], |m, v| [m[0] + v[0], m[1] + v[1]]);
        let mean = [mean[0] / n as f64, mean[1] / n as f64];
        let mut kinetic = 0.0;
        for v in &mut vel {
            v[0] -= mean[0];
            v[1] -= mean[1];
            kinetic += 0.5 * (v[0] * v[0] + v[1] * v[1]);
        }
        // 2 (n − 1) degrees of freedom once the momentum is removed.
        let scale = (temperature * (n - 1) as f64 / kinetic).sqrt();
        for v in &mut vel {
            v[0] *= scale;
            v[1] *= scale;
        }
    } else {
        vel.iter_mut().for_each(|v| *v = [0.0; 2]);
    }
    Ok(out
        .into_iter()
        .map(|p| [wrap(p[0], width), wrap(p[1], height)])
        .zip(vel)
        .collect())
}

/// The particles one domain owns, sorted by cell, with what its thread measured last step.
#[derive(Debug, Default)]
pub(crate) struct Domain {
    pub(crate) pos: Vec<[f64; 2]>,
    pub(crate) vel: Vec<[f64; 2]>,
    pub(crate) acc: Vec<[f64; 2]>,
    /// The first grid column holding one of its particles.
    first_column: usize,
    /// Where each cell's particles start in `pos`, for the cells from `first_column` on
    /// (plus one past the end); empty while the domain has no particles.
    cell_start: Vec<u32>,
    /// Seconds the thread worked (not waited) in the last step.
    pub(crate) seconds: f64,
    /// Kinetic energy of its particles after the last step.
    pub(crate) kinetic: f64,
    /// Its particles' share of the potential energy (half of each pair).
    pub(crate) potential: f64,
}

/// Per-thread buffers kept from step to step so that steps allocate nothing.
#[derive(Debug, Default)]
pub(crate) struct Scratch {
    leaving: Vec<Vec<Moving>>,
    keys: Vec<u32>,
    next: Vec<u32>,
    pos: Vec<[f64; 2]>,
    vel: Vec<[f64; 2]>,
    acc: Vec<[f64; 2]>,
    /// For each grid column, the range of domains with particles in it.
    column_domains: Vec<(usize, usize)>,
    pub(crate) new_acc: Vec<[f64; 2]>,
}

impl Domain {
    /// Adds a particle at rest in the force field (its acceleration is computed next step).
    pub(crate) fn push(&mut self, pos: [f64; 2], vel: [f64; 2]) {
        self.pos.push(pos);
        self.vel.push(vel);
        self.acc.push([0.0; 2]);
    }

    /// The first and last grid columns holding its particles.
    fn columns(&self, grid: &Grid) -> Option<(usize, usize)> {
        (!self.cell_start.is_empty()).then(|| {
            let n = (self.cell_start.len() - 1) / grid.rows;
            (self.first_column, self.first_column + n - 1)
        })
    }

    /// Indices in `pos` of the particles in grid cell `cell`, which must lie in its columns.
    fn cell(&self, grid: &Grid, cell: usize) -> Range<usize> {
        let i = cell - self.first_column * grid.rows;
        self.cell_start[i] as usize..self.cell_start[i + 1] as usize
    }

    /// Velocity Verlet's first half: half a kick with the old forces, then a full drift.
    pub(crate) fn kick_drift(&mut self, dt: f64, grid: &Grid) {
        for ((p, v), a) in self.pos.iter_mut().zip(&mut self.vel).zip(&self.acc) {
            v[0] += 0.5 * dt * a[0];
            v[1] += 0.5 * dt * a[1];
            p[0] = wrap(p[0] + dt * v[0], grid.width);
            p[1] = wrap(p[1] + dt * v[1], grid.height);
        }
    }

    /// Velocity Verlet's second half, with the new forces; also measures the kinetic energy.
    pub(crate) fn kick(&mut self, dt: f64) {
        let mut kinetic = 0.0;
        for (v, a) in self.vel.iter_mut().zip(&self.acc) {
            v[0] += 0.5 * dt * a[0];
            v[1] += 0.5 * dt * a[1];
            kinetic += 0.5 * (v[0] * v[0] + v[1] * v[1]);
        }
        self.kinetic = kinetic;
    }

    /// Moves the particles no longer in slab `me` (by `boundaries`) to their new domains'
    /// slots of `outbox` (`from * domains + to`).
    pub(crate) fn send_leavers(
        &mut self,
        me: usize,
        boundaries: &[f64],
        outbox: &[gyr::sync::Mutex<Vec<Moving>>],
        scratch: &mut Scratch,
    ) {
        let domains = boundaries.len() + 1;
        scratch.leaving.resize_with(domains, Vec::new);
        for i in (0..self.pos.len()).rev() {
            let to = owner(boundaries, self.pos[i][0]);
            if to != me {
                scratch.leaving[to].push(Moving {
                    pos: self.pos.swap_remove(i),
                    vel: self.vel.swap_remove(i),
                    acc: self.acc.swap_remove(i),
                });
            }
        }
        for (to, list) in scratch.leaving.iter_mut().enumerate() {
            if !list.is_empty() {
                lock(&outbox[me * domains + to]).append(list);
            }
        }
    }

    /// Takes in the particles other domains sent to `me`, in domain order (so runs repeat).
    pub(crate) fn receive(
        &mut self,
        me: usize,
        domains: usize,
        outbox: &[gyr::sync::Mutex<Vec<Moving>>],
    ) {
        for from in 0..domains {
            for m in lock(&outbox[from * domains + me]).drain(..) {
                self.pos.push(m.pos);
                self.vel.push(m.vel);
                self.acc.push(m.acc);
            }
        }
    }

    /// Sorts its particles by cell (a stable counting sort) and indexes the cells.
    pub(crate) fn bin(&mut self, grid: &Grid, scratch: &mut Scratch) {
        self.cell_start.clear();
        if self.pos.is_empty() {
            return;
        }
        let (mut lo, mut hi) = (usize::MAX, 0);
        for p in &self.pos {
            let c = grid.column(p[0]);
            lo = lo.min(c);
            hi = hi.max(c);
        }
        self.first_column = lo;
        let base = lo * grid.rows;
        self.cell_start.resize((hi - lo + 1) * grid.rows + 1, 0);
        scratch.keys.clear();
        for p in &self.pos {
            let k = (grid.column(p[0]) * grid.rows + grid.row(p[1]) - base) as u32;
            scratch.keys.push(k);
            self.cell_start[k as usize + 1] += 1;
        }
        for i in 1..self.cell_start.len() {
            self.cell_start[i] += self.cell_start[i - 1];
        }
        scratch.next.clear();
        scratch.next.extend_from_slice(&self.cell_start);
        let n = self.pos.len();
        scratch.pos.resize(n, [0.0; 2]);
        scratch.vel.resize(n, [0.0; 2]);
        scratch.acc.resize(n, [0.0; 2]);
        for (i, &k) in scratch.keys.iter().enumerate() {
            let to = scratch.next[k as usize] as usize;
            scratch.next[k as usize] += 1;
            scratch.pos[to] = self.pos[i];
            scratch.vel[to] = self.vel[i];
            scratch.acc[to] = self.acc[i];
        }
        std::mem::swap(&mut self.pos, &mut scratch.pos);
        std::mem::swap(&mut self.vel, &mut scratch.vel);
        std::mem::swap(&mut self.acc, &mut scratch.acc);
    }
}

fn lock<T>(m: &gyr::sync::Mutex<T>) -> gyr::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Lennard-Jones accelerations of domain `me`'s particles, from every particle within the
/// cutoff in any domain, into `scratch.new_acc`; returns its share of the potential energy.
/// Needs every domain binned for the same step.
pub(crate) fn forces<D: std::ops::Deref<Target = Domain>>(
    me: usize,
    all: &[D],
    grid: &Grid,
    scratch: &mut Scratch,
) -> f64 {
    scratch.column_domains.clear();
    scratch.column_domains.resize(grid.columns, (usize::MAX, 0));
    for (e, d) in all.iter().enumerate() {
        if let Some((a, b)) = d.columns(grid) {
            for slot in &mut scratch.column_domains[a..=b] {
                slot.0 = slot.0.min(e);
                slot.1 = slot.1.max(e);
            }
        }
    }
    let own = &all[me];
    let acc = &mut scratch.new_acc;
    acc.clear();
    acc.resize(own.pos.len(), [0.0; 2]);
    let Some((first, last)) = own.columns(grid) else {
        return 0.0;
    };
    let (cols, rows) = (grid.columns as isize, grid.rows as isize);
    let mut energy = 0.0;
    let mut pairs = 0u64;
    for cx in first..=last {
        for cy in 0..grid.rows {
            let mine = own.cell(grid, cx * grid.rows + cy);
            if mine.is_empty() {
                continue;
            }
            for ox in -1..=1isize {
                let nx = cx as isize + ox;
                let (nx, sx) = match nx {
                    -1 => (cols - 1, -grid.width),
                    n if n == cols => (0, grid.width),
                    n => (n, 0.0),
                };
                let (dlo, dhi) = scratch.column_domains[nx as usize];
                if dlo > dhi {
                    continue;
                }
                for oy in -1..=1isize {
                    let ny = cy as isize + oy;
                    let (ny, sy) = match ny {
                        -1 => (rows - 1, -grid.height),
                        n if n == rows => (0, grid.height),
                        n => (n, 0.0),
                    };
                    let cell = nx as usize * grid.rows + ny as usize;
                    for other in &all[dlo..=dhi] {
                        if other
                            .columns(grid)
                            .is_none_or(|(a, b)| (nx as usize) < a || (nx as usize) > b)
                        {
                            continue;
                        }
                        let theirs = &other.pos[other.cell(grid, cell)];
                        if theirs.is_empty() {
                            continue;
                        }
                        for i in mine.clone() {
                            let [xi, yi] = own.pos[i];
                            let (xi, yi) = (xi - sx, yi - sy);
                            let (mut ax, mut ay, mut e) = (0.0, 0.0, 0.0);
                            for q in theirs {
                                let dx = xi - q[0];
                                let dy = yi - q[1];
                                let r2 = dx * dx + dy * dy;
                                if r2 < CUTOFF2 && r2 > 0.0 {
                                    let ir2 = 1.0 / r2;
                                    let ir6 = ir2 * ir2 * ir2;
                                    let f = 24.0 * ir2 * ir6 * (2.0 * ir6 - 1.0);
                                    ax += f * dx;
                                    ay += f * dy;
                                    e += ir6 * (ir6 - 1.0);
                                    pairs += 1;
                                }
                            }
                            acc[i][0] += ax;
                            acc[i][1] += ay;
                            energy += e;
                        }
                    }
                }
            }
        }
    }
    // Each pair is seen once from each end: half of it belongs to this particle.
    0.5 * (4.0 * energy - pairs as f64 * energy_shift())
}

#[cfg(test)]
mod tests {
    use super::*;
    use gyr::sync::Mutex;

    /// Brute-force O(N²) accelerations and potential energy with the minimum image.
    fn reference(pos: &[[f64; 2]], grid: &Grid) -> (Vec<[f64; 2]>, f64) {
        let mut acc = vec![[0.0; 2]; pos.len()];
        let mut energy = 0.0;
        let image = |d: f64, l: f64| d - l * (d / l).round();
        for i in 0..pos.len() {
            for j in 0..pos.len() {
                if i == j {
                    continue;
                }
                let dx = image(pos[i][0] - pos[j][0], grid.width);
                let dy = image(pos[i][1] - pos[j][1], grid.height);
                let r2 = dx * dx + dy * dy;
                if r2 < CUTOFF2 {
                    let ir6 = 1.0 / (r2 * r2 * r2);
                    let f = 24.0 / r2 * ir6 * (2.0 * ir6 - 1.0);
                    acc[i][0] += f * dx;
                    acc[i][1] += f * dy;
                    energy += 0.5 * (4.0 * ir6 * (ir6 - 1.0) - energy_shift());
                }
            }
        }
        (acc, energy)
    }

    /// Cell lists split over domains give the same forces as summing over every pair, also
    /// across slab boundaries and the periodic wrap.
    #[test]
    fn cell_list_forces_match_brute_force() {
        let (w, h) = (40.0, 20.0);
        let grid = Grid::new(w, h).unwrap();
        let state = initial_state(300, w, h, 1.0).unwrap();
        // Shake the lattice so that many pairs sit at odd distances, some across the wrap.
        let state: Vec<_> = state
            .into_iter()
            .enumerate()
            .map(|(i, (p, v))| {
                let j = i as u64;
                let p = [
                    wrap(p[0] + 0.2 * unit(mix(7 * j)) - 1.0, w),
                    wrap(p[1] + 0.2 * unit(mix(7 * j + 1)), h),
                ];
                (p, v)
            })
            .collect();
        let boundaries = [4.0, 9.5, 21.0];
        let mut domains: Vec<Domain> = (0..4).map(|_| Domain::default()).collect();
        // Put every particle in domain 0 first, so that sending and receiving is exercised.
        for (p, v) in &state {
            domains[0].push(*p, *v);
        }
        let outbox: Vec<Mutex<Vec<Moving>>> = (0..16).map(|_| Mutex::new(Vec::new())).collect();
        let mut scratch = Scratch::default();
        for (d, dom) in domains.iter_mut().enumerate() {
            dom.send_leavers(d, &boundaries, &outbox, &mut scratch);
        }
        for (d, dom) in domains.iter_mut().enumerate() {
            dom.receive(d, 4, &outbox);
            dom.bin(&grid, &mut scratch);
            assert!(dom.pos.iter().all(|p| owner(&boundaries, p[0]) == d));
        }
        assert_eq!(domains.iter().map(|d| d.pos.len()).sum::<usize>(), 300);
        let refs: Vec<&Domain> = domains.iter().collect();
        let all: Vec<[f64; 2]> = domains.iter().flat_map(|x| x.pos.clone()).collect();
        let (want, energy) = reference(&all, &grid);
        let mut total = 0.0;
        let mut checked = 0;
        for d in 0..4 {
            total += forces(d, &refs, &grid, &mut scratch);
            let offset: usize = domains[..d].iter().map(|x| x.pos.len()).sum();
            for (i, a) in scratch.new_acc.iter().enumerate() {
                let b = want[offset + i];
                let scale = 1.0 + b[0].abs() + b[1].abs();
                assert!(
                    (a[0] - b[0]).abs() < 1e-9 * scale && (a[1] - b[1]).abs() < 1e-9 * scale,
                    "domain {d} particle {i}: {a:?} vs {b:?}"
                );
                checked += 1;
            }
        }
        assert_eq!(checked, 300);
        assert!(
            (total - energy).abs() < 1e-9 * energy.abs().max(1.0),
            "{total} vs {energy}"
        );
    }

    #[test]
    fn owners_and_grid_limits() {
        let b = [1.0, 2.0];
        assert_eq!(
            [0.0, 0.99, 1.0, 1.5, 2.0, 9.0].map(|x| owner(&b, x)),
            [0, 0, 1, 1, 2, 2]
        );
        assert_eq!(owner(&[], 3.0), 0);
        assert!(Grid::new(7.0, 50.0).unwrap_err().contains("at least 7.5"));
        assert_eq!(wrap(-1e-18, 10.0), 0.0);
        assert_eq!(wrap(10.5, 10.0), 0.5);
    }
}
