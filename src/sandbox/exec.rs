//! Running an agent's command: `bash -c`, bounded output, a timeout that
//! kills the whole process group.

use std::os::fd::OwnedFd;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, Interest};
use tokio::net::unix::pipe::{Receiver, Sender};
use tokio::process::{Child, Command};
use tokio::sync::{oneshot, watch};

use super::capture::{BoundedBuffer, capture};
use super::spawner::{Exit, SpawnError, Spawner};
use super::sys::signal_group;

/// How long readers may keep draining after the main process exited. Only a
/// background job still holding the pipes makes us wait this long.
const DRAIN_GRACE: Duration = Duration::from_millis(200);
/// How long a spawned command's end may go unreported by its spawner
/// (frozen with a paused session) before its status counts as unknown.
const EXIT_REPORT_GRACE: Duration = Duration::from_millis(500);

/// An agent's command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecSpec {
    /// Run as `bash -c command` (`sh -c` when bash is missing).
    pub command: String,
    pub cwd: PathBuf,
    /// Added on top of the inherited environment.
    pub env: Vec<(String, String)>,
    /// Start from an empty environment instead of the inherited one (session
    /// processes always do: see `environ`); `env` is then all there is.
    pub env_clear: bool,
    /// Run `bash -c command` through this argv (a session's jail, see
    /// `jail`); empty: directly.
    pub prefix: Vec<String>,
    pub timeout: Duration,
    /// Bytes kept from each of stdout and stderr.
    pub output_limit: usize,
    /// Fed to the command's stdin, which is then closed; `None` means /dev/null.
    pub stdin: Option<Vec<u8>>,
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, PartialEq)]
pub struct ExecResult {
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub stdout_truncated: bool,
    pub stderr_truncated: bool,
    pub timed_out: bool,
    pub duration_ms: u64,
}

/// Runs the command to completion (or timeout). Err only if it could not spawn.
pub async fn exec(spec: &ExecSpec) -> anyhow::Result<ExecResult> {
    let started = Instant::now();
    let mut child = spawn_shell(spec)?;
    // process_group(0) made the child its own group leader: pgid == pid.
    let group = GroupKiller::new(child.id().and_then(|pid| i32::try_from(pid).ok()));
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let stdin = child.stdin.take();
    Ok(finish(
        spec,
        started,
        Leader::Direct(child),
        group,
        stdout,
        stderr,
        stdin,
    )
    .await)
}

/// Runs the command through the session's spawner (see `spawner`): the
/// same command, environment, limits and result as [`exec`].
pub async fn exec_via(spec: &ExecSpec, spawner: &Spawner) -> Result<ExecResult, SpawnError> {
    let started = Instant::now();
    let deadline = tokio::time::Instant::now() + spec.timeout;
    let failed = |what: &str, e: std::io::Error| SpawnError::Failed(format!("{what}: {e}"));
    let mut shell = "bash";
    let (spawned, stdout, stderr, stdin) = loop {
        let (out_read, out_write) = std::io::pipe().map_err(|e| failed("a pipe", e))?;
        let (err_read, err_write) = std::io::pipe().map_err(|e| failed("a pipe", e))?;
        let (input, input_write) = match spec.stdin {
            Some(_) => {
                let (read, write) = std::io::pipe().map_err(|e| failed("a pipe", e))?;
                (OwnedFd::from(read), Some(write))
            }
            None => (
                OwnedFd::from(
                    std::fs::File::open("/dev/null").map_err(|e| failed("/dev/null", e))?,
                ),
                None,
            ),
        };
        let argv = vec![shell.to_string(), "-c".to_string(), spec.command.clone()];
        let stdio = [input, OwnedFd::from(out_write), OwnedFd::from(err_write)];
        let spawn = spawner.spawn(argv, spawn_env(spec), spec.cwd.clone(), stdio);
        match tokio::time::timeout_at(deadline, spawn).await {
            Ok(Ok(spawned)) => break (spawned, out_read, err_read, input_write),
            Ok(Err(SpawnError::NotFound(_))) if shell == "bash" && spec.cwd.is_dir() => {
                shell = "sh"
            }
            Ok(Err(SpawnError::NotFound(e) | SpawnError::Failed(e))) => {
                return Err(SpawnError::Failed(format!(
                    "spawning `{shell} -c` in {}: {e}",
                    spec.cwd.display()
                )));
            }
            Ok(Err(e)) => return Err(e),
            // Not started in time (a frozen session): it never runs.
            Err(_elapsed) => return Ok(never_started(started)),
        }
    };
    let group = GroupKiller::new(spawned.pid);
    let pipe = |fd: std::io::PipeReader| Receiver::from_owned_fd(OwnedFd::from(fd));
    let stdout = pipe(stdout).map_err(|e| failed("stdout", e))?;
    let stderr = pipe(stderr).map_err(|e| failed("stderr", e))?;
    let stdin = stdin
        .map(|w| Sender::from_owned_fd(OwnedFd::from(w)))
        .transpose()
        .map_err(|e| failed("stdin", e))?;
    // SAFETY: an OwnedFd stays open, and the same descriptor, until the AsyncFd drops it.
    let pidfd = unsafe { AsyncFd::register_with_interest(spawned.pidfd, Interest::READABLE) }
        .map_err(|e| failed("the command's pidfd", e.into()))?;
    let leader = Leader::Spawned {
        exited: spawned.exited,
        pidfd,
    };
    Ok(finish(
        spec,
        started,
        leader,
        group,
        Some(stdout),
        Some(stderr),
        stdin,
    )
    .await)
}

