//! The server's side of a session's spawner: start it through the
//! session's launcher, send it commands, and learn when they start and end.

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::sys::socket::{AddressFamily, SockFlag, SockType, socketpair};
use tokio::io::unix::AsyncFd;
use tokio::sync::oneshot;

use super::wire::{FromSpawner, Incoming, Outgoing, ToSpawner, encode};
use crate::sandbox::sys::signal_group;

/// How long a new spawner may take to say it is ready.
const READY_WITHIN: Duration = Duration::from_secs(10);

/// Why a command did not start.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    /// No such program (the caller may try another shell).
    #[error("{0}")]
    NotFound(String),
    /// The spawner tried and could not.
    #[error("{0}")]
    Failed(String),
    /// The request never reached the spawner: the command did not run.
    #[error("the session's spawner is gone: {0}")]
    Unreachable(String),
    /// The spawner went away after it had the request: whether the command
    /// started is not known.
    #[error("the session's spawner stopped before it said whether the command started")]
    Lost,
}

/// How a command ended, as its spawner saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exit {
    pub code: Option<i32>,
    pub signal: Option<i32>,
}

/// A started command.
pub struct Spawned {
    /// Its process id here, which is also its process group's.
    pub pid: Option<i32>,
    /// Its pidfd: readable once it has exited.
    pub pidfd: OwnedFd,
    /// Its end, when the spawner reports it (closed if the spawner dies).
    pub exited: oneshot::Receiver<Exit>,
}

#[derive(Default)]
struct Waiting {
    started: Option<oneshot::Sender<Result<OwnedFd, SpawnError>>>,
    exited: Option<oneshot::Sender<Exit>>,
}

/// One session's spawner.
pub struct Spawner {
    socket: Arc<AsyncFd<OwnedFd>>,
    sending: tokio::sync::Mutex<()>,
    waiting: Arc<Mutex<HashMap<u64, Waiting>>>,
    next_id: AtomicU64,
    closed: Arc<AtomicBool>,
    reader: tokio::task::JoinHandle<()>,
    /// The launcher that runs it (reaped by tokio once it ends).
    process: tokio::process::Child,
}

impl Drop for Spawner {
    fn drop(&mut self) {
        // Our end of the socket closes with us: the spawner sees it and ends.
        self.reader.abort();
    }
}

impl Spawner {
    /// Starts `argv` (the session's launcher, then the spawner program)
    /// with exactly `env`, in `cwd`, and waits until it serves.
    pub async fn start(
        argv: &[String],
        env: &[(String, String)],
        cwd: &Path,
    ) -> io::Result<Spawner> {
        let Some((program, args)) = argv.split_first() else {
            return Err(io::Error::other("no spawner command"));
        };
        let (ours, theirs) = socketpair(
            AddressFamily::Unix,
            SockType::Stream,
            None,
            SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK,
        )?;
        let process = tokio::process::Command::new(program)
            .args(args)
            .env_clear()
            .envs(env.iter().map(|(k, v)| (k, v)))
            .current_dir(cwd)
            .stdin(std::process::Stdio::from(theirs))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .process_group(0)
            .spawn()?;
        // SAFETY: an OwnedFd stays open, and the same descriptor, until the AsyncFd drops it.
        let socket = Arc::new(unsafe { AsyncFd::register(ours) }.map_err(io::Error::from)?);
        let waiting: Arc<Mutex<HashMap<u64, Waiting>>> = Arc::default();
        let closed = Arc::new(AtomicBool::new(false));
        let (ready_tx, ready_rx) = oneshot::channel();
        let reader = tokio::spawn(read_replies(
            socket.clone(),
            waiting.clone(),
            closed.clone(),
            ready_tx,
        ));
        let spawner = Spawner {
            socket,
            sending: tokio::sync::Mutex::new(()),
            waiting,
            next_id: AtomicU64::new(1),
            closed,
            reader,
            process,
        };
        match tokio::time::timeout(READY_WITHIN, ready_rx).await {
            Ok(Ok(())) => Ok(spawner),
            Ok(Err(_)) => Err(io::Error::other("the spawner ended before it was ready")),
            Err(_) => Err(io::Error::other(format!(
                "the spawner was not ready within {} s",
                READY_WITHIN.as_secs()
            ))),
        }
    }

    /// The process the server started for it: the spawner, or the
    /// launcher that waits for it (in a jail).
    pub fn pid(&self) -> Option<u32> {
        self.process.id()
    }

    /// Whether it still serves.
    pub fn is_alive(&self) -> bool {
        !self.closed.load(Ordering::Acquire)
    }

    /// Starts `argv` in `cwd` with `env` and the given stdin, stdout and
    /// stderr. Dropping the future before it resolves kills the command if
    /// it starts after all.
    pub async fn spawn(
        &self,
        argv: Vec<String>,
        env: Vec<(String, String)>,
        cwd: PathBuf,
        stdio: [OwnedFd; 3],
    ) -> Result<Spawned, SpawnError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (started_tx, started_rx) = oneshot::channel();
        let (exited_tx, exited_rx) = oneshot::channel();
        self.waiting
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(
                id,
                Waiting {
                    started: Some(started_tx),
                    exited: Some(exited_tx),
                },
            );
        let mut pending = Pending {
            id,
            waiting: &self.waiting,
            started: started_rx,
            answered: false,
        };
        let frame = encode(&ToSpawner::Spawn { id, argv, env, cwd })
            .map_err(|e| SpawnError::Failed(e.to_string()))?;
        self.send(frame, &stdio)
            .await
            .map_err(|e| SpawnError::Unreachable(e.to_string()))?;
        // Ours are closed now: the command holds its copies.
        drop(stdio);
        let pidfd = pending.answer().await?;
        Ok(Spawned {
            pid: pid_of(&pidfd),
            pidfd,
            exited: exited_rx,
        })
    }

    async fn send(&self, frame: Vec<u8>, fds: &[OwnedFd; 3]) -> io::Result<()> {
        if !self.is_alive() {
            return Err(io::Error::other("it has ended"));
        }
        let _turn = self.sending.lock().await;
        let mut outgoing = Outgoing::new(frame, fds.iter().map(|fd| fd.as_raw_fd()).collect());
        loop {
            let mut ready = self.socket.writable().await?;
            match ready.try_io(|socket| outgoing.send(socket.get_ref().as_fd())) {
                Ok(Ok(true)) => return Ok(()),
                Ok(Ok(false)) => {}
                Ok(Err(e)) => return Err(e),
                Err(_would_block) => {}
            }
        }
    }
}

