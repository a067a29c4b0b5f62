//! Every header and gRPC metadata key the hops of an nresilience chain write and read: the
//! names, the parse and the format of each value, and the signals a failed call sends its
//! caller.
//!
//! `nresilience-client` stamps requests and reads answers through this crate;
//! `nresilience-axum` reads requests and stamps answers through it. A service needs neither
//! this crate nor its items: it is for a driver author, and for a reader who wants the whole
//! protocol in one place.
//!
//! | header | on | says |
//! |---|---|---|
//! | [`MARKER`] `x-nresilience-retrying: 1` | request | the sender may retry it: a retrying call made while serving it is nested |
//! | [`DEADLINE`] `x-nresilience-deadline-ms: N` | request | the caller waits at most N ms more ([`deadline_ms`], [`deadline_value`]) |
//! | [`GRPC_TIMEOUT`] `grpc-timeout` | gRPC request | gRPC's own deadline, kept no looser than the one above ([`grpc_timeout`]) |
//! | [`CHAIN`] `x-nresilience-chain: depth=D, attempts=A, criticality=C` | request | where the request's call sits in the chain ([`ChainFacts`]) |
//! | [`ATTEMPT`] `x-nresilience-attempt: N` or `N; hedge` | retry or hedge | which attempt of its call this is ([`AttemptOf`]); a request without it is a first attempt, as in gRPC, whose requests also carry [`GRPC_PREVIOUS_ATTEMPTS`] |
//! | [`FLEET`] `x-nresilience-fleet: retries=R, accepted=S, allowance=A` | answer | the share of retries the service sees among first attempts, the share it accepts, and the share of its own budget each caller should use ([`read_fleet`]) |
//! | [`OVERLOADED`] `x-nresilience-overloaded: 1` | `5xx` answer | the hop's own call was refused for overload: do not retry it |
//! | [`RETRIED`] `x-nresilience-retried: N` | `5xx` answer | the hop failed after N attempts: do not retry it |
//! | [`GRPC_PUSHBACK`] `grpc-retry-pushback-ms` | gRPC answer | the server's pushback; `-1` is the gRPC form of the overload answer ([`grpc_pushback`]) |
//! | [`GRPC_STATUS_DETAILS`] `grpc-status-details-bin` | gRPC answer | the server's pushback as a `google.rpc.RetryInfo`, before `grpc-retry-pushback-ms` unless that one is negative ([`retry_info_delay`]) |
//! | `Retry-After` | answer | the server's pushback in seconds or as a date ([`retry_after`]) |
//! | [`RATELIMIT`] `RateLimit` | answer | the server's quotas: an exhausted one (`r=0`) resets in `t` seconds, the pushback when neither header above says one ([`read_ratelimit`]) |
//! | [`RETRY_AFTER_MS`] `retry-after-ms` | answer | the server's pushback in milliseconds, before `Retry-After` when both parse ([`retry_after_ms`]) |
//!
//! Everything read here comes from a peer, so it is read strictly and never fails: a value
//! that is not exactly what this crate writes, or a signal sent twice, says nothing. A count
//! too large for its type is the largest count, not no count: a depth that overflows is
//! deeper than any loop guard allows, never a chain that starts again.
//!
//! Which endings of a call send which signal is decided once, by
//! [`StopReason::signal`](nresilience_core::StopReason::signal); [`write_signal`] puts it on
//! an answer.
//!
//! The ids in parentheses (B1, C2, O5 …) name the rules of the repository's
//! [docs/rules.md](https://github.com/nresilience/nresilience-rs/blob/main/docs/rules.md),
//! each given there in full; the text beside an id says the rule in brief.
#![forbid(unsafe_code)]

mod attempt;
mod deadline;
mod facts;
mod fleet;
mod inbound;
mod marker;
mod names;
mod number;
mod outbound;
mod pushback;
mod ratelimit;
mod retry_after;
mod retry_after_ms;
mod retry_info;
mod signal;

pub use attempt::{read_attempt, stamp_attempt_number, AttemptOf};
pub use deadline::{deadline_ms, deadline_value, grpc_timeout};
pub use facts::{attempts, depth, ChainFacts};
pub use fleet::{fleet_value, parse_fleet, read_fleet};
pub use inbound::{carries_chain_headers, remove_caller_headers, RequestHeaders};
pub use marker::{carries_marker, is_marker};
pub use names::{
    ATTEMPT, CHAIN, DEADLINE, FLEET, GRPC_PREVIOUS_ATTEMPTS, GRPC_PUSHBACK, GRPC_STATUS,
    GRPC_STATUS_DETAILS, GRPC_TIMEOUT, MARKED, MARKER, OVERLOADED, OVERLOADED_VALUE, PREFIX,
    RATELIMIT, RETRIED, RETRY_AFTER_MS,
};
pub use outbound::{stamp_call, stamp_deadline, stamp_marker};
pub use pushback::{grpc_pushback, read_grpc_pushback, GrpcPushback};
pub use ratelimit::{ratelimit_reset, read_ratelimit};
pub use retry_after::{parse_retry_after, retry_after, retry_after_seconds};
pub use retry_after_ms::{parse_retry_after_ms, retry_after_ms};
pub use retry_info::{read_retry_info, retry_info_delay};
pub use signal::{
    overloaded, read_overloaded, read_retried, retried, single, write_grpc_signal, write_signal,
};
