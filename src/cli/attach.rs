//! Attaching this terminal to a session shell, tmux-style but bare: the
//! shell's screen is redrawn at once, keys go straight to it, Ctrl-\ detaches.
//! (The full workspace UI is `rebench start` in the TUI; this is the plain path.)

use std::io::{Read, Write};
use std::os::fd::AsRawFd;

use anyhow::Context;
use tokio::sync::mpsc;

use crate::client::{Client, ClientError};
use crate::environment::duration::format_duration;
use crate::paths::DataPaths;
use crate::protocol::{
    AttachMode, AttachReply, Push, Request, ServerLine, SessionView, ShellInfo, b64_decode,
    b64_encode,
};

use super::print;

/// Ctrl-\ detaches (Ctrl-C, Ctrl-D and the rest belong to the shell).
const DETACH_KEY: u8 = 0x1c;

pub async fn start_and_attach(
    mut client: Client,
    paths: &DataPaths,
    view: SessionView,
) -> anyhow::Result<i32> {
    println!("{} — session {}", print::printable(&view.title), view.id);
    println!(
        "participant {}, budget {}",
        print::printable(&view.participant),
        format_duration(std::time::Duration::from_secs_f64(view.budget_s))
    );
    if let Some(score) = view.scores.as_ref().and_then(|s| s.first()) {
        println!(
            "starting solution: {}",
            print::score_line(score, &view.unit)
        );
    }
    println!("workspace {}", view.workspace);
    println!(
        "Recorded: terminal output and input, notes, scores. Inside the shell: score, status, log, note TEXT, pause, submit, instructions."
    );
    println!(
        "Press Enter to start the clock (Ctrl-C to leave; `{}` starts it later).",
        crate::command_line::rebench_command(paths, &format!("begin {}", view.id))
    );
    let mut line = String::new();
    std::io::stdin()
        .read_line(&mut line)
        .context("reading Enter")?;
    let _: SessionView = client
        .call(Request::Begin {
            session: view.id.clone(),
        })
        .await?;
    attach(client, paths, &view.id, None, false).await
}

