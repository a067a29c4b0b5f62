//! The demo's rows side by side (SPEC D4, P1): nresilience's budgets off then on, and the
//! peer libraries' rows, each named in the JSON and drawn in the chart.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

use serde_json::Value;

/// Runs the demo for two seconds at 20 calls a second, db slow in the second one, with
/// `rows` (flags that pick them), and returns the JSON summaries and the chart.
fn run(rows: &[&str]) -> (Vec<Value>, String) {
    let chart = std::env::temp_dir().join(format!(
        "nresilience-compare-{}-{}.svg",
        std::process::id(),
        rows.join("-")
    ));
    let output = Command::new(env!("CARGO_BIN_EXE_demo"))
        .args([
            "--duration",
            "2",
            "--rps",
            "20",
            "--fault-start",
            "1",
            "--fault-length",
            "1",
        ])
        .args(rows)
        .args(["--json", "--plot"])
        .arg(&chart)
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .output()
        .expect("the demo binary runs");
    assert!(output.status.success(), "{output:?}");
    let runs: Value = serde_json::from_slice(&output.stdout).unwrap();
    let runs = runs.as_array().expect("one summary per run").clone();
    for run in &runs {
        let seconds = run["seconds"].as_array().unwrap();
        assert_eq!(seconds.len(), 2, "{run}");
        let calls: u64 = seconds.iter().map(|s| s["calls"].as_u64().unwrap()).sum();
        assert_eq!(calls, run["calls"].as_u64().unwrap(), "{run}");
        assert!(run["success"]["before"].as_f64().is_some(), "{run}");
        assert!(run["db_peak_queue"].as_u64().is_some(), "{run}");
        assert!(run["db_refused"].as_u64().is_some(), "{run}");
    }
    let svg = std::fs::read_to_string(&chart).expect("the chart is written");
    let _ = std::fs::remove_file(&chart);
    assert!(svg.starts_with("<svg"), "{}", &svg[..svg.len().min(80)]);
    (runs, svg)
}

fn stacks(runs: &[Value]) -> Vec<&str> {
    runs.iter()
        .map(|run| run["stack"].as_str().unwrap())
        .collect()
}

#[test]
fn d4_compare_runs_nresilience_with_budgets_off_then_on_and_draws_both() {
    let (runs, svg) = run(&["--compare"]);
    assert_eq!(stacks(&runs), ["nresilience-no-budget", "nresilience"]);
    for run in &runs {
        // Each row names its settings, and which are the library's defaults (P4).
        let settings = run["settings"]["settings"].as_array().unwrap();
        let budget = settings
            .iter()
            .find(|s| s["name"] == "retry budget")
            .unwrap();
        let off = run["stack"] == "nresilience-no-budget";
        assert_eq!(budget["value"], if off { "off" } else { "on" }, "{run}");
        assert_eq!(
            budget["source"],
            if off { "changed" } else { "default" },
            "{run}"
        );
        assert!(
            run["budget_refusals"]["backend"].as_u64().is_some(),
            "{run}"
        );
    }
    assert!(svg.contains("nresilience-no-budget:") && svg.contains("nresilience:"));
}

#[test]
fn p1_the_peer_rows_run_the_same_chain_and_name_their_stack() {
    let rows = "none,reqwest-1s,reqwest-retry-5s,tower-1s,tower-resilience-5s";
    let (runs, svg) = run(&["--stacks", rows]);
    assert_eq!(stacks(&runs), rows.split(',').collect::<Vec<_>>());
    for run in &runs {
        let stack = run["stack"].as_str().unwrap();
        assert!(svg.contains(&format!("{stack}:")), "{stack} is drawn");
        // A peer's row has no nresilience settings and no budget refusals to report.
        assert!(
            run["settings"]["settings"].as_array().unwrap().is_empty()
                && run["budget_refusals"].is_null(),
            "{run}"
        );
        assert!(
            !run["settings"]["description"].as_str().unwrap().is_empty(),
            "{run}"
        );
        // Healthy before the fault: every call reached db through the peer's hops.
        assert_eq!(run["success"]["before"].as_f64(), Some(1.0), "{run}");
        assert!(run["attempts"]["db"].as_u64().unwrap() >= 20, "{run}");
    }
}
