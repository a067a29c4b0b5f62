//! The calls waiting for room under a dependency's limit, in the order room goes to them
//! (O7).
//!
//! An attempt the limit refuses need not fail at once: its call may wait for room while it
//! has time left. Room goes to the newest waiter first, and to a new call before any: under a
//! sustained overload the oldest waiters are the nearest their deadline, and serving them
//! first would serve calls whose callers give up before the answer comes (Netflix's LIFO
//! blocking limiter, Facebook's adaptive LIFO). The calls that began waiting while the
//! dependency finished nothing are the exception: they wait for the stall, not behind work
//! that outruns the dependency, and when it serves again they go first, oldest first, before
//! new calls. Served newest first, the stall's oldest calls would be given up on while the
//! newer ones took the room, although the dependency, its capacity spared by the stall, could
//! serve them all in their time; each is still judged by its expected wait (O1). A waiter is
//! never counted ahead of a more critical call: the more critical call's larger share of the
//! limit (O6) is its own to fill, whatever waits with less.

// Public items for the `test-support` feature's re-exports; without it they reach no user.
#![cfg_attr(not(feature = "test-support"), allow(unreachable_pub))]

use std::collections::VecDeque;
use std::time::Instant;

use crate::criticality::Criticality;

/// A call's place among the waiters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaitTicket {
    id: u64,
    stalled: bool,
}

/// The waiters: those that began waiting while the dependency finished nothing, and the
/// others, each oldest first.
#[derive(Debug, Default)]
pub(super) struct WaitingRoom {
    next: u64,
    stalled: VecDeque<Waiter>,
    queued: VecDeque<Waiter>,
}

/// A waiting call: its place, the instant it stops waiting, and how its caller waits on it.
#[derive(Debug, Clone, Copy)]
struct Waiter {
    id: u64,
    until: Instant,
    criticality: Criticality,
}

impl Waiter {
    /// Whether it goes before a call of `criticality` when its order says so: it is at least
    /// as critical.
    fn goes_before(&self, criticality: Criticality) -> bool {
        self.criticality.at_least(criticality)
    }
}

impl WaitingRoom {
    /// A new waiter of `criticality` until `until`, which began waiting while the dependency
    /// finished nothing when `stalled`, or none when `bound` wait already.
    pub(super) fn join(
        &mut self,
        until: Instant,
        criticality: Criticality,
        bound: usize,
        stalled: bool,
    ) -> Option<WaitTicket> {
        if self.stalled.len() + self.queued.len() >= bound {
            return None;
        }
        let id = self.next;
        self.next += 1;
        let waiters = if stalled {
            &mut self.stalled
        } else {
            &mut self.queued
        };
        waiters.push_back(Waiter {
            id,
            until,
            criticality,
        });
        Some(WaitTicket { id, stalled })
    }

    /// The waiters who go before `ticket`, of `criticality`, at `now`, those past their time
    /// gone first: the older of those that waited through a stall, or all of those and the
    /// newer of the others, when they are at least as critical. A new call (`None`), or one
    /// whose time is up, goes after the first and before the others.
    pub(super) fn ahead_of(
        &mut self,
        ticket: Option<WaitTicket>,
        criticality: Criticality,
        now: Instant,
    ) -> usize {
        self.stalled.retain(|waiter| waiter.until > now);
        let counted = |waiters: &VecDeque<Waiter>, from: usize, to: usize| {
            waiters
                .range(from..to)
                .filter(|waiter| waiter.goes_before(criticality))
                .count()
        };
        let stalled = self.stalled.len();
        let Some(ticket) = ticket else {
            return counted(&self.stalled, 0, stalled);
        };
        self.queued.retain(|waiter| waiter.until > now);
        let queued = self.queued.len();
        match (ticket.stalled, position(self.waiters(ticket), ticket)) {
            (true, Some(at)) => counted(&self.stalled, 0, at),
            (false, Some(at)) => {
                counted(&self.stalled, 0, stalled) + counted(&self.queued, at + 1, queued)
            }
            (_, None) => counted(&self.stalled, 0, stalled),
        }
    }

    /// Whether calls that began waiting while the dependency finished nothing wait still,
    /// those past their time included.
    #[inline]
    pub(super) fn holds_stalled(&self) -> bool {
        !self.stalled.is_empty()
    }

