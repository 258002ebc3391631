//! One client connection: the handshake, line framing, and dispatch of
//! requests to the hub. A bad line gets an error reply; it never affects
//! other connections.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio::sync::mpsc;

use crate::protocol::{
    Audience, ClientLine, Done, ErrorCode, HelloReply, InstructionsReply, MAX_ADMIN_LINE_BYTES,
    MAX_LINE_BYTES, NO_REPLY, PROTOCOL_VERSION, Push, Request, ServerLine, ShutdownReply,
    b64_decode, parse_client_line,
};
use crate::sandbox::pty::ShellSpec;
use crate::session::{Event, EventKind};

use super::host::{OpError, OpResult};
use super::hub::{Actor, Hub};
use super::shells::{ShellHost, Subscriber, output_len};

/// Which socket a connection came in on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Door {
    Admin,
    Participant,
}

#[derive(Debug, Clone)]
enum Role {
    Admin,
    Participant { session: String },
}

/// Most chunks in one `recording` reply (keeps a reply well under the line limit).
const RECORDING_PAGE: u32 = 500;

static NEXT_CONN: AtomicU64 = AtomicU64::new(1);
/// How long a new connection may take to say hello.
const HANDSHAKE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);
/// Connections one session token may hold at once (a workspace UI, a few
/// in-shell clients, an agent: far fewer).
pub const MAX_CONNECTIONS_PER_TOKEN: usize = 64;
/// Shells one session may have open at once.
pub const MAX_SHELLS_PER_SESSION: usize = 32;

struct Conn {
    id: u64,
    hub: Arc<Hub>,
    tx: mpsc::Sender<ServerLine>,
    /// Shell output queued on `tx` (see `Subscriber`).
    queued_output: Arc<std::sync::atomic::AtomicUsize>,
    role: Option<Role>,
    actor: Actor,
    /// Who is on the other end, from the kernel (recorded for admins).
    peer: Option<crate::session::Origin>,
    /// Event forwarders of `subscribe`, stopped when the connection ends.
    subscriptions: Vec<tokio::task::JoinHandle<()>>,
    /// The session whose connection count this connection holds (participants).
    claimed: Option<Arc<super::host::Host>>,
}

pub async fn serve_connection(hub: Arc<Hub>, stream: UnixStream, door: Door) {
    let peer = peer_origin(&stream);
    let (read_half, mut write_half) = match crate::socket::split_tokio(stream) {
        Ok(halves) => halves,
        Err(e) => {
            tracing::warn!("a connection could not be set up: {e}");
            return;
        }
    };
    let (tx, mut rx) = mpsc::channel::<ServerLine>(1024);
    let queued_output = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let taken = queued_output.clone();
    let writer = tokio::spawn(async move {
        let mut bytes = Vec::new();
        let take = |bytes: &mut Vec<u8>, line: &ServerLine| {
            taken.fetch_sub(output_len(line), Ordering::AcqRel);
            append_line(bytes, line);
        };
        while let Some(line) = rx.recv().await {
            bytes.clear();
            take(&mut bytes, &line);
            // Lines already queued (a flood's output) go out in the same write.
            while bytes.len() < WRITE_BATCH_BYTES
                && let Ok(line) = rx.try_recv()
            {
                take(&mut bytes, &line);
            }
            if write_half.write_all(&bytes).await.is_err() {
                break;
            }
        }
    });
    let mut conn = Conn {
        id: NEXT_CONN.fetch_add(1, Ordering::Relaxed),
        hub: hub.clone(),
        tx: tx.clone(),
        queued_output,
        role: None,
        actor: Actor {
            name: "unknown".into(),
            audience: Audience::Participant,
            origin: None,
            connection: 0,
        },
        peer,
        subscriptions: Vec::new(),
        claimed: None,
    };
    conn.subscriptions.push(tokio::spawn(tell_when_closing(
        hub.subscribe_closing(),
        tx.clone(),
    )));
    let mut reader = BufReader::new(read_half);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        // Until hello, a silent peer only holds a descriptor: not for long.
        let read = if conn.role.is_none() {
            match tokio::time::timeout(
                HANDSHAKE_TIMEOUT,
                read_bounded_line(&mut reader, &mut buf, MAX_LINE_BYTES),
            )
            .await
            {
                Ok(read) => read,
                Err(_) => {
                    conn.send_error(
                        None,
                        ErrorCode::NotAuthenticated,
                        format!("no hello within {}s", HANDSHAKE_TIMEOUT.as_secs()),
                    );
                    break;
                }
            }
        } else {
            read_bounded_line(&mut reader, &mut buf, conn.line_limit()).await
        };
        match read {
            Ok(LineRead::Eof) => break,
            Ok(LineRead::TooLong) => {
                conn.send_error(
                    None,
                    ErrorCode::BadRequest,
                    format!("line longer than {} bytes", conn.line_limit()),
                );
                continue;
            }
            Ok(LineRead::Line) => {}
            Err(_) => break,
        }
        let Ok(text) = std::str::from_utf8(&buf) else {
            conn.send_error(
                None,
                ErrorCode::BadRequest,
                "line is not valid UTF-8".into(),
            );
            continue;
        };
        let text = text.trim();
        if text.is_empty() {
            continue;
        }
        match parse_client_line(text) {
            Ok(line) => {
                if !conn.handle(line, door).await {
                    break;
                }
            }
            Err((id, message)) => conn.send_error(id, ErrorCode::BadRequest, message),
        }
    }
    conn.cleanup();
    drop(conn);
    drop(tx);
    let _ = writer.await;
}

