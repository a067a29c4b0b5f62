//! What the chain counts: requests at each hop per second, calls and how they ended, db's
//! queue, refusals, nested retries.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

/// The three hops, top to bottom.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hop {
    /// Receives the users' traffic, calls the backend.
    Frontend,
    /// Calls the db.
    Backend,
    /// The bottom: answers, or fails during the fault window.
    Db,
}

impl Hop {
    /// Every hop, top to bottom.
    pub const ALL: [Self; 3] = [Self::Frontend, Self::Backend, Self::Db];

    /// The hop's name, also its policy's and its service's name.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Frontend => "frontend",
            Self::Backend => "backend",
            Self::Db => "db",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Counters shared by the hops, the load driver and the reporter.
#[derive(Debug)]
pub struct Stats {
    started: Instant,
    /// Requests received, per hop, per second since `started`.
    received: [Mutex<Vec<u64>>; 3],
    /// Calls the users started, per second.
    calls: Mutex<Vec<u64>>,
    succeeded: AtomicU64,
    failed: AtomicU64,
    /// Users' calls that ended each second, and how many of them succeeded.
    ended: Mutex<Vec<u64>>,
    ended_ok: Mutex<Vec<u64>>,
    /// Users' calls that succeeded, by the second they started in.
    started_ok: Mutex<Vec<u64>>,
    /// db's longest queue each second.
    db_queue: Mutex<Vec<u64>>,
    /// Queries db refused each second, its queue full.
    db_refused: Mutex<Vec<u64>>,
    refusals: [AtomicU64; 3],
    /// Retries refused by a budget, per second at every hop.
    refusals_per_second: Mutex<Vec<u64>>,
    /// Calls overload control ended, per hop, and per second at every hop.
    saturated: [AtomicU64; 3],
    saturated_per_second: Mutex<Vec<u64>>,
    nested: [AtomicU64; 3],
    potential_attempts: [AtomicU64; 3],
}

impl Stats {
    /// Counters starting now.
    #[must_use]
    pub fn new() -> Self {
        Self {
            started: Instant::now(),
            received: Default::default(),
            calls: Mutex::default(),
            succeeded: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            ended: Mutex::default(),
            ended_ok: Mutex::default(),
            started_ok: Mutex::default(),
            db_queue: Mutex::default(),
            db_refused: Mutex::default(),
            refusals: Default::default(),
            refusals_per_second: Mutex::default(),
            saturated: Default::default(),
            saturated_per_second: Mutex::default(),
            nested: Default::default(),
            potential_attempts: Default::default(),
        }
    }

    /// The time since the start.
    pub fn elapsed(&self) -> std::time::Duration {
        self.started.elapsed()
    }

    /// The second since the start.
    pub fn second(&self) -> usize {
        self.started.elapsed().as_secs() as usize
    }

    fn bump(series: &Mutex<Vec<u64>>, second: usize) {
        Self::update(series, second, |count| *count += 1);
    }

    fn update(series: &Mutex<Vec<u64>>, second: usize, change: impl FnOnce(&mut u64)) {
        let mut series = series.lock().unwrap_or_else(|e| e.into_inner());
        if series.len() <= second {
            series.resize(second + 1, 0);
        }
        change(&mut series[second]);
    }

    fn at(series: &Mutex<Vec<u64>>, second: usize) -> u64 {
        let series = series.lock().unwrap_or_else(|e| e.into_inner());
        series.get(second).copied().unwrap_or(0)
    }

    /// db's queue is `depth` long.
    pub fn db_queue(&self, depth: u64) {
        Self::update(&self.db_queue, self.second(), |peak| {
            *peak = (*peak).max(depth)
        });
    }

    /// db refused a query, its queue full.
    pub fn db_refused(&self) {
        Self::bump(&self.db_refused, self.second());
    }

    /// db's longest queue in `second`.
    pub fn db_queue_in(&self, second: usize) -> u64 {
        Self::at(&self.db_queue, second)
    }

    /// Queries db refused in `second`, its queue full.
    pub fn db_refused_in(&self, second: usize) -> u64 {
        Self::at(&self.db_refused, second)
    }

    /// db's longest queue in the whole run.
    pub fn db_queue_peak(&self) -> u64 {
        let series = self.db_queue.lock().unwrap_or_else(|e| e.into_inner());
        series.iter().copied().max().unwrap_or(0)
    }

    /// Queries db refused in the whole run.
    pub fn db_refused_total(&self) -> u64 {
        let series = self.db_refused.lock().unwrap_or_else(|e| e.into_inner());
        series.iter().sum()
    }

    /// A request reached `hop`.
    pub fn received(&self, hop: Hop) {
        Self::bump(&self.received[hop.index()], self.second());
    }

    /// A user started a call.
    pub fn call_started(&self) {
        self.call_started_in(self.second());
    }

    /// A user started a call in `second`, read by the caller.
    pub fn call_started_in(&self, second: usize) {
        Self::bump(&self.calls, second);
    }

    /// A user's call that started in `started` (a [`second`](Self::second)) ended.
    pub fn call_ended(&self, started: usize, succeeded: bool) {
        let counter = if succeeded {
            &self.succeeded
        } else {
            &self.failed
        };
        counter.fetch_add(1, Ordering::Relaxed);
        let second = self.second();
        Self::bump(&self.ended, second);
        if succeeded {
            Self::bump(&self.ended_ok, second);
            Self::bump(&self.started_ok, started);
        }
    }

