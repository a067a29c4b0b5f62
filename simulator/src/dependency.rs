use std::time::Duration;

use super::rng::SplitMix64;
use super::workers::{Pool, PoolSize};
use super::InvalidSimulation;

/// Beyond this multiple of the capacity a dependency sheds instead of queueing.
const SHED_MULTIPLE: u64 = 3;

/// The most extreme draw the latency model honours, either side: one attempt in ten thousand
/// gets the 99.99th percentile, so the tail is long but not unbounded.
const TAIL_CAP: f64 = 1e-4;

/// The thing a simulated policy calls: a latency distribution, an optional capacity (or a
/// pool of workers behind a queue), and a schedule of things going wrong. The only modelled part of a simulation besides the load.
///
/// Every method returns a new value, so one dependency can be varied per simulation.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use simulator::Dependency;
///
/// let ms = Duration::from_millis;
/// let api = Dependency::healthy(ms(20), ms(200))
///     .brownout(Duration::from_secs(30), 8.0, Duration::from_secs(60));
/// assert_eq!(api.p50(), ms(20));
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Dependency {
    p50: Duration,
    p99: Duration,
    tail: Tail,
    failure_rate: f64,
    capacity: Option<u32>,
    pool: Option<PoolSize>,
    impairments: Vec<Impairment>,
}

/// The shape of a healthy dependency's latency between and beyond its two quantiles.
///
/// Both shapes pass exactly through the p50 and the p99 they are fitted to and are symmetric
/// in log terms (the 1st percentile is as far below the median as the 99th is above it); they
/// differ in how heavy the tail is, which decides the p95 the attempt ceiling is fitted to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Tail {
    /// Log-logistic: `p50 × odds^k` for a uniform draw `u`, `odds = u / (1 − u)`: a power-law
    /// tail. With p99 = 10 × p50 it is within 1 % of the curve the original library's simulator
    /// draws from (p95 = 4.4 × p50). The default.
    #[default]
    LogLogistic,
    /// Lognormal: a lighter tail (p95 = 5.1 × p50 when p99 = 10 × p50).
    LogNormal,
}

#[derive(Debug, Clone, Copy, PartialEq)]
struct Impairment {
    after: Duration,
    lasting: Duration,
    /// `None`: every attempt fails at once (an outage); otherwise a latency multiple.
    slower: Option<f64>,
}

/// What the dependency does with one attempt.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Answer {
    pub(super) latency: Duration,
    pub(super) fails: bool,
}

/// What a dependency with workers did with an attempt at its door.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Admission {
    /// Queued or served at once; a worker is booked for it.
    Booked,
    /// Refused at once: every worker busy and the queue full.
    Shed,
    /// Refused at once: an outage.
    Down,
}

impl Answer {
    /// Refused at once.
    const FAILED: Self = Self {
        latency: Duration::ZERO,
        fails: true,
    };
}

impl Dependency {
    /// A dependency that answers every attempt, with latencies whose median is `p50` and whose
    /// 99th percentile is `p99` (see [`Tail`]). Equal quantiles give a constant latency.
    #[must_use]
    pub fn healthy(p50: Duration, p99: Duration) -> Self {
        Self {
            p50,
            p99,
            tail: Tail::default(),
            failure_rate: 0.0,
            capacity: None,
            pool: None,
            impairments: Vec::new(),
        }
    }

    /// The shape of the latency distribution. Defaults to [`Tail::LogLogistic`].
    #[must_use]
    pub fn tail(mut self, tail: Tail) -> Self {
        self.tail = tail;
        self
    }

    /// From `after` (since the run started) for `lasting`, attempts that start in the window
    /// take `slower` times as long, and still succeed. Overlapping brownouts multiply.
    #[must_use]
    pub fn brownout(mut self, after: Duration, slower: f64, lasting: Duration) -> Self {
        self.impairments.push(Impairment {
            after,
            lasting,
            slower: Some(slower),
        });
        self
    }

    /// From `after` for `lasting`, every attempt fails at once, as a dependency refusing
    /// connections does.
    #[must_use]
    pub fn outage(mut self, after: Duration, lasting: Duration) -> Self {
        self.impairments.push(Impairment {
            after,
            lasting,
            slower: None,
        });
        self
    }