/// Queued lines are joined into one write up to about this size.
const WRITE_BATCH_BYTES: usize = 256 * 1024;

/// `line` as JSON and a newline (one that cannot be serialized is logged and left out).
fn append_line(bytes: &mut Vec<u8>, line: &ServerLine) {
    let start = bytes.len();
    match serde_json::to_writer(&mut *bytes, line) {
        Ok(()) => bytes.push(b'\n'),
        Err(e) => {
            bytes.truncate(start);
            tracing::error!("reply not serializable: {e}");
        }
    }
}

/// The peer process of a Unix socket connection, from SO_PEERCRED.
fn peer_origin(stream: &UnixStream) -> Option<crate::session::Origin> {
    let cred = stream.peer_cred().ok()?;
    let pid = cred.pid()?;
    let process = std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|name| name.trim().to_string())
        .unwrap_or_default();
    Some(crate::session::Origin {
        uid: cred.uid(),
        pid,
        process,
    })
}

/// Pushes `server_shutdown` once the server begins to stop.
async fn tell_when_closing(
    mut closing: tokio::sync::watch::Receiver<bool>,
    tx: mpsc::Sender<ServerLine>,
) {
    if closing.wait_for(|closing| *closing).await.is_ok() {
        let line = ServerLine::Event {
            event: Push::ServerShutdown {
                message: "the rebench server is shutting down; running sessions are paused (server_shutdown) until it is back".into(),
            },
        };
        let _ = tx.send(line).await;
    }
}

enum LineRead {
    Line,
    TooLong,
    Eof,
}

/// Reads one line of at most `limit` bytes; a longer one is skipped whole.
async fn read_bounded_line<R: tokio::io::AsyncBufRead + Unpin>(
    reader: &mut R,
    buf: &mut Vec<u8>,
    limit: usize,
) -> std::io::Result<LineRead> {
    let mut too_long = false;
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return Ok(if buf.is_empty() && !too_long {
                LineRead::Eof
            } else if too_long {
                LineRead::TooLong
            } else {
                LineRead::Line
            });
        }
        let (chunk, done) = match available.iter().position(|&b| b == b'\n') {
            Some(i) => (&available[..i], Some(i + 1)),
            None => (available, None),
        };
        if !too_long {
            if buf.len() + chunk.len() > limit {
                too_long = true;
                buf.clear();
            } else {
                buf.extend_from_slice(chunk);
            }
        }
        let consumed = done.unwrap_or(available.len());
        reader.consume(consumed);
        if done.is_some() {
            return Ok(if too_long {
                LineRead::TooLong
            } else {
                LineRead::Line
            });
        }
    }
}

