//! The chain as three processes (SPEC D1, N1, N4, N5, C5, C6): the marker crosses real
//! process boundaries, so only the backend — serving the frontend's marked requests and
//! retrying onwards — reports nested retries; a backend that retried is not retried by the
//! frontend; a backend pointed at itself stops at the loop guard; a hop without a tracing
//! backend of its own still passes its caller's trace on (D5); and each hop stops cleanly on
//! SIGINT.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use nresilience_client::Client;
use nresilience_core::RetryPolicy;

#[path = "support/hop_process.rs"]
mod hop_process;
#[path = "support/summary_line.rs"]
mod summary_line;
use hop_process::Hop;
use summary_line::count;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn n5_across_processes_only_the_backend_reports_nested_retries() {
    let (db, db_url) = Hop::start("db", None);
    let (backend, backend_url) = Hop::start("backend", Some(&db_url));
    let (frontend, frontend_url) = Hop::start("frontend", Some(&backend_url));

    // Users who do not retry: the frontend's requests arrive unmarked.
    let users = Client::new(
        RetryPolicy::builder()
            .max_attempts(1)
            .attempt_ceiling(None)
            .build()
            .unwrap(),
    );
    let calls = 20;
    let mut pending = tokio::task::JoinSet::new();
    for _ in 0..calls {
        let (users, url) = (users.clone(), frontend_url.clone());
        pending.spawn(async move {
            tokio::time::timeout(Duration::from_secs(30), users.get(url.as_str())).await
        });
    }
    while let Some(answer) = pending.join_next().await {
        let response = answer
            .unwrap()
            .expect("the chain answers")
            .expect("the frontend answers");
        // db fails everything; the hops pass the failure up as a status, never a hang.
        assert!(response.status().is_server_error(), "{response:?}");
    }

    let frontend = frontend.stop();
    let backend = backend.stop();
    let db = db.stop();
    assert_eq!(count(&frontend, "requests"), calls, "{frontend}");
    assert_eq!(count(&frontend, "NestedRetry"), 0, "{frontend}");
    // Every backend request came marked from the frontend, which may retry (N1, N4), and the
    // backend's own call may retry: each is one nested retry (N5).
    let backend_requests = count(&backend, "requests");
    // The backend retried each call itself and said so on its 5xx answer: the frontend sent
    // each call once, not up to four times (C6, C7).
    assert_eq!(backend_requests, calls, "{backend}");
    assert_eq!(
        count(&backend, "NestedRetry"),
        backend_requests,
        "{backend}"
    );
    assert_eq!(count(&db, "NestedRetry"), 0, "{db}");
    assert!(count(&db, "requests") > backend_requests, "{db} {backend}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c5_a_backend_pointed_at_itself_stops_at_the_loop_guard() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let listen = format!("127.0.0.1:{port}");
    let itself = format!("http://{listen}/");
    let (backend, url) = Hop::start_on("backend", &listen, Some(&itself));

    let users = Client::new(RetryPolicy::builder().max_attempts(1).build().unwrap());
    let answer = tokio::time::timeout(Duration::from_secs(30), users.get(url.as_str()))
        .await
        .expect("the loop ends")
        .expect("the backend answers");
    assert_eq!(answer.status(), 508);

    let backend = backend.stop();
    // The users' request (depth 1: their client stamps it) and one more at each depth to 16,
    // each sent once: the 508 past depth 16 carries the overload signal, so no level retried
    // it.
    assert_eq!(count(&backend, "requests"), 16, "{backend}");
}

#[test]
fn d4_a_hop_running_alone_prints_a_line_every_second_even_without_traffic() {
    let (db, _) = Hop::start("db", None);
    std::thread::sleep(Duration::from_millis(2_500));
    let ticks = db
        .stop_lines()
        .iter()
        .filter(|line| line.starts_with("t=") && line.contains("0 requests this second"))
        .count();
    assert!(ticks >= 2, "{ticks} lines in 2.5 s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d5_a_hop_without_an_exporter_passes_its_callers_trace_on() {
    use axum::http::HeaderMap;
    use axum::routing::get;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let (seen, mut told) = tokio::sync::mpsc::unbounded_channel();
    let upstream = axum::Router::new().route(
        "/",
        get(move |headers: HeaderMap| async move {
            let traceparent = headers
                .get("traceparent")
                .and_then(|value| value.to_str().ok())
                .map(str::to_owned);
            let _ = seen.send(traceparent);
            "row"
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let upstream_url = format!("http://{}/", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, upstream).await });
    let (backend, url) = Hop::start("backend", Some(&upstream_url));

    let trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let addr = url.trim_start_matches("http://").trim_end_matches('/');
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!(
        "GET / HTTP/1.1\r\nhost: {addr}\r\ntraceparent: 00-{trace}-00f067aa0ba902b7-01\r\nconnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    backend.stop();

    let passed_on = told
        .recv()
        .await
        .unwrap()
        .expect("a traceparent reached the upstream");
    assert!(
        passed_on.starts_with(&format!("00-{trace}-")),
        "the caller's trace: {passed_on}"
    );
    assert!(
        !passed_on.contains("00f067aa0ba902b7"),
        "a span of the backend's own: {passed_on}"
    );
}
