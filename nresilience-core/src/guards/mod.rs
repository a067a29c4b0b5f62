//! The optional guards in front of every attempt: this process's own rate limiter and a
//! circuit breaker. Their refusals are self-imposed: they cost the retry budget nothing.

pub mod breaker;
pub mod limiter;
