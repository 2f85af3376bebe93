#![doc = include_str!("../README.md")]
//!
//! A steerable molecular dynamics code, after the Falcon paper's MD application: 2-D
//! Lennard-Jones particles (reduced units, cutoff 2.5 σ, velocity Verlet, cell lists) in a
//! rectangular box with **periodic boundaries** in x and y, split into vertical slabs, one
//! thread each (`md-0`, `md-1`, …). Each thread integrates the particles whose x lies in its
//! slab and reads everyone's positions, shared-memory style; particles change hands when they
//! cross a boundary. Most particles start packed in a block at the left of the box while the
//! slabs are equally wide, so one thread does nearly all the work until the boundaries move.
//!
//! Steering object `md`: `boundaries` (the inner slab boundaries), `dt`, `auto_balance`, and
//! read-only `step`, `step_ms`, `imbalance`, `particles`; actuator `balance` (equal particle
//! counts per domain). Synch point `step`, once per time step. Sensors `domain_work`,
//! `step_time`, and `thermo` (every 10 steps). [`install_policy`] adds Falcon's in-process
//! rule: rebalance when `auto_balance` is on and the imbalance is high.
//!
//! The work measure behind `imbalance` is the particle count: in the dense block every
//! particle costs about the same, and counts, unlike thread timings on a shared machine, do
//! not jitter.

mod physics;

pub use physics::{BLOCK_DENSITY, BLOCK_SHARE, CUTOFF};

use gyr::Sensor;
use gyr::gyr_core::Value;
use gyr::steer::{self, Actuator, SteerError, Steered, Who, repository};
use physics::{Domain, Grid, Moving, Scratch};
use std::collections::VecDeque;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
// gyr's wrappers of std's locks and barrier: the trace and the hub's life-time view show which
// domain waited for which lock or barrier, and for how long.
use gyr::sync::{Barrier, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::sync::Arc;
use std::time::Instant;

/// Particles by default: enough that an imbalanced step takes several milliseconds.
pub const DEFAULT_PARTICLES: usize = 60_000;
/// Domains (threads) by default.
pub const DEFAULT_DOMAINS: usize = 4;
/// Most domains [`register`] accepts.
pub const MAX_DOMAINS: usize = 64;
/// The policy rebalances when `imbalance` exceeds this.
pub const BALANCE_THRESHOLD: f64 = 1.15;
/// The policy waits at least this many steps between two rebalancings, so that it judges
/// the effect of one before it orders the next.
pub const BALANCE_EVERY: u64 = 20;
/// The name of the policy's rule in the event/action repository.
pub const POLICY_RULE: &str = "md-balance";
/// Steps whose timings the program keeps (for `step_ms` and [`run_headless`]).
pub const STEP_LOG: usize = 10_000;
/// `step_ms` is the mean over this many steps, to smooth the scheduler's jitter.
const STEP_MS_WINDOW: usize = 10;
/// Steps [`run_headless`] leaves out after a change: warm-up, and the switch-over.
const SETTLE_STEPS: u64 = 3;

/// The size and starting state of a run. These numbers alone fix the initial state (no
/// random seed), so runs of one configuration can be compared.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Particles.
    pub particles: usize,
    /// Domains, one thread each.
    pub domains: usize,
    /// Box width (x), in σ.
    pub width: f64,
    /// Box height (y), in σ.
    pub height: f64,
    /// Initial time step, in τ.
    pub dt: f64,
    /// Initial temperature.
    pub temperature: f64,
}

impl Config {
    /// `particles` in `domains` slabs, in a 2:1 box (whole σ, for readable boundaries) sized
    /// so that the starting block fills about a fifth of its width.
    pub fn new(particles: usize, domains: usize) -> Config {
        let block_area = particles as f64 * BLOCK_SHARE / BLOCK_DENSITY;
        let width = (10.0 * block_area).sqrt().max(4.0 * CUTOFF).ceil();
        Config {
            particles,
            domains,
            width,
            height: (width / 2.0).max(4.0 * CUTOFF).ceil(),
            dt: 0.005,
            temperature: 0.5,
        }
    }

