//! The matrix's faults: every kind, each with the window and strength it runs with, and the
//! long slowdown beside the short one.

use serde::{Deserialize, Serialize};

use crate::chain::{ChainArgs, FaultKind};

/// A fault the matrix runs, as `--faults` spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MatrixFault {
    /// db 5× slower, with its queue, for the fault's length (5 s).
    Slow,
    /// The same for 20 s: longer than db's queue takes to fill.
    #[value(name = "slow-20s")]
    #[serde(rename = "slow-20s")]
    Slow20s,
    /// A fifth of db's queries answered `500` at once.
    Errors,
    /// db finishes nothing.
    Stall,
    /// db refuses connections.
    Down,
    /// The users call 3× as often.
    Surge,
    /// db 20× slower, with no capacity limit.
    Brownout,
    /// db healthy, heavy-tailed, the whole run.
    Tail,
    /// db answers `429` above 100 queries a second.
    Throttle,
}

/// How long the long slowdown lasts, in seconds.
const LONG_SLOWDOWN: u64 = 20;

impl MatrixFault {
    /// Every fault, in the order the matrix shows them.
    pub const ALL: [Self; 9] = [
        Self::Slow,
        Self::Slow20s,
        Self::Errors,
        Self::Stall,
        Self::Down,
        Self::Surge,
        Self::Brownout,
        Self::Tail,
        Self::Throttle,
    ];

    /// Its name, as `--faults` spells it.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Slow20s => "slow-20s",
            other => other.kind().name(),
        }
    }

    /// The kind of fault it is.
    #[must_use]
    pub const fn kind(self) -> FaultKind {
        match self {
            Self::Slow | Self::Slow20s => FaultKind::Slow,
            Self::Errors => FaultKind::Errors,
            Self::Stall => FaultKind::Stall,
            Self::Down => FaultKind::Down,
            Self::Surge => FaultKind::Surge,
            Self::Brownout => FaultKind::Brownout,
            Self::Tail => FaultKind::Tail,
            Self::Throttle => FaultKind::Throttle,
        }
    }

    /// The chain's settings for this fault: `base`'s, with the fault's kind, its default
    /// strength, and its length (the long slowdown's own), the run lasting until 10 s past
    /// its end.
    #[must_use]
    pub fn chain(self, base: &ChainArgs) -> ChainArgs {
        let mut args = base.clone();
        let fault = &mut args.db.fault;
        fault.fault = self.kind();
        if self == Self::Slow20s {
            fault.fault_length = LONG_SLOWDOWN;
        }
        args
    }
}

#[cfg(test)]
mod tests {
    use clap::ValueEnum;

    use super::*;

    #[test]
    fn p3_the_matrix_runs_every_kind_of_fault() {
        for kind in FaultKind::ALL {
            assert!(MatrixFault::ALL.iter().any(|fault| fault.kind() == kind));
        }
        for fault in MatrixFault::ALL {
            assert_eq!(MatrixFault::from_str(fault.name(), false), Ok(fault));
        }
        let long = MatrixFault::Slow20s.chain(&ChainArgs::default());
        assert_eq!(long.db.fault.fault_length, 20);
        assert_eq!(
            long.duration(),
            35,
            "the fault's start, its length and 10 s after"
        );
    }
}