    /// The fraction of attempts, in `[0, 1]`, that fail at the end of their latency while
    /// nothing else is wrong. Defaults to `0`.
    #[must_use]
    pub fn failing(mut self, rate: f64) -> Self {
        self.failure_rate = rate;
        self
    }

    /// How many attempts it serves at once. Past it, attempts take longer in proportion to how
    /// far past it they are (`in flight / capacity`); past three times it, they fail at once.
    /// An attempt its caller cuts stops counting at once. Defaults to no bound; see
    /// [`workers`](Self::workers) for a dependency that keeps working for callers that left.
    #[must_use]
    pub fn capacity(mut self, concurrent: u32) -> Self {
        self.capacity = Some(concurrent);
        self
    }

    /// Serves attempts as a database or a thread-pool server does: `workers` at a time, the
    /// rest waiting in a first-in, first-out queue of at most `queue`. An attempt holds its
    /// worker for the latency drawn when a worker takes it (times any brownout under way
    /// then); one that finds every worker busy and the queue full fails at once, as a `503`
    /// does. Work is never cancelled: an attempt its caller cut (the attempt ceiling, a
    /// timeout, a deadline) keeps its place in the queue and then its worker until its work
    /// is done, because a server does not see its client leave. Retries of abandoned work are
    /// how a short slowdown becomes a metastable failure (Bronson et al., *Metastable Failures
    /// in Distributed Systems*, HotOS 2021): the queue stays full of work nobody waits for,
    /// long after the slowdown ended.
    ///
    /// Replaces [`capacity`](Self::capacity) (setting both is refused when the simulation
    /// runs), and a chain's [`peers`](super::Load::peers) cannot share it: simulate them as a
    /// [fleet](super::Simulation::fleet). [`Second::queue`](super::Second::queue) and
    /// [`Second::shed`](super::Second::shed) report it. Defaults to no pool.
    ///
    /// ```
    /// use std::time::Duration;
    /// use simulator::{Dependency, Load, Simulation};
    /// use nresilience_core::{RetryBudget, RetryPolicy};
    ///
    /// let (ms, s) = (Duration::from_millis, Duration::from_secs);
    /// let once = RetryPolicy::builder().max_attempts(1).budget(RetryBudget::None).build()?;
    /// // One worker at 10 ms serves 100 attempts a second; 150 arrive, and none may wait.
    /// let report = Simulation::policy(once)
    ///     .against(Dependency::healthy(ms(10), ms(10)).workers(1, 0))
    ///     .under(Load::constant(150.0))
    ///     .for_duration(s(10))
    ///     .run(1)?;
    /// let shed: u64 = report.seconds.iter().map(|second| second.shed).sum();
    /// assert_eq!(report.failed(), shed, "every failure is a refusal at the door");
    /// assert!(report.availability() < 0.8, "{report}");
    /// assert!(report.seconds.iter().all(|second| second.queue == 0));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn workers(mut self, workers: u32, queue: u32) -> Self {
        self.pool = Some(PoolSize { workers, queue });
        self
    }

    /// The healthy median latency.
    #[must_use]
    pub fn p50(&self) -> Duration {
        self.p50
    }

    /// The healthy 99th-percentile latency.
    #[must_use]
    pub fn p99(&self) -> Duration {
        self.p99
    }

    pub(super) fn validate(&self) -> Result<(), InvalidSimulation> {
        if self.p50.is_zero() || self.p99 < self.p50 {
            return Err(InvalidSimulation::new(format!(
                "dependency p50 must be positive and p99 at least p50, got {:?} and {:?}",
                self.p50, self.p99
            )));
        }
        if !(0.0..=1.0).contains(&self.failure_rate) {
            return Err(InvalidSimulation::new(format!(
                "dependency failure rate must be in 0..=1, got {}",
                self.failure_rate
            )));
        }
        if self.capacity == Some(0) {
            return Err(InvalidSimulation::new(
                "dependency capacity must be at least 1".to_owned(),
            ));
        }
        if let Some(pool) = self.pool {
            if pool.workers == 0 {
                return Err(InvalidSimulation::new(
                    "a dependency needs at least 1 worker".to_owned(),
                ));
            }
            if self.capacity.is_some() {
                return Err(InvalidSimulation::new(
                    "a dependency has a capacity or workers, not both: workers replace the \
                     proportional slow-down of capacity"
                        .to_owned(),
                ));
            }
        }
        for impairment in &self.impairments {
            if impairment.lasting.is_zero() {
                return Err(InvalidSimulation::new(
                    "a brownout or outage must last longer than zero".to_owned(),
                ));
            }
            if let Some(slower) = impairment.slower {
                if !(slower.is_finite() && slower >= 1.0) {
                    return Err(InvalidSimulation::new(format!(
                        "a brownout must be at least 1 times slower, got {slower}"
                    )));
                }
            }
        }
        Ok(())
    }

    /// One attempt starting `at` into the run with `offered` attempts in flight (this one and
    /// the peers' share included). Draws exactly two numbers whatever it decides, so the
    /// stream does not shift when the dependency's health does.
    pub(super) fn serve(&self, at: Duration, offered: u64, rng: &mut SplitMix64) -> Answer {
        let draw = rng.next_f64();
        let roll = rng.next_f64();
        let Some(mut slower) = self.slower(at) else {
            return Answer::FAILED;
        };
        if let Some(capacity) = self.capacity.map(u64::from) {
            if offered > SHED_MULTIPLE * capacity {
                return Answer::FAILED;
            }
            if offered > capacity {
                slower *= offered as f64 / capacity as f64;
            }
        }
        Answer {
            latency: self.latency(draw, slower),
            fails: roll < self.failure_rate,
        }
    }

    /// The pool of workers this dependency serves from, empty, if it has one.
    pub(super) fn pool(&self) -> Option<Pool> {
        self.pool.map(Pool::new)
    }

    /// One attempt arriving `at` into the run at `pool`: its answer comes when its work is
    /// done, after any wait for a worker; a full queue or an outage fails it at once. Draws
    /// exactly two numbers whatever it decides, as [`serve`] does.
    ///
    /// [`serve`]: Self::serve
    pub(super) fn serve_from(
        &self,
        pool: &mut Pool,
        at: Duration,
        rng: &mut SplitMix64,
    ) -> (Answer, Admission) {
        let draw = rng.next_f64();
        let roll = rng.next_f64();
        // An outage refuses connections: nothing reaches the queue.
        if self.slower(at).is_none() {
            return (Answer::FAILED, Admission::Down);
        }
        // A slowdown that ends while the attempt waits does not touch it; one that begins does
        // (an outage beginning then is read as no slowdown: the work was already accepted).
        let booking = pool.admit(at, |starts| {
            self.latency(draw, self.slower(starts).unwrap_or(1.0))
        });
        match booking {
            None => (Answer::FAILED, Admission::Shed),
            Some(booking) => (
                Answer {
                    latency: booking.ends.saturating_sub(at),
                    fails: roll < self.failure_rate,
                },
                Admission::Booked,
            ),
        }
    }

    /// The latency multiple of the brownouts under way `at` into the run, or `None` during an
    /// outage.
    fn slower(&self, at: Duration) -> Option<f64> {
        let mut slower = 1.0;
        for impairment in &self.impairments {
            if at < impairment.after || at.saturating_sub(impairment.after) >= impairment.lasting {
                continue;
            }
            slower *= impairment.slower?;
        }
        Some(slower)
    }

    /// The latency of a uniform `draw`, `slower` times the healthy one.
    fn latency(&self, draw: f64, slower: f64) -> Duration {
        let seconds = self.p50.as_secs_f64() * self.spread(draw) * slower;
        Duration::try_from_secs_f64(seconds).unwrap_or(Duration::MAX)
    }

    /// The multiple of the median a uniform draw in `[0, 1)` is worth: 1 at 0.5,
    /// `p99 / p50` at 0.99 and its reciprocal at 0.01.
    fn spread(&self, draw: f64) -> f64 {
        if self.p99 <= self.p50 {
            return 1.0;
        }
        let u = draw.clamp(TAIL_CAP, 1.0 - TAIL_CAP);
        let log_ratio = (self.p99.as_secs_f64() / self.p50.as_secs_f64()).ln();
        let z = match self.tail {
            Tail::LogLogistic => (u / (1.0 - u)).ln() / 99f64.ln(),
            Tail::LogNormal => inverse_normal_cdf(u) / inverse_normal_cdf(0.99),
        };
        (z * log_ratio).exp()
    }
}