    /// Inner boundaries of equally wide slabs.
    pub fn equal_boundaries(&self) -> Vec<f64> {
        (1..self.domains)
            .map(|k| k as f64 * self.width / self.domains as f64)
            .collect()
    }

    fn check(&self) -> Result<(), String> {
        if !(1..=MAX_DOMAINS).contains(&self.domains) {
            return Err(format!(
                "domains must be 1 to {MAX_DOMAINS}, got {}",
                self.domains
            ));
        }
        if self.particles < self.domains {
            return Err(format!(
                "give at least one particle per domain ({} domains), got {}",
                self.domains, self.particles
            ));
        }
        if !(self.dt >= MIN_DT && self.dt <= MAX_DT) {
            return Err(format!("dt must be {MIN_DT} to {MAX_DT}, got {}", self.dt));
        }
        if !(self.temperature > 0.0 && self.temperature.is_finite()) {
            return Err(format!(
                "the temperature must be positive, got {}",
                self.temperature
            ));
        }
        Ok(())
    }
}

impl Default for Config {
    fn default() -> Self {
        Config::new(DEFAULT_PARTICLES, DEFAULT_DOMAINS)
    }
}

const MIN_DT: f64 = 1e-5;
const MAX_DT: f64 = 0.02;

/// The box width and domain count of the registered `md`, for [`check_boundaries`]: the
/// derive's validators see only the new value, and only one `md` can be registered at a time.
static SHAPE: Mutex<Option<(usize, f64)>> = Mutex::new(None);

/// Refuses boundary lists that do not cut the box into the registered number of slabs.
fn check_boundaries(b: &[f64]) -> Result<(), String> {
    let Some((domains, width)) = *lock(&SHAPE) else {
        return Err("`md` is not registered".into());
    };
    let accepted = format!(
        "give {} strictly increasing numbers between 0 and {width} (exclusive), the inner boundaries of the {domains} domains",
        domains - 1
    );
    if b.len() != domains - 1 {
        return Err(format!("{} values given; {accepted}", b.len()));
    }
    if let Some(x) = b.iter().find(|&&x| !(x > 0.0 && x < width)) {
        return Err(format!("{x} is not inside the box; {accepted}"));
    }
    if let Some(w) = b.windows(2).find(|w| w[0] >= w[1]) {
        return Err(format!("{} is not below {}; {accepted}", w[0], w[1]));
    }
    Ok(())
}

/// The simulation's steerable state.
#[derive(gyr::Steerable, Debug)]
pub struct Md {
    /// Inner slab boundaries along x: domain k holds `boundaries[k-1] <= x < boundaries[k]`.
    #[steer(
        unit = "sigma",
        validate = check_boundaries,
        description = "inner domain boundaries along x, strictly increasing, inside the box"
    )]
    pub boundaries: Vec<f64>,
    /// Integration time step.
    #[steer(
        unit = "tau",
        min = MIN_DT,
        max = MAX_DT,
        description = "integration time step"
    )]
    pub dt: f64,
    /// Steps done.
    #[steer(read_only)]
    pub step: u64,
    /// Mean wall time of the last steps.
    #[steer(
        read_only,
        unit = "ms",
        description = "mean wall time of the last 10 steps"
    )]
    pub step_ms: f64,
    /// Most particles in one domain over the mean per domain.
    #[steer(
        read_only,
        description = "particles in the fullest domain over the mean per domain (1: balanced)"
    )]
    pub imbalance: f64,
    /// Particles in the box.
    #[steer(read_only)]
    pub particles: u64,
    /// Whether the policy of [`install_policy`] acts.
    #[steer(description = "whether the in-process policy rebalances the domains")]
    pub auto_balance: bool,
    /// The particles, shared with the domain threads (not an attribute).
    #[steer(skip)]
    store: Arc<Store>,
}

impl Md {
    /// Particles each domain owns now.
    pub fn domain_particles(&self) -> Vec<usize> {
        self.store.counts()
    }

