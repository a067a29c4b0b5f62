//! The nresilience demo: a frontend → backend → db chain on loopback.
//!
//! `demo` with no arguments runs the whole chain in one process for 20 s with a fault window
//! in db, printing a line a second and a summary. `demo frontend|backend|db` runs one hop
//! as its own process.

use std::net::SocketAddr;
use std::sync::Arc;

mod simulate;

use clap::error::ErrorKind;
use clap::{CommandFactory, Parser, Subcommand};
use demo::chain::{self, ChainArgs, Hop, Result, Stats};
use demo::telemetry;

#[derive(Debug, Parser)]
#[command(about = "The frontend → backend → db chain that shows nresilience at work")]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    chain: ChainArgs,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Runs the db hop alone.
    Db(HopArgs),
    /// Runs the backend hop alone, calling `--upstream` (a db).
    Backend(HopArgs),
    /// Runs the frontend hop alone, calling `--upstream` (a backend).
    Frontend(HopArgs),
    /// Simulates the original library's retry storm in virtual time, budget off and on (SPEC S1).
    Simulate(simulate::Args),
}

#[derive(Debug, clap::Args)]
struct HopArgs {
    /// The address to listen on.
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// The next hop's URL (backend and frontend).
    #[arg(long)]
    upstream: Option<String>,
    #[command(flatten)]
    chain: ChainArgs,
}

#[tokio::main]
async fn main() -> Result<()> {
    let cli = Cli::parse();
    let chain = match &cli.command {
        Some(Command::Db(args) | Command::Backend(args) | Command::Frontend(args)) => &args.chain,
        _ => &cli.chain,
    };
    if let Err(reason) = chain.validate() {
        Cli::command()
            .error(ErrorKind::ValueValidation, reason)
            .exit();
    }
    let stats = Arc::new(Stats::new());
    match cli.command {
        None => {
            let _telemetry = telemetry::init("demo", Arc::clone(&stats))?;
            chain::run(&cli.chain, stats).await?;
        }
        Some(Command::Db(args)) => serve_hop(Hop::Db, args, stats).await?,
        Some(Command::Backend(args)) => serve_hop(Hop::Backend, args, stats).await?,
        Some(Command::Frontend(args)) => serve_hop(Hop::Frontend, args, stats).await?,
        Some(Command::Simulate(args)) => simulate::main(&args)?,
    }
    Ok(())
}

/// Serves one hop until interrupted.
async fn serve_hop(hop: Hop, args: HopArgs, stats: Arc<Stats>) -> Result<()> {
    let _telemetry = telemetry::init(hop.name(), Arc::clone(&stats))?;
    let app = match hop {
        Hop::Db => chain::db_app(Arc::clone(&stats), args.chain.faults()),
        Hop::Backend | Hop::Frontend => {
            let upstream = args
                .upstream
                .ok_or_else(|| format!("{} needs --upstream URL", hop.name()))?;
            if let Err(reason) = chain::parse_upstream(&upstream) {
                Cli::command()
                    .error(ErrorKind::ValueValidation, reason)
                    .exit();
            }
            let client = chain::hop_client(hop, args.chain.attempts, args.chain.budget)?;
            chain::hop_app(hop, Arc::clone(&stats), client, upstream)
        }
    };
    let addr = chain::serve(app, args.listen).await?;
    println!("{} listening on http://{addr}/", hop.name());
    let ticker = tokio::spawn(hop_progress(hop, Arc::clone(&stats)));
    tokio::signal::ctrl_c().await?;
    ticker.abort();
    println!(
        "{}: {} requests, {} NestedRetry, {} budget refusals, busiest second {} requests",
        hop.name(),
        stats.received_total(hop),
        stats.nested_total(hop),
        stats.refusals(hop),
        (0..=stats.second())
            .map(|second| stats.received_in(hop, second))
            .max()
            .unwrap_or(0),
    );
    Ok(())
}

/// A line a second for a hop running alone: what it received that second, and how many
/// nested retries and refusals so far.
async fn hop_progress(hop: Hop, stats: Arc<Stats>) {
    let mut ticker = tokio::time::interval(std::time::Duration::from_secs(1));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    ticker.tick().await;
    loop {
        ticker.tick().await;
        let second = stats.second().saturating_sub(1);
        // Every second, traffic or not: a silent hop would look like a hung one.
        println!(
            "t={second:>3}s  {}: {:>6} requests this second; running totals: NestedRetry {:>7}  refusals {:>7}",
            hop.name(),
            stats.received_in(hop, second),
            stats.nested_total(hop),
            stats.refusals(hop),
        );
    }
}