impl Conn {
    /// The longest line this connection may send: an admin's carries a
    /// whole imported run (`import_run`).
    fn line_limit(&self) -> usize {
        match self.role {
            Some(Role::Admin) => MAX_ADMIN_LINE_BYTES,
            _ => MAX_LINE_BYTES,
        }
    }

    fn send(&self, line: ServerLine) {
        // A client that stopped reading is not waited for.
        let _ = self.tx.try_send(line);
    }

    fn send_error(&self, id: Option<u64>, code: ErrorCode, message: String) {
        self.send(ServerLine::Error { id, code, message });
    }

    fn reply<T: Serialize>(tx: &mpsc::Sender<ServerLine>, id: u64, result: OpResult<T>) {
        let line = match result.and_then(|v| serde_json::to_value(v).map_err(OpError::internal)) {
            Ok(_) if id == NO_REPLY => return,
            Ok(result) => ServerLine::Response { id, result },
            Err(e) => ServerLine::Error {
                id: (id != NO_REPLY).then_some(id),
                code: e.code,
                message: e.message,
            },
        };
        let _ = tx.try_send(line);
    }

    /// The answer to shell input or a resize: as any reply, except that a
    /// client that wants none (id 0) hears of a failure as a push naming
    /// the shell.
    fn reply_input(
        tx: &mpsc::Sender<ServerLine>,
        id: u64,
        session: &str,
        shell: u32,
        result: OpResult<()>,
    ) {
        match result {
            Err(e) if id == NO_REPLY => {
                let _ = tx.try_send(ServerLine::Event {
                    event: Push::InputRefused {
                        session: session.to_string(),
                        shell,
                        code: e.code,
                        message: e.message,
                    },
                });
            }
            other => Self::reply(tx, id, other.map(|()| Done {})),
        }
    }

    /// Handles one request; false closes the connection.
    async fn handle(&mut self, line: ClientLine, door: Door) -> bool {
        let ClientLine { id, request } = line;
        if let Request::Hello {
            version,
            client,
            token,
        } = &request
        {
            return self.hello(id, *version, client, token.as_deref(), door);
        }
        let Some(role) = self.role.clone() else {
            self.send_error(
                Some(id),
                ErrorCode::NotAuthenticated,
                "the first request must be hello".into(),
            );
            return true;
        };
        if let Role::Participant { session } = &role {
            if !request.allowed_for_participant() {
                self.send_error(
                    Some(id),
                    ErrorCode::Forbidden,
                    "a participant token cannot do that".into(),
                );
                return true;
            }
            if request.session() != Some(session.as_str()) {
                self.send_error(
                    Some(id),
                    ErrorCode::Forbidden,
                    "a participant token reaches only its own session".into(),
                );
                return true;
            }
        }
        if let Some(source) = request
            .session()
            .filter(|_| !request.reads_only())
            .and_then(|session| self.hub.imported_from(session))
        {
            self.send_error(
                Some(id),
                ErrorCode::Refused,
                format!("an imported run ({}) is read-only", source.describe()),
            );
            return true;
        }
        self.dispatch(id, request).await;
        true
    }

