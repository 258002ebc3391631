//! The runner server: owns the database, the sessions' clocks, shells and
//! scoring runs, and serves the protocol on two Unix sockets (admin and
//! participant) in the data dir. Exactly one server runs per data dir.

mod conn;
mod family;
pub mod host;
pub mod hub;
mod lock;
mod parsed_screen;
pub mod quota;
mod recovery;
mod scoring;
pub mod shells;

use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::net::UnixListener;

use crate::paths::DataPaths;
use crate::session::{EventKind, MonotonicClock, PauseReason, Phase, SystemClock};
use crate::store::{Heartbeat, Store};

pub use conn::Door;
pub use lock::{LockError, ServerLock, lock_held};

/// How often running sessions persist their active time.
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(2);
/// How often buffered terminal output is made durable.
pub const RECORDING_FLUSH_INTERVAL: Duration = Duration::from_millis(200);
/// How long a sync waits after the first write that follows a quiet spell.
const RECORDING_SYNC_SETTLE: Duration = Duration::from_millis(25);

const SESSION_RC: &str = include_str!("../../assets/session.bashrc");

/// Runs the server until a `shutdown` request or SIGTERM/SIGINT.
pub async fn serve(paths: DataPaths) -> anyhow::Result<()> {
    serve_with_clock(paths, Arc::new(SystemClock::new())).await
}

pub async fn serve_with_clock(
    paths: DataPaths,
    clock: Arc<dyn MonotonicClock>,
) -> anyhow::Result<()> {
    paths
        .create()
        .with_context(|| format!("cannot create the data dir {}", paths.root.display()))?;
    let _lock = ServerLock::acquire(&paths.lock_file())?;
    let store = Store::open(&paths.database())?;
    let rc_file = paths.assets().join("session.bashrc");
    std::fs::write(&rc_file, SESSION_RC)
        .with_context(|| format!("cannot write {}", rc_file.display()))?;
    let default_backend = crate::sandbox::jail::Isolation::default_from_env()?;
    // Read after the backend, which reports a broken config file first.
    let operator_bashrc = crate::settings::load_user_config()?.operator_bashrc;
    if operator_bashrc {
        tracing::info!(
            "session shells also load the operator's ~/.bashrc (config: operator_bashrc)"
        );
    }
    match &default_backend.warning {
        None => tracing::info!(
            sandbox = default_backend.backend.backend_name(),
            "sessions run in this sandbox unless they ask for another"
        ),
        Some(warning) => tracing::warn!("sessions run local by default: {warning}"),
    }
    let hub = hub::Hub::new(
        store.clone(),
        clock,
        paths.clone(),
        hub::ShellRc {
            file: rc_file,
            operator_bashrc,
        },
        default_backend,
    );
    recovery::load_and_recover(&hub).await?;
    // Hardware freed while the server was down goes to those in line.
    hub.serve_queue().await;
    tokio::spawn(hub.clone().watch_queue());

    let admin = bind(&paths.socket(), 0o600)?;
    let participant = bind(&paths.participant_socket(), 0o666)?;
    let descriptors = raise_descriptor_limit();
    // Participants get what is left after a reserve for the operator's
    // connections, shells, scorers and the store, so that no number of
    // participant connections can starve those.
    let participant_cap = descriptors
        .saturating_sub(DESCRIPTOR_RESERVE)
        .clamp(16, 8192) as usize;
    tracing::info!(data_dir = %paths.root.display(), descriptors, participant_cap, "server listening");

    tokio::spawn(accept_loop(hub.clone(), admin, Door::Admin, usize::MAX));
    tokio::spawn(accept_loop(
        hub.clone(),
        participant,
        Door::Participant,
        participant_cap,
    ));
    tokio::spawn(heartbeats(hub.clone()));
    tokio::spawn(flush_recordings(hub.clone()));

    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let mut int = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())?;
    tokio::select! {
        _ = hub.shutdown.notified() => {}
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    shut_down(&hub).await;
    let _ = std::fs::remove_file(paths.socket());
    let _ = std::fs::remove_file(paths.participant_socket());
    Ok(())
}

/// Stops every running clock on record before the server goes, so a planned
/// stop costs no budget (`server_shutdown`: no CRASH alert); the pause is
/// pushed to every subscribed client first, so each can say what happened.
/// The shells end with the server (it holds their terminals); the
/// workspaces stay.
async fn shut_down(hub: &Arc<hub::Hub>) {
    // First: from here no new shell starts (one racing the freeze below
    // could hang its spawn), and every client is told.
    hub.closing.send_replace(true);
    for host in hub.all_hosts() {
        let mut live = host.live.lock().await;
        if live.state.phase() == Phase::Running {
            let active = host.set_clock_running(&live, false);
            hub.freeze(&host).await;
            let kind = EventKind::Paused {
                reason: PauseReason::ServerShutdown,
                by: hub::SYSTEM.into(),
                note: Some("the server was shut down".into()),
            };
            if let Err(e) = host.append_at(&mut live, kind, active).await {
                tracing::error!(session = %host.id(), "could not record the shutdown pause: {e}");
            }
        }
    }
    for host in hub.all_hosts() {
        for shell in host.shells_guard().values() {
            shell.kill();
        }
    }
    if let Err(e) = hub.store.flush_all().await {
        tracing::error!("final flush failed: {e}");
    }
    // Let the connections' writers deliver the pauses and the notice.
    tokio::time::sleep(SHUTDOWN_NOTICE_GRACE).await;
}

