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
//! serve them all in their time; each is still judged by its expected wait (O1).

// Public items for the `test-support` feature's re-exports; without it they reach no user.
#![cfg_attr(not(feature = "test-support"), allow(unreachable_pub))]

use std::collections::VecDeque;
use std::time::Instant;

/// A call's place among the waiters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaitTicket {
    id: u64,
    stalled: bool,
}

/// The waiters, each with the instant it stops waiting: those that began waiting while the
/// dependency finished nothing, and the others, each oldest first.
#[derive(Debug, Default)]
pub(super) struct WaitingRoom {
    next: u64,
    stalled: VecDeque<(u64, Instant)>,
    queued: VecDeque<(u64, Instant)>,
}

impl WaitingRoom {
    /// A new waiter until `until`, which began waiting while the dependency finished nothing
    /// when `stalled`, or none when `bound` wait already.
    pub(super) fn join(
        &mut self,
        until: Instant,
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
        waiters.push_back((id, until));
        Some(WaitTicket { id, stalled })
    }

    /// The waiters who go before `ticket` at `now`, those past their time gone first: the
    /// older of those that waited through a stall, or all of those and the newer of the
    /// others. A new call (`None`), or one whose time is up, goes after the first and before
    /// the others.
    pub(super) fn ahead_of(&mut self, ticket: Option<WaitTicket>, now: Instant) -> usize {
        self.stalled.retain(|&(_, until)| until > now);
        let Some(ticket) = ticket else {
            return self.stalled.len();
        };
        self.queued.retain(|&(_, until)| until > now);
        match (ticket.stalled, position(self.waiters(ticket), ticket)) {
            (true, Some(at)) => at,
            (false, Some(at)) => self.stalled.len() + self.queued.len() - at - 1,
            (_, None) => self.stalled.len(),
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
        self.stalled.retain(|&(_, until)| until > now);
        self.queued.retain(|&(_, until)| until > now);
        self.stalled.len() + self.queued.len()
    }

    /// `ticket` waits no more.
    pub(super) fn leave(&mut self, ticket: WaitTicket) {
        if let Some(at) = position(self.waiters(ticket), ticket) {
            self.waiters_mut(ticket).remove(at);
        }
    }

    fn waiters(&self, ticket: WaitTicket) -> &VecDeque<(u64, Instant)> {
        if ticket.stalled {
            &self.stalled
        } else {
            &self.queued
        }
    }

    fn waiters_mut(&mut self, ticket: WaitTicket) -> &mut VecDeque<(u64, Instant)> {
        if ticket.stalled {
            &mut self.stalled
        } else {
            &mut self.queued
        }
    }
}

/// Where `ticket` stands among `waiters`, if it waits there still.
fn position(waiters: &VecDeque<(u64, Instant)>, ticket: WaitTicket) -> Option<usize> {
    // Ids are handed out in order and kept in it.
    waiters.binary_search_by_key(&ticket.id, |&(id, _)| id).ok()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn o7_a_stalls_waiters_go_first_oldest_first_and_the_others_newest_first() {
        let now = Instant::now();
        let s = Duration::from_secs;
        let mut room = WaitingRoom::default();
        let stalled_old = room.join(now + s(1), 8, true).unwrap();
        let queued_old = room.join(now + s(2), 8, false).unwrap();
        let stalled_new = room.join(now + s(3), 8, true).unwrap();
        let queued_new = room.join(now + s(3), 8, false).unwrap();
        assert_eq!(room.ahead_of(Some(stalled_old), now), 0);
        assert_eq!(room.ahead_of(Some(stalled_new), now), 1);
        assert_eq!(room.ahead_of(None, now), 2, "a new call, after the stall's");
        assert_eq!(room.ahead_of(Some(queued_new), now), 2);
        assert_eq!(room.ahead_of(Some(queued_old), now), 3);
        room.leave(stalled_old);
        assert_eq!(room.ahead_of(Some(stalled_new), now), 0);
        assert_eq!(room.ahead_of(Some(queued_old), now), 2);
        assert!(room.holds_stalled());
        // Past their time, waiters count no more; one whose time is up goes as a new call.
        let later = now + s(2);
        assert_eq!(room.ahead_of(Some(queued_old), later), 1);
        assert_eq!(room.len_at(later), 2);
        room.leave(stalled_new);
        assert!(!room.holds_stalled());
        assert_eq!(room.ahead_of(Some(queued_new), later), 0);
        assert!(room.join(now, 1, false).is_none(), "the room is bounded");
        room.leave(queued_new);
        assert_eq!(room.len_at(later), 0);
    }
}
