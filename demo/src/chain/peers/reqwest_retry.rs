//! reqwest-retry 0.9, as its README shows it: `RetryTransientMiddleware` with
//! `ExponentialBackoff::builder().build_with_max_retries(3)` (1 s to 30 min between
//! attempts, jittered) over a reqwest client whose timeout bounds each attempt.

use std::time::Duration;

use reqwest_middleware::{ClientBuilder, ClientWithMiddleware};
use reqwest_retry::policies::ExponentialBackoff;
use reqwest_retry::RetryTransientMiddleware;

use super::super::Result;

/// A client that retries transient failures three times, each attempt bounded by `timeout`.
pub(super) fn client(timeout: Duration) -> Result<ClientWithMiddleware> {
    let policy = ExponentialBackoff::builder().build_with_max_retries(3);
    let inner = reqwest::Client::builder().timeout(timeout).build()?;
    Ok(ClientBuilder::new(inner)
        .with(RetryTransientMiddleware::new_with_policy(policy))
        .build())
}
