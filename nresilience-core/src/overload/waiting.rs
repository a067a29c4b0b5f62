//! The calls waiting for room under a dependency's limit, newest first (O7).
//!
//! An attempt the limit refuses need not fail at once: its call may wait for room while it
//! has time left. Room goes to the newest waiter first: under a sustained overload the oldest
//! waiters are the nearest their deadline, and serving them first would serve calls whose
//! callers give up before the answer comes (Netflix's LIFO blocking limiter, Facebook's
//! adaptive LIFO). A new arrival is the newest of all.

// Public items for the `test-support` feature's re-exports; without it they reach no user.
#![cfg_attr(not(feature = "test-support"), allow(unreachable_pub))]

use std::collections::VecDeque;
use std::time::Instant;

/// A call's place among the waiters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaitTicket {
    id: u64,
}

/// The waiters, oldest first, each with the instant it stops waiting.
#[derive(Debug, Default)]
pub(super) struct WaitingRoom {
    next: u64,
    waiters: VecDeque<(u64, Instant)>,
}

impl WaitingRoom {
    /// A new waiter until `until`, or none when `bound` wait already.
    pub(super) fn join(&mut self, until: Instant, bound: usize) -> Option<WaitTicket> {
        if self.waiters.len() >= bound {
            return None;
        }
        let id = self.next;
        self.next += 1;
        self.waiters.push_back((id, until));
        Some(WaitTicket { id })
    }

    /// The waiters newer than `ticket` at `now`, those past their time gone first; `None`
    /// when `ticket` waits no more.
    pub(super) fn newer_than(&mut self, ticket: WaitTicket, now: Instant) -> Option<usize> {
        self.waiters.retain(|&(_, until)| until > now);
        let at = self.position(ticket)?;
        Some(self.waiters.len() - at - 1)
    }

    /// How many wait at `now`, those past their time gone first.
    #[cfg(any(test, feature = "test-support"))]
    pub(super) fn len_at(&mut self, now: Instant) -> usize {
        self.waiters.retain(|&(_, until)| until > now);
        self.waiters.len()
    }

    /// `ticket` waits no more.
    pub(super) fn leave(&mut self, ticket: WaitTicket) {
        if let Some(at) = self.position(ticket) {
            self.waiters.remove(at);
        }
    }

    fn position(&self, ticket: WaitTicket) -> Option<usize> {
        // Ids are handed out in order and kept in it.
        self.waiters
            .binary_search_by_key(&ticket.id, |&(id, _)| id)
            .ok()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn o7_waiters_count_the_newer_ones_and_forget_those_past_their_time() {
        let now = Instant::now();
        let mut room = WaitingRoom::default();
        let old = room.join(now + Duration::from_secs(1), 8).unwrap();
        let mid = room.join(now + Duration::from_secs(2), 8).unwrap();
        let new = room.join(now + Duration::from_secs(3), 8).unwrap();
        assert_eq!(room.newer_than(old, now), Some(2));
        assert_eq!(room.newer_than(new, now), Some(0));
        room.leave(mid);
        assert_eq!(room.newer_than(old, now), Some(1));
        assert_eq!(
            room.newer_than(old, now + Duration::from_secs(1)),
            None,
            "its time is up"
        );
        assert!(room.join(now, 1).is_none(), "the room is bounded");
    }
}