    fn hello(
        &mut self,
        id: u64,
        version: u32,
        client: &str,
        token: Option<&str>,
        door: Door,
    ) -> bool {
        if self.role.is_some() {
            self.send_error(
                Some(id),
                ErrorCode::BadRequest,
                "this connection has already said hello".into(),
            );
            return true;
        }
        if version != PROTOCOL_VERSION {
            self.send_error(
                Some(id),
                ErrorCode::VersionMismatch,
                format!("protocol version {version} is not supported; this server speaks {PROTOCOL_VERSION} (rebench {})", env!("CARGO_PKG_VERSION")),
            );
            return false;
        }
        let role = match (token, door) {
            (Some(token), _) => match self.hub.session_for_token(token) {
                Some(session) => {
                    let Ok(host) = self.hub.host(&session) else {
                        return false;
                    };
                    if !host.claim_connection(MAX_CONNECTIONS_PER_TOKEN) {
                        self.send_error(
                            Some(id),
                            ErrorCode::Refused,
                            format!(
                                "this session already has {MAX_CONNECTIONS_PER_TOKEN} connections open; close some"
                            ),
                        );
                        return false;
                    }
                    self.claimed = Some(host);
                    Role::Participant { session }
                }
                None => {
                    self.send_error(
                        Some(id),
                        ErrorCode::NotAuthenticated,
                        "unknown session token".into(),
                    );
                    return false;
                }
            },
            (None, Door::Admin) => Role::Admin,
            (None, Door::Participant) => {
                self.send_error(
                    Some(id),
                    ErrorCode::NotAuthenticated,
                    "this socket needs a session token".into(),
                );
                return false;
            }
        };
        self.actor = match &role {
            Role::Admin => Actor {
                name: sanitize_name(client),
                audience: Audience::Admin,
                origin: self.peer.clone(),
                connection: self.id,
            },
            Role::Participant { session } => {
                let name = self
                    .hub
                    .host(session)
                    .map(|h| h.meta.participant.clone())
                    .unwrap_or_default();
                Actor {
                    name,
                    audience: Audience::Participant,
                    origin: None,
                    connection: self.id,
                }
            }
        };
        let reply = HelloReply {
            version: PROTOCOL_VERSION,
            server: format!("rebench {}", env!("CARGO_PKG_VERSION")),
            role: match role {
                Role::Admin => "admin".into(),
                Role::Participant { .. } => "participant".into(),
            },
            session: match &role {
                Role::Participant { session } => Some(session.clone()),
                Role::Admin => None,
            },
        };
        self.role = Some(role);
        Self::reply(&self.tx, id, Ok(reply));
        true
    }

    async fn dispatch(&mut self, id: u64, request: Request) {
        let hub = self.hub.clone();
        let actor = self.actor.clone();
        let tx = self.tx.clone();
        match request {
            // Shell traffic is handled in order, inline: it must not be reordered.
            Request::ShellInput {
                session,
                shell,
                data,
            } => {
                let result = self.shell_for(&session, shell).and_then(|s| {
                    if !s.is_driver(self.id) {
                        return Err(OpError::new(
                            ErrorCode::Forbidden,
                            "attach as driver to send input",
                        ));
                    }
                    let bytes =
                        b64_decode(&data).map_err(|e| OpError::new(ErrorCode::BadRequest, e))?;
                    let host = self.require_running(&session)?;
                    host.touch();
                    s.input(bytes).map_err(OpError::state)
                });
                Self::reply_input(&tx, id, &session, shell, result);
            }
            Request::ShellResize {
                session,
                shell,
                cols,
                rows,
            } => {
                let result = self.shell_for(&session, shell).and_then(|s| {
                    if !s.is_driver(self.id) {
                        return Err(OpError::new(
                            ErrorCode::Forbidden,
                            "attach as driver to resize",
                        ));
                    }
                    s.resize(cols, rows)
                        .map_err(|e| OpError::new(ErrorCode::BadRequest, e))
                });
                Self::reply_input(&tx, id, &session, shell, result);
            }
            Request::ShellAttach {
                session,
                shell,
                mode,
            } => {
                let sub = Subscriber {
                    conn: self.id,
                    tx: tx.clone(),
                    queued_output: self.queued_output.clone(),
                };
                let result = self.shell_for(&session, shell).map(|s| s.attach(sub, mode));
                Self::reply(&tx, id, result);
            }
            Request::ShellDetach { session, shell } => {
                let result = self.shell_for(&session, shell).map(|s| {
                    s.detach(self.id);
                    Done {}
                });
                Self::reply(&tx, id, result);
            }
            Request::Subscribe { session } => {
                let result = self.subscribe(session);
                Self::reply(&tx, id, result.map(|_| Done {}));
            }
            Request::Shutdown => {
                Self::reply(&tx, id, Ok(ShutdownReply { stopping: true }));
                // Stop once the reply is on its way: the writer drains the
                // queue first, and the server may exit right after.
                tokio::spawn(async move {
                    let drained = tx.reserve_many(tx.max_capacity());
                    let _ = tokio::time::timeout(std::time::Duration::from_secs(1), drained).await;
                    // The writer took the reply; let it finish writing.
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                    hub.shutdown.notify_one();
                });
            }
            other => {
                // Everything else may take a while (scoring, exec): run it beside the connection.
                let origin = actor.origin.clone();
                tokio::spawn(super::host::ORIGIN.scope(origin, async move {
                    let result = run_request(&hub, other, &actor).await;
                    Self::reply(&tx, id, result);
                }));
            }
        }
    }

