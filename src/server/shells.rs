//! Hosting one PTY shell: one task reads the terminal (non-blocking, on the
//! runtime: no thread hand-off between a key and its echo), keeps the vt100
//! screen, records every byte and streams it to attached clients; input is
//! written by the connection that sends it. A thread waits for the shell's
//! exit and owns the process (kill and reap).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::Utc;
use tokio::sync::mpsc;

use crate::protocol::{
    AttachMode, AttachReply, MAX_SCROLLBACK_LINES, Push, ServerLine, ShellInfo, b64_encode,
};
use crate::sandbox::pty::{PtyShell, ShellExit, ShellSpec};
use crate::sandbox::pty_io::PtyIo;
use crate::store::{Chunk, ChunkKind, ShellRecording, Store};

use super::parsed_screen::{ScreenState, parse_job};

/// Lines of scrollback kept on the server's screen of each shell, and sent
/// with an attach (a workspace coming back, a proctor's mirror: both can
/// scroll back through them). Every line costs a row of cells per shell;
/// the recording keeps everything. `REBENCH_SCROLLBACK_LINES` sets it.
pub const SCROLLBACK_VAR: &str = "REBENCH_SCROLLBACK_LINES";
pub const DEFAULT_SCROLLBACK_LINES: usize = 2_000;

/// The operator's scrollback setting (read once), else the default.
pub fn scrollback_lines() -> usize {
    static LINES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *LINES.get_or_init(|| parse_scrollback(std::env::var(SCROLLBACK_VAR).ok().as_deref()))
}

fn parse_scrollback(value: Option<&str>) -> usize {
    match value.map(str::trim).filter(|v| !v.is_empty()) {
        None => DEFAULT_SCROLLBACK_LINES,
        Some(v) => match v.parse::<usize>() {
            Ok(lines) if lines <= MAX_SCROLLBACK_LINES => lines,
            _ => {
                tracing::warn!(
                    "{SCROLLBACK_VAR}={v:?} is not a number of lines up to {MAX_SCROLLBACK_LINES}; using {DEFAULT_SCROLLBACK_LINES}"
                );
                DEFAULT_SCROLLBACK_LINES
            }
        },
    }
}

/// Cursor position request; vt100 does not answer it, so we do.
const CURSOR_QUERY: &[u8] = b"\x1b[6n";

/// Output is read this much at a time (a PTY rarely has more ready).
/// Taking all a flood has ready at once (64 KiB, 16 reads) made the
/// workspace's `seq 1 2000000` slower (1.2 -> 1.9 s): the reads stay small.
const READ_BYTES: usize = 16 * 1024;

enum PtyCommand {
    Kill,
    /// The shell has exited (its waiter thread says so): reap and report it.
    Exited,
}

/// A connection that receives a shell's output.
#[derive(Clone)]
pub struct Subscriber {
    pub conn: u64,
    pub tx: mpsc::Sender<ServerLine>,
    /// Shell output queued for the connection and not yet taken by its
    /// writer (shared by all its shells), in bytes of the encoded data.
    pub queued_output: Arc<std::sync::atomic::AtomicUsize>,
}

/// The most shell output a connection may have queued: a client further
/// behind is detached (and may attach again). Bounded in bytes, not in
/// messages, so the server's memory does not depend on read sizes.
pub const QUEUED_OUTPUT_MAX: usize = 8 * 1024 * 1024;

/// The bytes of shell output `line` carries (0 for anything else).
pub fn output_len(line: &ServerLine) -> usize {
    match line {
        ServerLine::Event {
            event: Push::ShellOutput { data, .. },
        } => data.len(),
        _ => 0,
    }
}

impl Subscriber {
    /// Queues `line` unless the queue is full (in lines or in output bytes).
    fn offer(&self, line: &ServerLine) -> bool {
        use std::sync::atomic::Ordering;
        let size = output_len(line);
        // Counted before it is queued: the writer may take it at once.
        if self.queued_output.fetch_add(size, Ordering::AcqRel) + size > QUEUED_OUTPUT_MAX
            || self.tx.try_send(line.clone()).is_err()
        {
            self.queued_output.fetch_sub(size, Ordering::AcqRel);
            return false;
        }
        true
    }
}

