use std::time::{Duration, Instant};

use super::ceiling::AttemptCeiling;
use super::{nanos_since, period_end, LatencyWindow};
use crate::backoff::MeasuredBase;

/// The most a ceiling that learns from its cuts grows in one refresh (E7).
const MAX_GROWTH: u32 = 3;

/// What recent successful attempts say, as fitted at the last refresh. Each estimate is
/// kept as nanoseconds, as the policy publishes it to every attempt: a call holds one, and
/// reads each only where it is used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Estimate {
    pub(crate) ceiling: Nanos,
    pub(crate) measured: Nanos,
    pub(crate) typical: Nanos,
    pub(crate) hedge: Nanos,
}

impl Estimate {
    /// The measured attempt ceiling (E5), once enough samples are in.
    pub(crate) fn ceiling(&self) -> Option<Duration> {
        self.ceiling.get()
    }

    /// The latency at the measured base's quantile (K4), once enough samples are in.
    pub(crate) fn measured(&self) -> Option<Duration> {
        self.measured.get()
    }

    /// A normal attempt's duration (the median), used to see whether a retry still fits
    /// before the deadline (E6).
    pub(crate) fn typical(&self) -> Option<Duration> {
        self.typical.get()
    }

    /// The hedge's quantile of the ceiling's window (HG1), once enough samples are in.
    pub(crate) fn hedge(&self) -> Option<Duration> {
        self.hedge.get()
    }
}

impl Default for Estimate {
    fn default() -> Self {
        Self {
            ceiling: Nanos::NONE,
            measured: Nanos::NONE,
            typical: Nanos::NONE,
            hedge: Nanos::NONE,
        }
    }
}

/// An estimate in nanoseconds, `NONE` when there is none yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Nanos(pub(crate) u64);

impl Nanos {
    pub(crate) const NONE: Self = Self(u64::MAX);

    fn of(duration: Option<Duration>) -> Self {
        // Past 584 years is past any deadline: saturated one short of `NONE`.
        duration.map_or(Self::NONE, |d| {
            Self(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX - 1))
        })
    }

    fn get(self) -> Option<Duration> {
        (self != Self::NONE).then(|| Duration::from_nanos(self.0))
    }
}

/// The latency windows of one policy and the estimate fitted from them.
///
/// Fitting reads every counter of a window, so it runs once per refresh interval rather
/// than on every attempt. The windows start at the first `now` the estimate sees, and the
/// refresh intervals are counted from there: a policy built long before its first call (or
/// under another clock) fits the same slices as one built at that call.
#[derive(Debug)]
pub(crate) struct Estimates {
    ceiling: Option<AttemptCeiling>,
    measured: Option<MeasuredBase>,
    /// The quantile a hedge waits for (HG1), read from the ceiling's window.
    hedge: Option<f64>,
    refresh_nanos: u64,
    windows: Option<Windows>,
    /// When the kept fit is due to be refitted: the end of the refresh interval it was
    /// fitted in.
    refit_at: Option<Instant>,
    fitted: Estimate,
    /// Whether the ceiling learned from a cut attempt since the last fit (E7).
    cut_since_fit: bool,
}

#[derive(Debug)]
struct Windows {
    origin: Instant,
    ceiling: Option<LatencyWindow>,
    measured: Option<LatencyWindow>,
}

impl Windows {
    /// Made once, by the first instant the estimate sees: kept out of line, off the path
    /// every later attempt takes.
    #[cold]
    #[inline(never)]
    fn new(
        ceiling: Option<AttemptCeiling>,
        measured: Option<MeasuredBase>,
        hedge: bool,
        now: Instant,
    ) -> Self {
        // A hedge without a ceiling measures over the window a default ceiling would (E5).
        let ceiling = ceiling.or_else(|| hedge.then(AttemptCeiling::new));
        Self {
            origin: now,
            ceiling: ceiling
                .map(|c| LatencyWindow::new(c.window, now).with_minimum_samples(c.minimum_samples)),
            measured: measured.map(|m| {
                LatencyWindow::new(m.window(), now).with_minimum_samples(m.minimum_samples())
            }),
        }
    }
}