    fn shell_for(&self, session: &str, shell: u32) -> OpResult<Arc<ShellHost>> {
        self.hub.host(session)?.shell(shell)
    }

    fn require_running(&self, session: &str) -> OpResult<Arc<super::host::Host>> {
        let host = self.hub.host(session)?;
        if host.clock_runs() {
            Ok(host)
        } else {
            Err(OpError::state(
                "the session is not running (paused, ended or not started); input is not accepted",
            ))
        }
    }

    fn subscribe(&mut self, session: Option<String>) -> OpResult<()> {
        if let Some(s) = &session {
            self.hub.host(s)?;
        }
        let mut events = self.hub.events.subscribe();
        let tx = self.tx.clone();
        let audience = self.actor.audience;
        let hub = self.hub.clone();
        let mut scoring = self.hub.scoring_started.subscribe();
        let forwarder = tokio::spawn(async move {
            let wanted = |id: &str| session.as_ref().is_none_or(|s| s == id);
            loop {
                let line = tokio::select! {
                    push = next_push(&mut events, |(id, event)| {
                        if !wanted(&id) {
                            return None;
                        }
                        let visible = hub.host(&id).map(|h| h.meta.scoring.visible).unwrap_or(false);
                        let event = redact(event, audience, visible);
                        Some(Push::SessionEvent { session: id, event })
                    }) => push,
                    push = next_push(&mut scoring, |s| {
                        wanted(&s.session).then_some(Push::ScoringStarted { session: s.session, phase: s.phase, by: s.by })
                    }) => push,
                };
                let Some(line) = line else { break };
                if tx.send(ServerLine::Event { event: line }).await.is_err() {
                    break;
                }
            }
        });
        self.subscriptions.push(forwarder);
        Ok(())
    }

    fn cleanup(&self) {
        let hub = self.hub.clone();
        let connection = self.id;
        tokio::spawn(async move { hub.campaign_runner_gone(connection).await });
        if let Some(host) = &self.claimed {
            host.release_connection();
        }
        for forwarder in &self.subscriptions {
            forwarder.abort();
        }
        for host in self.hub.all_hosts() {
            for shell in host.shells_guard().values() {
                shell.detach(self.id);
            }
        }
    }
}

/// What a participant may see of an event (`views::filter_entry`).
fn redact(mut event: Event, audience: Audience, visible: bool) -> Event {
    if let EventKind::Scored { entry } = &mut event.kind {
        crate::protocol::filter_entry(entry, visible, audience);
    }
    event
}

fn sanitize_name(client: &str) -> String {
    let name: String = client
        .chars()
        .filter(|c| !c.is_control())
        .take(100)
        .collect();
    if name.is_empty() {
        "admin".into()
    } else {
        name
    }
}

