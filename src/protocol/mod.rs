//! The client protocol: newline-delimited JSON over a Unix socket.
//!
//! Every client line is a [`ClientLine`] (`{"id": N, "op": "...", ...}`);
//! every server line is a [`ServerLine`] tagged by `"type"`: a `response` or
//! `error` for a request id, or a pushed `event`. The first request of a
//! connection must be `hello` with the protocol version. See docs/protocol.md.

pub mod campaign;
pub mod reduce;
pub mod views;

use serde::{Deserialize, Serialize};

use crate::session::{Event, Kind, PauseReason};
pub use campaign::{CampaignView, RunCounts, RunView};
pub use reduce::Applied;
pub use views::*;

pub const PROTOCOL_VERSION: u32 = 1;
/// Longest accepted line (a shell input or exec command never needs more).
pub const MAX_LINE_BYTES: usize = 4 * 1024 * 1024;
/// Longest line from an admin connection: an `import_run` carries a whole run.
pub const MAX_ADMIN_LINE_BYTES: usize = 256 * 1024 * 1024;
/// Most lines of history a server keeps of a shell (the operator's setting
/// is refused above it), and so most a client keeps whatever a reply says.
pub const MAX_SCROLLBACK_LINES: usize = 100_000;

/// The id of a request that wants no response (`shell_input`,
/// `shell_resize` from an interactive client): success is silent, and a
/// failure arrives as a push (`input_refused`) or an error line without id.
pub const NO_REPLY: u64 = 0;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClientLine {
    /// Matches the response to the request; `0` (or none): no response.
    #[serde(default)]
    pub id: u64,
    #[serde(flatten)]
    pub request: Request,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AttachMode {
    /// Sends input and resizes; one per shell (a new driver takes over).
    Driver,
    /// Read-only.
    Watch,
}

/// A client's request. Each has one reply type, here in `protocol`, that
/// clients decode into (`Client::call::<T>`):
/// `hello` → [`HelloReply`]; `create_session`, `begin`, `show`, `pause`,
/// `resume`, `extend`, `submit`, `end`, `note` → [`SessionView`];
/// `list_sessions` → `Vec<SessionView>`; `score` → [`ScoreView`];
/// `score_log` → `Vec<ScoreView>`; `instructions` → [`InstructionsReply`];
/// `exec` → [`ExecReply`]; `events` → `Vec<Event>`; `shell_open` →
/// [`ShellInfo`]; `shell_list` → `Vec<ShellInfo>`; `shell_attach` →
/// [`AttachReply`]; `recording` → [`RecordingPage`]; `recorded_shells` →
/// `Vec<u32>`; `credentials` → [`Credentials`]; `shutdown` →
/// [`ShutdownReply`]; `backup` → [`BackupReply`]; `hosts` →
/// `Vec<HostView>`; `campaign_open`,
/// `campaign_show`, `campaign_stop` → [`CampaignView`]; `campaign_list` →
/// `Vec<CampaignView>`; `import_run` → [`SessionView`]; the rest → [`Done`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum Request {
    Hello {
        version: u32,
        client: String,
        /// A participant token; without one the connection is admin (admin socket only).
        #[serde(default)]
        token: Option<String>,
    },
    CreateSession(Box<CreateSession>),
    Begin {
        session: String,
    },
    ListSessions,
    Show {
        session: String,
    },
    Score {
        session: String,
    },
    ScoreLog {
        session: String,
    },
    Pause {
        session: String,
        reason: PauseReason,
        #[serde(default)]
        note: Option<String>,
    },
    Resume {
        session: String,
    },
    /// Change the budget: `by_s` > 0 extends it, < 0 reduces it (never
    /// below the time already used).
    Extend {
        session: String,
        by_s: i64,
        reason: String,
    },
    Submit {
        session: String,
        /// The answer (a Task Standard family scored by `score(t,
        /// submission)`); recorded with the final score.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        answer: Option<String>,
    },
    End {
        session: String,
        #[serde(default)]
        reason: Option<String>,
        /// Why, for the participant's summary and the log.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        note: Option<String>,
    },
    Note {
        session: String,
        text: String,
    },
    /// A queued session's place in the hardware queue: higher goes first
    /// (admin only; a proctor moves a session up).
    Prioritize {
        session: String,
        priority: i32,
    },
    Instructions {
        session: String,
    },
    Exec {
        session: String,
        command: String,
        #[serde(default)]
        timeout_s: Option<f64>,
        #[serde(default)]
        cwd: Option<String>,
    },
    Usage {
        session: String,
        tokens_in: u64,
        tokens_out: u64,
        #[serde(default)]
        cost_usd: f64,
    },
    /// An agent's model call, for the session's log (the built-in scaffold
    /// records each; tokens and cost count as `usage` does).
    ModelCall {
        session: String,
        call: Box<crate::session::ModelCallRecord>,
    },
    Events {
        session: String,
    },
    ShellOpen {
        session: String,
        cols: u16,
        rows: u16,
    },
    ShellList {
        session: String,
    },
    ShellAttach {
        session: String,
        shell: u32,
        mode: AttachMode,
    },
    ShellDetach {
        session: String,
        shell: u32,
    },
    /// Input bytes, base64.
    ShellInput {
        session: String,
        shell: u32,
        data: String,
    },
    ShellResize {
        session: String,
        shell: u32,
        cols: u16,
        rows: u16,
    },
    ShellClose {
        session: String,
        shell: u32,
    },
    /// Push session events (`session: null` = every session; admin only).
    Subscribe {
        #[serde(default)]
        session: Option<String>,
    },
    /// A page of a shell's terminal recording (admin only).
    Recording {
        session: String,
        shell: u32,
        #[serde(default)]
        from: u64,
        #[serde(default)]
        limit: Option<u32>,
    },
    /// Shell numbers that have a recording (admin only).
    RecordedShells {
        session: String,
    },
    /// The participant socket and token of a session, for an agent scaffold (admin only).
    Credentials {
        session: String,
    },
    Shutdown,
    /// A consistent copy of the store into a new data dir `dir` (admin only).
    Backup {
        dir: String,
    },
    /// The machines sessions run on, their devices and who holds each
    /// (admin only).
    Hosts,
    /// Register a campaign, or find it again (the same plan), and become
    /// its runner for as long as this connection lasts: only the runner
    /// makes its sessions, and when the runner goes its running sessions
    /// are paused (admin only).
    CampaignOpen {
        plan: Box<crate::session::campaign::CampaignPlan>,
    },
    CampaignShow {
        name: String,
    },
    CampaignList,
    /// No run starts after this; running ones are ended as abandoned (admin only).
    CampaignStop {
        name: String,
    },
    /// A run made elsewhere, stored as an ended, read-only session (admin
    /// only; `rebench import`). A run is imported once.
    ImportRun(Box<ImportRun>),
}

