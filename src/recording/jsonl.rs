//! The rebench jsonl export: one JSON object per line, tagged by `record`.
//! Line 1 is the session (its admin view, with scores); then every event of
//! the log in order; then every terminal chunk. `rebench report --from` and
//! `rebench replay` read it back. See docs/recording.md.

use std::io::Write;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::lines::{self, Line};
use super::session_data::{RecordedChunk, SessionRecording};
use crate::protocol::{SessionView, b64_decode, b64_encode};
use crate::session::Event;
use crate::store::ChunkKind;

pub const FORMAT: &str = "rebench-jsonl";
pub const VERSION: u32 = 1;

#[derive(Serialize)]
struct SessionLine<'a> {
    record: &'static str,
    format: &'static str,
    version: u32,
    session: &'a SessionView,
}

#[derive(Serialize)]
struct EventLine<'a> {
    record: &'static str,
    event: &'a Event,
}

#[derive(Serialize, Deserialize)]
struct ChunkLine {
    #[serde(default)]
    record: String,
    shell: u32,
    seq: u64,
    kind: String,
    at: DateTime<Utc>,
    active_ms: u64,
    data: String,
}

pub fn write(rec: &SessionRecording, out: &mut dyn Write) -> anyhow::Result<()> {
    write_line(
        out,
        &SessionLine {
            record: "session",
            format: FORMAT,
            version: VERSION,
            session: &rec.session,
        },
    )?;
    for event in &rec.events {
        write_line(
            out,
            &EventLine {
                record: "event",
                event,
            },
        )?;
    }
    for c in &rec.chunks {
        write_line(
            out,
            &ChunkLine {
                record: "chunk".into(),
                shell: c.shell,
                seq: c.seq,
                kind: c.kind.name().into(),
                at: c.at,
                active_ms: c.active_ms,
                data: b64_encode(&c.data),
            },
        )?;
    }
    out.flush()?;
    Ok(())
}

fn write_line<T: Serialize>(out: &mut dyn Write, value: &T) -> anyhow::Result<()> {
    serde_json::to_writer(&mut *out, value)?;
    out.write_all(b"\n")?;
    Ok(())
}

/// Whether `first_line` starts a rebench jsonl file.
pub fn sniff(first_line: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(first_line)
        .is_ok_and(|v| v["record"] == "session" && v["format"] == FORMAT)
}

pub fn read(bytes: &[u8], file: &str) -> anyhow::Result<SessionRecording> {
    let all = lines::lines(bytes);
    let mut rest = all.iter().filter(|l| !l.is_blank());
    let first = rest
        .next()
        .ok_or_else(|| anyhow::anyhow!("{file} is empty"))?;
    let session = read_session(first, file)?;
    let mut rec = SessionRecording {
        session,
        events: Vec::new(),
        chunks: Vec::new(),
        damage: None,
        instructions: None,
    };
    for line in rest {
        if let Err(message) = read_record(line, &mut rec) {
            rec.damage = Some(lines::damaged(file, line, message)?);
            break;
        }
    }
    rec.events.sort_by_key(|e| e.seq);
    rec.chunks.sort_by_key(|c| (c.shell, c.seq));
    Ok(rec)
}

fn read_session(line: &Line<'_>, file: &str) -> anyhow::Result<SessionView> {
    let value: serde_json::Value =
        lines::json(line).map_err(|e| lines::at_line(file, line.number, e))?;
    if value["record"] != "session" || value["format"] != FORMAT {
        return Err(lines::at_line(
            file,
            line.number,
            format!("not a {FORMAT} file (the first line must be a \"session\" record)"),
        ));
    }
    match value["version"].as_u64() {
        Some(v) if v == u64::from(VERSION) => {}
        other => {
            return Err(lines::at_line(
                file,
                line.number,
                format!(
                    "{FORMAT} version {other:?} is not supported (this rebench reads version {VERSION})"
                ),
            ));
        }
    }
    serde_json::from_value(value["session"].clone())
        .map_err(|e| lines::at_line(file, line.number, format!("bad session record: {e}")))
}

fn read_record(line: &Line<'_>, rec: &mut SessionRecording) -> Result<(), String> {
    let value: serde_json::Value = lines::json(line)?;
    match value["record"].as_str() {
        Some("event") => {
            let event: Event = serde_json::from_value(value["event"].clone())
                .map_err(|e| format!("bad event record: {e}"))?;
            rec.events.push(event);
        }
        Some("chunk") => {
            let c: ChunkLine =
                serde_json::from_value(value).map_err(|e| format!("bad chunk record: {e}"))?;
            let kind = ChunkKind::from_name(&c.kind).ok_or_else(|| {
                format!(
                    "chunk kind {:?} is not output, input, resize or exit",
                    c.kind
                )
            })?;
            rec.chunks.push(RecordedChunk {
                shell: c.shell,
                seq: c.seq,
                kind,
                at: c.at,
                active_ms: c.active_ms,
                data: b64_decode(&c.data)?,
            });
        }
        Some("session") => return Err("a second session record".into()),
        // Newer writers may add record types; this reader skips them.
        Some(_) => {}
        None => return Err("a line without a \"record\" field".into()),
    }
    Ok(())
}
