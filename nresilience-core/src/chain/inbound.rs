//! What a request told the hop serving it about the call it is part of.

use std::future::Future;
use std::time::{Duration, Instant};

use std::cell::Cell;
use std::thread::LocalKey;

use super::signal::decimal;
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

/// The most a caller may say it will wait: a day. A larger value is no value, so that a
/// peer cannot push an `Instant` past its range.
const MAX_DEADLINE_MS: u64 = 86_400_000;

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
}

impl Inbound {
    /// Nothing said: no deadline, the first hop.
    pub const fn new() -> Self {
        Inbound {
            deadline: None,
            depth: 0,
            attempts: 1,
            criticality: None,
        }
    }

    /// How much the caller is waiting on the answer.
    pub const fn criticality(mut self, criticality: Option<Criticality>) -> Self {
        self.criticality = criticality;
        self
    }

    /// The instant the caller stops waiting.
    pub const fn deadline(mut self, deadline: Option<Instant>) -> Self {
        self.deadline = deadline;
        self
    }

    /// The hops above this one.
    pub const fn depth(mut self, depth: u32) -> Self {
        self.depth = depth;
        self
    }

    /// The attempts the calls above could make to reach this hop.
    pub const fn attempts(mut self, attempts: u32) -> Self {
        self.attempts = attempts;
        self
    }
}

/// The most hops a chain may say it has; a larger value is no value.
const MAX_DEPTH: u32 = 100_000;

/// The depth a `depth` member of `x-nresilience-chain` says: a decimal from 1 to 100,000,
/// digits only.
pub fn depth(value: &[u8]) -> Option<u32> {
    let depth = decimal(value, 6)?;
    u32::try_from(depth)
        .ok()
        .filter(|depth| (1..=MAX_DEPTH).contains(depth))
}

/// The potential attempts an `attempts` member of `x-nresilience-chain` says: a decimal from
/// 1 to `u32::MAX`, digits only.
pub fn attempts(value: &[u8]) -> Option<u32> {
    u32::try_from(decimal(value, 10)?)
        .ok()
        .filter(|&attempts| attempts >= 1)
}

impl Default for Inbound {
    fn default() -> Self {
        Self::new()
    }
}

/// What the request being served said, if this runs while serving one.
#[inline]
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

/// The time an `x-nresilience-deadline-ms` value says the caller will still wait: whole
/// milliseconds, digits only, at most a day. Anything else — empty, signed, spaced,
/// fractional, larger — is `None`.
///
/// ```
/// use std::time::Duration;
/// use nresilience_core::chain::deadline_ms;
///
/// assert_eq!(deadline_ms(b"40"), Some(Duration::from_millis(40)));
/// assert_eq!(deadline_ms(b"-40"), None);
/// assert_eq!(deadline_ms(b"99999999999999999999"), None);
/// ```
pub fn deadline_ms(value: &[u8]) -> Option<Duration> {
    let millis = decimal(value, 9)?;
    (millis <= MAX_DEADLINE_MS).then(|| Duration::from_millis(millis))
}

/// The `x-nresilience-deadline-ms` value for `left`: whole milliseconds, never more than a
/// day, rounded up.
///
/// Up, so that the caller's own cut comes first: the callee gives up no sooner than its
/// caller stops waiting, and the caller sees its attempt cut, not answered a moment before
/// the cut with the callee's `504` — a cut its measured ceiling learns from (E7), an answer
/// it does not. The callee never works on past that in practice: the caller's cut closes
/// the request, and the callee's handler, with its calls, is dropped with it.
pub fn deadline_value(left: Duration) -> u64 {
    let millis = left.as_millis() + u128::from(!left.subsec_nanos().is_multiple_of(1_000_000));
    u64::try_from(millis)
        .unwrap_or(u64::MAX)
        .min(MAX_DEADLINE_MS)
}

/// `now` plus what the caller said it will wait.
pub fn deadline_from(now: Instant, left: Duration) -> Instant {
    clock::after(now, left)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn c2_deadline_takes_whole_milliseconds_up_to_a_day() {
        assert_eq!(deadline_ms(b"0"), Some(Duration::ZERO));
        assert_eq!(deadline_ms(b"86400000"), Some(Duration::from_secs(86_400)));
        for value in [
            &b""[..],
            b"86400001",
            b"+5",
            b"-5",
            b"5.0",
            b" 5",
            b"5ms",
            b"\xff",
        ] {
            assert_eq!(deadline_ms(value), None, "{value:?}");
        }
    }

    #[test]
    fn c2_e7_the_value_written_rounds_up_and_reads_back() {
        assert_eq!(deadline_value(Duration::from_micros(40_001)), 41);
        assert_eq!(deadline_value(Duration::from_millis(40)), 40);
        assert_eq!(deadline_value(Duration::ZERO), 0);
        assert_eq!(deadline_value(Duration::MAX), MAX_DEADLINE_MS);
        let written = deadline_value(Duration::from_millis(1234)).to_string();
        assert_eq!(
            deadline_ms(written.as_bytes()),
            Some(Duration::from_millis(1234))
        );
    }

    #[test]
    fn c4_depth_and_attempts_take_positive_decimals_in_range() {
        assert_eq!(depth(b"1"), Some(1));
        assert_eq!(depth(b"100000"), Some(MAX_DEPTH));
        assert_eq!(attempts(b"16"), Some(16));
        assert_eq!(attempts(b"4294967295"), Some(u32::MAX));
        for value in [&b""[..], b"0", b"-1", b"+1", b" 1", b"1.5", b"\xff"] {
            assert_eq!(depth(value), None, "{value:?}");
            assert_eq!(attempts(value), None, "{value:?}");
        }
        assert_eq!(depth(b"100001"), None);
        assert_eq!(attempts(b"4294967296"), None);
    }

    proptest! {
        #[test]
        fn c2_arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..24)) {
            if let Some(left) = deadline_ms(&bytes) {
                prop_assert!(left <= Duration::from_millis(MAX_DEADLINE_MS));
            }
            if let Some(depth) = depth(&bytes) {
                prop_assert!((1..=MAX_DEPTH).contains(&depth));
            }
            prop_assert_ne!(attempts(&bytes), Some(0));
        }
    }
}
