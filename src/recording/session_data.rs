//! Everything recorded about one session, as fetched from the server (admin)
//! or read back from a jsonl export: the session view with its scores, the
//! event log, and every terminal chunk of every shell.

use anyhow::{Context, bail};
use chrono::{DateTime, Utc};

use crate::client::Client;
use crate::protocol::{RecordingPage, Request, SessionView, b64_decode};
use crate::session::Event;
use crate::store::ChunkKind;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedChunk {
    pub shell: u32,
    pub seq: u64,
    pub kind: ChunkKind,
    pub at: DateTime<Utc>,
    pub active_ms: u64,
    pub data: Vec<u8>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SessionRecording {
    pub session: SessionView,
    pub events: Vec<Event>,
    /// In (shell, seq) order.
    pub chunks: Vec<RecordedChunk>,
    /// Set when read from a damaged file (see `Timeline::damage`).
    pub damage: Option<String>,
    /// The session's instructions, where the server could give them.
    pub instructions: Option<String>,
}

impl SessionRecording {
    pub fn shells(&self) -> Vec<u32> {
        let mut shells: Vec<u32> = self.chunks.iter().map(|c| c.shell).collect();
        shells.dedup();
        shells
    }
}

/// Resize payload: cols u16 BE, rows u16 BE.
pub fn resize_size(data: &[u8]) -> Option<(u16, u16)> {
    match data {
        [c0, c1, r0, r1] => Some((
            u16::from_be_bytes([*c0, *c1]),
            u16::from_be_bytes([*r0, *r1]),
        )),
        _ => None,
    }
}

/// Exit payload: i32 BE (the code, or -signal).
pub fn exit_code(data: &[u8]) -> Option<i32> {
    let bytes: [u8; 4] = data.try_into().ok()?;
    Some(i32::from_be_bytes(bytes))
}

/// Fetches a session's view, log and recordings over an admin connection.
/// `only_shell` limits the chunks to one shell (it must have a recording).
pub async fn fetch(
    client: &mut Client,
    session: &str,
    only_shell: Option<u32>,
) -> anyhow::Result<SessionRecording> {
    let view: SessionView = client
        .call(Request::Show {
            session: session.to_string(),
        })
        .await
        .with_context(|| format!("cannot read session {session}"))?;
    if view.scores.is_none() {
        bail!("the server did not send the score log of {session}");
    }
    let events: Vec<Event> = client
        .call(Request::Events {
            session: session.to_string(),
        })
        .await
        .with_context(|| format!("cannot read the event log of {session}"))?;
    let recorded: Vec<u32> = client
        .call(Request::RecordedShells {
            session: session.to_string(),
        })
        .await
        .with_context(|| format!("cannot list the recorded shells of {session}"))?;
    let shells = match only_shell {
        Some(s) if recorded.contains(&s) => vec![s],
        Some(s) => bail!(
            "session {session} has no recording of shell {s} (recorded shells: {})",
            list_or_none(&recorded)
        ),
        None => recorded,
    };
    let mut chunks = Vec::new();
    for shell in shells {
        let mut from = 0;
        loop {
            let page: RecordingPage = client
                .call(Request::Recording {
                    session: session.to_string(),
                    shell,
                    from,
                    limit: None,
                })
                .await
                .with_context(|| format!("cannot read the recording of shell {shell}"))?;
            for c in page.chunks {
                let what = || format!("chunk {} of shell {shell}", c.seq);
                let kind = ChunkKind::from_name(&c.kind)
                    .with_context(|| format!("{}: unknown kind {:?}", what(), c.kind))?;
                let data = b64_decode(&c.data)
                    .map_err(anyhow::Error::msg)
                    .with_context(what)?;
                chunks.push(RecordedChunk {
                    shell,
                    seq: c.seq,
                    kind,
                    at: c.at,
                    active_ms: c.active_ms,
                    data,
                });
            }
            match page.next {
                Some(next) if next > from => from = next,
                Some(_) => bail!("the server repeated a recording page of shell {shell}"),
                None => break,
            }
        }
    }
    // Best effort: an environment folder that is gone only loses them.
    let instructions = client
        .call::<crate::protocol::InstructionsReply>(Request::Instructions {
            session: session.to_string(),
        })
        .await
        .ok()
        .map(|reply| reply.instructions);
    Ok(SessionRecording {
        session: view,
        events,
        chunks,
        damage: None,
        instructions,
    })
}

pub fn list_or_none(shells: &[u32]) -> String {
    if shells.is_empty() {
        return "none".into();
    }
    shells
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}
