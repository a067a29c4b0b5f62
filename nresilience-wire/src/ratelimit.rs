//! Reading the IETF `RateLimit` field (draft-ietf-httpapi-ratelimit-headers): a quota with no
//! requests left (`r=0`) resets in `t` seconds, which is when a retry can be served.
//!
//! The field is a Structured Field List (RFC 9651) of quota policies, each a string or token
//! with parameters: `RateLimit: "default";r=0;t=30, "daily";r=500;t=3600`. Only `r` and `t`
//! are read. A value that is not a well-formed list is no pushback, as RFC 9651 says of a
//! field that fails to parse.

use std::time::Duration;

use http::header::HeaderMap;

use crate::names::RATELIMIT;

/// The longest reset among the quotas of one `RateLimit` value that have no requests left
/// (`r=0`): a request waits for every exhausted quota. `None` when no quota is exhausted,
/// when an exhausted one says no reset, or when the value is not a well-formed list. `t` is
/// whole seconds, at most 15 digits as every sf-integer; a caller caps it as any pushback
/// (K13).
///
/// ```
/// use std::time::Duration;
/// use nresilience_wire::ratelimit_reset;
///
/// assert_eq!(ratelimit_reset(br#""default";r=0;t=30"#), Some(Duration::from_secs(30)));
/// assert_eq!(ratelimit_reset(br#""burst";r=0;t=5, "daily";r=0;t=60"#), Some(Duration::from_secs(60)));
/// assert_eq!(ratelimit_reset(br#""default";r=7;t=30"#), None); // requests left
/// assert_eq!(ratelimit_reset(b"r=0;t=30"), None); // not a list of quotas
/// ```
#[must_use]
pub fn ratelimit_reset(value: &[u8]) -> Option<Duration> {
    parse_list(value).ok().flatten().map(Duration::from_secs)
}

/// The longest reset of the exhausted quotas of one value, or `Err` when it is not a list.
fn parse_list(value: &[u8]) -> Result<Option<u64>, ()> {
    let mut longest = None;
    let mut rest = trim_sp(value);
    if rest.is_empty() {
        return Err(());
    }
    loop {
        let (quota, after) = member(rest).ok_or(())?;
        if quota.remaining == Some(0) {
            longest = longest.max(quota.reset);
        }
        match trim_ows(after).split_first() {
            None => return Ok(longest),
            Some((b',', next)) => {
                rest = trim_ows(next);
                if rest.is_empty() {
                    return Err(());
                }
            }
            Some(_) => return Err(()),
        }
    }
}

/// One quota's `r` and `t`.
#[derive(Debug, Default)]
struct Quota {
    remaining: Option<u64>,
    reset: Option<u64>,
}

/// A list member: a string or token, then its parameters; the rest of the input after it.
fn member(input: &[u8]) -> Option<(Quota, &[u8])> {
    let mut rest = bare_name(input)?;
    let mut quota = Quota::default();
    while let Some((b';', after)) = rest.split_first() {
        let after = trim_sp(after);
        let key_len = after
            .iter()
            .position(|&b| !(b.is_ascii_lowercase() || b.is_ascii_digit() || b"_-.*".contains(&b)))
            .unwrap_or(after.len());
        let (key, after) = after.split_at(key_len);
        if !key
            .first()
            .is_some_and(|&b| b.is_ascii_lowercase() || b == b'*')
        {
            return None;
        }
        let (value, after) = match after.split_first() {
            Some((b'=', value)) => parameter_value(value)?,
            _ => (None, after),
        };
        match key {
            b"r" => quota.remaining = value,
            b"t" => quota.reset = value,
            _ => {}
        }
        rest = after;
    }
    Some((quota, rest))
}

/// A quota's name: an sf-string (`"…"`, with `\"` and `\\`) or an sf-token.
fn bare_name(input: &[u8]) -> Option<&[u8]> {
    match input.split_first()? {
        (b'"', mut rest) => loop {
            match rest.split_first()? {
                (b'"', after) => return Some(after),
                (b'\\', after) => match after.split_first()? {
                    (b'"' | b'\\', after) => rest = after,
                    _ => return None,
                },
                (&b, after) if (0x20..0x7f).contains(&b) => rest = after,
                _ => return None,
            }
        },
        (&first, _) if first.is_ascii_alphabetic() || first == b'*' => {
            let end = input
                .iter()
                .position(|&b| !is_token_char(b))
                .unwrap_or(input.len());
            Some(&input[end..])
        }
        _ => None,
    }
}

fn is_token_char(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~:/".contains(&byte)
}

/// A parameter's value: a non-negative sf-integer (at most 15 digits) is read; any other
/// well-formed bare item (a negative or decimal number, a string, a token, a byte sequence,
/// a boolean) is skipped as no value; anything else fails the field.
fn parameter_value(input: &[u8]) -> Option<(Option<u64>, &[u8])> {
    let digits = input.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits > 0 {
        let (number, rest) = input.split_at(digits);
        if digits > 15 || rest.first() == Some(&b'.') {
            // Decimals and over-long integers are numbers, never a count of seconds here.
            let rest = skip_number(rest);
            return (digits <= 15).then_some((None, rest));
        }
        let value = number
            .iter()
            .fold(0u64, |n, d| n * 10 + u64::from(d - b'0'));
        return Some((Some(value), rest));
    }
    match input.split_first()? {
        (b'-', rest) if rest.first().is_some_and(u8::is_ascii_digit) => {
            Some((None, skip_number(rest)))
        }
        (b'?', rest) if matches!(rest.first(), Some(b'0' | b'1')) => Some((None, &rest[1..])),
        // A byte sequence, as the draft's partition key `pk` is: base64 between colons.
        (b':', rest) => {
            let end = rest.iter().position(|&b| b == b':')?;
            let base64 = |b: &u8| b.is_ascii_alphanumeric() || b"+/=".contains(b);
            rest[..end]
                .iter()
                .all(base64)
                .then_some((None, &rest[end + 1..]))
        }
        (b'"', _) => bare_name(input).map(|rest| (None, rest)),
        (&first, _) if first.is_ascii_alphabetic() || first == b'*' => {
            bare_name(input).map(|rest| (None, rest))
        }
        _ => None,
    }
}

