//! Running the chain: the three hops on loopback, the users' traffic, a line a second.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use nresilience_client::Client;
use nresilience_core::RetryPolicy;
use tokio::sync::watch;

use super::args::{ChainArgs, Overload, RetryArgs};
use super::db::db_app;
use super::hops::hop_app;
use super::nested_counter::CurrentRun;
use super::peers::{peer_app, PeerClient};
use super::stack::{Library, Stack};
use super::stats::{Hop, Stats};
use super::summary::{self, Summary};
use super::{hop_client, plot, serve_until, Result};

/// Runs the chain once per row asked for (every row unless `--stacks`, `--budget` or
/// `--compare` says which), prints each run's lines, then the rows side by side (or as
/// JSON), and draws them when asked. `current` is where the tracing layer counts
/// `NestedRetry` reports.
pub async fn run_all(args: &ChainArgs, current: &CurrentRun) -> Result<Vec<Summary>> {
    let mut runs = Vec::new();
    for stack in args.stacks() {
        let stats = Arc::new(Stats::new());
        current.start(Arc::clone(&stats));
        runs.push(run(args, stack, stats).await?);
    }
    if args.json {
        let json = match runs.as_slice() {
            [one] => serde_json::to_string_pretty(one)?,
            many => serde_json::to_string_pretty(many)?,
        };
        println!("{json}");
    } else {
        summary::print(&runs, args);
    }
    if let Some(path) = &args.plot {
        plot::plot(path, args, &runs)?;
        if !args.json {
            println!("\nchart written to {}", path.display());
        }
    }
    Ok(runs)
}

/// Starts db, backend and frontend on loopback with the frontend and backend built on
/// `stack`, drives the users' traffic at the frontend, prints a line a second, stops the
/// hops and returns the summary.
pub async fn run(args: &ChainArgs, stack: Stack, stats: Arc<Stats>) -> Result<Summary> {
    let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
    let (stop, stopped) = watch::channel(());
    let stopping = || {
        let mut stopped = stopped.clone();
        async move {
            let _ = stopped.changed().await;
        }
    };
    let db = serve_until(db_app(Arc::clone(&stats), args.db), loopback, stopping()).await?;
    let retrying = |hop, upstream: SocketAddr| {
        let retry = match hop {
            Hop::Frontend => args.retry.facing_users(args.user_timeout()),
            Hop::Backend | Hop::Db => args.retry,
        };
        let app = retrying_app(stack, hop, retry, Arc::clone(&stats), upstream);
        let stop = stopping();
        async move { serve_until(app?, loopback, stop).await }
    };
    let backend = retrying(Hop::Backend, db).await?;
    let frontend = retrying(Hop::Frontend, backend).await?;
    let duration = args.duration();
    if !args.json {
        let d = &args.db;
        let overload = match (stack.library(), args.retry.overload) {
            (Library::Peer(_), _) => "",
            (Library::Nresilience(_), Overload::On) => ", overload control on",
            (Library::Nresilience(_), Overload::Off) => ", overload control off",
        };
        println!(
            "\n{}: {}{overload}\nfrontend {frontend} → backend {backend} → db {db}; {} calls/s for {duration} s, each user waiting {} ms; db: {} workers × {} ms, queue {}, {}× slower from {} s for {} s",
            stack.name(), stack.description(), args.rps, args.user_timeout_ms, d.db_workers,
            d.db_query_ms, d.db_queue, d.fault_slowdown, d.fault_start, d.fault_length,
        );
    }

    // The users make single attempts and give up after their timeout: the retries and
    // attempt ceilings under study are the hops'.
    let users = Client::new(
        RetryPolicy::builder()
            .name("users")
            .max_attempts(1)
            .attempt_ceiling(None)
            .attempt_timeout(Some(args.user_timeout()))
            .deadline(Some(args.user_timeout()))
            .build()?,
    );
    let url = format!("http://{frontend}/");
    let mut calls = tokio::task::JoinSet::new();
    let period = Duration::from_secs_f64(1.0 / f64::from(args.rps.max(1)));
    let mut ticker = tokio::time::interval(period);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // The run's seconds are the counters' seconds: no call starts after the last of them,
    // and each call is counted in the second it is started in, read once.
    let run_seconds = usize::try_from(duration).unwrap_or(usize::MAX);
    let mut reported = 0;
    loop {
        ticker.tick().await;
        let started = stats.second();
        if started >= run_seconds {
            break;
        }
        stats.call_started_in(started);
        let (users, url, counted) = (users.clone(), url.clone(), Arc::clone(&stats));
        calls.spawn(async move {
            let ok = matches!(users.get(url).await, Ok(response) if response.status().is_success());
            counted.call_ended(started, ok);
        });
        let second = stats.second();
        if second > reported {
            reported = second;
            if !args.json {
                progress(stack, &stats, second - 1);
            }
        }
        while calls.try_join_next().is_some() {}
    }
    if !args.json {
        for second in reported..run_seconds {
            progress(stack, &stats, second);
        }
    }
    // The calls in flight end by the users' timeout.
    let drain = tokio::time::timeout(args.user_timeout() + Duration::from_secs(5), async {
        while calls.join_next().await.is_some() {}
    });
    let _ = drain.await;
    let _ = stop.send(());
    Ok(Summary::of(&stats, args, stack))
}

/// A retrying hop built on `stack`, in front of the one at `upstream`.
fn retrying_app(
    stack: Stack,
    hop: Hop,
    retry: RetryArgs,
    stats: Arc<Stats>,
    upstream: SocketAddr,
) -> Result<Router> {
    let url = format!("http://{upstream}/");
    Ok(match stack.library() {
        Library::Nresilience(budget) => hop_app(hop, stats, hop_client(hop, retry, budget)?, url),
        Library::Peer(peer) => {
            let client = PeerClient::new(peer, &upstream.ip().to_string())?;
            peer_app(hop, stats, client, url)
        }
    })
}

/// The line for `second`: what happened in it, then the running totals, labelled as such.
fn progress(stack: Stack, stats: &Stats, second: usize) {
    let calls = stats.calls_in(second);
    let db = stats.received_in(Hop::Db, second);
    let success = stats.success_rate_in(second).map_or_else(
        || "   - ".to_owned(),
        |rate| format!("{:>4.0}%", rate * 100.0),
    );
    // Only nresilience's hops report nested retries and budget refusals.
    let totals = match stack.library() {
        Library::Nresilience(_) => format!(
            "; {:>4} saturated  |  totals: NestedRetry {:>6} (up to {:>2}×), budget refusals {:>6}",
            stats.saturated_in(second),
            Hop::ALL.iter().map(|&h| stats.nested_total(h)).sum::<u64>(),
            Hop::ALL
                .iter()
                .map(|&h| stats.potential_attempts(h))
                .max()
                .unwrap_or(0),
            Hop::ALL.iter().map(|&h| stats.refusals(h)).sum::<u64>(),
        ),
        Library::Peer(_) => String::new(),
    };
    println!(
        "{:<21} t={second:>3}s  this second: {calls:>4} calls, {success} of those ending ok; attempts frontend {:>5} backend {:>5} db {:>5} (×{:.2}); db queue ≤ {:>4}, {:>5} refused{totals}",
        stack.name(),
        stats.received_in(Hop::Frontend, second),
        stats.received_in(Hop::Backend, second),
        db,
        if calls == 0 { 0.0 } else { db as f64 / calls as f64 },
        stats.db_queue_in(second),
        stats.db_refused_in(second),
    );
}
