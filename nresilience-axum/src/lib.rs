//! The server side of nested-retry detection: a tower layer that reads the
//! `x-nresilience-retrying` marker into the nesting context of `nresilience-core`.
#![forbid(unsafe_code)]
