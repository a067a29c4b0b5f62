//! What goes wrong, and when: the kinds of fault a chain meets, each made real inside db (or,
//! for a surge, in the users' load), with its window and its strength (P3).

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The kinds of fault, as `--fault` spells them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FaultKind {
    /// Queries take F× as long (`--fault-slowdown`, 5); db's workers and queue as always, so
    /// a queue builds once they cannot keep up.
    Slow,
    /// A share P of queries (`--fault-error-rate`, 0.2) is answered `500` at once; db's
    /// capacity is untouched, so a retry can succeed.
    Errors,
    /// db takes queries in and queues them but finishes none until the window ends.
    Stall,
    /// db's listener is closed and its connections dropped (connections refused), then it
    /// listens on the same port again, in the same process.
    Down,
    /// The users call F× as often (`--fault-surge`, 3); db is unchanged: overload from demand.
    Surge,
    /// Queries take F× as long (`--fault-slowdown`, 20), and db has no capacity limit for the
    /// whole run: latency rises, no queue builds, throughput keeps pace.
    Brownout,
    /// Healthy, with a heavy-tailed query time for the whole run: `--db-query-ms` at the
    /// median, ten times it at the 99th percentile (log-normal); the window is not used.
    Tail,
    /// Above R queries a second (`--fault-throttle-rps`, 100), db answers `429` with
    /// `Retry-After: 1` at once instead of queueing.
    Throttle,
}

impl FaultKind {
    /// Every kind, in the order the matrix shows them.
    pub const ALL: [Self; 8] = [
        Self::Slow,
        Self::Errors,
        Self::Stall,
        Self::Down,
        Self::Surge,
        Self::Brownout,
        Self::Tail,
        Self::Throttle,
    ];

    /// Its name, as `--fault` spells it.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Slow => "slow",
            Self::Errors => "errors",
            Self::Stall => "stall",
            Self::Down => "down",
            Self::Surge => "surge",
            Self::Brownout => "brownout",
            Self::Tail => "tail",
            Self::Throttle => "throttle",
        }
    }

    /// The flag that sets its strength and the range it takes, if the kind has one.
    #[must_use]
    pub const fn strength(self) -> Option<Strength> {
        const SLOWDOWN: Strength = Strength {
            flag: "--fault-slowdown",
            default: 5.0,
            range: (1.0, 1_000.0),
            must_be: "a finite factor from 1 (no slowdown) to 1000",
        };
        match self {
            Self::Slow => Some(SLOWDOWN),
            Self::Brownout => Some(Strength {
                default: 20.0,
                ..SLOWDOWN
            }),
            Self::Errors => Some(Strength {
                flag: "--fault-error-rate",
                default: 0.2,
                range: (0.0, 1.0),
                must_be: "a share from 0 to 1",
            }),
            Self::Surge => Some(Strength {
                flag: "--fault-surge",
                default: 3.0,
                range: (1.0, 100.0),
                must_be: "a finite factor from 1 (no surge) to 100",
            }),
            Self::Throttle => Some(Strength {
                flag: "--fault-throttle-rps",
                default: 100.0,
                range: (1.0, 1_000_000.0),
                must_be: "from 1 to 1000000 queries a second",
            }),
            Self::Stall | Self::Down | Self::Tail => None,
        }
    }
}

/// How strong a kind of fault is: the flag that says it, what it is without the flag, and
/// the values it may take.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Strength {
    /// The flag.
    pub flag: &'static str,
    /// The strength without the flag.
    pub default: f64,
    /// The lowest and highest value it takes.
    pub range: (f64, f64),
    /// The range in words, for the refusal.
    pub must_be: &'static str,
}

