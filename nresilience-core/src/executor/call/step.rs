//! How a driver starts a [`Call`](super::Call), and the step the call tells it to take next.

use std::time::Instant;

use super::Attempt;
use crate::executor::error::RetryError;

/// How a call is started: whether it may retry at all, what it targets, and which bucket
/// funds its retries.
#[derive(Debug, Clone, Copy)]
pub struct CallOptions<'a> {
    pub(super) may_retry: bool,
    pub(super) may_hedge: bool,
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
    #[must_use]
    pub fn new() -> Self {
        Self {
            may_retry: true,
            may_hedge: true,
            marked: false,
            target: None,
            method: None,
            key: None,
        }
    }

    /// Makes this one call a single attempt (a request that cannot be replayed, a
    /// non-idempotent method) when `false`. It still deposits on success, and it is never
    /// reported as a nested retry. Defaults to `true` (the call may retry).
    #[must_use]
    pub fn may_retry(mut self, may_retry: bool) -> Self {
        self.may_retry = may_retry;
        self
    }

    /// Lets this one call hedge, when its policy hedges and it may retry (HG1). `false` keeps
    /// its attempts one at a time: a request that may be sent again after a failure but not
    /// twice at once (an opted-in POST). Defaults to `true`.
    #[must_use]
    pub fn may_hedge(mut self, may_hedge: bool) -> Self {
        self.may_hedge = may_hedge;
        self
    }

    /// The request already carries the nested-retry marker (its headers were forwarded from
    /// a request whose sender may retry it): when the call may retry, it is reported as
    /// nested, with the source `header`, even outside any nesting context. Defaults to
    /// `false`.
    #[must_use]
    pub fn marked(mut self, marked: bool) -> Self {
        self.marked = marked;
        self
    }

    /// What the call targets (a host), for the `NestedRetry` span. Defaults to none.
    #[must_use]
    pub fn target(mut self, target: &'a str) -> Self {
        self.target = Some(target);
        self
    }

    /// The call's method (an HTTP method, a gRPC path), for the `NestedRetry` span.
    /// Defaults to none.
    #[must_use]
    pub fn method(mut self, method: &'a str) -> Self {
        self.method = Some(method);
        self
    }

    /// Charges the call to the bucket of `key` (a host, say) when the policy's budget is
    /// `Automatic`: each key has a bucket of its own, so a storm against one key cannot spend
    /// the retries of another. A `Shared` budget is the one bucket whatever the key. With
    /// overload control on, the key names the dependency whose load the call's attempts
    /// count in (O1, O2). Defaults to the policy's own bucket and load.
    #[must_use]
    pub fn key(mut self, key: &'a str) -> Self {
        self.key = Some(key);
        self
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
    KeepWaiting,
    /// Nothing in flight: sleep until this instant (a backoff, or the rejection pause before a
    /// refusal), then ask [`Call::next`](crate::call::Call::next).
    Sleep(Instant),
    /// The call is over: return this.
    Done(Result<T, RetryError<E>>),
}
