//! A demo hop run as its own process, for the tests that run the chain as processes.

// Each test binary that includes this module uses part of it.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, ChildStdout, Command, Stdio};

/// A hop running as its own process, and its stdout. A hop a failed test did not stop is
/// killed when dropped, so no process outlives its test.
pub(crate) struct Hop {
    name: &'static str,
    child: Child,
    stdout: BufReader<ChildStdout>,
}

impl Drop for Hop {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

impl Hop {
    /// Starts `demo NAME` on a port of its own choosing, with db answering every request
    /// `500`, and waits for the URL it prints.
    pub(crate) fn start(name: &'static str, upstream: Option<&str>) -> (Self, String) {
        Self::start_on(name, "127.0.0.1:0", upstream)
    }

    /// Like [`start`](Self::start), listening on `listen`.
    pub(crate) fn start_on(
        name: &'static str,
        listen: &str,
        upstream: Option<&str>,
    ) -> (Self, String) {
        Self::spawn(name, Self::command(name, listen, upstream))
    }

    /// The command [`start_on`](Self::start_on) runs, for a test to add to: no OTLP
    /// endpoint from the environment the tests run in.
    pub(crate) fn command(name: &str, listen: &str, upstream: Option<&str>) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_demo"));
        command.args([name, "--listen", listen]);
        match upstream {
            Some(upstream) => command.args(["--upstream", upstream]),
            None => command.args([
                "--fault",
                "errors",
                "--fault-start",
                "0",
                "--fault-length",
                "3600",
                "--fault-error-rate",
                "1.0",
            ]),
        };
        command
            .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
            .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
            .env_remove("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")
            .stdout(Stdio::piped());
        command
    }

    /// Runs `command` as the hop `name` and waits for the URL it prints.
    pub(crate) fn spawn(name: &'static str, mut command: Command) -> (Self, String) {
        let mut child = command.spawn().expect("the demo binary runs");
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        let url = line
            .split_whitespace()
            .find(|word| word.starts_with("http://"))
            .unwrap_or_else(|| panic!("{name} printed {line:?}"))
            .to_owned();
        (
            Self {
                name,
                child,
                stdout,
            },
            url,
        )
    }

    /// Interrupts the hop, checks it exits cleanly, and returns its summary line.
    pub(crate) fn stop(self) -> String {
        let name = self.name;
        let prefix = format!("{name}: ");
        self.stop_lines()
            .into_iter()
            .rfind(|line| line.starts_with(&prefix))
            .unwrap_or_else(|| panic!("{name} printed no summary"))
    }

    /// Interrupts the hop, checks it exits cleanly, and returns what it printed after its
    /// first line.
    pub(crate) fn stop_lines(mut self) -> Vec<String> {
        let interrupted = Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(interrupted.success());
        let status = self.child.wait().unwrap();
        assert!(status.success(), "{} exited with {status}", self.name);
        self.stdout.by_ref().lines().map(Result::unwrap).collect()
    }
}
