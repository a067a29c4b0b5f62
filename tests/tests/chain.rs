//! A chain of real hops on loopback behaving as one system (SPEC C1, C2, C3, C5, C6, C7): a frontend
//! whose `Client` calls a backend whose `Client` calls a db, each an axum server with
//! `NestedRetryLayer`. What each hop sends and receives is asserted on the wire.

#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, HeaderName, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use nresilience_axum::{CallFailed, NestedRetryLayer};
use nresilience_client::wire::{self, ChainFacts};
use nresilience_client::{Client, HttpClassifier};
use nresilience_core::{
    Backoff, BudgetOptions, Criticality, Jitter, RetryBudget, RetryPolicy, RetryPolicyBuilder,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

async fn serve(app: Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

/// Four attempts a millisecond apart: what the test waits on is the wire, not the curve.
fn four_attempts() -> RetryPolicyBuilder {
    RetryPolicy::builder()
        .max_attempts(4)
        .backoff(Backoff::constant(Duration::from_millis(1)))
        .attempt_ceiling(None)
}

/// A db that fails every request with a bare `500`, counting them.
async fn failing_db(requests: Arc<AtomicU32>) -> SocketAddr {
    async fn fail(State(requests): State<Arc<AtomicU32>>) -> StatusCode {
        requests.fetch_add(1, Ordering::Relaxed);
        StatusCode::INTERNAL_SERVER_ERROR
    }
    serve(Router::new().route("/", get(fail)).with_state(requests)).await
}

#[derive(Clone)]
struct Hop {
    client: Client,
    upstream: String,
    requests: Arc<AtomicU32>,
}

/// A backend whose handler answers a failed call with a bare `502`, or with [`CallFailed`]
/// through `?`: the layer (C7) or the response type (C1, C6) adds the signal.
async fn backend(policy: RetryPolicy, db: SocketAddr) -> (SocketAddr, Arc<AtomicU32>) {
    async fn bare(State(hop): State<Hop>) -> Response {
        hop.requests.fetch_add(1, Ordering::Relaxed);
        match hop.client.get(hop.upstream.as_str()).await {
            Ok(answer) if answer.status().is_success() => StatusCode::OK.into_response(),
            Ok(_) | Err(_) => StatusCode::BAD_GATEWAY.into_response(),
        }
    }
    async fn with_question_mark(State(hop): State<Hop>) -> Result<StatusCode, CallFailed> {
        hop.requests.fetch_add(1, Ordering::Relaxed);
        let answer = hop.client.get(hop.upstream.as_str()).await?;
        Ok(answer.status())
    }
    let requests = Arc::new(AtomicU32::new(0));
    let hop = Hop {
        client: Client::new(policy),
        upstream: format!("http://{db}/"),
        requests: Arc::clone(&requests),
    };
    let app = Router::new()
        .route("/bare", get(bare))
        .route("/question-mark", get(with_question_mark))
        .with_state(hop)
        .layer(NestedRetryLayer::new());
    (serve(app).await, requests)
}

/// How many requests the backend receives for one call to `url` by a frontend classifying
/// with `classifier`, whose answer is a `502`.
async fn requests_for(classifier: HttpClassifier, url: &str, requests: &AtomicU32) -> u32 {
    let frontend = Client::builder(four_attempts().build().unwrap())
        .layer(|layer| layer.classifier(classifier))
        .build();
    let before = requests.load(Ordering::Relaxed);
    let answer = frontend.get(url).await.unwrap();
    assert_eq!(answer.status(), StatusCode::BAD_GATEWAY);
    requests.load(Ordering::Relaxed) - before
}

/// A budget holding one token, refilled by successes only: the first call's first retry
/// spends it, every later retry is refused (and has no hint to give).
fn one_token() -> RetryBudget {
    let options = BudgetOptions::default()
        .minimum_per_second(0.0)
        .capacity(1.0);
    RetryBudget::automatic().with_options(options)
}

#[tokio::test]
async fn c6_c7_a_backend_that_retried_is_not_retried_by_its_caller() {
    let db_requests = Arc::new(AtomicU32::new(0));
    let db = failing_db(Arc::clone(&db_requests)).await;
    let policy = four_attempts().budget(RetryBudget::None).build().unwrap();
    let (backend, backend_requests) = backend(policy, db).await;
    let frontend = Client::new(four_attempts().build().unwrap());

    let answer = frontend
        .get(format!("http://{backend}/bare"))
        .await
        .unwrap();
    assert_eq!(answer.status(), StatusCode::BAD_GATEWAY);
    assert_eq!(answer.headers()[wire::RETRIED], "4", "stamped by the layer");
    assert_eq!(db_requests.load(Ordering::Relaxed), 4);
    assert_eq!(
        backend_requests.load(Ordering::Relaxed),
        1,
        "retried at one layer: 4 at the db, not 16"
    );
}

#[tokio::test]
async fn c6_the_response_type_marks_a_call_that_retried_and_a_caller_may_opt_out() {
    // Nothing listens there: every attempt is a refused connection, so the backend's call
    // ends in an error after its four attempts, spread over its 200 ms (O7), and `?` makes
    // the answer.
    let gone = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let db = gone.local_addr().unwrap();
    drop(gone);
    let policy = four_attempts()
        .budget(RetryBudget::None)
        .deadline(Some(Duration::from_millis(200)))
        .build()
        .unwrap();
    let (backend, backend_requests) = backend(policy, db).await;
    let url = format!("http://{backend}/question-mark");

    let honouring = Client::new(four_attempts().build().unwrap());
    let answer = honouring.get(url.as_str()).await.unwrap();
    assert_eq!(answer.status(), StatusCode::BAD_GATEWAY);
    assert_eq!(answer.headers()[wire::RETRIED], "4");
    assert_eq!(backend_requests.load(Ordering::Relaxed), 1);

    let ignoring = HttpClassifier::new().retried_signal(false);
    let sent = requests_for(ignoring, &url, &backend_requests).await;
    assert_eq!(sent, 4, "opted out: the 502 is retried as any 5xx");
}

#[tokio::test]
async fn c1_a_backend_refused_by_its_budget_answers_overloaded_and_is_not_retried() {
    let db_requests = Arc::new(AtomicU32::new(0));
    let db = failing_db(Arc::clone(&db_requests)).await;
    let policy = four_attempts().budget(one_token()).build().unwrap();
    let (backend, backend_requests) = backend(policy, db).await;
    let frontend = Client::new(four_attempts().build().unwrap());
    let url = format!("http://{backend}/question-mark");

    // Spends the backend's one token: two db attempts, then a refusal.
    let answer = frontend.get(url.as_str()).await.unwrap();
    assert_eq!(answer.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(answer.headers()[wire::OVERLOADED], "1");
    assert!(
        answer.headers().get("retry-after").is_none(),
        "a budget without a floor cannot say when"
    );
    assert_eq!(backend_requests.load(Ordering::Relaxed), 1);
    assert_eq!(db_requests.load(Ordering::Relaxed), 2);

    // Empty now: the first attempt only, then the refusal, then no retry from above.
    let answer = frontend.get(url.as_str()).await.unwrap();
    assert_eq!(answer.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(answer.headers()[wire::OVERLOADED], "1");
    assert_eq!(backend_requests.load(Ordering::Relaxed), 2);
    assert_eq!(db_requests.load(Ordering::Relaxed), 3);
}

#[tokio::test]
async fn c1_c7_a_bare_5xx_after_a_refusal_gets_the_overload_signal_from_the_layer() {
    let db_requests = Arc::new(AtomicU32::new(0));
    let db = failing_db(Arc::clone(&db_requests)).await;
    let policy = four_attempts().budget(one_token()).build().unwrap();
    let (backend, backend_requests) = backend(policy, db).await;
    let url = format!("http://{backend}/bare");
    let frontend = Client::new(four_attempts().build().unwrap());

    let answer = frontend.get(url.as_str()).await.unwrap();
    assert_eq!(answer.status(), StatusCode::BAD_GATEWAY);
    assert_eq!(answer.headers()[wire::OVERLOADED], "1");
    assert!(answer.headers().get(wire::RETRIED).is_none());
    assert_eq!(backend_requests.load(Ordering::Relaxed), 1);

    let ignoring = HttpClassifier::new().overload_signal(false);
    let sent = requests_for(ignoring, &url, &backend_requests).await;
    assert_eq!(sent, 4, "opted out: retried as any 5xx");
}

#[tokio::test]
async fn c1_c7_an_overloaded_db_is_passed_on_with_its_hint() {
    let db_requests = Arc::new(AtomicU32::new(0));
    let counted = Arc::clone(&db_requests);
    let shedding = move || async move {
        counted.fetch_add(1, Ordering::Relaxed);
        let signal = [("x-nresilience-overloaded", "1"), ("retry-after", "7")];
        (StatusCode::SERVICE_UNAVAILABLE, signal)
    };
    let db = serve(Router::new().route("/", get(shedding))).await;
    let (backend, backend_requests) = backend(four_attempts().build().unwrap(), db).await;
    let frontend = Client::new(four_attempts().build().unwrap());

    let answer = frontend
        .get(format!("http://{backend}/bare").as_str())
        .await
        .unwrap();
    assert_eq!(answer.status(), StatusCode::BAD_GATEWAY);
    assert_eq!(answer.headers()[wire::OVERLOADED], "1");
    assert_eq!(answer.headers()["retry-after"], "7", "db's own hint");
    assert_eq!(backend_requests.load(Ordering::Relaxed), 1);
    assert_eq!(db_requests.load(Ordering::Relaxed), 1);
}

/// What a noting db saw of one header, a value per request (`-` when absent).
type Noted = Arc<Mutex<Vec<String>>>;

/// A db that fails every request with a bare `500`, noting `header` on each.
async fn noting_db(header: HeaderName) -> (SocketAddr, Noted) {
    let noted = Noted::default();
    let seen = Arc::clone(&noted);
    let fail = move |headers: HeaderMap| async move {
        let value = headers
            .get(&header)
            .and_then(|value| value.to_str().ok())
            .unwrap_or("-");
        seen.lock().unwrap().push(value.to_owned());
        StatusCode::INTERNAL_SERVER_ERROR
    };
    (serve(Router::new().route("/", get(fail))).await, noted)
}

fn millis(noted: &Noted) -> Vec<u64> {
    noted
        .lock()
        .unwrap()
        .iter()
        .map(|value| value.parse().unwrap_or(u64::MAX))
        .collect()
}

/// Sends `GET {path}` with `headers` over a plain connection, as a caller that is not an
/// nresilience client would, and returns the status line.
async fn raw_get(addr: SocketAddr, path: &str, headers: &str) -> String {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request =
        format!("GET {path} HTTP/1.1\r\nhost: {addr}\r\n{headers}connection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.unwrap();
    answer.lines().next().unwrap_or_default().to_owned()
}

#[tokio::test]
async fn c2_a_backend_gives_up_with_its_caller_and_passes_the_time_left_on() {
    let (db, seen) = noting_db(wire::DEADLINE).await;
    // Four attempts 300 ms apart: over 900 ms for a caller with time.
    let policy = RetryPolicy::builder()
        .max_attempts(4)
        .backoff(Backoff::constant(Duration::from_millis(300)).with_jitter(Jitter::None))
        .attempt_ceiling(None)
        .budget(RetryBudget::None)
        .build()
        .unwrap();
    let (backend, _) = backend(policy, db).await;

    let status = raw_get(backend, "/bare", "x-nresilience-deadline-ms: 400\r\n").await;
    assert!(status.contains("502"), "{status}");
    let told = millis(&seen);
    // The first retry ends before 400 ms; a second would not, so it is never made.
    assert_eq!(told.len(), 2, "{told:?}");
    assert!(told[0] <= 400 && told[0] > 300, "{told:?}");
    assert!(told[1] <= 100, "the time left after the backoff: {told:?}");

    seen.lock().unwrap().clear();
    let status = raw_get(backend, "/bare", "").await;
    assert!(status.contains("502"), "{status}");
    let told = millis(&seen);
    assert_eq!(
        told.len(),
        4,
        "a caller that says nothing waits the policy's deadline"
    );
    assert!(
        told.iter().all(|&ms| ms <= 10_000),
        "the attempt timeout: {told:?}"
    );
}

#[tokio::test]
async fn c2_a_backend_whose_caller_has_given_up_calls_nothing() {
    let (db, seen) = noting_db(wire::DEADLINE).await;
    let (backend, requests) = backend(four_attempts().build().unwrap(), db).await;
    let status = raw_get(
        backend,
        "/question-mark",
        "x-nresilience-deadline-ms: 0\r\n",
    )
    .await;
    assert!(
        status.contains("504"),
        "out of time before the first attempt: {status}"
    );
    assert_eq!(requests.load(Ordering::Relaxed), 1);
    assert!(seen.lock().unwrap().is_empty(), "db saw nothing");
}

#[tokio::test]
async fn c5_a_hop_that_calls_itself_stops_at_the_loop_guard() {
    // A hop configured with its own address as its upstream: each request makes a call to
    // itself, one deeper, until the layer's guard answers 508 past depth 16.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let itself = listener.local_addr().unwrap();
    let requests = Arc::new(AtomicU32::new(0));
    let hop = Hop {
        client: Client::new(four_attempts().build().unwrap()),
        upstream: format!("http://{itself}/bare"),
        requests: Arc::clone(&requests),
    };
    async fn bare(State(hop): State<Hop>) -> Response {
        hop.requests.fetch_add(1, Ordering::Relaxed);
        match hop.client.get(hop.upstream.as_str()).await {
            Ok(answer) => answer.status().into_response(),
            Err(_) => StatusCode::BAD_GATEWAY.into_response(),
        }
    }
    let app = Router::new()
        .route("/bare", get(bare))
        .with_state(hop)
        .layer(NestedRetryLayer::new());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let status = raw_get(itself, "/bare", "").await;
    assert!(status.contains("508"), "{status}");
    // The first request (no depth) and one per depth from 1 to 16, each sent once: the
    // guard's answer at depth 17 carries the overload signal, so no hop retried it.
    assert_eq!(requests.load(Ordering::Relaxed), 17);
}

#[tokio::test]
async fn c3_an_ambient_backend_passes_its_callers_criticality_on() {
    let (db, seen) = noting_db(wire::CHAIN).await;
    let ambient = RetryPolicy::builder()
        .max_attempts(2)
        .backoff(Backoff::none())
        .ambient_criticality(true)
        .build()
        .unwrap();
    let (backend, _) = backend(ambient, db).await;
    raw_get(
        backend,
        "/bare",
        "x-nresilience-chain: criticality=sheddable\r\n",
    )
    .await;
    raw_get(backend, "/bare", "").await;
    let criticality = |value: &String| {
        let facts = ChainFacts::parse(value.as_bytes());
        facts.criticality.map_or("-", Criticality::as_str)
    };
    let said: Vec<_> = seen.lock().unwrap().iter().map(criticality).collect();
    assert_eq!(
        said,
        ["sheddable", "sheddable", "normal", "normal"],
        "the caller's, then the policy's own when the caller says none"
    );
}

#[tokio::test]
async fn c4_c5_a_count_too_large_saturates_down_the_chain_and_never_restarts() {
    let (db, seen) = noting_db(wire::CHAIN).await;
    let (backend, requests) = backend(four_attempts().build().unwrap(), db).await;
    let overflowing_depth = "x-nresilience-chain: depth=99999999999999999999, attempts=4\r\n";
    let status = raw_get(backend, "/bare", overflowing_depth).await;
    assert!(status.contains("508"), "past the loop guard: {status}");
    assert_eq!(requests.load(Ordering::Relaxed), 0, "the handler never ran");
    assert!(seen.lock().unwrap().is_empty(), "db saw nothing");

    let overflowing_attempts = "x-nresilience-chain: depth=2, attempts=99999999999999999999999\r\n";
    raw_get(backend, "/bare", overflowing_attempts).await;
    let told: Vec<_> = seen
        .lock()
        .unwrap()
        .iter()
        .map(|value| {
            let facts = ChainFacts::parse(value.as_bytes());
            (facts.depth, facts.attempts)
        })
        .collect();
    assert!(!told.is_empty());
    for facts in told {
        assert_eq!(facts, (Some(3), Some(u32::MAX)), "the most, not 4 again");
    }
}
