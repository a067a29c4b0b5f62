//! The users: a steady rate of calls to the frontend, each with a deadline, counted per
//! second; and the faults, each with when it was on.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http_body_util::BodyExt;
use nresilience_client::Client;
use nresilience_core::{RetryPolicy, StopReason};
use tokio::sync::watch;

use super::{HANG_GRACE, HEALTHY, PATIENCE, RATE, USER_DEADLINE};

/// How one user's call ended.
#[derive(Debug, Clone, Copy)]
enum Outcome {
    Succeeded,
    /// An answer that was not a success.
    Status,
    /// No answer: a connection error, or a body cut short.
    Transport,
    /// The client gave up at the deadline.
    Deadline,
    /// Still open `HANG_GRACE` past the deadline.
    Hung,
}

/// Calls started in one second.
#[derive(Debug, Default, Clone)]
pub(super) struct Second {
    pub(super) sent: u64,
    succeeded: u64,
    /// The longest a call took, milliseconds.
    pub(super) slowest_ms: u64,
}

impl Second {
    pub(super) fn ratio(&self) -> Option<f64> {
        (self.sent > 0).then(|| self.succeeded as f64 / self.sent as f64)
    }
}

/// The users' counts, per second of the call's start.
#[derive(Debug, Default)]
pub(super) struct Tally {
    pub(super) seconds: Vec<Second>,
    pub(super) sent: u64,
    pub(super) succeeded: u64,
    pub(super) statuses: u64,
    pub(super) transport: u64,
    pub(super) deadline: u64,
    pub(super) hung: u64,
    /// When the last call started, in seconds from the first.
    pub(super) ended: f64,
}

impl Tally {
    pub(super) fn failed(&self) -> u64 {
        self.statuses + self.transport + self.deadline
    }

    fn second(&mut self, second: usize) -> &mut Second {
        if self.seconds.len() <= second {
            self.seconds.resize(second + 1, Second::default());
        }
        &mut self.seconds[second]
    }

    /// The lowest success of the seconds from `start` to `end`.
    pub(super) fn lowest(&self, start: f64, end: f64) -> f64 {
        (start.floor() as usize..=end.floor() as usize)
            .filter_map(|second| self.seconds.get(second).and_then(Second::ratio))
            .fold(1.0, f64::min)
    }

    /// How long after `end` success was back at ≥ 99 % for good — every second from then
    /// until a second before `next` (whose calls the next fault may meet) — or `None`.
    pub(super) fn recovery(&self, end: f64, next: f64) -> Option<f64> {
        let first = end.floor() as usize;
        let last = (next.floor() as usize).checked_sub(2)?;
        let healthy = |second: usize| {
            self.seconds
                .get(second)
                .and_then(Second::ratio)
                .is_none_or(|ratio| ratio >= HEALTHY)
        };
        let mut back = None;
        for second in (first..=last).rev() {
            if !healthy(second) {
                break;
            }
            back = Some(second);
        }
        back.map(|second| (second as f64 - end).max(0.0))
    }
}

/// A fault and when it was on, in seconds from the first call.
pub(super) struct Fault {
    pub(super) name: &'static str,
    pub(super) start: f64,
    pub(super) end: f64,
    /// The same, as instants.
    pub(super) on: Instant,
    pub(super) off: Instant,
}

impl Fault {
    pub(super) fn covers(&self, second: usize) -> bool {
        let second = second as f64;
        second + 1.0 > self.start && second < self.end
    }
}

/// The users: `RATE` calls a second to the frontend, each with one attempt and a deadline.
pub(super) struct Load {
    started: Instant,
    tally: Arc<Mutex<Tally>>,
    stop: watch::Sender<bool>,
    driver: tokio::task::JoinHandle<()>,
}