    /// Kinetic energy now, and potential energy as of the last force computation (0 before
    /// the first run).
    pub fn energy(&self) -> (f64, f64) {
        let (mut kinetic, mut potential) = (0.0, 0.0);
        for d in &self.store.domains {
            let d = read(d);
            kinetic += d
                .vel
                .iter()
                .map(|v| 0.5 * (v[0] * v[0] + v[1] * v[1]))
                .sum::<f64>();
            potential += d.potential;
        }
        (kinetic, potential)
    }

    /// Box width and height.
    pub fn box_size(&self) -> [f64; 2] {
        [self.store.grid.width, self.store.grid.height]
    }
}

/// One domain's share of a step.
#[derive(Sensor, Debug, Clone)]
#[sensor(name = "domain_work")]
pub struct DomainWork {
    /// The domain.
    pub domain: u32,
    /// The step.
    pub step: u64,
    /// Particles it owned.
    pub particles: u32,
    /// Seconds its thread worked (barrier waits left out).
    pub seconds: f64,
}

/// A step's wall time and balance.
#[derive(Sensor, Debug, Clone)]
#[sensor(name = "step_time")]
pub struct StepTime {
    /// The step.
    pub step: u64,
    /// Its wall time in milliseconds.
    pub ms: f64,
    /// Particles in the fullest domain over the mean.
    pub imbalance: f64,
}

/// The system's energy, every 10 steps.
#[derive(Sensor, Debug, Clone)]
#[sensor(name = "thermo")]
pub struct Thermo {
    /// The step.
    pub step: u64,
    /// Kinetic energy.
    pub kinetic: f64,
    /// Potential energy.
    pub potential: f64,
    /// Temperature (kinetic energy per degree of freedom pair).
    pub temperature: f64,
}

/// What the domain threads share: the particles by domain, the mailboxes particles cross
/// boundaries through, and the plan for the next step.
struct Store {
    grid: Grid,
    domains: Vec<RwLock<Domain>>,
    /// Slot `from * domains + to`.
    outbox: Vec<Mutex<Vec<Moving>>>,
    plan: RwLock<Plan>,
    /// Whether the particles' accelerations are known (after the first pass of a run).
    ready: AtomicBool,
    /// Whether a [`run`] is under way: two at once would move every particle twice.
    running: AtomicBool,
    log: Mutex<VecDeque<StepRecord>>,
}

impl fmt::Debug for Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Store")
            .field("grid", &self.grid)
            .field("domains", &self.domains.len())
            .finish_non_exhaustive()
    }
}

/// What the thread at the synch point tells the others for the next step.
#[derive(Debug, Clone, Default)]
struct Plan {
    boundaries: Vec<f64>,
    dt: f64,
    /// Steps done.
    step: u64,
    done: bool,
}

#[derive(Debug, Clone, Copy)]
struct StepRecord {
    step: u64,
    ms: f64,
    imbalance: f64,
}

impl Store {
    fn new(config: &Config, boundaries: &[f64]) -> Result<Store, String> {
        let grid = Grid::new(config.width, config.height)?;
        let mut domains: Vec<Domain> = (0..config.domains).map(|_| Domain::default()).collect();
        for (pos, vel) in physics::initial_state(
            config.particles,
            config.width,
            config.height,
            config.temperature,
        )? {
            domains[physics::owner(boundaries, pos[0])].push(pos, vel);
        }
        Ok(Store {
            grid,
            domains: domains.into_iter().map(RwLock::new).collect(),
            outbox: (0..config.domains * config.domains)
                .map(|_| Mutex::new(Vec::new()))
                .collect(),
            plan: RwLock::new(Plan::default()),
            ready: AtomicBool::new(false),
            running: AtomicBool::new(false),
            log: Mutex::new(VecDeque::new()),
        })
    }

    fn counts(&self) -> Vec<usize> {
        self.domains.iter().map(|d| read(d).pos.len()).collect()
    }

