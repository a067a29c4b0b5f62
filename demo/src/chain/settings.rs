//! What a row's hops ran with, in words and as data: an nresilience row names each setting
//! and whether it is the library's default (P4), so a row never claims defaults it did not run.

use std::time::Duration;

use nresilience_core::{AttemptCeiling, RetryPolicy};
use serde::{Deserialize, Serialize};

use super::retry_args::{Budget, Ceiling, Overload, RetryArgs, Rules};
use super::stack::{Library, Stack};

/// One setting of an nresilience row's hops.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Setting {
    /// What it sets: `attempts`, `retry budget`, …
    pub name: String,
    /// Its value, in words.
    pub value: String,
    /// Where the value comes from.
    pub source: Source,
}

/// Where a setting's value comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    /// What `RetryPolicy::default()` and `Client::new` do.
    Default,
    /// The row or a flag changed it.
    Changed,
    /// A fact of the deployment a user configures, such as the edge's deadline being its
    /// users' patience.
    Deployment,
}

/// What a row ran with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RowSettings {
    /// In a few words; an nresilience row's settings that are not the library's defaults are
    /// marked `*`.
    pub description: String,
    /// An nresilience row's settings one by one; empty on a peer's row.
    pub settings: Vec<Setting>,
}

impl RowSettings {
    /// What `stack`'s hops run with when the flags say `retry`, the frontend's users waiting
    /// `users_wait`.
    #[must_use]
    pub fn of(stack: Stack, retry: RetryArgs, users_wait: Duration) -> Self {
        match stack.library() {
            Library::Peer(peer) => Self {
                description: Stack::peer_description(peer).to_owned(),
                settings: Vec::new(),
            },
            Library::Nresilience(budget, row) => {
                let settings = nresilience(budget, retry.over(row), users_wait);
                let listed: Vec<String> = settings
                    .iter()
                    .map(|s| {
                        let marked = if s.source == Source::Changed { "*" } else { "" };
                        format!("{} {}{marked}", s.name, s.value)
                    })
                    .collect();
                Self {
                    description: format!("nresilience-client: {}", listed.join(", ")),
                    settings,
                }
            }
        }
    }
}

/// The settings an nresilience hop runs with, each against the library's default. The
/// frontend's deadline is its users' patience: a deployment fact, not a default.
fn nresilience(budget: Budget, retry: RetryArgs, users_wait: Duration) -> Vec<Setting> {
    let defaults = RetryPolicy::default();
    let setting = |name: &str, value: String, library_default: bool| Setting {
        name: name.to_owned(),
        value,
        source: if library_default {
            Source::Default
        } else {
            Source::Changed
        },
    };
    let on_off = |on: bool| if on { "on" } else { "off" }.to_owned();
    let attempts = retry.attempts.unwrap_or(defaults.max_attempts());
    let overload = retry
        .overload
        .map_or(defaults.overload_control().is_some(), |o| o == Overload::On);
    let ceiling = match retry.ceiling {
        Some(ceiling) => ceiling,
        None if defaults.attempt_ceiling() == Some(AttemptCeiling::original()) => Ceiling::Original,
        None => Ceiling::Learning,
    };
    let rules = retry.chain_rules.is_none_or(|rules| rules == Rules::On);
    let deadline = retry
        .deadline_ms
        .map(Duration::from_millis)
        .or(defaults.deadline());
    vec![
        setting(
            "attempts",
            attempts.to_string(),
            attempts == defaults.max_attempts(),
        ),
        setting(
            "retry budget",
            on_off(budget == Budget::On),
            budget == Budget::On,
        ),
        setting(
            "overload control",
            on_off(overload),
            overload == defaults.overload_control().is_some(),
        ),
        setting(
            "ceiling",
            ceiling.name().to_owned(),
            Some(ceiling.settings()) == defaults.attempt_ceiling(),
        ),
        setting(
            "chain rules",
            on_off(rules),
            rules == defaults.inherits_deadline(),
        ),
        setting(
            "backend deadline",
            deadline.map_or("none".to_owned(), |d| format!("{} s", d.as_secs_f64())),
            deadline == defaults.deadline(),
        ),
        Setting {
            name: "frontend deadline".to_owned(),
            value: format!("the users' {} s", users_wait.as_secs_f64()),
            source: Source::Deployment,
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    const USERS: Duration = Duration::from_secs(2);

    #[test]
    fn p4_the_nresilience_row_is_the_library_defaults_and_says_so() {
        let row = RowSettings::of(Stack::Nresilience, RetryArgs::default(), USERS);
        assert!(
            row.settings.iter().all(|s| s.source != Source::Changed),
            "{row:?}"
        );
        assert!(!row.description.contains('*'), "{}", row.description);
        let attempts = RetryPolicy::default().max_attempts().to_string();
        assert!(row.description.contains(&format!("attempts {attempts}")));
    }

    #[test]
    fn p4_a_row_names_what_it_turns_on_and_a_flag_names_what_it_changes() {
        let row = RowSettings::of(Stack::NresilienceNoOverload, RetryArgs::default(), USERS);
        assert!(
            row.description.contains("overload control off*"),
            "{}",
            row.description
        );
        let flagged = RetryArgs {
            attempts: Some(4),
            ..RetryArgs::default()
        };
        let row = RowSettings::of(Stack::Nresilience, flagged, USERS);
        assert!(
            row.description.contains("attempts 4*"),
            "{}",
            row.description
        );
        let peer = RowSettings::of(Stack::Tower5s, flagged, USERS);
        assert!(peer.settings.is_empty() && peer.description.starts_with("tower"));
    }
}
