//! What `show`, `sessions` and `score` return: typed views of a session,
//! built for an audience (participants never see hidden values or details).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::environment::normalize::aggregate;
use crate::session::state::Phase;
use crate::session::state::ScoreRecord;
use crate::session::{
    EndReason, Kind, PauseReason, ScoreEntry, ScorePhase, SessionMeta, SessionState,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Audience {
    /// Proctors, admins and the CLI on the admin socket: everything.
    Admin,
    /// The session's own participant: no details, no scorer output, and no values when hidden.
    Participant,
}

const HIDDEN_MESSAGE: &str = "score recorded (hidden)";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScoreView {
    pub seq: u64,
    /// The scoring run's number: 0 for the starting score, then 1, 2, ….
    #[serde(default)]
    pub run: u32,
    pub at: DateTime<Utc>,
    pub active_s: f64,
    pub phase: ScorePhase,
    pub raw: Option<f64>,
    pub normalized: Option<f64>,
    pub valid: Option<bool>,
    pub message: String,
    #[serde(default)]
    pub hidden: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    pub duration_ms: u64,
}

/// What an audience may see of a score entry: the one place this rule
/// lives. Participants never see the scorer's details or output, and
/// nothing of a hidden score but that one was recorded. The server filters
/// every event and view it sends through this; clients build their copies
/// from what it sent ([`ScoreView::from_entry`]).
pub fn filter_entry(entry: &mut ScoreEntry, visible: bool, audience: Audience) {
    if audience == Audience::Admin {
        return;
    }
    entry.details = serde_json::Value::Null;
    entry.output.clear();
    if !visible {
        entry.raw = None;
        entry.normalized = None;
        entry.valid = false;
        entry.scorer_message = serde_json::Value::Null;
        entry.message = HIDDEN_MESSAGE.into();
    }
}

impl ScoreView {
    pub fn build(record: &ScoreRecord, visible: bool, audience: Audience) -> ScoreView {
        ScoreView::from_entry(
            ScoreSlot {
                seq: record.seq,
                run: record.run,
                at: record.at,
                active_ms: record.active_ms,
            },
            &record.entry,
            visible,
            audience,
        )
    }

    /// The view of one entry of the log, for `audience` (filtered here too:
    /// an entry already filtered by the server stays as it was).
    pub fn from_entry(
        slot: ScoreSlot,
        entry: &ScoreEntry,
        visible: bool,
        audience: Audience,
    ) -> ScoreView {
        let mut e = entry.clone();
        filter_entry(&mut e, visible, audience);
        let admin = audience == Audience::Admin;
        ScoreView {
            seq: slot.seq,
            run: slot.run,
            at: slot.at,
            active_s: slot.active_ms as f64 / 1000.0,
            phase: e.phase,
            raw: e.raw,
            normalized: e.normalized,
            valid: (visible || admin).then_some(e.valid),
            message: e.message,
            hidden: !visible,
            details: admin.then_some(e.details),
            output: admin.then_some(e.output),
            duration_ms: e.duration_ms,
        }
    }
}

/// Where an entry sits in the log: its event's sequence number, its run
/// number, and when it was taken.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScoreSlot {
    pub seq: u64,
    pub run: u32,
    pub at: DateTime<Utc>,
    pub active_ms: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PauseView {
    pub reason: PauseReason,
    pub by: String,
    pub note: Option<String>,
    pub start: DateTime<Utc>,
    pub end: Option<DateTime<Utc>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExtensionView {
    pub at: DateTime<Utc>,
    pub by_s: f64,
    pub reason: String,
    pub by: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NoteView {
    pub at: DateTime<Utc>,
    pub active_s: f64,
    pub text: String,
    pub by: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct FinalScore {
    pub raw: f64,
    pub normalized: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionView {
    pub id: String,
    pub environment: String,
    pub title: String,
    #[serde(default)]
    pub summary: String,
    pub profile: Option<String>,
    pub participant: String,
    pub kind: Kind,
    pub state: Phase,
    pub pause_reason: Option<PauseReason>,
    pub end_reason: Option<EndReason>,
    /// Why the session was ended, in the ender's words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_note: Option<String>,
    pub workspace: String,
    pub budget_s: f64,
    pub active_s: f64,
    pub remaining_s: f64,
    pub created_at: DateTime<Utc>,
    pub started_at: Option<DateTime<Utc>>,
    pub ended_at: Option<DateTime<Utc>>,
    pub metric: String,
    pub unit: String,
    pub visible: bool,
    pub aggregate: String,
    pub allow_missing_hardware: bool,
    pub hardware_missing: Vec<String>,
    /// Whether keystrokes are recorded (terminal output always is).
    #[serde(default = "default_true")]
    pub records_input: bool,
    /// Workspace files the participant must not change.
    #[serde(default)]
    pub protected: Vec<String>,
    pub pauses: Vec<PauseView>,
    pub extensions: Vec<ExtensionView>,
    pub notes: Vec<NoteView>,
    pub score_count: usize,
    /// The last keystroke into a shell or exec (since the server started).
    #[serde(default)]
    pub last_activity_at: Option<DateTime<Utc>>,
    /// When the scoring run in progress began, if one is running.
    #[serde(default)]
    pub scoring_since: Option<DateTime<Utc>>,
    /// How the server runs this session's processes: `none` or `bwrap`
    /// (an isolated jail, docs/sandbox.md); empty from an older server.
    #[serde(default)]
    pub isolation: String,
    /// What pausing freezes and ending kills by: `cgroup` (nothing can
    /// leave it), `pidns` (the jail's pid namespace), `marker` (an
    /// environment variable a process can drop) or `container` (the
    /// engine's pause and removal); empty from an older server.
    #[serde(default)]
    pub containment: String,
    /// The sandbox backend: `local`, `bwrap` or `docker`; empty from an older server.
    #[serde(default)]
    pub sandbox: String,
    /// The machine its processes run on: `local` (the server's), or a host's name.
    #[serde(default)]
    pub host: String,
    /// Why the session is not isolated, when it fell back to `local`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox_warning: Option<String>,
    /// The devices it holds (docs/hardware.md); None while queued, and for
    /// sessions made before grants named devices.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant: Option<crate::hardware::DeviceGrant>,
    /// Whether its GPUs are hidden from it (`enforced`: only its device
    /// nodes exist in its jail or container) or only not named to it
    /// (`advisory`: a local session sees every device node).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub gpu_isolation: String,
    /// Its GPUs' use at the last sample (every few seconds, from
    /// `nvidia-smi`), and the last time one of them was seen busy (or when
    /// they were first sampled): for the proctor's idle-GPU alert.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gpu_use: Vec<crate::hardware::gpu_use::GpuUse>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_used_at: Option<DateTime<Utc>>,
    /// While queued: its place in line (1 = next) and what it waits for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_position: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting_for: Option<String>,
    /// Scored from an answer given at submit (a Task Standard family's
    /// `score(t, submission)`): no scores while it runs.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub answer_scored: bool,
    /// Its scores are the environment's raw units (a family without
    /// starting and reference scores): `normalized` repeats `raw`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unnormalized: bool,
    /// Its intermediate scores are measured with its own processes stopped
    /// (`[scoring] exclusive`): shells wait while one runs.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub exclusive_scoring: bool,
    /// sha256 of the environment's definition the session was made with
    /// (its manifest; a family's whole folder): runs of different versions
    /// are not compared by default. Empty from an older server.
    #[serde(default)]
    pub manifest_hash: String,
    /// Whether a lower raw value is better (runtimes, losses): ties of the
    /// normalized score go to the better raw value.
    #[serde(default)]
    pub lower_is_better: bool,
    /// The `starting` and `reference` its scores are normalized with, and
    /// where they came from (hidden with the scores).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub normalization: Option<NormalizationView>,
    /// The agent behind an agent session (name, model, scaffold).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<crate::session::AgentIdentity>,
    /// The campaign run it was made for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub campaign: Option<crate::session::CampaignRunRef>,
    /// Tokens and cost the agent reported (`usage` and `model_call` events).
    #[serde(default)]
    pub usage: crate::session::UsageTotals,
    /// Its token and cost limits.
    #[serde(default)]
    pub limits: crate::session::RunLimits,
    /// Where an imported run came from (read-only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub imported: Option<crate::session::ImportedFrom>,
    /// Omitted in `sessions` listings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scores: Option<Vec<ScoreView>>,
    #[serde(rename = "final")]
    pub final_score: Option<FinalScore>,
}

/// A session's normalization values: the manifest's, or measured on the
/// machine (`calibration`, docs/timing.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NormalizationView {
    pub starting: f64,
    pub reference: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calibration: Option<crate::environment::calibration::CalibrationSource>,
}

impl SessionView {
    pub fn build(
        meta: &SessionMeta,
        state: &SessionState,
        active_ms: u64,
        audience: Audience,
        with_scores: bool,
    ) -> SessionView {
        let visible = meta.scoring.visible;
        let show_values = visible || audience == Audience::Admin;
        let final_score = show_values
            .then(|| {
                aggregate(
                    meta.scoring.aggregate,
                    &state.valid_scores(),
                    meta.scoring.normalizer.lower_is_better(),
                )
            })
            .flatten()
            .map(|(raw, normalized)| FinalScore { raw, normalized });
        SessionView {
            id: meta.id.clone(),
            environment: meta.env_id.clone(),
            title: meta.env_title.clone(),
            summary: meta.env_summary.clone(),
            profile: meta.profile.clone(),
            participant: meta.participant.clone(),
            kind: meta.kind,
            state: state.phase(),
            pause_reason: state
                .open_pause()
                .filter(|_| state.started_at.is_some())
                .map(|p| p.reason),
            end_reason: state.end_reason,
            end_note: state.end_note.clone(),
            workspace: meta.workspace.display().to_string(),
            budget_s: state.budget_ms as f64 / 1000.0,
            active_s: active_ms as f64 / 1000.0,
            remaining_s: state.remaining_ms(active_ms) as f64 / 1000.0,
            created_at: meta.created_at,
            started_at: state.started_at,
            ended_at: state.ended_at,
            metric: meta.scoring.metric_name.clone(),
            unit: meta.scoring.metric_unit.clone(),
            visible,
            aggregate: format!("{:?}", meta.scoring.aggregate).to_lowercase(),
            allow_missing_hardware: meta.allow_missing_hardware,
            hardware_missing: meta.hardware_missing.clone(),
            protected: meta.scoring.protected.clone(),
            records_input: meta.record_input,
            pauses: state
                .pauses
                .iter()
                .map(|p| PauseView {
                    reason: p.reason,
                    by: p.by.clone(),
                    note: p.note.clone(),
                    start: p.start,
                    end: p.end,
                })
                .collect(),
            extensions: state
                .extensions
                .iter()
                .map(|e| ExtensionView {
                    at: e.at,
                    by_s: e.by_ms as f64 / 1000.0,
                    reason: e.reason.clone(),
                    by: e.by.clone(),
                })
                .collect(),
            notes: state
                .notes
                .iter()
                .map(|n| NoteView {
                    at: n.at,
                    active_s: n.active_ms as f64 / 1000.0,
                    text: n.text.clone(),
                    by: n.by.clone(),
                })
                .collect(),
            score_count: state.scores.len(),
            last_activity_at: None,
            scoring_since: None,
            isolation: String::new(),
            containment: String::new(),
            sandbox: String::new(),
            host: String::new(),
            sandbox_warning: meta.sandbox_warning.clone(),
            grant: state.grant.clone(),
            gpu_isolation: String::new(),
            gpu_use: Vec::new(),
            gpu_used_at: None,
            queue_position: None,
            waiting_for: state
                .queued
                .as_ref()
                .filter(|_| state.waits_for_hardware())
                .map(|q| q.waiting_for.clone()),
            answer_scored: !meta.scoring.intermediate,
            unnormalized: meta.scoring.unnormalized,
            exclusive_scoring: meta.scoring.exclusive,
            lower_is_better: meta.scoring.normalizer.lower_is_better(),
            manifest_hash: meta.manifest_hash.clone(),
            agent: meta.agent.clone(),
            campaign: meta.campaign.clone(),
            usage: state.usage,
            limits: meta.limits,
            imported: meta.imported.clone(),
            normalization: (show_values && !meta.scoring.unnormalized).then(|| NormalizationView {
                starting: meta.scoring.normalizer.starting,
                reference: meta.scoring.normalizer.reference,
                calibration: meta.scoring.calibration.clone(),
            }),
            scores: with_scores.then(|| {
                state
                    .scores
                    .iter()
                    .map(|s| ScoreView::build(s, visible, audience))
                    .collect()
            }),
            final_score,
        }
    }
}

/// Reply to `shell_open` / an item of `shell_list`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShellInfo {
    pub shell: u32,
    pub cols: u16,
    pub rows: u16,
    pub alive: bool,
    pub has_driver: bool,
    /// When input last reached the shell (none yet, or an older server).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_input_at: Option<DateTime<Utc>>,
}

/// Reply to `shell_attach`: the current screen, so the client can draw it at once.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttachReply {
    pub shell: u32,
    pub cols: u16,
    pub rows: u16,
    /// Escape sequences that redraw the current screen (base64).
    pub screen: String,
    pub alive: bool,
    /// Lines of history the server keeps of this shell (what `screen`
    /// holds at most): a client keeps as many, so that what it scrolls
    /// through live is what it gets back on attaching again. None from an
    /// older server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scrollback_lines: Option<usize>,
}

/// Reply to `exec`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExecReply {
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub stdout_truncated: bool,
    pub stderr_truncated: bool,
    pub timed_out: bool,
    pub duration_ms: u64,
}

/// Reply to `hello`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HelloReply {
    pub version: u32,
    pub server: String,
    pub role: String,
    pub session: Option<String>,
}

