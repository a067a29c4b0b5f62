//! The frontend → backend → db chain on loopback: db with a fault that ends, the retrying
//! hops above it (nresilience's or a peer library's), the users' traffic, what each run did.

mod args;
mod db;
mod hops;
mod nested_counter;
mod peers;
mod plot;
mod run;
mod server;
mod stack;
mod stats;
mod summary;

use std::time::Duration;

use nresilience_client::{Client, HttpClassifier};
use nresilience_core::overload::OverloadControl;
use nresilience_core::{RetryBudget, RetryPolicy};

pub use args::{Budget, Ceiling, ChainArgs, DbArgs, Overload, RetryArgs, Rules};
pub use db::db_app;
pub use hops::hop_app;
pub use nested_counter::{CurrentRun, NestedCounter};
pub use peers::{peer_app, PeerClient};
pub use run::{run, run_all};
pub use server::{serve, serve_until, HEADER_READ_TIMEOUT};
pub use stack::{Library, Peer, Stack};
pub use stats::{Hop, Stats};
pub use summary::Summary;

/// The demo's errors: configuration and sockets, reported and fatal.
pub type Result<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// A hop's retrying client, named after the hop: its attempts, deadline, ceiling, chain rules
/// and overload control as `retry` says, its budget on or off.
pub fn hop_client(hop: Hop, retry: RetryArgs, budget: Budget) -> Result<Client> {
    let budget = match budget {
        Budget::On => RetryBudget::automatic(),
        Budget::Off => RetryBudget::None,
    };
    let rules = retry.chain_rules == Rules::On;
    let overload = (retry.overload == Overload::On).then(OverloadControl::new);
    let policy = RetryPolicy::builder()
        .name(hop.name())
        .max_attempts(retry.attempts)
        .deadline(Some(Duration::from_millis(retry.deadline_ms)))
        .attempt_ceiling(Some(retry.ceiling.settings()))
        .budget(budget)
        .inherit_deadline(rules)
        .overload_control(overload)
        .build()?;
    let classifier = HttpClassifier::new()
        .overload_signal(rules)
        .retried_signal(rules);
    Ok(Client::builder(policy)
        .layer(|layer| layer.classifier(classifier))
        .build())
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
