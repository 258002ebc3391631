//! Per-session timer: budget warnings and exhaustion, to the second.

use std::sync::Arc;
use std::time::Duration;

use crate::session::EndReason;
use crate::session::budget::{BudgetDue, due, ms_until_due};
use crate::session::{EventKind, PauseReason, Phase};

use super::{Hub, SYSTEM};
use crate::server::host::{Host, StoreFault};

/// Longest sleep between checks even when nothing is due (guards against a missed wake).
const MAX_SLEEP: Duration = Duration::from_secs(30);
/// How often a session that could not record tries again.
const STORE_RETRY: Duration = Duration::from_secs(2);

/// The runner itself, pausing and resuming on its own account.
pub(super) fn system() -> super::Actor {
    super::Actor {
        name: SYSTEM.into(),
        audience: crate::protocol::Audience::Admin,
        origin: None,
        connection: 0,
    }
}

/// A running session whose workspace folder is gone can do nothing: it
/// pauses (`technical_issue`) instead of spending its budget, until a
/// proctor restores the folder and resumes it.
async fn pause_without_workspace(hub: &Arc<Hub>, host: &Arc<Host>) {
    if host.meta.workspace.is_dir() || host.live.lock().await.state.phase() != Phase::Running {
        return;
    }
    let note = format!(
        "the workspace {} is gone; the session paused itself until it is restored",
        host.meta.workspace.display()
    );
    pause_itself(hub, host, note).await;
}

/// Pauses a running session on the runner's own account
/// (`technical_issue`, the note says why); whether it worked.
async fn pause_itself(hub: &Arc<Hub>, host: &Arc<Host>, note: String) -> bool {
    let paused = hub
        .pause(
            host.id(),
            PauseReason::TechnicalIssue,
            Some(note.clone()),
            &system(),
        )
        .await;
    match &paused {
        Ok(_) => tracing::error!(session = %host.id(), "paused: {note}"),
        Err(e) => tracing::error!(session = %host.id(), "could not pause ({note}): {e}"),
    }
    paused.is_ok()
}

/// A running session whose sandbox failed (its container killed from
/// outside, say) pauses itself (`technical_issue`) with the cause, instead
/// of spending budget while its processes are gone; resuming makes the
/// environment again (the workspace is kept).
async fn pause_when_the_sandbox_fails(hub: &Arc<Hub>, host: &Arc<Host>) {
    if host.sandbox().check_every().is_none()
        || host.live.lock().await.state.phase() != Phase::Running
    {
        return;
    }
    let checked = host.clone();
    let Ok(Err(cause)) = tokio::task::spawn_blocking(move || checked.sandbox().check()).await
    else {
        return;
    };
    let note = format!(
        "{cause}; the session paused itself. Its workspace is kept: resuming starts its environment again (open a new shell)"
    );
    pause_itself(hub, host, note).await;
}

/// Pauses a running session while the disk is almost full and resumes it
/// when there is room again (only a pause the server made for that). True
/// while the session waits for room.
async fn follow_disk_space(hub: &Arc<Hub>, host: &Arc<Host>) -> bool {
    use std::sync::atomic::Ordering;
    let low = hub.store.low_space();
    let phase = host.live.lock().await.state.phase();
    match low {
        Some(free) if phase == Phase::Running => {
            let note = format!(
                "the disk holding the data dir is almost full ({} MiB free); the session paused itself until there is room",
                free / (1024 * 1024)
            );
            if pause_itself(hub, host, note).await {
                host.disk_paused.store(true, Ordering::Release);
            }
            true
        }
        Some(_) => host.disk_paused.load(Ordering::Acquire),
        None if host.disk_paused.swap(false, Ordering::AcqRel) && phase == Phase::Paused => {
            let ours = host
                .live
                .lock()
                .await
                .state
                .open_pause()
                .is_some_and(|p| p.reason == PauseReason::TechnicalIssue && p.by == SYSTEM);
            if ours && let Err(e) = hub.resume(host.id(), &system()).await {
                tracing::error!(session = %host.id(), "could not resume after the disk had room again: {e}");
            }
            false
        }
        None => false,
    }
}

/// A session whose events could not be saved (its clock already stopped):
/// its processes are frozen, and once the store takes writes again its pause
/// goes on record (`technical_issue`, from where the clock stopped) and it
/// resumes. True once it has.
async fn recover_from_store_fault(hub: &Arc<Hub>, host: &Arc<Host>, fault: &StoreFault) -> bool {
    hub.freeze(host).await;
    hub.interrupt_scoring(host).await;
    let mut live = host.live.lock().await;
    if live.state.phase() != crate::session::Phase::Running {
        host.clear_store_fault();
        return true;
    }
    let note = format!(
        "the session could not be recorded ({}); it paused itself until it could",
        fault.message
    );
    let paused = host
        .append_at(
            &mut live,
            EventKind::Paused {
                reason: PauseReason::TechnicalIssue,
                by: SYSTEM.into(),
                note: Some(note),
            },
            fault.active_ms,
        )
        .await;
    if paused.is_err() {
        return false;
    }
    tracing::warn!(session = %host.id(), "the store takes writes again: the pause is on record");
    let resumed = host
        .append_at(
            &mut live,
            EventKind::Resumed { by: SYSTEM.into() },
            fault.active_ms,
        )
        .await;
    host.clear_store_fault();
    if resumed.is_ok() {
        host.set_clock_running(&live, true);
        drop(live);
        hub.thaw(host).await;
    }
    true
}

