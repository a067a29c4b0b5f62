//! The simulator as users run it: the same seed prints the same bytes (S2), the fleet
//! mode shows each client held by its own budget (S1, B1, B2), and the metastable scenario
//! shows a db kept down by retries after its trigger ends, and drained by the budget (D3).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

use serde_json::Value;

fn simulate(args: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_simulator"))
        .args(args)
        .output()
        .expect("the simulator runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

#[test]
fn s2_the_same_seed_prints_the_same_bytes() {
    for mode in [&["--hops", "2"][..], &["--fleet", "--failing", "0.2"][..]] {
        let args = [
            &[
                "--duration",
                "20s",
                "--brownout-after",
                "5s",
                "--brownout-lasting",
                "5s",
            ],
            mode,
        ]
        .concat();
        let first = simulate(&args);
        assert_eq!(first, simulate(&args), "{args:?}");
        assert_ne!(
            first,
            simulate(&[&args[..], &["--seed", "7"]].concat()),
            "another seed, another run"
        );
    }
}

/// `--fleet --json` with a fifth of attempts failing and no brownout: one object per row.
fn fleet(args: &[&str]) -> Vec<Value> {
    let common = [
        "--fleet",
        "--failing",
        "0.2",
        "--brownout-after",
        "10m",
        "--json",
    ];
    simulate(&[&common[..], args].concat())
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// [`fleet`]'s runs of 200 clients of 2 calls a second for `duration`.
fn small_clients(duration: &str) -> Vec<Value> {
    fleet(&[
        "--fleet-clients",
        "200",
        "--rate",
        "400",
        "--duration",
        duration,
    ])
}

#[test]
fn s1_the_fleet_is_held_near_one_plus_the_fraction() {
    let runs = fleet(&["--duration", "60s"]);
    let budgets: Vec<&str> = runs.iter().map(|r| r["budget"].as_str().unwrap()).collect();
    assert_eq!(budgets, ["off", "on", "on, no floor", "coordinated"]);
    let load = |run: &Value| run["load_multiplier"].as_f64().unwrap();
    let (off, on, pure) = (load(&runs[0]), load(&runs[1]), load(&runs[2]));
    assert_eq!(runs[0]["clients"], 35);
    // A fifth of attempts fail: three attempts cost 1 + 0.2 + 0.04 without a budget.
    assert!((off - 1.24).abs() < 0.03, "{off}");
    // The fraction alone holds every client, large or small, at about 1 + 0.1 × successes.
    assert!(pure < 1.1, "{pure}");
    for class in runs[2]["by_size"].as_array().unwrap() {
        assert!(load(class) < 1.1, "{class}");
    }
    // The floor is per client: the smallest retry as if unbudgeted, the largest is held.
    let classes = runs[1]["by_size"].as_array().unwrap();
    assert!(load(&classes[0]) < 1.12, "{}", classes[0]);
    assert!(load(&classes[4]) > 1.2, "{}", classes[4]);
    assert!(pure < on && on < off, "{off} {on} {pure}");
    // F3, F5: the dependency's advice holds the fleet near its accepted share (10 %) of
    // first attempts, floors and all, where the budgets alone let the floors add up.
    let coordinated = load(&runs[3]);
    assert!(coordinated < 1.12 && coordinated < on, "{coordinated} {on}");
    assert_eq!(runs[3]["accepted_share"], 0.1);
}

#[test]
fn f5_a_fleet_of_many_small_clients_is_held_only_by_its_dependency() {
    let runs = small_clients("30s");
    let load = |run: &Value| run["load_multiplier"].as_f64().unwrap();
    assert_eq!(runs[0]["clients"], 200);
    // Two calls a second need fewer retries than the floor's three: the budget holds nothing.
    assert_eq!(load(&runs[1]), load(&runs[0]));
    assert!(load(&runs[3]) < 1.12, "{}", runs[3]);
}

#[test]
fn f5_the_fleets_json_carries_each_seconds_calls_and_attempts() {
    // As the storm's `--json` has them: each run's seconds add up to the run.
    let runs = small_clients("10s");
    assert_eq!(runs.len(), 4);
    for run in &runs {
        let sum = |key: &str| -> u64 {
            run[key]
                .as_array()
                .unwrap()
                .iter()
                .map(|n| n.as_u64().unwrap())
                .sum()
        };
        assert_eq!(sum("calls_per_second"), run["calls"].as_u64().unwrap());
        let attempts: u64 = run["by_size"]
            .as_array()
            .unwrap()
            .iter()
            .map(|class| class["attempts"].as_u64().unwrap())
            .sum();
        assert_eq!(sum("attempts_per_second"), attempts);
    }
}

#[test]
fn f5_fleet_flags_out_of_range_are_refused_with_a_reason() {
    for args in [
        &["--fleet", "--accepted-share", "1.5"][..],
        &["--fleet", "--fleet-clients", "0"][..],
        &["--fleet-clients", "20"][..],
    ] {
        let output = Command::new(env!("CARGO_BIN_EXE_simulator"))
            .args(args)
            .output()
            .unwrap();
        assert!(!output.status.success(), "{args:?}");
        assert!(!output.stderr.is_empty(), "{args:?}");
    }
}

/// `--scenario metastable --json`: one object per run, in the order ceiling, budget, then
/// overload control.
fn metastable(args: &[&str]) -> Vec<Value> {
    scenario("metastable", args)
}

fn scenario(name: &str, args: &[&str]) -> Vec<Value> {
    simulate(&[&["--scenario", name, "--json"][..], args].concat())
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// The run with `ceiling` and `budget`, overload control off.
fn run<'a>(runs: &'a [Value], ceiling: &str, budget: &str) -> &'a Value {
    with_overload(runs, ceiling, budget, "off")
}

fn with_overload<'a>(runs: &'a [Value], ceiling: &str, budget: &str, overload: &str) -> &'a Value {
    runs.iter()
        .find(|r| r["ceiling"] == ceiling && r["budget"] == budget && r["overload"] == overload)
        .unwrap_or_else(|| {
            panic!("no run with the {ceiling} ceiling, the budget {budget}, overload {overload}")
        })
}

