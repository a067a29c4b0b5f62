//! Settings the chain cannot run with are refused at start with the reason (SPEC D5).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

/// Runs the demo with `args`, expecting it to refuse them: its exit code and what it said.
fn refused(args: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_demo"))
        .args(args)
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .output()
        .expect("the demo binary runs");
    assert_eq!(output.status.code(), Some(2), "{args:?}: {output:?}");
    assert!(output.stdout.is_empty(), "nothing ran: {output:?}");
    String::from_utf8(output.stderr).unwrap()
}

#[test]
fn d5_values_that_would_fail_every_request_are_refused_with_the_reason() {
    for (args, says) in [
        (
            &["--fault", "errors", "--fault-error-rate", "NaN"][..],
            "--fault-error-rate must be a share from 0 to 1",
        ),
        (
            &["--fault", "errors", "--fault-error-rate", "1.5"],
            "--fault-error-rate must be a share from 0 to 1",
        ),
        (
            &["--fault-error-rate", "0.5"],
            "--fault-error-rate sets the strength of another kind of fault than --fault slow",
        ),
        (
            &["--fault", "surge", "--fault-surge", "inf"],
            "--fault-surge must be a finite factor from 1",
        ),
        (
            &["--fault", "surge", "--fault-surge", "0"],
            "--fault-surge must be a finite factor from 1",
        ),
        (
            &["--fault", "throttle", "--fault-throttle-rps", "0"],
            "--fault-throttle-rps must be from 1",
        ),
        (
            &["--fault", "brownout", "--fault-slowdown", "NaN"],
            "--fault-slowdown must be a finite factor",
        ),
        (
            &["--fault", "stall", "--fault-slowdown", "2"],
            "--fault-slowdown sets the strength of another kind of fault than --fault stall",
        ),
        (&["--matrix", "--jobs", "0"], "--jobs must be from 1 to 16"),
        (&["--matrix", "--jobs", "17"], "--jobs must be from 1 to 16"),
        (
            &["--fault-slowdown", "inf"],
            "--fault-slowdown must be a finite factor",
        ),
        (
            &["--fault-slowdown=-1"],
            "--fault-slowdown must be a finite factor",
        ),
        (
            &["--fault-length", "18446744073709551615"],
            "--fault-length must be at most 86400 seconds",
        ),
        (&["--rps", "0"], "--rps must be at least 1"),
        (
            &["--user-timeout-ms", "0"],
            "--user-timeout-ms must be from 1",
        ),
        (&["--db-workers", "0"], "--db-workers must be from 1"),
        (&["--db-query-ms", "0"], "--db-query-ms must be from 1"),
        (&["--db-queue", "4294967295"], "--db-queue must be at most"),
        (&["db", "--db-workers", "0"], "--db-workers must be from 1"),
        (
            &[
                "backend",
                "--upstream",
                "http://127.0.0.1:1/",
                "--attempts",
                "0",
            ],
            "--attempts must be at least 1",
        ),
        (&["--attempts", "0"], "--attempts must be at least 1"),
        (
            &["db", "--fault", "errors", "--fault-error-rate=-0.5"],
            "--fault-error-rate must be a share",
        ),
        (&["--fleet", "0"], "--fleet takes 1 to 200 client processes"),
        (
            &["--fleet", "3", "--fleet-failing", "1"],
            "--fleet-failing takes a share from 0 to below 1",
        ),
        (
            &["--fleet", "3", "--fleet-seconds", "5"],
            "--fleet-seconds takes 10 to 600 seconds",
        ),
        (&["--fleet-rps", "3"], "--fleet <N>"),
        (&["--fleet", "3", "--matrix"], "cannot be used with"),
    ] {
        let said = refused(args);
        assert!(said.contains(says), "{args:?}: {said}");
    }
}

#[test]
fn d5_an_upstream_that_is_not_an_http_url_is_refused() {
    for upstream in ["not a url", "ftp://127.0.0.1/", "/relative"] {
        let said = refused(&["backend", "--upstream", upstream]);
        assert!(said.contains("--upstream"), "{upstream}: {said}");
    }
}

#[test]
fn d5_a_hop_refuses_the_flags_it_would_ignore() {
    for (args, flag) in [
        (&["db", "--duration", "5"][..], "--duration"),
        (&["db", "--budget", "off"], "--budget"),
        (&["db", "--attempts", "2"], "--attempts"),
        (
            &["backend", "--upstream", "http://127.0.0.1:1/", "--rps", "5"],
            "--rps",
        ),
        (
            &[
                "backend",
                "--upstream",
                "http://127.0.0.1:1/",
                "--fault-start",
                "1",
            ],
            "--fault-start",
        ),
        (
            &["frontend", "--upstream", "http://127.0.0.1:1/", "--json"],
            "--json",
        ),
        (
            &[
                "frontend",
                "--upstream",
                "http://127.0.0.1:1/",
                "--plot",
                "x.svg",
            ],
            "--plot",
        ),
    ] {
        let said = refused(args);
        assert!(
            said.contains(&format!("unexpected argument '{flag}'")),
            "{args:?}: {said}"
        );
    }
}

#[test]
fn p3_the_matrix_refuses_what_it_sets_itself_and_faults_it_does_not_know() {
    for (args, says) in [
        (&["--matrix", "--fault", "stall"][..], "cannot be used with"),
        (&["--matrix", "--duration", "5"], "cannot be used with"),
        (&["--matrix", "--compare"], "cannot be used with"),
        (&["--faults", "slow"], "required"),
        (
            &["--matrix", "--faults", "slow,melt"],
            "invalid value 'melt'",
        ),
        (&["--fault", "melt"], "invalid value 'melt'"),
    ] {
        let said = refused(args);
        assert!(said.contains(says), "{args:?}: {said}");
    }
}

#[test]
fn d4_one_budget_and_the_comparison_are_one_or_the_other() {
    let said = refused(&["--budget", "on", "--compare"]);
    assert!(said.contains("cannot be used with"), "{said}");
}

#[test]
fn p1_rows_are_picked_by_name_and_an_unknown_or_empty_pick_is_refused() {
    let said = refused(&["--stacks", "nresilience,retry-everything"]);
    assert!(
        said.contains("invalid value 'retry-everything'") && said.contains("reqwest-retry-1s"),
        "{said}"
    );
    let said = refused(&["--stacks="]);
    assert!(
        said.contains("a value is required for '--stacks <STACKS>'"),
        "{said}"
    );
    for other in [&["--budget", "on"][..], &["--compare"]] {
        let mut args = vec!["--stacks", "tower-1s"];
        args.extend_from_slice(other);
        let said = refused(&args);
        assert!(said.contains("cannot be used with"), "{args:?}: {said}");
    }
}
