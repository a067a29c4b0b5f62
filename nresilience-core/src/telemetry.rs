//! Metric names and instruments.
//!
//! Recorded through the `opentelemetry` metrics API, which is a no-op until the application
//! installs a meter provider. Instruments are taken from the global provider when a policy is
//! built, so install the provider before building policies.

use opentelemetry::metrics::{Counter, Gauge, Histogram};
use opentelemetry::{global, KeyValue, StringValue};

use crate::criticality::Criticality;
use crate::outcome::StopReason;
use crate::verdict::Verdict;

/// Counter of calls, tagged with policy and outcome.
pub const CALLS: &str = "nresilience.calls";
/// Counter of attempts, tagged with policy and verdict; divided by [`CALLS`] it is the
/// retry fraction actually run.
pub const ATTEMPTS: &str = "nresilience.attempts";
/// Counter of refused retries, tagged with policy and reason.
pub const REJECTIONS: &str = "nresilience.rejections";
/// Histogram of whole-call durations in seconds.
pub const CALL_DURATION: &str = "nresilience.call.duration";
/// Histogram of attempt durations in seconds.
pub const ATTEMPT_DURATION: &str = "nresilience.attempt.duration";
/// Counter of retrying calls that started inside a retrying context.
pub const NESTED_RETRIES: &str = "nresilience.nested_retries";
/// Counter of hedges (HG2), tagged with policy and outcome: `sent`, or `suppressed` when
/// the budget refused one.
pub const HEDGES: &str = "nresilience.hedges";
/// Gauge of the budget's utilization, 0 (full) to 1 (empty).
pub const BUDGET_UTILIZATION: &str = "nresilience.budget.utilization";
/// Gauge of overload control's adaptive limit on attempts in flight, per dependency (O2, O4).
pub const OVERLOAD_LIMIT: &str = "nresilience.overload.limit";

/// Tag: the policy's name.
pub const POLICY: &str = "nresilience.policy";
/// Tag: an attempt's verdict (`ok`, `transient`, `throttled`, `permanent`; `cancelled` for an
/// attempt dropped because another answered first).
pub const VERDICT: &str = "nresilience.verdict";
/// Tag: a call's outcome (`succeeded`, `budget_exhausted` …).
pub const OUTCOME: &str = "nresilience.outcome";
/// Tag: why a retry was refused.
pub const REASON: &str = "nresilience.reason";
/// Tag: where a nested retry's context came from (`header`, `in_process`).
pub const SOURCE: &str = "nresilience.source";
/// Tag: how much the caller waits on a call (`critical`, `normal`, `sheddable`; C3), on
/// calls and refusals.
pub const CRITICALITY: &str = "nresilience.criticality";
/// Tag: the dependency a call's attempts count in, for overload control (its H5 key, a host).
pub const DEPENDENCY: &str = "nresilience.dependency";
/// Tag: a nested retry's depth in the chain (C4).
pub const DEPTH: &str = "nresilience.nesting.depth";
/// Tag: the attempts that could reach the dependency through a nested retry and the calls
/// above it (C4).
pub const POTENTIAL_ATTEMPTS: &str = "nresilience.potential_attempts";

/// The duration histograms' bucket boundaries in seconds, as OpenTelemetry's HTTP
/// conventions advise for request durations: the SDK's default boundaries (0 to 10,000) are
/// for milliseconds and would put every call in the first bucket.
const SECONDS: [f64; 14] = [
    0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
];

/// The verdict tag of a successful attempt.
const OK: &str = Verdict::Success.as_str();
/// The outcome tag of a successful call.
const SUCCEEDED: &str = StopReason::Succeeded.as_str();
/// The outcome tag of a call whose caller dropped it before it stopped.
pub(crate) const CANCELLED: &str = "cancelled";

/// The instruments a policy records into, taken from the global meter provider.
#[derive(Debug, Clone)]
pub(crate) struct Instruments {
    pub(crate) policy: StringValue,
    pub(crate) calls: Counter<u64>,
    pub(crate) attempts: Counter<u64>,
    pub(crate) rejections: Counter<u64>,
    pub(crate) call_duration: Histogram<f64>,
    pub(crate) attempt_duration: Histogram<f64>,
    pub(crate) nested_retries: Counter<u64>,
    pub(crate) hedges: Counter<u64>,
    pub(crate) utilization: Gauge<f64>,
    pub(crate) overload_limit: Gauge<u64>,
    /// The tags of a successful attempt and call (one per criticality), made once: building
    /// and dropping them on every call would cost more than the recordings they go to when no
    /// provider listens.
    ok_attempt: [KeyValue; 2],
    succeeded_call: [[KeyValue; 3]; 3],
}

