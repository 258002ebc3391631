//! A UI's connection to the runner, full duplex: requests go out as the app
//! asks, each remembered with what it was for (the app's `Pending`); server
//! lines come back on a channel and are routed to what asked for them.

use std::collections::HashMap;

use tokio::sync::mpsc;

use crate::client::{Client, ClientError, ClientWriter};
use crate::protocol::{ErrorCode, Push, Request, ServerLine};

/// What the reader task hands the event loop.
pub enum Incoming {
    Line(ServerLine),
    Closed(String),
}

/// A request the server refused.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplyError {
    pub code: Option<ErrorCode>,
    pub message: String,
}

/// A server line, matched with what asked for it.
#[derive(Debug)]
pub enum Routed<P> {
    Reply {
        pending: P,
        result: Result<serde_json::Value, ReplyError>,
    },
    /// An error for no request in particular.
    Stray(ReplyError),
    Push(Push),
    Closed(String),
}

pub struct Connection<P> {
    writer: ClientWriter,
    pending: HashMap<u64, P>,
}

impl<P> Connection<P> {
    /// Splits the client; server lines arrive on the returned channel.
    pub fn start(client: Client) -> (Connection<P>, mpsc::Receiver<Incoming>) {
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

    pub async fn send(&mut self, pending: P, request: Request) -> anyhow::Result<()> {
        let id = self.writer.send(request).await?;
        self.pending.insert(id, pending);
        Ok(())
    }

    /// Sends a request that wants no response.
    pub async fn post(&mut self, request: Request) -> anyhow::Result<()> {
        Ok(self.writer.post(request).await?)
    }

    /// What a server line is (None: a reply nobody waits for).
    pub fn route(&mut self, incoming: Incoming) -> Option<Routed<P>> {
        let line = match incoming {
            Incoming::Line(line) => line,
            Incoming::Closed(why) => return Some(Routed::Closed(why)),
        };
        Some(match line {
            ServerLine::Response { id, result } => Routed::Reply {
                pending: self.pending.remove(&id)?,
                result: Ok(result),
            },
            ServerLine::Error { id, code, message } => {
                let error = ReplyError {
                    code: Some(code),
                    message,
                };
                match id.and_then(|id| self.pending.remove(&id)) {
                    Some(pending) => Routed::Reply {
                        pending,
                        result: Err(error),
                    },
                    None => Routed::Stray(error),
                }
            }
            ServerLine::Event { event } => Routed::Push(event),
        })
    }
}
