//! The attempts of one call in flight, and its one timer: what every driver of a
//! [`Call`](crate::call::Call) polls between the call's steps.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use pin_project_lite::pin_project;
use tracing::Span;

use crate::call::{Attempt, Timer};
use crate::clock;

pin_project! {
    /// The attempts of one call in flight — the one a [`Step::Run`](crate::call::Step::Run)
    /// started and the hedges beside it — and the call's one timer, which cuts them, wakes the
    /// call for its next hedge, and ends its sleeps.
    ///
    /// A driver does what each step says through it ([`run`](Self::run),
    /// [`hedge`](Self::hedge), [`sleep`](Self::sleep), [`clear`](Self::clear)) and hands
    /// what [`poll_landed`](Self::poll_landed) reports back to the call. Every timing rule
    /// between a call's steps lives here: the first attempt to answer, the earliest cut, the
    /// instant to wake at, a cut before a hedge due at the same instant, and a hedge asked for
    /// no earlier than it is due.
    ///
    /// Each attempt carries a scope `S` of the driver's, handed back when it lands: `()`, or
    /// its [`Span`], entered while its future is polled.
    ///
    /// ```
    /// use std::pin::pin;
    /// use std::time::Duration;
    /// use nresilience_core::call::{Call, CallOptions, Flights, FlightEvent, Step};
    /// use nresilience_core::{clock, RetryPolicy};
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
    /// let policy = RetryPolicy::builder()
    ///     .attempt_timeout(Some(Duration::from_millis(100)))
    ///     .build()
    ///     .unwrap();
    /// let mut call = Call::<()>::start(&policy, clock::now(), CallOptions::new());
    /// let mut flights = pin!(Flights::new());
    /// let Step::Run(attempt) = call.next::<()>(clock::now()) else { unreachable!() };
    /// // An attempt that never answers is cut at its timeout.
    /// flights.as_mut().run(attempt, (), std::future::pending::<Result<(), ()>>());
    /// let landed = std::future::poll_fn(|cx| flights.as_mut().poll_landed(cx, call.hedge_at())).await;
    /// let FlightEvent::Cut { attempt, .. } = landed else { unreachable!() };
    /// assert_eq!(clock::now(), attempt.cut_at().unwrap());
    /// assert!(matches!(call.timed_out::<()>(attempt, clock::now()), Step::Sleep(_)));
    /// # }
    /// ```
    #[derive(Debug)]
    #[project = FlightsProj]
    pub struct Flights<F, S = ()> {
        // The attempt a `Step::Run` started, inline: no allocation for a call that never
        // hedges.
        #[pin]
        first: Option<F>,
        first_of: Option<(Attempt, S)>,
        // Hedges beside it (HG1), out of line: most calls never hedge.
        hedges: Option<Box<Hedges<F, S>>>,
        #[pin]
        timer: Timer,
    }
}

/// The hedges in flight, boxed where they are held: an empty list in every call's future
/// would be two words more to move.
type Hedges<F, S> = Vec<Flight<F, S>>;

/// A hedge in flight.
#[derive(Debug)]
struct Flight<F, S> {
    attempt: Attempt,
    scope: S,
    future: Pin<Box<F>>,
}

/// What happened to the attempts in flight, for the driver to hand to its call.
#[derive(Debug)]
#[must_use]
pub enum FlightEvent<O, S = ()> {
    /// An attempt answered: classify `output` and report it with
    /// [`Call::attempted`](crate::call::Call::attempted).
    Answered {
        /// The attempt that answered.
        attempt: Attempt,
        /// The scope it ran in.
        scope: S,
        /// Its answer.
        output: O,
    },
    /// The earliest cut came, before or with the hedge: the attempt is dropped; report it with
    /// [`Call::timed_out`](crate::call::Call::timed_out).
    Cut {
        /// The attempt cut.
        attempt: Attempt,
        /// The scope it ran in.
        scope: S,
    },
    /// The next hedge is due: ask [`Call::next`](crate::call::Call::next) at this instant,
    /// never before the hedge was due.
    HedgeDue(Instant),
    /// Nothing is in flight and the sleep is over: ask
    /// [`Call::next`](crate::call::Call::next).
    Woke,
}

/// How an attempt's future is polled within the scope the driver gave it.
pub trait AttemptScope {
    /// Polls `future` within this scope.
    fn poll_within<F: Future>(&self, future: Pin<&mut F>, cx: &mut Context<'_>) -> Poll<F::Output>;
}

impl AttemptScope for () {
    #[inline(always)]
    fn poll_within<F: Future>(&self, future: Pin<&mut F>, cx: &mut Context<'_>) -> Poll<F::Output> {
        future.poll(cx)
    }
}

impl AttemptScope for Span {
    /// The attempt's span is entered while its future is polled.
    #[inline]
    fn poll_within<F: Future>(&self, future: Pin<&mut F>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let _entered = self.enter();
        future.poll(cx)
    }
}

impl<F, S> Default for Flights<F, S> {
    fn default() -> Self {
        Self {
            first: None,
            first_of: None,
            hedges: None,
            timer: Timer::new(),
        }
    }
}

impl<F: Future, S: AttemptScope> Flights<F, S> {
    /// Nothing in flight.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Starts the attempt of a [`Step::Run`](crate::call::Step::Run): nothing else is in
    /// flight.
    #[inline]
    pub fn run(self: Pin<&mut Self>, attempt: Attempt, scope: S, future: F) {
        let mut this = self.project();
        this.first.set(Some(future));
        *this.first_of = Some((attempt, scope));
    }

