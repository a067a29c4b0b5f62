//! reqwest 0.13's own retries, as its `retry` module documents them: scoped to the upstream's
//! host, a classifier that retries server errors and failed requests, and the defaults for
//! the rest (a `TpsBudget` allowing 20 % extra load, 2 retries a request, no backoff, no
//! `Retry-After`). reqwest's timeout covers the whole request, its retries included.

use std::time::Duration;

use super::super::Result;

/// A reqwest client that retries calls to `host` and gives each request `timeout`.
pub(super) fn client(host: &str, timeout: Duration) -> Result<reqwest::Client> {
    let retries = reqwest::retry::for_host(host.to_owned()).classify_fn(|attempt| {
        let failed = attempt.error().is_some()
            || attempt
                .status()
                .is_some_and(|status| status.is_server_error());
        if failed {
            attempt.retryable()
        } else {
            attempt.success()
        }
    });
    Ok(reqwest::Client::builder()
        .retry(retries)
        .timeout(timeout)
        .build()?)
}
