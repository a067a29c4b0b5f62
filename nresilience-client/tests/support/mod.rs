//! A scripted axum server on loopback, shared by the client's integration tests.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used)]

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use axum::Router;
use bytes::Bytes;
use nresilience_client::wire;
use nresilience_core::{Backoff, BudgetOptions, Jitter, RetryBudget, RetryPolicy};

pub mod driver;
pub mod spans;
pub mod suite;

/// A scripted status with an optional `Retry-After` value, and how long to wait before it.
pub type Answer = (u16, Option<String>, Duration);

/// Headers a scripted answer carries besides `Retry-After`, by the answer's place in the
/// script: what an upstream hop sends to signal the chain.
pub type Signals = Vec<(&'static str, &'static str)>;

/// What the server answers, one scripted response per request, then 200.
#[derive(Clone, Default)]
pub struct Script {
    pub answers: Arc<Mutex<VecDeque<Answer>>>,
    pub markers: Arc<Mutex<Vec<Vec<String>>>>,
    pub bodies: Arc<Mutex<Vec<Bytes>>>,
    pub signals: Arc<Mutex<VecDeque<Signals>>>,
    /// Each request's `x-nresilience-attempt`, `-` when it had none.
    pub attempts: Arc<Mutex<Vec<String>>>,
}

impl Script {
    pub fn markers(&self) -> Vec<Vec<String>> {
        self.markers.lock().unwrap().clone()
    }

    pub fn requests(&self) -> usize {
        self.markers.lock().unwrap().len()
    }

    pub fn attempts(&self) -> Vec<String> {
        self.attempts.lock().unwrap().clone()
    }
}

async fn answer(State(script): State<Script>, headers: HeaderMap, body: Bytes) -> Response {
    script.bodies.lock().unwrap().push(body);
    let markers = headers
        .get_all(wire::MARKER)
        .iter()
        .map(|v| v.to_str().unwrap_or("?").to_owned())
        .collect();
    script.markers.lock().unwrap().push(markers);
    let attempt = headers
        .get(wire::ATTEMPT)
        .map_or("-", |v| v.to_str().unwrap_or("?"));
    script.attempts.lock().unwrap().push(attempt.to_owned());
    let next = script.answers.lock().unwrap().pop_front();
    let signals = script.signals.lock().unwrap().pop_front();
    match next {
        Some((status, retry_after, delay)) => {
            tokio::time::sleep(delay).await;
            let mut response = StatusCode::from_u16(status).unwrap().into_response();
            for (name, value) in signals.unwrap_or_default() {
                response
                    .headers_mut()
                    .append(name, HeaderValue::from_static(value));
            }
            if let Some(value) = retry_after {
                response
                    .headers_mut()
                    .insert("retry-after", HeaderValue::from_str(&value).unwrap());
            }
            response
        }
        None => "ok".into_response(),
    }
}

/// What [`Script::markers`] holds for `n` requests that each carried the marker once.
pub fn marked(n: usize) -> Vec<Vec<String>> {
    vec![vec!["1".to_owned()]; n]
}

/// What [`Script::markers`] holds for one request sent without the marker.
pub fn unmarked() -> Vec<Vec<String>> {
    vec![Vec::new()]
}

/// Starts a server answering `answers` in order (then 200s) on its own real-time runtime.
pub fn server(answers: &[(u16, Option<&str>)]) -> (SocketAddr, Script) {
    let answers: Vec<_> = answers
        .iter()
        .map(|(s, r)| (*s, r.map(str::to_owned), Duration::ZERO))
        .collect();
    slow_server(answers)
}

/// Starts a server answering each status with its headers, in order (then 200s).
pub fn signalling_server(answers: &[(u16, Signals)]) -> (SocketAddr, Script) {
    let (addr, script) = server(&answers.iter().map(|(s, _)| (*s, None)).collect::<Vec<_>>());
    let signals = answers.iter().map(|(_, signals)| signals.clone());
    script.signals.lock().unwrap().extend(signals);
    (addr, script)
}

pub fn slow_server(answers: Vec<Answer>) -> (SocketAddr, Script) {
    let script = Script::default();
    script.answers.lock().unwrap().extend(answers);
    let app = Router::new()
        .route("/", any(answer))
        .with_state(script.clone());
    (serve(app), script)
}

/// Serves `app` on a port of loopback, on a real-time runtime of its own thread.
pub fn serve(app: Router) -> SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            axum::serve(listener, app).await.unwrap();
        });
    });
    addr
}

pub fn policy() -> nresilience_core::RetryPolicyBuilder {
    RetryPolicy::builder()
        .attempt_timeout(None)
        .deadline(None)
        .attempt_ceiling(None)
        .backoff(Backoff::default().with_jitter(Jitter::None))
}

/// [`policy`] retrying at once, from a budget of one token that only successes refill.
pub fn one_token() -> nresilience_core::RetryPolicyBuilder {
    let options = BudgetOptions::default()
        .minimum_per_second(0.0)
        .capacity(1.0);
    policy()
        .backoff(Backoff::none())
        .budget(RetryBudget::automatic().with_options(options))
}

impl Script {
    /// The request bodies received, in order.
    pub fn received_bodies(&self) -> Vec<Bytes> {
        self.bodies.lock().unwrap().clone()
    }

    /// The lengths of the request bodies received, in order.
    pub fn body_lengths(&self) -> Vec<usize> {
        self.bodies.lock().unwrap().iter().map(Bytes::len).collect()
    }

    /// Appends answers to the script.
    pub fn then(&self, answers: &[(u16, Option<&str>)]) {
        let answers = answers
            .iter()
            .map(|(s, r)| (*s, r.map(str::to_owned), Duration::ZERO));
        self.answers.lock().unwrap().extend(answers);
    }
}
