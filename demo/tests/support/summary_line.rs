//! Reading the summary line a hop run alone prints when it stops.

/// The count before `label` in a summary line such as
/// `backend: 40 requests, 40 NestedRetry, 3 budget refusals, 0 saturated, busiest second 40
/// requests`.
pub(crate) fn count(summary: &str, label: &str) -> u64 {
    let words: Vec<&str> = summary.split_whitespace().collect();
    words
        .windows(2)
        .find(|pair| pair[1].trim_end_matches(',') == label)
        .and_then(|pair| pair[0].parse().ok())
        .unwrap_or_else(|| panic!("no {label} in {summary:?}"))
}