    /// How many wait at `now`, those past their time gone first.
    #[cfg(any(test, feature = "test-support"))]
    pub(super) fn len_at(&mut self, now: Instant) -> usize {
        self.stalled.retain(|waiter| waiter.until > now);
        self.queued.retain(|waiter| waiter.until > now);
        self.stalled.len() + self.queued.len()
    }

    /// `ticket` waits no more.
    pub(super) fn leave(&mut self, ticket: WaitTicket) {
        if let Some(at) = position(self.waiters(ticket), ticket) {
            self.waiters_mut(ticket).remove(at);
        }
    }

    fn waiters(&self, ticket: WaitTicket) -> &VecDeque<Waiter> {
        if ticket.stalled {
            &self.stalled
        } else {
            &self.queued
        }
    }

    fn waiters_mut(&mut self, ticket: WaitTicket) -> &mut VecDeque<Waiter> {
        if ticket.stalled {
            &mut self.stalled
        } else {
            &mut self.queued
        }
    }
}

/// Where `ticket` stands among `waiters`, if it waits there still.
fn position(waiters: &VecDeque<Waiter>, ticket: WaitTicket) -> Option<usize> {
    // Ids are handed out in order and kept in it.
    waiters
        .binary_search_by_key(&ticket.id, |waiter| waiter.id)
        .ok()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    const N: Criticality = Criticality::Normal;

    #[test]
    fn o7_a_stalls_waiters_go_first_oldest_first_and_the_others_newest_first() {
        let now = Instant::now();
        let s = Duration::from_secs;
        let mut room = WaitingRoom::default();
        let stalled_old = room.join(now + s(1), N, 8, true).unwrap();
        let queued_old = room.join(now + s(2), N, 8, false).unwrap();
        let stalled_new = room.join(now + s(3), N, 8, true).unwrap();
        let queued_new = room.join(now + s(3), N, 8, false).unwrap();
        assert_eq!(room.ahead_of(Some(stalled_old), N, now), 0);
        assert_eq!(room.ahead_of(Some(stalled_new), N, now), 1);
        assert_eq!(
            room.ahead_of(None, N, now),
            2,
            "a new call, after the stall's"
        );
        assert_eq!(room.ahead_of(Some(queued_new), N, now), 2);
        assert_eq!(room.ahead_of(Some(queued_old), N, now), 3);
        room.leave(stalled_old);
        assert_eq!(room.ahead_of(Some(stalled_new), N, now), 0);
        assert_eq!(room.ahead_of(Some(queued_old), N, now), 2);
        assert!(room.holds_stalled());
        // Past their time, waiters count no more; one whose time is up goes as a new call.
        let later = now + s(2);
        assert_eq!(room.ahead_of(Some(queued_old), N, later), 1);
        assert_eq!(room.len_at(later), 2);
        room.leave(stalled_new);
        assert!(!room.holds_stalled());
        assert_eq!(room.ahead_of(Some(queued_new), N, later), 0);
        assert!(room.join(now, N, 1, false).is_none(), "the room is bounded");
        room.leave(queued_new);
        assert_eq!(room.len_at(later), 0);
    }

    #[test]
    fn o6_o7_a_waiter_never_goes_before_a_more_critical_call() {
        let now = Instant::now();
        let until = now + Duration::from_secs(1);
        let (c, s) = (Criticality::Critical, Criticality::Sheddable);
        let mut room = WaitingRoom::default();
        let shed_stalled = room.join(until, s, 8, true).unwrap();
        let normal_stalled = room.join(until, N, 8, true).unwrap();
        let critical_queued = room.join(until, c, 8, false).unwrap();
        let normal_queued = room.join(until, N, 8, false).unwrap();
        assert_eq!(
            room.ahead_of(None, c, now),
            0,
            "no stall's waiter before a critical call"
        );
        assert_eq!(
            room.ahead_of(None, N, now),
            1,
            "the normal one before a normal call"
        );
        assert_eq!(room.ahead_of(None, s, now), 2);
        assert_eq!(
            room.ahead_of(Some(normal_stalled), N, now),
            0,
            "older, but sheddable"
        );
        assert_eq!(room.ahead_of(Some(shed_stalled), s, now), 0);
        assert_eq!(room.ahead_of(Some(critical_queued), c, now), 0);
        assert_eq!(room.ahead_of(Some(normal_queued), N, now), 1);
    }
}
