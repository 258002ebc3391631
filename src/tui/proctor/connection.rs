//! The dashboard's admin connection, full duplex: requests go out as the
//! app asks; server lines come back on a channel and are routed to what
//! asked for them.

use std::collections::HashMap;

use tokio::sync::mpsc;

use super::app::{Action, Pending, ReplyError};
use crate::client::{Client, ClientError, ClientWriter};
use crate::protocol::{Request, ServerLine};

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
    /// Splits the client; server lines arrive on the returned channel.
    pub fn start(client: Client) -> (Connection, mpsc::Receiver<Incoming>) {
        let (mut reader, writer) = client.into_parts();
        let (tx, rx) = mpsc::channel(8192);
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
        (
            Connection {
                writer,
                pending: HashMap::new(),
            },
            rx,
        )
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
            ServerLine::Response { id, result } => Some(Action::Reply {
                pending: self.pending.remove(&id)?,
                result: Ok(result),
            }),
            ServerLine::Error { id, code, message } => {
                let error = ReplyError {
                    code: Some(code),
                    message,
                };
                // An error for no request in particular is shown like a failed listing.
                let pending = id
                    .and_then(|id| self.pending.remove(&id))
                    .unwrap_or(Pending::List);
                Some(Action::Reply {
                    pending,
                    result: Err(error),
                })
            }
            ServerLine::Event { event } => Some(Action::Push(Box::new(event))),
        }
    }
}