fn skip_number(input: &[u8]) -> &[u8] {
    let end = input
        .iter()
        .position(|&b| !(b.is_ascii_digit() || b == b'.'))
        .unwrap_or(input.len());
    &input[end..]
}

fn trim_sp(input: &[u8]) -> &[u8] {
    let start = input.iter().position(|&b| b != b' ').unwrap_or(input.len());
    let end = input
        .iter()
        .rposition(|&b| b != b' ')
        .map_or(start, |end| end + 1);
    &input[start..end.max(start)]
}

fn trim_ows(input: &[u8]) -> &[u8] {
    let start = input
        .iter()
        .position(|&b| b != b' ' && b != b'\t')
        .unwrap_or(input.len());
    &input[start..]
}

/// The pushback of an answer's `RateLimit` fields: its values are one list (RFC 9651), so
/// the longest reset among every exhausted quota of every value, when all of them parse.
#[must_use]
pub fn read_ratelimit(headers: &HeaderMap) -> Option<Duration> {
    let mut longest = None;
    for value in headers.get_all(RATELIMIT) {
        let Ok(reset) = parse_list(value.as_bytes()) else {
            tracing::debug!(value = ?value, "ignoring a RateLimit field that is not a list of quotas");
            return None;
        };
        longest = longest.max(reset);
    }
    longest.map(Duration::from_secs)
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;
    use proptest::prelude::*;

    use super::*;

    fn secs(s: u64) -> Option<Duration> {
        Some(Duration::from_secs(s))
    }

    #[test]
    fn k13_an_exhausted_quota_resets_in_t_seconds_the_longest_wins() {
        let cases: [(&str, Option<Duration>); 16] = [
            (r#""default";r=0;t=30"#, secs(30)),
            (r#"default;r=0;t=30"#, secs(30)),
            (r#" "a";t=5;r=0 ,	"b";r=0;t=9 "#, secs(9)),
            (r#""a";r=0;t=5, "b";r=3;t=60"#, secs(5)),
            (r#""a";r=0;t=5;pk=:cHJvamVjdDEyMw==:"#, secs(5)),
            (r#""a";r=0;t=5;pk="user 1";x=?1;y=1.5;z=-2"#, secs(5)),
            (r#""default";r=7;t=30"#, None),
            (r#""default";r=0"#, None),
            (r#""default";r=-1;t=30"#, None),
            (r#""default";r=0;t=1.5"#, None),
            (r#""default";r=0;t=9999999999999999"#, None),
            ("r=0;t=30", None),
            (r#""a";r=0;t=5,"#, None),
            (r#""a";R=0;t=5"#, None),
            (r#""a" "b";r=0;t=5"#, None),
            ("", None),
        ];
        for (value, expected) in cases {
            assert_eq!(ratelimit_reset(value.as_bytes()), expected, "{value}");
        }
    }

    #[test]
    fn k13_every_ratelimit_line_is_one_list_and_one_that_fails_fails_the_field() {
        let mut headers = HeaderMap::new();
        headers.append(RATELIMIT, HeaderValue::from_static(r#""a";r=0;t=5"#));
        headers.append(RATELIMIT, HeaderValue::from_static(r#""b";r=0;t=8"#));
        assert_eq!(read_ratelimit(&headers), secs(8));
        headers.append(RATELIMIT, HeaderValue::from_static("not a list;"));
        assert_eq!(read_ratelimit(&headers), None);
    }

    #[test]
    fn k13_retry_after_comes_before_ratelimit() {
        let mut headers = HeaderMap::new();
        headers.insert(RATELIMIT, HeaderValue::from_static(r#""a";r=0;t=50"#));
        let now = std::time::SystemTime::UNIX_EPOCH;
        assert_eq!(crate::retry_after(&headers, now), secs(50));
        headers.insert(http::header::RETRY_AFTER, HeaderValue::from_static("2"));
        assert_eq!(crate::retry_after(&headers, now), secs(2));
    }

    proptest! {
        /// Quotas written as the draft writes them read back: the longest reset of those with
        /// nothing left.
        #[test]
        fn k13_written_quotas_read_back(
            quotas in proptest::collection::vec(("[a-z][a-z0-9]{0,6}", 0u64..4, 0u64..1_000_000), 1..5),
            quoted in any::<bool>(),
        ) {
            let value = quotas
                .iter()
                .map(|(name, r, t)| {
                    if quoted { format!(r#""{name}";r={r};t={t}"#) } else { format!("{name};r={r};t={t}") }
                })
                .collect::<Vec<_>>()
                .join(", ");
            let expected = quotas.iter().filter(|(_, r, _)| *r == 0).map(|(_, _, t)| *t).max();
            prop_assert_eq!(ratelimit_reset(value.as_bytes()), expected.map(Duration::from_secs));
        }
    }
}
