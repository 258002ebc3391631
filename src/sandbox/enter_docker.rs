//! `rebench sandbox-enter --docker …`: a session process of a docker
//! session. The command runs in the session's container through the
//! engine's exec API; this process, on the server's machine, relays its own
//! stdin, stdout and stderr to it (with a TTY when it has one: a shell's
//! PTY, resized through the API when its window changes) and exits with the
//! command's code. So shells, exec and the participant code a scorer runs
//! use the same recorder and pipes as every other backend.

use std::ffi::OsString;
use std::path::Path;

use anyhow::{Context, bail};
use bollard::container::LogOutput;
use bollard::exec::{CreateExecOptions, StartExecOptions, StartExecResults};
use bollard::query_parameters::ResizeExecOptions;
use futures_util::StreamExt;
use tokio::io::AsyncWriteExt;

use super::docker::Engine;
use super::enter::DockerTarget;

/// Runs `argv` in the container; the exit code to exit with.
pub fn run(
    target: &DockerTarget,
    cwd: &Path,
    env: &[(OsString, OsString)],
    argv: &[OsString],
) -> anyhow::Result<i32> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting a runtime")?;
    let code = runtime.block_on(relay(target, cwd, env, argv));
    // Stdin's reader may still wait on a blocking read: do not wait for it.
    runtime.shutdown_background();
    code
}

async fn relay(
    target: &DockerTarget,
    cwd: &Path,
    env: &[(OsString, OsString)],
    argv: &[OsString],
) -> anyhow::Result<i32> {
    let engine = Engine::connect("the session's", &target.endpoint)?;
    let tty = is_terminal(0) && is_terminal(1);
    let text = |s: &OsString| s.to_string_lossy().into_owned();
    let options = CreateExecOptions {
        attach_stdin: Some(true),
        attach_stdout: Some(true),
        attach_stderr: Some(true),
        tty: Some(tty),
        env: Some(
            env.iter()
                .map(|(k, v)| format!("{}={}", text(k), text(v)))
                .collect(),
        ),
        cmd: Some(argv.iter().map(text).collect()),
        user: Some(target.user.clone()),
        working_dir: Some(cwd.display().to_string()),
        ..Default::default()
    };
    // A process started while the session is frozen (a shell opened
    // before its clock starts) waits until it is thawed, as it would in a
    // frozen cgroup: the engine refuses to exec in a paused container.
    let exec = loop {
        match engine
            .client
            .create_exec(&target.container, options.clone())
            .await
        {
            Err(e) if e.to_string().contains("is paused") => {
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
            made => {
                break made.map_err(|e| {
                    anyhow::anyhow!(
                        engine.explain("starting a command in the session's container", e)
                    )
                })?;
            }
        }
    };
    let started = engine
        .client
        .start_exec(
            &exec.id,
            Some(StartExecOptions {
                detach: false,
                tty,
                output_capacity: None,
            }),
        )
        .await
        .map_err(|e| {
            anyhow::anyhow!(engine.explain("attaching to a command in the session's container", e))
        })?;
    let StartExecResults::Attached {
        mut output,
        mut input,
    } = started
    else {
        bail!("the engine started the command detached");
    };
    let _raw = if tty { RawMode::set(0) } else { None };
    if tty {
        resize(&engine, &exec.id).await;
        let (engine, id) = (engine.clone(), exec.id.clone());
        tokio::spawn(async move {
            let Ok(mut changes) =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::window_change())
            else {
                return;
            };
            while changes.recv().await.is_some() {
                resize(&engine, &id).await;
            }
        });
    }
    tokio::spawn(async move {
        let mut stdin = tokio::io::stdin();
        let _ = tokio::io::copy(&mut stdin, &mut input).await;
        let _ = input.shutdown().await;
    });
    let (mut stdout, mut stderr) = (tokio::io::stdout(), tokio::io::stderr());
    while let Some(chunk) = output.next().await {
        let chunk = match chunk {
            Ok(chunk) => chunk,
            Err(e) => bail!(engine.explain("reading a command's output", e)),
        };
        // A reader that went away (a closed shell) ends the relay.
        let written = match chunk {
            LogOutput::StdOut { message } | LogOutput::Console { message } => {
                write_all(&mut stdout, &message).await
            }
            LogOutput::StdErr { message } => write_all(&mut stderr, &message).await,
            LogOutput::StdIn { .. } => Ok(()),
        };
        if written.is_err() {
            return Ok(1);
        }
    }
    let inspected = engine
        .client
        .inspect_exec(&exec.id)
        .await
        .map_err(|e| anyhow::anyhow!(engine.explain("reading a command's exit code", e)))?;
    Ok(inspected.exit_code.map_or(1, |c| c as i32))
}

async fn write_all<W: tokio::io::AsyncWrite + Unpin>(
    out: &mut W,
    bytes: &[u8],
) -> std::io::Result<()> {
    out.write_all(bytes).await?;
    out.flush().await
}

/// The container's TTY takes this terminal's size.
async fn resize(engine: &Engine, exec: &str) {
    let Some((rows, cols)) = window_size(0) else {
        return;
    };
    let options = ResizeExecOptions {
        h: i32::from(rows),
        w: i32::from(cols),
    };
    let _ = engine.client.resize_exec(exec, options).await;
}

fn is_terminal(fd: i32) -> bool {
    // SAFETY: isatty only reads the descriptor's kind.
    unsafe { libc::isatty(fd) == 1 }
}

fn window_size(fd: i32) -> Option<(u16, u16)> {
    let mut size = libc::winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCGWINSZ writes one winsize into `size`.
    let ok = unsafe { libc::ioctl(fd, libc::TIOCGWINSZ, &mut size) } == 0;
    (ok && size.ws_row > 0 && size.ws_col > 0).then_some((size.ws_row, size.ws_col))
}

/// This terminal in raw mode while it lives: keys go to the container's
/// TTY byte for byte, and its line discipline does the rest.
struct RawMode {
    fd: i32,
    saved: libc::termios,
}

impl RawMode {
    fn set(fd: i32) -> Option<RawMode> {
        // SAFETY: termios is plain data; tcgetattr fills it.
        let mut saved: libc::termios = unsafe { std::mem::zeroed() };
        if unsafe { libc::tcgetattr(fd, &mut saved) } != 0 {
            return None;
        }
        let mut raw = saved;
        // SAFETY: cfmakeraw edits the struct it is given.
        unsafe { libc::cfmakeraw(&mut raw) };
        // SAFETY: a valid termios for this descriptor.
        (unsafe { libc::tcsetattr(fd, libc::TCSANOW, &raw) } == 0).then_some(RawMode { fd, saved })
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        // SAFETY: restores what tcgetattr returned.
        unsafe { libc::tcsetattr(self.fd, libc::TCSANOW, &self.saved) };
    }
}
