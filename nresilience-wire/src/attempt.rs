//! Which attempt of its call a request is (F1): `x-nresilience-attempt: N`, `N; hedge` for a
//! hedge, and gRPC's own `grpc-previous-rpc-attempts` (gRFC A6) beside it.

use http::header::{HeaderMap, HeaderValue};

use crate::names::{ATTEMPT, GRPC_PREVIOUS_ATTEMPTS};
use crate::number::{count, saturating};
use crate::outbound::is_grpc;
use crate::signal::one_value;

/// The suffix a hedge's attempt number carries.
const HEDGE: &[u8] = b"; hedge";

/// Which attempt of its call a request is, as its sender says (F1).
///
/// ```
/// use http::HeaderMap;
/// use nresilience_wire::{read_attempt, stamp_attempt_number, AttemptOf, ATTEMPT};
///
/// let mut headers = HeaderMap::new();
/// stamp_attempt_number(&mut headers, AttemptOf::new(3, true));
/// assert_eq!(headers[ATTEMPT], "3; hedge");
/// let read = read_attempt(&headers).unwrap();
/// assert!(read.is_retry() && read.is_hedge());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AttemptOf {
    number: u32,
    hedge: bool,
}

impl AttemptOf {
    /// Attempt `number` (from 1; a `0` is read as `1`), a hedge or not.
    #[must_use]
    pub const fn new(number: u32, hedge: bool) -> Self {
        Self {
            number: if number == 0 { 1 } else { number },
            hedge,
        }
    }

    /// The attempt's number in its call, from 1.
    #[must_use]
    pub const fn number(self) -> u32 {
        self.number
    }

    /// Whether the attempt is a hedge: sent while an earlier one is still in flight.
    #[must_use]
    pub const fn is_hedge(self) -> bool {
        self.hedge
    }

    /// Whether the attempt is any but the first: a retry or a hedge, load its call adds.
    #[must_use]
    pub const fn is_retry(self) -> bool {
        self.number > 1
    }

    /// Reads an `x-nresilience-attempt` value: a positive decimal (one too large for a `u32`
    /// is `u32::MAX`), optionally followed by exactly `; hedge`. Anything else says nothing.
    #[must_use]
    pub fn parse(value: &[u8]) -> Option<Self> {
        let (digits, hedge) = match value.strip_suffix(HEDGE) {
            Some(digits) => (digits, true),
            None => (value, false),
        };
        count(digits).map(|number| Self { number, hedge })
    }

    fn value(self) -> HeaderValue {
        // Most requests are first attempts: their value is made without allocating.
        if self.number == 1 && !self.hedge {
            return HeaderValue::from_static("1");
        }
        if self.hedge {
            HeaderValue::try_from(format!("{}; hedge", self.number))
                .unwrap_or_else(|_| unreachable!("digits and letters"))
        } else {
            HeaderValue::from(self.number)
        }
    }
}

/// Writes which attempt of its call a request is (F1), replacing what it carried, and on a
/// gRPC request `grpc-previous-rpc-attempts` as gRFC A6 asks: the attempts before this one,
/// on every attempt but the first (which goes as its caller made it).
#[inline]
pub fn stamp_attempt_number(headers: &mut HeaderMap, attempt: AttemptOf) {
    headers.insert(ATTEMPT, attempt.value());
    // A first attempt is the request as its caller made it: only later ones say more.
    if attempt.is_retry() && is_grpc(headers) {
        headers.insert(
            GRPC_PREVIOUS_ATTEMPTS,
            HeaderValue::from(attempt.number - 1),
        );
    }
}

/// Which attempt of its call a request says it is: `x-nresilience-attempt`, else gRPC's
/// `grpc-previous-rpc-attempts` (plus one; gRPC does not say which are hedges). `None` when
/// it says neither, once and strictly: a request from a client that does not say is read by
/// the caller as it sees fit.
#[must_use]
pub fn read_attempt(headers: &HeaderMap) -> Option<AttemptOf> {
    if headers.contains_key(ATTEMPT) {
        return AttemptOf::parse(one_value(headers, &ATTEMPT)?);
    }
    let previous = saturating(one_value(headers, &GRPC_PREVIOUS_ATTEMPTS)?)?;
    let number = u32::try_from(previous.saturating_add(1)).unwrap_or(u32::MAX);
    Some(AttemptOf::new(number, false))
}

#[cfg(test)]
mod tests {
    use http::header::CONTENT_TYPE;
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn f1_an_attempt_reads_strictly() {
        assert_eq!(AttemptOf::parse(b"1"), Some(AttemptOf::new(1, false)));
        assert_eq!(AttemptOf::parse(b"2; hedge"), Some(AttemptOf::new(2, true)));
        assert_eq!(
            AttemptOf::parse(b"99999999999999999999"),
            Some(AttemptOf::new(u32::MAX, false))
        );
        for value in [
            &b""[..],
            b"0",
            b"-1",
            b" 2",
            b"2;hedge",
            b"2; Hedge",
            b"2; hedge ",
            b"; hedge",
            b"2, hedge",
        ] {
            assert_eq!(AttemptOf::parse(value), None, "{value:?}");
        }
    }

    #[test]
    fn f1_grpc_attempts_carry_the_previous_attempts() {
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
        stamp_attempt_number(&mut headers, AttemptOf::new(1, false));
        assert!(!headers.contains_key(GRPC_PREVIOUS_ATTEMPTS));
        stamp_attempt_number(&mut headers, AttemptOf::new(3, false));
        assert_eq!(headers[GRPC_PREVIOUS_ATTEMPTS], "2");

        let mut plain = HeaderMap::new();
        stamp_attempt_number(&mut plain, AttemptOf::new(3, false));
        assert!(
            !plain.contains_key(GRPC_PREVIOUS_ATTEMPTS),
            "HTTP only ours"
        );
    }

    #[test]
    fn f1_a_grpc_client_that_is_not_ours_is_read_from_its_own_header() {
        let mut headers = HeaderMap::new();
        headers.insert(GRPC_PREVIOUS_ATTEMPTS, HeaderValue::from_static("1"));
        assert_eq!(read_attempt(&headers), Some(AttemptOf::new(2, false)));
        headers.insert(ATTEMPT, HeaderValue::from_static("4"));
        assert_eq!(
            read_attempt(&headers),
            Some(AttemptOf::new(4, false)),
            "ours wins"
        );
        headers.append(ATTEMPT, HeaderValue::from_static("4"));
        assert_eq!(read_attempt(&headers), None, "sent twice, it says nothing");
        assert_eq!(read_attempt(&HeaderMap::new()), None);
    }

    proptest! {
        #[test]
        fn f1_every_attempt_stamped_reads_back(number in 1_u32.., hedge: bool) {
            let mut headers = HeaderMap::new();
            stamp_attempt_number(&mut headers, AttemptOf::new(number, hedge));
            prop_assert_eq!(read_attempt(&headers), Some(AttemptOf::new(number, hedge)));
        }
    }
}
