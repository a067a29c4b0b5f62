//! Where a call sits in the chain, told to the hop each of its attempts reaches in one header:
//! `x-nresilience-chain: depth=2, attempts=9, criticality=normal`.
//!
//! One header rather than one per fact: a request carries it through every layer that copies
//! its headers (a retry's template, reqwest's own copies), and each header costs an insert, a
//! copy and a drop at every one of them, and its bytes on the wire.

use std::fmt;

use nresilience_core::Criticality;

use crate::number::count;

/// What an `x-nresilience-chain` value says, each fact on its own: a list of `key=value`
/// members, `depth` (`1` from the first hop that calls out, one more at each hop below),
/// `attempts` (how many attempts the calls above could make to reach the hop the request
/// goes to: each hop multiplies it by its call's maximum attempts) and `criticality`
/// (`critical`, `normal` or `sheddable`: how much the caller is waiting on the answer).
///
/// Read from peers, so read strictly and never failing: members are separated by commas,
/// with spaces or tabs around each; a member's key is one of the three, in lower case, and
/// its value is exactly what this crate writes. A member that does not read, or a key that
/// comes twice, says nothing of its fact; the others still count. Unknown keys are skipped,
/// so that a later version may add one. A depth or attempts too large for a `u32` reads as
/// `u32::MAX`: more than any loop guard allows, not a chain that starts again.
///
/// # Example
///
/// ```
/// use nresilience_wire::ChainFacts;
/// use nresilience_core::Criticality;
///
/// let written = ChainFacts::written(2, 9, Criticality::Normal).to_string();
/// assert_eq!(written, "depth=2, attempts=9, criticality=normal");
/// let read = ChainFacts::parse(written.as_bytes());
/// assert_eq!((read.depth, read.attempts), (Some(2), Some(9)));
/// assert_eq!(read.criticality, Some(Criticality::Normal));
///
/// let garbled = ChainFacts::parse(b"depth=0,attempts=3,depth=4,future=x");
/// assert_eq!((garbled.depth, garbled.attempts), (None, Some(3)));
///
/// let overflowing = ChainFacts::parse(b"depth=99999999999999999999, attempts=4");
/// assert_eq!(overflowing.depth, Some(u32::MAX));
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ChainFacts {
    /// The request's depth in the chain (C4).
    pub depth: Option<u32>,
    /// The attempts that could reach the hop through the calls above (C4).
    pub attempts: Option<u32>,
    /// How much the caller waits on the answer (C3).
    pub criticality: Option<Criticality>,
}

impl ChainFacts {
    /// The facts a call tells every hop it reaches.
    #[must_use]
    pub const fn written(depth: u32, attempts: u32, criticality: Criticality) -> Self {
        Self {
            depth: Some(depth),
            attempts: Some(attempts),
            criticality: Some(criticality),
        }
    }

    /// Reads an `x-nresilience-chain` value.
    pub fn parse(value: &[u8]) -> Self {
        let (mut depth_member, mut attempts_member, mut criticality_member) =
            (Member::Absent, Member::Absent, Member::Absent);
        for member in value.split(|&byte| byte == b',') {
            let Some((key, value)) = split_member(member) else {
                continue;
            };
            match key {
                b"depth" => depth_member.push(value),
                b"attempts" => attempts_member.push(value),
                b"criticality" => criticality_member.push(value),
                _ => {}
            }
        }
        Self {
            depth: depth_member.read(depth),
            attempts: attempts_member.read(attempts),
            criticality: criticality_member.read(Criticality::from_header),
        }
    }

    /// Whether no fact was read.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.depth.is_none() && self.attempts.is_none() && self.criticality.is_none()
    }
}

/// The value as written: the facts present, in the order `depth`, `attempts`,
/// `criticality`, separated by `", "`.
impl fmt::Display for ChainFacts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut separator = "";
        if let Some(depth) = self.depth {
            write!(f, "depth={depth}")?;
            separator = ", ";
        }
        if let Some(attempts) = self.attempts {
            write!(f, "{separator}attempts={attempts}")?;
            separator = ", ";
        }
        if let Some(criticality) = self.criticality {
            write!(f, "{separator}criticality={}", criticality.as_str())?;
        }
        Ok(())
    }
}