    /// Boundaries at the x quantiles, so every domain gets as many particles (±1).
    fn balanced_boundaries(&self) -> Result<Vec<f64>, String> {
        let d = self.domains.len();
        let mut xs: Vec<f64> = self
            .domains
            .iter()
            .flat_map(|dom| read(dom).pos.iter().map(|p| p[0]).collect::<Vec<_>>())
            .collect();
        let n = xs.len();
        if n < d {
            return Err(format!("{n} particles cannot be shared among {d} domains"));
        }
        xs.sort_unstable_by(f64::total_cmp);
        let mut out: Vec<f64> = Vec::with_capacity(d - 1);
        for k in 1..d {
            let i = k * n / d;
            let (a, b) = (xs[i - 1], xs[i]);
            let cut = 0.5 * (a + b);
            if a >= b || out.last().is_some_and(|&p| cut <= p) || cut <= 0.0 {
                return Err(format!(
                    "particles {i} and {} are both at x = {a}: no boundary can part them",
                    i + 1
                ));
            }
            out.push(cut);
        }
        Ok(out)
    }
}

fn imbalance(counts: &[usize]) -> f64 {
    let total: usize = counts.iter().sum();
    if total == 0 {
        return 1.0;
    }
    let max = counts.iter().copied().max().unwrap_or(0);
    max as f64 * counts.len() as f64 / total as f64
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn read<T>(l: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(|e| e.into_inner())
}

fn write<T>(l: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(|e| e.into_inner())
}

/// Why [`register`] failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum RegisterError {
    /// The configuration cannot be run.
    Config(String),
    /// The steering object could not be registered.
    Steer(SteerError),
}

impl fmt::Display for RegisterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RegisterError::Config(m) => write!(f, "bad configuration: {m}"),
            RegisterError::Steer(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for RegisterError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RegisterError::Steer(e) => Some(e),
            RegisterError::Config(_) => None,
        }
    }
}

impl From<SteerError> for RegisterError {
    fn from(e: SteerError) -> Self {
        RegisterError::Steer(e)
    }
}

/// Builds the starting state of `config` (equal slabs) and registers it as the steering
/// object `md` with its `balance` actuator.
pub fn register(config: &Config) -> Result<Steered<Md>, RegisterError> {
    config.check().map_err(RegisterError::Config)?;
    let boundaries = config.equal_boundaries();
    let store = Store::new(config, &boundaries).map_err(RegisterError::Config)?;
    let md = Md {
        imbalance: imbalance(&store.counts()),
        boundaries,
        dt: config.dt,
        step: 0,
        step_ms: 0.0,
        particles: config.particles as u64,
        auto_balance: false,
        store: Arc::new(store),
    };
    let sim = {
        // Held across the registration so the validator never sees another run's shape.
        let mut shape = lock(&SHAPE);
        let sim = steer::register_described(
            "md",
            Some("2-D Lennard-Jones molecular dynamics, one thread per vertical slab"),
            md,
        )?;
        *shape = Some((config.domains, config.width));
        sim
    };
    let added = sim
        .add_actuator(
            Actuator::new("balance", |s: &mut Md, _| {
                let b = s.store.balanced_boundaries()?;
                s.boundaries.clone_from(&b);
                Ok(Value::Array(b.into_iter().map(Value::Float).collect()))
            })
            .description(
                "moves the boundaries to the x quantiles, so every domain holds as many particles; returns them",
            ),
        )
        .map(drop);
    if let Err(e) = added {
        sim.unregister();
        return Err(e.into());
    }
    Ok(sim)
}

