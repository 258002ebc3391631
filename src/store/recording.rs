//! One recorded terminal chunk, in a compact binary form:
//! `[kind u8][wall time ms i64 BE][active ms u64 BE][payload]`.

use chrono::{DateTime, Utc};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChunkKind {
    Output = 0,
    Input = 1,
    /// Payload: cols u16 BE, rows u16 BE.
    Resize = 2,
    /// Payload: exit code i32 BE (or -signal).
    Exit = 3,
}

impl ChunkKind {
    pub const ALL: [ChunkKind; 4] = [
        ChunkKind::Output,
        ChunkKind::Input,
        ChunkKind::Resize,
        ChunkKind::Exit,
    ];

    /// Its name in the protocol and in jsonl exports.
    pub fn name(self) -> &'static str {
        match self {
            ChunkKind::Output => "output",
            ChunkKind::Input => "input",
            ChunkKind::Resize => "resize",
            ChunkKind::Exit => "exit",
        }
    }

    pub fn from_name(name: &str) -> Option<ChunkKind> {
        Self::ALL.into_iter().find(|k| k.name() == name)
    }

    pub(crate) fn from_byte(byte: u8) -> Option<ChunkKind> {
        Self::ALL.into_iter().find(|k| *k as u8 == byte)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    pub kind: ChunkKind,
    pub at: DateTime<Utc>,
    pub active_ms: u64,
    pub data: Vec<u8>,
}

const HEADER: usize = 1 + 8 + 8;

impl Chunk {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER + self.data.len());
        out.push(self.kind as u8);
        out.extend_from_slice(&self.at.timestamp_millis().to_be_bytes());
        out.extend_from_slice(&self.active_ms.to_be_bytes());
        out.extend_from_slice(&self.data);
        out
    }

    pub fn decode(bytes: &[u8]) -> Result<Chunk, String> {
        if bytes.len() < HEADER {
            return Err(format!(
                "chunk of {} bytes is shorter than its {HEADER}-byte header",
                bytes.len()
            ));
        }
        let kind = ChunkKind::from_byte(bytes[0])
            .ok_or_else(|| format!("unknown chunk kind {}", bytes[0]))?;
        let mut ms = [0u8; 8];
        ms.copy_from_slice(&bytes[1..9]);
        let at = DateTime::from_timestamp_millis(i64::from_be_bytes(ms))
            .ok_or_else(|| "chunk time out of range".to_string())?;
        let mut active = [0u8; 8];
        active.copy_from_slice(&bytes[9..17]);
        Ok(Chunk {
            kind,
            at,
            active_ms: u64::from_be_bytes(active),
            data: bytes[HEADER..].to_vec(),
        })
    }

    pub fn resize(at: DateTime<Utc>, active_ms: u64, cols: u16, rows: u16) -> Chunk {
        let mut data = cols.to_be_bytes().to_vec();
        data.extend_from_slice(&rows.to_be_bytes());
        Chunk {
            kind: ChunkKind::Resize,
            at,
            active_ms,
            data,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_round_trip_and_bad_bytes_are_named() {
        let at = DateTime::from_timestamp_millis(1_700_000_000_123).unwrap();
        let c = Chunk {
            kind: ChunkKind::Output,
            at,
            active_ms: 42,
            data: b"\x1b[31mhi\xff".to_vec(),
        };
        assert_eq!(Chunk::decode(&c.encode()).unwrap(), c);
        let r = Chunk::resize(at, 1, 120, 40);
        assert_eq!(
            Chunk::decode(&r.encode()).unwrap().data,
            vec![0, 120, 0, 40]
        );
        assert!(Chunk::decode(&[0, 1]).unwrap_err().contains("shorter"));
        let mut bad = c.encode();
        bad[0] = 9;
        assert!(
            Chunk::decode(&bad)
                .unwrap_err()
                .contains("unknown chunk kind 9")
        );
    }
}
