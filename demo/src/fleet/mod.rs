//! `demo --fleet N`: N client processes calling one server hop that fails a share of its
//! requests fast, once with each client's budget alone and once with the server
//! coordinating them (F1–F3, F5). The server counts the first attempts and the retries
//! reaching it; the goal is retries at most 12 % of first attempts with coordination.

mod client;
mod server;

use std::process::{Command, Stdio};
use std::sync::Arc;

use serde::Serialize;

pub use client::{run as run_client, Calls};

use crate::chain::{self, Result};

/// F5's goal: retries reaching the server, per first attempt, with coordination.
const GOAL: f64 = 0.12;

/// The fleet run's flags.
#[derive(Debug, Clone, Copy, PartialEq, clap::Args)]
pub struct FleetArgs {
    /// Run N client processes against one server hop, with and without the server
    /// coordinating their retries (F5), instead of the chain.
    #[arg(
        long,
        value_name = "N",
        conflicts_with_all = ["matrix", "stacks", "budget", "compare", "cell", "duration", "plot"]
    )]
    pub fleet: Option<u32>,
    /// Calls per second each client process makes.
    #[arg(long, default_value_t = 5, requires = "fleet")]
    pub fleet_rps: u32,
    /// The share of requests the server's handler fails fast, from 0 to below 1.
    #[arg(long, default_value_t = 0.2, requires = "fleet")]
    pub fleet_failing: f64,
    /// How long the clients call, in seconds, from 10 to 600.
    #[arg(long, default_value_t = 60, requires = "fleet")]
    pub fleet_seconds: u64,
}

impl FleetArgs {
    /// The settings' reason to be refused, if any.
    pub fn validate(&self) -> std::result::Result<(), String> {
        if self.fleet.is_some_and(|n| !(1..=200).contains(&n)) {
            return Err("--fleet takes 1 to 200 client processes".into());
        }
        if !(1..=1_000).contains(&self.fleet_rps) {
            return Err("--fleet-rps takes 1 to 1000 calls a second".into());
        }
        if !(0.0..1.0).contains(&self.fleet_failing) {
            return Err("--fleet-failing takes a share from 0 to below 1".into());
        }
        if !(10..=600).contains(&self.fleet_seconds) {
            return Err("--fleet-seconds takes 10 to 600 seconds".into());
        }
        Ok(())
    }
}

/// One run of the fleet: what reached the server, and what the clients' calls came to.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct FleetRun {
    /// Whether the server coordinated the clients (`FleetLayer`).
    pub coordinated: bool,
    /// First attempts that reached the server over the run.
    pub firsts: u64,
    /// Retries that reached the server over the run.
    pub retries: u64,
    /// First attempts over the run's second half, once the clients have heard the server.
    pub late_firsts: u64,
    /// Retries over the run's second half.
    pub late_retries: u64,
    /// The clients' calls, summed.
    pub calls: Calls,
}

impl FleetRun {
    fn share(retries: u64, firsts: u64) -> f64 {
        retries as f64 / firsts.max(1) as f64
    }

    /// Retries per first attempt over the run.
    #[must_use]
    pub fn retry_share(&self) -> f64 {
        Self::share(self.retries, self.firsts)
    }

    /// Retries per first attempt over the run's second half.
    #[must_use]
    pub fn late_retry_share(&self) -> f64 {
        Self::share(self.late_retries, self.late_firsts)
    }
}

/// Runs the fleet without coordination, then with it, and prints both: a table, or with
/// `json` one line of JSON.
pub async fn run(args: &FleetArgs, json: bool) -> Result<[FleetRun; 2]> {
    let processes = args.fleet.ok_or("no --fleet")?;
    if !json {
        println!(
            "fleet: {processes} client processes × {} calls/s for {} s against one server failing {:.0} % of requests fast",
            args.fleet_rps,
            args.fleet_seconds,
            args.fleet_failing * 100.0
        );
    }
    let alone = run_once(args, processes, false).await?;
    let coordinated = run_once(args, processes, true).await?;
    if json {
        println!("{}", serde_json::to_string(&[alone, coordinated])?);
    } else {
        print_runs(&[alone, coordinated]);
    }
    Ok([alone, coordinated])
}

async fn run_once(args: &FleetArgs, processes: u32, coordinated: bool) -> Result<FleetRun> {
    let arrivals = Arc::new(server::Arrivals::default());
    let app = server::app(args.fleet_failing, coordinated, Arc::clone(&arrivals));
    let addr = chain::serve(app, "127.0.0.1:0".parse()?).await?;
    let url = format!("http://{addr}/");
    let children = (0..processes)
        .map(|_| {
            Command::new(std::env::current_exe()?)
                .args(["fleet-client", "--upstream", &url])
                .args(["--rps", &args.fleet_rps.to_string()])
                .args(["--seconds", &args.fleet_seconds.to_string()])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
        })
        .collect::<std::io::Result<Vec<_>>>()?;
    let outputs = tokio::task::spawn_blocking(move || {
        children
            .into_iter()
            .map(std::process::Child::wait_with_output)
            .collect::<std::io::Result<Vec<_>>>()
    })
    .await??;
    let mut calls = Calls::default();
    for output in outputs {
        if !output.status.success() {
            return Err(format!(
                "a fleet client failed ({}): {}",
                output.status,
                String::from_utf8_lossy(&output.stderr).trim()
            )
            .into());
        }
        let tally: Calls = serde_json::from_slice(&output.stdout)?;
        calls.made += tally.made;
        calls.succeeded += tally.succeeded;
    }
    let seconds = usize::try_from(args.fleet_seconds)?;
    let (firsts, retries) = arrivals.between(0, usize::MAX);
    let (late_firsts, late_retries) = arrivals.between(seconds / 2, usize::MAX);
    Ok(FleetRun {
        coordinated,
        firsts,
        retries,
        late_firsts,
        late_retries,
        calls,
    })
}

fn print_runs(runs: &[FleetRun]) {
    println!(
        "{:<28} {:>14} {:>8} {:>14} {:>13} {:>16}",
        "", "first attempts", "retries", "retries/first", "second half", "calls succeeded"
    );
    for run in runs {
        let name = if run.coordinated {
            "coordinated (FleetLayer)"
        } else {
            "each client's budget alone"
        };
        println!(
            "{name:<28} {:>14} {:>8} {:>13.1} % {:>11.1} % {:>14.2} %",
            run.firsts,
            run.retries,
            run.retry_share() * 100.0,
            run.late_retry_share() * 100.0,
            run.calls.succeeded as f64 / run.calls.made.max(1) as f64 * 100.0
        );
    }
    if let Some(coordinated) = runs.iter().find(|run| run.coordinated) {
        let met = |share: f64| if share <= GOAL { "met" } else { "NOT met" };
        println!(
            "F5: retries at the server ≤ {:.0} % of first attempts with coordination: {} over the run, {} over its second half",
            GOAL * 100.0,
            met(coordinated.retry_share()),
            met(coordinated.late_retry_share())
        );
    }
}
