//! A hop whose upstream's answer is cut short or stalls answers a failure in bounded time,
//! never a `200` for a body it did not get (SPEC D5).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use demo::chain::{self, Budget, Ceiling, Hop, Overload, RetryArgs, Rules, Stats};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// An upstream that answers every request with a `200` promising 100 bytes, sends 7, and
/// then closes the connection or, with `stall`, keeps it open and silent.
async fn broken_upstream(stall: bool) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (mut stream, _) = listener.accept().await.unwrap();
            tokio::spawn(async move {
                let mut request = [0u8; 4096];
                let _ = stream.read(&mut request).await;
                let head = b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\npartial";
                let _ = stream.write_all(head).await;
                if stall {
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                }
            });
        }
    });
    format!("http://{addr}/")
}

/// What a backend in front of `upstream` answers a request whose caller waits 300 ms.
async fn backend_answer(upstream: String) -> (u16, Duration) {
    let retry = RetryArgs {
        attempts: Some(1),
        ceiling: Some(Ceiling::Learning),
        chain_rules: Some(Rules::On),
        deadline_ms: Some(30_000),
        overload: Some(Overload::On),
    };
    let client = chain::hop_client(Hop::Backend, retry, Budget::On).unwrap();
    let app = chain::hop_app(Hop::Backend, Arc::new(Stats::new()), client, upstream);
    let addr = chain::serve(app, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!(
        "GET / HTTP/1.1\r\nhost: {addr}\r\nx-nresilience-deadline-ms: 300\r\nconnection: close\r\n\r\n"
    );
    let started = std::time::Instant::now();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = String::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_string(&mut answer))
        .await
        .expect("answered in bounded time")
        .unwrap();
    let status = answer
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    (status, started.elapsed())
}

#[tokio::test]
async fn d5_a_body_cut_short_is_a_502_not_a_200() {
    let (status, _) = backend_answer(broken_upstream(false).await).await;
    assert_eq!(status, 502);
}

#[tokio::test]
async fn d5_a_stalled_body_is_read_no_longer_than_the_caller_waits() {
    let (status, took) = backend_answer(broken_upstream(true).await).await;
    assert_eq!(status, 504);
    assert!(took < Duration::from_secs(2), "{took:?}");
}
