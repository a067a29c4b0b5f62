//! A service's own admission of the requests reaching it: retries shed before first
//! attempts, sheddable requests before critical ones, and nothing started that its caller
//! cannot wait for (F4).

use std::fmt;
use std::time::{Duration, Instant};

use crate::criticality::Criticality;
use crate::overload::tracker::RequestRefused;
use crate::overload::{Answer, InvalidOverload, LoadTracker, OverloadControl, SaturatedBy, Ticket};
use crate::telemetry::AdmissionInstruments;

/// The requests a service is handling, and whether it takes the next one (F4).
///
/// The same evidence as a client's overload control (O1, O2, O5): the requests in the
/// service's handlers, the rate at which its handlers finish them, and a limit that binds
/// only once requests accumulate — the handlers finish less than four fifths of what
/// arrives, for two windows — never merely because the handlers are slower. A request
/// whose call has less time left than the service's typical handling time (the mean over
/// the window), or less than the wait of the requests ahead of it (O1), is refused at once.
///
/// Retries give way to first attempts, and sheddable requests to critical ones: for a tenth
/// of the window after the service refuses a first attempt for its load (its wait or the
/// limit), every retry is refused, and every request less critical than that first attempt,
/// so the capacity that could not serve it goes to first attempts, the most critical first.
/// Under the limit a first attempt may fill what its criticality's share allows (O6: half
/// of it for a sheddable request, all but a tenth for a normal one, all of it for a critical
/// one), and a retry half of that. With no request in a handler, only a deadline shorter
/// than the typical handling time refuses.
///
/// Every method takes the time from the caller.
///
/// ```
/// use std::time::{Duration, Instant};
/// use nresilience_core::fleet::{Refusal, ServerAdmission};
/// use nresilience_core::Criticality;
///
/// let start = Instant::now();
/// let service = ServerAdmission::new(start);
/// let first = service.admit(false, Criticality::Normal, None, start).expect("nothing held");
/// service.finished(first, start + Duration::from_millis(50));
///
/// // A caller that will wait 10 ms more cannot be served by a 50 ms handler: refused at once.
/// let at = start + Duration::from_millis(60);
/// let refused = service.admit(false, Criticality::Normal, Some(Duration::from_millis(10)), at);
/// assert_eq!(refused.unwrap_err().cause, Refusal::Deadline);
/// ```
pub struct ServerAdmission {
    tracker: LoadTracker,
    instruments: AdmissionInstruments,
}

/// A request a [`ServerAdmission`] admitted: hand it back when its handler ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use = "an admitted request is held until it is handed back"]
pub struct Admitted {
    ticket: Ticket,
    at: Instant,
}

/// A request a [`ServerAdmission`] refused: answer it with the overload signal (C1) and
/// `retry_after` as the hint, without running the handler.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refused {
    /// What refused it.
    pub cause: Refusal,
    /// When the service expects room again: the wait of the requests ahead of it, or the
    /// typical handling time.
    pub retry_after: Duration,
}

/// What refused a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Refusal {
    /// Its call had less time left than the service's typical handling time.
    Deadline,
    /// Its call had less time left than the requests ahead of it take (O1).
    Wait,
    /// The requests in the handlers had reached its share of the limit (O2, O6).
    Limit,
    /// The service had just refused a first attempt as critical as it, or more, for its
    /// load: a retry, or a less critical request, gives way to those.
    Shed,
}

impl Refusal {
    /// The cause as a metric's or a span's tag: `deadline`, `wait`, `limit` or `shed`.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Deadline => "deadline",
            Self::Wait => "wait",
            Self::Limit => "limit",
            Self::Shed => "shed",
        }
    }
}

impl ServerAdmission {
    /// An admission with the overload control's defaults, at `now`. Its refusals are
    /// counted in `nresilience.admission.refusals` and its limit recorded in
    /// `nresilience.admission.limit`, from the meter provider installed when it is built.
    #[must_use]
    pub fn new(now: Instant) -> Self {
        Self::made(OverloadControl::new(), now)
    }

    /// An admission whose limit `control` sets, at `now`, or the reason `control` is invalid.
    pub fn with_control(control: OverloadControl, now: Instant) -> Result<Self, InvalidOverload> {
        control.validate()?;
        Ok(Self::made(control, now))
    }

    /// An admission of a valid `control`, its limit recorded as it moves.
    fn made(control: OverloadControl, now: Instant) -> Self {
        let instruments = AdmissionInstruments::new();
        Self {
            tracker: LoadTracker::new(control, now).reporting_to(instruments.limit()),
            instruments,
        }
    }

    /// Admits a request received at `now`, or refuses it: a `retry` (its attempt number
    /// says so, F1) of `criticality`, whose call has `left` (`None`: no deadline).
    pub fn admit(
        &self,
        retry: bool,
        criticality: Criticality,
        left: Option<Duration>,
        now: Instant,
    ) -> Result<Admitted, Refused> {
        let refused = match self.tracker.admit_request(now, left, criticality, retry) {
            Ok(admission) => {
                return Ok(Admitted {
                    ticket: admission.ticket,
                    at: now,
                })
            }
            Err(RequestRefused::Handling(typical)) => Refused {
                cause: Refusal::Deadline,
                retry_after: typical,
            },
            Err(RequestRefused::Shed(wait)) => Refused {
                cause: Refusal::Shed,
                retry_after: wait,
            },
            Err(RequestRefused::Saturated(saturated)) => Refused {
                cause: match saturated.cause {
                    SaturatedBy::Wait => Refusal::Wait,
                    SaturatedBy::Limit => Refusal::Limit,
                },
                retry_after: saturated.retry_after,
            },
        };
        self.instruments.refused(refused.cause, retry, criticality);
        Err(refused)
    }

    /// The handler of `admitted` answered at `now`: the service did the work.
    pub fn finished(&self, admitted: Admitted, now: Instant) {
        let handled = now.saturating_duration_since(admitted.at);
        self.tracker
            .answered(admitted.ticket, handled, Answer::Served, now);
    }

    /// The handler of `admitted` was dropped at `now` (its caller went away): it holds
    /// nothing and teaches no handling time, and it counts as a request the service did not
    /// answer — callers leaving before their answers is how requests accumulating in the
    /// handlers show (O5).
    pub fn cancelled(&self, admitted: Admitted, now: Instant) {
        self.tracker.left_unanswered(admitted.ticket, now);
    }

    /// The limit on requests in the handlers, at `now`.
    #[must_use]
    pub fn limit(&self, now: Instant) -> u32 {
        self.tracker.limit(now)
    }
}

impl fmt::Debug for ServerAdmission {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerAdmission")
            .field("tracker", &self.tracker)
            .finish()
    }
}
