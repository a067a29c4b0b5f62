//! Cross-crate integration tests for nresilience; the tests live in `tests/tests/`.
