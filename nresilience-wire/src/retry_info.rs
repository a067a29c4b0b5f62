//! A gRPC server's pushback as `google.rpc.RetryInfo`, in `grpc-status-details-bin` (K15):
//! Google Cloud and Gemini answer `RESOURCE_EXHAUSTED` with it.
//!
//! The header holds a base64 `google.rpc.Status` whose `details` are `google.protobuf.Any`
//! messages; the one of type `google.rpc.RetryInfo` names the delay as a
//! `google.protobuf.Duration`. Read here by a protobuf reader of the four messages' few
//! fields, so that the wire needs no protobuf runtime; anything that is not well-formed
//! protobuf of that shape is no pushback.

use std::time::Duration;

use http::HeaderMap;

use crate::names::GRPC_STATUS_DETAILS;

/// The `type_url` of a `google.rpc.RetryInfo` in an `Any`.
const RETRY_INFO_TYPE: &[u8] = b"type.googleapis.com/google.rpc.RetryInfo";

/// The longest `google.protobuf.Duration` the type allows: about 10,000 years.
const MAX_SECONDS: i64 = 315_576_000_000;

/// The delay a `grpc-status-details-bin` value's `google.rpc.RetryInfo` asks for: base64
/// (padded or not, as gRPC's binary headers are), ASCII whitespace around it ignored. A value
/// that is not base64, not a well-formed `google.rpc.Status`, carries no `RetryInfo`, or
/// whose delay is negative, has out-of-range nanoseconds or passes the type's ten thousand
/// years, is `None`; of several `RetryInfo` details, the first decides.
///
/// ```
/// use std::time::Duration;
/// use nresilience_wire::retry_info_delay;
///
/// // google.rpc.Status { code: 8, message: "quota", details: [RetryInfo { retry_delay: 1.5 s }] }
/// let value = b"CAgSBXF1b3RhGjYKKHR5cGUuZ29vZ2xlYXBpcy5jb20vZ29vZ2xlLnJwYy5SZXRyeUluZm8SCgoICAEQgMq17gE";
/// assert_eq!(retry_info_delay(value), Some(Duration::from_millis(1500)));
/// assert_eq!(retry_info_delay(b"CAg"), None); // a status with no details
/// assert_eq!(retry_info_delay(b"not base64!"), None);
/// ```
#[must_use]
pub fn retry_info_delay(value: &[u8]) -> Option<Duration> {
    let status = base64(value.trim_ascii())?;
    let mut delay = None;
    for field in Fields(&status) {
        if let (3, Value::Bytes(any)) = field? {
            if let Detail::RetryInfo(found) = detail(any)? {
                delay = delay.or(Some(found));
            }
        }
    }
    delay
}

/// The pushback an answer's `grpc-status-details-bin` asks for: its first value that holds a
/// `RetryInfo` delay decides (a well-formed status without one says nothing).
pub fn read_retry_info(headers: &HeaderMap) -> Option<Duration> {
    headers
        .get_all(GRPC_STATUS_DETAILS)
        .iter()
        .find_map(|value| retry_info_delay(value.as_bytes()))
}

/// A status's detail, an `Any`.
enum Detail {
    /// A `RetryInfo`, with its delay.
    RetryInfo(Duration),
    /// A detail of another type.
    Other,
}

/// What an `Any` is, or `None` when it is malformed.
fn detail(any: &[u8]) -> Option<Detail> {
    let (mut type_url, mut value) = (None, None);
    for field in Fields(any) {
        match field? {
            (1, Value::Bytes(url)) => type_url = Some(url),
            (2, Value::Bytes(bytes)) => value = Some(bytes),
            (1 | 2, _) => return None,
            _ => {}
        }
    }
    if type_url != Some(RETRY_INFO_TYPE) {
        return Some(Detail::Other);
    }
    // RetryInfo { google.protobuf.Duration retry_delay = 1; }: a message field sent twice
    // merges, the later value of each of its fields winning, as every protobuf reader does.
    let (mut seconds, mut nanos) = (0_i64, 0_i64);
    for field in Fields(value.unwrap_or_default()) {
        match field? {
            (1, Value::Bytes(duration)) => {
                for field in Fields(duration) {
                    match field? {
                        (1, Value::Varint(value)) => seconds = value.cast_signed(),
                        // An int32, sign-extended to ten bytes when negative.
                        (2, Value::Varint(value)) => nanos = value.cast_signed(),
                        (1 | 2, _) => return None,
                        _ => {}
                    }
                }
            }
            (1, _) => return None,
            _ => {}
        }
    }
    if !(0..=MAX_SECONDS).contains(&seconds) || !(0..1_000_000_000).contains(&nanos) {
        return None;
    }
    Some(Detail::RetryInfo(Duration::new(
        u64::try_from(seconds).ok()?,
        u32::try_from(nanos).ok()?,
    )))
}

/// One field's value, by its wire type.
enum Value<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    Fixed,
}