/// Runs the simulation until `steps` steps are done in all (0: until `stop`), one thread per
/// domain. A later call goes on from where the last one stopped.
///
/// # Panics
///
/// If another `run` of the same simulation is under way.
pub fn run(sim: &Steered<Md>, steps: u64, stop: &AtomicBool) {
    let store = {
        let s = sim.read();
        if steps > 0 && s.step >= steps {
            return;
        }
        assert!(
            !s.store.running.swap(true, Ordering::AcqRel),
            "md: this simulation is already running; run it from one place at a time"
        );
        *write(&s.store.plan) = Plan {
            boundaries: s.boundaries.clone(),
            dt: s.dt,
            step: s.step,
            done: false,
        };
        s.store.clone()
    };
    let barrier = Barrier::new(store.domains.len());
    std::thread::scope(|scope| {
        for d in 0..store.domains.len() {
            let (store, barrier) = (&*store, &barrier);
            gyr::thread::Builder::new()
                .name(format!("md-{d}"))
                .spawn_scoped(scope, move || {
                    // A run's domain threads are new each time it runs: the role keeps domain
                    // d in one row of the views across runs.
                    gyr::thread::set_role("domain", d as u64);
                    domain_thread(d, sim, store, barrier, steps, stop)
                })
                .expect("spawn an md domain thread");
        }
    });
    store.running.store(false, Ordering::Release);
}

/// One domain's loop. Each step has five phases, separated by barriers: kick and drift its
/// particles and post those that left its slab; take in arrivals and sort by cell; compute
/// forces (reading every domain); second kick; and, on domain 0 alone, the bookkeeping and
/// the synch point while the others wait. A run's first pass only computes the forces.
fn domain_thread(
    d: usize,
    sim: &Steered<Md>,
    store: &Store,
    barrier: &Barrier,
    steps: u64,
    stop: &AtomicBool,
) {
    let domains = store.domains.len();
    let mut scratch = Scratch::default();
    let mut boundaries = Vec::new();
    let mut first = !store.ready.load(Ordering::Acquire);
    loop {
        let started = Instant::now();
        let (dt, step) = {
            let p = read(&store.plan);
            boundaries.clone_from(&p.boundaries);
            (p.dt, p.step + 1)
        };
        let t = Instant::now();
        {
            let mut me = write(&store.domains[d]);
            if !first {
                me.kick_drift(dt, &store.grid);
            }
            me.send_leavers(d, &boundaries, &store.outbox, &mut scratch);
        }
        let mut busy = t.elapsed();
        barrier.wait();
        let t = Instant::now();
        {
            let mut me = write(&store.domains[d]);
            me.receive(d, domains, &store.outbox);
            me.bin(&store.grid, &mut scratch);
        }
        busy += t.elapsed();
        barrier.wait();
        let t = Instant::now();
        let potential = {
            let all: Vec<_> = store.domains.iter().map(read).collect();
            physics::forces(d, &all, &store.grid, &mut scratch)
        };
        busy += t.elapsed();
        barrier.wait();
        let t = Instant::now();
        let particles = {
            let mut me = write(&store.domains[d]);
            std::mem::swap(&mut me.acc, &mut scratch.new_acc);
            me.kick(if first { 0.0 } else { dt });
            me.potential = potential;
            busy += t.elapsed();
            me.seconds = busy.as_secs_f64();
            me.pos.len()
        };
        if !first {
            DomainWork {
                domain: d as u32,
                step,
                particles: particles as u32,
                seconds: busy.as_secs_f64(),
            }
            .emit();
        }
        barrier.wait();
        if d == 0 {
            lead(sim, store, first, started, steps, stop);
        }
        barrier.wait();
        first = false;
        if read(&store.plan).done {
            break;
        }
    }
}

