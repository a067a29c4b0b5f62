//! Large request bodies (SPEC H7): a 10 MiB upload the caller can make again is retried whole
//! through `Client` and the reqwest middleware without being held in memory; one that cannot
//! be made again is sent once, and the error, the answer and the span say why it was not
//! retried. Against a real axum server on loopback that reads every body to its end.
//!
//! Servers run on their own runtime in real time; the client runs on a paused clock with no
//! attempt timeout or deadline, so the only timers are the delays between attempts.

#![cfg(feature = "reqwest")]
#![allow(clippy::unwrap_used)]

// The behaviour suite is not run here.
#[allow(unused_macros, unused_imports)]
mod support;

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::any;
use axum::Router;
use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use http_body_util::{BodyExt, Empty, Full};
use nresilience_client::{Attempts, Client, Reopen, Retryable};
use nresilience_core::StopReason;
use reqwest_middleware::ClientWithMiddleware;
use support::spans::Spans;
use support::{policy, serve};

const UPLOAD: usize = 10 * 1024 * 1024;
const CHUNK: usize = 64 * 1024;
/// What a client may hold of a body at once: hyper's write buffer and a frame or two, far
/// below the 10 MiB a body held whole takes.
const FLAT: usize = 2 * 1024 * 1024;

// ===== the server =====

/// What the server saw of one request's body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Received {
    len: usize,
    hash: u64,
    content_length: Option<usize>,
}

/// Answers each request with the next scripted status, then 200, once it has read its body.
#[derive(Clone, Default)]
struct Uploads {
    statuses: Arc<Mutex<VecDeque<u16>>>,
    received: Arc<Mutex<Vec<Received>>>,
}

impl Uploads {
    fn received(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }
}

async fn upload(
    State(uploads): State<Uploads>,
    headers: HeaderMap,
    body: axum::body::Body,
) -> StatusCode {
    let mut body = body;
    let (mut len, mut hash) = (0, Fnv::new());
    while let Some(frame) = body.frame().await {
        if let Ok(data) = frame.unwrap().into_data() {
            len += data.len();
            hash.write(&data);
        }
    }
    let content_length = headers
        .get(http::header::CONTENT_LENGTH)
        .map(|v| v.to_str().unwrap().parse().unwrap());
    uploads.received.lock().unwrap().push(Received {
        len,
        hash: hash.0,
        content_length,
    });
    let status = uploads.statuses.lock().unwrap().pop_front().unwrap_or(200);
    StatusCode::from_u16(status).unwrap()
}

/// A server that answers `statuses` in order, then 200, on its own real-time runtime.
fn uploads_server(statuses: &[u16]) -> (SocketAddr, Uploads) {
    let uploads = Uploads::default();
    uploads.statuses.lock().unwrap().extend(statuses);
    let app = Router::new()
        .route("/", any(upload))
        .layer(DefaultBodyLimit::disable())
        .with_state(uploads.clone());
    (serve(app), uploads)
}

/// FNV-1a, 64 bits: enough to tell a body reordered or cut from the one sent.
struct Fnv(u64);

impl Fnv {
    fn new() -> Self {
        Self(0xcbf2_9ce4_8422_2325)
    }

    fn write(&mut self, bytes: &[u8]) {
        for byte in bytes {
            self.0 = (self.0 ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3);
        }
    }
}

// ===== the body =====

/// The bytes of the body's chunks alive at once, and the most there ever were.
#[derive(Default)]
struct Live {
    now: AtomicUsize,
    peak: AtomicUsize,
}

impl Live {
    fn peak(&self) -> usize {
        self.peak.load(Ordering::SeqCst)
    }
}

/// A chunk of a body that counts itself alive until the last copy of it is dropped.
struct Chunk {
    bytes: Vec<u8>,
    live: Arc<Live>,
}

impl AsRef<[u8]> for Chunk {
    fn as_ref(&self) -> &[u8] {
        &self.bytes
    }
}

impl Drop for Chunk {
    fn drop(&mut self) {
        self.live.now.fetch_sub(self.bytes.len(), Ordering::SeqCst);
    }
}

/// `UPLOAD` bytes of a pattern, made a chunk at a time as they are asked for, with their
/// length known (so sent with `Content-Length`).
struct Pattern {
    sent: usize,
    live: Arc<Live>,
}

impl Pattern {
    fn new(live: &Arc<Live>) -> Self {
        Self {
            sent: 0,
            live: Arc::clone(live),
        }
    }
}

