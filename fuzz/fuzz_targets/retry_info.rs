//! gRPC's `google.rpc.RetryInfo` in `grpc-status-details-bin` (SPEC K15):
//! `nresilience_wire::{retry_info_delay, read_retry_info}` on arbitrary bytes, and its place
//! in `nresilience_client::grpc::classify_grpc` beside `grpc-retry-pushback-ms`.
//!
//! The input is read twice: as the header's value itself, and as the protobuf the value
//! encodes (base64-encoded here, so that the fuzzer explores the message's structure rather
//! than the alphabet).
//!
//! Asserts, beyond "no panic":
//! - a delay read is at most the type's 10,000 years, and the encoded message names the
//!   `RetryInfo` type;
//! - the same message padded, unpadded, or with whitespace around it reads the same;
//! - on `RESOURCE_EXHAUSTED` the delay read is the verdict's pushback, before a
//!   `grpc-retry-pushback-ms: 20` beside it, and a `grpc-retry-pushback-ms: -1` stops the
//!   call whatever the details say.
#![no_main]

use std::time::Duration;

use http::header::{HeaderMap, HeaderValue};
use http::StatusCode;
use base64::engine::general_purpose::STANDARD_NO_PAD;
use base64::Engine;
use libfuzzer_sys::fuzz_target;
use nresilience_client::grpc::classify_grpc;
use nresilience_core::Verdict;
use nresilience_wire::{
    read_retry_info, retry_info_delay, GRPC_PUSHBACK, GRPC_STATUS, GRPC_STATUS_DETAILS,
};

const TEN_THOUSAND_YEARS: Duration = Duration::from_secs(315_576_000_001);
const RETRY_INFO_TYPE: &[u8] = b"type.googleapis.com/google.rpc.RetryInfo";

/// Standard base64 without padding, as tonic writes binary metadata, by the `base64` crate:
/// an encoder independent of the reader under test.
fn base64(bytes: &[u8]) -> Vec<u8> {
    STANDARD_NO_PAD.encode(bytes).into_bytes()
}

fn verdict(details: &[u8], pushback: Option<&'static str>) -> Option<Verdict> {
    let mut headers = HeaderMap::new();
    headers.insert(GRPC_STATUS, HeaderValue::from_static("8"));
    headers.insert(GRPC_STATUS_DETAILS, HeaderValue::from_bytes(details).ok()?);
    if let Some(pushback) = pushback {
        headers.insert(GRPC_PUSHBACK, HeaderValue::from_static(pushback));
    }
    assert_eq!(read_retry_info(&headers), retry_info_delay(details));
    Some(classify_grpc(StatusCode::OK, &headers))
}

fn throttled(retry_after: Option<Duration>) -> Verdict {
    Verdict::Throttled {
        self_imposed: false,
        retry_after,
    }
}

fuzz_target!(|data: &[u8]| {
    if let Some(delay) = retry_info_delay(data) {
        assert!(delay < TEN_THOUSAND_YEARS, "{data:?}");
    }

    let unpadded = base64(data);
    let delay = retry_info_delay(&unpadded);
    if let Some(delay) = delay {
        assert!(delay < TEN_THOUSAND_YEARS, "{data:?}");
        assert!(
            data.windows(RETRY_INFO_TYPE.len()).any(|w| w == RETRY_INFO_TYPE),
            "{data:?}"
        );
    }
    let mut padded = unpadded.clone();
    padded.resize(padded.len().next_multiple_of(4), b'=');
    assert_eq!(retry_info_delay(&padded), delay, "{data:?}");
    let spaced = [b" \t".as_slice(), &padded, b"\t "].concat();
    assert_eq!(retry_info_delay(&spaced), delay, "{data:?}");

    for details in [data, &unpadded] {
        let Some(alone) = verdict(details, None) else { continue };
        let found = retry_info_delay(details);
        assert_eq!(alone, throttled(found), "{details:?}");
        assert_eq!(
            verdict(details, Some("20")),
            Some(throttled(found.or(Some(Duration::from_millis(20))))),
            "{details:?}"
        );
        assert_eq!(verdict(details, Some("-1")), Some(Verdict::Permanent), "{details:?}");
    }
});
