//! Interactive shells on a pseudo-terminal, for humans.

use std::io::{Read, Write};
use std::os::fd::{BorrowedFd, OwnedFd};
use std::path::PathBuf;

use anyhow::{Context, anyhow};
use portable_pty::{Child, CommandBuilder, MasterPty, PtySize, native_pty_system};

use super::sys::{self, Reap};

/// What to run in the terminal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShellSpec {
    pub program: String,
    pub args: Vec<String>,
    pub cwd: PathBuf,
    /// Added on top of the inherited environment (the caller sets TERM here).
    pub env: Vec<(String, String)>,
    /// Start from an empty environment instead of the inherited one (session
    /// processes always do: see `environ`); `env` is then all there is.
    pub env_clear: bool,
    pub cols: u16,
    pub rows: u16,
}

/// How the shell ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ShellExit {
    pub code: Option<i32>,
    pub signal: Option<i32>,
}

/// A shell running on a PTY. Send, not Sync (the master is not Sync).
pub struct PtyShell {
    master: Box<dyn MasterPty + Send>,
    /// None when the caller took the terminal's descriptor to write it.
    writer: Option<Box<dyn Write + Send>>,
    /// Kept so the handle lives as long as the shell; we reap via waitpid
    /// ourselves because portable-pty only reports signals by name.
    _child: Box<dyn Child + Send + Sync>,
    pid: Option<i32>,
    exit: Option<ShellExit>,
}

impl PtyShell {
    /// Starts the shell as a session leader on a new PTY. Returns the shell and
    /// the (blocking) reader of its output, which reaches EOF (or an error)
    /// once the shell and everything holding the terminal are gone.
    pub fn spawn(spec: &ShellSpec) -> anyhow::Result<(PtyShell, Box<dyn Read + Send>)> {
        let mut shell = Self::start(spec)?;
        let reader = shell
            .master
            .try_clone_reader()
            .context("cloning the pty reader")?;
        shell.writer = Some(
            shell
                .master
                .take_writer()
                .context("taking the pty writer")?,
        );
        Ok((shell, reader))
    }

    /// Like `spawn`, but the terminal is one descriptor of the master for
    /// the caller to read and write itself (`PtyIo`); `write_input` then
    /// refuses.
    pub fn spawn_with_terminal(spec: &ShellSpec) -> anyhow::Result<(PtyShell, OwnedFd)> {
        let shell = Self::start(spec)?;
        let raw = shell
            .master
            .as_raw_fd()
            .ok_or_else(|| anyhow!("the pty master has no descriptor"))?;
        // SAFETY: the master lives in `shell` for the duration of the borrow.
        let terminal = unsafe { BorrowedFd::borrow_raw(raw) }
            .try_clone_to_owned()
            .context("duplicating the pty master")?;
        Ok((shell, terminal))
    }

    fn start(spec: &ShellSpec) -> anyhow::Result<PtyShell> {
        // portable-pty would silently start in $HOME instead.
        anyhow::ensure!(
            spec.cwd.is_dir(),
            "shell working directory {} is not a directory",
            spec.cwd.display()
        );
        let pair = native_pty_system()
            .openpty(pty_size(spec.cols, spec.rows))
            .context("opening a pty")?;

        let mut command = CommandBuilder::new(&spec.program);
        command.args(&spec.args);
        command.cwd(&spec.cwd);
        if spec.env_clear {
            command.env_clear();
        }
        for (key, value) in &spec.env {
            command.env(key, value);
        }
        let child = pair
            .slave
            .spawn_command(command)
            .with_context(|| format!("spawning {} in a pty", spec.program))?;
        // Our copy of the slave must go, or the reader never sees EOF.
        drop(pair.slave);
        let pid = child.process_id().and_then(|pid| i32::try_from(pid).ok());
        Ok(PtyShell {
            master: pair.master,
            writer: None,
            _child: child,
            pid,
            exit: None,
        })
    }

    pub fn pid(&self) -> Option<u32> {
        self.pid.and_then(|pid| u32::try_from(pid).ok())
    }

    /// Types `bytes` into the terminal.
    pub fn write_input(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        let writer = self.writer.as_mut().ok_or_else(|| {
            std::io::Error::other("this shell's terminal is written through its descriptor")
        })?;
        writer.write_all(bytes)?;
        writer.flush()
    }

    /// Resizes the terminal; the foreground job gets SIGWINCH.
    pub fn resize(&self, cols: u16, rows: u16) -> anyhow::Result<()> {
        self.master
            .resize(pty_size(cols, rows))
            .map_err(|err| anyhow!("resizing the pty to {cols}x{rows}: {err}"))
    }

    /// Blocks until the shell has exited (without reaping it: `try_wait` does).
    /// For a thread of its own; returns at once for a shell already reaped.
    pub fn exit_waiter(&self) -> impl FnOnce() + Send + 'static {
        let pid = if self.exit.is_some() { None } else { self.pid };
        move || {
            if let Some(pid) = pid {
                sys::wait_exited(pid);
            }
        }
    }

    /// `Some` once the shell has exited (and been reaped).
    pub fn try_wait(&mut self) -> Option<ShellExit> {
        if self.exit.is_none() {
            let pid = self.pid?;
            self.exit = match sys::reap_nohang(pid) {
                Reap::Running => None,
                Reap::Exited(status) => Some(ShellExit {
                    code: status.code,
                    signal: status.signal,
                }),
                // Someone else reaped it; it is gone all the same.
                Reap::NotOurs => Some(ShellExit {
                    code: None,
                    signal: None,
                }),
            };
        }
        self.exit
    }

    /// SIGKILLs the shell's process group, the terminal's foreground job and
    /// the shell itself. Background jobs in other groups are left to
    /// `procs::kill_all`.
    pub fn kill(&mut self) {
        // Once reaped, the pid may belong to someone else.
        if self.exit.is_some() {
            return;
        }
        let Some(pid) = self.pid else {
            return;
        };
        if let Some(foreground) = self.master.process_group_leader() {
            sys::signal_group(foreground, libc::SIGKILL);
        }
        sys::signal_group(pid, libc::SIGKILL);
        sys::signal_process(pid, libc::SIGKILL);
    }
}

impl Drop for PtyShell {
    /// A dropped shell must neither keep running nor linger as a zombie.
    fn drop(&mut self) {
        if self.try_wait().is_some() {
            return;
        }
        self.kill();
        if let Some(pid) = self.pid {
            std::thread::spawn(move || sys::reap_blocking(pid));
        }
    }
}

fn pty_size(cols: u16, rows: u16) -> PtySize {
    PtySize {
        rows,
        cols,
        pixel_width: 0,
        pixel_height: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send<T: Send>() {}

    #[test]
    fn shell_can_move_between_threads() {
        assert_send::<PtyShell>();
    }
}
