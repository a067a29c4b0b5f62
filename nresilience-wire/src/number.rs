//! The two forms a number takes on the wire.

/// An unsigned decimal of at most `max_digits` digits (at most 19, which a `u64` holds),
/// digits only: the strict form of a value with a range, such as a deadline.
pub(crate) fn decimal(value: &[u8], max_digits: usize) -> Option<u64> {
    if value.is_empty() || value.len() > max_digits || !value.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(
        value
            .iter()
            .fold(0u64, |n, digit| n * 10 + u64::from(digit - b'0')),
    )
}

/// An unsigned decimal of any length, digits only, saturating at `u64::MAX`: the form of a
/// value whose size only caps, such as a server's pushback.
pub(crate) fn saturating(value: &[u8]) -> Option<u64> {
    if value.is_empty() || !value.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(value.iter().fold(0u64, |n, digit| {
        n.saturating_mul(10).saturating_add(u64::from(digit - b'0'))
    }))
}

/// A count: a positive decimal, digits only, of any length. One too large for a `u32` is
/// `u32::MAX`: a count that overflows means more than any limit allows, never a count that
/// starts again.
pub(crate) fn count(value: &[u8]) -> Option<u32> {
    let n = saturating(value)?;
    (n >= 1).then(|| u32::try_from(n).unwrap_or(u32::MAX))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn a_count_saturates_and_zero_is_no_count() {
        assert_eq!(count(b"1"), Some(1));
        assert_eq!(count(b"0004"), Some(4));
        assert_eq!(count(b"4294967295"), Some(u32::MAX));
        assert_eq!(count(b"4294967296"), Some(u32::MAX));
        assert_eq!(count(b"99999999999999999999999"), Some(u32::MAX));
        for value in [&b""[..], b"0", b"000", b"-1", b"+1", b" 1", b"1.5", b"\xff"] {
            assert_eq!(count(value), None, "{value:?}");
        }
    }

    #[test]
    fn a_saturating_decimal_caps_at_the_largest() {
        assert_eq!(saturating(b"0"), Some(0));
        assert_eq!(saturating(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(saturating(&[b'9'; 400]), Some(u64::MAX));
        assert_eq!(saturating(b"-1"), None);
        assert_eq!(decimal(b"1234", 3), None);
        assert_eq!(decimal(b"123", 3), Some(123));
    }

    proptest! {
        #[test]
        fn a_count_is_its_digits_value_or_the_largest(digits in "[0-9]{1,40}") {
            let significant = digits.trim_start_matches('0');
            let exact = if significant.is_empty() { 0 } else { significant.parse::<u128>().unwrap_or(u128::MAX) };
            let expected = (exact >= 1).then(|| u32::try_from(exact).unwrap_or(u32::MAX));
            prop_assert_eq!(count(digits.as_bytes()), expected);
        }
    }
}