impl Instruments {
    pub(crate) fn new(policy: StringValue) -> Self {
        let meter = global::meter("nresilience");
        let tag = |key: &'static str, value: &'static str| {
            [
                KeyValue::new(POLICY, policy.clone()),
                KeyValue::new(key, value),
            ]
        };
        let ok_attempt = tag(VERDICT, OK);
        let succeeded_call = Criticality::ALL.map(|criticality| {
            [
                KeyValue::new(POLICY, policy.clone()),
                KeyValue::new(OUTCOME, SUCCEEDED),
                KeyValue::new(CRITICALITY, criticality.as_str()),
            ]
        });
        Self {
            ok_attempt,
            succeeded_call,
            policy,
            calls: meter
                .u64_counter(CALLS)
                .with_description("calls made")
                .build(),
            attempts: meter
                .u64_counter(ATTEMPTS)
                .with_description("attempts made, first attempts and retries")
                .build(),
            rejections: meter
                .u64_counter(REJECTIONS)
                .with_description("retries refused")
                .build(),
            call_duration: meter
                .f64_histogram(CALL_DURATION)
                .with_unit("s")
                .with_description("duration of whole calls, retries and delays included")
                .with_boundaries(SECONDS.to_vec())
                .build(),
            attempt_duration: meter
                .f64_histogram(ATTEMPT_DURATION)
                .with_unit("s")
                .with_description("duration of single attempts")
                .with_boundaries(SECONDS.to_vec())
                .build(),
            nested_retries: meter
                .u64_counter(NESTED_RETRIES)
                .with_description("retrying calls started inside a retrying context")
                .build(),
            hedges: meter
                .u64_counter(HEDGES)
                .with_description("hedged attempts sent, and those the budget suppressed")
                .build(),
            utilization: meter
                .f64_gauge(BUDGET_UTILIZATION)
                .with_description("share of the retry budget spent, 0 full to 1 empty")
                .build(),
            overload_limit: meter
                .u64_gauge(OVERLOAD_LIMIT)
                .with_description("overload control's limit on attempts in flight")
                .build(),
        }
    }

    fn tag(&self, key: &'static str, value: &'static str) -> [KeyValue; 2] {
        [
            KeyValue::new(POLICY, self.policy.clone()),
            KeyValue::new(key, value),
        ]
    }

    pub(crate) fn attempt(&self, verdict: Verdict, seconds: f64) {
        let (count, time) = (&self.attempts, &self.attempt_duration);
        match verdict {
            Verdict::Success => count_and_time(count, time, &self.ok_attempt, seconds),
            _ => count_and_time(count, time, &self.tag(VERDICT, verdict.as_str()), seconds),
        }
    }

    /// A call's end: `None` when its caller dropped it unfinished.
    pub(crate) fn call(&self, outcome: Option<StopReason>, criticality: Criticality, seconds: f64) {
        let (count, time) = (&self.calls, &self.call_duration);
        let tags = |outcome: &'static str| {
            [
                KeyValue::new(POLICY, self.policy.clone()),
                KeyValue::new(OUTCOME, outcome),
                KeyValue::new(CRITICALITY, criticality.as_str()),
            ]
        };
        match outcome {
            Some(StopReason::Succeeded) => {
                let tags = &self.succeeded_call[criticality as usize];
                count_and_time(count, time, tags, seconds)
            }
            Some(reason) => count_and_time(count, time, &tags(reason.as_str()), seconds),
            None => count_and_time(count, time, &tags(CANCELLED), seconds),
        }
    }

    pub(crate) fn rejection(&self, reason: &'static str, criticality: Criticality) {
        let tags = [
            KeyValue::new(POLICY, self.policy.clone()),
            KeyValue::new(REASON, reason),
            KeyValue::new(CRITICALITY, criticality.as_str()),
        ];
        self.rejections.add(1, &tags);
    }

    /// A nested retry (N5), where its context came from, and how far the amplification
    /// reaches (C4).
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
        self.attempts
            .add(u64::from(count), &self.tag(VERDICT, CANCELLED));
    }

    /// A hedge sent, or suppressed by the budget (HG2).
    pub(crate) fn hedge(&self, sent: bool) {
        let outcome = if sent { "sent" } else { "suppressed" };
        self.hedges.add(1, &self.tag(OUTCOME, outcome));
    }

    /// Overload control's limit for a `dependency` (none: the policy's own), when it moved.
    pub(crate) fn overload_limit(&self, limit: u32, dependency: Option<&std::sync::Arc<str>>) {
        let policy = KeyValue::new(POLICY, self.policy.clone());
        match dependency {
            Some(key) => {
                let key = KeyValue::new(DEPENDENCY, StringValue::from(std::sync::Arc::clone(key)));
                self.overload_limit.record(u64::from(limit), &[policy, key]);
            }
            None => self.overload_limit.record(u64::from(limit), &[policy]),
        }
    }

    pub(crate) fn utilization(&self, utilization: f64) {
        self.utilization
            .record(utilization, &[KeyValue::new(POLICY, self.policy.clone())]);
    }
}

fn count_and_time(count: &Counter<u64>, time: &Histogram<f64>, tags: &[KeyValue], seconds: f64) {
    count.add(1, tags);
    time.record(seconds, tags);
}
