//! One hosted session: its derived state, its clock, its shells, and every
//! operation that changes it. State changes are appended to the store and
//! flushed before they are acknowledged.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use chrono::Utc;
use tokio::sync::{Mutex as AsyncMutex, MutexGuard, Notify, broadcast, mpsc};

use crate::environment::Environment;
use crate::protocol::{Audience, ErrorCode, SessionView};
use crate::sandbox::SessionMarker;
use crate::sandbox::backend::Sandbox;
use crate::session::{Event, EventKind, LiveClock, MonotonicClock, SessionMeta, SessionState};
use crate::store::Store;

use super::shells::{ShellEnded, ShellHost};

/// An operation refused or failed, with the code clients see.
#[derive(Debug, Clone, PartialEq)]
pub struct OpError {
    pub code: ErrorCode,
    pub message: String,
}

impl OpError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }
    pub fn state(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidState, message)
    }
    pub fn internal(message: impl std::fmt::Display) -> Self {
        Self::new(ErrorCode::Internal, message.to_string())
    }
}

impl std::fmt::Display for OpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

pub type OpResult<T> = Result<T, OpError>;

/// A running session's clock stopped because its events could not be saved.
#[derive(Debug, Clone, PartialEq)]
pub struct StoreFault {
    /// Where the clock stopped.
    pub active_ms: u64,
    /// What the store said.
    pub message: String,
}

/// The session's state and clock; locked for every change, so events are
/// appended in order and the clock always agrees with the log.
pub struct Live {
    pub state: SessionState,
}

pub struct Host {
    pub meta: SessionMeta,
    pub store: Store,
    pub clock: Arc<dyn MonotonicClock>,
    pub live: AsyncMutex<Live>,
    /// Mirrors the clock for quick synchronous reads (recording timestamps);
    /// changed only while `live` is held.
    live_clock: Mutex<LiveClock>,
    /// One scoring run at a time.
    pub scoring: AsyncMutex<()>,
    /// Set when a pause stopped the intermediate scoring run in progress:
    /// its outcome is not the workspace's and is not recorded.
    pub scoring_interrupted: AtomicBool,
    pub shells: Mutex<BTreeMap<u32, Arc<ShellHost>>>,
    next_shell: AtomicU32,
    /// Wakes the budget timer after a state change.
    pub wake: Notify,
    /// The last keystroke or exec (for proctors' idle alerts; not persisted).
    last_activity: Mutex<Option<chrono::DateTime<Utc>>>,
    /// When the scoring run in progress began.
    scoring_since: Mutex<Option<chrono::DateTime<Utc>>>,
    pub events: broadcast::Sender<(String, Event)>,
    pub shell_exits: mpsc::UnboundedSender<ShellEnded>,
    /// Where the session's processes run and how they are held: opened
    /// once its hardware is granted (`open_sandbox`).
    sandbox: std::sync::OnceLock<Box<dyn Sandbox>>,
    /// What stands in for it while the session waits for hardware: it
    /// starts nothing, and says why.
    waiting: Box<dyn Sandbox>,
    /// The devices it holds, once granted (the log's `granted` event).
    grant: std::sync::OnceLock<crate::hardware::DeviceGrant>,
    /// While it waits for hardware: its place in line (1 = next) and what
    /// it waits for now (set by the hub's queue).
    pub queue_note: Mutex<Option<(usize, String)>>,
    /// Its GPUs' use at the last sample, and when one was last seen busy.
    pub gpu_use: Mutex<(
        Vec<crate::hardware::gpu_use::GpuUse>,
        Option<chrono::DateTime<Utc>>,
    )>,
    /// Out-of-memory kills in its limit group already noted in its log
    /// (read when its sandbox opens: a restarted server does not note the
    /// kills an earlier run of it saw).
    pub memory_kills_seen: std::sync::atomic::AtomicU64,
    /// Set when the session could not record while it ran (a full disk):
    /// its clock stopped there, and the budget timer pauses it on record
    /// as soon as the store takes writes again (see `budget::run_timer`).
    store_fault: Mutex<Option<StoreFault>>,
    /// Paused by the server because the disk ran low (resumed when it is not).
    pub disk_paused: AtomicBool,
    /// What its shells may still record (shared by all of them).
    pub recording_quota: Arc<super::quota::RecordingQuota>,
    /// Participant connections open with this session's token.
    connections: std::sync::atomic::AtomicUsize,
    /// The answer given at submit, for the final score (a family's
    /// `score(t, submission)`).
    pub submission: Mutex<Option<String>>,
    /// Starts the session's commands (see `sandbox::spawner`); started on
    /// the first exec, again if it ended.
    pub spawner: AsyncMutex<Option<Arc<crate::sandbox::spawner::Spawner>>>,
}