#[test]
fn s2_the_metastable_scenario_prints_the_same_bytes_for_a_seed() {
    let table = simulate(&["--scenario", "metastable"]);
    assert_eq!(table, simulate(&["--scenario", "metastable"]));
    assert_ne!(
        table,
        simulate(&["--scenario", "metastable", "--seed", "7"]),
        "another seed, another run"
    );
    assert_eq!(metastable(&[]), metastable(&[]));
}

#[test]
fn d3_without_a_budget_retries_of_abandoned_work_keep_the_db_down_after_the_trigger() {
    let runs = metastable(&["--overload", "off"]);
    assert_eq!(runs.len(), 4);
    let share = |run: &Value, field: &str| run[field].as_f64().unwrap();
    for run in &runs {
        // Healthy at half its capacity, the db serves everyone before the trigger.
        assert!(share(run, "availability_before") > 0.99, "{run}");
        // Five times slower, it has less capacity than the calls need: its queue fills.
        assert_eq!(run["peak_queue"], run["queue"], "{run}");
    }
    // Callers that give up before a full queue's wait, as the original's ceiling does, leave
    // work the db still does; without a budget each retries it twice, more than the healthy
    // db can serve, so the queue never drains although the trigger is long over.
    let off = run(&runs, "original", "off");
    assert!(off["recovered_in_s"].is_null(), "{off}");
    assert!(share(off, "availability_after") < 0.5, "{off}");
    let after_s = (off["trigger"]["after_s"].as_f64().unwrap()
        + off["trigger"]["lasting_s"].as_f64().unwrap()) as usize;
    let shed_late: u64 = off["shed_per_second"].as_array().unwrap()[after_s + 30..]
        .iter()
        .map(|n| n.as_u64().unwrap())
        .sum();
    assert!(
        shed_late > 0,
        "half a minute after the trigger the queue still overflows"
    );
    // With the budget, retries are held near a tenth of the successes: the db drains.
    let on = run(&runs, "original", "on");
    assert!(on["recovered_in_s"].as_u64().is_some(), "{on}");
    assert!(share(on, "availability_after") > 0.9, "{on}");
    assert!(share(on, "worst_second_load") < share(off, "worst_second_load"));
}

#[test]
fn e7_a_ceiling_that_learns_from_its_cuts_waits_out_the_queue() {
    // Our ceiling rises with the attempts it cuts until they complete: the callers wait for
    // the work they queued instead of leaving it behind, so nothing feeds the loop and the db
    // recovers with the budget off as well.
    let runs = metastable(&[]);
    for budget in ["off", "on"] {
        let learning = run(&runs, "learning", budget);
        assert!(learning["recovered_in_s"].as_u64().is_some(), "{learning}");
        assert!(
            learning["availability_after"].as_f64().unwrap() > 0.9,
            "{learning}"
        );
    }
}

