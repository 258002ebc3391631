//! `rebench.toml` beside a family's `<family>.py`: what the standard does
//! not say and rebench needs (the budget; the starting and reference scores
//! that normalize the family's own units), for all tasks and per task.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::environment::Problem;
use crate::environment::manifest::Budget;

pub const SIDECAR_FILE: &str = "rebench.toml";

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sidecar {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<Budget>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scoring: Option<SidecarScoring>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tasks: BTreeMap<String, TaskSidecar>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskSidecar {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scoring: Option<SidecarScoring>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SidecarScoring {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub starting: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transform: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
}

impl SidecarScoring {
    fn overlay(&mut self, other: &SidecarScoring) {
        if other.starting.is_some() {
            self.starting = other.starting;
        }
        if other.reference.is_some() {
            self.reference = other.reference;
        }
        if other.transform.is_some() {
            self.transform.clone_from(&other.transform);
        }
        if other.timeout.is_some() {
            self.timeout.clone_from(&other.timeout);
        }
    }
}

impl Sidecar {
    /// The family-wide scoring settings with the task's own over them.
    pub fn scoring_for(&self, task: &str) -> SidecarScoring {
        let mut out = self.scoring.clone().unwrap_or_default();
        if let Some(own) = self.tasks.get(task).and_then(|t| t.scoring.as_ref()) {
            out.overlay(own);
        }
        out
    }

    /// `other`'s values win (the operator's `env add` flags over the file).
    pub fn overlay(&mut self, other: &Sidecar) {
        if other.budget.is_some() {
            self.budget.clone_from(&other.budget);
        }
        if let Some(scoring) = &other.scoring {
            self.scoring
                .get_or_insert_with(Default::default)
                .overlay(scoring);
        }
        for (name, task) in &other.tasks {
            let mine = self.tasks.entry(name.clone()).or_default();
            if let Some(scoring) = &task.scoring {
                mine.scoring
                    .get_or_insert_with(Default::default)
                    .overlay(scoring);
            }
        }
    }
}

/// The sidecar in `dir`, or an empty one.
pub fn read(dir: &Path) -> Result<Sidecar, Vec<Problem>> {
    read_file(&dir.join(SIDECAR_FILE))
}

/// A sidecar file (also the operator's overrides `env add` keeps), or an
/// empty one when it does not exist.
pub fn read_file(file: &Path) -> Result<Sidecar, Vec<Problem>> {
    let text = match std::fs::read_to_string(file) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Sidecar::default()),
        Err(e) => {
            return Err(vec![Problem {
                file: file.to_path_buf(),
                field: String::new(),
                message: format!("cannot read: {e}"),
            }]);
        }
    };
    toml::from_str(&text).map_err(|e| {
        let line = e
            .span()
            .map(|s| text[..s.start.min(text.len())].lines().count().max(1))
            .map(|l| format!("line {l}"))
            .unwrap_or_default();
        vec![Problem {
            file: file.to_path_buf(),
            field: line,
            message: e.message().to_string(),
        }]
    })
}
