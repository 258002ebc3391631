//! What is fixed about a session when it is created.

use std::collections::BTreeMap;
use std::path::PathBuf;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::environment::ScoringPlan;
use crate::environment::family::TaskRef;

/// Who does a session. Humans sort before agents in every table.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    clap::ValueEnum,
)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Human,
    Agent,
}

impl Kind {
    pub const BOTH: [Kind; 2] = [Kind::Human, Kind::Agent];

    pub fn as_str(&self) -> &'static str {
        match self {
            Kind::Human => "human",
            Kind::Agent => "agent",
        }
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Kind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "human" => Ok(Kind::Human),
            "agent" => Ok(Kind::Agent),
            other => Err(format!(
                "unknown session kind {other:?} (expected human or agent)"
            )),
        }
    }
}

/// Immutable facts of a session, stored beside its event log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionMeta {
    pub id: String,
    pub env_id: String,
    pub env_title: String,
    #[serde(default)]
    pub env_summary: String,
    pub env_dir: PathBuf,
    pub manifest_hash: String,
    pub profile: Option<String>,
    pub participant: String,
    pub kind: Kind,
    /// The budget at creation; extensions are events.
    pub budget_ms: u64,
    pub workspace: PathBuf,
    pub created_at: DateTime<Utc>,
    pub allow_missing_hardware: bool,
    /// What the hardware check found missing (recorded when allowed anyway).
    pub hardware_missing: Vec<String>,
    /// sha256 of each protected workspace file at creation.
    pub protected: BTreeMap<String, String>,
    /// The scoring plan at creation, so that the whole log is normalized alike.
    pub scoring: ScoringPlan,
    /// Credential of the participant; reaches only this session.
    pub token: String,
    /// Marker inherited by every process of the session (see `sandbox`).
    pub sandbox_tag: String,
    /// Whether keystrokes are recorded (output always is).
    #[serde(default = "recorded_by_default")]
    pub record_input: bool,
    /// The environment's preparation on this machine (venv, hidden data).
    #[serde(default)]
    pub prepared: Option<crate::environment::prepare::Prepared>,
    /// Where its processes run: `local`, `bwrap` or `docker`. Sessions made before
    /// the choice was per session have none: the server's default then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<String>,
    /// Why this session is not isolated, when it fell back to `local`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox_warning: Option<String>,
    /// For container sessions: the environment's image and network, as
    /// they were when the session was made (absent: the base image, none).
    #[serde(default)]
    pub container: crate::environment::manifest::SandboxSettings,
    /// Sessions made before grants named devices: what their container
    /// could use, as counts. Newer sessions have their grant in the log
    /// (`EventKind::Granted`); None for them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant: Option<crate::hardware::LegacyGrant>,
    /// For a Task Standard family task: its family, image, instructions
    /// and how it is scored (`taskstd`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_family: Option<FamilySession>,
    /// The agent behind an agent session, when its creator named one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<super::AgentIdentity>,
    /// The campaign run this session was made for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub campaign: Option<super::CampaignRunRef>,
    /// Token and cost limits (agents); crossing one ends the session.
    #[serde(default)]
    pub limits: super::RunLimits,
    /// Where an imported run came from (`rebench import`): such a session
    /// is read-only, and ran nothing here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub imported: Option<super::ImportedFrom>,
    /// The instructions as the run got them, where they are not the
    /// environment's file (an imported run's input).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
}

impl SessionMeta {
    /// A campaign run driven by the built-in scaffold: only the campaign
    /// (an admin connection) pauses its clock.
    pub fn clock_kept_by_campaign(&self) -> bool {
        self.campaign.is_some()
            && self
                .agent
                .as_ref()
                .is_some_and(|a| a.scaffold == BUILTIN_SCAFFOLD)
    }
}

/// The scaffold name of sessions the built-in scaffold drives.
pub const BUILTIN_SCAFFOLD: &str = "builtin";

fn recorded_by_default() -> bool {
    true
}

/// What a family task's session keeps of its family, fixed at creation
/// (`crate::taskstd` makes it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FamilySession {
    pub task: TaskRef,
    /// The family image the container was made from.
    pub image: String,
    /// `get_instructions(t)`, as the participant was given them.
    pub instructions: String,
    /// `get_permissions(t)`.
    pub permissions: Vec<String>,
    /// The variables the family declared it needs (values never stored).
    pub required_env: Vec<String>,
    /// Which helper operation takes the final score: `final`
    /// (intermediate_score, then aggregate_scores over the log), `score`
    /// (with the submission) or `intermediate_score`.
    pub final_op: String,
    /// Whether it has `teardown(t)`, run when the session ends.
    pub teardown: bool,
}
