//! The frontend → backend → db chain on loopback: db with a fault that ends, the retrying
//! hops above it (nresilience's or a peer library's), the users' traffic, what each run did.

mod args;
mod db;
mod fault;
mod hops;
mod limit;
mod nested_counter;
mod peers;
mod plot;
mod progress;
mod retry_args;
mod run;
mod server;
mod settings;
mod stack;
mod stats;
mod summary;

use std::time::Duration;

use nresilience_client::{Client, HttpClassifier};
use nresilience_core::overload::OverloadControl;
use nresilience_core::{RetryBudget, RetryPolicy};

pub use args::{ChainArgs, DbArgs};
pub use db::{db_app, Db};
pub use fault::{Fault, FaultArgs, FaultKind, Strength};
pub use hops::hop_app;
pub use limit::{capacity_share, physical_limit, Limit};
pub use nested_counter::{CurrentRun, NestedCounter};
pub use peers::{peer_app, PeerClient};
pub use retry_args::{Budget, Ceiling, Overload, RetryArgs, Rules};
pub use run::{run, run_all};
pub use server::{serve, serve_until, HEADER_READ_TIMEOUT};
pub use settings::{RowSettings, Setting, Source};
pub use stack::{Library, Peer, Stack};
pub use stats::{Hop, Stats};
pub use summary::Summary;

/// The demo's errors: configuration and sockets, reported and fatal.
pub type Result<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// A hop's retrying client, named after the hop: the library's defaults (`RetryPolicy`'s
/// and `Client::new`'s) but for what `retry` sets and the budget, if off.
pub fn hop_client(hop: Hop, retry: RetryArgs, budget: Budget) -> Result<Client> {
    let mut policy = RetryPolicy::builder().name(hop.name());
    if let Some(attempts) = retry.attempts {
        policy = policy.max_attempts(attempts);
    }
    if let Some(deadline) = retry.deadline_ms {
        policy = policy.deadline(Some(Duration::from_millis(deadline)));
    }
    if let Some(ceiling) = retry.ceiling {
        policy = policy.attempt_ceiling(Some(ceiling.settings()));
    }
    if budget == Budget::Off {
        policy = policy.budget(RetryBudget::None);
    }
    if let Some(overload) = retry.overload {
        policy = policy.overload_control((overload == Overload::On).then(OverloadControl::new));
    }
    let rules = retry.chain_rules.map(|rules| rules == Rules::On);
    if let Some(rules) = rules {
        policy = policy.inherit_deadline(rules);
    }
    let client = Client::builder(policy.build()?);
    Ok(match rules {
        Some(rules) => {
            let classifier = HttpClassifier::new()
                .overload_signal(rules)
                .retried_signal(rules);
            client.layer(|layer| layer.classifier(classifier)).build()
        }
        None => client.build(),
    })
}

/// The upstream URL a hop calls, or why it cannot be one: an absolute `http://` URL with a
/// host.
pub fn parse_upstream(upstream: &str) -> std::result::Result<axum::http::Uri, String> {
    let uri: axum::http::Uri = upstream
        .parse()
        .map_err(|error| format!("--upstream {upstream:?} is not a URL: {error}"))?;
    if uri.scheme_str() != Some("http") || uri.host().is_none() {
        return Err(format!(
            "--upstream {upstream:?} must be an absolute http:// URL, such as http://127.0.0.1:7002/"
        ));
    }
    Ok(uri)
}