/// db's fault: its kind, its window and its strength.
#[derive(Debug, Clone, Copy, PartialEq, clap::Args, Serialize, Deserialize)]
pub struct FaultArgs {
    /// What goes wrong in the fault's window, made real in db (a surge: in the users' load).
    #[arg(long, value_enum, default_value_t = FaultKind::Slow)]
    pub fault: FaultKind,
    /// When the fault starts, in seconds from db's start.
    #[arg(long, default_value_t = 5)]
    pub fault_start: u64,
    /// How long the fault lasts, in seconds.
    #[arg(long, default_value_t = 5)]
    pub fault_length: u64,
    /// slow, brownout: how many times longer a query takes during the fault, from 1 to 1000.
    /// Defaults to 5 for slow, 20 for brownout.
    #[arg(long)]
    pub fault_slowdown: Option<f64>,
    /// errors: the share of queries answered 500 during the fault, from 0 to 1. Defaults
    /// to 0.2.
    #[arg(long)]
    pub fault_error_rate: Option<f64>,
    /// surge: how many times as often the users call during the fault, from 1 to 100.
    /// Defaults to 3.
    #[arg(long)]
    pub fault_surge: Option<f64>,
    /// throttle: the queries a second db serves during the fault before it answers 429, from
    /// 1 to 1000000. Defaults to 100.
    #[arg(long)]
    pub fault_throttle_rps: Option<u32>,
}

impl Default for FaultArgs {
    /// db's fault as `demo` runs it when given no flag: 5× slower from 5 s for 5 s.
    fn default() -> Self {
        super::args::DbArgs::default().fault
    }
}

/// The longest a fault or its start may be: a day.
const MAX_SECONDS: u64 = 86_400;

impl FaultArgs {
    /// Refuses a window or a strength db cannot run with, or a strength for a kind that has
    /// none of that sort: a flag that would be ignored is a mistake to report.
    pub fn validate(&self) -> Result<(), String> {
        at_most_a_day("--fault-start", self.fault_start)?;
        at_most_a_day("--fault-length", self.fault_length)?;
        let given = [
            ("--fault-slowdown", self.fault_slowdown),
            ("--fault-error-rate", self.fault_error_rate),
            ("--fault-surge", self.fault_surge),
            (
                "--fault-throttle-rps",
                self.fault_throttle_rps.map(f64::from),
            ),
        ];
        for (flag, value) in given {
            let Some(value) = value else { continue };
            let Some(strength) = self.fault.strength().filter(|s| s.flag == flag) else {
                return Err(format!(
                    "{flag} sets the strength of another kind of fault than --fault {}",
                    self.fault.name()
                ));
            };
            let (low, high) = strength.range;
            if !(value.is_finite() && (low..=high).contains(&value)) {
                return Err(format!("{flag} must be {}, got {value}", strength.must_be));
            }
        }
        Ok(())
    }

    /// The fault with its strength resolved.
    pub fn fault(&self) -> Fault {
        let strength = match self.fault {
            FaultKind::Slow | FaultKind::Brownout => self.fault_slowdown,
            FaultKind::Errors => self.fault_error_rate,
            FaultKind::Surge => self.fault_surge,
            FaultKind::Throttle => self.fault_throttle_rps.map(f64::from),
            FaultKind::Stall | FaultKind::Down | FaultKind::Tail => None,
        };
        let start = Duration::from_secs(self.fault_start);
        Fault {
            kind: self.fault,
            strength: strength.or(self.fault.strength().map(|s| s.default)),
            start,
            end: start + Duration::from_secs(self.fault_length),
        }
    }
}

/// A fault ready to act: its kind, window and strength.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fault {
    /// What goes wrong.
    pub kind: FaultKind,
    /// The factor, share or rate of the kind, if it has one.
    pub strength: Option<f64>,
    /// When it starts, from db's (and the run's) start.
    pub start: Duration,
    /// When it ends.
    pub end: Duration,
}

impl Fault {
    /// Whether the fault acts `elapsed` after the start. A heavy tail acts for the whole run.
    #[must_use]
    pub fn acts_at(&self, elapsed: Duration) -> bool {
        self.kind == FaultKind::Tail || (self.start <= elapsed && elapsed < self.end)
    }

