//! What a service tells its callers about the fleet's retries (F2):
//! `x-nresilience-fleet: retries=0.240, accepted=0.100, allowance=0.708`.

use http::header::{HeaderMap, HeaderValue};
use nresilience_core::fleet::{Advice, Allowance};

use crate::names::FLEET;
use crate::signal::one_value;

/// The `x-nresilience-fleet` value of `advice`: each share with three decimals.
///
/// ```
/// use nresilience_core::fleet::{Advice, Allowance};
/// use nresilience_wire::{fleet_value, read_fleet, FLEET};
///
/// let advice = Advice::new(0.24, 0.1, Allowance::new(0.708));
/// let value = fleet_value(&advice);
/// assert_eq!(value, "retries=0.240, accepted=0.100, allowance=0.708");
/// let mut headers = http::HeaderMap::new();
/// headers.insert(FLEET, value);
/// assert_eq!(read_fleet(&headers).unwrap().allowance(), Allowance::new(0.708));
/// ```
#[must_use]
pub fn fleet_value(advice: &Advice) -> HeaderValue {
    let text = format!(
        "retries={}, accepted={}, allowance={}",
        Thousandths::of(advice.retries()),
        Thousandths::of(advice.accepted()),
        Thousandths::of(advice.allowance().share()),
    );
    HeaderValue::try_from(text).unwrap_or_else(|_| unreachable!("digits, letters, '=', ',', '.'"))
}

/// The advice an answer carries, sent once and exactly as [`fleet_value`] writes it: three
/// members in that order, each a share from `0.000` to `1.000` with three decimals. Anything
/// else says nothing, and a client told nothing keeps its budget as it is.
#[must_use]
pub fn read_fleet(headers: &HeaderMap) -> Option<Advice> {
    parse_fleet(one_value(headers, &FLEET)?)
}

/// Reads an `x-nresilience-fleet` value; see [`read_fleet`].
#[must_use]
pub fn parse_fleet(value: &[u8]) -> Option<Advice> {
    let mut members = value.split(|&byte| byte == b',');
    let retries = member(members.next()?, b"retries=")?;
    let accepted = member(members.next()?.strip_prefix(b" ")?, b"accepted=")?;
    let allowance = member(members.next()?.strip_prefix(b" ")?, b"allowance=")?;
    if members.next().is_some() {
        return None;
    }
    Some(Advice::new(
        retries.share(),
        accepted.share(),
        Allowance::new(allowance.share()),
    ))
}

fn member(text: &[u8], name: &[u8]) -> Option<Thousandths> {
    Thousandths::parse(text.strip_prefix(name)?)
}

/// A share from 0 to 1 in thousandths, as the wire carries it: `d.ddd`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Thousandths(u16);

impl Thousandths {
    /// `share` to the nearest thousandth, clamped to `0..=1` (`NaN` is `0`).
    fn of(share: f64) -> Self {
        let share = if share.is_nan() {
            0.0
        } else {
            share.clamp(0.0, 1.0)
        };
        // Clamped first: the product is within 0..=1000.
        Self((share * 1000.0).round() as u16)
    }

    fn share(self) -> f64 {
        f64::from(self.0) / 1000.0
    }

    /// Exactly one digit, a point and three digits, at most `1.000`.
    fn parse(text: &[u8]) -> Option<Self> {
        let [whole, b'.', a, b, c] = *text else {
            return None;
        };
        if ![whole, a, b, c].iter().all(u8::is_ascii_digit) {
            return None;
        }
        let value = [whole, a, b, c]
            .iter()
            .fold(0_u16, |n, digit| n * 10 + u16::from(digit - b'0'));
        (value <= 1000).then_some(Self(value))
    }
}

impl std::fmt::Display for Thousandths {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{:03}", self.0 / 1000, self.0 % 1000)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn f2_advice_reads_strictly() {
        let advice = parse_fleet(b"retries=0.240, accepted=0.100, allowance=0.708").unwrap();
        assert_eq!(advice.retries(), 0.24);
        assert_eq!(advice.accepted(), 0.1);
        assert_eq!(advice.allowance(), Allowance::new(0.708));
        for value in [
            &b""[..],
            b"retries=0.240, accepted=0.100",
            b"retries=0.240,accepted=0.100,allowance=0.708",
            b"accepted=0.100, retries=0.240, allowance=0.708",
            b"retries=0.240, accepted=0.100, allowance=1.001",
            b"retries=0.24, accepted=0.100, allowance=0.708",
            b"retries=0.240, accepted=0.100, allowance=0.708, more=1",
            b"retries=0.240, accepted=0.100, allowance=-0.64",
            b"retries=0.240, accepted=0.100, allowance=0.708 ",
        ] {
            assert_eq!(
                parse_fleet(value),
                None,
                "{:?}",
                String::from_utf8_lossy(value)
            );
        }
    }

    #[test]
    fn f2_advice_sent_twice_says_nothing() {
        let value = fleet_value(&Advice::new(0.2, 0.1, Allowance::new(0.5)));
        let mut headers = HeaderMap::new();
        headers.append(FLEET, value.clone());
        assert!(read_fleet(&headers).is_some());
        headers.append(FLEET, value);
        assert_eq!(read_fleet(&headers), None);
    }

    proptest! {
        #[test]
        fn f2_every_advice_written_reads_back_to_the_thousandth(
            retries in 0.0_f64..=1.0, accepted in 0.0_f64..=1.0, allowance in 0.0_f64..=1.0,
        ) {
            let written = Advice::new(retries, accepted, Allowance::new(allowance));
            let read = parse_fleet(fleet_value(&written).as_bytes()).unwrap();
            prop_assert!((read.retries() - retries).abs() <= 0.0005 + 1e-12);
            prop_assert!((read.accepted() - accepted).abs() <= 0.0005 + 1e-12);
            prop_assert!((read.allowance().share() - allowance).abs() <= 0.0005 + 1e-6);
        }
    }
}
