//! Spawning a scorer and turning whatever it does into a [`ScorerOutcome`].
//!
//! The scorer is participant-reachable code, so everything about it is
//! untrusted: it may hang, flood output, fork stray children or print junk.
//! Each failure becomes an invalid outcome; this module never errors.

use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::{Child, Command};

use super::capture::{BoundedOutput, LastLineTracker};
use super::duration_text::format_duration;
use super::io_text::describe_io_error;
use super::result::parse_last_line;

/// After the scorer exits (or is killed), how long we keep draining its pipes.
/// Killing the group normally closes them at once; this only bounds the wait
/// for a descendant that escaped the group but still holds a pipe.
const DRAIN_GRACE: Duration = Duration::from_millis(500);
const READ_CHUNK: usize = 64 * 1024;

#[derive(Debug, Clone)]
pub struct ScorerInvocation {
    /// Already substituted; `argv[0]` is looked up on PATH.
    pub argv: Vec<String>,
    /// The session workspace.
    pub cwd: PathBuf,
    /// Added to the inherited environment (REBENCH_WORKSPACE, REBENCH_PROFILE, ...).
    pub env: Vec<(String, String)>,
    /// Start from an empty environment instead of the inherited one (the
    /// server's scorers do: see `sandbox::environ`); `env` is then all there is.
    pub env_clear: bool,
    /// The `cgroup.procs` files of the cgroups the scorer starts in (so
    /// does everything it starts, whatever it does to its process group):
    /// its run's own, and those that hold it to the session's cores.
    pub cgroups: Vec<PathBuf>,
    pub timeout: Duration,
    /// Bytes of combined stdout+stderr kept in [`ScorerOutcome::output`].
    pub output_limit: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScorerOutcome {
    pub valid: bool,
    /// `Some(finite)` iff `valid`.
    pub raw: Option<f64>,
    /// Valid: the scorer's message rendered compactly. Invalid: the reason.
    pub message: String,
    /// The scorer's "message" value as given (Null if absent).
    pub scorer_message: serde_json::Value,
    /// The scorer's "details" (never shown to participants); Null if absent.
    pub details: serde_json::Value,
    /// Combined stdout+stderr, bounded to `output_limit` bytes, lossy UTF-8.
    pub output: String,
    pub exit_code: Option<i32>,
    pub duration_ms: u64,
    /// Set when the run failed for the machine's reasons (the scorer could
    /// not start: no descriptors, processes or memory): not the
    /// participant's result, and not to be recorded as one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infrastructure: Option<String>,
}

/// Runs the scorer to completion or timeout. Never panics, never errors.
pub async fn run_scorer(inv: &ScorerInvocation) -> ScorerOutcome {
    let started = Instant::now();
    let run = match spawn(inv) {
        Ok(child) => supervise(child, inv).await,
        Err((reason, exhausted)) => {
            let mut run = FinishedRun::not_started(reason.clone(), inv.output_limit);
            run.infrastructure = exhausted.then_some(reason);
            run
        }
    };
    run.into_outcome(started.elapsed())
}

/// Err: why it could not start, and whether the machine is to blame.
fn spawn(inv: &ScorerInvocation) -> Result<Child, (String, bool)> {
    spawn_inner(inv).map_err(|(reason, error)| {
        let exhausted = error.as_ref().is_some_and(super::io_text::is_exhaustion);
        (reason, exhausted)
    })
}

fn spawn_inner(inv: &ScorerInvocation) -> Result<Child, (String, Option<std::io::Error>)> {
    let Some(program) = inv.argv.first() else {
        return Err(("scorer could not start: empty command".into(), None));
    };
    // Otherwise a missing workspace surfaces as ENOENT blamed on the program.
    if !inv.cwd.is_dir() {
        return Err((
            format!(
                "scorer could not start: working directory {} does not exist",
                inv.cwd.display()
            ),
            None,
        ));
    }
    let mut command = Command::new(program);
    command
        .args(&inv.argv[1..])
        .current_dir(&inv.cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Own group, so a timeout can kill everything the scorer started.
        .process_group(0)
        .kill_on_drop(true);
    if inv.env_clear {
        command.env_clear();
    }
    command.envs(inv.env.iter().map(|(name, value)| (name, value)));
    // Opened here: pre_exec may not allocate. Kept until the spawn is done.
    let mut procs = Vec::with_capacity(inv.cgroups.len());
    for path in &inv.cgroups {
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(path)
            .map_err(|e| {
                let reason = format!("scorer could not start: its cgroup {}: {e}", path.display());
                // Never the participant's doing.
                (
                    reason,
                    Some(std::io::Error::from_raw_os_error(libc::EAGAIN)),
                )
            })?;
        procs.push(file);
    }
    if !procs.is_empty() {
        let fds: Vec<i32> = procs.iter().map(std::os::fd::AsRawFd::as_raw_fd).collect();
        // SAFETY: between fork and exec, only write(2) of one byte from a
        // static buffer to fds that are open in the child (no allocation:
        // `fds` was made before the fork).
        unsafe {
            command.pre_exec(move || {
                for &fd in &fds {
                    if libc::write(fd, b"0".as_ptr().cast(), 1) != 1 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                Ok(())
            });
        }
    }
    let _procs = procs;
    command.spawn().map_err(|error| {
        (
            format!(
                "scorer could not start: {program}: {}",
                describe_io_error(&error)
            ),
            Some(error),
        )
    })
}

/// How the process ended, before its output is interpreted.
enum Ending {
    Exited(ExitStatus),
    /// Killed by us after the invocation's timeout.
    TimedOut(Duration),
    /// Could not start, or could not be waited for.
    Failed(String),
}

struct FinishedRun {
    ending: Ending,
    output: BoundedOutput,
    last_line: LastLineTracker,
    infrastructure: Option<String>,
}

impl FinishedRun {
    fn not_started(reason: String, output_limit: usize) -> Self {
        FinishedRun {
            ending: Ending::Failed(reason),
            output: BoundedOutput::new(output_limit),
            last_line: LastLineTracker::default(),
            infrastructure: None,
        }
    }
}

async fn supervise(mut child: Child, inv: &ScorerInvocation) -> FinishedRun {
    let group = child.id().and_then(|pid| i32::try_from(pid).ok());
    let mut stdout = child.stdout.take();
    let mut stderr = child.stderr.take();
    let mut output = BoundedOutput::new(inv.output_limit);
    let mut last_line = LastLineTracker::default();
    let mut stdout_buf = vec![0u8; READ_CHUNK];
    let mut stderr_buf = vec![0u8; READ_CHUNK];

    let now = tokio::time::Instant::now();
    // A huge configured timeout must not overflow the clock (that panics).
    let timeout_at = now
        .checked_add(inv.timeout)
        .unwrap_or_else(|| now + Duration::from_secs(100 * 365 * 24 * 3600));
    let mut ending: Option<Ending> = None;
    let mut timed_out = false;
    // Set once the process is gone (or killed): stop reading by then.
    let mut drain_until: Option<tokio::time::Instant> = None;

    loop {
        if stdout.is_none() && stderr.is_none() && ending.is_some() {
            break;
        }
        tokio::select! {
            read = read_some(&mut stdout, &mut stdout_buf) => match read {
                Some(chunk_len) => {
                    let chunk = &stdout_buf[..chunk_len];
                    output.push(chunk);
                    last_line.push(chunk);
                }
                None => stdout = None,
            },
            read = read_some(&mut stderr, &mut stderr_buf) => match read {
                Some(chunk_len) => output.push(&stderr_buf[..chunk_len]),
                None => stderr = None,
            },
            waited = child.wait(), if ending.is_none() => {
                // Stray children of the scorer must not outlive it.
                kill_group(group);
                ending = Some(match waited {
                    Ok(_) if timed_out => Ending::TimedOut(inv.timeout),
                    Ok(status) => Ending::Exited(status),
                    Err(error) => Ending::Failed(format!("could not wait for scorer: {error}")),
                });
                drain_until.get_or_insert(tokio::time::Instant::now() + DRAIN_GRACE);
            },
            _ = tokio::time::sleep_until(timeout_at), if !timed_out && ending.is_none() => {
                timed_out = true;
                kill_group(group);
                drain_until = Some(tokio::time::Instant::now() + DRAIN_GRACE);
            },
            _ = sleep_until_opt(drain_until) => break,
        }
    }

    let ending = match ending {
        Some(ending) => ending,
        None if timed_out => Ending::TimedOut(inv.timeout),
        // Unreachable in practice: we only leave the loop early after a timeout.
        None => Ending::Failed("scorer output could not be read to the end".into()),
    };
    FinishedRun {
        ending,
        output,
        last_line,
        infrastructure: None,
    }
}

/// Reads one chunk; `None` at end of stream or on error. Pending forever once
/// the stream is gone, so a closed pipe never wins a `select!`.
async fn read_some<R: AsyncRead + Unpin>(stream: &mut Option<R>, buf: &mut [u8]) -> Option<usize> {
    match stream {
        Some(stream) => match stream.read(buf).await {
            Ok(0) | Err(_) => None,
            Ok(chunk_len) => Some(chunk_len),
        },
        None => std::future::pending().await,
    }
}

async fn sleep_until_opt(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// SIGKILL the scorer's whole process group. The group id is the scorer's
/// pid, which the kernel does not hand out again while any group member
/// lives; once the group is empty the kill is a harmless no-op.
fn kill_group(group: Option<i32>) {
    if let Some(pgid) = group.filter(|&pgid| pgid > 1) {
        // SAFETY: kill(2) has no memory-safety preconditions; failure (group already gone) is fine.
        unsafe {
            libc::kill(-pgid, libc::SIGKILL);
        }
    }
}

impl FinishedRun {
    fn into_outcome(self, elapsed: Duration) -> ScorerOutcome {
        let parsed = parse_last_line(&self.last_line.finish());
        let (exit_code, failure) = match self.ending {
            Ending::Exited(status) => (status.code(), exit_failure(status)),
            Ending::TimedOut(limit) => (
                None,
                Some(format!("timeout after {}", format_duration(limit))),
            ),
            Ending::Failed(reason) => (None, Some(reason)),
        };
        // A failed process wins over whatever it printed: a crash after a
        // plausible result line must not count.
        let (raw, message) = match (failure, parsed.score) {
            (Some(reason), _) | (None, Err(reason)) => (None, reason),
            (None, Ok(raw)) => (Some(raw), parsed.message_text),
        };
        ScorerOutcome {
            valid: raw.is_some(),
            raw,
            message,
            scorer_message: parsed.scorer_message,
            details: parsed.details,
            output: self.output.into_text(),
            exit_code,
            duration_ms: u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX),
            infrastructure: self.infrastructure,
        }
    }
}

fn exit_failure(status: ExitStatus) -> Option<String> {
    match (status.code(), status.signal()) {
        (Some(0), _) => None,
        (Some(code), _) => Some(format!("scorer exited with status {code}")),
        (None, Some(signal)) => Some(format!("scorer killed by signal {signal}")),
        (None, None) => Some(format!("scorer ended abnormally ({status})")),
    }
}