#[test]
fn d5_the_metastable_scenario_refuses_the_storms_flags() {
    for flag in [
        &["--hops", "3"][..],
        &["--rate", "100"],
        &["--fleet"],
        &["--brownout-slower", "2"],
        &["--ceiling-refresh", "75s"],
    ] {
        let output = Command::new(env!("CARGO_BIN_EXE_simulator"))
            .args(["--scenario", "metastable"])
            .args(flag)
            .output()
            .expect("the simulator runs");
        assert!(!output.status.success(), "{flag:?} was accepted");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains("cannot be used with") && stderr.contains(flag[0]),
            "{stderr}"
        );
    }
    // The flags it takes.
    let runs = metastable(&["--budget", "off", "--seed", "3", "--overload", "aimd"]);
    assert_eq!(
        runs.len(),
        2,
        "one budget, one overload setting, both ceilings"
    );
    assert!(runs
        .iter()
        .all(|r| r["budget"] == "off" && r["seed"] == 3 && r["overload"] == "aimd"));
    // The fleet has no overload rows.
    let output = Command::new(env!("CARGO_BIN_EXE_simulator"))
        .args(["--overload", "gradient", "--fleet"])
        .output()
        .expect("the simulator runs");
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("cannot be used with"));
}

#[test]
fn o1_o5_o7_through_a_long_fault_the_db_serves_near_its_capacity_and_nothing_healthy_is_lost() {
    // Five times slower, 12 workers serve about 77 of the 200 queries a second: at most
    // 38.7 % of the calls. Without overload control the queue fills with work whose callers
    // have left, and nearly every call fails while the fault lasts.
    for seed in ["42", "7"] {
        let runs = scenario("metastable-long", &["--budget", "on", "--seed", seed]);
        assert_eq!(runs.len(), 4, "two ceilings, overload off and on");
        let share = |run: &Value, field: &str| run[field].as_f64().unwrap();
        for ceiling in ["learning", "original"] {
            let off = with_overload(&runs, ceiling, "on", "off");
            let on = with_overload(&runs, ceiling, "on", "accumulation");
            assert_eq!(on["trigger"]["lasting_s"], 20.0);
            assert!(share(off, "availability_during") < 0.15, "{off}");
            // What the workers serve in the fault, and the calls that waited for room (O7)
            // served after it within their 10 s.
            assert!(share(on, "availability_during") > 0.37, "{on}");
            assert!(
                share(on, "availability_before") >= share(off, "availability_before"),
                "{on}"
            );
            assert!(
                on["recovered_in_s"].as_u64().is_some_and(|s| s <= 1),
                "{on}"
            );
            assert!(on["saturated"].as_u64().unwrap() > 0, "{on}");
            assert!(
                on["peak_queue"].as_u64().unwrap() < on["queue"].as_u64().unwrap(),
                "the queue never fills: {on}"
            );
        }
    }
}

#[test]
fn hg1_hg2_simulate_hedge_prints_latency_and_load_with_and_without_hedging() {
    let args = [
        "--hedge",
        "p95",
        "--duration",
        "40s",
        "--brownout-after",
        "10s",
        "--brownout-lasting",
        "20s",
        "--json",
    ];
    let stdout = simulate(&args);
    assert_eq!(
        stdout,
        simulate(&args),
        "the same seed, the same bytes (S2)"
    );
    let runs: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        runs.len(),
        8,
        "healthy and brownout × budget off and on × hedge none and p95"
    );
    let find = |weather: &str, budget: &str, hedge: &str| {
        runs.iter()
            .find(|r| r["weather"] == weather && r["budget"] == budget && r["hedge"] == hedge)
            .unwrap_or_else(|| panic!("no run {weather} {budget} {hedge}"))
    };
    let f = |run: &Value, key: &str| run[key].as_f64().unwrap();
    let (plain, hedged) = (find("healthy", "on", "none"), find("healthy", "on", "p95"));
    assert!(f(hedged, "latency_p999_ms") < f(plain, "latency_p999_ms"));
    assert!(f(hedged, "load_multiplier") > f(plain, "load_multiplier"));
    // The budget holds the brownout's hedges; without it they are the storm.
    let held = f(find("brownout", "on", "p95"), "amplification");
    let storm = f(find("brownout", "off", "p95"), "amplification");
    assert!(held <= 1.17 && storm > held, "{held} {storm}");

    for bad in ["p0", "p100", "0ms", "soon"] {
        let output = Command::new(env!("CARGO_BIN_EXE_simulator"))
            .args(["--hedge", bad])
            .output()
            .expect("the simulator runs");
        assert!(!output.status.success(), "--hedge {bad} was accepted");
        assert!(String::from_utf8_lossy(&output.stderr).contains("--hedge"));
    }
}
