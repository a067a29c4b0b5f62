//! The hops: each a process of its own, its output read as it prints it, stopped and killed.

use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle as ThreadHandle;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use super::users::Fault;
use super::{count, PATIENCE};

/// What a process printed, line by line, as it prints it.
struct Lines {
    lines: Mutex<Vec<String>>,
    closed: AtomicBool,
    changed: watch::Sender<()>,
}

impl Lines {
    /// Reads `stream` to its end on a thread of its own (a pipe left unread would block the
    /// hop once full).
    fn pump(stream: impl Read + Send + 'static) -> (Arc<Self>, ThreadHandle<()>) {
        let lines = Arc::new(Self {
            lines: Mutex::default(),
            closed: AtomicBool::new(false),
            changed: watch::Sender::new(()),
        });
        let pumped = Arc::clone(&lines);
        let thread = std::thread::spawn(move || {
            let mut stream = BufReader::new(stream);
            let mut line = Vec::new();
            while matches!(stream.read_until(b'\n', &mut line), Ok(n) if n > 0) {
                let text = String::from_utf8_lossy(&line).trim_end().to_owned();
                pumped.lines.lock().unwrap().push(text);
                pumped.changed.send_replace(());
                line.clear();
            }
            pumped.closed.store(true, Ordering::Release);
            pumped.changed.send_replace(());
        });
        (lines, thread)
    }

    fn len(&self) -> usize {
        self.lines.lock().unwrap().len()
    }

    fn snapshot(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }

    /// The first line from index `from` on that `wanted` accepts, waiting up to `PATIENCE`
    /// for it; `None` if the stream ends or the time runs out first.
    async fn wait_for(&self, from: usize, wanted: impl Fn(&str) -> bool) -> Option<String> {
        let mut changed = self.changed.subscribe();
        let give_up = tokio::time::Instant::now() + PATIENCE;
        loop {
            if let Some(line) = self.lines.lock().unwrap()[from..]
                .iter()
                .find(|line| wanted(line))
            {
                return Some(line.clone());
            }
            if self.closed.load(Ordering::Acquire) {
                return None;
            }
            match tokio::time::timeout_at(give_up, changed.changed()).await {
                Ok(Ok(())) => {}
                _ => return None,
            }
        }
    }
}

/// A hop running as its own process.
pub(super) struct Hop {
    name: &'static str,
    child: Option<Child>,
    pub(super) addr: SocketAddr,
    stdout: Arc<Lines>,
    stderr: Arc<Lines>,
    pumps: Vec<ThreadHandle<()>>,
    started: Instant,
}

/// A hop that has ended: what it said.
pub(super) struct Ended {
    pub(super) name: &'static str,
    pub(super) summary: String,
    stdout: Vec<String>,
    /// Lines that report a panic.
    pub(super) panics: Vec<String>,
    /// How long it ran.
    pub(super) seconds: f64,
    /// When it was started.
    started: Instant,
}

impl Ended {
    /// What the hop received each second, by its per-second lines: (second, requests).
    fn ticks(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.stdout.iter().filter_map(|line| {
            let second = line.strip_prefix("t=")?.trim_start().split('s').next()?;
            Some((second.parse().ok()?, count(line, "requests")))
        })
    }

    /// What the hop received by its per-second lines.
    pub(super) fn requests_in_ticks(&self) -> u64 {
        self.ticks().map(|(_, requests)| requests).sum()
    }

    /// What the hop received in the seconds (of its own clock, which starts as it starts)
    /// that overlap `fault`, half a second either way: more than it received during it.
    pub(super) fn requests_during(&self, fault: &Fault) -> u64 {
        let from = fault
            .on
            .saturating_duration_since(self.started)
            .as_secs_f64()
            - 0.5;
        let to = fault
            .off
            .saturating_duration_since(self.started)
            .as_secs_f64()
            + 0.5;
        self.ticks()
            .filter(|&(second, _)| (second + 1) as f64 > from && (second as f64) < to)
            .map(|(_, requests)| requests)
            .sum()
    }
}

impl Hop {
    /// Starts `demo NAME --listen LISTEN ARGS…` and waits for the address it listens on;
    /// what it printed if it ended first.
    pub(super) async fn start(
        name: &'static str,
        listen: &str,
        args: &[&str],
    ) -> Result<Self, String> {
        let mut child = Command::new(env!("CARGO_BIN_EXE_demo"))
            .args([name, "--listen", listen])
            .args(args)
            .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
            .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
            // Warnings only, as a hop logs by default.
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the demo binary runs");
        let (stdout, out_pump) = Lines::pump(child.stdout.take().unwrap());
        let (stderr, err_pump) = Lines::pump(child.stderr.take().unwrap());
        let mut hop = Self {
            name,
            child: Some(child),
            addr: "127.0.0.1:0".parse().unwrap(),
            stdout,
            stderr,
            pumps: vec![out_pump, err_pump],
            started: Instant::now(),
        };
        let Some(line) = hop
            .stdout
            .wait_for(0, |line| line.contains("listening on http://"))
            .await
        else {
            hop.kill_now();
            return Err(format!(
                "{name} did not start: {:?} {:?}",
                hop.stdout.snapshot(),
                hop.stderr.snapshot()
            ));
        };
        hop.addr = line
            .split("http://")
            .nth(1)
            .and_then(|rest| rest.trim_end_matches('/').parse().ok())
            .unwrap_or_else(|| panic!("{name} printed {line:?}"));
        Ok(hop)
    }

