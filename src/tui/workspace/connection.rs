//! The workspace's connection to the runner: as the session's participant
//! (so hidden scores stay hidden and actions are recorded as theirs), full
//! duplex, with replies routed back to what asked for them.

use std::collections::HashMap;
use std::path::Path;

use tokio::sync::mpsc;

use crate::client::{Client, ClientError, ClientWriter};
use crate::paths::DataPaths;
use crate::protocol::{Credentials, Push, Request, ServerLine, b64_decode};

use super::app::{Action, Pending, ReplyError};

/// What the reader task hands the event loop.
pub enum Incoming {
    Line(ServerLine),
    Closed(String),
}

pub struct Connection {
    writer: ClientWriter,
    pending: HashMap<u64, Pending>,
}

impl Connection {
    /// Asks the admin socket for the session's participant credentials, then
    /// connects again as the participant. Returns the connection and a
    /// stream of server lines.
    pub async fn open(
        paths: &DataPaths,
        session: &str,
    ) -> anyhow::Result<(Connection, mpsc::Receiver<Incoming>)> {
        let admin = Client::connect_admin(paths, "workspace (setup)").await?;
        Self::open_with(admin, session).await
    }

    /// As `open`, on a server that is already running (never starts one:
    /// after a shutdown the operator decides when it comes back).
    pub async fn reopen(
        paths: &DataPaths,
        session: &str,
    ) -> anyhow::Result<(Connection, mpsc::Receiver<Incoming>)> {
        let admin = Client::connect(&paths.socket(), None, "workspace (setup)").await?;
        Self::open_with(admin, session).await
    }

    async fn open_with(
        mut admin: Client,
        session: &str,
    ) -> anyhow::Result<(Connection, mpsc::Receiver<Incoming>)> {
        let creds: Credentials = admin
            .call(Request::Credentials {
                session: session.to_string(),
            })
            .await?;
        drop(admin);
        let client =
            Client::connect(Path::new(&creds.socket), Some(&creds.token), "workspace").await?;
        let (mut reader, writer) = client.into_parts();
        let (tx, rx) = mpsc::channel(4096);
        tokio::spawn(async move {
            loop {
                match reader.next_line().await {
                    Ok(line) => {
                        if tx.send(Incoming::Line(line)).await.is_err() {
                            break;
                        }
                    }
                    // A line we cannot read (a newer server?) is skipped, not fatal.
                    Err(ClientError::Protocol(_)) => continue,
                    Err(e) => {
                        let _ = tx.send(Incoming::Closed(e.to_string())).await;
                        break;
                    }
                }
            }
        });
        Ok((
            Connection {
                writer,
                pending: HashMap::new(),
            },
            rx,
        ))
    }

    pub async fn send(&mut self, pending: Pending, request: Request) -> anyhow::Result<()> {
        let id = self.writer.send(request).await?;
        self.pending.insert(id, pending);
        Ok(())
    }

    /// The action a server line stands for (None: nothing to do).
    pub fn route(&mut self, incoming: Incoming) -> Option<Action> {
        let line = match incoming {
            Incoming::Line(line) => line,
            Incoming::Closed(why) => return Some(Action::Disconnected(why)),
        };
        match line {
            ServerLine::Response { id, result } => {
                let pending = self.pending.remove(&id)?;
                Some(Action::Reply {
                    pending,
                    result: Ok(result),
                })
            }
            ServerLine::Error { id, code, message } => {
                let pending = id.and_then(|id| self.pending.remove(&id));
                let error = ReplyError {
                    code: Some(code),
                    message,
                };
                match pending {
                    Some(pending) => Some(Action::Reply {
                        pending,
                        result: Err(error),
                    }),
                    // An error for no request in particular: show it.
                    None => Some(Action::Reply {
                        pending: Pending::Subscribe,
                        result: Err(error),
                    }),
                }
            }
            ServerLine::Event { event } => match event {
                Push::ShellOutput { shell, data, .. } => {
                    let data = b64_decode(&data).ok()?;
                    Some(Action::ShellOutput { shell, data })
                }
                Push::ShellExited { shell, .. } => Some(Action::ShellExited { shell }),
                Push::ShellDetached {
                    shell,
                    reason,
                    fell_behind,
                    ..
                } => Some(Action::ShellDetached {
                    shell,
                    reason,
                    fell_behind,
                }),
                Push::SessionEvent { event, .. } => Some(Action::SessionEvent(Box::new(event))),
                Push::ScoringStarted { .. } => Some(Action::ScoringStarted),
                // Events were dropped on the way: re-read the session.
                Push::EventsSkipped { .. } => Some(Action::Resync),
                Push::ServerShutdown { .. } => Some(Action::ServerShutdown),
            },
        }
    }
}
