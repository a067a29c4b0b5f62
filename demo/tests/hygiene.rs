//! What a peer cannot do to a hop (SPEC D5): hold a connection open by sending half a header
//! block, or read the hop's internal errors in its answers.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use axum::routing::get;
use axum::Router;
use demo::chain::{
    self, Budget, Ceiling, Hop, Overload, RetryArgs, Rules, Stats, HEADER_READ_TIMEOUT,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

#[tokio::test(start_paused = true)]
async fn d5_a_connection_that_sends_half_its_headers_is_closed() {
    let app = Router::new().route("/", get(|| async { "row" }));
    let addr = chain::serve(app, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let start = Instant::now();
    stream
        .write_all(b"GET / HTTP/1.1\r\nhost: db\r\nx-half: ")
        .await
        .unwrap();
    let mut rest = Vec::new();
    // Closed by EOF or by a reset: either ends the read.
    let _closed = tokio::time::timeout(Duration::from_secs(600), stream.read_to_end(&mut rest))
        .await
        .expect("the hop closes the connection");
    assert_eq!(start.elapsed(), HEADER_READ_TIMEOUT);
}

#[tokio::test]
async fn d5_an_answer_says_what_failed_in_a_few_words_not_the_internal_error() {
    // An upstream that refuses every connection: the client's error chain names sockets and
    // addresses; the answer names none of it.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let upstream = format!("http://{}/", closed.local_addr().unwrap());
    drop(closed);
    let retry = RetryArgs {
        attempts: Some(2),
        ceiling: Some(Ceiling::Learning),
        chain_rules: Some(Rules::On),
        deadline_ms: Some(30_000),
        overload: Some(Overload::On),
    };
    let client = chain::hop_client(Hop::Backend, retry, Budget::Off).unwrap();
    let app = chain::hop_app(
        Hop::Backend,
        std::sync::Arc::new(Stats::new()),
        client,
        upstream,
    );
    let addr = chain::serve(app, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(b"GET / HTTP/1.1\r\nhost: backend\r\nconnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.unwrap();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 502"), "{head}");
    assert!(body.len() < 100, "{body}");
    for internal in [
        "127.0.0.1",
        "connect",
        "refused",
        "error",
        "hyper",
        "os error",
    ] {
        assert!(
            !body.to_lowercase().contains(internal),
            "{internal}: {body}"
        );
    }
}