struct Screen {
    /// The vt100 screen, and the output not yet parsed into it.
    state: ScreenState,
    cols: u16,
    rows: u16,
    exit: Option<ShellExit>,
    driver: Option<Subscriber>,
    watchers: Vec<Subscriber>,
    /// When input last reached it: a workspace that attaches again opens
    /// the tab the expert last typed into.
    last_input_at: Option<chrono::DateTime<chrono::Utc>>,
}

/// Gives the session's active time for recording timestamps.
pub type ActiveClock = Arc<dyn Fn() -> u64 + Send + Sync>;

/// Where and what a shell records.
pub struct Recorder {
    pub store: Store,
    pub active: ActiveClock,
    /// Keystrokes too (output, resizes and the exit always are).
    pub record_input: bool,
    /// The session's quota on recorded output and input.
    pub quota: Arc<super::quota::RecordingQuota>,
    /// Called once when the quota is first exceeded (with the limit).
    pub on_quota: Arc<dyn Fn(u64) + Send + Sync>,
}

pub struct ShellHost {
    pub id: u32,
    pub pid: Option<i32>,
    session: String,
    recording: ShellRecording,
    active: ActiveClock,
    /// Keystrokes go into the recording only when the session records input.
    record_input: bool,
    quota: Arc<super::quota::RecordingQuota>,
    on_quota: Arc<dyn Fn(u64) + Send + Sync>,
    commands: std::sync::mpsc::Sender<PtyCommand>,
    terminal: Arc<PtyIo>,
    screen: Mutex<Screen>,
}

/// The shell's lock, as the parse job sees it: its screen state.
struct ScreenStateGuard<'a>(std::sync::MutexGuard<'a, Screen>);

impl std::ops::Deref for ScreenStateGuard<'_> {
    type Target = ScreenState;
    fn deref(&self) -> &ScreenState {
        &self.0.state
    }
}

impl std::ops::DerefMut for ScreenStateGuard<'_> {
    fn deref_mut(&mut self) -> &mut ScreenState {
        &mut self.0.state
    }
}

/// What the host is told when a shell exits.
pub struct ShellEnded {
    pub shell: u32,
    pub exit: ShellExit,
}