async fn run_request(
    hub: &Arc<Hub>,
    request: Request,
    actor: &Actor,
) -> OpResult<serde_json::Value> {
    fn json<T: Serialize>(v: T) -> OpResult<serde_json::Value> {
        serde_json::to_value(v).map_err(OpError::internal)
    }
    match request {
        Request::CreateSession(req) => json(hub.create(*req, actor).await?),
        Request::Begin { session } => json(hub.begin(&session, actor).await?),
        Request::Backup { dir } => json(hub.backup(std::path::Path::new(&dir)).await?),
        Request::Hosts => json(hub.hosts_view().await),
        Request::ListSessions => {
            let mut views = Vec::new();
            for host in hub.all_hosts() {
                views.push(host.view(actor.audience, false).await);
            }
            json(views)
        }
        Request::Show { session } => json(hub.host(&session)?.view(actor.audience, true).await),
        Request::ScoreLog { session } => {
            json(hub.host(&session)?.view(actor.audience, true).await.scores)
        }
        Request::Score { session } => json(hub.score(&session, actor).await?),
        Request::Pause {
            session,
            reason,
            note,
        } => json(hub.pause(&session, reason, note, actor).await?),
        Request::Resume { session } => json(hub.resume(&session, actor).await?),
        Request::Extend {
            session,
            by_s,
            reason,
        } => json(hub.extend(&session, by_s, reason, actor).await?),
        Request::Submit { session, answer } => json(hub.submit(&session, answer, actor).await?),
        Request::End {
            session,
            reason,
            note,
        } => json(hub.end(&session, reason, note, actor).await?),
        Request::Note { session, text } => json(hub.note(&session, text, actor).await?),
        Request::Prioritize { session, priority } => {
            json(hub.prioritize(&session, priority, actor).await?)
        }
        Request::Instructions { session } => {
            let host = hub.host(&session)?;
            let text = match (&host.meta.task_family, &host.meta.instructions) {
                // As the family gave them at the start.
                (Some(family), _) => family.instructions.clone(),
                (None, Some(given)) => given.clone(),
                (None, None) => {
                    let env = host.environment()?;
                    let path = env.instructions_path();
                    tokio::fs::read_to_string(&path).await.map_err(|e| {
                        OpError::internal(format!("cannot read {}: {e}", path.display()))
                    })?
                }
            };
            json(InstructionsReply {
                title: host.meta.env_title.clone(),
                instructions: text,
            })
        }
        Request::Exec {
            session,
            command,
            timeout_s,
            cwd,
        } => json(hub.exec(&session, command, timeout_s, cwd, actor).await?),
        Request::Usage {
            session,
            tokens_in,
            tokens_out,
            cost_usd,
        } => {
            hub.usage(&session, tokens_in, tokens_out, cost_usd, actor)
                .await?;
            json(Done {})
        }
        Request::ModelCall { session, call } => {
            hub.model_call(&session, call, actor).await?;
            json(Done {})
        }
        Request::CampaignOpen { plan } => json(hub.campaign_open(*plan, actor).await?),
        Request::CampaignShow { name } => json(hub.campaign_show(&name).await?),
        Request::CampaignList => json(hub.campaign_list().await?),
        Request::CampaignStop { name } => json(hub.campaign_stop(&name, actor).await?),
        Request::ImportRun(req) => json(hub.import_run(*req, actor).await?),
        Request::Events { session } => {
            let host = hub.host(&session)?;
            let events = hub.store.events(&session).map_err(OpError::internal)?;
            let visible = host.meta.scoring.visible;
            json(
                events
                    .into_iter()
                    .map(|e| redact(e, actor.audience, visible))
                    .collect::<Vec<_>>(),
            )
        }
        Request::ShellOpen {
            session,
            cols,
            rows,
        } => json(open_shell(hub, &session, cols, rows).await?),
        Request::ShellList { session } => {
            let host = hub.host(&session)?;
            let infos: Vec<_> = host.shells_guard().values().map(|s| s.info()).collect();
            json(infos)
        }
        Request::ShellClose { session, shell } => {
            let host = hub.host(&session)?;
            host.shell(shell)?.kill();
            json(Done {})
        }
        Request::Recording {
            session,
            shell,
            from,
            limit,
        } => {
            hub.host(&session)?;
            let limit = limit.unwrap_or(RECORDING_PAGE).clamp(1, RECORDING_PAGE) as usize;
            let (chunks, next) = hub
                .store
                .recording_page(&session, shell, from, limit)
                .map_err(OpError::internal)?;
            let chunks = chunks
                .into_iter()
                .map(|(seq, c)| crate::protocol::ChunkView {
                    seq,
                    kind: c.kind.name().to_string(),
                    at: c.at,
                    active_ms: c.active_ms,
                    data: crate::protocol::b64_encode(&c.data),
                })
                .collect();
            json(crate::protocol::RecordingPage { chunks, next })
        }
        Request::RecordedShells { session } => {
            hub.host(&session)?;
            json(
                hub.store
                    .recorded_shells(&session)
                    .map_err(OpError::internal)?,
            )
        }
        Request::Credentials { session } => {
            let host = hub.host(&session)?;
            json(crate::protocol::Credentials {
                session: session.clone(),
                socket: hub.paths.participant_socket().display().to_string(),
                token: host.meta.token.clone(),
            })
        }
        Request::Hello { .. }
        | Request::ShellInput { .. }
        | Request::ShellResize { .. }
        | Request::ShellAttach { .. }
        | Request::ShellDetach { .. }
        | Request::Subscribe { .. }
        | Request::Shutdown => Err(OpError::internal("handled by the connection")),
    }
}