impl Load {
    pub(super) fn start(url: String) -> Self {
        let started = Instant::now();
        let tally = Arc::new(Mutex::new(Tally::default()));
        let (stop, mut stopped) = watch::channel(false);
        // Users who do not retry, and wait at most `USER_DEADLINE`.
        let users = Client::new(
            RetryPolicy::builder()
                .max_attempts(1)
                .attempt_ceiling(None)
                .deadline(Some(USER_DEADLINE))
                .attempt_timeout(Some(USER_DEADLINE))
                .build()
                .unwrap(),
        );
        let driver = {
            let tally = Arc::clone(&tally);
            tokio::spawn(async move {
                let mut calls = tokio::task::JoinSet::new();
                let mut ticker = tokio::time::interval(Duration::from_micros(1_000_000 / RATE));
                // A steady rate: a tick missed on a busy machine is skipped, not made up
                // in a burst. Only the calls sent are counted.
                ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
                loop {
                    tokio::select! {
                        _ = ticker.tick() => {}
                        _ = stopped.changed() => break,
                    }
                    let second = started.elapsed().as_secs() as usize;
                    {
                        let mut tally = tally.lock().unwrap();
                        tally.sent += 1;
                        tally.second(second).sent += 1;
                        tally.ended = started.elapsed().as_secs_f64();
                    }
                    let (users, url, tally) = (users.clone(), url.clone(), Arc::clone(&tally));
                    calls.spawn(async move {
                        let sent = Instant::now();
                        let outcome =
                            tokio::time::timeout(USER_DEADLINE + HANG_GRACE, call(&users, &url))
                                .await
                                .unwrap_or(Outcome::Hung);
                        let took = sent.elapsed().as_millis() as u64;
                        let mut tally = tally.lock().unwrap();
                        let slowest = &mut tally.second(second).slowest_ms;
                        *slowest = (*slowest).max(took);
                        match outcome {
                            Outcome::Succeeded => {
                                tally.succeeded += 1;
                                tally.second(second).succeeded += 1;
                            }
                            Outcome::Status => tally.statuses += 1,
                            Outcome::Transport => tally.transport += 1,
                            Outcome::Deadline => tally.deadline += 1,
                            Outcome::Hung => tally.hung += 1,
                        }
                    });
                    while let Some(done) = calls.try_join_next() {
                        done.expect("a user's call panicked");
                    }
                }
                // Every call ends: at its deadline, or `HANG_GRACE` later counted as hung.
                while let Some(done) = calls.join_next().await {
                    done.expect("a user's call panicked");
                }
            })
        };
        Self {
            started,
            tally,
            stop,
            driver,
        }
    }

    /// Seconds since the first call.
    pub(super) fn now(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }

    /// Runs `fault` (which turns a fault on, waits, and turns it off) and says when it was on.
    pub(super) async fn fault(
        &self,
        name: &'static str,
        fault: impl std::future::Future<Output = ()>,
    ) -> Fault {
        let (on, start) = (Instant::now(), self.now());
        println!("{start:>5.1} s  {name}");
        fault.await;
        let (off, end) = (Instant::now(), self.now());
        println!("{end:>5.1} s  over");
        Fault {
            name,
            start,
            end,
            on,
            off,
        }
    }

    /// Stops sending, waits for every call to end, and returns the count.
    pub(super) async fn stop(self) -> Tally {
        self.stop.send_replace(true);
        tokio::time::timeout(USER_DEADLINE + HANG_GRACE + PATIENCE, self.driver)
            .await
            .expect("every user's call ended")
            .expect("the load generator ran to the end");
        std::mem::take(&mut *self.tally.lock().unwrap())
    }
}

/// One user's call: the answer and its body within the deadline.
async fn call(users: &Client, url: &str) -> Outcome {
    let started = Instant::now();
    match users.get(url).await {
        Ok(response) => {
            let status = response.status();
            let left = USER_DEADLINE.saturating_sub(started.elapsed());
            match tokio::time::timeout(left, response.into_body().collect()).await {
                Ok(Ok(_)) if status.is_success() => Outcome::Succeeded,
                Ok(Ok(_)) => Outcome::Status,
                Ok(Err(_)) => Outcome::Transport,
                Err(_) => Outcome::Deadline,
            }
        }
        Err(error) if error.reason() == StopReason::DeadlineExceeded => Outcome::Deadline,
        Err(_) => Outcome::Transport,
    }
}
