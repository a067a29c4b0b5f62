use std::fmt;
use std::time::Duration;

/// One second of a run, for plotting.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Second {
    /// Calls started in this second.
    pub calls: u64,
    /// Attempts that reached the dependency, counted in the second they started.
    pub attempts: u64,
    /// Calls started in this second that did not succeed.
    pub failed: u64,
    /// The most attempts waiting for a worker at once in this second, those whose caller had
    /// left included; `0` unless the dependency has [`workers`](super::Dependency::workers).
    pub queue: u64,
    /// Attempts the dependency's full queue refused at once in this second; `0` unless it has
    /// [`workers`](super::Dependency::workers).
    pub shed: u64,
}

/// What one policy of the simulated chain, or one client of the simulated fleet, did; a
/// single-policy run has one.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct HopReport {
    /// Calls made under this policy.
    pub calls: u64,
    /// Calls that succeeded.
    pub succeeded: u64,
    /// Attempts this policy sent to the next hop (the dependency, for the last one).
    pub attempts: u64,
    /// Attempts this policy cut (attempt timeout, measured ceiling, deadline) before they were
    /// answered.
    pub attempts_cut: u64,
    /// Calls the retry budget ended by refusing a retry.
    pub budget_refusals: u64,
    /// Calls overload control ended by not sending an attempt (O1, O2).
    pub saturated: u64,
    /// The worst second's attempts per call started under this policy.
    pub amplification: f64,
}

impl HopReport {
    /// Attempts this policy sent / calls made under it.
    #[must_use]
    pub fn load_multiplier(&self) -> f64 {
        load_multiplier(self.attempts, self.calls)
    }
}

/// What a simulation measured. The same seed gives the same report, to the last byte of its
/// `Debug` and `Display` output and of every field.
///
/// The ratios: [`load_multiplier`](Self::load_multiplier) is attempts reaching
/// the dependency per call; `amplification` is the same ratio in the worst one-second bucket
/// (attempts counted in the second they started, calls in the second they arrived);
/// [`availability`](Self::availability) is succeeded / calls.
#[derive(Clone, PartialEq)]
#[non_exhaustive]
pub struct SimulationReport {
    /// The seed the run was drawn from.
    pub seed: u64,
    /// How long load was offered; calls in flight at the end were allowed to finish.
    pub duration: Duration,
    /// Calls the load started (into a chain's first policy, or into every fleet member).
    pub calls: u64,
    /// Calls that ended in success.
    pub succeeded: u64,
    /// Attempts that reached the dependency, from every hop's (or member's) retries together.
    pub attempts: u64,
    /// Attempts at the dependency that the policies calling it (a chain's last, every fleet
    /// member) cut before it answered.
    pub attempts_cut: u64,
    /// Calls ended by a budget refusal, at every hop.
    pub budget_refusals: u64,
    /// Calls ended by overload control, at every hop (O1, O2).
    pub saturated: u64,
    /// Attempts reaching the dependency per call started, in the worst second of the run
    /// (seconds in which no call started are skipped).
    pub amplification: f64,
    /// When the worst second began, from the start of the run.
    pub worst_second: Option<Duration>,
    /// Every second of the run and of the drain after it, in order.
    pub seconds: Vec<Second>,
    /// One entry per policy: a chain's caller first, a fleet's members in their order.
    pub hops: Vec<HopReport>,
    /// Every call's latency, sorted.
    latencies: Vec<Duration>,
}

/// The run's calls (from the load) and attempts (at the dependency), whatever the shape.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Totals {
    pub(super) calls: u64,
    pub(super) succeeded: u64,
    pub(super) attempts: u64,
    pub(super) attempts_cut: u64,
}

impl SimulationReport {
    pub(super) fn new(
        seed: u64,
        duration: Duration,
        hops: Vec<HopReport>,
        totals: Totals,
        seconds: Vec<Second>,
        mut latencies: Vec<Duration>,
    ) -> Self {
        latencies.sort_unstable();
        let (amplification, worst) =
            worst_second(seconds.iter().map(|s| (s.calls, s.attempts)), duration);
        Self {
            seed,
            duration,
            calls: totals.calls,
            succeeded: totals.succeeded,
            attempts: totals.attempts,
            attempts_cut: totals.attempts_cut,
            budget_refusals: hops.iter().map(|h| h.budget_refusals).sum(),
            saturated: hops.iter().map(|h| h.saturated).sum(),
            amplification,
            worst_second: worst.map(|second| Duration::from_secs(second as u64)),
            seconds,
            hops,
            latencies,
        }
    }

    /// Calls that did not succeed.
    #[must_use]
    pub fn failed(&self) -> u64 {
        self.calls - self.succeeded
    }

    /// Succeeded / calls; `0` for a run without calls.
    #[must_use]
    pub fn availability(&self) -> f64 {
        ratio(self.succeeded, self.calls)
    }

    /// Attempts reaching the dependency / calls; `1` is a policy that retried nothing.
    #[must_use]
    pub fn load_multiplier(&self) -> f64 {
        load_multiplier(self.attempts, self.calls)
    }

