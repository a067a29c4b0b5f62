//! The retry layer against real axum servers on loopback (SPEC H1–H5, K13, N1, B7).
//!
//! Servers run on their own runtime in real time; the client runs on a paused clock with no
//! attempt timeout or deadline, so the only timers are the delays under test and virtual
//! time measures them exactly.

#![allow(clippy::unwrap_used)]

mod support;

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::{Duration, SystemTime};

use axum::http::{HeaderValue, Method, Request};
use bytes::Bytes;
use http_body_util::Full;
use nresilience_client::{Client, Retryable, MARKER_HEADER};
use nresilience_core::{Backoff, BudgetOptions, RetryBudget, RetryPolicy, StopReason};
use support::{marked, policy, server, unmarked};
use tokio::time::Instant;

fn client(policy: nresilience_core::RetryPolicyBuilder) -> Client {
    Client::new(policy.build().unwrap())
}

fn url(addr: SocketAddr) -> String {
    format!("http://{addr}/")
}

fn request(method: Method, addr: SocketAddr, body: Vec<u8>) -> Request<Full<Bytes>> {
    Request::builder()
        .method(method)
        .uri(url(addr))
        .body(Full::new(Bytes::from(body)))
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn n1_marker_is_on_the_first_attempt_and_every_retry() {
    let (addr, script) = server(&[(503, None), (500, None)]);
    let response = client(policy()).get(url(addr)).await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(script.markers(), marked(3));
}

#[tokio::test(start_paused = true)]
async fn n1_h3_post_without_opt_in_is_sent_once_unmarked_and_its_answer_returned() {
    let (addr, script) = server(&[(503, None)]);
    let response = client(policy())
        .request(request(Method::POST, addr, b"order".to_vec()))
        .await
        .unwrap();
    assert_eq!(response.status(), 503, "the answer, not an error");
    assert_eq!(script.markers(), unmarked());
}

#[tokio::test(start_paused = true)]
async fn h3_a_per_request_choice_wins_both_ways() {
    let (addr, script) = server(&[(503, None), (503, None)]);
    let mut post = request(Method::POST, addr, b"order".to_vec());
    post.extensions_mut().insert(Retryable(true));
    let response = client(policy()).request(post).await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(script.markers().len(), 3);
    assert!(script.markers().iter().all(|m| m == &["1"]));

    let (addr, script) = server(&[(503, None)]);
    let mut get = request(Method::GET, addr, Vec::new());
    get.extensions_mut().insert(Retryable(false));
    let response = client(policy()).request(get).await.unwrap();
    assert_eq!(response.status(), 503);
    assert_eq!(script.markers(), unmarked());
}

#[tokio::test(start_paused = true)]
async fn n1_body_too_large_to_buffer_is_sent_once_unmarked() {
    let (addr, script) = server(&[(503, None)]);
    let put = request(Method::PUT, addr, vec![7; 70 * 1024]);
    let response = client(policy()).request(put).await.unwrap();
    assert_eq!(response.status(), 503);
    assert_eq!(script.markers(), unmarked());

    let (addr, script) = server(&[(503, None)]);
    let put = request(Method::PUT, addr, vec![7; 60 * 1024]);
    let response = client(policy()).request(put).await.unwrap();
    assert_eq!(response.status(), 200, "a buffered body is replayed");
    assert_eq!(script.markers().len(), 2);
}

#[tokio::test(start_paused = true)]
async fn n1_a_request_already_marked_is_not_stamped_twice() {
    let (addr, script) = server(&[]);
    let mut get = request(Method::GET, addr, Vec::new());
    get.headers_mut()
        .insert(MARKER_HEADER, HeaderValue::from_static("1"));
    client(policy()).request(get).await.unwrap();
    assert_eq!(script.markers(), marked(1));
}

#[tokio::test(start_paused = true)]
async fn n1_a_policy_of_one_attempt_does_not_stamp() {
    let (addr, script) = server(&[(503, None)]);
    let response = client(policy().max_attempts(1))
        .get(url(addr))
        .await
        .unwrap();
    assert_eq!(response.status(), 503);
    assert_eq!(script.markers(), unmarked());
}

#[tokio::test(start_paused = true)]
async fn k13_retry_after_seconds_is_obeyed_exactly() {
    let (addr, script) = server(&[(429, Some("2"))]);
    let start = Instant::now();
    let response = client(policy()).get(url(addr)).await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(start.elapsed(), Duration::from_secs(2));
    assert_eq!(script.markers().len(), 2);
}

#[tokio::test(start_paused = true)]
async fn h2_retry_after_http_date_is_obeyed() {
    let date = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(3));
    let (addr, _) = server(&[(503, Some(&date))]);
    let start = Instant::now();
    let response = client(policy()).get(url(addr)).await.unwrap();
    assert_eq!(response.status(), 200);
    let waited = start.elapsed();
    // The date has whole seconds: the wait is what was left of them when it was read.
    assert!(
        waited > Duration::from_secs(1) && waited <= Duration::from_secs(3),
        "{waited:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn h2_garbage_or_past_retry_after_falls_back_to_the_curve() {
    let (addr, _) = server(&[(503, Some("soon")), (503, Some("-5"))]);
    let start = Instant::now();
    let response = client(policy()).get(url(addr)).await.unwrap();
    assert_eq!(response.status(), 200);
    // The transient curve without jitter: 100 ms, then 200 ms.
    assert_eq!(start.elapsed(), Duration::from_millis(300));

    let past = httpdate::fmt_http_date(SystemTime::now() - Duration::from_secs(60));
    let (addr, _) = server(&[(429, Some(&past))]);
    let start = Instant::now();
    client(policy()).get(url(addr)).await.unwrap();
    assert_eq!(start.elapsed(), Duration::ZERO, "a past date means now");
}

#[tokio::test(start_paused = true)]
async fn h4_attempts_exhausted_on_a_retryable_status_return_the_last_response() {
    let (addr, script) = server(&[(502, None), (503, None), (500, None)]);
    let response = client(policy()).get(url(addr)).await.unwrap();
    assert_eq!(response.status(), 500);
    assert_eq!(script.markers().len(), 3);
}

#[tokio::test(start_paused = true)]
async fn b7_budget_refusal_end_to_end_is_call_rejected_with_a_hint() {
    let (addr, script) = server(&[(503, None); 10]);
    let options = BudgetOptions::default()
        .minimum_per_second(4.0)
        .capacity(1.0);
    let client = client(
        policy()
            .backoff(Backoff::none())
            .budget(RetryBudget::automatic().with_options(options)),
    );
    let start = Instant::now();
    let error = client.get(url(addr)).await.unwrap_err();
    assert_eq!(error.reason(), StopReason::BudgetExhausted);
    assert_eq!(error.attempts(), 2);
    assert_eq!(
        script.markers().len(),
        2,
        "the refused retry never reached the server"
    );
    assert_eq!(start.elapsed(), Duration::from_millis(100));
    let rejected = error.rejection().unwrap();
    assert_eq!(rejected.retry_after, Some(Duration::from_millis(150)));
}

#[tokio::test(start_paused = true)]
async fn h5_a_storm_against_one_host_cannot_throttle_retries_to_another() {
    let (stormy, stormy_script) = server(&[(503, None); 20]);
    let (calm, calm_script) = server(&[(503, None)]);
    let options = BudgetOptions::default()
        .minimum_per_second(0.0)
        .capacity(2.0);
    let client = client(
        policy()
            .backoff(Backoff::none())
            .max_attempts(10)
            .budget(RetryBudget::automatic().with_options(options)),
    );
    let error = client.get(url(stormy)).await.unwrap_err();
    assert_eq!(error.reason(), StopReason::BudgetExhausted);
    assert_eq!(stormy_script.markers().len(), 3, "two tokens, two retries");
    let response = client.get(url(calm)).await.unwrap();
    assert_eq!(response.status(), 200, "the calm host has its own bucket");
    assert_eq!(calm_script.markers().len(), 2);
}

#[tokio::test(start_paused = true)]
async fn b1_a_single_attempt_post_still_deposits() {
    let (addr, script) = server(&[(503, None)]);
    let options = BudgetOptions::default()
        .minimum_per_second(0.0)
        .capacity(1.0);
    let client = client(
        policy()
            .backoff(Backoff::none())
            .budget(RetryBudget::automatic().with_options(options)),
    );
    // Spend the one token.
    client.get(url(addr)).await.unwrap();
    assert_eq!(script.markers().len(), 2);
    for _ in 0..10 {
        let response = client
            .request(request(Method::POST, addr, b"x".to_vec()))
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
    }
    // Ten successful POSTs funded exactly one retry; the next retry is refused.
    script.then(&[(503, None), (503, None)]);
    let error = client.get(url(addr)).await.unwrap_err();
    assert_eq!(error.reason(), StopReason::BudgetExhausted);
    assert_eq!(error.attempts(), 2);
    assert_eq!(script.markers().len(), 2 + 10 + 2);
}

#[tokio::test]
async fn e1_connection_refused_is_transient_and_retried() {
    // A port nobody listens on: bind, read the address, close.
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let client = client(
        RetryPolicy::builder()
            .backoff(Backoff::constant(Duration::from_millis(1)))
            .attempt_ceiling(None),
    );
    let error = client.get(url(addr)).await.unwrap_err();
    assert_eq!(error.reason(), StopReason::AttemptsExhausted);
    assert_eq!(error.attempts(), 3);
    assert!(error.last_error().is_some(), "{error}");
}

/// A body of unknown length, as a stream (or a tonic request) has.
struct Chunked(VecDeque<Bytes>);

impl http_body::Body for Chunked {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        std::task::Poll::Ready(self.0.pop_front().map(|b| Ok(http_body::Frame::data(b))))
    }
}

fn chunked(addr: SocketAddr, chunks: usize, chunk: usize) -> Request<Chunked> {
    let body = Chunked((0..chunks).map(|_| Bytes::from(vec![1u8; chunk])).collect());
    Request::put(url(addr)).body(body).unwrap()
}

#[tokio::test(start_paused = true)]
async fn n1_a_short_body_of_unknown_length_is_buffered_stamped_and_replayed() {
    let (addr, script) = server(&[(503, None)]);
    let response = client(policy())
        .request(chunked(addr, 4, 1000))
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(script.markers(), marked(2));
    assert_eq!(script.body_lengths(), vec![4000, 4000]);
}

#[tokio::test(start_paused = true)]
async fn n1_a_long_body_of_unknown_length_is_sent_once_whole_and_unmarked() {
    let (addr, script) = server(&[(503, None)]);
    let response = client(policy())
        .request(chunked(addr, 100, 1000))
        .await
        .unwrap();
    assert_eq!(response.status(), 503);
    assert_eq!(script.markers(), unmarked());
    assert_eq!(script.body_lengths(), vec![100_000], "nothing lost");
}