/// A message's fields in order, `(number, value)`; a malformed one ends it with `None`.
struct Fields<'a>(&'a [u8]);

impl<'a> Iterator for Fields<'a> {
    type Item = Option<(u64, Value<'a>)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.0.is_empty() {
            return None;
        }
        let field = self.field();
        if field.is_none() {
            self.0 = &[];
        }
        Some(field)
    }
}

impl<'a> Fields<'a> {
    fn field(&mut self) -> Option<(u64, Value<'a>)> {
        let key = self.varint()?;
        let value = match key & 7 {
            0 => Value::Varint(self.varint()?),
            1 => self.skip(8)?,
            2 => {
                let len = usize::try_from(self.varint()?).ok()?;
                let (bytes, rest) = self.0.split_at_checked(len)?;
                self.0 = rest;
                Value::Bytes(bytes)
            }
            5 => self.skip(4)?,
            // Groups (3, 4) are gone from protobuf; 6 and 7 were never wire types.
            _ => return None,
        };
        let number = key >> 3;
        (number > 0).then_some((number, value))
    }

    fn skip(&mut self, len: usize) -> Option<Value<'a>> {
        self.0 = self.0.get(len..)?;
        Some(Value::Fixed)
    }

    /// A base-128 varint of at most ten bytes; bits past 64 are malformed.
    fn varint(&mut self) -> Option<u64> {
        let mut value = 0_u64;
        for (i, &byte) in self.0.iter().enumerate().take(10) {
            let bits = u64::from(byte & 0x7f);
            if i == 9 && bits > 1 {
                return None;
            }
            value |= bits << (7 * i);
            if byte & 0x80 == 0 {
                self.0 = &self.0[i + 1..];
                return Some(value);
            }
        }
        None
    }
}