async fn open_shell(
    hub: &Arc<Hub>,
    session: &str,
    cols: u16,
    rows: u16,
) -> OpResult<crate::protocol::ShellInfo> {
    let host = hub.host(session)?;
    if *hub.closing.borrow() {
        return Err(OpError::state(
            "the server is shutting down; open a shell once it is back",
        ));
    }
    if cols == 0 || rows == 0 || cols > 1000 || rows > 1000 {
        return Err(OpError::new(
            ErrorCode::BadRequest,
            format!("bad terminal size {cols}x{rows}"),
        ));
    }
    {
        let live = host.live.lock().await;
        if live.state.phase() == crate::session::Phase::Ended {
            return Err(OpError::state(format!("session {session} has ended")));
        }
        // A shell opened now would freeze the session again (its clock is
        // stopped), and with it, in a container, the scoring run itself.
        if live
            .state
            .open_pause()
            .is_some_and(|p| p.reason == crate::session::PauseReason::Scoring)
        {
            return Err(OpError::new(
                ErrorCode::Busy,
                "a score is being taken (the session may be ending); open a shell once it is done",
            ));
        }
    }
    let open = host.shells_guard().values().filter(|s| s.alive()).count();
    if open >= MAX_SHELLS_PER_SESSION {
        return Err(OpError::new(
            ErrorCode::Refused,
            format!(
                "this session already has {open} shells open (at most {MAX_SHELLS_PER_SESSION}); close one first"
            ),
        ));
    }
    let (program, args) = shell_command(&hub.rc_file);
    let (program, args) = hub.session_command(&host, &program, &args, &host.meta.workspace)?;
    let spec = ShellSpec {
        program,
        args,
        cwd: host.meta.workspace.clone(),
        env: shell_env(hub, &host),
        env_clear: true,
        cols,
        rows,
    };
    let id = host.next_shell_id();
    let clock_host = host.clone();
    let active: super::shells::ActiveClock = Arc::new(move || clock_host.active_ms());
    let quota_host = host.clone();
    let recorder = super::shells::Recorder {
        store: hub.store.clone(),
        active,
        record_input: host.meta.record_input,
        quota: host.recording_quota.clone(),
        on_quota: Arc::new(move |limit| {
            let host = quota_host.clone();
            let text = format!(
                "the session's recording quota ({} MiB) is used up: terminal output and input from here on are not recorded",
                limit / (1024 * 1024)
            );
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                runtime.spawn(async move {
                    host.append_quiet(crate::session::EventKind::Note {
                        text,
                        by: super::hub::SYSTEM.into(),
                    })
                    .await;
                });
            }
        }),
    };
    let shell = ShellHost::spawn(&host.meta.id, id, &spec, recorder, host.shell_exits.clone())
        .map_err(|e| OpError::internal(format!("could not start a shell: {e:#}")))?;
    host.shells_guard().insert(id, shell.clone());
    host.append_quiet(EventKind::ShellOpened { shell: id })
        .await;
    // A shell opened while the session is paused must not compute either.
    if !host.clock_runs() {
        hub.freeze(&host).await;
    }
    Ok(shell.info())
}