/// How long an orderly stop waits for its last pushes to reach clients.
const SHUTDOWN_NOTICE_GRACE: Duration = Duration::from_millis(300);

/// Listens on `path` with `mode`: the admin socket is the owner's alone;
/// the participant socket may be connected to by any user that can reach
/// it — a container's unprivileged user, through its bind mount, since the
/// data dir around it stays private — and admits only a session's token.
fn bind(path: &std::path::Path, mode: u32) -> anyhow::Result<UnixListener> {
    // We hold the server lock, so a socket file left here is stale.
    let _ = std::fs::remove_file(path);
    let listener =
        UnixListener::bind(path).with_context(|| format!("cannot listen on {}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
    Ok(listener)
}

/// Descriptors kept back from participant connections.
const DESCRIPTOR_RESERVE: u64 = 512;

/// Raises the soft limit on open descriptors to the hard one; returns the
/// limit in force.
fn raise_descriptor_limit() -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit with a valid resource and a pointer to a
    // live rlimit struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return 1024;
        }
        if limit.rlim_cur < limit.rlim_max {
            let raised = libc::rlimit {
                rlim_cur: limit.rlim_max,
                rlim_max: limit.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                limit = raised;
            }
        }
    }
    limit.rlim_cur
}

/// Accepts connections, at most `cap` at once: one past it is told so and closed.
async fn accept_loop(hub: Arc<hub::Hub>, listener: UnixListener, door: Door, cap: usize) {
    let open = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    loop {
        match listener.accept().await {
            Ok((mut stream, _)) => {
                use std::sync::atomic::Ordering;
                if open.fetch_add(1, Ordering::AcqRel) >= cap {
                    open.fetch_sub(1, Ordering::AcqRel);
                    tokio::spawn(async move {
                        use tokio::io::AsyncWriteExt;
                        let refusal = crate::protocol::ServerLine::Error {
                            id: None,
                            code: crate::protocol::ErrorCode::Refused,
                            message: format!(
                                "the server has {cap} connections open on this socket; try again later"
                            ),
                        };
                        let mut line = serde_json::to_vec(&refusal).unwrap_or_default();
                        line.push(b'\n');
                        let _ =
                            tokio::time::timeout(Duration::from_secs(1), stream.write_all(&line))
                                .await;
                    });
                    continue;
                }
                let hub = hub.clone();
                let open = open.clone();
                tokio::spawn(async move {
                    conn::serve_connection(hub, stream, door).await;
                    open.fetch_sub(1, Ordering::AcqRel);
                });
            }
            Err(e) => {
                tracing::warn!("accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// Every running session's clock, saved together (one flush per beat, not
/// one per session).
async fn heartbeats(hub: Arc<hub::Hub>) {
    let mut tick = tokio::time::interval(HEARTBEAT_INTERVAL);
    loop {
        tick.tick().await;
        let running: Vec<_> = hub
            .hosts_unordered()
            .into_iter()
            .filter(|host| host.clock_runs())
            .collect();
        let now = chrono::Utc::now();
        let beats: Vec<(String, Heartbeat)> = running
            .iter()
            .map(|host| {
                let beat = Heartbeat {
                    at: now,
                    active_ms: host.active_ms(),
                };
                (host.id().to_string(), beat)
            })
            .collect();
        if let Err(e) = hub.store.set_heartbeats(&beats).await {
            tracing::error!(sessions = beats.len(), "heartbeats not saved: {e}");
            for host in &running {
                let live = host.live.lock().await;
                host.note_store_fault(&live, &e.to_string());
            }
        }
    }
}

/// How often an idle server looks at the free space (a write looks too).
pub const SPACE_LOOK_INTERVAL: Duration = Duration::from_secs(2);

async fn flush_recordings(hub: Arc<hub::Hub>) {
    let store = hub.store.clone();
    let mut was_low = false;
    let mut last = tokio::time::Instant::now();
    loop {
        // Asleep while nothing is written (no tick five times a second):
        // woken by a write, else for the next look at the free space.
        let asleep_since = tokio::time::Instant::now();
        let wrote = tokio::select! {
            _ = store.written() => true,
            _ = tokio::time::sleep(SPACE_LOOK_INTERVAL) => false,
        };
        if wrote {
            let woke = tokio::time::Instant::now();
            // What came is durable within the interval of coming: it came
            // after the last sync began, and this one is due from then.
            let mut due = last + RECORDING_FLUSH_INTERVAL;
            // Woken by the write itself (one that came during the last sync
            // would have woken us at once): it came just now, so waiting a
            // moment keeps the promise, and the keystroke that wrote it is
            // echoed before the disk gets busy.
            if woke - asleep_since >= RECORDING_SYNC_SETTLE {
                due = due.max(woke + RECORDING_SYNC_SETTLE);
            }
            tokio::time::sleep_until(due).await;
        }
        last = tokio::time::Instant::now();
        if let Err(e) = store.sync_or_check_space().await {
            tracing::error!("recording flush failed: {e}");
        }
        // The flush looked at the free space: tell the sessions when it changed.
        let low = store.low_space().is_some();
        if low != was_low {
            was_low = low;
            for host in hub.all_hosts() {
                host.wake.notify_one();
            }
        }
    }
}