/// Standard base64, padded or not; anything else is `None`.
fn base64(text: &[u8]) -> Option<Vec<u8>> {
    // Padding, when present, makes the whole a multiple of four.
    let text = match text {
        [rest @ .., b'=', b'='] | [rest @ .., b'='] if text.len().is_multiple_of(4) => rest,
        _ => text,
    };
    if text.len() % 4 == 1 {
        return None;
    }
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    for chunk in text.chunks(4) {
        let mut group = 0_u32;
        for &c in chunk {
            let sextet = match c {
                b'A'..=b'Z' => c - b'A',
                b'a'..=b'z' => c - b'a' + 26,
                b'0'..=b'9' => c - b'0' + 52,
                b'+' => 62,
                b'/' => 63,
                _ => return None,
            };
            group = group << 6 | u32::from(sextet);
        }
        group <<= 6 * (4 - chunk.len());
        let bytes = group.to_be_bytes();
        out.extend_from_slice(&bytes[1..chunk.len()]);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;
    use proptest::prelude::*;

    use super::*;

    fn varint(mut value: u64, out: &mut Vec<u8>) {
        while value >= 0x80 {
            out.push((value as u8 & 0x7f) | 0x80);
            value >>= 7;
        }
        out.push(value as u8);
    }

    fn field(number: u64, bytes: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        varint(number << 3 | 2, &mut out);
        varint(bytes.len() as u64, &mut out);
        out.extend_from_slice(bytes);
        out
    }

    fn number(number: u64, value: u64) -> Vec<u8> {
        let mut out = Vec::new();
        varint(number << 3, &mut out);
        varint(value, &mut out);
        out
    }

    fn duration(seconds: i64, nanos: i32) -> Vec<u8> {
        let mut out = number(1, seconds as u64);
        out.extend(number(2, i64::from(nanos) as u64));
        out
    }

    fn packed(type_url: &[u8], value: &[u8]) -> Vec<u8> {
        let mut out = field(1, type_url);
        out.extend(field(2, value));
        out
    }

    fn retry_info(duration: &[u8]) -> Vec<u8> {
        packed(RETRY_INFO_TYPE, &field(1, duration))
    }

    fn status(details: &[Vec<u8>]) -> Vec<u8> {
        let mut out = number(1, 8);
        out.extend(field(2, b"quota"));
        for detail in details {
            out.extend(field(3, detail));
        }
        out
    }

    fn encode(bytes: &[u8]) -> Vec<u8> {
        const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut out = Vec::new();
        for chunk in bytes.chunks(3) {
            let mut group = [0_u8; 3];
            group[..chunk.len()].copy_from_slice(chunk);
            let group = u32::from_be_bytes([0, group[0], group[1], group[2]]);
            for i in 0..=chunk.len() {
                out.push(ALPHABET[(group >> (18 - 6 * i) & 63) as usize]);
            }
        }
        out
    }

    fn delay_of(status: &[u8]) -> Option<Duration> {
        retry_info_delay(&encode(status))
    }

    #[test]
    fn k15_the_retry_info_s_delay_is_read_to_the_nanosecond() {
        let answer = status(&[retry_info(&duration(2, 250_000_001))]);
        assert_eq!(delay_of(&answer), Some(Duration::new(2, 250_000_001)));
        assert_eq!(delay_of(&status(&[retry_info(&[])])), Some(Duration::ZERO));
        let mut padded = encode(&answer);
        padded.resize(padded.len().next_multiple_of(4), b'=');
        assert!(padded.ends_with(b"="));
        assert_eq!(
            retry_info_delay(&padded),
            Some(Duration::new(2, 250_000_001))
        );
        let spaced = [b" \t".as_slice(), &padded, b" "].concat();
        assert_eq!(
            retry_info_delay(&spaced),
            Some(Duration::new(2, 250_000_001))
        );
    }

    proptest! {
        #[test]
        fn k15_every_delay_in_range_reads_back(seconds in 0..=MAX_SECONDS, nanos in 0..1_000_000_000_i32) {
            let answer = status(&[retry_info(&duration(seconds, nanos))]);
            prop_assert_eq!(
                delay_of(&answer),
                Some(Duration::new(seconds as u64, nanos as u32))
            );
        }

        #[test]
        fn k15_any_bytes_are_a_delay_or_none_never_a_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = retry_info_delay(&bytes);
            let _ = delay_of(&bytes);
        }
    }

    #[test]
    fn k15_other_details_are_skipped_and_the_first_retry_info_decides() {
        let help = packed(b"type.googleapis.com/google.rpc.Help", &field(1, b"docs"));
        let answer = status(&[
            help,
            retry_info(&duration(1, 0)),
            retry_info(&duration(9, 0)),
        ]);
        assert_eq!(delay_of(&answer), Some(Duration::from_secs(1)));
        let only_help = status(&[packed(b"type.googleapis.com/google.rpc.Help", &[])]);
        assert_eq!(delay_of(&only_help), None);
        assert_eq!(delay_of(&status(&[])), None);
    }

    #[test]
    fn k15_unknown_fields_of_every_wire_type_are_skipped() {
        let mut duration = duration(3, 0);
        duration.extend([0x1d, 1, 2, 3, 4]); // field 3, fixed32
        duration.extend([0x21, 1, 2, 3, 4, 5, 6, 7, 8]); // field 4, fixed64
        let mut answer = status(&[retry_info(&duration)]);
        answer.extend(field(9, b"extra"));
        assert_eq!(delay_of(&answer), Some(Duration::from_secs(3)));
    }

    #[test]
    fn k15_a_negative_out_of_range_or_malformed_delay_is_no_pushback() {
        for bad in [
            duration(-1, 0),
            duration(0, -5),
            duration(1, 1_000_000_000),
            duration(MAX_SECONDS + 1, 0),
            number(1, 7)[..1].to_vec(),  // a key with no value
            vec![0x0b, 0x0c],            // a group: gone from protobuf
            field(1, b"nested garbage"), // seconds as bytes
        ] {
            assert_eq!(delay_of(&status(&[retry_info(&bad)])), None, "{bad:?}");
        }
        let mut truncated = status(&[retry_info(&duration(1, 0))]);
        truncated.pop();
        assert_eq!(delay_of(&truncated), None);
        assert_eq!(
            delay_of(&status(&[retry_info(&duration(MAX_SECONDS, 999_999_999))])),
            Some(Duration::new(MAX_SECONDS as u64, 999_999_999))
        );
        // Field 0 is never a field; a varint of eleven bytes is never a varint.
        assert_eq!(delay_of(&[0x02, 0x00]), None);
        assert_eq!(
            delay_of(&[0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f]),
            None
        );
    }

    #[test]
    fn k15_the_first_header_with_a_retry_info_decides() {
        let mut headers = HeaderMap::new();
        assert_eq!(read_retry_info(&headers), None);
        headers.append(GRPC_STATUS_DETAILS, HeaderValue::from_static("garbage!"));
        let status = encode(&status(&[retry_info(&duration(0, 5_000_000))]));
        headers.append(
            GRPC_STATUS_DETAILS,
            HeaderValue::from_bytes(&status).unwrap(),
        );
        assert_eq!(read_retry_info(&headers), Some(Duration::from_millis(5)));
    }

    #[test]
    fn base64_reads_padded_and_unpadded_and_refuses_the_rest() {
        assert_eq!(base64(b"aGk"), Some(b"hi".to_vec()));
        assert_eq!(base64(b"aGk="), Some(b"hi".to_vec()));
        assert_eq!(base64(b"aGVsbG8gd29ybGQ"), Some(b"hello world".to_vec()));
        assert_eq!(base64(b""), Some(Vec::new()));
        assert_eq!(base64(b"a"), None);
        assert_eq!(base64(b"aG-k"), None);
        assert_eq!(base64(b"a=Gk"), None);
        assert_eq!(base64(b"aGk=="), None);
        assert_eq!(base64(b"aG=="), Some(b"h".to_vec()));
        assert_eq!(base64(b"aG="), None);
    }
}
