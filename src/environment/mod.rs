//! Environment definitions: manifest, validation, hardware checks, normalization.
//!
//! An environment is a folder with `environment.toml`, instructions, a
//! starting `workspace/`, an optional hidden `reference/` and a hidden scorer.
//! This module only reads and checks such folders; running the scorer is the
//! `scoring` layer's job.

pub mod calibration;
pub mod discovery;
pub mod duration;
pub mod family;
pub mod files;
pub mod hardware;
pub mod manifest;
pub mod normalize;
pub mod prepare;
mod structure;
mod validation;

#[cfg(test)]
mod test_support;

use duration::parse_duration;
use hardware::HardwareRequirements;
use manifest::Manifest;
use normalize::{Aggregate, Normalizer, Transform};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use validation::MANIFEST_FILE;

/// One thing wrong with an environment, e.g.
/// `environments/x/environment.toml: scoring.transform: unknown transform "sqrt" ...`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Problem {
    pub file: PathBuf,
    /// Dotted manifest key ("scoring.timeout"), or "line N" for syntax errors.
    pub field: String,
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.field.is_empty() {
            write!(f, "{}: {}", self.file.display(), self.message)
        } else {
            write!(
                f,
                "{}: {}: {}",
                self.file.display(),
                self.field,
                self.message
            )
        }
    }
}

fn lines<T: fmt::Display>(items: &[T]) -> String {
    items
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n")
}

fn looked_in(items: &[(PathBuf, String)]) -> String {
    items
        .iter()
        .map(|(p, origin)| format!("  {} ({origin})", p.display()))
        .collect::<Vec<_>>()
        .join("\n")
}

#[derive(Debug, thiserror::Error)]
pub enum EnvError {
    /// Display: one problem per line.
    #[error("{}", lines(.0))]
    Invalid(Vec<Problem>),
    #[error("environment {env} has no profile \"{name}\" (known profiles: {})",
        if known.is_empty() { "none".to_string() } else { known.join(", ") })]
    UnknownProfile {
        env: String,
        name: String,
        known: Vec<String>,
    },
    /// Display: the closest known id, the ids known, where it looked, one
    /// place a line, then how to add one.
    #[error(
        "environment \"{name}\" not found{}{}; looked in:\n{}\n{advice}",
        suggestion.as_ref().map(|s| format!(": did you mean {s}?")).unwrap_or_default(),
        if known.is_empty() { String::new() } else { format!(" (known: {})", known.join(", ")) },
        looked_in(searched)
    )]
    NotFound {
        name: String,
        /// Each candidate folder and why it was on the search path.
        searched: Vec<(PathBuf, String)>,
        advice: String,
        /// The ids on the search path, and the one closest to `name`.
        known: Vec<String>,
        suggestion: Option<String>,
    },
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// An environment id as one file name: a family task's `family/task`
/// becomes `family__task` (ids of environment folders have no `/`).
pub fn environment_file_name(id: &str) -> String {
    family::file_name(id)
}