    /// Starts a hop again on the address it had: the port may take a moment to be free.
    pub(super) async fn restart(name: &'static str, listen: &str, args: &[&str]) -> Self {
        let mut failures = Vec::new();
        for _ in 0..10 {
            match Self::start(name, listen, args).await {
                Ok(hop) => return hop,
                Err(failure) => failures.push(failure),
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        panic!("{name} did not start again on {listen}: {failures:?}");
    }

    /// A hop that is not running (while db is dead).
    pub(super) fn placeholder(name: &'static str) -> Self {
        let (stdout, _) = Lines::pump(std::io::empty());
        let (stderr, _) = Lines::pump(std::io::empty());
        Self {
            name,
            child: None,
            addr: "127.0.0.1:0".parse().unwrap(),
            stdout,
            stderr,
            pumps: Vec::new(),
            started: Instant::now(),
        }
    }

    pub(super) fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }

    fn pid(&self) -> u32 {
        self.child.as_ref().expect("the hop runs").id()
    }

    /// Waits for the hop's next per-second line.
    pub(super) async fn next_tick(&self) {
        let from = self.stdout.len();
        self.stdout
            .wait_for(from, |line| line.starts_with("t="))
            .await
            .unwrap_or_else(|| panic!("{} printed no line in {PATIENCE:?}", self.name));
    }

    /// Interrupts the hop, checks that it exits cleanly and in time, and returns what it said.
    pub(super) async fn stop(mut self) -> Ended {
        let interrupted = Command::new("kill")
            .args(["-INT", &self.pid().to_string()])
            .status()
            .unwrap();
        assert!(interrupted.success());
        let status = self.wait().await;
        assert!(
            status.success(),
            "{} exited with {status} on SIGINT",
            self.name
        );
        let ended = self.ended();
        assert!(
            !ended.summary.is_empty(),
            "{} printed no summary: {:?}",
            ended.name,
            ended.stdout.last()
        );
        ended
    }

    /// Kills the hop with SIGKILL and returns what it said until then.
    pub(super) async fn kill(mut self) -> Ended {
        self.child.as_mut().unwrap().kill().unwrap();
        self.wait().await;
        self.ended()
    }

    /// Waits for the process to end, at most `PATIENCE` (a stop drains for up to 10 s).
    async fn wait(&mut self) -> std::process::ExitStatus {
        let give_up = Instant::now() + PATIENCE;
        loop {
            if let Some(status) = self.child.as_mut().unwrap().try_wait().unwrap() {
                return status;
            }
            if Instant::now() > give_up {
                self.kill_now();
                panic!("{} did not exit within {PATIENCE:?}", self.name);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// What an ended hop printed, once its pipes are read to the end.
    fn ended(mut self) -> Ended {
        self.child = None;
        for pump in self.pumps.drain(..) {
            pump.join().unwrap();
        }
        let stdout = self.stdout.snapshot();
        let prefix = format!("{}: ", self.name);
        let summary = stdout
            .iter()
            .rfind(|line| line.starts_with(&prefix))
            .cloned()
            .unwrap_or_default();
        let panics = stdout
            .iter()
            .chain(&self.stderr.snapshot())
            .filter(|line| line.contains("panicked"))
            .cloned()
            .collect();
        Ended {
            name: self.name,
            summary,
            stdout,
            panics,
            seconds: self.started.elapsed().as_secs_f64(),
            started: self.started,
        }
    }

    fn kill_now(&mut self) {
        if let Some(child) = self.child.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
        self.child = None;
    }
}

impl Drop for Hop {
    /// A test that fails half-way leaves no hop running.
    fn drop(&mut self) {
        self.kill_now();
    }
}

/// The three hops while the test runs.
pub(super) struct Hops {
    pub(super) frontend: Hop,
    pub(super) backend: Hop,
    pub(super) db: Hop,
    pub(super) killed_db: Option<Ended>,
}

impl Hops {
    /// Each hop's resident set, KiB: frontend, backend, db.
    pub(super) fn rss(&self) -> [u64; 3] {
        [&self.frontend, &self.backend, &self.db].map(|hop| rss_kib(hop.pid()))
    }
}

/// A process's resident set size, KiB, from /proc/PID/status.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no VmRSS in /proc/{pid}/status"))
}