impl Request {
    /// The session a request is about, if any (for participant checks).
    pub fn session(&self) -> Option<&str> {
        use Request::*;
        match self {
            Begin { session }
            | Show { session }
            | Score { session }
            | ScoreLog { session }
            | Pause { session, .. }
            | Resume { session }
            | Extend { session, .. }
            | Submit { session, .. }
            | End { session, .. }
            | Note { session, .. }
            | Prioritize { session, .. }
            | Instructions { session }
            | Exec { session, .. }
            | Usage { session, .. }
            | ModelCall { session, .. }
            | Events { session }
            | ShellOpen { session, .. }
            | ShellList { session }
            | ShellAttach { session, .. }
            | ShellDetach { session, .. }
            | ShellInput { session, .. }
            | ShellResize { session, .. }
            | ShellClose { session, .. }
            | Credentials { session }
            | Recording { session, .. }
            | RecordedShells { session } => Some(session),
            Subscribe { session } => session.as_deref(),
            Hello { .. }
            | CreateSession(_)
            | ListSessions
            | Shutdown
            | Backup { .. }
            | Hosts
            | CampaignOpen { .. }
            | CampaignShow { .. }
            | CampaignList
            | CampaignStop { .. }
            | ImportRun(_) => None,
        }
    }

    /// Operations that change nothing about a session (all an imported
    /// session allows).
    pub fn reads_only(&self) -> bool {
        use Request::*;
        matches!(
            self,
            Show { .. }
                | ScoreLog { .. }
                | Events { .. }
                | Instructions { .. }
                | ShellList { .. }
                | Subscribe { .. }
                | Recording { .. }
                | RecordedShells { .. }
                | Credentials { .. }
        )
    }

