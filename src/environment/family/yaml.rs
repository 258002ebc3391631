//! `manifest.yaml` of a Task Standard family: the parts rebench uses (per
//! task resources and scoring flags, the family's display name). Keys the
//! standard has and rebench does not use are allowed; wrong types are errors
//! that name the file, line and field.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use crate::environment::Problem;

pub const FAMILY_MANIFEST: &str = "manifest.yaml";

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct FamilyManifest {
    #[serde(default)]
    pub meta: Option<Meta>,
    #[serde(default)]
    pub tasks: BTreeMap<String, TaskManifest>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct Meta {
    #[serde(default)]
    pub name: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct TaskManifest {
    #[serde(default)]
    pub resources: Resources,
    #[serde(default)]
    pub scoring: ScoringFlags,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct Resources {
    #[serde(default)]
    pub gpu: Option<Gpu>,
    #[serde(default)]
    pub cpus: Option<u32>,
    #[serde(default)]
    pub memory_gb: Option<f64>,
    #[serde(default)]
    pub storage_gb: Option<f64>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct Gpu {
    #[serde(default)]
    pub count_range: Option<(u32, u32)>,
    #[serde(default)]
    pub model: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct ScoringFlags {
    #[serde(default)]
    pub visible_to_agent: Option<bool>,
    #[serde(default)]
    pub score_on_usage_limits: Option<bool>,
    #[serde(default)]
    pub instructions: Option<String>,
}

/// The family's manifest.yaml, or an empty one when it has none.
pub fn read(dir: &Path) -> Result<FamilyManifest, Problem> {
    let file = dir.join(FAMILY_MANIFEST);
    let text = match std::fs::read_to_string(&file) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(FamilyManifest::default()),
        Err(e) => {
            return Err(Problem {
                file,
                field: String::new(),
                message: format!("cannot read: {e}"),
            });
        }
    };
    if text.trim().is_empty() {
        return Ok(FamilyManifest::default());
    }
    serde_norway::from_str(&text).map_err(|e| Problem {
        field: e
            .location()
            .map(|l| format!("line {}", l.line()))
            .unwrap_or_default(),
        file,
        message: e.to_string(),
    })
}
