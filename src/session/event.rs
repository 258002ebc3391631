//! The typed, append-only event log of a session. Every state change is an
//! event; the session summary is derived from the log (see `state`).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// The runner's name in the event log (`by`) for what it does by itself.
pub const SYSTEM: &str = "rebench";

/// One entry of a session's event log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    pub seq: u64,
    pub at: DateTime<Utc>,
    /// Active (budget-counted) time when the event happened.
    pub active_ms: u64,
    #[serde(flatten)]
    pub kind: EventKind,
    /// Who really asked, as the kernel says (an admin connection's peer):
    /// the `by` names in `kind` are typed by the client and prove nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<Origin>,
}

/// The process behind an admin connection, from its socket's peer
/// credentials (SO_PEERCRED) when it connected.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Origin {
    pub uid: u32,
    pub pid: i32,
    /// Its command name (`/proc/PID/comm`) at connect time.
    pub process: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum EventKind {
    /// The session exists; its metadata is stored beside the log.
    Created {
        by: String,
    },
    /// The hardware it needs is taken: it waits in the queue, off the
    /// clock, until it is granted (`Granted`).
    Queued {
        /// What it waits for, when it was queued.
        waiting_for: String,
        /// Higher goes first (`--priority`).
        #[serde(default)]
        priority: i32,
        /// What it asked for (what the queue grants it when it fits).
        needs: crate::hardware::Request,
    },
    /// The devices it holds from now on (before any of its processes starts).
    Granted {
        grant: crate::hardware::DeviceGrant,
    },
    /// The clock started (the participant pressed Enter / `rebench begin`).
    Started {
        by: String,
    },
    Paused {
        reason: PauseReason,
        by: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        note: Option<String>,
    },
    Resumed {
        by: String,
    },
    /// The budget changed: more time, or less (`by_ms` < 0, never below
    /// the time already used).
    Extended {
        by_ms: i64,
        reason: String,
        by: String,
    },
    /// Budget warning (1 h, 15 min, 5 min left).
    Warning {
        threshold_s: u64,
        remaining_s: u64,
    },
    Scored {
        entry: Box<ScoreEntry>,
    },
    Note {
        text: String,
        by: String,
    },
    ShellOpened {
        shell: u32,
    },
    ShellExited {
        shell: u32,
        code: Option<i32>,
        signal: Option<i32>,
    },
    Exec(Box<ExecRecord>),
    /// An agent's call to its model (the built-in scaffold records each).
    ModelCall(Box<super::agent::ModelCallRecord>),
    Usage {
        tokens_in: u64,
        tokens_out: u64,
        cost_usd: f64,
    },
    Ended {
        reason: EndReason,
        by: String,
        /// Why, in the ender's words (a proctor's end): the participant's
        /// summary shows it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        note: Option<String>,
    },
}

impl EventKind {
    /// The snake_case name used as the `type` tag.
    pub fn name(&self) -> &'static str {
        match self {
            EventKind::Created { .. } => "created",
            EventKind::Queued { .. } => "queued",
            EventKind::Granted { .. } => "granted",
            EventKind::Started { .. } => "started",
            EventKind::Paused { .. } => "paused",
            EventKind::Resumed { .. } => "resumed",
            EventKind::Extended { .. } => "extended",
            EventKind::Warning { .. } => "warning",
            EventKind::Scored { .. } => "scored",
            EventKind::Note { .. } => "note",
            EventKind::ShellOpened { .. } => "shell_opened",
            EventKind::ShellExited { .. } => "shell_exited",
            EventKind::Exec(_) => "exec",
            EventKind::ModelCall(_) => "model_call",
            EventKind::Usage { .. } => "usage",
            EventKind::Ended { .. } => "ended",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PauseReason {
    Break,
    Proctor,
    Scoring,
    TechnicalIssue,
    ApiOutage,
    CrashRecovery,
    /// An orderly stop of the server (`rebench shutdown`, SIGTERM): unlike
    /// a crash, no clock time is lost and nothing is suspicious.
    ServerShutdown,
}

impl PauseReason {
    pub const ALL: [PauseReason; 7] = [
        PauseReason::Break,
        PauseReason::Proctor,
        PauseReason::Scoring,
        PauseReason::TechnicalIssue,
        PauseReason::ApiOutage,
        PauseReason::CrashRecovery,
        PauseReason::ServerShutdown,
    ];

    pub fn as_str(&self) -> &'static str {
        match self {
            PauseReason::Break => "break",
            PauseReason::Proctor => "proctor",
            PauseReason::Scoring => "scoring",
            PauseReason::TechnicalIssue => "technical_issue",
            PauseReason::ApiOutage => "api_outage",
            PauseReason::CrashRecovery => "crash_recovery",
            PauseReason::ServerShutdown => "server_shutdown",
        }
    }

    /// Reasons a participant may pause for themselves.
    /// Reasons only the server itself records (a scoring run's pause, a
    /// crash found at start, an orderly stop): nobody may ask for them, or a
    /// pause could pass for a crash (a CRASH alert) or a scoring run.
    pub fn system_only(&self) -> bool {
        matches!(
            self,
            PauseReason::Scoring | PauseReason::CrashRecovery | PauseReason::ServerShutdown
        )
    }

    pub fn participant_may_pause(&self) -> bool {
        matches!(
            self,
            PauseReason::Break | PauseReason::TechnicalIssue | PauseReason::ApiOutage
        )
    }

    /// Pauses a participant may end themselves (not a proctor's, not the system's scoring).
    pub fn participant_may_resume(&self) -> bool {
        self.participant_may_pause()
            || matches!(
                self,
                PauseReason::CrashRecovery | PauseReason::ServerShutdown
            )
    }
}

impl std::str::FromStr for PauseReason {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let wanted = s.replace('-', "_");
        PauseReason::ALL
            .into_iter()
            .find(|r| r.as_str() == wanted)
            .ok_or_else(|| {
                // The server's own reasons are not for asking.
                let known: Vec<&str> = PauseReason::ALL
                    .iter()
                    .filter(|r| !r.system_only())
                    .map(|r| r.as_str())
                    .collect();
                format!(
                    "unknown pause reason {s:?} (expected one of {})",
                    known.join(", ")
                )
            })
    }
}