impl ShellHost {
    /// Spawns the shell and its threads. `on_exit` receives the exit once.
    pub fn spawn(
        session: &str,
        id: u32,
        spec: &ShellSpec,
        recorder: Recorder,
        on_exit: mpsc::UnboundedSender<ShellEnded>,
    ) -> anyhow::Result<Arc<ShellHost>> {
        let Recorder {
            store,
            active,
            record_input,
            quota,
            on_quota,
        } = recorder;
        let recording = store.recorder(session, id)?;
        let (pty, terminal) = PtyShell::spawn_with_terminal(spec)?;
        let terminal = Arc::new(PtyIo::new(terminal)?);
        let pid = pty.pid().map(|p| p as i32);
        let (cmd_tx, cmd_rx) = std::sync::mpsc::channel();
        let (exit_tx, exit_rx) = tokio::sync::oneshot::channel();
        // The owner sleeps until a command comes; the exit comes as one.
        let wait_exit = pty.exit_waiter();
        let exited = cmd_tx.clone();
        std::thread::Builder::new()
            .name(format!("pty-wait-{session}-{id}"))
            .spawn(move || {
                wait_exit();
                let _ = exited.send(PtyCommand::Exited);
            })?;
        std::thread::Builder::new()
            .name(format!("pty-{session}-{id}"))
            .spawn(move || own_pty(pty, cmd_rx, exit_tx))?;

        let scrollback = scrollback_lines();
        let host = Arc::new(ShellHost {
            id,
            pid,
            session: session.to_string(),
            recording,
            active,
            record_input,
            quota,
            on_quota,
            commands: cmd_tx,
            terminal,
            screen: Mutex::new(Screen {
                state: ScreenState::new(spec.rows, spec.cols, scrollback),
                cols: spec.cols,
                rows: spec.rows,
                exit: None,
                driver: None,
                watchers: Vec::new(),
                last_input_at: None,
            }),
        });
        host.record(
            ChunkKind::Resize,
            Chunk::resize(Utc::now(), 0, spec.cols, spec.rows).data,
        );
        tokio::spawn(pump_output(host.clone(), exit_rx, on_exit));
        Ok(host)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Screen> {
        // A panic while holding the lock cannot leave the screen half-updated in a
        // way that matters more than losing the shell, so recover the guard.
        self.screen.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn record(&self, kind: ChunkKind, data: Vec<u8>) {
        let mut screen = self.lock();
        self.record_locked(&mut screen, kind, data);
    }

    /// Under the screen lock, so chunks are numbered in the order the screen saw them.
    fn record_locked(&self, _screen: &mut Screen, kind: ChunkKind, data: Vec<u8>) {
        if matches!(kind, ChunkKind::Output | ChunkKind::Input) {
            match self.quota.charge(data.len()) {
                super::quota::Charge::Record => {}
                super::quota::Charge::Skip => return,
                super::quota::Charge::JustExceeded => {
                    (self.on_quota)(self.quota.limit());
                    return;
                }
            }
        }
        let chunk = Chunk {
            kind,
            at: Utc::now(),
            active_ms: (self.active)(),
            data,
        };
        match self.recording.record(&chunk) {
            Ok(_) => {}
            // Said once, by the store, when the disk ran low.
            Err(crate::store::StoreError::DiskLow { .. }) => {}
            Err(e) => {
                tracing::error!(session = %self.session, shell = self.id, "recording failed: {e}")
            }
        }
    }

    pub fn info(&self) -> ShellInfo {
        let screen = self.lock();
        ShellInfo {
            shell: self.id,
            cols: screen.cols,
            rows: screen.rows,
            alive: screen.exit.is_none(),
            has_driver: screen.driver.is_some(),
            last_input_at: screen.last_input_at,
        }
    }

    pub fn alive(&self) -> bool {
        self.lock().exit.is_none()
    }

    /// Registers a client and returns the current screen. Done under the
    /// screen lock, so the client sees every byte after the snapshot exactly once.
    pub fn attach(&self, sub: Subscriber, mode: AttachMode) -> AttachReply {
        let mut screen = self.lock();
        screen.watchers.retain(|w| w.conn != sub.conn);
        match mode {
            AttachMode::Driver => {
                if let Some(old) = screen.driver.take().filter(|d| d.conn != sub.conn) {
                    let _ = old.tx.try_send(ServerLine::Event {
                        event: Push::ShellDetached {
                            session: self.session.clone(),
                            shell: self.id,
                            reason: "another client took over this shell".into(),
                            fell_behind: false,
                        },
                    });
                }
                screen.driver = Some(sub);
            }
            AttachMode::Watch => {
                if screen.driver.as_ref().is_some_and(|d| d.conn == sub.conn) {
                    screen.driver = None;
                }
                screen.watchers.push(sub);
            }
        }
        // History first, so the client's own scrollback has it.
        let mut parsed = screen.state.caught_up();
        let lines = parsed.scrollback;
        let mut bytes = history_formatted(&mut parsed.parser, lines);
        bytes.extend(parsed.parser.screen().state_formatted());
        drop(parsed);
        AttachReply {
            shell: self.id,
            cols: screen.cols,
            rows: screen.rows,
            screen: b64_encode(&bytes),
            alive: screen.exit.is_none(),
            scrollback_lines: Some(lines),
        }
    }

    pub fn detach(&self, conn: u64) {
        let mut screen = self.lock();
        screen.watchers.retain(|w| w.conn != conn);
        if screen.driver.as_ref().is_some_and(|d| d.conn == conn) {
            screen.driver = None;
        }
    }

    pub fn is_driver(&self, conn: u64) -> bool {
        self.lock().driver.as_ref().is_some_and(|d| d.conn == conn)
    }

    pub fn input(&self, data: Vec<u8>) -> Result<(), String> {
        let mut screen = self.lock();
        if screen.exit.is_some() {
            return Err("the shell has exited".into());
        }
        // Written under the lock, so the recording has the keys before their echo.
        self.terminal.write(&data)?;
        if self.record_input {
            self.record_locked(&mut screen, ChunkKind::Input, data);
        }
        screen.last_input_at = Some(chrono::Utc::now());
        Ok(())
    }

    pub fn resize(&self, cols: u16, rows: u16) -> Result<(), String> {
        if cols == 0 || rows == 0 || cols > 1000 || rows > 1000 {
            return Err(format!("bad terminal size {cols}x{rows}"));
        }
        let mut screen = self.lock();
        if screen.exit.is_some() {
            return Err("the shell has exited".into());
        }
        self.terminal
            .resize(cols, rows)
            .map_err(|e| format!("resizing the terminal to {cols}x{rows}: {e}"))?;
        // What came before the resize is drawn at the old size.
        screen
            .state
            .caught_up()
            .parser
            .screen_mut()
            .set_size(rows, cols);
        screen.cols = cols;
        screen.rows = rows;
        let data = Chunk::resize(Utc::now(), 0, cols, rows).data;
        self.record_locked(&mut screen, ChunkKind::Resize, data);
        Ok(())
    }

    pub fn kill(&self) {
        let _ = self.commands.send(PtyCommand::Kill);
    }

    /// The screen's text (tests and status lines).
    pub fn contents(&self) -> String {
        self.lock().state.caught_up().parser.screen().contents()
    }

    fn on_output(self: &Arc<Self>, bytes: &[u8]) {
        let mut screen = self.lock();
        if screen.state.take(bytes) {
            let host = self.clone();
            tokio::task::spawn_blocking(move || parse_job(|| ScreenStateGuard(host.lock())));
        }
        if bytes.windows(CURSOR_QUERY.len()).any(|w| w == CURSOR_QUERY) {
            let (row, col) = screen.state.caught_up().parser.screen().cursor_position();
            let reply = format!("\x1b[{};{}R", row + 1, col + 1);
            if let Err(e) = self.terminal.write(reply.as_bytes()) {
                tracing::debug!("cursor position reply not written: {e}");
            }
        }
        self.record_locked(&mut screen, ChunkKind::Output, bytes.to_vec());
        let line = ServerLine::Event {
            event: Push::ShellOutput {
                session: self.session.clone(),
                shell: self.id,
                data: b64_encode(bytes),
            },
        };
        broadcast(&self.session, self.id, &mut screen, &line);
    }

    fn on_exit(&self, exit: ShellExit) {
        let mut screen = self.lock();
        screen.exit = Some(exit);
        let code = exit.code.unwrap_or(-exit.signal.unwrap_or(0));
        self.record_locked(&mut screen, ChunkKind::Exit, code.to_be_bytes().to_vec());
        let line = ServerLine::Event {
            event: Push::ShellExited {
                session: self.session.clone(),
                shell: self.id,
                code: exit.code,
                signal: exit.signal,
            },
        };
        broadcast(&self.session, self.id, &mut screen, &line);
    }
}

impl Drop for ShellHost {
    /// A host nobody holds any more takes its shell with it (its exit
    /// waiter keeps the command channel open, so it must be told).
    fn drop(&mut self) {
        self.kill();
    }
}

/// Sends to every attached client; one that cannot keep up is dropped, never
/// waited for, and told so once its queue has room again.
fn broadcast(session: &str, shell: u32, screen: &mut Screen, line: &ServerLine) {
    let mut dropped = Vec::new();
    if let Some(d) = &screen.driver
        && !d.offer(line)
    {
        dropped.extend(screen.driver.take());
    }
    let (kept, slow): (Vec<_>, Vec<_>) = std::mem::take(&mut screen.watchers)
        .into_iter()
        .partition(|w| w.offer(line));
    screen.watchers = kept;
    dropped.extend(slow);
    for sub in dropped {
        tell_fell_behind(session, shell, sub);
    }
}

/// The detach notice for a client dropped for being slow: sent when its
/// queue has room (a closed connection just ends the task).
fn tell_fell_behind(session: &str, shell: u32, sub: Subscriber) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let notice = ServerLine::Event {
        event: Push::ShellDetached {
            session: session.to_string(),
            shell,
            reason: "this client fell behind the shell's output".into(),
            fell_behind: true,
        },
    };
    runtime.spawn(async move {
        let _ = sub.tx.send(notice).await;
    });
}

/// How long (of the session's active time, so a paused session's frozen
/// shell does not count) a new shell may print nothing before its pane
/// says so: a startup stuck on an rc file otherwise looks like a dead
/// terminal.
pub const SILENT_START_MS: u64 = 5_000;

/// What the pane shows then (also recorded: it is what the participant saw).
pub const SILENT_START_NOTICE: &str = "[rebench: this shell has printed nothing for 5 s since it \
     started: its startup may be stuck (an rc file waiting on something?). Ctrl-C interrupts it.]";

/// Whether a shell that has printed nothing since `opened_ms` (active
/// time) has been silent too long at `now_ms`.
pub fn silent_too_long(opened_ms: u64, now_ms: u64) -> bool {
    now_ms.saturating_sub(opened_ms) >= SILENT_START_MS
}

async fn pump_output(
    host: Arc<ShellHost>,
    mut exited: tokio::sync::oneshot::Receiver<ShellExit>,
    on_exit: mpsc::UnboundedSender<ShellEnded>,
) {
    let unknown = ShellExit {
        code: None,
        signal: None,
    };
    let terminal = host.terminal.clone();
    let mut buf = vec![0u8; READ_BYTES];
    let opened_ms = (host.active)();
    let mut silent = true;
    let mut check = tokio::time::interval(Duration::from_millis(250));
    let exit = loop {
        tokio::select! {
            read = terminal.read(&mut buf) => match read {
                Ok(n) if n > 0 => {
                    silent = false;
                    host.on_output(&buf[..n]);
                }
                // Nothing holds the terminal any more: the exit is due.
                _ => break (&mut exited).await.unwrap_or(unknown),
            },
            failed = terminal.write_pending() => {
                tracing::debug!(session = %host.session, shell = host.id, "input not written: {failed}");
            },
            _ = check.tick(), if silent => {
                if silent_too_long(opened_ms, (host.active)()) {
                    silent = false;
                    tracing::warn!(session = %host.session, shell = host.id, "a new shell printed nothing for 5 s");
                    host.on_output(format!("\r\n{SILENT_START_NOTICE}\r\n").as_bytes());
                }
            },
            exit = &mut exited => {
                // The shell is gone; a background job may still hold the terminal
                // open, so take what is already written and report the exit.
                let drain_until = tokio::time::Instant::now() + Duration::from_millis(300);
                while let Ok(Ok(n)) = tokio::time::timeout_at(drain_until, terminal.read(&mut buf)).await {
                    if n == 0 {
                        break;
                    }
                    host.on_output(&buf[..n]);
                }
                break exit.unwrap_or(unknown);
            }
        }
    };
    host.on_exit(exit);
    let _ = on_exit.send(ShellEnded {
        shell: host.id,
        exit,
    });
    // Keep streaming anything a leftover process still prints.
    while let Ok(n) = terminal.read(&mut buf).await {
        if n == 0 {
            break;
        }
        host.on_output(&buf[..n]);
    }
}

/// The thread that owns the shell's process: kills it when told, and reaps
/// and reports its exit.
fn own_pty(
    mut pty: PtyShell,
    commands: std::sync::mpsc::Receiver<PtyCommand>,
    exited: tokio::sync::oneshot::Sender<ShellExit>,
) {
    // Blocks: no wake-ups while the shell is idle. The waiter thread's
    // sender keeps the channel open, so a dropped host says Kill.
    let command = commands.recv().unwrap_or(PtyCommand::Kill);
    let exit = match command {
        PtyCommand::Exited => pty.try_wait(),
        PtyCommand::Kill => pty.try_wait().or_else(|| {
            pty.kill();
            // Reap so the exit is reported.
            for _ in 0..50 {
                if let Some(exit) = pty.try_wait() {
                    return Some(exit);
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            Some(ShellExit {
                code: None,
                signal: Some(libc::SIGKILL),
            })
        }),
    };
    let _ = exited.send(exit.unwrap_or(ShellExit {
        code: None,
        signal: None,
    }));
}

/// The last `max` lines of a screen's history (not the screen itself), as
/// bytes that put them into a fresh parser's scrollback: each line, then
/// enough newlines to scroll the last of them off the screen. Nothing for a
/// program on the alternate screen (it has no history of its own).
fn history_formatted(parser: &mut vt100::Parser, max: usize) -> Vec<u8> {
    let screen = parser.screen_mut();
    if screen.alternate_screen() {
        return Vec::new();
    }
    let (rows, cols) = screen.size();
    screen.set_scrollback(usize::MAX);
    let total = screen.scrollback();
    let mut out = Vec::new();
    let mut line = total - total.min(max);
    while line < total {
        // The view scrolled back by `total - line` starts at history line `line`.
        screen.set_scrollback(total - line);
        for row in screen.rows_formatted(0, cols).take(total - line) {
            out.extend_from_slice(b"\x1b[m");
            out.extend_from_slice(&row);
            out.extend_from_slice(b"\x1b[m\r\n");
        }
        line += rows as usize;
    }
    screen.set_scrollback(0);
    if !out.is_empty() {
        out.extend(b"\r\n".repeat(rows.saturating_sub(1) as usize));
    }
    out
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_connections_queued_output_is_bounded_in_bytes() {
        let (tx, mut rx) = mpsc::channel(1024);
        let sub = Subscriber {
            conn: 1,
            tx,
            queued_output: Arc::new(std::sync::atomic::AtomicUsize::new(0)),
        };
        let output = |n: usize| ServerLine::Event {
            event: Push::ShellOutput {
                session: "s".into(),
                shell: 1,
                data: "A".repeat(n),
            },
        };
        let queued = || sub.queued_output.load(std::sync::atomic::Ordering::Acquire);
        assert!(sub.offer(&output(QUEUED_OUTPUT_MAX - 10)));
        assert_eq!(queued(), QUEUED_OUTPUT_MAX - 10);
        // One more byte than fits: refused, and nothing counted.
        assert!(!sub.offer(&output(11)));
        assert_eq!(queued(), QUEUED_OUTPUT_MAX - 10);
        assert!(sub.offer(&output(10)));
        // Lines that carry no output still go.
        assert!(sub.offer(&ServerLine::Event {
            event: Push::ShellExited {
                session: "s".into(),
                shell: 1,
                code: Some(0),
                signal: None,
            },
        }));
        assert_eq!(
            rx.try_recv().map(|l| output_len(&l)).ok(),
            Some(QUEUED_OUTPUT_MAX - 10)
        );
    }
    use super::*;

    #[test]
    fn silence_counts_in_active_time_only() {
        assert!(!silent_too_long(1_000, 1_000));
        assert!(!silent_too_long(1_000, 5_999));
        assert!(silent_too_long(1_000, 6_000));
        // A paused session's clock stands still: its frozen shell never is.
        assert!(!silent_too_long(1_000, 900));
    }

    /// Every line of a parser's history and screen, oldest first.
    fn all_lines(parser: &mut vt100::Parser) -> Vec<String> {
        let (rows, cols) = parser.screen().size();
        parser.screen_mut().set_scrollback(usize::MAX);
        let total = parser.screen().scrollback();
        let mut lines = Vec::new();
        for line in 0..total {
            parser.screen_mut().set_scrollback(total - line);
            lines.push(parser.screen().rows(0, cols).next().unwrap_or_default());
        }
        parser.screen_mut().set_scrollback(0);
        lines.extend(parser.screen().rows(0, cols).take(rows as usize));
        lines
    }

    #[test]
    fn the_scrollback_setting_is_a_bounded_number_of_lines() {
        assert_eq!(parse_scrollback(None), DEFAULT_SCROLLBACK_LINES);
        assert_eq!(parse_scrollback(Some(" 500 ")), 500);
        assert_eq!(parse_scrollback(Some("0")), 0);
        assert_eq!(parse_scrollback(Some("lots")), DEFAULT_SCROLLBACK_LINES);
        assert_eq!(parse_scrollback(Some("1000000")), DEFAULT_SCROLLBACK_LINES);
    }

    #[test]
    fn an_attach_carries_the_history_into_the_clients_scrollback() {
        let mut server = vt100::Parser::new(6, 40, DEFAULT_SCROLLBACK_LINES);
        for i in 0..30 {
            server.process(format!("\x1b[1mline {i}\x1b[m plain\r\n").as_bytes());
        }
        server.process(b"$ ");
        let mut reply = history_formatted(&mut server, 100);
        reply.extend(server.screen().state_formatted());
        assert_eq!(
            server.screen().scrollback(),
            0,
            "the server's view is live again"
        );
        let mut client = vt100::Parser::new(6, 40, 1000);
        client.process(&reply);
        assert_eq!(all_lines(&mut client), all_lines(&mut server));
        assert_eq!(client.screen().contents(), server.screen().contents());
        // Bounded: only the newest lines of history.
        let mut short = vt100::Parser::new(6, 40, 1000);
        short.process(&history_formatted(&mut server, 10));
        short.process(&server.screen().state_formatted());
        let lines = all_lines(&mut short);
        assert_eq!(lines.len(), 10 + 6);
        assert_eq!(lines[0].trim_end(), "line 15 plain");
        // A program on the alternate screen: no history to carry.
        server.process(b"\x1b[?1049h");
        assert!(history_formatted(&mut server, 100).is_empty());
    }
}