fn byte_at(offset: usize) -> u8 {
    (offset % 251) as u8
}

impl Body for Pattern {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let start = self.sent;
        let len = CHUNK.min(UPLOAD - start);
        if len == 0 {
            return Poll::Ready(None);
        }
        self.sent += len;
        let bytes: Vec<u8> = (start..start + len).map(byte_at).collect();
        let now = self.live.now.fetch_add(len, Ordering::SeqCst) + len;
        self.live.peak.fetch_max(now, Ordering::SeqCst);
        let chunk = Chunk {
            bytes,
            live: Arc::clone(&self.live),
        };
        Poll::Ready(Some(Ok(Frame::data(Bytes::from_owner(chunk)))))
    }

    fn is_end_stream(&self) -> bool {
        self.sent == UPLOAD
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact((UPLOAD - self.sent) as u64)
    }
}

/// What the server sees of the whole pattern.
fn whole() -> Received {
    let mut hash = Fnv::new();
    hash.write(&(0..UPLOAD).map(byte_at).collect::<Vec<_>>());
    Received {
        len: UPLOAD,
        hash: hash.0,
        content_length: Some(UPLOAD),
    }
}

fn reopened(live: &Arc<Live>) -> Reopen {
    let live = Arc::clone(live);
    Reopen::new(move || Pattern::new(&live))
}

// ===== the clients =====

fn client() -> Client {
    Client::new(policy().build().unwrap())
}

fn reqwest_client() -> ClientWithMiddleware {
    let middleware = nresilience_client::reqwest::RetryMiddleware::new(policy().build().unwrap());
    let inner = reqwest::Client::builder()
        .retry(reqwest::retry::never())
        .pool_idle_timeout(None)
        .no_proxy()
        .build()
        .unwrap();
    reqwest_middleware::ClientBuilder::new(inner)
        .with(middleware)
        .build()
}

fn put(addr: SocketAddr) -> http::request::Builder {
    http::Request::put(format!("http://{addr}/"))
}

// ===== a body made again =====

#[tokio::test(start_paused = true)]
async fn h7_client_retries_a_reopened_10_mib_upload_whole_without_holding_it() {
    let (addr, uploads) = uploads_server(&[503]);
    let live = Arc::new(Live::default());
    let request = put(addr)
        .extension(reopened(&live))
        .body(Empty::<Bytes>::new())
        .unwrap();
    let response = client().request(request).await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.extensions().get::<Attempts>().unwrap().made(), 2);
    assert_eq!(uploads.received(), vec![whole(), whole()]);
    assert!(live.peak() <= FLAT, "{} bytes held at once", live.peak());
}

#[tokio::test(start_paused = true)]
async fn h7_the_reqwest_middleware_retries_a_reopened_10_mib_upload_whole_without_holding_it() {
    let (addr, uploads) = uploads_server(&[503]);
    let live = Arc::new(Live::default());
    let response = reqwest_client()
        .put(format!("http://{addr}/"))
        .with_extension(reopened(&live))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.extensions().get::<Attempts>().unwrap().made(), 2);
    assert_eq!(uploads.received(), vec![whole(), whole()]);
    assert!(live.peak() <= FLAT, "{} bytes held at once", live.peak());
}

#[tokio::test(start_paused = true)]
async fn h7_a_file_is_read_again_for_each_attempt_through_both_drivers() {
    let path = std::env::temp_dir().join(format!("nresilience-upload-{}", std::process::id()));
    std::fs::write(&path, (0..UPLOAD).map(byte_at).collect::<Vec<_>>()).unwrap();
    let reopen = Reopen::file(&path).await.unwrap();

    let (addr, uploads) = uploads_server(&[503]);
    let request = put(addr)
        .extension(reopen.clone())
        .body(Empty::<Bytes>::new())
        .unwrap();
    assert_eq!(client().request(request).await.unwrap().status(), 200);
    assert_eq!(uploads.received(), vec![whole(), whole()]);

    let (addr, uploads) = uploads_server(&[503]);
    let response = reqwest_client()
        .put(format!("http://{addr}/"))
        .with_extension(reopen)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(uploads.received(), vec![whole(), whole()]);
    std::fs::remove_file(path).unwrap();
}

