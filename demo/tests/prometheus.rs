//! The library's metrics reach a real Prometheus (SPEC B12, C1, C4): the three hops run as
//! processes with db failing every query, a Prometheus server scrapes each hop's `/metrics`
//! on loopback, and the test asks Prometheus's HTTP API what an operator would: the retry
//! ratio at the backend, the budget's refusals and their reason, where the nested retries
//! are, whether the budget's gauge moved, whether every panel of the Grafana dashboard is a
//! query it answers, and whether the overload alert fires.
//!
//! Prometheus comes from `NRESILIENCE_PROMETHEUS` (set by `scripts/test`, which installs
//! Debian's package when missing) or `prometheus` on the `PATH`. Without one the test says so
//! and passes, unless `NRESILIENCE_REQUIRE_PROMETHEUS=1` (set by CI) makes that a failure.
//!
//! A second test sends a hop's metrics over OTLP/HTTP to a receiver on loopback.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::http::HeaderMap;
use axum::routing::post;
use axum::Router;
use http_body_util::BodyExt;
use nresilience_client::Client;
use nresilience_core::RetryPolicy;
use serde_json::Value;

#[path = "support/hop_process.rs"]
mod hop_process;
use hop_process::Hop;

/// A Prometheus server on a loopback port, with its data in a directory of its own; stopped
/// and cleaned up when dropped.
struct Prometheus {
    child: Child,
    url: String,
    dir: PathBuf,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Prometheus {
    /// Starts `binary` scraping `targets` (`host:port`) every second, with the project's
    /// alerting rules loaded, and waits until it is ready.
    async fn start(binary: &Path, targets: &[&str]) -> Self {
        let dir =
            std::env::temp_dir().join(format!("nresilience-prometheus-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let rules = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../docs/prometheus/alerts.yml")
            .canonicalize()
            .expect("the project's alerting rules");
        let targets: Vec<String> = targets.iter().map(|t| format!("'{t}'")).collect();
        let config = format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
             rule_files: ['{}']\n\
             scrape_configs:\n  - job_name: nresilience\n    static_configs:\n      - targets: [{}]\n",
            rules.display(),
            targets.join(", ")
        );
        let config_file = dir.join("prometheus.yml");
        std::fs::write(&config_file, config).unwrap();
        let port = free_port();
        let child = Command::new(binary)
            .arg(format!("--config.file={}", config_file.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("prometheus starts");
        let prometheus = Self {
            child,
            url: format!("http://127.0.0.1:{port}"),
            dir,
        };
        let client = client();
        eventually("prometheus is ready", || async {
            let ready = format!("{}/-/ready", prometheus.url);
            matches!(client.get(ready.as_str()).await, Ok(r) if r.status().is_success())
        })
        .await;
        prometheus
    }

    /// The result of an instant query.
    async fn query(&self, promql: &str) -> Vec<Value> {
        let url = format!("{}/api/v1/query?query={}", self.url, percent_encode(promql));
        let answer = get_json(&url).await;
        assert_eq!(answer["status"], "success", "{promql}: {answer}");
        answer["data"]["result"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// The value of a query that returns one sample, if it returns any.
    async fn scalar(&self, promql: &str) -> Option<f64> {
        let result = self.query(promql).await;
        let value = result.first()?["value"][1].as_str()?;
        value.parse().ok()
    }
}

/// A port no one listens on now.
fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// A client that makes one attempt: the test asks, it does not retry.
fn client() -> Client {
    Client::new(
        RetryPolicy::builder()
            .max_attempts(1)
            .attempt_ceiling(None)
            .build()
            .unwrap(),
    )
}

async fn get_json(url: &str) -> Value {
    let response = client().get(url).await.expect("prometheus answers");
    let body = response.into_body().collect().await.unwrap().to_bytes();
    serde_json::from_slice(&body).unwrap()
}

/// Query strings: everything but unreserved characters percent-encoded.
fn percent_encode(text: &str) -> String {
    text.bytes()
        .map(|byte| match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (byte as char).to_string()
            }
            _ => format!("%{byte:02X}"),
        })
        .collect()
}

/// Waits up to 60 s for `check` to hold, asking every 250 ms.
async fn eventually<F, Fut>(what: &str, check: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let give_up = Instant::now() + Duration::from_secs(60);
    while !check().await {
        assert!(Instant::now() < give_up, "gave up waiting: {what}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The Prometheus server to use, or why the test does not run.
fn prometheus_binary() -> Option<PathBuf> {
    let configured = std::env::var_os("NRESILIENCE_PROMETHEUS").map(PathBuf::from);
    let on_path = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join("prometheus"))
            .find(|candidate| candidate.is_file())
    });
    let found = configured.or(on_path);
    if found.is_none() {
        assert!(
            std::env::var("NRESILIENCE_REQUIRE_PROMETHEUS").as_deref() != Ok("1"),
            "NRESILIENCE_REQUIRE_PROMETHEUS=1 and no Prometheus: run `bash scripts/test`, \
             which installs it, or set NRESILIENCE_PROMETHEUS"
        );
        eprintln!(
            "prometheus test NOT RUN: no Prometheus server; `bash scripts/test` installs one \
             (Debian's prometheus package), or set NRESILIENCE_PROMETHEUS"
        );
    }
    found
}

/// `http://127.0.0.1:PORT/` → `127.0.0.1:PORT`.
fn host_port(url: &str) -> &str {
    url.trim_start_matches("http://").trim_end_matches('/')
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b12_c1_c4_prometheus_sees_the_retry_ratio_refusals_nested_retries_and_overload() {
    let Some(binary) = prometheus_binary() else {
        return;
    };
    let (db, db_url) = Hop::start("db", None);
    let (backend, backend_url) = Hop::start("backend", Some(&db_url));
    let (frontend, frontend_url) = Hop::start("frontend", Some(&backend_url));
    let prometheus = Prometheus::start(
        &binary,
        &[
            host_port(&frontend_url),
            host_port(&backend_url),
            host_port(&db_url),
        ],
    )
    .await;

    // Users who do not retry, 20 a second for 4 s, against a chain whose db fails every
    // query: the backend retries until its budget refuses, then answers overloaded (C1).
    let users = client();
    let mut pending = tokio::task::JoinSet::new();
    for _ in 0..80 {
        let (users, url) = (users.clone(), frontend_url.clone());
        pending.spawn(async move {
            let _ = tokio::time::timeout(Duration::from_secs(30), users.get(url.as_str())).await;
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    while pending.join_next().await.is_some() {}

    let ratio = "sum(nresilience_attempts_total{service_name=\"backend\"}) \
                 / sum(nresilience_calls_total{service_name=\"backend\"})";
    eventually("the backend's calls are scraped", || async {
        prometheus
            .scalar("sum(nresilience_calls_total{service_name=\"backend\"})")
            .await
            .is_some_and(|calls| calls >= 80.0)
    })
    .await;
    let ratio = prometheus.scalar(ratio).await.expect("a retry ratio");
    assert!(
        ratio > 1.0,
        "the backend retried: attempts / calls = {ratio}"
    );

    let refused = prometheus
        .scalar(
            "sum(nresilience_rejections_total{service_name=\"backend\",\
             nresilience_reason=\"budget_exhausted\"})",
        )
        .await;
    assert!(
        refused.is_some_and(|refused| refused > 0.0),
        "budget refusals counted with their reason: {refused:?}"
    );

    // Only the backend serves marked requests and retries onwards (N5); the frontend's
    // users do not retry and db calls nothing. C4: how far the amplification reaches.
    let nested = prometheus
        .query("sum by (service_name, nresilience_potential_attempts) (nresilience_nested_retries_total)")
        .await;
    let hops: Vec<&str> = nested
        .iter()
        .filter(|sample| sample["value"][1].as_str().is_some_and(|v| v != "0"))
        .filter_map(|sample| sample["metric"]["service_name"].as_str())
        .collect();
    assert_eq!(hops, ["backend"], "nested retries by hop: {nested:?}");
    assert_eq!(
        nested[0]["metric"]["nresilience_potential_attempts"], "9",
        "the library's default 3 attempts below 3 attempts: {nested:?}"
    );

    let utilization = prometheus
        .scalar("max(nresilience_budget_utilization{service_name=\"backend\"})")
        .await;
    assert!(
        utilization.is_some_and(|u| u > 0.0),
        "the budget's gauge moved: {utilization:?}"
    );
    // F3: beside it, the share of the budget the bucket uses; db advises nothing, so the whole.
    let allowance = prometheus
        .scalar("min(nresilience_budget_allowance{service_name=\"backend\"})")
        .await;
    assert_eq!(allowance, Some(1.0), "the budget's allowance gauge");
    // O4: overload control's limit per dependency, as the overload panel reads it; db fails
    // fast, keeping pace with what it is sent, so the limit is unbound (the maximum).
    let limit = prometheus
        .scalar("max(nresilience_overload_limit{service_name=\"backend\"})")
        .await;
    assert_eq!(limit, Some(1_000.0), "the overload limit's gauge");

    // Every panel of the project's Grafana dashboard is a query this Prometheus answers.
    let dashboard: Value = serde_json::from_str(
        &std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/grafana/nresilience.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let panels = dashboard["panels"].as_array().unwrap();
    for panel in panels {
        for target in panel["targets"].as_array().unwrap() {
            let promql = target["expr"]
                .as_str()
                .unwrap()
                .replace("$service", ".*")
                .replace("$policy", ".*")
                .replace("$__rate_interval", "1m");
            // Answered, not refused as a bad query (a burst of four seconds leaves the rate
            // panels' values to the timing of the scrapes).
            prometheus.query(&promql).await;
        }
    }

    // The frontend's calls ended overloaded (C1): the project's alert on it fires.
    eventually("NresilienceOverloaded fires", || async {
        let alerts = get_json(&format!("{}/api/v1/alerts", prometheus.url)).await;
        alerts["data"]["alerts"].as_array().is_some_and(|alerts| {
            alerts.iter().any(|alert| {
                alert["labels"]["alertname"] == "NresilienceOverloaded"
                    && alert["labels"]["service_name"] == "frontend"
            })
        })
    })
    .await;

    drop(prometheus);
    frontend.stop();
    backend.stop();
    db.stop();
}

/// What an OTLP/HTTP receiver was sent on `/v1/metrics`.
#[derive(Clone, Default)]
struct Received(Arc<Mutex<Vec<(String, Bytes)>>>);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b12_a_hop_exports_its_metrics_over_otlp_when_an_endpoint_is_set() {
    let received = Received::default();
    let store = received.clone();
    let receiver = Router::new()
        .route(
            "/v1/metrics",
            post(move |headers: HeaderMap, body: Bytes| {
                let store = store.clone();
                async move {
                    let content_type = headers
                        .get("content-type")
                        .and_then(|value| value.to_str().ok())
                        .unwrap_or_default()
                        .to_owned();
                    store.0.lock().unwrap().push((content_type, body));
                }
            }),
        )
        .route("/v1/traces", post(|| async {}));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, receiver).await });

    let (db, db_url) = Hop::start("db", None);
    let mut command = Hop::command("backend", "127.0.0.1:0", Some(&db_url));
    command
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
        .env_remove("OTEL_METRICS_EXPORTER");
    let (backend, backend_url) = Hop::spawn("backend", command);
    let users = client();
    for _ in 0..5 {
        let _ = users.get(backend_url.as_str()).await;
    }
    // A hop that stops flushes its metrics.
    backend.stop();
    db.stop();

    let received = received.0.lock().unwrap();
    assert!(!received.is_empty(), "no OTLP metrics arrived");
    let (content_type, body) = &received[received.len() - 1];
    assert_eq!(content_type, "application/x-protobuf");
    // Protobuf carries names as plain bytes: the library's instruments and the hop's name.
    for name in ["nresilience.calls", "nresilience.attempts", "backend"] {
        assert!(
            body.windows(name.len())
                .any(|window| window == name.as_bytes()),
            "{name} not in the export"
        );
    }
}