/// Domain 0's part at the end of a step, while the other threads wait: count the step,
/// publish it (attributes and sensors), meet the steering at the synch point, and plan the
/// next step from the attributes as steering left them.
fn lead(
    sim: &Steered<Md>,
    store: &Store,
    first: bool,
    started: Instant,
    steps: u64,
    stop: &AtomicBool,
) {
    if first {
        store.ready.store(true, Ordering::Release);
    } else {
        let ms = started.elapsed().as_secs_f64() * 1e3;
        let (mut counts, mut kinetic, mut potential) = (Vec::new(), 0.0, 0.0);
        for dom in &store.domains {
            let dom = read(dom);
            counts.push(dom.pos.len());
            kinetic += dom.kinetic;
            potential += dom.potential;
        }
        let imbalance = imbalance(&counts);
        let total: usize = counts.iter().sum();
        let step = read(&store.plan).step + 1;
        let step_ms = {
            let mut log = lock(&store.log);
            log.push_back(StepRecord {
                step,
                ms,
                imbalance,
            });
            if log.len() > STEP_LOG {
                log.pop_front();
            }
            let window = log.len().min(STEP_MS_WINDOW);
            log.iter().rev().take(window).map(|r| r.ms).sum::<f64>() / window as f64
        };
        {
            let mut s = sim.write();
            s.step = step;
            s.step_ms = step_ms;
            s.imbalance = imbalance;
            s.particles = total as u64;
        }
        StepTime {
            step,
            ms,
            imbalance,
        }
        .emit();
        if step.is_multiple_of(10) {
            Thermo {
                step,
                kinetic,
                potential,
                temperature: kinetic / (total.max(2) - 1) as f64,
            }
            .emit();
        }
        // Actuators (balance) run here, and a pause stalls here, while the others wait.
        steer::sync_point("step");
    }
    let s = sim.read();
    let mut plan = write(&store.plan);
    plan.boundaries.clone_from(&s.boundaries);
    plan.dt = s.dt;
    plan.step = s.step;
    plan.done = (steps > 0 && s.step >= steps) || stop.load(Ordering::Relaxed);
}

/// Adds Falcon's balancing policy to the event/action repository (replacing an earlier
/// copy): on a `step_time` event whose imbalance exceeds [`BALANCE_THRESHOLD`], if
/// `md.auto_balance` is on and [`BALANCE_EVERY`] steps have passed since it last acted, it
/// queues `md.balance`. It never waits for the program: the actuator runs at the program's
/// next synch point.
pub fn install_policy() -> Result<repository::RuleHandle, SteerError> {
    repository::remove(POLICY_RULE);
    let last: Arc<Mutex<Option<u64>>> = Arc::default();
    let last2 = last.clone();
    repository::on_event(
        POLICY_RULE,
        "step_time",
        move |e| {
            let (Some(imbalance), Some(step)) = (e.f64("imbalance"), e.f64("step")) else {
                return false;
            };
            let step = step as u64;
            // A step below the last one means a new run: the wait starts over.
            let rested =
                lock(&last).is_none_or(|l| step < l || step >= l.saturating_add(BALANCE_EVERY));
            imbalance > BALANCE_THRESHOLD
                && rested
                && steer::get("md.auto_balance") == Ok(Value::Bool(true))
        },
        move |e, who| {
            // Not waited for: the steering thread must never wait on the program.
            let _ = steer::actuate("md.balance", &[], who)?;
            *lock(&last2) = e.f64("step").map(|s| s as u64);
            Ok(())
        },
    )
}

/// What [`run_headless`] measured.
#[derive(Debug, Clone, PartialEq)]
pub struct HeadlessReport {
    /// Steps run in all.
    pub steps: u64,
    /// Mean step wall time while imbalanced (the first few steps left out), ms.
    pub step_ms_before: f64,
    /// Mean step wall time once the policy had balanced the domains (the switch-over left
    /// out), ms.
    pub step_ms_after: f64,
    /// `imbalance` at the end of the imbalanced phase.
    pub imbalance_before: f64,
    /// `imbalance` at the end of the run.
    pub imbalance_after: f64,
    /// The first step the policy's new boundaries were in force.
    pub balanced_at: u64,
}

/// Why [`run_headless`] failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum HeadlessError {
    /// No runtime could be started.
    Runtime(gyr::Error),
    /// The simulation could not be set up.
    Register(RegisterError),
    /// A steering request was refused.
    Steer(SteerError),
    /// The steps asked for leave nothing to measure, or more than the step log keeps.
    Steps(String),
    /// The policy had not balanced the domains by the end.
    NotBalanced {
        /// Steps run after `auto_balance` was switched on.
        steps_after: u64,
    },
}

impl fmt::Display for HeadlessError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HeadlessError::Runtime(e) => write!(f, "cannot start gyr: {e}"),
            HeadlessError::Register(e) => e.fmt(f),
            HeadlessError::Steer(e) => e.fmt(f),
            HeadlessError::Steps(m) => f.write_str(m),
            HeadlessError::NotBalanced { steps_after } => write!(
                f,
                "the balancing policy had not balanced the domains {steps_after} steps after auto_balance was switched on"
            ),
        }
    }
}

