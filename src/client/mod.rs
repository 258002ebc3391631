//! The client side of the protocol: connect (starting the server when none
//! runs), send typed requests, receive replies and pushed events.

use std::collections::VecDeque;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::de::DeserializeOwned;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;

use crate::socket::{SocketReader, SocketWriter};

use crate::paths::DataPaths;
use crate::protocol::{
    ClientLine, ErrorCode, HelloReply, NO_REPLY, PROTOCOL_VERSION, Push, Request, ServerLine,
};

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("{message}")]
    Server { code: ErrorCode, message: String },
    #[error("lost the connection to the rebench server ({0})")]
    Io(#[from] std::io::Error),
    #[error("the server sent something unexpected: {0}")]
    Protocol(String),
    #[error("no rebench server answers on {socket}: {why}")]
    NoServer { socket: PathBuf, why: String },
}

impl ClientError {
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            ClientError::Server { code, .. } => Some(*code),
            _ => None,
        }
    }
}

pub type Result<T> = std::result::Result<T, ClientError>;

pub struct Client {
    reader: BufReader<SocketReader>,
    writer: SocketWriter,
    next_id: u64,
    pushes: VecDeque<Push>,
    pub hello: HelloReply,
    /// The hello's id while its reply is still to be read (`connect_lazily`).
    hello_pending: Option<u64>,
    /// Lines not written yet: a lazy hello goes out with the first request.
    unsent: Vec<u8>,
}

impl Client {
    /// Connects to `socket` and says hello (with a participant token, if given).
    pub async fn connect(socket: &Path, token: Option<&str>, name: &str) -> Result<Client> {
        let mut client = Client::connect_lazily(socket, token, name).await?;
        client.flush_unsent().await?;
        client.settle_hello().await?;
        Ok(client)
    }

    /// As `connect`, but the hello goes out with the first request, in the
    /// same write, and its reply is read just before that request's: a
    /// one-shot command (`rebench exec`) waits for one round trip, not two.
    /// A refused hello fails the first request with the hello's error.
    pub async fn connect_lazily(socket: &Path, token: Option<&str>, name: &str) -> Result<Client> {
        let stream = UnixStream::connect(socket)
            .await
            .map_err(|e| ClientError::NoServer {
                socket: socket.to_path_buf(),
                why: e.to_string(),
            })?;
        let (read_half, writer) =
            crate::socket::split_tokio(stream).map_err(|e| ClientError::NoServer {
                socket: socket.to_path_buf(),
                why: e.to_string(),
            })?;
        let mut client = Client {
            reader: BufReader::new(read_half),
            writer,
            next_id: 1,
            pushes: VecDeque::new(),
            hello: HelloReply {
                version: 0,
                server: String::new(),
                role: String::new(),
                session: None,
            },
            hello_pending: None,
            unsent: Vec::new(),
        };
        let id = client.queue_line(Request::Hello {
            version: PROTOCOL_VERSION,
            client: name.to_string(),
            token: token.map(String::from),
        })?;
        client.hello_pending = Some(id);
        Ok(client)
    }

    /// Connects to the data dir's server as admin, starting it if none runs.
    pub async fn connect_admin(paths: &DataPaths, name: &str) -> Result<Client> {
        Client::connect_admin_hiding(paths, name, &[]).await
    }

    /// `connect_admin` with the hello sent lazily (see `connect_lazily`).
    pub async fn connect_admin_lazily(paths: &DataPaths, name: &str) -> Result<Client> {
        Client::admin_or_start(paths, name, &[], true).await
    }

    /// As `connect_admin`; a server it starts does not get the variables
    /// `hide` (a campaign's model API keys are the campaign's, not the server's).
    pub async fn connect_admin_hiding(
        paths: &DataPaths,
        name: &str,
        hide: &[String],
    ) -> Result<Client> {
        Client::admin_or_start(paths, name, hide, false).await
    }

