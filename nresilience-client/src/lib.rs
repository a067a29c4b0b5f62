//! The outbound side of nresilience: a retrying HTTP client and tower layer that
//! stamps the `x-nresilience-retrying` marker and reports nested retries.
#![forbid(unsafe_code)]