impl Host {
    pub fn new(
        meta: SessionMeta,
        state: SessionState,
        store: Store,
        clock: Arc<dyn MonotonicClock>,
        events: broadcast::Sender<(String, Event)>,
        sandbox: SandboxSlot,
    ) -> (Arc<Host>, mpsc::UnboundedReceiver<ShellEnded>) {
        let kills = match &sandbox {
            SandboxSlot::Open(sandbox, _) => memory_kills(sandbox.as_ref()),
            SandboxSlot::Waiting(_) => 0,
        };
        let (opened, grant, waiting) = match sandbox {
            SandboxSlot::Open(sandbox, grant) => (
                std::sync::OnceLock::from(sandbox),
                grant.map(std::sync::OnceLock::from).unwrap_or_default(),
                Box::new(crate::sandbox::backend::Unavailable::new(
                    "local",
                    "opened already",
                    crate::sandbox::backend::Groups::bare(&meta.sandbox_tag),
                )) as Box<dyn Sandbox>,
            ),
            SandboxSlot::Waiting(placeholder) => (
                std::sync::OnceLock::new(),
                std::sync::OnceLock::new(),
                placeholder,
            ),
        };
        let next_shell = store
            .recorded_shells(&meta.id)
            .ok()
            .and_then(|s| s.last().copied())
            .map_or(0, |s| s + 1);
        let live_clock = LiveClock::stopped(state.active_ms);
        let (exit_tx, exit_rx) = mpsc::unbounded_channel();
        let host = Arc::new(Host {
            meta,
            store,
            clock,
            live: AsyncMutex::new(Live { state }),
            live_clock: Mutex::new(live_clock),
            scoring: AsyncMutex::new(()),
            scoring_interrupted: AtomicBool::new(false),
            shells: Mutex::new(BTreeMap::new()),
            next_shell: AtomicU32::new(next_shell),
            wake: Notify::new(),
            last_activity: Mutex::new(None),
            scoring_since: Mutex::new(None),
            events,
            shell_exits: exit_tx,
            sandbox: opened,
            waiting,
            grant,
            queue_note: Mutex::new(None),
            memory_kills_seen: std::sync::atomic::AtomicU64::new(kills),
            gpu_use: Mutex::new((Vec::new(), None)),
            connections: std::sync::atomic::AtomicUsize::new(0),
            recording_quota: Arc::new(super::quota::RecordingQuota::new(
                super::quota::RecordingQuota::limit_from_env(),
            )),
            store_fault: Mutex::new(None),
            submission: Mutex::new(None),
            disk_paused: AtomicBool::new(false),
            spawner: AsyncMutex::new(None),
        });
        (host, exit_rx)
    }

    pub fn id(&self) -> &str {
        &self.meta.id
    }

    /// A running session that cannot record stops its clock at once (the
    /// participant can do nothing useful, and must not lose budget); the
    /// budget timer records the pause when it can.
    pub fn note_store_fault(&self, live: &MutexGuard<'_, Live>, message: &str) {
        if live.state.phase() != crate::session::Phase::Running {
            return;
        }
        let mut fault = self.store_fault.lock().unwrap_or_else(|e| e.into_inner());
        if fault.is_none() {
            let active_ms = self.set_clock_running(live, false);
            tracing::error!(session = %self.meta.id, active_ms, "cannot record ({message}): the clock stopped");
            *fault = Some(StoreFault {
                active_ms,
                message: message.to_string(),
            });
            self.wake.notify_one();
        }
    }

