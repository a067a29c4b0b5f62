//! The frontend → backend → db chain on loopback, driven with a fault window in db.

mod hops;
mod nested_counter;
mod stats;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use nresilience_client::Client;
use nresilience_core::{RetryBudget, RetryPolicy};
use serde::Serialize;

pub use hops::{db_app, hop_app, Faults};

/// The demo's errors: configuration and sockets, reported and fatal.
pub type Result<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;
pub use nested_counter::NestedCounter;
pub use stats::{Hop, Stats};

/// Whether each hop's retry budget is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Budget {
    /// Retries are bounded by 10 % of successes (the default).
    On,
    /// Only the attempt count bounds retries.
    Off,
}

/// The chain's knobs.
#[derive(Debug, Clone, clap::Args)]
pub struct ChainArgs {
    /// How long to drive traffic, in seconds.
    #[arg(long, default_value_t = 20)]
    pub duration: u64,
    /// Calls per second from the users to the frontend.
    #[arg(long, default_value_t = 200)]
    pub rps: u32,
    /// Each hop's retry budget.
    #[arg(long, value_enum, default_value_t = Budget::On)]
    pub budget: Budget,
    /// When db's fault window opens, in seconds from the start.
    #[arg(long, default_value_t = 5)]
    pub fault_start: u64,
    /// How long db's fault window stays open, in seconds.
    #[arg(long, default_value_t = 10)]
    pub fault_length: u64,
    /// The share of db requests failed with 503 in the window.
    #[arg(long, default_value_t = 0.5)]
    pub fault_error_rate: f64,
    /// How many times slower db answers in the window.
    #[arg(long, default_value_t = 8.0)]
    pub fault_slowdown: f64,
    /// Attempts each hop makes at most (the first included).
    #[arg(long, default_value_t = 4)]
    pub attempts: u32,
    /// Print the summary as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// The longest a run, a fault window or its start may be: a day.
const MAX_SECONDS: u64 = 86_400;

impl ChainArgs {
    /// Refuses settings the chain cannot run with, saying which and why, before anything
    /// starts: a value that would make every request fail or panic is a mistake to report,
    /// not a run to make.
    pub fn validate(&self) -> std::result::Result<(), String> {
        if !(0.0..=1.0).contains(&self.fault_error_rate) {
            return Err(format!(
                "--fault-error-rate must be a share from 0 to 1, got {}",
                self.fault_error_rate
            ));
        }
        if !(self.fault_slowdown.is_finite() && self.fault_slowdown >= 1.0) {
            return Err(format!(
                "--fault-slowdown must be a finite factor of at least 1 (1: no slowdown), got {}",
                self.fault_slowdown
            ));
        }
        for (flag, seconds) in [
            ("--duration", self.duration),
            ("--fault-start", self.fault_start),
            ("--fault-length", self.fault_length),
        ] {
            if seconds > MAX_SECONDS {
                return Err(format!(
                    "{flag} must be at most {MAX_SECONDS} seconds (a day), got {seconds}"
                ));
            }
        }
        if self.rps == 0 {
            return Err("--rps must be at least 1 call a second".to_owned());
        }
        if self.attempts == 0 {
            return Err("--attempts must be at least 1 (the first attempt)".to_owned());
        }
        Ok(())
    }

    /// db's fault window.
    pub fn faults(&self) -> Faults {
        Faults {
            start: Duration::from_secs(self.fault_start),
            length: Duration::from_secs(self.fault_length),
            error_rate: self.fault_error_rate,
            slowdown: self.fault_slowdown,
            latency: Duration::from_millis(2),
        }
    }
}

/// A hop's retrying client: `attempts` attempts, the budget on or off, named after the hop.
pub fn hop_client(hop: Hop, attempts: u32, budget: Budget) -> Result<Client> {
    let budget = match budget {
        Budget::On => RetryBudget::automatic(),
        Budget::Off => RetryBudget::None,
    };
    let policy = RetryPolicy::builder()
        .name(hop.name())
        .max_attempts(attempts)
        .budget(budget)
        .build()?;
    Ok(Client::new(policy))
}

/// Serves `app` on `addr` until the process ends.
pub async fn serve(app: Router, addr: SocketAddr) -> Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    tokio::spawn(async move {
        if let Err(error) = axum::serve(listener, app).await {
            tracing::error!(%error, "server stopped");
        }
    });
    Ok(bound)
}

/// What one run of the chain did.
#[derive(Debug, Serialize)]
pub struct Summary {
    budget: Budget,
    calls: u64,
    succeeded: u64,
    success_rate: f64,
    attempts: HopCounts,
    nested_retries: HopCounts,
    /// The most attempts a `NestedRetry` at each hop said could reach the dependency
    /// through it: the chain's worst case.
    potential_attempts: HopCounts,
    budget_refusals: HopCounts,
    worst_db_second: Option<WorstSecond>,
}

/// A count per hop.
#[derive(Debug, Serialize)]
pub struct HopCounts {
    frontend: u64,
    backend: u64,
    db: u64,
}

impl HopCounts {
    fn of(count: impl Fn(Hop) -> u64) -> Self {
        Self {
            frontend: count(Hop::Frontend),
            backend: count(Hop::Backend),
            db: count(Hop::Db),
        }
    }
}

/// The second when db received the most requests per user call.
#[derive(Debug, Serialize)]
pub struct WorstSecond {
    second: usize,
    multiple_of_baseline: f64,
}