    /// Connects as admin (the hello lazily or not), starting a server
    /// without the variables `hide` when none answers.
    async fn admin_or_start(
        paths: &DataPaths,
        name: &str,
        hide: &[String],
        lazily: bool,
    ) -> Result<Client> {
        let tried = if lazily {
            Client::connect_lazily(&paths.socket(), None, name).await
        } else {
            Client::connect(&paths.socket(), None, name).await
        };
        match tried {
            Err(ClientError::NoServer { .. }) => {
                start_server(paths, hide)?;
                wait_for_server(paths, name).await
            }
            other => other,
        }
    }

    /// Adds a request to the lines to write; its id.
    fn queue_line(&mut self, request: Request) -> Result<u64> {
        let id = self.next_id;
        self.next_id += 1;
        serde_json::to_writer(&mut self.unsent, &ClientLine { id, request })
            .map_err(|e| ClientError::Protocol(e.to_string()))?;
        self.unsent.push(b'\n');
        Ok(id)
    }

    async fn flush_unsent(&mut self) -> Result<()> {
        if !self.unsent.is_empty() {
            let bytes = std::mem::take(&mut self.unsent);
            self.writer.write_all(&bytes).await?;
        }
        Ok(())
    }

    async fn send_line(&mut self, request: Request) -> Result<u64> {
        let id = self.queue_line(request)?;
        self.flush_unsent().await?;
        Ok(id)
    }

    /// Reads the reply to a lazily sent hello, if it is still to come.
    async fn settle_hello(&mut self) -> Result<()> {
        if let Some(id) = self.hello_pending.take() {
            let reply = self.reply_to(id).await?;
            self.hello =
                serde_json::from_value(reply).map_err(|e| ClientError::Protocol(e.to_string()))?;
        }
        Ok(())
    }

    async fn read_line(&mut self) -> Result<ServerLine> {
        let mut line = String::new();
        let n = self.reader.read_line(&mut line).await?;
        if n == 0 {
            return Err(ClientError::Io(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "the server closed the connection",
            )));
        }
        serde_json::from_str(&line)
            .map_err(|e| ClientError::Protocol(format!("{e}: {}", line.trim())))
    }

    /// Sends a request and waits for its reply; pushed events that arrive meanwhile are kept.
    pub async fn request(&mut self, request: Request) -> Result<serde_json::Value> {
        let id = self.send_line(request).await?;
        self.settle_hello().await?;
        self.reply_to(id).await
    }

    /// Reads until the reply to request `id`.
    async fn reply_to(&mut self, id: u64) -> Result<serde_json::Value> {
        loop {
            match self.read_line().await? {
                ServerLine::Response { id: got, result } if got == id => return Ok(result),
                ServerLine::Error {
                    id: Some(got),
                    code,
                    message,
                } if got == id => {
                    return Err(ClientError::Server { code, message });
                }
                ServerLine::Error {
                    id: None,
                    code,
                    message,
                } => return Err(ClientError::Server { code, message }),
                ServerLine::Event { event } => self.pushes.push_back(event),
                other => {
                    return Err(ClientError::Protocol(format!(
                        "reply to another request: {other:?}"
                    )));
                }
            }
        }
    }

    pub async fn call<T: DeserializeOwned>(&mut self, request: Request) -> Result<T> {
        let value = self.request(request).await?;
        serde_json::from_value(value).map_err(|e| ClientError::Protocol(e.to_string()))
    }

    /// Sends without waiting for the reply (shell input); replies are skipped by `next_push`.
    pub async fn send(&mut self, request: Request) -> Result<()> {
        self.send_line(request).await.map(|_| ())
    }

    /// Splits the connection for full-duplex use (a terminal attach): a reader
    /// of server lines and a writer of requests that continues the id sequence.
    /// For a client from `connect` (a lazy hello must have been settled).
    pub fn into_parts(self) -> (ClientReader, ClientWriter) {
        debug_assert!(self.unsent.is_empty() && self.hello_pending.is_none());
        let pending = self.pushes;
        (
            ClientReader {
                reader: self.reader,
                pending,
            },
            ClientWriter {
                writer: self.writer,
                next_id: self.next_id,
            },
        )
    }

    /// The next pushed event. Replies to `send` requests are skipped, except errors.
    pub async fn next_push(&mut self) -> Result<Push> {
        self.flush_unsent().await?;
        self.settle_hello().await?;
        if let Some(p) = self.pushes.pop_front() {
            return Ok(p);
        }
        loop {
            match self.read_line().await? {
                ServerLine::Event { event } => return Ok(event),
                ServerLine::Response { .. } => continue,
                ServerLine::Error { code, message, .. } => {
                    return Err(ClientError::Server { code, message });
                }
            }
        }
    }
}