#[tokio::test(start_paused = true)]
async fn h7_a_post_not_opted_in_sends_its_reopened_body_once() {
    let (addr, uploads) = uploads_server(&[503]);
    let live = Arc::new(Live::default());
    let request = http::Request::post(format!("http://{addr}/"))
        .extension(reopened(&live))
        .body(Empty::<Bytes>::new())
        .unwrap();
    let response = client().request(request).await.unwrap();
    assert_eq!(response.status(), 503);
    let attempts = response.extensions().get::<Attempts>().unwrap();
    assert_eq!(attempts.reason(), StopReason::AttemptsExhausted);
    assert_eq!(uploads.received(), vec![whole()]);
}

#[tokio::test(start_paused = true)]
async fn h7_a_reopen_beside_a_body_of_its_own_is_refused_before_anything_is_sent() {
    let (addr, uploads) = uploads_server(&[]);
    let live = Arc::new(Live::default());
    let request = put(addr)
        .extension(reopened(&live))
        .body(Full::new(Bytes::from_static(b"which one?")))
        .unwrap();
    let error = client().request(request).await.unwrap_err();
    assert_eq!(error.attempts(), 0);
    assert!(error.to_string().contains("Reopen"), "{error}");

    let error = reqwest_client()
        .put(format!("http://{addr}/"))
        .with_extension(reopened(&live))
        .body("which one?")
        .send()
        .await
        .unwrap_err();
    let failed = nresilience_client::reqwest::retry_error(&error).unwrap();
    assert_eq!(failed.attempts(), 0);
    assert!(format!("{error:#}").contains("Reopen"), "{error:#}");
    assert_eq!(uploads.received(), vec![]);
}

// ===== a stream that cannot be made again =====

#[tokio::test(start_paused = true)]
async fn h7_a_10_mib_stream_is_sent_once_and_its_answer_and_span_say_why() {
    let spans = Spans::record();
    let (addr, uploads) = uploads_server(&[503]);
    let live = Arc::new(Live::default());
    let request = put(addr).body(Pattern::new(&live)).unwrap();
    let response = client().request(request).await.unwrap();
    assert_eq!(response.status(), 503);
    let attempts = response.extensions().get::<Attempts>().unwrap();
    assert_eq!(attempts.made(), 1);
    assert_eq!(attempts.reason(), StopReason::NotReplayable);
    assert_eq!(uploads.received(), vec![whole()], "nothing lost");
    let call = spans.named("resilience");
    assert_eq!(call.len(), 1);
    assert_eq!(call[0].field("nresilience.outcome"), Some("not_replayable"));
}

#[tokio::test(start_paused = true)]
async fn h7_a_stream_whose_one_attempt_fails_is_an_error_that_says_why() {
    // A port nothing listens on: the connection is refused, which a retry could fix.
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let live = Arc::new(Live::default());
    let request = put(addr).body(Pattern::new(&live)).unwrap();
    let error = client().request(request).await.unwrap_err();
    assert_eq!(error.attempts(), 1);
    assert_eq!(error.reason(), StopReason::NotReplayable);

    let error = reqwest_client()
        .put(format!("http://{addr}/"))
        .body(reqwest::Body::wrap(Full::new(Bytes::from_static(
            b"stream",
        ))))
        .send()
        .await
        .unwrap_err();
    let failed = nresilience_client::reqwest::retry_error(&error).unwrap();
    assert_eq!(failed.attempts(), 1);
    assert_eq!(failed.reason(), StopReason::NotReplayable);
}

#[tokio::test(start_paused = true)]
async fn h7_a_stream_through_the_reqwest_middleware_is_sent_once_and_says_why() {
    let (addr, uploads) = uploads_server(&[503]);
    let response = reqwest_client()
        .put(format!("http://{addr}/"))
        .body(reqwest::Body::wrap(Full::new(Bytes::from_static(
            b"stream",
        ))))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 503);
    let attempts = response.extensions().get::<Attempts>().unwrap();
    assert_eq!(attempts.reason(), StopReason::NotReplayable);
    assert_eq!(uploads.received().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn h7_a_stream_that_may_not_be_retried_anyway_stops_as_any_single_attempt() {
    let (addr, _) = uploads_server(&[503]);
    let live = Arc::new(Live::default());
    let request = put(addr)
        .extension(Retryable(false))
        .body(Pattern::new(&live))
        .unwrap();
    let response = client().request(request).await.unwrap();
    assert_eq!(response.status(), 503);
    let attempts = response.extensions().get::<Attempts>().unwrap();
    assert_eq!(attempts.reason(), StopReason::AttemptsExhausted);
}