    /// Operations a participant token may perform on its own session.
    pub fn allowed_for_participant(&self) -> bool {
        use Request::*;
        matches!(
            self,
            Hello { .. }
                | Show { .. }
                | Score { .. }
                | ScoreLog { .. }
                | Pause { .. }
                | Resume { .. }
                | Submit { .. }
                | Begin { .. }
                | ShellClose { .. }
                | Note { .. }
                | Instructions { .. }
                | Exec { .. }
                | Usage { .. }
                | ModelCall { .. }
                | ShellOpen { .. }
                | ShellList { .. }
                | ShellAttach { .. }
                | ShellDetach { .. }
                | ShellInput { .. }
                | ShellResize { .. }
                | Subscribe { session: Some(_) }
        )
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateSession {
    /// Absolute path of the environment folder (the client resolves ids).
    pub env_dir: String,
    pub participant: String,
    #[serde(default = "default_kind")]
    pub kind: Kind,
    #[serde(default)]
    pub budget_s: Option<u64>,
    #[serde(default)]
    pub profile: Option<String>,
    #[serde(default)]
    pub allow_missing_hardware: bool,
    /// Keystrokes are not recorded (a cohort's setting; output always is).
    #[serde(default)]
    pub no_input_recording: bool,
    /// `local`, `bwrap` or `docker`; None: the server's default (the safest that works).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<String>,
    /// For a Task Standard family (`env_dir` is then the family's folder
    /// as found): the task's name. Its sessions run in containers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    /// The agent behind an agent session (for the per-agent report).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<crate::session::AgentIdentity>,
    /// The campaign run it is for: only that campaign's runner may ask,
    /// and a run gets one session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub campaign: Option<crate::session::CampaignRunRef>,
    #[serde(default)]
    pub limits: crate::session::RunLimits,
    /// Its place in the hardware queue when it has to wait: higher goes
    /// first (0 by default; set by whoever makes sessions, a proctor).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub priority: i32,
}

fn is_zero(n: &i32) -> bool {
    *n == 0
}

impl CreateSession {
    /// A request for a session of `env_dir` with every option at its default.
    pub fn new(env_dir: impl Into<String>, participant: impl Into<String>, kind: Kind) -> Self {
        CreateSession {
            env_dir: env_dir.into(),
            participant: participant.into(),
            kind,
            budget_s: None,
            profile: None,
            allow_missing_hardware: false,
            no_input_recording: false,
            sandbox: None,
            task: None,
            agent: None,
            campaign: None,
            limits: crate::session::RunLimits::default(),
            priority: 0,
        }
    }
}

/// A run made elsewhere (an Inspect sample), for `import_run`: the server
/// normalizes its raw scores with the environment's plan, as it does its own.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImportRun {
    pub source: crate::session::ImportedFrom,
    /// The environment's folder, resolved by the client; None for an
    /// environment rebench does not know (`environment` and `normalizer`
    /// then say what it is).
    #[serde(default)]
    pub env_dir: Option<String>,
    /// The environment's id (checked against the folder's, when there is one).
    pub environment: String,
    #[serde(default)]
    pub profile: Option<String>,
    /// Starting and reference raw scores, instead of the environment's.
    #[serde(default)]
    pub normalizer: Option<NormalizerValues>,
    pub participant: String,
    pub agent: crate::session::AgentIdentity,
    pub budget_ms: u64,
    pub created_at: chrono::DateTime<chrono::Utc>,
    /// The task's input as the run got it (its instructions).
    #[serde(default)]
    pub instructions: String,
    /// Everything after `created`, in order: `started` first and `ended`
    /// last; scores carry raw values only.
    pub events: Vec<ImportedEvent>,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NormalizerValues {
    pub starting: f64,
    pub reference: f64,
}

/// One event of an imported run, as it happened there.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ImportedEvent {
    pub at: chrono::DateTime<chrono::Utc>,
    pub active_ms: u64,
    #[serde(flatten)]
    pub kind: crate::session::EventKind,
}

fn default_kind() -> Kind {
    Kind::Human
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    BadRequest,
    VersionMismatch,
    NotAuthenticated,
    Forbidden,
    NotFound,
    InvalidState,
    Busy,
    Refused,
    Internal,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ServerLine {
    Response {
        id: u64,
        result: serde_json::Value,
    },
    Error {
        id: Option<u64>,
        code: ErrorCode,
        message: String,
    },
    Event {
        event: Push,
    },
}

/// Pushed to clients that attached a shell or subscribed to sessions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Push {
    SessionEvent {
        session: String,
        event: Event,
    },
    /// Shell output bytes, base64.
    ShellOutput {
        session: String,
        shell: u32,
        data: String,
    },
    ShellExited {
        session: String,
        shell: u32,
        code: Option<i32>,
        signal: Option<i32>,
    },
    /// A scoring run began (its entry arrives as a `scored` session event).
    ScoringStarted {
        session: String,
        phase: crate::session::ScorePhase,
        by: String,
    },
    /// This client no longer drives (or watches) the shell: another driver
    /// took over, or it `fell_behind` the output and was dropped rather than
    /// waited for (attach again to get the current screen).
    ShellDetached {
        session: String,
        shell: u32,
        reason: String,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        fell_behind: bool,
    },
    /// This connection fell behind and the server dropped `skipped` pushes
    /// (session events or scoring starts): re-read what you show (`show`,
    /// `list_sessions`). Nothing is lost from the store, only from this stream.
    EventsSkipped {
        skipped: u64,
    },
    /// To every connection: the server is stopping in order (`rebench
    /// shutdown`, SIGTERM). Running sessions are paused (`server_shutdown`,
    /// pushed before this to their subscribers), shells end, the connection
    /// closes next; sessions wait, paused, for the server to come back.
    ServerShutdown {
        message: String,
    },
    /// A `shell_input` or `shell_resize` sent without a reply (id 0) was
    /// refused: e.g. `forbidden` (this client is no longer the driver),
    /// `invalid_state` (the clock is not running).
    InputRefused {
        session: String,
        shell: u32,
        code: ErrorCode,
        message: String,
    },
}

/// Parses one client line, with an error message that says what is wrong.
pub fn parse_client_line(line: &str) -> Result<ClientLine, (Option<u64>, String)> {
    match serde_json::from_str::<ClientLine>(line) {
        Ok(l) => Ok(l),
        Err(e) => {
            // Recover the id, if there is one, so the error can be matched to its request.
            let id = serde_json::from_str::<serde_json::Value>(line)
                .ok()
                .and_then(|v| v.get("id").and_then(|i| i.as_u64()));
            let what = if id.is_none() && serde_json::from_str::<serde_json::Value>(line).is_err() {
                format!("malformed JSON: {e}")
            } else {
                format!("invalid request: {e}")
            };
            Err((id, what))
        }
    }
}

pub fn b64_encode(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

pub fn b64_decode(text: &str) -> Result<Vec<u8>, String> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .map_err(|e| format!("bad base64 data: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_round_trip_with_op_tags() {
        let line = r#"{"id":7,"op":"pause","session":"abc","reason":"break"}"#;
        let parsed = parse_client_line(line).unwrap();
        assert_eq!(parsed.id, 7);
        assert_eq!(
            parsed.request,
            Request::Pause {
                session: "abc".into(),
                reason: PauseReason::Break,
                note: None
            }
        );
        let back = serde_json::to_string(&parsed).unwrap();
        assert_eq!(parse_client_line(&back).unwrap(), parsed);
    }

    #[test]
    fn bad_lines_say_what_is_wrong() {
        let (id, msg) = parse_client_line("{not json").unwrap_err();
        assert_eq!(id, None);
        assert!(msg.starts_with("malformed JSON"), "{msg}");
        let (id, msg) = parse_client_line(r#"{"id":3,"op":"fly"}"#).unwrap_err();
        assert_eq!(id, Some(3));
        assert!(msg.contains("fly"), "{msg}");
        let (_, msg) =
            parse_client_line(r#"{"id":4,"op":"pause","session":"a","reason":"nap"}"#).unwrap_err();
        assert!(msg.contains("nap"), "{msg}");
    }

    #[test]
    fn participants_cannot_reach_admin_operations() {
        let extend = Request::Extend {
            session: "a".into(),
            by_s: 60,
            reason: "x".into(),
        };
        assert!(!extend.allowed_for_participant());
        assert!(!Request::ListSessions.allowed_for_participant());
        assert!(
            !Request::End {
                session: "a".into(),
                reason: None,
                note: None,
            }
            .allowed_for_participant()
        );
        assert!(!Request::Subscribe { session: None }.allowed_for_participant());
        // A participant (or code the agent runs, which holds its token)
        // reaches no campaign: it could stop one, or open one to make sessions.
        assert!(!Request::CampaignList.allowed_for_participant());
        assert!(!Request::CampaignStop { name: "c".into() }.allowed_for_participant());
        assert!(!Request::CampaignShow { name: "c".into() }.allowed_for_participant());
        assert!(
            Request::Score {
                session: "a".into()
            }
            .allowed_for_participant()
        );
    }
}