    /// The caller-observed latency of calls at quantile `q` (clamped to `[0, 1]`), by nearest
    /// rank over every call: each retry and backoff the call served is in it. Zero for a run
    /// without calls.
    #[must_use]
    pub fn latency(&self, q: f64) -> Duration {
        if self.latencies.is_empty() || q.is_nan() {
            return Duration::ZERO;
        }
        let n = self.latencies.len();
        let rank = ((q.clamp(0.0, 1.0) * n as f64).ceil() as usize).clamp(1, n);
        self.latencies[rank - 1]
    }
}

/// The worst ratio of attempts to calls over the seconds of a run that started calls, and
/// which second it was (the earliest of equals).
pub(super) fn worst_second(
    seconds: impl Iterator<Item = (u64, u64)>,
    duration: Duration,
) -> (f64, Option<usize>) {
    let in_run = usize::try_from(duration.as_millis().div_ceil(1_000)).unwrap_or(usize::MAX);
    let mut worst = (0.0, None);
    for (second, (calls, attempts)) in seconds.enumerate().take(in_run) {
        if calls == 0 {
            continue;
        }
        let amplification = load_multiplier(attempts, calls);
        if worst.1.is_none() || amplification > worst.0 {
            worst = (amplification, Some(second));
        }
    }
    worst
}

/// The load multiplier of `attempts` made for `calls`: attempts per call, `1` for calls that
/// retried nothing, `0` without calls. A report's, a hop's, or that of any share of a run.
#[must_use]
pub fn load_multiplier(attempts: u64, calls: u64) -> f64 {
    ratio(attempts, calls)
}

fn ratio(numerator: u64, denominator: u64) -> f64 {
    if denominator == 0 {
        0.0
    } else {
        numerator as f64 / denominator as f64
    }
}

impl fmt::Debug for SimulationReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimulationReport")
            .field("seed", &self.seed)
            .field("duration", &self.duration)
            .field("calls", &self.calls)
            .field("succeeded", &self.succeeded)
            .field("attempts", &self.attempts)
            .field("attempts_cut", &self.attempts_cut)
            .field("budget_refusals", &self.budget_refusals)
            .field("saturated", &self.saturated)
            .field("amplification", &self.amplification)
            .field("worst_second", &self.worst_second)
            .field("latency_p50", &self.latency(0.5))
            .field("latency_p99", &self.latency(0.99))
            .field("seconds", &self.seconds.len())
            .field("hops", &self.hops)
            .finish_non_exhaustive()
    }
}

impl fmt::Display for SimulationReport {
    /// One measurement a line, fixed format.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "simulation seed {} over {:?}", self.seed, self.duration)?;
        writeln!(f, "  calls            {}", self.calls)?;
        writeln!(f, "  succeeded        {}", self.succeeded)?;
        writeln!(f, "  failed           {}", self.failed())?;
        writeln!(f, "  availability     {:.4}", self.availability())?;
        writeln!(f, "  load multiplier  {:.3}", self.load_multiplier())?;
        write!(f, "  amplification    {:.3}", self.amplification)?;
        match self.worst_second {
            Some(at) => writeln!(f, " (the second from {at:?})")?,
            None => writeln!(f)?,
        }
        writeln!(f, "  latency p50      {:?}", self.latency(0.5))?;
        writeln!(f, "  latency p99      {:?}", self.latency(0.99))?;
        writeln!(f, "  attempts cut     {}", self.attempts_cut)?;
        writeln!(f, "  budget refusals  {}", self.budget_refusals)?;
        if self.saturated > 0 {
            writeln!(f, "  saturated        {}", self.saturated)?;
        }
        if self.hops.len() > 1 {
            for (n, hop) in self.hops.iter().enumerate() {
                writeln!(
                    f,
                    "  hop {}            calls {}, succeeded {}, attempts {}, cut {}, refusals {}, amplification {:.3}",
                    n + 1,
                    hop.calls,
                    hop.succeeded,
                    hop.attempts,
                    hop.attempts_cut,
                    hop.budget_refusals,
                    hop.amplification
                )?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s1_amplification_is_the_worst_second_that_started_calls() {
        let seconds = [(10, 11), (0, 40), (10, 21), (10, 21), (5, 50)];
        // The last second is past a 4-second run: drained retries, not the run's.
        let (worst, at) = worst_second(seconds.into_iter(), Duration::from_secs(4));
        assert_eq!((worst, at), (2.1, Some(2)));
        assert_eq!(
            worst_second(std::iter::empty(), Duration::from_secs(4)),
            (0.0, None)
        );
    }

    #[test]
    fn latency_is_by_nearest_rank() {
        let ms = Duration::from_millis;
        let report = SimulationReport::new(
            1,
            Duration::from_secs(1),
            Vec::new(),
            Totals::default(),
            Vec::new(),
            (1..=100).rev().map(ms).collect(),
        );
        assert_eq!(report.latency(0.5), ms(50));
        assert_eq!(report.latency(0.99), ms(99));
        assert_eq!(report.latency(0.0), ms(1));
        assert_eq!(report.latency(7.0), ms(100));
        assert_eq!(report.availability(), 0.0);
    }
}
