//! The README's quick start and the configuration page's settings are the examples
//! `bash scripts/test` runs, line for line, so that what a reader copies compiles and runs.

/// Whether `page` shows `example`'s code from `first_line` on as a Rust block.
fn shows(page: &str, example: &str, first_line: &str) -> bool {
    let start = example
        .find(first_line)
        .expect("the example starts with its imports after its docs");
    page.contains(&format!("```rust\n{}```", &example[start..]))
}

#[test]
fn the_readme_quick_start_is_the_example_that_runs() {
    assert!(
        shows(
            include_str!("../../README.md"),
            include_str!("../../nresilience-axum/examples/quickstart.rs"),
            "use axum::",
        ),
        "README.md's quick start differs from nresilience-axum/examples/quickstart.rs"
    );
}

#[test]
fn the_configuration_page_shows_the_settings_example_that_runs() {
    assert!(
        shows(
            include_str!("../../docs/configuration.md"),
            include_str!("../../nresilience-core/examples/settings.rs"),
            "use std::sync::Arc;",
        ),
        "docs/configuration.md differs from nresilience-core/examples/settings.rs"
    );
}
