//! Running the chain: the three hops on loopback, the users' traffic, a line a second.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use nresilience_client::Client;
use nresilience_core::RetryPolicy;
use tokio::sync::watch;

use super::args::ChainArgs;
use super::db::Db;
use super::fault::{Fault, FaultKind};
use super::hops::hop_app;
use super::nested_counter::CurrentRun;
use super::peers::{peer_app, PeerClient};
use super::progress;
use super::retry_args::RetryArgs;
use super::settings::RowSettings;
use super::stack::{Library, Stack};
use super::stats::{Hop, Stats};
use super::summary::{self, Summary};
use super::{hop_client, plot, serve_until, Result};
use crate::format::wrap;

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
    let db = Db::new(Arc::clone(&stats), args.db);
    let db = db.serve(db.app(), loopback, stopping()).await?;
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
    let settings = RowSettings::of(stack, args.retry, args.user_timeout());
    if args.prints_seconds() {
        let d = &args.db;
        let about = format!(
            "{}: {}\nfrontend {frontend} → backend {backend} → db {db}; {} calls/s for {duration} s, users waiting {} ms; db {} workers × {} ms, queue {}; {}",
            stack.name(), settings.description, args.rps, args.user_timeout_ms, d.db_workers,
            d.db_query_ms, d.db_queue, d.fault().describe(),
        );
        println!();
        for paragraph in about.lines() {
            for line in wrap(paragraph, 120) {
                println!("{line}");
            }
        }
        println!("{}", progress::HEADER);
    }

    // The users make single attempts and give up after their timeout: the retries, attempt
    // ceilings and overload control under study are the hops'.
    let users = Client::new(
        RetryPolicy::builder()
            .name("users")
            .max_attempts(1)
            .attempt_ceiling(None)
            .overload_control(None)
            .attempt_timeout(Some(args.user_timeout()))
            .deadline(Some(args.user_timeout()))
            .build()?,
    );
    let url = format!("http://{frontend}/");
    let mut calls = tokio::task::JoinSet::new();
    let load = Load::new(args);
    let mut next = tokio::time::Instant::now();
    // The run's seconds are the counters' seconds: no call starts after the last of them,
    // and each call is counted in the second it is started in, read once.
    let run_seconds = usize::try_from(duration).unwrap_or(usize::MAX);
    let mut reported = 0;
    loop {
        tokio::time::sleep_until(next).await;
        // The calls keep to their schedule: a driver woken late starts the calls it was late
        // with at once, so the users' rate is the rate asked for. Only one a whole second
        // behind starts again from now.
        let now = tokio::time::Instant::now();
        next = if now > next + BEHIND { now } else { next } + load.gap_at(stats.elapsed());
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
            if args.prints_seconds() {
                progress::print(stack, &stats, second - 1);
            }
        }
        while calls.try_join_next().is_some() {}
    }
    if args.prints_seconds() {
        for second in reported..run_seconds {
            progress::print(stack, &stats, second);
        }
    }
    // The calls in flight end by the users' timeout.
    let drain = tokio::time::timeout(args.user_timeout() + Duration::from_secs(5), async {
        while calls.join_next().await.is_some() {}
    });
    let _ = drain.await;
    let _ = stop.send(());
    Ok(Summary::of(&stats, args, stack, settings))
}

/// How far behind its schedule the driver may fall and still make up for the calls it was
/// late with.
const BEHIND: Duration = Duration::from_secs(1);

/// The users' calls: `--rps` a second, that times the surge's factor while a surge lasts.
struct Load {
    gap: Duration,
    surge: Option<Fault>,
}

impl Load {
    fn new(args: &ChainArgs) -> Self {
        let fault = args.db.fault();
        Self {
            gap: Duration::from_secs_f64(1.0 / f64::from(args.rps.max(1))),
            surge: (fault.kind == FaultKind::Surge).then_some(fault),
        }
    }

    /// The gap after a call started `elapsed` into the run.
    fn gap_at(&self, elapsed: Duration) -> Duration {
        match self.surge {
            Some(surge) if surge.acts_at(elapsed) => self.gap.div_f64(surge.factor()),
            _ => self.gap,
        }
    }
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
        Library::Nresilience(budget, row) => {
            hop_app(hop, stats, hop_client(hop, retry.over(row), budget)?, url)
        }
        Library::Peer(peer) => {
            let client = PeerClient::new(peer, &upstream.ip().to_string())?;
            peer_app(hop, stats, client, url)
        }
    })
}
