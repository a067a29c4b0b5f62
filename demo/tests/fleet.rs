//! `demo --fleet` end to end (F1–F3, F5): twenty client processes, each an nresilience
//! `Client` with the library's defaults, against one server hop that fails one request in
//! five fast; with the server coordinating them its retries fall towards the share it
//! accepts, where each client's budget alone lets them retry every failure.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

use serde_json::Value;

#[test]
fn f5_a_fleet_of_processes_retries_less_when_its_server_coordinates_it() {
    let output = Command::new(env!("CARGO_BIN_EXE_demo"))
        .args(["--fleet", "20", "--fleet-seconds", "10", "--json"])
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .output()
        .expect("the demo binary runs");
    assert!(output.status.success(), "{output:?}");
    let runs: Value = serde_json::from_slice(&output.stdout).unwrap();
    let share = |run: &Value| run["retries"].as_f64().unwrap() / run["firsts"].as_f64().unwrap();
    let [alone, coordinated] = [&runs[0], &runs[1]];
    assert_eq!(alone["coordinated"], false);
    assert_eq!(coordinated["coordinated"], true);
    for run in [alone, coordinated] {
        // Twenty processes, 5 calls a second for 10 s: every call's first attempt arrives.
        assert_eq!(run["firsts"], 1_000, "{run}");
        assert_eq!(run["calls"]["made"], 1_000, "{run}");
    }
    // Each client banks 30 tokens and refills 3 a second: alone, they retry every failure.
    assert!(share(alone) > 0.2, "{runs}");
    assert!(
        share(coordinated) < share(alone) - 0.05,
        "coordinated {:.3}, alone {:.3}: {runs}",
        share(coordinated),
        share(alone)
    );
}
