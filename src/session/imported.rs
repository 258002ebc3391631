//! Runs made elsewhere (an Inspect eval log's samples) and brought into the
//! store: where each came from, so that it is shown as imported, kept
//! read-only and never imported twice.

use serde::{Deserialize, Serialize};

/// The source of an imported session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImportedFrom {
    /// The log's format: `inspect`.
    pub format: String,
    /// The file it was read from, as given to `rebench import`.
    pub file: String,
    /// The eval the run belongs to (Inspect's `eval_id`; the file's sha256
    /// when the log has none): with sample and epoch, the run's identity.
    pub log: String,
    /// The task name in the log.
    pub task: String,
    pub sample: String,
    pub epoch: u32,
    /// Its scores are normalized by a starting and reference given at
    /// import, not the environment's (set by the server).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub normalization_given: bool,
}

impl ImportedFrom {
    /// The key under which the store remembers this run (one session per key).
    pub fn key(&self) -> String {
        format!(
            "{}\u{1f}{}\u{1f}{}\u{1f}{}",
            self.format, self.log, self.sample, self.epoch
        )
    }

    /// `FILE sample S epoch E`, for messages.
    pub fn describe(&self) -> String {
        format!("{} sample {} epoch {}", self.file, self.sample, self.epoch)
    }
}