/// Every problem with the environment in `dir`; empty means valid.
pub fn validate(dir: &Path) -> Vec<Problem> {
    let file = dir.join(MANIFEST_FILE);
    match std::fs::read(&file) {
        Ok(bytes) => validation::parse_and_check(dir, &bytes)
            .err()
            .unwrap_or_default(),
        Err(e) => vec![Problem {
            file,
            field: String::new(),
            message: format!("cannot read: {e}"),
        }],
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Environment {
    /// Absolute path of the environment folder.
    pub dir: PathBuf,
    pub manifest: Manifest,
    /// sha256 (hex) of the `environment.toml` bytes, to tie results to a
    /// manifest version (of a family: of its whole folder).
    pub manifest_hash: String,
    /// The Task Standard family task this is (`family`), if it is one.
    pub family: Option<family::TaskRef>,
    /// Whether scores are normalized (false: a family without starting and
    /// reference scores, whose raw scores are reported as they are).
    pub normalized: bool,
    /// Whether a final score is taken when the budget runs out (a family's
    /// `score_on_usage_limits`; always for environment folders).
    pub score_at_budget_end: bool,
}

impl Environment {
    /// Reads and validates `dir`; any problem makes it `EnvError::Invalid`.
    pub fn load(dir: &Path) -> Result<Environment, EnvError> {
        let file = dir.join(MANIFEST_FILE);
        let bytes = std::fs::read(&file).map_err(|source| EnvError::Io {
            path: file.clone(),
            source,
        })?;
        let manifest = validation::parse_and_check(dir, &bytes).map_err(EnvError::Invalid)?;
        let abs = std::fs::canonicalize(dir).map_err(|source| EnvError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
        Ok(Environment {
            dir: abs,
            manifest,
            manifest_hash: format!("{:x}", Sha256::digest(&bytes)),
            family: None,
            normalized: true,
            score_at_budget_end: true,
        })
    }

    pub fn id(&self) -> &str {
        &self.manifest.id
    }

    pub fn instructions_path(&self) -> PathBuf {
        self.dir.join(&self.manifest.instructions)
    }

    pub fn workspace_dir(&self) -> PathBuf {
        self.dir.join(&self.manifest.workspace)
    }

    /// `<dir>/reference` when present: files that, laid over a copy of the
    /// starting workspace, give the reference solution.
    pub fn reference_dir(&self) -> Option<PathBuf> {
        let dir = self.dir.join("reference");
        dir.is_dir().then_some(dir)
    }

    pub fn hardware(&self) -> HardwareRequirements {
        HardwareRequirements::from(&self.manifest.hardware)
    }

    /// The hardware a profile needs: its own `hardware` table, else `[hardware]`.
    /// `None` means `default_profile`, as for `scoring`.
    pub fn hardware_for(&self, profile: Option<&str>) -> HardwareRequirements {
        let chosen = profile
            .map(str::to_string)
            .or_else(|| self.manifest.default_profile.clone());
        chosen
            .and_then(|name| self.manifest.profiles.get(&name))
            .and_then(|p| p.hardware.as_ref())
            .map_or_else(|| self.hardware(), HardwareRequirements::from)
    }

    /// Names of the profiles in `[profiles]`, sorted.
    pub fn profile_names(&self) -> Vec<String> {
        self.manifest.profiles.keys().cloned().collect()
    }

    /// Parsed `budget.default`. Validated by `load`, so the zero fallback only
    /// shows up if someone edits `manifest` afterwards.
    pub fn default_budget(&self) -> Duration {
        parse_duration(&self.manifest.budget.default).unwrap_or(Duration::ZERO)
    }

    /// Parsed `budget.presets`, skipping any that do not parse.
    pub fn budget_presets(&self) -> Vec<Duration> {
        let presets = &self.manifest.budget.presets;
        presets
            .iter()
            .filter_map(|p| parse_duration(p).ok())
            .collect()
    }

    /// The scoring settings for `profile`; `None` means `default_profile` when
    /// set, else the `[scoring]` values alone.
    pub fn scoring(&self, profile: Option<&str>) -> Result<ScoringPlan, EnvError> {
        let chosen = profile
            .map(str::to_string)
            .or_else(|| self.manifest.default_profile.clone());
        let overrides =
            match &chosen {
                Some(name) => Some(self.manifest.profiles.get(name).ok_or_else(|| {
                    EnvError::UnknownProfile {
                        env: self.id().to_string(),
                        name: name.clone(),
                        known: self.profile_names(),
                    }
                })?),
                None => None,
            };
        let base = &self.manifest.scoring;
        let invalid = |field: &str, message: String| {
            EnvError::Invalid(vec![Problem {
                file: self.dir.join(MANIFEST_FILE),
                field: field.to_string(),
                message,
            }])
        };
        let timeout_text = overrides
            .and_then(|p| p.timeout.as_deref())
            .unwrap_or(&base.timeout);
        let timeout = parse_duration(timeout_text).map_err(|e| invalid("scoring.timeout", e))?;
        let (transform_text, transform_field) = match overrides.and_then(|p| p.transform.as_deref())
        {
            Some(text) => (
                text,
                format!(
                    "profiles.{}.transform",
                    chosen.as_deref().unwrap_or_default()
                ),
            ),
            None => (base.transform.as_str(), "scoring.transform".to_string()),
        };
        let transform: Transform = transform_text
            .parse()
            .map_err(|e| invalid(&transform_field, e))?;
        let aggregate: Aggregate = base
            .aggregate
            .parse()
            .map_err(|e| invalid("scoring.aggregate", e))?;
        Ok(ScoringPlan {
            profile: chosen,
            command: base.command.clone(),
            timeout,
            metric_name: base.metric.name.clone(),
            metric_unit: base.metric.unit.clone(),
            normalizer: Normalizer {
                transform,
                starting: overrides.and_then(|p| p.starting).unwrap_or(base.starting),
                reference: overrides
                    .and_then(|p| p.reference)
                    .unwrap_or(base.reference),
            },
            aggregate,
            visible: base.visible,
            protected: base.protected.clone(),
            pass_env: base.pass_env.clone(),
            env: overrides.map(|p| p.env.clone()).unwrap_or_default(),
            starting_setup: self
                .manifest
                .calibrate
                .as_ref()
                .filter(|c| c.in_sessions)
                .map(|c| {
                    parse_duration(&c.timeout)
                        .map(|timeout| StartingSetup {
                            command: c.setup.clone(),
                            timeout,
                        })
                        .map_err(|e| invalid("calibrate.timeout", e))
                })
                .transpose()?,
            intermediate: true,
            exclusive: base.exclusive,
            score_at_start: self.family.is_none(),
            score_at_budget_end: self.score_at_budget_end,
            unnormalized: !self.normalized,
            calibration: None,
        })
    }
}

/// Everything needed to score one workspace under one profile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScoringPlan {
    /// The profile used; `None` = base `[scoring]` values.
    pub profile: Option<String>,
    /// argv with `{env}` / `{workspace}` placeholders still in it.
    pub command: Vec<String>,
    #[serde(with = "duration::text")]
    pub timeout: Duration,
    pub metric_name: String,
    pub metric_unit: String,
    pub normalizer: Normalizer,
    pub aggregate: Aggregate,
    /// Whether scorer messages may be shown to the participant.
    pub visible: bool,
    pub protected: Vec<String>,
    /// The profile's extra environment variables for the scorer.
    pub env: BTreeMap<String, String>,
    /// Names of the server's variables the scorer's process gets
    /// (`[scoring] pass_env`); sessions made before it existed have none.
    #[serde(default)]
    pub pass_env: Vec<String>,
    /// Run in the session before its starting score (`[calibrate]
    /// in_sessions`): the starting solution's build step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub starting_setup: Option<StartingSetup>,
    /// Whether scores may be taken while the session runs (false: a family
    /// scored only from its submission).
    #[serde(default = "yes")]
    pub intermediate: bool,
    /// Whether the session's own processes are stopped while an
    /// intermediate score is measured (`[scoring] exclusive`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub exclusive: bool,
    /// Whether the starting solution is scored before the clock starts.
    #[serde(default = "yes")]
    pub score_at_start: bool,
    /// Whether a final score is taken when the budget runs out (a
    /// family's `score_on_usage_limits`).
    #[serde(default = "yes")]
    pub score_at_budget_end: bool,
    /// Raw scores stand as they are (no starting and reference to
    /// normalize by): the normalized score is the raw one.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unnormalized: bool,
    /// Set when `starting` and `reference` were measured on this machine
    /// rather than taken from the manifest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calibration: Option<calibration::CalibrationSource>,
}

fn yes() -> bool {
    true
}

/// A shell command (`bash -c`) run as a session process in the workspace,
/// and how long it may take.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StartingSetup {
    pub command: String,
    #[serde(with = "duration::text")]
    pub timeout: Duration,
}

impl ScoringPlan {
    /// The command with `{env}` and `{workspace}` replaced (anywhere in each argument).
    pub fn argv(&self, env_dir: &Path, workspace: &Path) -> Vec<String> {
        let env_text = env_dir.to_string_lossy();
        let workspace_text = workspace.to_string_lossy();
        self.command
            .iter()
            .map(|arg| {
                arg.replace("{env}", &env_text)
                    .replace("{workspace}", &workspace_text)
            })
            .collect()
    }

    /// The scorer's environment per the protocol: REBENCH_WORKSPACE,
    /// REBENCH_PROFILE (empty for base values), REBENCH_ENV_DIR, then the
    /// profile's own variables (which may not override the three).
    pub fn scorer_env(&self, env_dir: &Path, workspace: &Path) -> BTreeMap<String, String> {
        let mut vars = self.env.clone();
        vars.insert(
            "REBENCH_WORKSPACE".to_string(),
            workspace.to_string_lossy().into_owned(),
        );
        vars.insert(
            "REBENCH_PROFILE".to_string(),
            self.profile.clone().unwrap_or_default(),
        );
        vars.insert(
            "REBENCH_ENV_DIR".to_string(),
            env_dir.to_string_lossy().into_owned(),
        );
        vars
    }
}

#[cfg(test)]
mod tests {
    use super::test_support::{VALID_MANIFEST, demo_env as demo, make_env};
    use super::*;

    #[test]
    fn load_fills_paths_and_hash() {
        let (tmp, env) = demo();
        assert!(env.dir.is_absolute());
        assert_eq!(
            env.dir,
            std::fs::canonicalize(tmp.path().join("demo")).unwrap()
        );
        assert_eq!(env.id(), "demo");
        assert_eq!(env.instructions_path(), env.dir.join("instructions.md"));
        assert_eq!(env.workspace_dir(), env.dir.join("workspace"));
        assert_eq!(env.reference_dir(), None);
        std::fs::create_dir(env.dir.join("reference")).unwrap();
        assert_eq!(env.reference_dir(), Some(env.dir.join("reference")));
        let expected = format!("{:x}", Sha256::digest(VALID_MANIFEST.as_bytes()));
        assert_eq!(env.manifest_hash, expected);
        assert_eq!(env.manifest_hash.len(), 64);
        assert_eq!(env.default_budget(), Duration::from_secs(8 * 3600));
        assert_eq!(env.budget_presets().len(), 3);
        assert_eq!(env.profile_names(), vec!["full", "smoke"]);
        assert_eq!(env.hardware().cpus, 1);
    }

    #[test]
    fn load_reports_invalid_and_missing() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = make_env(
            tmp.path(),
            "bad",
            &VALID_MANIFEST.replace("\"log\"", "\"sqrt\""),
        );
        match Environment::load(&dir) {
            Err(EnvError::Invalid(problems)) => {
                assert_eq!(problems.len(), 1);
                assert_eq!(problems[0].field, "scoring.transform");
            }
            other => panic!("expected Invalid, got {other:?}"),
        }
        match Environment::load(&tmp.path().join("nothing")) {
            Err(EnvError::Io { path, .. }) => {
                assert_eq!(path, tmp.path().join("nothing/environment.toml"))
            }
            other => panic!("expected Io, got {other:?}"),
        }
    }

    #[test]
    fn invalid_error_displays_one_problem_per_line() {
        let err = EnvError::Invalid(vec![
            Problem {
                file: "a/environment.toml".into(),
                field: "id".into(),
                message: "bad".into(),
            },
            Problem {
                file: "a/environment.toml".into(),
                field: String::new(),
                message: "cannot read".into(),
            },
        ]);
        assert_eq!(
            err.to_string(),
            "a/environment.toml: id: bad\na/environment.toml: cannot read"
        );
    }

    #[test]
    fn scoring_uses_default_profile_then_overrides() {
        let (_tmp, env) = demo();
        let full = env.scoring(None).unwrap();
        assert_eq!(full.profile.as_deref(), Some("full"));
        assert_eq!(full.timeout, Duration::from_secs(300));
        assert_eq!(full.normalizer.starting, 4.76);
        assert_eq!(full.normalizer.reference, 1.6);
        assert_eq!(full.normalizer.transform, Transform::Log);
        assert!(full.env.is_empty());

        let smoke = env.scoring(Some("smoke")).unwrap();
        assert_eq!(smoke.profile.as_deref(), Some("smoke"));
        assert_eq!(smoke.timeout, Duration::from_secs(60));
        assert_eq!(smoke.normalizer.starting, 120.0);
        assert_eq!(smoke.normalizer.reference, 30.0);
        assert_eq!(
            smoke.env.get("PREFIX_SUM_N").map(String::as_str),
            Some("20000")
        );
        assert_eq!(smoke.metric_name, "runtime");
        assert_eq!(smoke.metric_unit, "ms");
        assert_eq!(smoke.aggregate, Aggregate::Best);
        assert!(smoke.visible);
        assert_eq!(smoke.protected, vec!["score.py"]);
    }

    #[test]
    fn scoring_without_default_profile_uses_base_values() {
        let tmp = tempfile::tempdir().unwrap();
        let text = VALID_MANIFEST.replace("default_profile = \"full\"\n", "");
        let env = Environment::load(&make_env(tmp.path(), "demo", &text)).unwrap();
        let base = env.scoring(None).unwrap();
        assert_eq!(base.profile, None);
        assert_eq!(base.normalizer.starting, 4.76);
    }

    #[test]
    fn unknown_profile_lists_known_ones() {
        let (_tmp, env) = demo();
        let err = env.scoring(Some("fast")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "environment demo has no profile \"fast\" (known profiles: full, smoke)"
        );
        assert!(matches!(err, EnvError::UnknownProfile { ref known, .. } if known.len() == 2));
    }

    #[test]
    fn argv_and_scorer_env_substitute_paths() {
        let (_tmp, env) = demo();
        let plan = env.scoring(Some("smoke")).unwrap();
        let argv = plan.argv(Path::new("/envs/demo"), Path::new("/ws/1"));
        assert_eq!(argv, vec!["python3", "/envs/demo/scorer/score.py", "/ws/1"]);
        let vars = plan.scorer_env(Path::new("/envs/demo"), Path::new("/ws/1"));
        assert_eq!(vars["REBENCH_WORKSPACE"], "/ws/1");
        assert_eq!(vars["REBENCH_ENV_DIR"], "/envs/demo");
        assert_eq!(vars["REBENCH_PROFILE"], "smoke");
        assert_eq!(vars["PREFIX_SUM_N"], "20000");
    }

    #[test]
    fn scoring_plan_round_trips_through_json() {
        let (_tmp, env) = demo();
        let plan = env.scoring(Some("smoke")).unwrap();
        let json = serde_json::to_value(&plan).unwrap();
        assert_eq!(json["timeout"], "1m");
        assert_eq!(json["normalizer"]["transform"], "log");
        assert_eq!(json["aggregate"], "best");
        let back: ScoringPlan = serde_json::from_value(json).unwrap();
        assert_eq!(back, plan);
    }
}