/// Starts `rebench serve` for this data dir in its own process session, so
/// closing the terminal or killing the client never stops it.
fn start_server(paths: &DataPaths, hide: &[String]) -> Result<()> {
    let no_server = |why: String| ClientError::NoServer {
        socket: paths.socket(),
        why,
    };
    paths
        .create()
        .map_err(|e| no_server(format!("cannot create {}: {e}", paths.root.display())))?;
    let exe = std::env::current_exe()
        .map_err(|e| no_server(format!("cannot find the rebench binary: {e}")))?;
    let err_file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(paths.root.join("server.err"))
        .map_err(|e| no_server(format!("cannot open server.err: {e}")))?;
    let mut command = std::process::Command::new(exe);
    command
        .arg("serve")
        .arg("--data-dir")
        .arg(&paths.root)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(err_file);
    for var in hide {
        command.env_remove(var);
    }
    // SAFETY: setsid is async-signal-safe and touches no memory of ours.
    unsafe {
        command.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    let mut child = command
        .spawn()
        .map_err(|e| no_server(format!("cannot start the server: {e}")))?;
    // Reap it if it exits while we live (e.g. another server won the lock).
    std::thread::spawn(move || child.wait());
    Ok(())
}

async fn wait_for_server(paths: &DataPaths, name: &str) -> Result<Client> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        match Client::connect(&paths.socket(), None, name).await {
            Ok(c) => return Ok(c),
            Err(ClientError::NoServer { socket, why }) => {
                if tokio::time::Instant::now() >= deadline {
                    let log =
                        std::fs::read_to_string(paths.root.join("server.err")).unwrap_or_default();
                    let tail: Vec<&str> = log.lines().rev().take(5).collect();
                    let tail: Vec<&str> = tail.into_iter().rev().collect();
                    return Err(ClientError::NoServer {
                        socket,
                        why: format!(
                            "{why}; the server did not come up. Its last words:\n{}",
                            tail.join("\n")
                        ),
                    });
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => return Err(e),
        }
    }
}

pub struct ClientReader {
    reader: BufReader<SocketReader>,
    pending: VecDeque<Push>,
}

impl ClientReader {
    /// The next server line (pushes that arrived before the split come first).
    pub async fn next_line(&mut self) -> Result<ServerLine> {
        if let Some(event) = self.pending.pop_front() {
            return Ok(ServerLine::Event { event });
        }
        let mut line = String::new();
        if self.reader.read_line(&mut line).await? == 0 {
            return Err(ClientError::Io(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "the server closed the connection",
            )));
        }
        serde_json::from_str(&line)
            .map_err(|e| ClientError::Protocol(format!("{e}: {}", line.trim())))
    }
}

pub struct ClientWriter {
    writer: SocketWriter,
    next_id: u64,
}

impl ClientWriter {
    pub async fn send(&mut self, request: Request) -> Result<u64> {
        let id = self.next_id;
        self.next_id += 1;
        self.write(id, request).await?;
        Ok(id)
    }

    /// Sends a request that wants no response (shell input, resizes): a
    /// failure comes back as a push (`input_refused`).
    pub async fn post(&mut self, request: Request) -> Result<()> {
        self.write(NO_REPLY, request).await
    }

    async fn write(&mut self, id: u64, request: Request) -> Result<()> {
        let mut bytes = serde_json::to_vec(&ClientLine { id, request })
            .map_err(|e| ClientError::Protocol(e.to_string()))?;
        bytes.push(b'\n');
        self.writer.write_all(&bytes).await?;
        Ok(())
    }
}