impl PauseReason {
    /// In words, for screens: `technical issue`, `ended by proctor`.
    pub fn label(&self) -> String {
        self.as_str().replace('_', " ")
    }
}

impl std::fmt::Display for PauseReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EndReason {
    Submitted,
    BudgetExhausted,
    Abandoned,
    EndedByProctor,
    /// An agent run used its token limit.
    TokenLimit,
    /// An agent run used its cost limit.
    CostLimit,
}

impl EndReason {
    pub fn as_str(&self) -> &'static str {
        match self {
            EndReason::Submitted => "submitted",
            EndReason::BudgetExhausted => "budget_exhausted",
            EndReason::Abandoned => "abandoned",
            EndReason::EndedByProctor => "ended_by_proctor",
            EndReason::TokenLimit => "token_limit",
            EndReason::CostLimit => "cost_limit",
        }
    }
}

impl EndReason {
    /// In words, for screens: `technical issue`, `ended by proctor`.
    pub fn label(&self) -> String {
        self.as_str().replace('_', " ")
    }
}

impl std::fmt::Display for EndReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a score was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScorePhase {
    /// The starting solution, before the clock starts.
    Starting,
    /// Asked for during the session.
    Intermediate,
    /// Taken at submit or budget exhaustion, not counted against the budget.
    Final,
}

impl ScorePhase {
    pub fn as_str(&self) -> &'static str {
        match self {
            ScorePhase::Starting => "starting",
            ScorePhase::Intermediate => "intermediate",
            ScorePhase::Final => "final",
        }
    }
}

impl std::fmt::Display for ScorePhase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One entry of the score log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScoreEntry {
    pub phase: ScorePhase,
    pub requested_by: String,
    /// Active time when the scoring run started (the solution's state at that moment).
    pub requested_active_ms: u64,
    pub valid: bool,
    pub raw: Option<f64>,
    pub normalized: Option<f64>,
    /// Short human text (the scorer's message, or why the entry is invalid).
    pub message: String,
    /// The scorer's `message` value as it gave it.
    #[serde(default)]
    pub scorer_message: serde_json::Value,
    /// Hidden from participants.
    #[serde(default)]
    pub details: serde_json::Value,
    /// The scorer's output, bounded. Hidden from participants.
    #[serde(default)]
    pub output: String,
    pub exit_code: Option<i32>,
    pub duration_ms: u64,
}

/// An agent's command and what came of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExecRecord {
    pub command: String,
    pub cwd: String,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub timed_out: bool,
    pub duration_ms: u64,
    pub stdout: String,
    pub stderr: String,
    pub stdout_truncated: bool,
    pub stderr_truncated: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_serialize_with_a_type_tag_and_round_trip() {
        let ev = Event {
            seq: 3,
            at: DateTime::from_timestamp(1_700_000_000, 0).unwrap(),
            active_ms: 1234,
            origin: None,
            kind: EventKind::Paused {
                reason: PauseReason::TechnicalIssue,
                by: "alice".into(),
                note: None,
            },
        };
        let json = serde_json::to_value(&ev).unwrap();
        assert_eq!(json["type"], "paused");
        assert_eq!(json["reason"], "technical_issue");
        assert_eq!(json["seq"], 3);
        let back: Event = serde_json::from_value(json).unwrap();
        assert_eq!(back, ev);
    }

    #[test]
    fn pause_reasons_parse_with_dashes_or_underscores() {
        assert_eq!(
            "api-outage".parse::<PauseReason>().unwrap(),
            PauseReason::ApiOutage
        );
        assert_eq!("break".parse::<PauseReason>().unwrap(), PauseReason::Break);
        let err = "lunch".parse::<PauseReason>().unwrap_err();
        assert!(
            err.contains("lunch") && err.contains("technical_issue"),
            "{err}"
        );
    }
}