/// The environment a spawned command gets, as `build_command` gives it.
fn spawn_env(spec: &ExecSpec) -> Vec<(String, String)> {
    if spec.env_clear {
        return spec.env.clone();
    }
    let mut env: Vec<(String, String)> = std::env::vars()
        .filter(|(k, _)| !spec.env.iter().any(|(name, _)| name == k))
        .collect();
    env.extend(spec.env.iter().cloned());
    env
}

fn never_started(started: Instant) -> ExecResult {
    ExecResult {
        exit_code: None,
        signal: None,
        stdout: String::new(),
        stderr: String::new(),
        stdout_truncated: false,
        stderr_truncated: false,
        timed_out: true,
        duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
    }
}

/// A command's main process, however it was started.
enum Leader {
    Direct(Child),
    Spawned {
        exited: oneshot::Receiver<Exit>,
        /// Readable once it has ended, whether or not its spawner (frozen
        /// with a paused session, or gone) says so.
        pidfd: AsyncFd<OwnedFd>,
    },
}

impl Leader {
    /// Its exit code and signal once it ends; None if that cannot be known.
    async fn wait(&mut self) -> Option<(Option<i32>, Option<i32>)> {
        match self {
            Leader::Direct(child) => {
                let status: ExitStatus = child.wait().await.ok()?;
                Some((status.code(), status.signal()))
            }
            Leader::Spawned { exited, pidfd } => {
                tokio::select! {
                    biased;
                    exit = &mut *exited => {
                        if let Ok(exit) = exit {
                            return Some((exit.code, exit.signal));
                        }
                        // The spawner is gone: its end is still waited for.
                        let _ = pidfd.readable().await;
                        return None;
                    }
                    _ = pidfd.readable() => {}
                }
                // It ended: how, if its spawner says so soon.
                match tokio::time::timeout(EXIT_REPORT_GRACE, exited).await {
                    Ok(Ok(exit)) => Some((exit.code, exit.signal)),
                    _ => None,
                }
            }
        }
    }
}

/// Waits for the command, kills its group at the timeout, and collects
/// its output.
async fn finish<R, E, W>(
    spec: &ExecSpec,
    started: Instant,
    mut leader: Leader,
    group: GroupKiller,
    stdout: Option<R>,
    stderr: Option<E>,
    stdin: Option<W>,
) -> ExecResult
where
    R: AsyncRead + Unpin + Send + 'static,
    E: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (stop_tx, stop_rx) = watch::channel(None);
    let stdout_task =
        stdout.map(|pipe| tokio::spawn(capture(pipe, spec.output_limit, stop_rx.clone())));
    let stderr_task =
        stderr.map(|pipe| tokio::spawn(capture(pipe, spec.output_limit, stop_rx.clone())));
    let stdin_task = match (stdin, spec.stdin.clone()) {
        (Some(mut pipe), Some(input)) => Some(tokio::spawn(async move {
            // A command that exits without reading its input is not an error.
            let _ = pipe.write_all(&input).await;
            let _ = pipe.shutdown().await;
        })),
        _ => None,
    };

    let (status, timed_out) = wait_or_kill(&mut leader, &group, spec.timeout).await;
    let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);

    // Background jobs (`nohup train.py &`) outlive the command, as they would in
    // a terminal: an agent starts long runs this way. They belong to the session
    // and end with it (`procs::kill_all`). Their hold on our pipes is cut after
    // a short drain instead.
    if timed_out {
        group.kill_and_disarm();
    } else {
        group.disarm();
    }
    stop_tx.send_replace(Some(tokio::time::Instant::now() + DRAIN_GRACE));
    let stdout = join_capture(stdout_task, spec.output_limit).await;
    let stderr = join_capture(stderr_task, spec.output_limit).await;
    if let Some(task) = stdin_task {
        task.abort();
    }

    let (stdout, stdout_truncated) = stdout.into_lossy_string();
    let (stderr, stderr_truncated) = stderr.into_lossy_string();
    let (exit_code, signal) = status.unwrap_or((None, None));
    ExecResult {
        exit_code,
        signal,
        stdout,
        stderr,
        stdout_truncated,
        stderr_truncated,
        timed_out,
        duration_ms,
    }
}

