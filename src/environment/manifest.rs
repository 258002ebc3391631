//! Serde mirror of `environment.toml`.
//!
//! Durations, the transform and the aggregate stay strings here so that
//! validation can report every bad value at once instead of stopping at the
//! first one serde trips over. Unknown keys are still rejected by serde.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub id: String,
    pub title: String,
    pub summary: String,
    #[serde(default = "default_instructions")]
    pub instructions: String,
    #[serde(default = "default_workspace")]
    pub workspace: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_profile: Option<String>,
    pub budget: Budget,
    #[serde(default)]
    pub hardware: Hardware,
    pub scoring: Scoring,
    #[serde(default)]
    pub profiles: BTreeMap<String, Profile>,
    /// What `rebench env prepare` must install or build before a session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prepare: Option<Prepare>,
    /// What the terminal recording keeps.
    #[serde(default)]
    pub recording: RecordingSettings,
    /// How `rebench env calibrate` turns a solution's files into something to score.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calibrate: Option<Calibrate>,
    /// What a container session (the `docker` backend) runs in.
    #[serde(default)]
    pub sandbox: SandboxSettings,
}

/// `[sandbox]`: for container sessions, the image (default: rebench's own
/// base image) and the network (default: none).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxSettings {
    /// An image the engine already holds (`name:tag`); rebench does not pull.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// `none` (the default) or `bridge` (the engine's default network).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<String>,
    /// A Task Standard family's container: its root may own, chown and
    /// read every file (the family's own code runs as root in it); the
    /// participant, as `agent`, still has no capability.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub task_standard: bool,
    /// Session shells also load the operator's `~/.bashrc` (off: the
    /// session's own rc only, so a broken one cannot cost a prompt).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub operator_bashrc: bool,
}

/// The networks a container session may be given.
pub const SANDBOX_NETWORKS: &[&str] = &["none", "bridge"];

/// `[calibrate]`: for environments whose scorer reads an artifact the
/// participant makes (trained weights), the shell command that makes it,
/// run in each calibration workspace (starting and reference) before scoring.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Calibrate {
    /// Run with `bash -c` in the workspace, with the session's environment
    /// (the preparation's venv first on PATH, no hidden paths).
    pub setup: String,
    /// Duration text; the setup is killed (with its process group) after it.
    #[serde(default = "default_prepare_timeout")]
    pub timeout: String,
    /// Also run it in every new session before its starting score (under
    /// the scoring pause, off the clock): for a starting solution whose
    /// scored artifact a build step makes, so that every session's log
    /// starts with a valid entry at about 0.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub in_sessions: bool,
}

/// `[recording]`: terminal output, resizes and exits are always recorded;
/// keystrokes only when `input` is true (the default).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecordingSettings {
    #[serde(default = "default_true")]
    pub input: bool,
}

impl Default for RecordingSettings {
    fn default() -> Self {
        RecordingSettings { input: true }
    }
}

fn default_true() -> bool {
    true
}

fn default_instructions() -> String {
    "instructions.md".to_string()
}

