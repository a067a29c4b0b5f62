//! `demo simulate` as users run it: the same seed prints the same bytes (S2), and the fleet
//! mode shows each client held by its own budget (S1, B1, B2).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

use serde_json::Value;

fn simulate(args: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_demo"))
        .arg("simulate")
        .args(args)
        .output()
        .expect("the demo binary runs");
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

#[test]
fn s1_the_fleet_is_held_near_one_plus_the_fraction() {
    let stdout = simulate(&[
        "--fleet",
        "--failing",
        "0.2",
        "--duration",
        "60s",
        "--brownout-after",
        "10m",
        "--json",
    ]);
    let runs: Vec<Value> = stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let budgets: Vec<&str> = runs.iter().map(|r| r["budget"].as_str().unwrap()).collect();
    assert_eq!(budgets, ["off", "on", "on, no floor"]);
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
}