    /// The store fault this session waits out, if any.
    pub fn store_fault(&self) -> Option<StoreFault> {
        self.store_fault
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub fn clear_store_fault(&self) {
        *self.store_fault.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    /// Counts a participant connection in; false (nothing counted) when
    /// `limit` are already open.
    pub fn claim_connection(&self, limit: usize) -> bool {
        self.connections
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < limit).then_some(n + 1)
            })
            .is_ok()
    }

    pub fn release_connection(&self) {
        let _ = self
            .connections
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
    }

    pub fn marker(&self) -> SessionMarker {
        SessionMarker::new(self.meta.sandbox_tag.clone())
    }

    fn clock_guard(&self) -> std::sync::MutexGuard<'_, LiveClock> {
        self.live_clock.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Active time now.
    pub fn active_ms(&self) -> u64 {
        self.clock_guard().active_ms(self.clock.now_ms())
    }

    pub fn clock_runs(&self) -> bool {
        self.clock_guard().is_running()
    }

    /// Starts or stops the clock. Call only while holding `live`.
    pub fn set_clock_running(&self, _live: &MutexGuard<'_, Live>, running: bool) -> u64 {
        let now = self.clock.now_ms();
        let active = {
            let mut clock = self.clock_guard();
            if running {
                clock.start(now);
                clock.active_ms(now)
            } else {
                clock.stop(now)
            }
        };
        self.wake.notify_one();
        active
    }

    /// Stops the clock at no more than the budget. Call only while holding `live`.
    pub fn stop_clock_capped(&self, live: &MutexGuard<'_, Live>) -> u64 {
        let now = self.clock.now_ms();
        let active = self.clock_guard().stop_capped(now, live.state.budget_ms);
        self.wake.notify_one();
        active
    }

    /// Appends an event durably at the current active time and applies it
    /// (stamped with the admin's origin when an admin request made it).
    pub async fn append(
        &self,
        live: &mut MutexGuard<'_, Live>,
        kind: EventKind,
    ) -> OpResult<Event> {
        let active_ms = self
            .active_ms()
            .min(live.state.budget_ms.max(live.state.active_ms));
        self.append_at(live, kind, active_ms).await
    }

    pub async fn append_at(
        &self,
        live: &mut MutexGuard<'_, Live>,
        kind: EventKind,
        active_ms: u64,
    ) -> OpResult<Event> {
        let event = Event {
            seq: live.state.next_seq(),
            at: Utc::now(),
            active_ms,
            origin: current_origin(),
            kind,
        };
        if let Err(e) = self.store.append(&self.meta.id, &event).await {
            self.note_store_fault(live, &e.to_string());
            return Err(OpError::internal(format!("could not save the event: {e}")));
        }
        let before = TimerInputs::of(&live.state);
        live.state.apply(&event);
        let _ = self.events.send((self.meta.id.clone(), event.clone()));
        // Only what the budget timer waits on wakes it: an agent's command
        // each woke it for nothing (a check of the workspace, of the disk
        // and, for containers, of the sandbox, per command).
        if TimerInputs::of(&live.state) != before {
            self.wake.notify_one();
        }
        Ok(event)
    }

    /// Appends without waiting for the disk (shell bookkeeping).
    pub async fn append_quiet(&self, kind: EventKind) {
        let mut live = self.live.lock().await;
        let active_ms = self.active_ms();
        let event = Event {
            seq: live.state.next_seq(),
            at: Utc::now(),
            active_ms,
            origin: current_origin(),
            kind,
        };
        if let Err(e) = self.store.append_unflushed(&self.meta.id, &event) {
            tracing::error!(session = %self.meta.id, "could not save event: {e}");
            return;
        }
        live.state.apply(&event);
        let _ = self.events.send((self.meta.id.clone(), event));
    }

    pub async fn view(&self, audience: Audience, with_scores: bool) -> SessionView {
        let live = self.live.lock().await;
        let mut view = SessionView::build(
            &self.meta,
            &live.state,
            self.active_ms(),
            audience,
            with_scores,
        );
        view.last_activity_at = *self.last_activity.lock().unwrap_or_else(|e| e.into_inner());
        view.scoring_since = *self.scoring_since.lock().unwrap_or_else(|e| e.into_inner());
        view.isolation = self.sandbox().isolation().to_string();
        view.sandbox = self.sandbox().backend().to_string();
        view.containment = self.sandbox().containment().to_string();
        view.host = self.sandbox().host().to_string();
        {
            let (uses, used_at) = self
                .gpu_use
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone();
            view.gpu_use = uses;
            view.gpu_used_at = used_at;
        }
        if self.has_sandbox() && view.grant.is_some() {
            view.gpu_isolation = self.sandbox().gpu_isolation().to_string();
        }
        if let Some((position, why)) = self
            .queue_note
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .filter(|_| view.state == crate::session::Phase::Queued)
        {
            view.queue_position = Some(position);
            view.waiting_for = Some(why);
        }
        view
    }

    /// The session's sandbox (a stand-in that starts nothing while it
    /// waits for its hardware).
    pub fn sandbox(&self) -> &dyn Sandbox {
        match self.sandbox.get() {
            Some(sandbox) => sandbox.as_ref(),
            None => self.waiting.as_ref(),
        }
    }

    /// Whether its sandbox is open (its hardware granted).
    pub fn has_sandbox(&self) -> bool {
        self.sandbox.get().is_some()
    }

    /// Opens its sandbox once its hardware is granted; false if it was open.
    pub fn open_sandbox(
        &self,
        sandbox: Box<dyn Sandbox>,
        grant: Option<crate::hardware::DeviceGrant>,
    ) -> bool {
        if let Some(grant) = grant {
            let _ = self.grant.set(grant);
        }
        *self.queue_note.lock().unwrap_or_else(|e| e.into_inner()) = None;
        self.memory_kills_seen
            .store(memory_kills(sandbox.as_ref()), Ordering::SeqCst);
        self.sandbox.set(sandbox).is_ok()
    }

    /// The devices it holds (None: waiting, or made before grants).
    pub fn grant(&self) -> Option<&crate::hardware::DeviceGrant> {
        self.grant.get()
    }

    /// Marks a scoring run as in progress until the guard is dropped.
    pub fn scoring_mark(&self) -> ScoringMark<'_> {
        *self.scoring_since.lock().unwrap_or_else(|e| e.into_inner()) = Some(Utc::now());
        ScoringMark { host: self }
    }

    /// Notes a keystroke or command (idle detection).
    pub fn touch(&self) {
        *self.last_activity.lock().unwrap_or_else(|e| e.into_inner()) = Some(Utc::now());
    }

    pub fn next_shell_id(&self) -> u32 {
        self.next_shell.fetch_add(1, Ordering::SeqCst)
    }

    pub fn shell(&self, id: u32) -> OpResult<Arc<ShellHost>> {
        self.shells_guard().get(&id).cloned().ok_or_else(|| {
            OpError::new(
                ErrorCode::NotFound,
                format!("session {} has no shell {id}", self.meta.id),
            )
        })
    }

    pub fn shells_guard(&self) -> std::sync::MutexGuard<'_, BTreeMap<u32, Arc<ShellHost>>> {
        self.shells.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// PIDs of the session's shells (frozen first, thawed last).
    pub fn shell_pids(&self) -> Vec<i32> {
        self.shells_guard()
            .values()
            .filter(|s| s.alive())
            .filter_map(|s| s.pid)
            .collect()
    }

    /// The environment the session was created from, as it is now on disk.
    pub fn environment(&self) -> OpResult<Environment> {
        Environment::load(&self.meta.env_dir).map_err(|e| {
            OpError::internal(format!(
                "environment {} cannot be loaded: {e}",
                self.meta.env_id
            ))
        })
    }
}