    /// Starts the attempt of a [`Step::Hedge`](crate::call::Step::Hedge) beside the ones in
    /// flight.
    pub fn hedge(self: Pin<&mut Self>, attempt: Attempt, scope: S, future: F) {
        let this = self.project();
        this.hedges.get_or_insert_with(Box::default).push(Flight {
            attempt,
            scope,
            future: Box::pin(future),
        });
    }

    /// Sleeps until `until` ([`Step::Sleep`](crate::call::Step::Sleep)): nothing is in
    /// flight, and [`FlightEvent::Woke`] comes then.
    #[inline]
    pub fn sleep(self: Pin<&mut Self>, until: Instant) {
        self.project().timer.set(Some(until));
    }

    /// Drops every attempt in flight: the call is done, and they lost.
    #[inline]
    pub fn clear(self: Pin<&mut Self>) {
        let mut this = self.project();
        this.first.set(None);
        *this.first_of = None;
        *this.hedges = None;
    }

    /// Whether no attempt is in flight.
    pub fn is_empty(&self) -> bool {
        self.first_of.is_none() && self.hedges.as_deref().is_none_or(Vec::is_empty)
    }

    /// Polls the attempts in flight, first the one a `Step::Run` started, then the hedges in
    /// the order they went out, and then the timer: set to the earliest cut, or to `hedge_at`
    /// (the call's [`hedge_at`](crate::call::Call::hedge_at), or `None` while the driver holds
    /// a due hedge back) when that comes first; with nothing in flight, to the end of the
    /// sleep.
    #[inline(always)]
    pub fn poll_landed(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        hedge_at: Option<Instant>,
    ) -> Poll<FlightEvent<F::Output, S>> {
        let mut this = self.project();
        if let Some(future) = this.first.as_mut().as_pin_mut() {
            let Some((_, scope)) = this.first_of.as_ref() else {
                unreachable!("an attempt in flight was started with its attempt")
            };
            if let Poll::Ready(output) = scope.poll_within(future, cx) {
                this.first.set(None);
                let Some((attempt, scope)) = this.first_of.take() else {
                    unreachable!("an attempt in flight was started with its attempt")
                };
                return Poll::Ready(FlightEvent::Answered {
                    attempt,
                    scope,
                    output,
                });
            }
        }
        if let Some(hedges) = this.hedges.as_deref_mut() {
            let answered = hedges.iter_mut().enumerate().find_map(|(at, flight)| {
                match flight.scope.poll_within(flight.future.as_mut(), cx) {
                    Poll::Ready(output) => Some((at, output)),
                    Poll::Pending => None,
                }
            });
            if let Some((at, output)) = answered {
                let Flight { attempt, scope, .. } = hedges.swap_remove(at);
                return Poll::Ready(FlightEvent::Answered {
                    attempt,
                    scope,
                    output,
                });
            }
        }
        let in_flight =
            this.first_of.is_some() || this.hedges.as_deref().is_some_and(|h| !h.is_empty());
        if !in_flight {
            // Between attempts: the backoff or the rejection pause.
            std::task::ready!(this.timer.as_mut().poll(cx));
            return Poll::Ready(FlightEvent::Woke);
        }
        let cut = earliest_cut(this.first_of.as_ref(), this.hedges.as_deref());
        let wake = match (cut, hedge_at) {
            (Some((_, cut)), Some(hedge_at)) => Some(cut.min(hedge_at)),
            (cut, hedge_at) => cut.map(|(_, cut)| cut).or(hedge_at),
        };
        this.timer.as_mut().set(wake);
        std::task::ready!(this.timer.as_mut().poll(cx));
        // The timer was set to the earliest of the cuts and the hedge: that one is due.
        let (attempt, scope) = match (cut, hedge_at) {
            (Some((which, cut)), hedge_at) if hedge_at.is_none_or(|hedge_at| cut <= hedge_at) => {
                match which {
                    None => {
                        this.first.set(None);
                        match this.first_of.take() {
                            Some(first) => first,
                            None => unreachable!("the earliest cut is the first attempt's"),
                        }
                    }
                    Some(at) => {
                        let Some(hedges) = this.hedges.as_deref_mut() else {
                            unreachable!("the earliest cut is a hedge's")
                        };
                        let Flight { attempt, scope, .. } = hedges.swap_remove(at);
                        (attempt, scope)
                    }
                }
            }
            (_, Some(hedge_at)) => {
                return Poll::Ready(FlightEvent::HedgeDue(clock::now().max(hedge_at)))
            }
            // A timer set to nothing never fires; a cut with no hedge is taken above.
            (None | Some(_), None) => return Poll::Pending,
        };
        Poll::Ready(FlightEvent::Cut { attempt, scope })
    }
}

/// The attempt in flight cut first, and when: `None` for the one a `Step::Run` started, a
/// hedge by its place.
#[inline]
fn earliest_cut<F, S>(
    first: Option<&(Attempt, S)>,
    hedges: Option<&Hedges<F, S>>,
) -> Option<(Option<usize>, Instant)> {
    let mut earliest = first
        .and_then(|(attempt, _)| attempt.cut_at())
        .map(|cut| (None, cut));
    for (at, flight) in hedges.iter().flat_map(|hedges| hedges.iter().enumerate()) {
        if let Some(cut) = flight.attempt.cut_at() {
            if earliest.is_none_or(|(_, first)| cut < first) {
                earliest = Some((Some(at), cut));
            }
        }
    }
    earliest
}
