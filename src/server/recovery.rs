//! Loading sessions at start-up, and putting right what a crash left behind.
//!
//! A session that was running when the server died is paused with reason
//! `crash_recovery`, its clock stopped at the last persisted heartbeat or
//! event (so a crash costs at most one heartbeat interval of budget).
//! A final score interrupted by the crash is taken again.

use std::sync::Arc;

use crate::sandbox::procs;
use crate::session::{EventKind, PauseReason, Phase, SessionState};

use super::hub::{Hub, SYSTEM};
use super::scoring::{scoring_group_name, scoring_marker};

/// A data dir that was moved or restored elsewhere keeps its sessions'
/// workspaces in its own `workspaces/`: a recorded path that is gone is
/// looked up there (the store keeps the path it was given; this runs at
/// every start).
fn relocate_workspace(paths: &crate::paths::DataPaths, meta: &mut crate::session::SessionMeta) {
    let here = paths.workspace(&meta.id);
    if !meta.workspace.exists() && here != meta.workspace && here.is_dir() {
        tracing::info!(
            session = %meta.id,
            from = %meta.workspace.display(),
            to = %here.display(),
            "the workspace moved with the data dir"
        );
        meta.workspace = here;
    }
}

pub async fn load_and_recover(hub: &Arc<Hub>) -> anyhow::Result<()> {
    for mut meta in hub.store.sessions()? {
        relocate_workspace(&hub.paths, &mut meta);
        let events = hub.store.events(&meta.id)?;
        let mut state = SessionState::from_events(meta.budget_ms, &events);
        if let Some(beat) = hub.store.heartbeat(&meta.id)? {
            state.active_ms = state.active_ms.max(beat.active_ms.min(state.budget_ms));
        }
        if needs_placement(&meta, &state) {
            queue_again(hub, &meta, &mut state).await?;
        }
        let phase = state.phase();
        let open_scoring = state
            .open_pause()
            .is_some_and(|p| p.reason == PauseReason::Scoring);
        let host = hub.install(meta, state);
        // A scoring run the crash interrupted left its processes (and the
        // participant code it ran) behind: they die now, before anything
        // is scored again.
        kill_leftovers(hub, &host).await;
        match phase {
            Phase::Running => {
                let mut live = host.live.lock().await;
                let active = live.state.active_ms;
                host.append_at(
                    &mut live,
                    EventKind::Paused {
                        reason: PauseReason::CrashRecovery,
                        by: SYSTEM.into(),
                        note: Some("the server stopped while the session was running".into()),
                    },
                    active,
                )
                .await
                .map_err(|e| anyhow::anyhow!("{e}"))?;
                tracing::warn!(session = %host.id(), active_ms = active, "paused for crash recovery");
            }
            Phase::Paused if open_scoring => {
                // The final score was interrupted: take it again and end the session.
                let hub = hub.clone();
                let host = host.clone();
                tokio::spawn(async move {
                    let reason = {
                        let live = host.live.lock().await;
                        if live.state.remaining_ms(live.state.active_ms) == 0 {
                            crate::session::EndReason::BudgetExhausted
                        } else {
                            crate::session::EndReason::Submitted
                        }
                    };
                    {
                        let mut live = host.live.lock().await;
                        let active = live.state.active_ms;
                        let _ = host
                            .append_at(&mut live, EventKind::Resumed { by: SYSTEM.into() }, active)
                            .await;
                    }
                    if let Err(e) = hub.finish(&host, reason, SYSTEM, true, None).await {
                        tracing::error!(session = %host.id(), "could not finish after recovery: {e}");
                    }
                });
                continue;
            }
            Phase::Created if open_scoring => {
                let hub = hub.clone();
                let host = host.clone();
                tokio::spawn(async move {
                    if let Err(e) = hub.score_starting(&host).await {
                        tracing::error!(session = %host.id(), "starting score after recovery failed: {e}");
                    }
                });
                continue;
            }
            _ => {}
        }
        // Leftover processes (nohup jobs survive their terminal) must not
        // compute while paused. In a cgroup they were killed above, and the
        // group stays thawed: its jail starts anew inside it.
        if phase != Phase::Ended && host.sandbox().containment() != "cgroup" {
            hub.freeze(&host).await;
        }
    }
    Ok(())
}

/// A session the server stopped between storing it and storing its grant:
/// its log holds its `created` event alone, and it must not run without a
/// grant. (Sessions made before grants existed have more in their log:
/// their starting score at least; they keep running as they did.)
fn needs_placement(meta: &crate::session::SessionMeta, state: &SessionState) -> bool {
    state.phase() != Phase::Ended
        && state.last_seq == Some(0)
        && state.started_at.is_none()
        && state.grant.is_none()
        && state.queued.is_none()
        && meta.grant.is_none()
        && meta.imported.is_none()
}

/// Puts such a session in line, with its environment's needs as they are now.
async fn queue_again(
    hub: &Arc<Hub>,
    meta: &crate::session::SessionMeta,
    state: &mut SessionState,
) -> anyhow::Result<()> {
    let needs = crate::environment::Environment::load(&meta.env_dir)
        .map(|env| {
            env.hardware_for(meta.profile.as_deref())
                .request(meta.scoring.exclusive)
        })
        .unwrap_or(crate::hardware::Request {
            gpus: 0,
            gpu_model: None,
            cpus: 1,
            memory_gb: 0.0,
            exclusive_cpus: meta.scoring.exclusive,
        });
    let event = crate::session::Event {
        seq: state.next_seq(),
        at: chrono::Utc::now(),
        active_ms: state.active_ms,
        origin: None,
        kind: EventKind::Queued {
            waiting_for: "its placement (the server stopped while placing it)".into(),
            priority: 0,
            needs,
        },
    };
    hub.store.append(&meta.id, &event).await?;
    state.apply(&event);
    tracing::warn!(session = %meta.id, "stored without a grant: queued again");
    Ok(())
}

/// Kills what an earlier run of the server left of a session's scoring run
/// (its cgroup, its marker) and, for an ended session, of the session itself.
async fn kill_leftovers(hub: &Arc<Hub>, host: &Arc<super::host::Host>) {
    let mut groups = Vec::new();
    // The session's own groups, kept (its sandbox holds them): emptied and
    // thawed. A stop left them frozen with the old server's processes; a
    // new process joining a frozen group would freeze before it even
    // starts (and the server with it, waiting on its spawn).
    let mut emptied = Vec::new();
    if let Some(root) = &hub.cgroups {
        groups.extend(root.existing(&scoring_group_name(host.id())));
        let own = [
            root.existing(host.id()),
            root.existing(&format!("{}.clients", host.id())),
        ];
        if host.sandbox().containment() == "cgroup" {
            emptied.extend(own.into_iter().flatten());
        } else {
            groups.extend(own.into_iter().flatten());
        }
    }
    // Without cgroups, by marker (a scan of /proc per session: only then).
    let scoring = hub.cgroups.is_none().then(|| scoring_marker(host));
    let _ = tokio::task::spawn_blocking(move || {
        for group in emptied {
            group.kill_all();
            if let Err(e) = group.thaw() {
                tracing::warn!("could not thaw {}: {e:#}", group.path().display());
            }
        }
        for group in groups {
            group.remove();
        }
        if let Some(marker) = scoring {
            procs::kill_all(&marker);
        }
    })
    .await;
}
