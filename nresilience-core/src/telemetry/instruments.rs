//! The instruments a policy records into, and the series it has bound.

use std::sync::{Arc, OnceLock};

use opentelemetry::metrics::{
    BoundCounter, BoundHistogram, Counter, Gauge, Histogram, Meter, ObservableGauge,
};
use opentelemetry::{global, KeyValue, StringValue};

use super::utilization::{self, Buckets};
use super::LimitGauge;
use super::{
    ATTEMPTS, ATTEMPT_DURATION, CALLS, CALL_DURATION, CANCELLED, CAUSE, CRITICALITY, DEPENDENCY,
    DEPTH, HEDGES, NESTED_RETRIES, OUTCOME, OVERLOAD_LIMIT, OVERLOAD_REFUSALS, POLICY,
    POTENTIAL_ATTEMPTS, REASON, REJECTIONS, SECONDS, SOURCE, VERDICT,
};
use crate::criticality::Criticality;
use crate::outcome::{RejectReason, StopReason};
use crate::verdict::Verdict;

/// A verdict's series, counted and timed.
const VERDICTS: usize = 7;
/// A call's outcome: the nine stop reasons, and `cancelled`.
const OUTCOMES: usize = 11;
const REASONS: usize = 3;
const CRITICALITIES: usize = Criticality::ALL.len();

/// The instruments a policy records into, taken from the global meter provider when the
/// policy is built, and each series bound on its first recording.
pub(crate) struct Instruments {
    policy: StringValue,
    calls: Counter<u64>,
    attempts: Counter<u64>,
    rejections: Counter<u64>,
    call_duration: Histogram<f64>,
    attempt_duration: Histogram<f64>,
    nested_retries: Counter<u64>,
    hedges: Counter<u64>,
    overload_limit: Gauge<u64>,
    overload_refusals: Counter<u64>,
    /// Kept for the policy's life: the budget's gauges are observed through their callbacks.
    _budget_gauges: [ObservableGauge<f64>; 2],
    attempt_series: [OnceLock<Timed>; VERDICTS],
    /// Attempts dropped unanswered: counted, never timed, so no duration series is bound
    /// (a bound series is exported from then on, empty or not).
    cancelled_series: OnceLock<BoundCounter<u64>>,
    call_series: [[OnceLock<Timed>; CRITICALITIES]; OUTCOMES],
    rejection_series: [[OnceLock<BoundCounter<u64>>; CRITICALITIES]; REASONS],
    hedge_series: [OnceLock<BoundCounter<u64>>; 2],
}

/// A series counted and timed: calls or attempts with one set of tags.
struct Timed {
    count: BoundCounter<u64>,
    time: BoundHistogram<f64>,
}

impl Timed {
    fn bind(count: &Counter<u64>, time: &Histogram<f64>, tags: &[KeyValue]) -> Self {
        Self {
            count: count.bind(tags),
            time: time.bind(tags),
        }
    }

    #[inline]
    fn record(&self, seconds: f64) {
        self.count.add(1);
        self.time.record(seconds);
    }
}

impl Instruments {
    /// The instruments of the policy tagged `policy`, whose buckets `buckets` hands out.
    pub(crate) fn new(policy: StringValue, buckets: Arc<Buckets>) -> Self {
        let meter = global::meter("nresilience");
        Self {
            _budget_gauges: utilization::gauges(&meter, &policy, buckets),
            policy,
            calls: counter(&meter, CALLS, "calls made"),
            attempts: counter(
                &meter,
                ATTEMPTS,
                "attempts made, first attempts and retries",
            ),
            rejections: counter(&meter, REJECTIONS, "retries refused"),
            call_duration: seconds(
                &meter,
                CALL_DURATION,
                "duration of whole calls, retries and delays included",
            ),
            attempt_duration: seconds(&meter, ATTEMPT_DURATION, "duration of single attempts"),
            nested_retries: counter(
                &meter,
                NESTED_RETRIES,
                "retrying calls started inside a retrying context",
            ),
            hedges: counter(
                &meter,
                HEDGES,
                "hedged attempts sent, and those the budget suppressed",
            ),
            overload_limit: meter
                .u64_gauge(OVERLOAD_LIMIT)
                .with_description("overload control's limit on attempts in flight")
                .build(),
            overload_refusals: counter(
                &meter,
                OVERLOAD_REFUSALS,
                "calls overload control refused, by cause and dependency",
            ),
            attempt_series: Default::default(),
            cancelled_series: OnceLock::new(),
            call_series: Default::default(),
            rejection_series: Default::default(),
            hedge_series: Default::default(),
        }
    }

    fn tags(&self, key: &'static str, value: &'static str) -> [KeyValue; 2] {
        [
            KeyValue::new(POLICY, self.policy.clone()),
            KeyValue::new(key, value),
        ]
    }

    fn tags_and_criticality(
        &self,
        key: &'static str,
        value: &'static str,
        criticality: Criticality,
    ) -> [KeyValue; 3] {
        let [policy, tag] = self.tags(key, value);
        [
            policy,
            tag,
            KeyValue::new(CRITICALITY, criticality.as_str()),
        ]
    }

    #[inline]
    pub(crate) fn attempt(&self, verdict: Verdict, seconds: f64) {
        let series = &self.attempt_series[verdict_index(verdict)];
        series
            .get_or_init(|| {
                let tags = self.tags(VERDICT, verdict.as_str());
                Timed::bind(&self.attempts, &self.attempt_duration, &tags)
            })
            .record(seconds);
    }

