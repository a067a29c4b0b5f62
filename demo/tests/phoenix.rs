//! The chain end to end against a real tracing backend, Arize Phoenix (SPEC D2, N5, N6).
//!
//! Runs `demo` (the three hops in one process) with OTLP/HTTP export to Phoenix, then reads
//! the spans back through Phoenix's REST API and asserts that one user action is one trace
//! holding a `NestedRetry` span stamped `service.name = backend`, below the frontend's
//! request span, and that db served a retried attempt carrying `http.request.resend_count`.
//!
//! `bash scripts/test` starts Phoenix and sets `PHOENIX_URL`; without it this test reports
//! that it did not run and how to run it, unless `NRESILIENCE_REQUIRE_PHOENIX` is set (CI
//! sets it), when it fails.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::process::Command;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use http_body_util::BodyExt;
use nresilience_client::Client;
use nresilience_core::RetryPolicy;
use serde_json::Value;

const HOW_TO_RUN: &str = "bash scripts/phoenix start && source .phoenix/env && \
     cargo test -p demo --test phoenix";

/// A span as Phoenix's REST API returns it.
#[derive(Debug, Clone)]
struct Span {
    name: String,
    trace_id: String,
    span_id: String,
    parent_id: Option<String>,
    attributes: Value,
}

impl Span {
    fn from_json(span: &Value) -> Self {
        let text = |value: &Value| value.as_str().unwrap_or_default().to_owned();
        Self {
            name: text(&span["name"]),
            trace_id: text(&span["context"]["trace_id"]),
            span_id: text(&span["context"]["span_id"]),
            parent_id: span["parent_id"].as_str().map(str::to_owned),
            attributes: span["attributes"].clone(),
        }
    }

    /// Attributes arrive either flat (`"service.name"`) or nested by dots.
    fn attribute(&self, key: &str) -> Option<&Value> {
        if let Some(value) = self.attributes.get(key) {
            return Some(value);
        }
        key.split('.')
            .try_fold(&self.attributes, |value, part| value.get(part))
    }

    fn service(&self) -> Option<&str> {
        self.attribute("service.name").and_then(Value::as_str)
    }

    fn resend_count(&self) -> Option<i64> {
        self.attribute("http.request.resend_count")
            .and_then(|value| value.as_i64().or_else(|| value.as_str()?.parse().ok()))
    }

    fn is_request_of(&self, service: &str) -> bool {
        self.name == "GET /" && self.service() == Some(service)
    }
}

/// A byte of a query value: unreserved characters as they are, the rest percent-encoded
/// (Phoenix's cursors are base64, with `+`, `/` and `=`).
fn percent_encoded(byte: u8) -> String {
    if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
        char::from(byte).to_string()
    } else {
        format!("%{byte:02X}")
    }
}

struct Phoenix {
    url: String,
    client: Client,
}

impl Phoenix {
    fn new(url: &str) -> Self {
        let policy = RetryPolicy::builder().name("phoenix-rest").build().unwrap();
        Self {
            url: url.trim_end_matches('/').to_owned(),
            client: Client::new(policy),
        }
    }

    /// Every span of `project` matching `query`, all pages; empty while the project does
    /// not exist yet (Phoenix answers 404 until its first span lands).
    async fn spans(&self, project: &str, query: &str) -> Vec<Span> {
        let mut spans = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let mut url = format!(
                "{}/v1/projects/{project}/spans?limit=1000&{query}",
                self.url
            );
            if let Some(cursor) = &cursor {
                url.push_str("&cursor=");
                url.extend(cursor.bytes().map(percent_encoded));
            }
            let response = self
                .client
                .get(url.as_str())
                .await
                .expect("Phoenix answers");
            let status = response.status();
            let body = response.into_body().collect().await.unwrap().to_bytes();
            if status == 404 {
                return spans;
            }
            assert!(
                status.is_success(),
                "GET {url}: {status} {}",
                String::from_utf8_lossy(&body)
            );
            let page: Value = serde_json::from_slice(&body).unwrap();
            spans.extend(
                page["data"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(Span::from_json),
            );
            match page["next_cursor"].as_str() {
                Some(next) if !next.is_empty() => cursor = Some(next.to_owned()),
                _ => return spans,
            }
        }
    }