/// The session's environment, plus whether the rc loads the operator's
/// `~/.bashrc` (read by `assets/session.bashrc`).
fn shell_env(hub: &Hub, host: &super::host::Host) -> Vec<(String, String)> {
    let mut env = hub.session_env(host);
    if hub.operator_bashrc || host.meta.container.operator_bashrc {
        env.push(("REBENCH_OPERATOR_BASHRC".into(), "1".into()));
    }
    env
}

/// bash with the session rc when available, else $SHELL, else sh.
fn shell_command(rc_file: &std::path::Path) -> (String, Vec<String>) {
    let bash = ["/bin/bash", "/usr/bin/bash"]
        .iter()
        .find(|p| std::path::Path::new(p).exists());
    match bash {
        Some(bash) => (
            bash.to_string(),
            vec![
                "--rcfile".into(),
                rc_file.display().to_string(),
                "-i".into(),
            ],
        ),
        None => (
            std::env::var("SHELL").unwrap_or_else(|_| "/bin/sh".into()),
            vec!["-i".into()],
        ),
    }
}

/// The next push a subscription forwards from `rx`: the first item `map`
/// keeps, `EventsSkipped` when this subscriber fell behind and the channel
/// dropped items for it (the client then re-reads), None once it is closed.
/// Cancel-safe (only `recv` is awaited), so it can sit in a `select!`.
async fn next_push<T: Clone>(
    rx: &mut tokio::sync::broadcast::Receiver<T>,
    mut map: impl FnMut(T) -> Option<Push>,
) -> Option<Push> {
    use tokio::sync::broadcast::error::RecvError;
    loop {
        match rx.recv().await {
            Ok(item) => {
                if let Some(push) = map(item) {
                    return Some(push);
                }
            }
            Err(RecvError::Lagged(skipped)) => return Some(Push::EventsSkipped { skipped }),
            Err(RecvError::Closed) => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn detached(n: u32) -> Push {
        Push::ShellDetached {
            session: "s".into(),
            shell: n,
            reason: String::new(),
            fell_behind: false,
        }
    }

    #[tokio::test]
    async fn a_subscriber_that_falls_behind_is_told_how_much_it_missed() {
        let (tx, mut rx) = tokio::sync::broadcast::channel::<u32>(2);
        for n in 0..5 {
            tx.send(n).unwrap();
        }
        // Keep odd items only, to see that filtering and lag reports mix.
        let keep_odd = |n: u32| (n % 2 == 1).then(|| detached(n));
        assert_eq!(
            next_push(&mut rx, keep_odd).await,
            Some(Push::EventsSkipped { skipped: 3 })
        );
        // Then the items still buffered (3, 4): 3 is kept, 4 is filtered out.
        assert_eq!(next_push(&mut rx, keep_odd).await, Some(detached(3)));
        drop(tx);
        assert_eq!(next_push(&mut rx, keep_odd).await, None);
    }
}