pub async fn attach(
    mut client: Client,
    paths: &DataPaths,
    session: &str,
    shell: Option<u32>,
    watch: bool,
) -> anyhow::Result<i32> {
    let (cols, rows) = terminal_size();
    let shell = match shell {
        Some(s) => s,
        None => {
            let shells: Vec<ShellInfo> = client
                .call(Request::ShellList {
                    session: session.into(),
                })
                .await?;
            match shells.iter().find(|s| s.alive) {
                Some(s) => s.shell,
                None if watch => anyhow::bail!("session {session} has no live shell to watch"),
                None => {
                    client
                        .call::<ShellInfo>(Request::ShellOpen {
                            session: session.into(),
                            cols,
                            rows,
                        })
                        .await?
                        .shell
                }
            }
        }
    };
    let mode = if watch {
        AttachMode::Watch
    } else {
        AttachMode::Driver
    };
    let reply: AttachReply = client
        .call(Request::ShellAttach {
            session: session.into(),
            shell,
            mode,
        })
        .await?;
    if !watch {
        client
            .request(Request::ShellResize {
                session: session.into(),
                shell,
                cols,
                rows,
            })
            .await?;
    }
    let raw = RawMode::enable()?;
    let mut out = std::io::stdout();
    out.write_all(b"\x1b[H\x1b[2J")?;
    out.write_all(&b64_decode(&reply.screen).map_err(anyhow::Error::msg)?)?;
    out.flush()?;

    let (mut reader, mut writer) = client.into_parts();
    let (keys_tx, mut keys) = mpsc::channel::<Vec<u8>>(64);
    std::thread::spawn(move || {
        let mut stdin = std::io::stdin();
        let mut buf = [0u8; 4096];
        while let Ok(n) = stdin.read(&mut buf) {
            if n == 0 || keys_tx.blocking_send(buf[..n].to_vec()).is_err() {
                break;
            }
        }
    });
    let mut winch = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::window_change())?;
    let mut last_notice = String::new();
    let outcome = loop {
        tokio::select! {
            line = reader.next_line() => match line {
                Ok(ServerLine::Event { event: Push::ShellOutput { shell: s, data, .. } }) if s == shell => {
                    if let Ok(bytes) = b64_decode(&data) {
                        out.write_all(&bytes)?;
                        out.flush()?;
                    }
                }
                Ok(ServerLine::Event { event: Push::ShellExited { shell: s, .. } }) if s == shell => break "the shell exited".to_string(),
                Ok(ServerLine::Event { event: Push::ShellDetached { reason, .. } }) => break reason,
                Ok(ServerLine::Event { event: Push::ServerShutdown { message } }) => {
                    drop(raw);
                    println!("\r\n[rebench: {message}. `{}` comes back then]", crate::command_line::rebench_command(paths, &format!("attach {session}")));
                    return Ok(1);
                }
                Ok(ServerLine::Error { message, .. } | ServerLine::Event { event: Push::InputRefused { message, .. } }) => {
                    // Say it once, not once per key (e.g. input while paused).
                    if message != last_notice {
                        write!(out, "\r\n[rebench: {message}]\r\n")?;
                        out.flush()?;
                        last_notice = message;
                    }
                }
                Ok(_) => {}
                Err(ClientError::Io(_)) => break "the server closed the connection".to_string(),
                Err(e) => break e.to_string(),
            },
            key = keys.recv() => match key {
                Some(bytes) if watch => {
                    if bytes.contains(&DETACH_KEY) { break "detached".to_string(); }
                }
                Some(bytes) => {
                    let (send, detach) = match bytes.iter().position(|&b| b == DETACH_KEY) {
                        Some(i) => (&bytes[..i], true),
                        None => (&bytes[..], false),
                    };
                    if !send.is_empty() {
                        writer.post(Request::ShellInput { session: session.into(), shell, data: b64_encode(send) }).await?;
                    }
                    if detach { break "detached".to_string(); }
                }
                None => break "input closed".to_string(),
            },
            _ = winch.recv(), if !watch => {
                let (cols, rows) = terminal_size();
                writer.post(Request::ShellResize { session: session.into(), shell, cols, rows }).await?;
            }
        }
    };
    drop(raw);
    println!(
        "\r\n[rebench: {outcome}; session {session} goes on. `{}` to come back]",
        crate::command_line::rebench_command(paths, &format!("attach {session}"))
    );
    Ok(0)
}

fn terminal_size() -> (u16, u16) {
    // SAFETY: TIOCGWINSZ fills a winsize struct we own.
    let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
    let ok = unsafe { libc::ioctl(std::io::stdout().as_raw_fd(), libc::TIOCGWINSZ, &mut ws) } == 0;
    if ok && ws.ws_col > 0 && ws.ws_row > 0 {
        (ws.ws_col, ws.ws_row)
    } else {
        (80, 24)
    }
}

/// Puts the terminal in raw mode; restores it when dropped.
struct RawMode {
    saved: Option<libc::termios>,
}

impl RawMode {
    fn enable() -> anyhow::Result<RawMode> {
        let fd = std::io::stdin().as_raw_fd();
        // SAFETY: tcgetattr/cfmakeraw/tcsetattr on our stdin with a termios we own.
        unsafe {
            if libc::isatty(fd) == 0 {
                return Ok(RawMode { saved: None });
            }
            let mut saved: libc::termios = std::mem::zeroed();
            if libc::tcgetattr(fd, &mut saved) != 0 {
                anyhow::bail!("cannot read the terminal settings");
            }
            let mut raw = saved;
            libc::cfmakeraw(&mut raw);
            if libc::tcsetattr(fd, libc::TCSANOW, &raw) != 0 {
                anyhow::bail!("cannot switch the terminal to raw mode");
            }
            Ok(RawMode { saved: Some(saved) })
        }
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        if let Some(saved) = &self.saved {
            // SAFETY: restores the settings read in `enable`.
            unsafe {
                libc::tcsetattr(std::io::stdin().as_raw_fd(), libc::TCSANOW, saved);
            }
        }
    }
}