    /// A call's end: `None` when its caller dropped it unfinished.
    #[inline]
    pub(crate) fn call(&self, outcome: Option<StopReason>, criticality: Criticality, seconds: f64) {
        let series = &self.call_series[outcome_index(outcome)][criticality as usize];
        series
            .get_or_init(|| {
                let outcome = outcome.map_or(CANCELLED, StopReason::as_str);
                let tags = self.tags_and_criticality(OUTCOME, outcome, criticality);
                Timed::bind(&self.calls, &self.call_duration, &tags)
            })
            .record(seconds);
    }

    pub(crate) fn rejection(&self, reason: RejectReason, criticality: Criticality) {
        let series = &self.rejection_series[reason_index(reason)][criticality as usize];
        series
            .get_or_init(|| {
                let tags = self.tags_and_criticality(REASON, reason.as_str(), criticality);
                self.rejections.bind(&tags)
            })
            .add(1);
    }

    /// A nested retry (N5), where its context came from, and how far the amplification
    /// reaches (C4). Not bound: depth and potential attempts take many values.
    pub(crate) fn nested(&self, source: &'static str, depth: u32, potential_attempts: u32) {
        let tags = [
            KeyValue::new(POLICY, self.policy.clone()),
            KeyValue::new(SOURCE, source),
            // i64: unsigned values reach OpenTelemetry as strings.
            KeyValue::new(DEPTH, i64::from(depth)),
            KeyValue::new(POTENTIAL_ATTEMPTS, i64::from(potential_attempts)),
        ];
        self.nested_retries.add(1, &tags);
    }

    /// Attempts dropped unanswered because another answered first (HG1): counted as
    /// attempts, with the verdict `cancelled` and no duration.
    pub(crate) fn cancelled_attempts(&self, count: u32) {
        self.cancelled_series
            .get_or_init(|| self.attempts.bind(&self.tags(VERDICT, CANCELLED)))
            .add(u64::from(count));
    }

    /// A hedge sent, or suppressed by the budget (HG2).
    pub(crate) fn hedge(&self, sent: bool) {
        let outcome = if sent { "sent" } else { "suppressed" };
        self.hedge_series[usize::from(sent)]
            .get_or_init(|| self.hedges.bind(&self.tags(OUTCOME, outcome)))
            .add(1);
    }

    /// Overload control's limit for a `dependency` (none: the policy's own), when it moved.
    /// Not bound: it moves seldom, and dependencies come and go.
    /// A call overload control refused, by `cause` (`wait` or `limit`), per dependency: on
    /// the refusal's cold path, so not bound.
    pub(crate) fn overload_refusal(
        &self,
        cause: &'static str,
        criticality: Criticality,
        dependency: Option<&std::sync::Arc<str>>,
    ) {
        let mut tags = vec![
            KeyValue::new(POLICY, self.policy.clone()),
            KeyValue::new(CAUSE, cause),
            KeyValue::new(CRITICALITY, criticality.as_str()),
        ];
        if let Some(key) = dependency {
            tags.push(KeyValue::new(
                DEPENDENCY,
                StringValue::from(std::sync::Arc::clone(key)),
            ));
        }
        self.overload_refusals.add(1, &tags);
    }

    /// Where the policy's load trackers record their limits (O4): its own tracker's series;
    /// a tracker per dependency adds its key.
    pub(crate) fn overload_limit(&self) -> LimitGauge {
        let policy = KeyValue::new(POLICY, self.policy.clone());
        LimitGauge::new(self.overload_limit.clone(), vec![policy])
    }
}

fn counter(meter: &Meter, name: &'static str, description: &'static str) -> Counter<u64> {
    meter
        .u64_counter(name)
        .with_description(description)
        .build()
}

fn seconds(meter: &Meter, name: &'static str, description: &'static str) -> Histogram<f64> {
    meter
        .f64_histogram(name)
        .with_unit("s")
        .with_description(description)
        .with_boundaries(SECONDS.to_vec())
        .build()
}

/// The series of a verdict.
const fn verdict_index(verdict: Verdict) -> usize {
    match verdict {
        Verdict::Success => 0,
        Verdict::Transient { .. } => 1,
        Verdict::Throttled { .. } => 2,
        Verdict::Permanent => 3,
        Verdict::Overloaded { .. } => 4,
        Verdict::RetriedBelow => 5,
        Verdict::Unreachable => 6,
    }
}

/// The series of a call's outcome; `None`, a call dropped unfinished, is the last.
const fn outcome_index(outcome: Option<StopReason>) -> usize {
    match outcome {
        Some(StopReason::Succeeded) => 0,
        Some(StopReason::Permanent) => 1,
        Some(StopReason::AttemptsExhausted) => 2,
        Some(StopReason::BudgetExhausted) => 3,
        Some(StopReason::BreakerOpen) => 4,
        Some(StopReason::DeadlineExceeded) => 5,
        Some(StopReason::Overloaded) => 6,
        Some(StopReason::RetriedBelow) => 7,
        Some(StopReason::Saturated) => 8,
        Some(StopReason::NotReplayable) => 9,
        None => OUTCOMES - 1,
    }
}

const fn reason_index(reason: RejectReason) -> usize {
    match reason {
        RejectReason::BudgetExhausted => 0,
        RejectReason::BreakerOpen => 1,
        RejectReason::Saturated => 2,
    }
}

impl std::fmt::Debug for Instruments {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Instruments")
            .field("policy", &self.policy.as_str())
            .finish_non_exhaustive()
    }
}
