//! The README's quick start is the example `bash scripts/test` runs, line for line, so that
//! what a reader copies is what compiles and runs.

#[test]
fn the_readme_quick_start_is_the_example_that_runs() {
    let readme = include_str!("../../README.md");
    let example = include_str!("../../nresilience-axum/examples/quickstart.rs");
    // The example's module docs say how to run it; the README says that in prose.
    let start = example
        .find("use std::net::SocketAddr;")
        .expect("the example starts with its imports after its docs");
    let block = format!("```rust\n{}```", &example[start..]);
    assert!(
        readme.contains(&block),
        "README.md's quick start differs from nresilience-axum/examples/quickstart.rs"
    );
}