/// Processes the kernel killed at the sandbox's memory limit so far.
pub fn memory_kills(sandbox: &dyn Sandbox) -> u64 {
    sandbox
        .groups()
        .limits
        .as_ref()
        .and_then(|l| l.group.oom_file.as_deref())
        .map_or(0, crate::sandbox::limits::oom_kills)
}

/// A new host's sandbox: open, or a stand-in until its hardware is granted.
pub enum SandboxSlot {
    /// Its sandbox, and the grant it was opened with.
    Open(Box<dyn Sandbox>, Option<crate::hardware::DeviceGrant>),
    Waiting(Box<dyn Sandbox>),
}

/// Clears the host's "scoring since" when the run ends, however it ends.
pub struct ScoringMark<'a> {
    host: &'a Host,
}

impl Drop for ScoringMark<'_> {
    fn drop(&mut self) {
        *self
            .host
            .scoring_since
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = None;
    }
}

/// What the budget timer (`hub::budget::run_timer`) decides from: the
/// phase, the budget and the warnings given. An event that changes none
/// of them does not wake it; the clock starting or stopping does
/// (`set_clock_running`).
#[derive(PartialEq)]
struct TimerInputs {
    phase: crate::session::Phase,
    budget_ms: u64,
    warnings: usize,
}

impl TimerInputs {
    fn of(state: &SessionState) -> TimerInputs {
        TimerInputs {
            phase: state.phase(),
            budget_ms: state.budget_ms,
            warnings: state.warned_s.len(),
        }
    }
}