/// The standard normal quantile function, by Acklam's rational approximation (relative
/// error below 1.2e-9), for `p` in `(0, 1)`.
fn inverse_normal_cdf(p: f64) -> f64 {
    const A: [f64; 6] = [
        -3.969_683_028_665_376e1,
        2.209_460_984_245_205e2,
        -2.759_285_104_469_687e2,
        1.383_577_518_672_69e2,
        -3.066_479_806_614_716e1,
        2.506_628_277_459_239,
    ];
    const B: [f64; 5] = [
        -5.447_609_879_822_406e1,
        1.615_858_368_580_409e2,
        -1.556_989_798_598_866e2,
        6.680_131_188_771_972e1,
        -1.328_068_155_288_572e1,
    ];
    const C: [f64; 6] = [
        -7.784_894_002_430_293e-3,
        -3.223_964_580_411_365e-1,
        -2.400_758_277_161_838,
        -2.549_732_539_343_734,
        4.374_664_141_464_968,
        2.938_163_982_698_783,
    ];
    const D: [f64; 4] = [
        7.784_695_709_041_462e-3,
        3.224_671_290_700_398e-1,
        2.445_134_137_142_996,
        3.754_408_661_907_416,
    ];
    const LOW: f64 = 0.024_25;

    let tail = |q: f64| {
        let num = ((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5];
        let den = (((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0;
        num / den
    };
    if p < LOW {
        tail((-2.0 * p.ln()).sqrt())
    } else if p > 1.0 - LOW {
        -tail((-2.0 * (1.0 - p).ln()).sqrt())
    } else {
        let q = p - 0.5;
        let r = q * q;
        let num = (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q;
        let den = ((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0;
        num / den
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn quantile(samples: &mut [Duration], q: f64) -> Duration {
        samples.sort_unstable();
        let rank = ((q * samples.len() as f64).ceil() as usize).clamp(1, samples.len());
        samples[rank - 1]
    }

    fn sample(dependency: &Dependency, n: usize) -> Vec<Duration> {
        let mut rng = SplitMix64::new(42);
        (0..n)
            .map(|_| dependency.serve(Duration::ZERO, 1, &mut rng).latency)
            .collect()
    }

    fn relative_error(got: Duration, want: Duration) -> f64 {
        (got.as_secs_f64() / want.as_secs_f64() - 1.0).abs()
    }

    #[test]
    fn s1_healthy_latencies_hit_both_quantiles_and_mirror_the_tail() {
        for tail in [Tail::LogLogistic, Tail::LogNormal] {
            let dependency = Dependency::healthy(ms(20), ms(200)).tail(tail);
            let mut samples = sample(&dependency, 200_000);
            let p50 = quantile(&mut samples, 0.5);
            let p99 = quantile(&mut samples, 0.99);
            let p01 = quantile(&mut samples, 0.01);
            assert!(relative_error(p50, ms(20)) < 0.02, "{tail:?} p50 {p50:?}");
            assert!(relative_error(p99, ms(200)) < 0.05, "{tail:?} p99 {p99:?}");
            assert!(relative_error(p01, ms(2)) < 0.05, "{tail:?} p01 {p01:?}");
        }
        // The exact quantile draws land exactly on the fitted values.
        let dependency = Dependency::healthy(ms(20), ms(200));
        assert!((dependency.spread(0.5) - 1.0).abs() < 1e-12);
        assert!((dependency.spread(0.99) - 10.0).abs() < 1e-9);
        assert!((dependency.spread(0.01) - 0.1).abs() < 1e-9);
        let lognormal = dependency.tail(Tail::LogNormal);
        assert!((lognormal.spread(0.99) - 10.0).abs() < 1e-9);
    }

    #[test]
    fn s1_the_tail_is_capped_at_the_99_99th_percentile() {
        let dependency = Dependency::healthy(ms(20), ms(200));
        let top = dependency.spread(0.999_999_9);
        assert_eq!(top, dependency.spread(1.0 - TAIL_CAP));
        assert!(top > 90.0 && top < 110.0, "{top}");
        assert_eq!(
            Dependency::healthy(ms(20), ms(20)).spread(0.999),
            1.0,
            "equal quantiles mean no spread"
        );
    }

    #[test]
    fn s1_a_brownout_multiplies_latency_inside_its_window_only() {
        let dependency = Dependency::healthy(ms(20), ms(20)).brownout(ms(30_000), 8.0, ms(60_000));
        let mut rng = SplitMix64::new(1);
        let at = |s: u64, rng: &mut SplitMix64| dependency.serve(ms(s), 1, rng).latency;
        assert_eq!(at(29_999, &mut rng), ms(20));
        assert_eq!(at(30_000, &mut rng), ms(160));
        assert_eq!(at(89_999, &mut rng), ms(160));
        assert_eq!(at(90_000, &mut rng), ms(20));
    }

    #[test]
    fn outage_fails_at_once_and_capacity_queues_then_sheds() {
        let dependency = Dependency::healthy(ms(10), ms(10))
            .outage(ms(1_000), ms(1_000))
            .capacity(100);
        let mut rng = SplitMix64::new(1);
        let down = dependency.serve(ms(1_500), 1, &mut rng);
        assert_eq!((down.latency, down.fails), (Duration::ZERO, true));
        assert_eq!(dependency.serve(ms(0), 100, &mut rng).latency, ms(10));
        assert_eq!(dependency.serve(ms(0), 200, &mut rng).latency, ms(20));
        assert_eq!(dependency.serve(ms(0), 300, &mut rng).latency, ms(30));
        assert!(dependency.serve(ms(0), 301, &mut rng).fails);
    }

    #[test]
    fn d3_workers_answer_after_the_wait_and_refuse_at_the_door() {
        let dependency = Dependency::healthy(ms(10), ms(10))
            .brownout(ms(1_000), 5.0, ms(1_000))
            .outage(ms(5_000), ms(1_000))
            .workers(1, 1);
        let mut pool = dependency.pool().unwrap();
        let mut rng = SplitMix64::new(1);
        let mut at = |s: u64| dependency.serve_from(&mut pool, ms(s), &mut rng);
        assert_eq!(at(0), (answer(ms(10)), Admission::Booked));
        assert_eq!(at(5), (answer(ms(15)), Admission::Booked), "waits 5 ms");
        assert_eq!(
            at(6),
            (Answer::FAILED, Admission::Shed),
            "the queue holds one"
        );
        // Work that a worker takes inside the brownout is slower, whenever it arrived.
        assert_eq!(at(990), (answer(ms(10)), Admission::Booked));
        assert_eq!(
            at(995),
            (answer(ms(55)), Admission::Booked),
            "5 ms + 5 × 10 ms"
        );
        assert_eq!(at(5_500), (Answer::FAILED, Admission::Down));
        // Whatever the pool decides, two numbers are drawn, as `serve` draws them.
        let mut twin = SplitMix64::new(1);
        for _ in 0..6 {
            dependency.serve(ms(0), 1, &mut twin);
        }
        assert_eq!(rng.next_u64(), twin.next_u64());
    }

    fn answer(latency: Duration) -> Answer {
        Answer {
            latency,
            fails: false,
        }
    }

    #[test]
    fn failing_fails_about_that_fraction_after_the_latency() {
        let dependency = Dependency::healthy(ms(10), ms(10)).failing(0.25);
        let mut rng = SplitMix64::new(3);
        let answers: Vec<Answer> = (0..10_000)
            .map(|_| dependency.serve(Duration::ZERO, 1, &mut rng))
            .collect();
        let failed = answers.iter().filter(|a| a.fails).count();
        assert!((2_300..2_700).contains(&failed), "{failed}");
        assert!(answers.iter().all(|a| a.latency == ms(10)));
    }

    #[test]
    fn invalid_models_are_refused_with_a_reason() {
        let ok = Dependency::healthy(ms(20), ms(200));
        assert!(ok.validate().is_ok());
        assert!(Dependency::healthy(ms(20), ms(10)).validate().is_err());
        assert!(Dependency::healthy(Duration::ZERO, ms(10))
            .validate()
            .is_err());
        assert!(ok.clone().failing(1.5).validate().is_err());
        assert!(ok.clone().capacity(0).validate().is_err());
        assert!(ok.clone().workers(0, 10).validate().is_err());
        assert!(ok.clone().workers(1, 0).validate().is_ok());
        assert!(ok.clone().capacity(8).workers(8, 8).validate().is_err());
        assert!(ok.clone().brownout(ms(0), 0.5, ms(1)).validate().is_err());
        let error = ok.outage(ms(0), Duration::ZERO).validate().unwrap_err();
        assert_eq!(
            error.reason(),
            "a brownout or outage must last longer than zero"
        );
    }
}
