//! The nresilience demo: a frontend → backend → db chain on loopback.
//!
//! `demo` with no arguments runs the whole chain in one process once per row — nresilience
//! with its defaults and with what it leaves off, no retries, and the peer libraries (P1) —,
//! 20 s each with a 5-second fault in db, printing a line a second and the rows side by side.
//! `demo --matrix` runs every row through every kind of fault (P3). `demo --fleet N` runs N
//! client processes against one server hop, with and without the server coordinating their
//! retries (F5). `demo frontend|backend|db` runs one hop as its own process. The storm simulator is the
//! `simulator` package's.

use std::net::SocketAddr;
use std::sync::Arc;

use clap::error::ErrorKind;
use clap::{CommandFactory, Parser, Subcommand};
use demo::chain::{self, Budget, ChainArgs, CurrentRun, Db, DbArgs, Hop, Result, RetryArgs, Stats};
use demo::fleet::{self, FleetArgs};
use demo::{matrix, telemetry};

#[derive(Debug, Parser)]
#[command(about = "The frontend → backend → db chain that shows nresilience at work")]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    chain: ChainArgs,
    #[command(flatten)]
    fleet: FleetArgs,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Runs the db hop alone.
    Db(DbHop),
    /// Runs the backend hop alone, calling `--upstream` (a db).
    Backend(RetryingHop),
    /// Runs the frontend hop alone, calling `--upstream` (a backend).
    Frontend(RetryingHop),
    /// One client of `--fleet`, run by it in a process of its own.
    #[command(hide = true)]
    FleetClient(FleetClient),
}

/// A fleet client: what it calls, how often, for how long.
#[derive(Debug, clap::Args)]
struct FleetClient {
    #[arg(long)]
    upstream: String,
    #[arg(long)]
    rps: u32,
    #[arg(long)]
    seconds: u64,
}

/// db alone: where it listens, its capacity and its fault.
#[derive(Debug, clap::Args)]
struct DbHop {
    /// The address to listen on.
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    #[command(flatten)]
    db: DbArgs,
}

/// A retrying hop alone: where it listens, what it calls, how it retries.
#[derive(Debug, clap::Args)]
struct RetryingHop {
    /// The address to listen on.
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// The next hop's URL.
    #[arg(long)]
    upstream: String,
    /// The hop's retry budget.
    #[arg(long, value_enum, default_value_t = Budget::On)]
    budget: Budget,
    #[command(flatten)]
    retry: RetryArgs,
}

#[tokio::main]
async fn main() -> Result<()> {
    let cli = Cli::parse();
    let valid = match &cli.command {
        None if cli.fleet.fleet.is_some() => cli.fleet.validate(),
        None => cli.chain.validate(),
        Some(Command::FleetClient(client)) => chain::parse_upstream(&client.upstream)
            .map(drop)
            .and_then(|()| {
                FleetArgs {
                    fleet: Some(1),
                    fleet_rps: client.rps,
                    fleet_seconds: client.seconds,
                    ..cli.fleet
                }
                .validate()
            }),
        Some(Command::Db(hop)) => hop.db.validate(),
        Some(Command::Backend(hop) | Command::Frontend(hop)) => hop
            .retry
            .validate()
            .and_then(|()| chain::parse_upstream(&hop.upstream).map(drop)),
    };
    if let Err(reason) = valid {
        Cli::command()
            .error(ErrorKind::ValueValidation, reason)
            .exit();
    }
    let stats = Arc::new(Stats::new());
    let current = Arc::new(CurrentRun::new(Arc::clone(&stats)));
    match cli.command {
        None if cli.fleet.fleet.is_some() => drop(fleet::run(&cli.fleet, cli.chain.json).await?),
        Some(Command::FleetClient(client)) => {
            fleet::run_client(&client.upstream, client.rps, client.seconds).await?;
        }
        None if cli.chain.matrix => {
            let args = cli.chain.clone();
            tokio::task::spawn_blocking(move || matrix::run(&args).map(drop)).await??;
        }
        None => {
            let _telemetry = telemetry::init("demo", Arc::clone(&current))?;
            match &cli.chain.cell {
                Some(cell) => drop(matrix::run_cell(cell, &current).await?),
                None => drop(chain::run_all(&cli.chain, &current).await?),
            }
        }
        Some(Command::Db(hop)) => {
            let telemetry = telemetry::init(Hop::Db.name(), current)?;
            let db = Db::new(Arc::clone(&stats), hop.db);
            let app = db.app().merge(telemetry.metrics_router());
            let serving = db.serve(app, hop.listen, std::future::pending());
            serve_hop(Hop::Db, serving, stats).await?;
        }
        Some(Command::Backend(hop)) => serve_retrying(Hop::Backend, hop, stats, current).await?,
        Some(Command::Frontend(hop)) => serve_retrying(Hop::Frontend, hop, stats, current).await?,
    }
    Ok(())
}