    /// The share of the users' calls started in `seconds` that succeeded, if any started.
    pub fn success_rate_of_started(&self, seconds: std::ops::Range<usize>) -> Option<f64> {
        let calls: u64 = seconds.clone().map(|s| self.calls_in(s)).sum();
        let ok: u64 = seconds.map(|s| Self::at(&self.started_ok, s)).sum();
        (calls > 0).then(|| ok as f64 / calls as f64)
    }

    /// The share of the users' calls that ended in `second` and succeeded, if any ended.
    pub fn success_rate_in(&self, second: usize) -> Option<f64> {
        let ended = Self::at(&self.ended, second);
        (ended > 0).then(|| Self::at(&self.ended_ok, second) as f64 / ended as f64)
    }

    /// `hop`'s budget refused a retry.
    pub fn refused(&self, hop: Hop) {
        self.refusals[hop.index()].fetch_add(1, Ordering::Relaxed);
        Self::bump(&self.refusals_per_second, self.second());
    }

    /// Retries refused by a budget in `second`, at every hop.
    pub fn refusals_in(&self, second: usize) -> u64 {
        Self::at(&self.refusals_per_second, second)
    }

    /// Overload control at `hop` ended a call: the next hop could not serve it in time (O1,
    /// O2).
    pub fn saturated(&self, hop: Hop) {
        self.saturated[hop.index()].fetch_add(1, Ordering::Relaxed);
        Self::bump(&self.saturated_per_second, self.second());
    }

    /// Calls overload control ended at `hop` in the whole run.
    pub fn saturated_total(&self, hop: Hop) -> u64 {
        self.saturated[hop.index()].load(Ordering::Relaxed)
    }

    /// Calls overload control ended in `second`, at every hop.
    pub fn saturated_in(&self, second: usize) -> u64 {
        Self::at(&self.saturated_per_second, second)
    }

    /// Counts a `NestedRetry` report at `hop`, through whose call up to `potential_attempts`
    /// attempts could reach the dependency.
    pub fn nested(&self, hop: Hop, potential_attempts: u64) {
        self.nested[hop.index()].fetch_add(1, Ordering::Relaxed);
        self.potential_attempts[hop.index()].fetch_max(potential_attempts, Ordering::Relaxed);
    }

    /// The largest potential amplification a `NestedRetry` at `hop` reported so far.
    pub fn potential_attempts(&self, hop: Hop) -> u64 {
        self.potential_attempts[hop.index()].load(Ordering::Relaxed)
    }

    /// Requests `hop` received in `second`.
    pub fn received_in(&self, hop: Hop, second: usize) -> u64 {
        Self::at(&self.received[hop.index()], second)
    }

    /// Calls started in `second`.
    pub fn calls_in(&self, second: usize) -> u64 {
        Self::at(&self.calls, second)
    }

    /// Requests `hop` received in all.
    pub fn received_total(&self, hop: Hop) -> u64 {
        let series = self.received[hop.index()]
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        series.iter().sum()
    }

    /// Calls started in all.
    pub fn calls_total(&self) -> u64 {
        self.calls
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .sum()
    }

    /// Calls that succeeded.
    pub fn succeeded(&self) -> u64 {
        self.succeeded.load(Ordering::Relaxed)
    }

    /// Calls that failed.
    pub fn failed(&self) -> u64 {
        self.failed.load(Ordering::Relaxed)
    }

    /// Retries `hop`'s budget refused.
    pub fn refusals(&self, hop: Hop) -> u64 {
        self.refusals[hop.index()].load(Ordering::Relaxed)
    }

    /// Nested retries `hop` reported.
    pub fn nested_total(&self, hop: Hop) -> u64 {
        self.nested[hop.index()].load(Ordering::Relaxed)
    }

    /// Among the first `run_seconds` seconds, the one in which db received the most requests
    /// per user call, and that multiple. Later seconds hold only the tail of the calls still in
    /// flight, a handful of calls whose retries would read as a storm.
    pub fn worst_db_second(&self, run_seconds: usize) -> Option<(usize, f64)> {
        let seconds = self.received[Hop::Db.index()]
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .len()
            .min(run_seconds);
        (0..seconds)
            .filter(|&s| self.calls_in(s) > 0)
            .map(|s| {
                (
                    s,
                    self.received_in(Hop::Db, s) as f64 / self.calls_in(s) as f64,
                )
            })
            .max_by(|a, b| a.1.total_cmp(&b.1))
    }
}

impl Default for Stats {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn d4_the_users_success_rate_is_counted_per_second_of_ending() {
        let stats = Stats::new();
        for succeeded in [true, true, true, false] {
            stats.call_started();
            stats.call_ended(0, succeeded);
        }
        // All four ended in the run's first second (the test takes far less than one).
        assert_eq!(stats.success_rate_in(0), Some(0.75));
        assert_eq!(stats.success_rate_in(5), None, "no call ended then");
        assert_eq!(stats.success_rate_of_started(0..3), Some(0.75));
        assert_eq!(
            stats.success_rate_of_started(1..3),
            None,
            "no call started then"
        );
    }

    #[test]
    fn d4_db_queue_keeps_each_seconds_peak() {
        let stats = Stats::new();
        for depth in [3, 9, 4] {
            stats.db_queue(depth);
        }
        stats.db_refused();
        assert_eq!(stats.db_queue_in(0), 9);
        assert_eq!(stats.db_queue_peak(), 9);
        assert_eq!(stats.db_refused_total(), 1);
    }
}