/// Reply to `credentials`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Credentials {
    pub session: String,
    pub socket: String,
    pub token: String,
}

/// One recorded terminal chunk (reply to `recording`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChunkView {
    pub seq: u64,
    /// `output`, `input`, `resize` (data: cols u16 BE, rows u16 BE) or `exit` (data: i32 BE).
    pub kind: String,
    pub at: DateTime<Utc>,
    pub active_ms: u64,
    /// base64
    pub data: String,
}

/// Reply to `recording`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordingPage {
    pub chunks: Vec<ChunkView>,
    /// Pass as `from` for the next page; null at the end.
    pub next: Option<u64>,
}

fn default_true() -> bool {
    true
}

/// The reply of a request that only says it was done (`{}`): shell input
/// and resize with an id, detach, close, subscribe, usage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Done {}

/// `instructions`: what the participant was given.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InstructionsReply {
    pub title: String,
    pub instructions: String,
}

/// `shutdown`: the server stops once this is on its way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShutdownReply {
    pub stopping: bool,
}

/// `hosts`: one machine sessions run on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostView {
    pub name: String,
    pub gpus: Vec<HostGpuView>,
    /// Cores sessions may be given, and those reserved for the system.
    pub cpus: Vec<u32>,
    pub reserved_cpus: Vec<u32>,
    /// Cores no session holds.
    pub cpus_free: Vec<u32>,
    /// GiB sessions may be given (None: unknown), and not yet granted.
    pub memory_gb: Option<f64>,
    pub memory_free_gb: Option<f64>,
    /// Sessions holding hardware here, and sessions waiting for it.
    pub sessions: Vec<String>,
    pub queued: Vec<String>,
}

/// One GPU of a host and who holds it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostGpuView {
    pub index: u32,
    pub uuid: String,
    pub model: String,
    pub memory_mib: u64,
    /// The session holding it.
    pub session: Option<String>,
    /// Its use at the last sample (None: not sampled).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub utilization_pct: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_used_mib: Option<u64>,
}

/// `backup`: where the copy went and what it holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BackupReply {
    pub dir: String,
    pub sessions: usize,
    pub trees: usize,
}