tokio::task_local! {
    /// The admin behind the request being handled (see `conn`): events
    /// appended while handling it carry it.
    pub static ORIGIN: Option<crate::session::Origin>;
}

fn current_origin() -> Option<crate::session::Origin> {
    ORIGIN.try_with(Clone::clone).ok().flatten()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::PauseReason;

    fn apply(state: &mut SessionState, kind: EventKind) -> bool {
        let before = TimerInputs::of(state);
        let event = Event {
            seq: state.next_seq(),
            at: Utc::now(),
            active_ms: 0,
            origin: None,
            kind,
        };
        state.apply(&event);
        TimerInputs::of(state) != before
    }

    #[test]
    fn only_what_the_budget_depends_on_wakes_its_timer() {
        let by = || "p".to_string();
        let mut state = SessionState::new(60_000);
        assert!(apply(&mut state, EventKind::Started { by: by() }));
        // A session's everyday events leave the timer asleep.
        assert!(!apply(&mut state, EventKind::ShellOpened { shell: 0 }));
        assert!(!apply(
            &mut state,
            EventKind::Note {
                text: "n".into(),
                by: by()
            }
        ));
        // An agent's command above all: each one woke it.
        assert!(!apply(
            &mut state,
            EventKind::Exec(Box::new(crate::session::event::ExecRecord {
                command: "true".into(),
                cwd: "/w".into(),
                exit_code: Some(0),
                signal: None,
                timed_out: false,
                duration_ms: 2,
                stdout: String::new(),
                stderr: String::new(),
                stdout_truncated: false,
                stderr_truncated: false,
            }))
        ));
        assert!(!apply(
            &mut state,
            EventKind::ShellExited {
                shell: 0,
                code: Some(0),
                signal: None
            }
        ));
        // A pause, a resume, an extension and a warning each wake it.
        assert!(apply(
            &mut state,
            EventKind::Paused {
                reason: PauseReason::Break,
                by: by(),
                note: None
            }
        ));
        assert!(apply(&mut state, EventKind::Resumed { by: by() }));
        assert!(apply(
            &mut state,
            EventKind::Extended {
                by_ms: 1000,
                reason: "r".into(),
                by: by()
            }
        ));
        assert!(apply(
            &mut state,
            EventKind::Warning {
                threshold_s: 60,
                remaining_s: 59
            }
        ));
    }
}