fn default_workspace() -> String {
    "workspace".to_string()
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Budget {
    /// Duration text, e.g. "8h".
    pub default: String,
    #[serde(default)]
    pub presets: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Hardware {
    #[serde(default)]
    pub gpus: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_model: Option<String>,
    #[serde(default = "default_cpus")]
    pub cpus: u32,
    #[serde(default)]
    pub memory_gb: f64,
}

fn default_cpus() -> u32 {
    1
}

impl Default for Hardware {
    fn default() -> Self {
        Hardware {
            gpus: 0,
            gpu_model: None,
            cpus: default_cpus(),
            memory_gb: 0.0,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scoring {
    /// argv; `{env}` and `{workspace}` are substituted.
    pub command: Vec<String>,
    /// Duration text, e.g. "5m".
    pub timeout: String,
    pub metric: Metric,
    /// "identity", "log" or "log-minus:C".
    #[serde(default = "default_transform")]
    pub transform: String,
    pub starting: f64,
    pub reference: f64,
    /// "best" or "last".
    #[serde(default = "default_aggregate")]
    pub aggregate: String,
    #[serde(default = "default_visible")]
    pub visible: bool,
    /// Workspace-relative paths the participant must not change.
    #[serde(default)]
    pub protected: Vec<String>,
    /// Variables of the server's environment the scorer's own process gets
    /// (judge keys and the like); nothing else of the operator's reaches it,
    /// and participant code it runs gets none of them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pass_env: Vec<String>,
    /// The metric depends on the machine's speed (a timing): `starting` and
    /// `reference` are measured on each machine (`environment::calibration`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub per_machine: bool,
    /// Intermediate scores are measured with the session's own processes
    /// stopped (the clock runs on): nothing of the participant's computes
    /// beside a timing (`docs/timing.md`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub exclusive: bool,
}

fn default_transform() -> String {
    "identity".to_string()
}

fn default_aggregate() -> String {
    "best".to_string()
}

fn default_visible() -> bool {
    true
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Metric {
    pub name: String,
    #[serde(default)]
    pub unit: String,
}

/// Overrides for one named scoring profile; unset fields fall back to `[scoring]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub starting: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
    /// Extra environment variables for the scorer.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Extra environment variables for the `[prepare]` command under this profile.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub prepare_env: BTreeMap<String, String>,
    /// Replaces `[prepare] requirements` under this profile (e.g. a full
    /// scale that needs packages the smoke scale does not): its own venv.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requirements: Option<String>,
    /// Replaces `scoring.transform` under this profile (e.g. a smoke corpus's own loss floor).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transform: Option<String>,
    /// Replaces `[hardware]` under this profile (a CPU smoke scale of a GPU task).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hardware: Option<Hardware>,
}

/// `[prepare]`: a virtual environment built from a requirements file and/or
/// a command that writes hidden data into the preparation folder.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Prepare {
    /// pip requirements file, relative to the environment folder; when set, a
    /// venv is made with `<python> -m venv` and the requirements installed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requirements: Option<String>,
    /// The interpreter that makes the venv.
    #[serde(default = "default_python")]
    pub python: String,
    /// argv run after the venv exists; `{python}`, `{env}` and `{prepared}`
    /// are substituted.
    #[serde(default)]
    pub command: Vec<String>,
    /// Duration text; bounds each step (pip install, command) separately.
    #[serde(default = "default_prepare_timeout")]
    pub timeout: String,
}

fn default_python() -> String {
    "python3".to_string()
}

fn default_prepare_timeout() -> String {
    "1h".to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str = r#"
id = "x"
title = "X"
summary = "An example."
[budget]
default = "1h"
[scoring]
command = ["true"]
timeout = "1m"
metric = { name = "loss" }
starting = 2
reference = 1
"#;

    #[test]
    fn defaults_fill_optional_fields() {
        let m: Manifest = toml::from_str(MINIMAL).unwrap();
        assert_eq!(m.instructions, "instructions.md");
        assert_eq!(m.workspace, "workspace");
        assert_eq!(m.default_profile, None);
        assert_eq!(m.hardware, Hardware::default());
        assert_eq!(m.scoring.transform, "identity");
        assert_eq!(m.scoring.aggregate, "best");
        assert!(m.scoring.visible);
        assert!(m.scoring.protected.is_empty());
        assert_eq!(m.scoring.metric.unit, "");
        assert_eq!(m.scoring.starting, 2.0);
        assert!(m.profiles.is_empty());
        assert!(m.budget.presets.is_empty());
        assert_eq!(m.prepare, None);
    }

    #[test]
    fn prepare_defaults() {
        let m: Manifest =
            toml::from_str(&format!("{MINIMAL}[prepare]\nrequirements = \"r.txt\"\n")).unwrap();
        let prepare = m.prepare.unwrap();
        assert_eq!(prepare.requirements.as_deref(), Some("r.txt"));
        assert_eq!(prepare.python, "python3");
        assert!(prepare.command.is_empty());
        assert_eq!(prepare.timeout, "1h");
    }

    #[test]
    fn unknown_keys_are_rejected_at_any_depth() {
        let cases = [
            (MINIMAL.replace("id = ", "colour = 1\nid = "), "colour"),
            (
                MINIMAL.replace("default = \"1h\"", "default = \"1h\"\nmax = 2"),
                "max",
            ),
            (
                MINIMAL.replace("{ name = \"loss\" }", "{ name = \"loss\", u = 1 }"),
                "u",
            ),
            (format!("{MINIMAL}[profiles.smoke]\nstart = 1.0\n"), "start"),
            (format!("{MINIMAL}[hardware]\ntpus = 1\n"), "tpus"),
            (
                format!("{MINIMAL}[prepare]\nrequirement = \"r\"\n"),
                "requirement",
            ),
        ];
        for (text, key) in cases {
            let err = toml::from_str::<Manifest>(&text).unwrap_err().to_string();
            assert!(err.contains(&format!("unknown field `{key}`")), "{err}");
        }
    }
}