/// The instant the sessions' shared beat counts from.
fn beat_origin() -> tokio::time::Instant {
    static ORIGIN: std::sync::OnceLock<tokio::time::Instant> = std::sync::OnceLock::new();
    *ORIGIN.get_or_init(tokio::time::Instant::now)
}

/// The wait, `since_origin` into the beat, for its next multiple of
/// `every` (a whole `every` when exactly on one; at least 1 ms).
fn until_next_beat(since_origin: Duration, every: Duration) -> Duration {
    let every_ms = every.as_millis().max(1);
    let into = since_origin.as_millis() % every_ms;
    Duration::from_millis((every_ms - into).max(1) as u64)
}

pub async fn run_timer(hub: Arc<Hub>, host: Arc<Host>) {
    // The engine's word that the sandbox may have failed (a container
    // killed from outside) wakes the timer, which checks at once.
    let mut failure = host.sandbox().failure_signal();
    loop {
        if let Some(fault) = host.store_fault() {
            if recover_from_store_fault(&hub, &host, &fault).await {
                continue;
            }
            tokio::time::sleep(STORE_RETRY).await;
            continue;
        }
        pause_without_workspace(&hub, &host).await;
        pause_when_the_sandbox_fails(&hub, &host).await;
        if follow_disk_space(&hub, &host).await {
            tokio::select! {
                _ = tokio::time::sleep(STORE_RETRY) => {}
                _ = host.wake.notified() => {}
            }
            continue;
        }
        let sleep_ms = {
            let mut live = host.live.lock().await;
            if live.state.end_reason.is_some() {
                return;
            }
            if host.clock_runs() {
                let active = host.active_ms();
                match due(live.state.budget_ms, active, &live.state.warned_s) {
                    Some(BudgetDue::Warning {
                        threshold_s,
                        remaining_s,
                    }) => {
                        if let Err(e) = host
                            .append(
                                &mut live,
                                EventKind::Warning {
                                    threshold_s,
                                    remaining_s,
                                },
                            )
                            .await
                        {
                            tracing::error!(session = %host.id(), "warning not saved: {e}");
                        }
                        continue;
                    }
                    Some(BudgetDue::Exhausted) => {
                        drop(live);
                        tracing::info!(session = %host.id(), "budget exhausted");
                        // A family may ask for no score at its usage limit.
                        let score = host.meta.scoring.score_at_budget_end;
                        if let Err(e) = hub
                            .finish(&host, EndReason::BudgetExhausted, SYSTEM, score, None)
                            .await
                        {
                            tracing::error!(session = %host.id(), "ending at budget exhaustion failed: {e}");
                        }
                        continue;
                    }
                    None => Some(ms_until_due(
                        live.state.budget_ms,
                        active,
                        &live.state.warned_s,
                    )),
                }
            } else {
                None
            }
        };
        let longest = host
            .sandbox()
            .check_every()
            .map_or(MAX_SLEEP, |every| every.min(MAX_SLEEP));
        // Nothing due sooner: wake on the beat all sessions share, so that an
        // idle server's 200 timers make one wake-up, not 200 spread out
        // (running sessions too: their next warning is mostly hours away).
        let nap = match sleep_ms.map(|ms| Duration::from_millis(ms.max(1))) {
            Some(due) if due < longest => due,
            _ => until_next_beat(beat_origin().elapsed(), longest),
        };
        tokio::select! {
            _ = tokio::time::sleep(nap) => {}
            _ = host.wake.notified() => {}
            _ = signalled(&mut failure) => failure = host.sandbox().failure_signal(),
        }
    }
}

/// Resolves when `failure` does; never without one.
async fn signalled(failure: &mut Option<crate::sandbox::backend::FailureSignal>) {
    match failure {
        Some(signal) => signal.await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_timers_wake_on_a_beat_they_share() {
        let every = Duration::from_secs(30);
        let at = |ms: u64| until_next_beat(Duration::from_millis(ms), every);
        assert_eq!(at(0), every);
        assert_eq!(at(1), Duration::from_millis(29_999));
        assert_eq!(at(12_345), Duration::from_millis(17_655));
        // Timers that slept at different moments wake at the same one.
        assert_eq!(
            Duration::from_millis(4_000) + at(4_000),
            Duration::from_millis(29_000) + at(29_000)
        );
        assert_eq!(at(30_000), every);
        assert_eq!(at(61_000), Duration::from_millis(29_000));
        // Never zero, even for a beat shorter than a millisecond.
        assert_eq!(
            until_next_beat(Duration::from_micros(1500), Duration::from_micros(10)),
            Duration::from_millis(1)
        );
    }
}
