//! What a [`LoadTracker`](super::LoadTracker) answers: an attempt admitted with what it knew
//! of the dependency, or refused and why; and how the dependency answered an attempt.

// Public items for the `test-support` feature's re-exports; without it they reach no user.
#![cfg_attr(not(feature = "test-support"), allow(unreachable_pub))]

use std::time::Duration;

use super::window::nanos;

/// An attempt's place in a [`LoadTracker`](super::LoadTracker): hand it back when the attempt ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Ticket {
    pub(super) seq: u64,
}

/// An attempt a [`LoadTracker`](super::LoadTracker) admitted, and what it knew of the dependency then.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Admission {
    /// Its place: hand it back when the attempt ends.
    pub ticket: Ticket,
    /// The expected wait in nanoseconds, [`UNKNOWN_WAIT`] while the tracker cannot tell: as
    /// the tracker counts it, with no conversion on the attempt's way out.
    pub(super) wait: u64,
    pub(super) finishing_nothing: bool,
}

/// [`Admission`]'s wait when the tracker cannot tell; every wait it tells is far below.
pub(super) const UNKNOWN_WAIT: u64 = u64::MAX;

impl Admission {
    /// The attempt's expected wait when it was admitted, once the tracker can tell: the
    /// attempts ahead over the rate the dependency finishes them. `None` while it cannot, and
    /// while the dependency finishes none (a stall is not a queue).
    #[cfg(any(test, feature = "test-support"))]
    #[must_use]
    pub fn expected_wait(&self) -> Option<Duration> {
        self.known_wait()
    }

    fn known_wait(&self) -> Option<Duration> {
        (self.wait != UNKNOWN_WAIT).then(|| Duration::from_nanos(self.wait))
    }

    /// Whether the dependency's load, not the attempt, would be what makes it slower than
    /// `ceiling`: the attempts ahead take longer than that to finish, or it finishes nothing
    /// for anyone — attempts beside this one awaited, and nothing served over the window, a
    /// stall or a dependency answering errors only (a full queue's refusals among them). A
    /// measured attempt ceiling then cuts work the dependency will do anyway, or a retry that
    /// meets the same stall, and the retry queues behind it: the measured ceiling (E5) must not
    /// cut what the expected wait (O1) says is queueing. One attempt stuck alone — admitted
    /// while nothing else was awaited — is still cut, and so is one slowed by work the
    /// dependency does for it alone (its own retries below), even after the dependency
    /// answered with the overload signal: a signal that says not to retry a refusal is not a
    /// measure of how long served attempts take. One admitted beside others at a dependency
    /// that serves nothing is not cut, stuck or not: its retry would be served no better.
    #[must_use]
    #[inline]
    pub fn outlasts(&self, ceiling: Duration) -> bool {
        self.finishing_nothing || (self.wait != UNKNOWN_WAIT && self.wait > nanos(ceiling))
    }

    /// How long the measured `ceiling` lets the attempt run, given how long a `typical`
    /// attempt takes (E5, O1): `None`, no bound from it, when the dependency's load
    /// [`outlasts`](Self::outlasts) it; else the ceiling plus the part of the expected wait
    /// beyond a typical attempt (all of it when there is no typical attempt yet). The ceiling
    /// is a quantile of past successes, refreshed at most once a second; the expected wait
    /// counts the attempts held now at the rate they finish now. A dependency turning slower,
    /// or work ahead of the attempt, shows in the wait first: an attempt that takes as long as
    /// the work ahead of it makes it take is not stuck. In health the wait is about a mean
    /// attempt (Little's law: the attempts held over the rate they finish), so a heavy tail
    /// lengthens the ceiling by about its mean less its median.
    #[must_use]
    #[inline]
    pub fn ceiling(&self, ceiling: Duration, typical: Option<Duration>) -> Option<Duration> {
        if self.outlasts(ceiling) {
            return None;
        }
        let beyond = self
            .known_wait()
            .and_then(|wait| wait.checked_sub(typical.unwrap_or_default()));
        Some(beyond.map_or(ceiling, |beyond| ceiling.saturating_add(beyond)))
    }
}

/// What an answer says of the dependency's load.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Answer {
    /// It did the work: a success, or an answer no retry changes.
    Served,
    /// It answered without the work: an error, the overload signal, a throttle. Nothing about
    /// how fast it works.
    Unserved,
}

/// Why an attempt was not sent, and when the dependency should have room again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Saturated {
    /// How long the attempts ahead are expected to take to finish: the hint for callers.
    pub retry_after: Duration,
    /// What refused it.
    pub cause: SaturatedBy,
    /// Refused by the limit: how soon room is expected for it, the attempts ahead of it
    /// finishing at the pace its expected wait counts on (O1, O7) — or, once the dependency
    /// serves the calls that waited through a stall, as fast as the limit's attempts finish
    /// at the latency seen lately, when that is sooner.
    pub room_in: Option<Duration>,
}

/// What refused an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SaturatedBy {
    /// Its expected wait was longer than the time its call had left (O1).
    Wait,
    /// The attempts in flight had reached the adaptive limit (O2).
    Limit,
}