fn spawn_shell(spec: &ExecSpec) -> anyhow::Result<Child> {
    match build_command("bash", spec).spawn() {
        Err(err) if err.kind() == std::io::ErrorKind::NotFound && spec.cwd.is_dir() => {
            build_command("sh", spec)
                .spawn()
                .with_context(|| format!("spawning `sh -c` in {}", spec.cwd.display()))
        }
        spawned => spawned.with_context(|| format!("spawning `bash -c` in {}", spec.cwd.display())),
    }
}

fn build_command(shell: &str, spec: &ExecSpec) -> Command {
    let mut command = match spec.prefix.split_first() {
        Some((program, args)) => {
            let mut command = Command::new(program);
            command.args(args).arg(shell);
            command
        }
        None => Command::new(shell),
    };
    command.arg("-c").arg(&spec.command).current_dir(&spec.cwd);
    if spec.env_clear {
        command.env_clear();
    }
    command
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .stdin(if spec.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        // If our future is dropped mid-run, tokio kills and reaps the leader;
        // GroupKiller's Drop takes care of the rest of the group.
        .kill_on_drop(true);
    command
}

/// Waits for the main process; on timeout kills its group and reaps it.
/// Returns its exit (None if that is not known) and whether it timed out.
async fn wait_or_kill(
    leader: &mut Leader,
    group: &GroupKiller,
    timeout: Duration,
) -> (Option<(Option<i32>, Option<i32>)>, bool) {
    match tokio::time::timeout(timeout, leader.wait()).await {
        Ok(status) => (status, false),
        Err(_elapsed) => {
            group.kill();
            (leader.wait().await, true)
        }
    }
}

async fn join_capture(
    task: Option<tokio::task::JoinHandle<BoundedBuffer>>,
    limit: usize,
) -> BoundedBuffer {
    match task {
        Some(task) => task.await.unwrap_or_else(|_| BoundedBuffer::new(limit)),
        None => BoundedBuffer::new(limit),
    }
}

/// SIGKILLs the command's process group, and does so on drop too, so a
/// cancelled exec leaves nothing running.
struct GroupKiller {
    pgid: Option<i32>,
    /// Cleared after the last deliberate kill: once the group is empty its id
    /// may be reused, so Drop must not signal it again.
    armed: AtomicBool,
}

impl GroupKiller {
    fn new(pgid: Option<i32>) -> Self {
        GroupKiller {
            pgid,
            armed: AtomicBool::new(true),
        }
    }

    fn kill(&self) {
        if !self.armed.load(Ordering::Relaxed) {
            return;
        }
        if let Some(pgid) = self.pgid {
            // ESRCH (group already empty) is the common, fine case.
            signal_group(pgid, libc::SIGKILL);
        }
    }
}

impl GroupKiller {
    fn kill_and_disarm(&self) {
        self.kill();
        self.disarm();
    }

    /// The command finished: its group (background jobs) is left alone.
    fn disarm(&self) {
        self.armed.store(false, Ordering::Relaxed);
    }
}

impl Drop for GroupKiller {
    fn drop(&mut self) {
        self.kill();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send<T: Send>(_: &T) {}

    #[test]
    fn exec_future_can_be_spawned() {
        let spec = ExecSpec {
            command: "true".into(),
            cwd: PathBuf::from("/"),
            env: Vec::new(),
            env_clear: false,
            prefix: Vec::new(),
            timeout: Duration::from_secs(1),
            output_limit: 1,
            stdin: None,
        };
        // The server runs exec on tokio::spawn, which needs a Send future.
        assert_send(&exec(&spec));
    }
}