/// A request until its answer: if its caller stops waiting first, the
/// command is killed should it start after all.
struct Pending<'a> {
    id: u64,
    waiting: &'a Mutex<HashMap<u64, Waiting>>,
    started: oneshot::Receiver<Result<OwnedFd, SpawnError>>,
    answered: bool,
}

impl Pending<'_> {
    async fn answer(&mut self) -> Result<OwnedFd, SpawnError> {
        let answer = (&mut self.started).await;
        self.answered = true;
        answer.map_err(|_| SpawnError::Lost)?
    }
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        if self.answered {
            return;
        }
        {
            let mut waiting = self.waiting.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(entry) = waiting.get_mut(&self.id) {
                entry.started = None;
                entry.exited = None;
            }
        }
        // Delivered just before we stopped waiting.
        if let Ok(Ok(pidfd)) = self.started.try_recv() {
            kill_group_of(&pidfd);
        }
    }
}

fn kill_group_of(pidfd: &OwnedFd) {
    // Its process group is its own (the spawner starts it so).
    if let Some(pid) = pid_of(pidfd) {
        signal_group(pid, libc::SIGKILL);
    }
}

async fn read_replies(
    socket: Arc<AsyncFd<OwnedFd>>,
    waiting: Arc<Mutex<HashMap<u64, Waiting>>>,
    closed: Arc<AtomicBool>,
    ready: oneshot::Sender<()>,
) {
    let mut ready = Some(ready);
    let mut incoming = Incoming::default();
    let ended = loop {
        let filled = match socket.readable().await {
            Ok(mut guard) => match guard.try_io(|socket| incoming.fill(socket.get_ref().as_fd())) {
                Ok(result) => result,
                Err(_would_block) => continue,
            },
            Err(e) => Err(e),
        };
        match filled {
            Ok(true) => {}
            Ok(false) => break "it hung up".to_string(),
            Err(e) => break e.to_string(),
        }
        let mut problem = None;
        loop {
            match incoming.next::<FromSpawner>(FromSpawner::fds) {
                Ok(Some((message, fds))) => {
                    if matches!(message, FromSpawner::Ready) {
                        if let Some(ready) = ready.take() {
                            let _ = ready.send(());
                        }
                        continue;
                    }
                    deliver(&waiting, message, fds);
                }
                Ok(None) => break,
                Err(e) => {
                    problem = Some(e.to_string());
                    break;
                }
            }
        }
        if let Some(problem) = problem {
            break problem;
        }
    };
    tracing::debug!("a session's spawner stopped: {ended}");
    closed.store(true, Ordering::Release);
    // Whoever waits learns it: their senders are dropped.
    waiting.lock().unwrap_or_else(|e| e.into_inner()).clear();
}

fn deliver(waiting: &Mutex<HashMap<u64, Waiting>>, message: FromSpawner, fds: Vec<OwnedFd>) {
    let mut waiting = waiting.lock().unwrap_or_else(|e| e.into_inner());
    match message {
        FromSpawner::Ready => {}
        FromSpawner::Started { id } => {
            let Some(pidfd) = fds.into_iter().next() else {
                return;
            };
            let Some(entry) = waiting.get_mut(&id) else {
                return;
            };
            match entry.started.take() {
                Some(started) => {
                    if let Err(Ok(pidfd)) = started.send(Ok(pidfd)) {
                        kill_group_of(&pidfd);
                        waiting.remove(&id);
                    }
                }
                None => {
                    // Nobody waits for it any more: it must not run.
                    kill_group_of(&pidfd);
                    waiting.remove(&id);
                }
            }
        }
        FromSpawner::Failed {
            id,
            message,
            not_found,
        } => {
            if let Some(started) = waiting.remove(&id).and_then(|mut e| e.started.take()) {
                let error = if not_found {
                    SpawnError::NotFound(message)
                } else {
                    SpawnError::Failed(message)
                };
                let _ = started.send(Err(error));
            }
        }
        FromSpawner::Exited { id, code, signal } => {
            if let Some(exited) = waiting.remove(&id).and_then(|mut e| e.exited.take()) {
                let _ = exited.send(Exit { code, signal });
            }
        }
    }
}

/// The process id, in our pid namespace, of the process `pidfd` refers
/// to (the kernel says it in the descriptor's fdinfo); None once it is
/// gone.
fn pid_of(pidfd: &OwnedFd) -> Option<i32> {
    let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{}", pidfd.as_raw_fd())).ok()?;
    info.lines()
        .find_map(|line| line.strip_prefix("Pid:"))
        .and_then(|pid| pid.trim().parse().ok())
        .filter(|pid: &i32| *pid > 0)
}
