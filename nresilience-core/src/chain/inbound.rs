//! What a request told the hop serving it about the call it is part of.

use std::future::Future;
use std::time::{Duration, Instant};

use std::cell::Cell;
use std::thread::LocalKey;

use crate::clock;
use crate::criticality::Criticality;
use crate::scope::{self, sealed, Scoped};

thread_local! {
    static INBOUND: Cell<Option<Inbound>> = const { Cell::new(None) };
}

impl sealed::Sealed for Inbound {
    fn slot() -> &'static LocalKey<Cell<Option<Self>>> {
        &INBOUND
    }
}

/// What the request being served said about its caller: how long the caller will still wait
/// for the answer. A server layer sets it for the handler; a retrying call started inside
/// runs with the smaller of its own deadline and this one, unless its policy opts out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Inbound {
    /// The instant the caller stops waiting.
    pub deadline: Option<Instant>,
    /// How many hops above this one made calls to reach it: `1` when its caller was the
    /// first.
    pub depth: u32,
    /// The most attempts the calls above could make to reach this hop, multiplied down the
    /// chain: `16` below two 4-attempt clients.
    pub attempts: u32,
    /// How much the caller is waiting on the answer, for policies that take it from the
    /// request ([`RetryPolicyBuilder::ambient_criticality`](crate::RetryPolicyBuilder::ambient_criticality)).
    pub criticality: Option<Criticality>,
    /// Which attempt of its caller's call the request is, from 1 (F1): a caller that does not
    /// say sent a first attempt, as gRPC reads a request without `grpc-previous-rpc-attempts`.
    pub attempt: u32,
}

impl Inbound {
    /// Nothing said: no deadline, the first hop.
    #[must_use]
    pub const fn new() -> Self {
        Self {
            deadline: None,
            depth: 0,
            attempts: 1,
            criticality: None,
            attempt: 1,
        }
    }

    /// How much the caller is waiting on the answer.
    #[must_use]
    pub const fn criticality(mut self, criticality: Option<Criticality>) -> Self {
        self.criticality = criticality;
        self
    }

    /// The instant the caller stops waiting.
    #[must_use]
    pub const fn deadline(mut self, deadline: Option<Instant>) -> Self {
        self.deadline = deadline;
        self
    }

    /// The hops above this one.
    #[must_use]
    pub const fn depth(mut self, depth: u32) -> Self {
        self.depth = depth;
        self
    }

    /// The attempts the calls above could make to reach this hop.
    #[must_use]
    pub const fn attempts(mut self, attempts: u32) -> Self {
        self.attempts = attempts;
        self
    }

    /// Which attempt of its caller's call the request is (a `0` is read as `1`).
    #[must_use]
    pub const fn attempt(mut self, attempt: u32) -> Self {
        self.attempt = if attempt == 0 { 1 } else { attempt };
        self
    }
}

impl Default for Inbound {
    fn default() -> Self {
        Self::new()
    }
}

/// What the request being served said, if this runs while serving one.
#[inline]
#[must_use]
pub fn inbound() -> Option<Inbound> {
    scope::current()
}

/// Runs `future` as the serving of a request that said `inbound`.
///
/// ```
/// use std::time::Duration;
/// use nresilience_core::chain::{self, Inbound};
/// use nresilience_core::{clock, RetryPolicy, StopReason};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
/// let policy = RetryPolicy::builder().build().unwrap(); // a 30 s deadline of its own
/// let caller_waits = clock::now() + Duration::from_millis(40);
/// let serving = async {
///     policy.execute(|_| std::future::pending::<Result<(), ()>>()).await
/// };
/// let inbound = Inbound::new().deadline(Some(caller_waits));
/// let error = chain::serving(inbound, serving).await.unwrap_err();
/// assert_eq!(error.reason(), StopReason::DeadlineExceeded);
/// assert_eq!(clock::now(), caller_waits, "gave up with its caller, not 30 s later");
/// # }
/// ```
pub fn serving<F: Future>(inbound: Inbound, future: F) -> Scoped<Inbound, F> {
    Scoped::new(inbound, future)
}

/// Like [`serving`], for the synchronous part of a service's `call`.
pub fn serving_sync<R>(inbound: Inbound, f: impl FnOnce() -> R) -> R {
    scope::sync_scope(inbound, f).0
}

/// `now` plus what the caller said it will wait.
#[must_use]
pub fn deadline_from(now: Instant, left: Duration) -> Instant {
    clock::after(now, left)
}
