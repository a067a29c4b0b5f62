//! The demo's default run (SPEC D4): budgets off then on, side by side, and the chart of both.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

use serde_json::Value;

#[test]
fn d4_without_a_budget_flag_the_demo_runs_budgets_off_then_on_and_draws_both() {
    let chart =
        std::env::temp_dir().join(format!("nresilience-compare-{}.svg", std::process::id()));
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
        .args(["--json", "--plot"])
        .arg(&chart)
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .output()
        .expect("the demo binary runs");
    assert!(output.status.success(), "{output:?}");
    let runs: Value = serde_json::from_slice(&output.stdout).unwrap();
    let runs = runs.as_array().expect("one summary per run");
    let budgets: Vec<&str> = runs
        .iter()
        .map(|run| run["budget"].as_str().unwrap())
        .collect();
    assert_eq!(budgets, ["off", "on"]);
    for run in runs {
        let seconds = run["seconds"].as_array().unwrap();
        assert_eq!(seconds.len(), 2, "{run}");
        let calls: u64 = seconds.iter().map(|s| s["calls"].as_u64().unwrap()).sum();
        assert_eq!(calls, run["calls"].as_u64().unwrap(), "{run}");
        assert!(run["success"]["before"].as_f64().is_some(), "{run}");
        assert!(run["db_peak_queue"].as_u64().is_some(), "{run}");
    }
    let svg = std::fs::read_to_string(&chart).expect("the chart is written");
    let _ = std::fs::remove_file(&chart);
    assert!(svg.starts_with("<svg"), "{}", &svg[..svg.len().min(80)]);
    assert!(svg.contains("budgets off") && svg.contains("budgets on"));
}