impl Estimates {
    pub(crate) fn new(
        ceiling: Option<AttemptCeiling>,
        measured: Option<MeasuredBase>,
        hedge: Option<f64>,
    ) -> Option<Self> {
        if ceiling.is_none() && measured.is_none() && hedge.is_none() {
            return None;
        }
        let refresh = ceiling.map_or(Duration::from_secs(1), |c| c.refresh);
        Some(Self {
            ceiling,
            measured,
            hedge,
            refresh_nanos: u64::try_from(refresh.as_nanos()).unwrap_or(u64::MAX).max(1),
            windows: None,
            refit_at: None,
            fitted: Estimate::default(),
            cut_since_fit: false,
        })
    }

    #[inline]
    fn windows(&mut self, now: Instant) -> &mut Windows {
        let (ceiling, measured, hedge) = (&self.ceiling, &self.measured, &self.hedge);
        self.windows
            .get_or_insert_with(|| Windows::new(*ceiling, *measured, hedge.is_some(), now))
    }

    pub(crate) fn record(&mut self, duration: Duration, now: Instant) {
        let windows = self.windows(now);
        if let Some(window) = &mut windows.ceiling {
            window.record(duration, now);
        }
        if let Some(window) = &mut windows.measured {
            window.record(duration, now);
        }
    }

    /// Counts an attempt the ceiling cut after `duration` as a sample of at least that long
    /// (E7), when the ceiling learns from its cuts. Only the ceiling's window takes it: the
    /// measured base (K4) describes successful attempts.
    pub(crate) fn record_cut(&mut self, duration: Duration, now: Instant) {
        if !self.ceiling.is_some_and(|c| c.learn_from_cuts) {
            return;
        }
        if let Some(window) = &mut self.windows(now).ceiling {
            window.record(duration, now);
            self.cut_since_fit = true;
        }
    }

    pub(crate) fn estimate(&mut self, now: Instant) -> Estimate {
        // A fit short of samples is not kept for the interval: the first fit with enough
        // is, so a slowdown early in an interval meets a ceiling fitted to the latency
        // before it (E5).
        let stale = self.refit_at.is_none_or(|at| now >= at);
        if stale || (self.short_of_samples() && self.enough_samples(now)) {
            let origin = self.windows(now).origin;
            let epoch = nanos_since(origin, now) / self.refresh_nanos;
            self.refit_at = Some(period_end(origin, self.refresh_nanos, epoch));
            self.fitted = self.fit(now);
            self.cut_since_fit = false;
        }
        self.fitted
    }

    /// When the windows started, once an instant has been seen.
    pub(crate) fn origin(&self) -> Option<Instant> {
        self.windows.as_ref().map(|windows| windows.origin)
    }

    /// Until when, in nanoseconds after [`origin`](Self::origin), [`estimate`](Self::estimate)
    /// returns the kept fit without looking at the windows: `0` while it lacks an estimate
    /// that is configured, which every estimate looks for.
    pub(crate) fn kept_until(&self) -> u64 {
        match (self.origin(), self.refit_at) {
            (Some(origin), Some(at)) if !self.short_of_samples() => nanos_since(origin, at),
            _ => 0,
        }
    }

    /// Whether the kept fit lacks an estimate that is configured.
    fn short_of_samples(&self) -> bool {
        (self.ceiling.is_some() && self.fitted.ceiling == Nanos::NONE)
            || (self.measured.is_some() && self.fitted.measured == Nanos::NONE)
            || (self.hedge.is_some() && self.fitted.hedge == Nanos::NONE)
    }

    /// Whether every configured window holds its minimum of samples: a cheap count, before
    /// the full fit reads every counter.
    fn enough_samples(&self, now: Instant) -> bool {
        let Some(windows) = &self.windows else {
            return false;
        };
        [&windows.ceiling, &windows.measured]
            .into_iter()
            .flatten()
            .all(|window| window.count(now) >= u64::from(window.minimum_samples()))
    }

