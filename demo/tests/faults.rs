//! Each kind of fault, real in the db process (SPEC P3): a stalled db answers nothing in its
//! window, a db that is down refuses connections and then accepts them on the same port, a
//! throttled db answers `429` with `Retry-After`, a browned-out db keeps pace with what it is
//! sent, a failing one answers `500` at once; and a surge multiplies the users' rate.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

#[path = "support/hop_process.rs"]
mod hop_process;
use hop_process::Hop;

/// db as its own process with `fault` (its kind and flags), the instant before it started
/// and the one it said where it listens.
fn db(fault: &[&str]) -> (Hop, String, Instant, Instant) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_demo"));
    command
        .args(["db", "--listen", "127.0.0.1:0"])
        .args(fault)
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")
        .stdout(std::process::Stdio::piped());
    let spawned = Instant::now();
    let (hop, url) = Hop::spawn("db", command);
    (hop, url, spawned, Instant::now())
}

/// A client that makes one attempt, never retries and keeps no connection idle.
fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .retry(reqwest::retry::never())
        .pool_max_idle_per_host(0)
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p3_a_stalled_db_answers_nothing_in_its_window_then_everything() {
    let (db, url, spawned, listening) = db(&[
        "--fault",
        "stall",
        "--fault-start",
        "0",
        "--fault-length",
        "1",
    ]);
    let client = client();
    let mut queries = tokio::task::JoinSet::new();
    for _ in 0..5 {
        let (client, url) = (client.clone(), url.clone());
        queries.spawn(async move {
            let status = client.get(url).send().await.unwrap().status();
            (status, Instant::now())
        });
    }
    while let Some(answer) = queries.join_next().await {
        let (status, at) = answer.unwrap();
        assert_eq!(status, 200);
        // db's clock started between the two instants; its window is its first second.
        assert!(
            at >= spawned + Duration::from_secs(1),
            "answered in the window"
        );
        assert!(
            at < listening + Duration::from_millis(1_500),
            "answered when it ended"
        );
    }
    db.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p3_a_db_that_is_down_refuses_connections_then_accepts_them_on_the_same_port() {
    let (db, url, _, listening) = db(&[
        "--fault",
        "down",
        "--fault-start",
        "1",
        "--fault-length",
        "1",
    ]);
    let client = client();
    let query = || async { client.get(url.as_str()).send().await };
    assert_eq!(query().await.unwrap().status(), 200, "before the fault");

    tokio::time::sleep_until((listening + Duration::from_millis(1_400)).into()).await;
    let refused = query().await.expect_err("down");
    assert!(refused.is_connect(), "{refused:?}");

    tokio::time::sleep_until((listening + Duration::from_millis(2_200)).into()).await;
    let mut answer = query().await;
    // Listening again may take a moment once the window ends.
    for _ in 0..50 {
        if answer.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        answer = query().await;
    }
    assert_eq!(answer.expect("up again").status(), 200, "after the fault");
    db.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p3_a_throttled_db_answers_429_with_retry_after_above_its_rate() {
    let (db, url, _, _) = db(&[
        "--fault",
        "throttle",
        "--fault-throttle-rps",
        "5",
        "--fault-start",
        "0",
        "--fault-length",
        "3600",
    ]);
    let client = client();
    let mut served = 0;
    let mut throttled = 0;
    for _ in 0..20 {
        let answer = client.get(url.as_str()).send().await.unwrap();
        match answer.status().as_u16() {
            200 => served += 1,
            429 => {
                throttled += 1;
                assert_eq!(answer.headers()["retry-after"], "1");
            }
            other => panic!("answered {other}"),
        }
    }
    // 20 queries in well under two seconds: at most two seconds' worth admitted.
    assert!((5..=10).contains(&served), "{served} served");
    assert_eq!(served + throttled, 20);
    db.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p3_a_browned_out_db_keeps_pace_with_what_it_is_sent() {
    // One worker at 200 ms a query would take 10 s for 50 queries; with no capacity limit
    // they all take 200 ms side by side.
    let (db, url, _, _) = db(&[
        "--fault",
        "brownout",
        "--db-workers",
        "1",
        "--fault-slowdown",
        "20",
        "--fault-start",
        "0",
        "--fault-length",
        "3600",
    ]);
    let client = client();
    let started = Instant::now();
    let mut queries = tokio::task::JoinSet::new();
    for _ in 0..50 {
        let (client, url) = (client.clone(), url.clone());
        queries.spawn(async move { client.get(url).send().await.unwrap().status() });
    }
    while let Some(status) = queries.join_next().await {
        assert_eq!(status.unwrap(), 200);
    }
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(200),
        "each query slowed: {took:?}"
    );
    assert!(
        took < Duration::from_secs(2),
        "served side by side: {took:?}"
    );
    db.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p3_a_failing_db_answers_500_at_once() {
    let (db, url, _, _) = db(&[
        "--fault",
        "errors",
        "--fault-error-rate",
        "1",
        "--fault-start",
        "0",
        "--fault-length",
        "3600",
        "--db-query-ms",
        "1000",
    ]);
    let started = Instant::now();
    let answer = client().get(url.as_str()).send().await.unwrap();
    assert_eq!(answer.status(), 500);
    assert!(
        started.elapsed() < Duration::from_millis(500),
        "not after a query's time"
    );
    db.stop();
}

#[test]
fn p3_a_surge_multiplies_the_users_rate_for_its_window() {
    let output = Command::new(env!("CARGO_BIN_EXE_demo"))
        .args([
            "--stacks",
            "none",
            "--rps",
            "50",
            "--duration",
            "3",
            "--fault",
            "surge",
            "--fault-surge",
            "2",
            "--fault-start",
            "1",
            "--fault-length",
            "1",
            "--json",
        ])
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .output()
        .expect("the demo binary runs");
    assert!(output.status.success(), "{output:?}");
    let run: Value = serde_json::from_slice(&output.stdout).unwrap();
    let calls: Vec<u64> = run["seconds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|second| second["calls"].as_u64().unwrap())
        .collect();
    assert_eq!(calls.len(), 3, "{calls:?}");
    for (second, expected) in [(0, 50.0), (1, 100.0), (2, 50.0)] {
        let ratio = calls[second] as f64 / expected;
        assert!((0.9..=1.1).contains(&ratio), "second {second}: {calls:?}");
    }
}
