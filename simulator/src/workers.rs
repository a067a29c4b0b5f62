//! A dependency that serves from a fixed number of workers behind a bounded FIFO queue, and
//! never cancels work: the model under [`Dependency::workers`](super::Dependency::workers).
//!
//! Because nothing is cancelled and the queue is first in, first out, an attempt's whole
//! future is known the moment it arrives: it starts when the earliest worker frees up (or at
//! once), and ends its service time later. Later arrivals cannot change that, and a caller
//! leaving cannot either. So the pool is a schedule, not a set of tasks: admitting an attempt
//! books its worker, and a caller that cuts the attempt simply stops waiting for an answer
//! while the booking stands, as a database does not see its client go away.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::time::Duration;

/// How many workers serve, and how many admitted attempts may wait for one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct PoolSize {
    pub(super) workers: u32,
    pub(super) queue: u32,
}

/// The pool's booking of one admitted attempt, in time since the run started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Booking {
    /// When a worker takes it.
    pub(super) starts: Duration,
    /// When its work is done and its worker free again.
    pub(super) ends: Duration,
}

/// The workers' and the queue's state on the virtual clock.
#[derive(Debug)]
pub(super) struct Pool {
    /// When each worker is next free, earliest first; one entry per worker.
    free_at: BinaryHeap<Reverse<Duration>>,
    /// When each admitted attempt that has not started yet will start, in arrival order. FIFO
    /// with work never cancelled makes these non-decreasing, so the queue at any instant is a
    /// suffix of this list.
    waiting: VecDeque<Duration>,
    queue: usize,
}

impl Pool {
    pub(super) fn new(size: PoolSize) -> Self {
        Self {
            free_at: std::iter::repeat_n(Reverse(Duration::ZERO), size.workers as usize).collect(),
            waiting: VecDeque::new(),
            queue: size.queue as usize,
        }
    }

    /// How many admitted attempts wait for a worker at `now` (those still being served are
    /// not counted; those whose caller left are).
    pub(super) fn queued(&mut self, now: Duration) -> usize {
        while self.waiting.front().is_some_and(|&starts| starts <= now) {
            self.waiting.pop_front();
        }
        self.waiting.len()
    }

    /// Admits an attempt arriving at `now`, or refuses it (`None`) when it would have to wait
    /// and the queue is full. `service` gives its service time from the instant a worker takes
    /// it, so a slowdown applies to work that *starts* inside it.
    pub(super) fn admit(
        &mut self,
        now: Duration,
        service: impl FnOnce(Duration) -> Duration,
    ) -> Option<Booking> {
        let queued = self.queued(now);
        let Reverse(free) = *self.free_at.peek()?;
        let starts = free.max(now);
        if starts > now {
            if queued >= self.queue {
                return None;
            }
            self.waiting.push_back(starts);
        }
        let ends = starts.saturating_add(service(starts));
        self.free_at.pop();
        self.free_at.push(Reverse(ends));
        Some(Booking { starts, ends })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn pool(workers: u32, queue: u32) -> Pool {
        Pool::new(PoolSize { workers, queue })
    }

    #[test]
    fn d3_free_workers_serve_at_once() {
        let mut pool = pool(2, 0);
        let fixed = |_| ms(100);
        assert_eq!(
            pool.admit(ms(0), fixed),
            Some(Booking {
                starts: ms(0),
                ends: ms(100)
            })
        );
        assert_eq!(pool.admit(ms(10), fixed).map(|b| b.starts), Some(ms(10)));
        assert_eq!(pool.queued(ms(10)), 0);
    }

    #[test]
    fn d3_a_full_queue_refuses_at_once() {
        let mut pool = pool(1, 2);
        let fixed = |_| ms(100);
        assert!(pool.admit(ms(0), fixed).is_some());
        assert!(pool.admit(ms(1), fixed).is_some());
        assert!(pool.admit(ms(2), fixed).is_some());
        assert_eq!(pool.queued(ms(2)), 2);
        assert_eq!(
            pool.admit(ms(3), fixed),
            None,
            "two wait: the third is refused"
        );
        // The refusal booked nothing: once the worker takes the first in line, one slot opens.
        assert_eq!(pool.queued(ms(100)), 1);
        assert_eq!(pool.admit(ms(100), fixed).map(|b| b.starts), Some(ms(300)));
    }

    #[test]
    fn d3_a_pool_without_a_queue_serves_only_what_finds_a_worker_free() {
        let mut pool = pool(1, 0);
        assert!(pool.admit(ms(0), |_| ms(50)).is_some());
        assert_eq!(pool.admit(ms(49), |_| ms(50)), None);
        assert!(pool.admit(ms(50), |_| ms(50)).is_some());
    }

    #[test]
    fn d3_abandoned_work_keeps_its_worker_so_the_next_request_waits() {
        // The pool has no notion of a caller leaving: a booking stands until its work is done.
        // An attempt its caller cut at 10 ms still holds the only worker until 100 ms.
        let mut pool = pool(1, 10);
        let cut = pool.admit(ms(0), |_| ms(100));
        assert_eq!(cut.map(|b| b.ends), Some(ms(100)));
        let next = pool.admit(ms(10), |_| ms(100));
        assert_eq!(
            next,
            Some(Booking {
                starts: ms(100),
                ends: ms(200)
            })
        );
    }

    #[test]
    fn d3_the_queue_is_first_in_first_out() {
        let mut pool = pool(2, 10);
        let fixed = |_| ms(100);
        pool.admit(ms(0), fixed);
        pool.admit(ms(0), |_| ms(30));
        // Four wait; each takes the worker that frees first, in the order they came.
        let starts: Vec<Duration> = (1..=4)
            .filter_map(|n| pool.admit(ms(n), fixed))
            .map(|b| b.starts)
            .collect();
        assert_eq!(starts, [ms(30), ms(100), ms(130), ms(200)]);
        assert!(starts.windows(2).all(|w| w[0] <= w[1]));
    }

    #[test]
    fn d3_service_time_is_fixed_when_a_worker_takes_the_attempt() {
        // A slowdown from 50 ms: work that starts inside it is slower, whenever it arrived.
        let slow_from_50 = |starts: Duration| if starts >= ms(50) { ms(500) } else { ms(100) };
        let mut pool = pool(1, 10);
        assert_eq!(
            pool.admit(ms(0), slow_from_50).map(|b| b.ends),
            Some(ms(100))
        );
        assert_eq!(
            pool.admit(ms(1), slow_from_50).map(|b| b.ends),
            Some(ms(600))
        );
    }
}
