//! A service's own admission of the requests it receives (F4): the load tracker applied to
//! its handlers, with the refusals a service adds.

use std::time::{Duration, Instant};

use super::{LoadTracker, Ticket};
use crate::criticality::Criticality;
use crate::overload::admission::{Admission, Saturated};

impl LoadTracker {
    /// Admits a request a service received at `now` (F4): as [`admit`](Self::admit) judges an
    /// attempt, with more refusals. A request whose call has less time `left` than the
    /// service's typical handling time is refused at once. While callers leave requests
    /// unanswered (more than a fifth of those ended over the window), every retry is refused;
    /// within a slot of the service refusing a first attempt for its load, every retry is
    /// refused, and every request less critical than that first attempt: the capacity that
    /// could not serve it goes to first attempts, the most critical first. Under the limit, a
    /// retry may fill half what a first attempt of its criticality may.
    pub(crate) fn admit_request(
        &self,
        now: Instant,
        left: Option<Duration>,
        criticality: Criticality,
        retry: bool,
    ) -> Result<Admission, RequestRefused> {
        let mut state = self.at(now);
        if let Some((left, typical)) = left.zip(state.window.mean()) {
            if left < typical {
                return Err(RequestRefused::Handling(typical));
            }
        }
        let slot = state.window.slot();
        let pressed = state
            .pressed
            .filter(|&(at, _)| now.saturating_duration_since(at) < slot);
        let gives_way = pressed.is_some_and(|(_, refused)| retry || !criticality.at_least(refused));
        // Callers leaving their requests unanswered are as sure a sign as a refusal that the
        // service is over its capacity. With nothing in the handlers, nothing gives way.
        if state.in_flight > 0 && (gives_way || (retry && state.window.callers_leaving())) {
            state.window.refused();
            let wait = state.queue_wait(state.held()).or(state.no_load.get());
            return Err(RequestRefused::Shed(wait.unwrap_or(slot)));
        }
        let admitted = state.admit::<false>(now, left, criticality, None, retry);
        if admitted.is_err() && !retry {
            let most = match pressed {
                Some((_, refused)) if !criticality.at_least(refused) => refused,
                _ => criticality,
            };
            state.pressed = Some((now, most));
        }
        admitted.map_err(RequestRefused::Saturated)
    }

    /// The request of `ticket` ended unanswered at `now`: a service's handler, dropped when
    /// its caller left (F4). Its place is free — the handler's work stopped with it — but it
    /// counts as work not answered: callers leaving before their answer is how requests
    /// accumulating in the handlers show (O5).
    pub(crate) fn left_unanswered(&self, ticket: Ticket, now: Instant) {
        let mut state = self.at(now);
        state.end(ticket, now, None);
        state.window.caller_left();
    }
}

/// Why a service refused a request (F4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RequestRefused {
    /// Its call had less time left than the service's typical handling time, this one.
    Handling(Duration),
    /// Its expected wait, or the limit, refused it.
    Saturated(Saturated),
    /// The service refused a first attempt as critical as it lately: its capacity goes to
    /// those; the hint is the wait of the requests ahead.
    Shed(Duration),
}