impl std::error::Error for HeadlessError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            HeadlessError::Runtime(e) => Some(e),
            HeadlessError::Register(e) => Some(e),
            HeadlessError::Steer(e) => Some(e),
            _ => None,
        }
    }
}

impl From<SteerError> for HeadlessError {
    fn from(e: SteerError) -> Self {
        HeadlessError::Steer(e)
    }
}

impl From<RegisterError> for HeadlessError {
    fn from(e: RegisterError) -> Self {
        HeadlessError::Register(e)
    }
}

/// The demo without a screen: runs `config` imbalanced for `steps_before` steps, switches
/// `auto_balance` on as a client would, runs `steps_after` more, and reports the mean step
/// times before and after the policy acted. Uses the process's gyr runtime, or starts one
/// (without the steering server) for the duration; registers `md` and the policy, and
/// removes both at the end.
pub fn run_headless(
    config: &Config,
    steps_before: u64,
    steps_after: u64,
) -> Result<HeadlessReport, HeadlessError> {
    if steps_before <= SETTLE_STEPS || steps_after <= 2 * SETTLE_STEPS {
        return Err(HeadlessError::Steps(format!(
            "run more than {SETTLE_STEPS} steps before and {} after the switch, to have steps to measure",
            2 * SETTLE_STEPS
        )));
    }
    if steps_before.saturating_add(steps_after) > STEP_LOG as u64 {
        return Err(HeadlessError::Steps(format!(
            "at most {STEP_LOG} steps in all: the step log keeps no more"
        )));
    }
    let runtime = match gyr::Builder::new().serve(false).start() {
        Ok(rt) => Some(rt),
        Err(gyr::Error::AlreadyRunning) => None,
        Err(e) => return Err(HeadlessError::Runtime(e)),
    };
    let result = register(config)
        .map_err(HeadlessError::from)
        .and_then(|sim| {
            let r = headless_phases(&sim, steps_before, steps_after);
            repository::remove(POLICY_RULE);
            sim.unregister();
            r
        });
    if let Some(rt) = runtime {
        rt.shutdown();
    }
    result
}

fn headless_phases(
    sim: &Steered<Md>,
    steps_before: u64,
    steps_after: u64,
) -> Result<HeadlessReport, HeadlessError> {
    install_policy()?;
    let stop = AtomicBool::new(false);
    run(sim, steps_before, &stop);
    let imbalance_before = sim.read().imbalance;
    steer::set("md.auto_balance", Value::Bool(true), &Who::new("demo"))?;
    let steps = steps_before + steps_after;
    run(sim, steps, &stop);
    let log: Vec<StepRecord> = lock(&sim.read().store.log).iter().copied().collect();
    let mean = |rs: &[&StepRecord]| rs.iter().map(|r| r.ms).sum::<f64>() / rs.len() as f64;
    let before: Vec<&StepRecord> = log
        .iter()
        .filter(|r| r.step > SETTLE_STEPS && r.step <= steps_before)
        .collect();
    let balanced_at = log
        .iter()
        .find(|r| r.step > steps_before && r.imbalance <= BALANCE_THRESHOLD)
        .map(|r| r.step)
        .ok_or(HeadlessError::NotBalanced { steps_after })?;
    let after: Vec<&StepRecord> = log
        .iter()
        .filter(|r| r.step >= balanced_at + SETTLE_STEPS)
        .collect();
    if after.is_empty() {
        return Err(HeadlessError::Steps(format!(
            "the policy balanced the domains at step {balanced_at}, too late to measure before step {steps}: run more steps after the switch"
        )));
    }
    Ok(HeadlessReport {
        steps,
        step_ms_before: mean(&before),
        step_ms_after: mean(&after),
        imbalance_before,
        imbalance_after: sim.read().imbalance,
        balanced_at,
    })
}
