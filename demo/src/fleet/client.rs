//! One of the fleet's clients, run as a process of its own: an nresilience `Client` with the
//! library's defaults, calling the server at a steady rate.

use std::time::Duration;

use nresilience_client::Client;
use nresilience_core::RetryPolicy;
use serde::{Deserialize, Serialize};

use crate::chain::Result;

/// What one client's calls came to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Calls {
    /// Calls made.
    pub made: u64,
    /// Calls answered `2xx`.
    pub succeeded: u64,
}

/// Calls `url` `rps` times a second for `seconds`, each call on its own task, and prints what
/// they came to as one line of JSON.
pub async fn run(url: &str, rps: u32, seconds: u64) -> Result<Calls> {
    let client = Client::new(RetryPolicy::default());
    let mut ticker = tokio::time::interval(Duration::from_secs(1) / rps);
    let mut calls = Vec::new();
    for _ in 0..u64::from(rps) * seconds {
        ticker.tick().await;
        let (client, url) = (client.clone(), url.to_owned());
        calls.push(tokio::spawn(async move {
            client
                .get(url.as_str())
                .await
                .is_ok_and(|response| response.status().is_success())
        }));
    }
    let mut tally = Calls::default();
    for call in calls {
        tally.made += 1;
        tally.succeeded += u64::from(call.await?);
    }
    println!("{}", serde_json::to_string(&tally)?);
    Ok(tally)
}