    /// The strength, or 1 for a kind that has none.
    #[must_use]
    pub fn factor(&self) -> f64 {
        self.strength.unwrap_or(1.0)
    }

    /// The fault in a few words: `db 5× slower from 5 s for 5 s`.
    #[must_use]
    pub fn describe(&self) -> String {
        let (from, length) = (self.start.as_secs(), (self.end - self.start).as_secs());
        let window = format!("from {from} s for {length} s");
        let f = self.factor();
        match self.kind {
            FaultKind::Slow => format!("db {f}× slower {window}"),
            FaultKind::Errors => {
                format!("{:.0} % of db's queries answered 500 {window}", f * 100.0)
            }
            FaultKind::Stall => format!("db finishes nothing {window}"),
            FaultKind::Down => format!("db refuses connections {window}"),
            FaultKind::Surge => format!("the users call {f}× as often {window}"),
            FaultKind::Brownout => format!("db {f}× slower, no capacity limit, {window}"),
            FaultKind::Tail => {
                "db healthy, heavy-tailed (p99 = 10 × p50), the whole run".to_owned()
            }
            FaultKind::Throttle => format!("db answers 429 above {f} queries/s {window}"),
        }
    }
}

fn at_most_a_day(flag: &str, seconds: u64) -> Result<(), String> {
    if seconds > MAX_SECONDS {
        return Err(format!(
            "{flag} must be at most {MAX_SECONDS} seconds (a day), got {seconds}"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(kind: FaultKind) -> FaultArgs {
        FaultArgs {
            fault: kind,
            fault_start: 5,
            fault_length: 5,
            fault_slowdown: None,
            fault_error_rate: None,
            fault_surge: None,
            fault_throttle_rps: None,
        }
    }

    #[test]
    fn p3_each_kind_takes_its_own_strength_or_its_default() {
        assert_eq!(args(FaultKind::Slow).fault().strength, Some(5.0));
        assert_eq!(args(FaultKind::Brownout).fault().strength, Some(20.0));
        assert_eq!(args(FaultKind::Stall).fault().strength, None);
        let surge = FaultArgs {
            fault_surge: Some(2.0),
            ..args(FaultKind::Surge)
        };
        assert_eq!(surge.fault().strength, Some(2.0));
        let wrong = FaultArgs {
            fault_surge: Some(2.0),
            ..args(FaultKind::Slow)
        };
        let refused = wrong.validate().unwrap_err();
        assert!(refused.contains("--fault-surge"), "{refused}");
    }

    #[test]
    fn p3_a_strength_out_of_range_is_refused() {
        for (given, says) in [
            (
                FaultArgs {
                    fault_error_rate: Some(f64::NAN),
                    ..args(FaultKind::Errors)
                },
                "--fault-error-rate must be a share",
            ),
            (
                FaultArgs {
                    fault_surge: Some(0.5),
                    ..args(FaultKind::Surge)
                },
                "--fault-surge must be a finite factor",
            ),
            (
                FaultArgs {
                    fault_throttle_rps: Some(0),
                    ..args(FaultKind::Throttle)
                },
                "--fault-throttle-rps must be from 1",
            ),
        ] {
            let refused = given.validate().unwrap_err();
            assert!(refused.contains(says), "{refused}");
        }
    }

    #[test]
    fn p3_the_window_is_half_open_and_a_tail_lasts_the_run() {
        let slow = args(FaultKind::Slow).fault();
        assert!(!slow.acts_at(Duration::from_millis(4_999)));
        assert!(slow.acts_at(Duration::from_secs(5)));
        assert!(!slow.acts_at(Duration::from_secs(10)));
        let tail = args(FaultKind::Tail).fault();
        assert!(tail.acts_at(Duration::ZERO) && tail.acts_at(Duration::from_secs(1_000)));
    }
}