    /// Polls until `found` holds for the project's spans, or fails after `patience`.
    async fn wait_for<T>(
        &self,
        project: &str,
        patience: Duration,
        found: impl Fn(&[Span]) -> Option<T>,
    ) -> T {
        let deadline = Instant::now() + patience;
        loop {
            let spans = self.spans(project, "").await;
            if let Some(result) = found(&spans) {
                return result;
            }
            assert!(
                Instant::now() < deadline,
                "Phoenix project {project} never showed the expected spans ({} spans arrived)",
                spans.len()
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}

/// One user action's trace, as Phoenix stored it: the backend request that reported
/// `NestedRetry`, the frontend request above it, and a resend to db below it.
#[derive(Debug)]
struct Evidence {
    nested_retry: Span,
    backend_request: Span,
    frontend_request: Span,
    retried_db_request: Span,
    resend_count: i64,
}

fn find_evidence(spans: &[Span]) -> Option<Evidence> {
    let by_id: HashMap<&str, &Span> = spans.iter().map(|s| (s.span_id.as_str(), s)).collect();
    let parent_of = |span: &Span| {
        span.parent_id
            .as_deref()
            .and_then(|id| by_id.get(id).copied())
    };
    // The nearest ancestor of `span` that is `service`'s request span.
    let request_above = |span: &Span, service: &str| {
        let mut ancestor = parent_of(span);
        while let Some(candidate) = ancestor {
            if candidate.is_request_of(service) {
                return Some(candidate);
            }
            ancestor = parent_of(candidate);
        }
        None
    };
    for nested in spans
        .iter()
        .filter(|s| s.name == "NestedRetry" && s.service() == Some("backend"))
    {
        let Some(backend_request) = request_above(nested, "backend") else {
            continue;
        };
        let Some(frontend_request) = request_above(backend_request, "frontend") else {
            continue;
        };
        // A request db served for a resend that the same backend request made.
        let retried = spans.iter().find_map(|span| {
            if !span.is_request_of("db") {
                return None;
            }
            let attempt = parent_of(span)?;
            let count = attempt.resend_count().filter(|&count| count >= 1)?;
            let caller = request_above(attempt, "backend")?;
            (caller.span_id == backend_request.span_id).then_some((span, count))
        });
        if let Some((retried_db_request, resend_count)) = retried {
            return Some(Evidence {
                nested_retry: nested.clone(),
                backend_request: backend_request.clone(),
                frontend_request: frontend_request.clone(),
                retried_db_request: retried_db_request.clone(),
                resend_count,
            });
        }
    }
    None
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d2_one_trace_shows_the_nested_retry_at_the_backend() {
    let Ok(url) = std::env::var("PHOENIX_URL") else {
        assert!(
            std::env::var_os("NRESILIENCE_REQUIRE_PHOENIX").is_none(),
            "NRESILIENCE_REQUIRE_PHOENIX is set but PHOENIX_URL is not: {HOW_TO_RUN}"
        );
        eprintln!(
            "SKIPPED d2_one_trace_shows_the_nested_retry_at_the_backend: PHOENIX_URL is not \
             set, so no tracing backend is running. `bash scripts/test` starts one; alone: \
             {HOW_TO_RUN}"
        );
        return;
    };
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let project = format!("nresilience-e2e-{}-{nanos}", std::process::id());

    // db fails every request for one second: the backend retries under the frontend's
    // marked requests, which is the nesting the trace must show.
    let output = Command::new(env!("CARGO_BIN_EXE_demo"))
        .args([
            "--budget",
            "on",
            "--duration",
            "3",
            "--rps",
            "10",
            "--fault-start",
            "1",
            "--fault-length",
            "1",
            "--fault",
            "errors",
            "--fault-error-rate",
            "1.0",
            "--json",
        ])
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &url)
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
        // Phoenix takes traces, not metrics.
        .env("OTEL_METRICS_EXPORTER", "none")
        .env("NRESILIENCE_DEMO_PROJECT", &project)
        .env_remove("OTEL_SERVICE_NAME")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        .output()
        .expect("the demo binary runs");
    assert!(
        output.status.success(),
        "demo failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let summary: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert!(
        summary["nested_retries"]["backend"].as_u64().unwrap() > 0,
        "{summary}"
    );

    let phoenix = Phoenix::new(&url);
    let evidence = phoenix
        .wait_for(&project, Duration::from_secs(60), find_evidence)
        .await;
    // Linked by parent ids, so one trace; the ids Phoenix indexes say the same.
    let trace = &evidence.nested_retry.trace_id;
    assert_eq!(&evidence.frontend_request.trace_id, trace);
    assert_eq!(&evidence.retried_db_request.trace_id, trace);
    // The backend learned of the nesting from the frontend's marker header (N2, N5).
    assert_eq!(
        evidence
            .nested_retry
            .attribute("nresilience.source")
            .and_then(Value::as_str),
        Some("header"),
        "{:?}",
        evidence.nested_retry
    );
    eprintln!(
        "Phoenix project {project}: trace {trace}: frontend request {} → backend request {} \
         reported NestedRetry {} and resent to db (request {}, http.request.resend_count = {})",
        evidence.frontend_request.span_id,
        evidence.backend_request.span_id,
        evidence.nested_retry.span_id,
        evidence.retried_db_request.span_id,
        evidence.resend_count,
    );

    // Phoenix's own filter agrees: the NestedRetry spans it indexes by name are the
    // backend's, and none is the frontend's or db's (N5).
    let nested = phoenix.spans(&project, "name=NestedRetry").await;
    assert!(!nested.is_empty());
    assert!(
        nested.iter().all(|s| s.service() == Some("backend")),
        "{nested:?}"
    );
}
