//! Metric names and instruments.
//!
//! Recorded through the `opentelemetry` metrics API, which is a no-op until the application
//! installs a meter provider. Instruments are taken from the global provider when a policy is
//! built, so install the provider before building policies.
//!
//! # What a recording costs
//!
//! A recording with attributes costs the SDK a hash of the whole attribute set to find its
//! series, more than the rest of a call. Each series a policy records into is bound once, on
//! its first recording, with OpenTelemetry's bound instruments: from then on a recording is a
//! few atomic operations. The budget's gauge is observed when the reader collects, so it costs
//! a call nothing and exists from the first collection.
//!
//! Bound instruments are an experimental part of `opentelemetry` 0.33, implemented by
//! `opentelemetry_sdk` behind its feature `experimental_metrics_bound_instruments`, which this
//! crate turns on. A meter provider that does not implement binding records nothing from
//! this crate's counters and histograms.

mod admission;
mod fleet;
mod instruments;
mod limit;
mod utilization;

pub(crate) use admission::AdmissionInstruments;
pub use fleet::FleetGauges;
pub(crate) use instruments::Instruments;
pub(crate) use limit::LimitGauge;

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
/// Gauge of the budget's utilization, 0 (full) to 1 (empty), observed at every collection for
/// every policy with a budget: the policy's own bucket tagged with the policy, each keyed
/// bucket with the policy and its [`DEPENDENCY`].
pub const BUDGET_UTILIZATION: &str = "nresilience.budget.utilization";
/// Gauge of the share of its own retry budget each client uses as its dependency advises
/// (F3): 1 (the whole budget, and what a dependency that advises nothing leaves) to 0, tagged
/// like [`BUDGET_UTILIZATION`].
pub const BUDGET_ALLOWANCE: &str = "nresilience.budget.allowance";
/// Counter of calls overload control refused (O1, O2), tagged with policy, [`CAUSE`] (`wait`:
/// the expected wait outlasted the call; `limit`: no room under the limit), criticality and
/// dependency.
pub const OVERLOAD_REFUSALS: &str = "nresilience.overload.refusals";
/// Counter of policies with budgets of their own built past 100 a second: budgets built one
/// per call, which bound nothing (reported once as a `tracing` warning too).
pub const PER_CALL_BUDGETS: &str = "nresilience.budget.per_call";
/// Gauge of overload control's adaptive limit on attempts in flight, per dependency (O2, O4).
pub const OVERLOAD_LIMIT: &str = "nresilience.overload.limit";

/// Gauge of the retries per first attempt reaching a service, as its [`FleetGauges`] last
/// read them (F2).
pub const FLEET_RETRIES: &str = "nresilience.fleet.retries";
/// Gauge of the retries per first attempt a service accepts (F2).
pub const FLEET_ACCEPTED: &str = "nresilience.fleet.accepted";
/// Gauge of the share of their own retry budgets a service advises its callers (F2).
pub const FLEET_ALLOWANCE: &str = "nresilience.fleet.allowance";
/// Counter of the requests a service's admission refused (F4), tagged with [`CAUSE`],
/// [`ATTEMPT_KIND`] and [`CRITICALITY`].
pub const ADMISSION_REFUSALS: &str = "nresilience.admission.refusals";
/// Gauge of a service's admission limit on requests in its handlers (F4), recorded when it
/// moves.
pub const ADMISSION_LIMIT: &str = "nresilience.admission.limit";

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
/// Tag: the dependency a call's attempts count in (its H5 key, a host), on overload control's
/// limit and on the utilization of a keyed budget's buckets.
pub const DEPENDENCY: &str = "nresilience.dependency";
/// Tag: what refused a call at overload control (`wait`, `limit`; O1, O2) or a request at a
/// service's admission (`deadline`, `wait`, `limit`, `shed`; F4).
pub const CAUSE: &str = "nresilience.cause";
/// Tag: whether a request was a first attempt or a retry (`first`, `retry`; F1).
pub const ATTEMPT_KIND: &str = "nresilience.attempt";
/// Tag: a nested retry's depth in the chain (C4).
pub const DEPTH: &str = "nresilience.nesting.depth";
/// Tag: the attempts that could reach the dependency through a nested retry and the calls
/// above it (C4).
pub const POTENTIAL_ATTEMPTS: &str = "nresilience.potential_attempts";

/// The duration histograms' bucket boundaries in seconds, as OpenTelemetry's HTTP
/// conventions advise for request durations: the SDK's default boundaries (0 to 10,000) are
/// for milliseconds and would put every call in the first bucket.
pub(crate) const SECONDS: [f64; 14] = [
    0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
];

/// The outcome tag of a call whose caller dropped it before it stopped.
pub(crate) const CANCELLED: &str = "cancelled";