/// The depth a `depth` member says: a positive decimal, digits only; one too large for a
/// `u32` is `u32::MAX`.
///
/// ```
/// use nresilience_wire::depth;
///
/// assert_eq!(depth(b"3"), Some(3));
/// assert_eq!(depth(b"0"), None);
/// assert_eq!(depth(b"99999999999999999999"), Some(u32::MAX));
/// ```
#[must_use]
pub fn depth(value: &[u8]) -> Option<u32> {
    count(value)
}

/// The potential attempts an `attempts` member says: a positive decimal, digits only; one
/// too large for a `u32` is `u32::MAX`.
#[must_use]
pub fn attempts(value: &[u8]) -> Option<u32> {
    count(value)
}

/// A member's `(key, value)`, spaces and tabs around it trimmed; `None` without an `=`.
fn split_member(member: &[u8]) -> Option<(&[u8], &[u8])> {
    let member = member.trim_ascii_start().trim_ascii_end();
    let at = member.iter().position(|&byte| byte == b'=')?;
    Some((&member[..at], &member[at + 1..]))
}

/// The values one key arrived with.
#[derive(Clone, Copy)]
enum Member<'a> {
    Absent,
    One(&'a [u8]),
    /// Came more than once: says nothing.
    Repeated,
}

impl<'a> Member<'a> {
    fn push(&mut self, value: &'a [u8]) {
        *self = match self {
            Member::Absent => Member::One(value),
            Member::One(_) | Member::Repeated => Member::Repeated,
        };
    }

    fn read<T>(self, parse: impl Fn(&[u8]) -> Option<T>) -> Option<T> {
        match self {
            Member::One(value) => parse(value),
            Member::Absent | Member::Repeated => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn c3_c4_each_fact_reads_on_its_own() {
        let read = ChainFacts::parse(b" depth=3 ,\tattempts=27,criticality=sheddable ");
        assert_eq!(read, ChainFacts::written(3, 27, Criticality::Sheddable));
        // A fact that does not read, or comes twice, says nothing; the others count.
        let read = ChainFacts::parse(b"depth=x, attempts=2, attempts=3, criticality=normal");
        assert_eq!((read.depth, read.attempts), (None, None));
        assert_eq!(read.criticality, Some(Criticality::Normal));
        // Keys are lower case, values exactly as written, unknown keys skipped.
        let read = ChainFacts::parse(b"Depth=3, attempts= 4, priority=high, criticality=NORMAL");
        assert!(read.is_empty(), "{read:?}");
        assert!(ChainFacts::parse(b"").is_empty());
        assert!(ChainFacts::parse(b"depth").is_empty());
        assert_eq!(ChainFacts::parse(b"depth=1=2").depth, None);
    }

    #[test]
    fn c4_depth_and_attempts_are_positive_and_saturate() {
        assert_eq!(ChainFacts::parse(b"depth=100001").depth, Some(100_001));
        assert_eq!(ChainFacts::parse(b"attempts=0").attempts, None);
        assert_eq!(ChainFacts::parse(b"depth=0").depth, None);
        assert_eq!(
            ChainFacts::parse(b"attempts=4294967295").attempts,
            Some(u32::MAX)
        );
        for value in [&b""[..], b"-1", b"+1", b" 1", b"1.5", b"\xff"] {
            assert_eq!(depth(value), None, "{value:?}");
            assert_eq!(attempts(value), None, "{value:?}");
        }
    }

    #[test]
    fn c4_c5_a_count_too_large_is_the_largest_not_a_restart() {
        let read = ChainFacts::parse(b"depth=99999999999999999999, attempts=4");
        assert_eq!((read.depth, read.attempts), (Some(u32::MAX), Some(4)));
        let read = ChainFacts::parse(b"depth=2, attempts=99999999999999999999999");
        assert_eq!((read.depth, read.attempts), (Some(2), Some(u32::MAX)));
        let read = ChainFacts::parse(b"attempts=18446744073709551615");
        assert_eq!(read.attempts, Some(u32::MAX));
    }

    proptest! {
        #[test]
        fn c3_c4_what_is_written_reads_back(
            depth in 1u32..,
            attempts in 1u32..,
            criticality in prop::sample::select(Criticality::ALL.to_vec()),
        ) {
            let written = ChainFacts::written(depth, attempts, criticality);
            prop_assert_eq!(ChainFacts::parse(written.to_string().as_bytes()), written);
        }

        #[test]
        fn c3_c4_any_bytes_read_without_panicking(value in prop::collection::vec(any::<u8>(), 0..64)) {
            let _ = ChainFacts::parse(&value);
        }
    }
}