    fn fit(&self, now: Instant) -> Estimate {
        let Some(windows) = &self.windows else {
            return Estimate::default();
        };
        let (ceiling, typical) = match (&self.ceiling, &windows.ceiling) {
            (Some(config), Some(window)) => {
                let fitted = window
                    .quantile(config.quantile, now)
                    .map(|q| config.ceiling_for(q));
                // Learning from its cuts, the ceiling climbs at most threefold per refresh: a
                // burst of cut attempts is evidence of slowness, not of how much.
                let ceiling = match (fitted, self.fitted.ceiling()) {
                    (Some(fitted), Some(before)) if self.cut_since_fit => {
                        Some(fitted.min(before.saturating_mul(MAX_GROWTH)))
                    }
                    (fitted, _) => fitted,
                };
                (ceiling, window.quantile(0.5, now))
            }
            _ => (None, None),
        };
        let hedge = match (self.hedge, &windows.ceiling) {
            (Some(quantile), Some(window)) => window.quantile(quantile, now),
            _ => None,
        };
        let measured = match (&self.measured, &windows.measured) {
            (Some(config), Some(window)) => window.quantile(config.quantile(), now),
            _ => None,
        };
        Estimate {
            ceiling: Nanos::of(ceiling),
            measured: Nanos::of(measured),
            typical: Nanos::of(typical.or(measured)),
            hedge: Nanos::of(hedge),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn e5_ceiling_applies_after_minimum_samples_and_refreshes_per_interval() {
        let start = Instant::now();
        let mut estimates = Estimates::new(Some(AttemptCeiling::default()), None, None).unwrap();
        for i in 0..19 {
            estimates.record(Duration::from_millis(100), start + Duration::from_millis(i));
        }
        assert_eq!(
            estimates
                .estimate(start + Duration::from_millis(20))
                .ceiling(),
            None
        );
        estimates.record(
            Duration::from_millis(100),
            start + Duration::from_millis(21),
        );
        // A fit short of samples is not kept: the twentieth sample brings the ceiling at once.
        let first = estimates
            .estimate(start + Duration::from_millis(22))
            .ceiling()
            .unwrap();
        let expected = 0.3; // 3 × p95 of 100 ms
        assert!(
            (first.as_secs_f64() - expected).abs() / expected < 0.05,
            "{first:?}"
        );
        // That fit is kept for the rest of the slice, whatever comes next.
        for i in 0..100 {
            estimates.record(
                Duration::from_secs(1),
                start + Duration::from_millis(30 + i),
            );
        }
        assert_eq!(
            estimates
                .estimate(start + Duration::from_millis(999))
                .ceiling(),
            Some(first)
        );
        let next = estimates
            .estimate(start + Duration::from_secs(1))
            .ceiling()
            .unwrap();
        assert!(next > first * 5, "{next:?}");
    }

    #[test]
    fn e5_frozen_slice_keeps_the_healthy_fit_through_a_slowdown() {
        let start = Instant::now();
        let ceiling = AttemptCeiling::default().refresh(Duration::from_secs(75));
        let mut estimates = Estimates::new(Some(ceiling), None, None).unwrap();
        for i in 0..100 {
            estimates.record(Duration::from_millis(20), start + Duration::from_millis(i));
        }
        let healthy = estimates
            .estimate(start + Duration::from_secs(75))
            .ceiling()
            .unwrap();
        for i in 0..1000 {
            let at = start + Duration::from_secs(76) + Duration::from_millis(i);
            estimates.record(Duration::from_millis(160), at);
        }
        assert_eq!(
            estimates
                .estimate(start + Duration::from_secs(149))
                .ceiling(),
            Some(healthy)
        );
        let refitted = estimates
            .estimate(start + Duration::from_secs(150))
            .ceiling()
            .unwrap();
        assert!(refitted > healthy * 4, "{refitted:?} vs {healthy:?}");
    }

    #[test]
    fn e5_refresh_intervals_count_from_the_first_instant_seen() {
        // Made long before it is used, as a policy built at start-up is.
        let made = Instant::now();
        let first = made + Duration::from_millis(10_500);
        let mut estimates = Estimates::new(Some(AttemptCeiling::default()), None, None).unwrap();
        for i in 0..20 {
            estimates.record(Duration::from_millis(100), first + Duration::from_millis(i));
        }
        let fitted = estimates
            .estimate(first + Duration::from_millis(20))
            .ceiling()
            .unwrap();
        for i in 0..100 {
            let at = first + Duration::from_millis(30 + i);
            estimates.record(Duration::from_secs(1), at);
        }
        // Counted from `made`, 11 s would start an interval; from the first instant seen,
        // the interval runs to 11.5 s.
        let at_eleven = made + Duration::from_secs(11);
        assert_eq!(estimates.estimate(at_eleven).ceiling(), Some(fitted));
        let refitted = estimates.estimate(first + Duration::from_secs(1)).ceiling();
        assert!(refitted.unwrap() > fitted * 5, "{refitted:?}");
    }

    #[test]
    fn no_estimator_without_a_ceiling_or_measured_base() {
        assert!(Estimates::new(None, None, None).is_none());
    }
}
