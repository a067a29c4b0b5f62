//! The words a driver and its [`Call`] speak: how a call starts, the attempt it runs, and
//! the step it takes next.

use std::time::{Duration, Instant};

use crate::executor::error::RetryError;
use crate::overload::Ticket;

/// How a call is started: whether it may retry at all, what it targets, and which bucket
/// funds its retries.
#[derive(Debug, Clone, Copy)]
pub struct CallOptions<'a> {
    pub(super) may_retry: bool,
    pub(super) marked: bool,
    pub(super) target: Option<&'a str>,
    pub(super) method: Option<&'a str>,
    pub(super) key: Option<&'a str>,
}

impl Default for CallOptions<'_> {
    fn default() -> Self {
        Self::new()
    }
}

impl<'a> CallOptions<'a> {
    /// A call that may retry as far as its policy allows, charged to the policy's bucket.
    pub fn new() -> Self {
        Self {
            may_retry: true,
            marked: false,
            target: None,
            method: None,
            key: None,
        }
    }

    /// Makes this one call a single attempt (a request that cannot be replayed, a
    /// non-idempotent method) when `false`. It still deposits on success, and it is never
    /// reported as a nested retry. Defaults to `true` (the call may retry).
    pub fn may_retry(mut self, may_retry: bool) -> Self {
        self.may_retry = may_retry;
        self
    }

    /// The request already carries the nested-retry marker (its headers were forwarded from
    /// a request whose sender may retry it): when the call may retry, it is reported as
    /// nested, with the source `header`, even outside any nesting context. Defaults to
    /// `false`.
    pub fn marked(mut self, marked: bool) -> Self {
        self.marked = marked;
        self
    }

    /// What the call targets (a host), for the `NestedRetry` span. Defaults to none.
    pub fn target(mut self, target: &'a str) -> Self {
        self.target = Some(target);
        self
    }

    /// The call's method (an HTTP method, a gRPC path), for the `NestedRetry` span.
    /// Defaults to none.
    pub fn method(mut self, method: &'a str) -> Self {
        self.method = Some(method);
        self
    }

    /// Charges the call to the bucket of `key` (a host, say) when the policy's budget is
    /// `Automatic`: each key has a bucket of its own, so a storm against one key cannot spend
    /// the retries of another. A `Shared` budget is the one bucket whatever the key. With
    /// overload control on, the key names the dependency whose load the call's attempts
    /// count in (O1, O2). Defaults to the policy's own bucket and load.
    pub fn key(mut self, key: &'a str) -> Self {
        self.key = Some(key);
        self
    }
}

/// One attempt the call has admitted: the driver runs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attempt {
    pub(super) number: u32,
    pub(super) timeout: Option<Duration>,
    pub(super) cut_at: Option<Instant>,
    pub(super) started: Instant,
    /// Whether a cut at its timeout is a latency sample the ceiling learns from (E7): the
    /// measured ceiling cuts it, or a deadline (the caller's, under C2) that is above the
    /// typical attempt.
    pub(super) censors: bool,
    /// Whether its timeout is the measured ceiling: a cut there is the ceiling's guess about
    /// this attempt, not a sign that the dependency falls behind what it is sent (O5).
    pub(super) by_ceiling: bool,
    pub(super) hedge: bool,
    /// Its place in the dependency's load, when overload control is on.
    pub(super) ticket: Ticket,
}

impl Attempt {
    /// The attempt's number: 1 for the first, 2 for the first retry.
    pub fn number(&self) -> u32 {
        self.number
    }

    /// Whether this attempt is a retry or a hedge: any attempt after the first.
    pub fn is_retry(&self) -> bool {
        self.number > 1
    }

    /// Whether this attempt is a hedge, started beside attempts still in flight (HG1).
    pub fn is_hedge(&self) -> bool {
        self.hedge
    }

    /// The time this attempt may take, if bounded: the attempt timeout, the measured
    /// ceiling and the deadline, whichever comes first.
    pub fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    /// When the driver cuts the attempt, if ever: then
    /// [`Call::timed_out`](crate::call::Call::timed_out).
    pub fn cut_at(&self) -> Option<Instant> {
        self.cut_at
    }
}

/// What the driver does next.
#[derive(Debug)]
#[must_use]
pub enum Step<T, E> {
    /// Run this attempt, cut at [`Attempt::cut_at`]; then report it with
    /// [`Call::attempted`](crate::call::Call::attempted) or
    /// [`Call::timed_out`](crate::call::Call::timed_out). While it runs, ask
    /// [`Call::next`](crate::call::Call::next) again at
    /// [`Call::hedge_at`](crate::call::Call::hedge_at), if that comes first.
    Run(Attempt),
    /// Start this attempt beside the ones in flight, which go on (a hedge, HG1); report each
    /// as it answers or is cut.
    Hedge(Attempt),
    /// Nothing to start: the attempts in flight go on. Ask
    /// [`Call::next`](crate::call::Call::next) again at
    /// [`Call::hedge_at`](crate::call::Call::hedge_at), if that comes before they answer.
    InFlight,
    /// Nothing in flight: sleep until this instant (a backoff, or the rejection pause before a
    /// refusal), then ask [`Call::next`](crate::call::Call::next).
    Sleep(Instant),
    /// The call is over: return this.
    Done(Result<T, RetryError<E>>),
}