impl Summary {
    fn of(stats: &Stats, args: &ChainArgs) -> Self {
        let budget = args.budget;
        let calls = stats.calls_total();
        let succeeded = stats.succeeded();
        Self {
            budget,
            calls,
            succeeded,
            success_rate: if calls == 0 {
                0.0
            } else {
                succeeded as f64 / calls as f64
            },
            attempts: HopCounts::of(|hop| stats.received_total(hop)),
            nested_retries: HopCounts::of(|hop| stats.nested_total(hop)),
            potential_attempts: HopCounts::of(|hop| stats.potential_attempts(hop)),
            budget_refusals: HopCounts::of(|hop| stats.refusals(hop)),
            worst_db_second: stats
                .worst_db_second(usize::try_from(args.duration).unwrap_or(usize::MAX))
                .map(|(second, multiple)| WorstSecond {
                    second,
                    multiple_of_baseline: multiple,
                }),
        }
    }

    fn print(&self) {
        let a = &self.attempts;
        let n = &self.nested_retries;
        let r = &self.budget_refusals;
        let p = &self.potential_attempts;
        println!();
        println!(
            "budget {:?}: {} calls, {:.1} % succeeded",
            self.budget,
            self.calls,
            self.success_rate * 100.0
        );
        println!(
            "  attempts      frontend {:>7}  backend {:>7}  db {:>7}",
            a.frontend, a.backend, a.db
        );
        println!(
            "  NestedRetry   frontend {:>7}  backend {:>7}  db {:>7}",
            n.frontend, n.backend, n.db
        );
        println!(
            "  refusals      frontend {:>7}  backend {:>7}  db {:>7}",
            r.frontend, r.backend, r.db
        );
        println!(
            "  potential amplification reported: up to {} attempts at db per user call",
            p.frontend.max(p.backend).max(p.db)
        );
        if let Some(worst) = &self.worst_db_second {
            println!(
                "  worst second at db: t={}s, {:.2}× the users' calls",
                worst.second, worst.multiple_of_baseline
            );
        }
    }
}

/// Starts db, backend and frontend on loopback, drives the users' traffic at the frontend,
/// prints a line a second and returns the summary.
pub async fn run(args: &ChainArgs, stats: Arc<Stats>) -> Result<Summary> {
    let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
    let db = serve(db_app(Arc::clone(&stats), args.faults()), loopback).await?;
    let backend_client = hop_client(Hop::Backend, args.attempts, args.budget)?;
    let backend_app = hop_app(
        Hop::Backend,
        Arc::clone(&stats),
        backend_client,
        format!("http://{db}/"),
    );
    let backend = serve(backend_app, loopback).await?;
    let frontend_client = hop_client(Hop::Frontend, args.attempts, args.budget)?;
    let frontend_app = hop_app(
        Hop::Frontend,
        Arc::clone(&stats),
        frontend_client,
        format!("http://{backend}/"),
    );
    let frontend = serve(frontend_app, loopback).await?;
    if !args.json {
        println!(
            "frontend {frontend} → backend {backend} → db {db}; {} calls/s for {} s, db faulty from {} s for {} s ({} % errors, {}× slower), budget {:?}",
            args.rps, args.duration, args.fault_start, args.fault_length,
            args.fault_error_rate * 100.0, args.fault_slowdown, args.budget
        );
    }

    // The users make single attempts and wait up to the deadline: the retries and attempt
    // ceilings under study are the hops'. (A user's ceiling would cut its call at 3 × the
    // healthy latency and cancel every retry below it.)
    let users = Client::new(
        RetryPolicy::builder()
            .name("users")
            .max_attempts(1)
            .attempt_ceiling(None)
            .build()?,
    );
    let url = format!("http://{frontend}/");
    let mut calls = tokio::task::JoinSet::new();
    let period = Duration::from_secs_f64(1.0 / f64::from(args.rps.max(1)));
    let mut ticker = tokio::time::interval(period);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let end = tokio::time::Instant::now() + Duration::from_secs(args.duration);
    let mut reported = 0;
    while tokio::time::Instant::now() < end {
        ticker.tick().await;
        stats.call_started();
        let (users, url, counted) = (users.clone(), url.clone(), Arc::clone(&stats));
        calls.spawn(async move {
            let ok = matches!(users.get(url).await, Ok(response) if response.status().is_success());
            counted.call_ended(ok);
        });
        let second = stats.second();
        if second > reported {
            reported = second;
            if !args.json {
                progress(&stats, second - 1);
            }
        }
        while calls.try_join_next().is_some() {}
    }
    // Let the calls in flight finish (each hop's deadline bounds them).
    let drain = tokio::time::timeout(Duration::from_secs(35), async {
        while calls.join_next().await.is_some() {}
    });
    let _ = drain.await;
    let summary = Summary::of(&stats, args);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        summary.print();
    }
    Ok(summary)
}

fn progress(stats: &Stats, second: usize) {
    let calls = stats.calls_in(second);
    let db = stats.received_in(Hop::Db, second);
    let success = stats.success_rate_in(second).map_or_else(
        || "    -".to_owned(),
        |rate| format!("{:>4.0}%", rate * 100.0),
    );
    println!(
        "t={second:>3}s  this second: {calls:>5} calls, {success} ok, attempts frontend {:>5} backend {:>5} db {:>5}, db load ×{:.2}  |  totals: NestedRetry {:>6} (up to {:>2}×), refusals {:>6}",
        stats.received_in(Hop::Frontend, second),
        stats.received_in(Hop::Backend, second),
        db,
        if calls == 0 { 0.0 } else { db as f64 / calls as f64 },
        Hop::ALL.iter().map(|&h| stats.nested_total(h)).sum::<u64>(),
        Hop::ALL
            .iter()
            .map(|&h| stats.potential_attempts(h))
            .max()
            .unwrap_or(0),
        Hop::ALL.iter().map(|&h| stats.refusals(h)).sum::<u64>(),
    );
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
