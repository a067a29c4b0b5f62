//! Helpers shared by the fuzz targets: the text formats of their inputs, reference readings
//! written from the SPEC (not from the library's code), and a one-poll executor.
//!
//! Every header target reads its input as text lines, so the seed corpora are readable and
//! hand-written: a header value cannot hold `\n`, so splitting on it loses nothing.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use http::header::{HeaderMap, HeaderName, HeaderValue};

/// The input's lines: split on `\n`, an optional `\r` before it dropped.
pub fn lines(data: &[u8]) -> impl Iterator<Item = &[u8]> {
    data.split(|&byte| byte == b'\n')
        .map(|line| line.strip_suffix(b"\r").unwrap_or(line))
}

/// The input's lines that are header values, and all of them as `name`'s values, in order.
pub fn values_of(name: &HeaderName, data: &[u8]) -> (Vec<HeaderValue>, HeaderMap) {
    let values: Vec<HeaderValue> = lines(data)
        .filter_map(|line| HeaderValue::from_bytes(line).ok())
        .collect();
    let mut headers = HeaderMap::new();
    for value in &values {
        headers.append(name, value.clone());
    }
    (values, headers)
}

/// One line of a `name: value` input.
#[derive(Debug)]
pub enum Line<'a> {
    /// A header the peer sent.
    Header(HeaderName, HeaderValue),
    /// `:directive: value` — a setting of the harness (status, max depth …), not a header.
    Directive(&'a [u8], &'a [u8]),
}

/// Reads `name: value` lines (one space after the colon is dropped; the rest of the value is
/// kept byte for byte, whitespace included). A line starting with `:` is a directive. Lines
/// without a colon, with an invalid name, or a value `http` refuses (NUL, CR) are skipped, as
/// a server's HTTP parser would never hand them on.
pub fn header_lines(data: &[u8]) -> Vec<Line<'_>> {
    let mut out = Vec::new();
    for line in lines(data) {
        if let Some(rest) = line.strip_prefix(b":") {
            let (name, value) = split_colon(rest);
            out.push(Line::Directive(name, value));
            continue;
        }
        if !line.contains(&b':') {
            continue;
        }
        let (name, value) = split_colon(line);
        let (Ok(name), Ok(value)) = (HeaderName::from_bytes(name), HeaderValue::from_bytes(value))
        else {
            continue;
        };
        out.push(Line::Header(name, value));
    }
    out
}

fn split_colon(line: &[u8]) -> (&[u8], &[u8]) {
    match line.iter().position(|&byte| byte == b':') {
        Some(colon) => {
            let value = &line[colon + 1..];
            (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
        }
        None => (line, b""),
    }
}

/// The headers of `lines`, in order.
pub fn header_map(lines: &[Line<'_>]) -> HeaderMap {
    let mut headers = HeaderMap::new();
    for line in lines {
        if let Line::Header(name, value) = line {
            headers.append(name.clone(), value.clone());
        }
    }
    headers
}

/// The value of the first directive `name`, if any.
pub fn directive<'a>(lines: &[Line<'a>], name: &[u8]) -> Option<&'a [u8]> {
    lines.iter().find_map(|line| match line {
        Line::Directive(n, value) if *n == name => Some(*value),
        _ => None,
    })
}

/// A small unsigned decimal from a directive, saturating; `None` if it is not digits.
pub fn directive_number(value: &[u8]) -> Option<u64> {
    if value.is_empty() || !value.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(value.iter().fold(0u64, |n, digit| {
        n.saturating_mul(10).saturating_add(u64::from(digit - b'0'))
    }))
}

/// Polls `future` once and returns its output. Every future the targets build is ready at
/// once (the handlers do not wait), so a `Pending` is a bug of the harness or the layer.
pub fn ready<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    let mut cx = Context::from_waker(Waker::noop());
    match future.as_mut().poll(&mut cx) {
        Poll::Ready(output) => output,
        Poll::Pending => panic!("a future that cannot wait returned Pending"),
    }
}

/// SPEC N4, written from the rule: a marker value marks when it is exactly `1`, or when it is
/// visible ASCII (SP and HTAB allowed) and one of its comma-separated elements is `1` with
/// optional whitespace (SP, HTAB) around it.
pub fn n4_marks(value: &[u8]) -> bool {
    if value == b"1" {
        return true;
    }
    let text_like = value
        .iter()
        .all(|&byte| byte == b'\t' || (0x20..0x7f).contains(&byte));
    text_like
        && value.split(|&byte| byte == b',').any(|element| {
            let start = element.iter().position(|b| !matches!(b, b' ' | b'\t'));
            let end = element.iter().rposition(|b| !matches!(b, b' ' | b'\t'));
            match (start, end) {
                (Some(start), Some(end)) => &element[start..=end] == b"1",
                _ => false,
            }
        })
}

/// The chain's strict unsigned decimal (SPEC C2, C4, C6): one to `max_digits` ASCII digits,
/// nothing else, read exactly (leading zeros allowed).
pub fn strict_decimal(value: &[u8], max_digits: usize) -> Option<u64> {
    if value.is_empty() || value.len() > max_digits || !value.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(value).ok()?.parse().ok()
}

/// A count as the wire reads one (SPEC C4, C6), written independently: ASCII digits only, at
/// least one, not zero; a value too large for a `u32` is `u32::MAX`.
pub fn saturating_count(value: &[u8]) -> Option<u32> {
    if value.is_empty() || !value.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let significant = std::str::from_utf8(value).ok()?.trim_start_matches('0');
    if significant.is_empty() {
        return None;
    }
    if significant.len() > 10 {
        return Some(u32::MAX);
    }
    let n: u64 = significant.parse().ok()?;
    Some(u32::try_from(n).unwrap_or(u32::MAX))
}