async fn serve_retrying(
    hop: Hop,
    args: RetryingHop,
    stats: Arc<Stats>,
    current: Arc<CurrentRun>,
) -> Result<()> {
    // Before the client: its policy takes its instruments from the meter provider.
    let telemetry = telemetry::init(hop.name(), current)?;
    let client = chain::hop_client(hop, args.retry, args.budget)?;
    let app = chain::hop_app(hop, Arc::clone(&stats), client, args.upstream)
        .merge(telemetry.metrics_router());
    serve_hop(hop, chain::serve(app, args.listen), stats).await
}

/// Serves one hop, and its metrics at `/metrics`, until interrupted: `serving` binds it and
/// says where.
async fn serve_hop(
    hop: Hop,
    serving: impl std::future::Future<Output = Result<SocketAddr>>,
    stats: Arc<Stats>,
) -> Result<()> {
    // Listening for Ctrl-C before saying so: an interrupt right after the line below must
    // stop the hop cleanly, not kill it.
    let interrupted = interrupted()?;
    let addr = serving.await?;
    println!("{} listening on http://{addr}/", hop.name());
    let ticker = tokio::spawn(hop_progress(hop, Arc::clone(&stats)));
    interrupted.await;
    ticker.abort();
    println!(
        "{}: {} requests, {} NestedRetry, {} budget refusals, {} saturated, busiest second {} requests",
        hop.name(),
        stats.received_total(hop),
        stats.nested_total(hop),
        stats.refusals(hop),
        stats.saturated_total(hop),
        (0..=stats.second())
            .map(|second| stats.received_in(hop, second))
            .max()
            .unwrap_or(0),
    );
    Ok(())
}

/// Completes on Ctrl-C (SIGINT); the handler is in place when this returns.
#[cfg(unix)]
fn interrupted() -> Result<impl std::future::Future<Output = ()>> {
    let mut interrupt = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())?;
    Ok(async move {
        interrupt.recv().await;
    })
}

/// Completes on Ctrl-C.
#[cfg(not(unix))]
fn interrupted() -> Result<impl std::future::Future<Output = ()>> {
    Ok(async {
        let _ = tokio::signal::ctrl_c().await;
    })
}

/// A line a second for a hop running alone: what it received that second (and db's queue),
/// and how many nested retries and budget refusals so far.
async fn hop_progress(hop: Hop, stats: Arc<Stats>) {
    let mut ticker = tokio::time::interval(std::time::Duration::from_secs(1));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    ticker.tick().await;
    loop {
        ticker.tick().await;
        let second = stats.second().saturating_sub(1);
        // Every second, traffic or not: a silent hop would look like a hung one.
        let queue = match hop {
            Hop::Db => format!(
                ", queue ≤ {}, {} refused",
                stats.db_queue_in(second),
                stats.db_refused_in(second)
            ),
            Hop::Backend | Hop::Frontend => String::new(),
        };
        println!(
            "t={second:>3}s  {}: {:>6} requests this second{queue}; running totals: NestedRetry {:>7}  budget refusals {:>7}",
            hop.name(),
            stats.received_in(hop, second),
            stats.nested_total(hop),
            stats.refusals(hop),
        );
    }
}
