//! `simulator --fleet`: the same storm against a fleet of clients of very different
//! sizes instead of one, each with its own policy and bucket, to test the budget's promise
//! that the fleet's amplification is bounded however the clients differ in size.

use std::time::Instant;

use nresilience_core::{AttemptCeiling, BudgetOptions, RetryBudget, RetryPolicy};
use serde_json::json;
use simulator::{load_multiplier, Dependency, HopReport, Load, Simulation, SimulationReport};

use super::{ceiling, policy, worst_second, Args, Result};

/// (clients, calls per second each): 35 clients, 500 calls a second together.
const SIZES: [(usize, f64); 5] = [(1, 240.0), (2, 60.0), (4, 20.0), (8, 5.0), (20, 1.0)];

/// How each client's budget is set for one run.
#[derive(Debug, Clone, Copy)]
enum FleetBudget {
    Off,
    On,
    /// The fraction alone: no floor, so a bucket holds at most one token (B2, B3).
    OnWithoutFloor,
    /// On, against a dependency that counts the fleet's retries and advises each client how
    /// much of its budget to use (F2, F3).
    Coordinated,
}

impl FleetBudget {
    const ALL: [Self; 4] = [Self::Off, Self::On, Self::OnWithoutFloor, Self::Coordinated];

    fn name(self) -> &'static str {
        match self {
            Self::Off => "off",
            Self::On => "on",
            Self::OnWithoutFloor => "on, no floor",
            Self::Coordinated => "coordinated",
        }
    }

    fn policy(self, ceiling: AttemptCeiling) -> Result<RetryPolicy> {
        Ok(match self {
            Self::Off => policy(ceiling, false)?,
            Self::On | Self::Coordinated => policy(ceiling, true)?,
            Self::OnWithoutFloor => policy(ceiling, true)?
                .reconfigure()
                .budget(
                    RetryBudget::automatic()
                        .with_options(BudgetOptions::new().minimum_per_second(0.0)),
                )
                .build()?,
        })
    }
}

/// (clients, calls per second each) of the fleet `args` asks for: [`SIZES`] scaled to offer
/// `args.rate`, or `--fleet-clients` of one size sharing it.
fn sizes(args: &Args) -> Vec<(usize, f64)> {
    if let Some(clients) = args.fleet_clients {
        return vec![(clients as usize, args.rate / f64::from(clients))];
    }
    let total: f64 = SIZES.iter().map(|&(n, rate)| n as f64 * rate).sum();
    SIZES
        .iter()
        .map(|&(n, rate)| (n, rate * args.rate / total))
        .collect()
}

/// The fleet's members' rates, largest first.
fn members(args: &Args) -> Vec<f64> {
    sizes(args)
        .into_iter()
        .flat_map(|(n, rate)| std::iter::repeat_n(rate, n))
        .collect()
}

pub(super) fn main(args: &Args, dependency: &Dependency) -> Result<()> {
    let rates = members(args);
    if !args.json {
        let sizes: Vec<String> = sizes(args)
            .iter()
            .map(|&(n, rate)| format!("{n}×{rate}"))
            .collect();
        println!(
            "fleet: {} clients ({} calls/s) = {} calls/s for {:?}, the storm above, seed {}",
            rates.len(),
            sizes.join(", "),
            args.rate,
            args.duration,
            args.seed
        );
        println!(
            "{:<13} {:>7} {:>12} {:>10} {:>13} {:>12}   load multiplier by client size (calls/s)",
            "budget", "calls", "availability", "load mult", "amplification", "worst second"
        );
    }
    for budget in FleetBudget::ALL {
        let client = budget.policy(ceiling(args.ceiling_refresh, args.ceiling_learns))?;
        let started = Instant::now();
        let report = Simulation::fleet(
            rates
                .iter()
                .map(|&rate| (client.clone(), Load::constant(rate))),
        )
        .against(dependency.clone())
        .coordinated(matches!(budget, FleetBudget::Coordinated).then_some(args.accepted_share))
        .for_duration(args.duration)
        .run(args.seed)?;
        let wall = started.elapsed();
        let by_size = by_size(&report.hops, &rates);
        if args.json {
            println!("{}", to_json(args, budget, &report, &by_size));
        } else {
            print_row(budget, &report, &by_size);
            eprintln!("simulated in {:.1}s", wall.as_secs_f64());
        }
    }
    Ok(())
}

/// Each size class's calls and attempts together, largest first.
fn by_size(members: &[HopReport], rates: &[f64]) -> Vec<(f64, u64, u64)> {
    let mut classes: Vec<(f64, u64, u64)> = Vec::new();
    for (member, &rate) in members.iter().zip(rates) {
        match classes.last_mut() {
            Some(class) if class.0 == rate => {
                class.1 += member.calls;
                class.2 += member.attempts;
            }
            _ => classes.push((rate, member.calls, member.attempts)),
        }
    }
    classes
}

fn print_row(budget: FleetBudget, r: &SimulationReport, by_size: &[(f64, u64, u64)]) {
    let classes: Vec<String> = by_size
        .iter()
        .map(|&(rate, calls, attempts)| format!("{rate}: {:.3}", load_multiplier(attempts, calls)))
        .collect();
    println!(
        "{:<13} {:>7} {:>12.4} {:>10.3} {:>13.3} {:>12}   {}",
        budget.name(),
        r.calls,
        r.availability(),
        r.load_multiplier(),
        r.amplification,
        worst_second(r),
        classes.join("  "),
    );
}

fn to_json(
    args: &Args,
    budget: FleetBudget,
    r: &SimulationReport,
    by_size: &[(f64, u64, u64)],
) -> serde_json::Value {
    json!({
        "fleet": true,
        "seed": r.seed,
        "budget": budget.name(),
        "rate": args.rate,
        "clients": r.hops.len(),
        "calls": r.calls,
        "availability": r.availability(),
        "load_multiplier": r.load_multiplier(),
        "amplification": r.amplification,
        "worst_second_s": r.worst_second.map(|at| at.as_secs()),
        "budget_refusals": r.budget_refusals,
        "accepted_share": matches!(budget, FleetBudget::Coordinated).then_some(args.accepted_share),
        "by_size": by_size.iter().map(|&(rate, calls, attempts)| json!({
            "calls_per_second_each": rate,
            "calls": calls,
            "attempts": attempts,
            "load_multiplier": load_multiplier(attempts, calls),
        })).collect::<Vec<_>>(),
        "calls_per_second": r.seconds.iter().map(|s| s.calls).collect::<Vec<_>>(),
        "attempts_per_second": r.seconds.iter().map(|s| s.attempts).collect::<Vec<_>>(),
    })
}
