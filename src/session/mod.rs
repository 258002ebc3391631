//! Sessions: identity, the typed event log, the derived state and the clock.
//! Pure: given events (and an injected clock), derive everything else.

pub mod agent;
pub mod budget;
pub mod campaign;
pub mod clock;
pub mod event;
pub mod ids;
pub mod imported;
pub mod meta;
pub mod state;

pub use agent::{AgentIdentity, CampaignRunRef, ModelCallRecord, RunLimits, UsageTotals};
pub use clock::{LiveClock, ManualClock, MonotonicClock, SystemClock};
pub use event::{EndReason, Event, EventKind, Origin, PauseReason, SYSTEM, ScoreEntry, ScorePhase};
pub use imported::ImportedFrom;
pub use meta::{Kind, SessionMeta};
pub use state::{Phase, SessionState};
