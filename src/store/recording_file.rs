//! A shell's terminal recording: one append-only file, `<session>/<shell>.rec`
//! under the store's `recordings` folder, outside sled. sled kept every
//! recorded chunk in its own memory and rewrote it several times on disk; a
//! flood of output grew the server by megabytes per megabyte printed.
//!
//! The file is an 8-byte magic, then blocks, one per flush:
//! `[payload len][crc32 u32 LE of what follows][flags u8][first chunk][chunks][payload]`
//! (lengths and numbers as LEB128 varints: a block of two log lines costs
//! a few bytes of framing, not twenty).
//! The payloads of a frame's blocks are one zstd stream, flushed at each
//! block, so a short line compresses against the lines before it; a block
//! with `NEW_FRAME` starts a stream. A frame ends after `FRAME_INPUT` bytes
//! (a page read decodes at most one frame's worth) and at every reopen.
//! Inside the stream each chunk is `[kind u8][wall ms][active ms][len][data]`,
//! the times as varints of the change since the frame's previous chunk
//! (zigzag for wall time, which can step back), so a frame decodes alone.
//!
//! A crash can leave half a block at the end: readers stop before it, and
//! the writer cuts it off when it opens the file again.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::recording::{Chunk, ChunkKind};

const MAGIC: &[u8; 8] = b"RBREC\x001\n";
const NEW_FRAME: u8 = 1;
/// Uncompressed bytes after which a frame ends.
const FRAME_INPUT: usize = 4 << 20;
/// zstd level: fast enough for a flood, and text still shrinks several-fold.
const LEVEL: i32 = 3;
/// A block claiming more than this is damage, not data.
const MAX_BLOCK: u64 = 1 << 30;

/// A block's place in the file and what its header says.
#[derive(Debug, Clone, Copy)]
struct Block {
    offset: u64,
    /// Where the checksummed part (flags on) starts, and its length.
    body_at: u64,
    body_len: u64,
    /// The payload's length (the body's tail).
    len: u64,
    new_frame: bool,
    first: u64,
    count: u64,
}

impl Block {
    fn end(&self) -> u64 {
        self.body_at + self.body_len
    }
}

fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// A varint from `bytes`, and how many bytes it took; None when cut short
/// or longer than a u64.
fn get_varint(bytes: &[u8]) -> Option<(u64, usize)> {
    let mut value = 0u64;
    for (i, byte) in bytes.iter().enumerate().take(10) {
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Some((value, i + 1));
        }
    }
    None
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// The times of the frame's previous chunk, which the next one is coded against.
#[derive(Debug, Default, Clone, Copy)]
struct Times {
    at_ms: i64,
    active_ms: u64,
}

fn encode_chunk(chunk: &Chunk, last: &mut Times, out: &mut Vec<u8>) {
    let at_ms = chunk.at.timestamp_millis();
    out.push(chunk.kind as u8);
    put_varint(out, zigzag(at_ms.wrapping_sub(last.at_ms)));
    put_varint(
        out,
        zigzag(chunk.active_ms.wrapping_sub(last.active_ms) as i64),
    );
    put_varint(out, chunk.data.len() as u64);
    out.extend_from_slice(&chunk.data);
    *last = Times {
        at_ms,
        active_ms: chunk.active_ms,
    };
}

fn corrupt(path: &Path, message: impl std::fmt::Display) -> super::StoreError {
    super::StoreError::Corrupt {
        what: format!("recording {}", path.display()),
        message: message.to_string(),
    }
}

fn io_error(path: &Path, doing: &str, e: std::io::Error) -> super::StoreError {
    super::StoreError::Flush(format!("{doing} {}: {e}", path.display()))
}

/// The most a block header takes: len, crc, flags, first, count.
const MAX_HEADER: usize = 10 + 4 + 1 + 10 + 10;

/// The blocks of a recording file that are whole, and where the whole part
/// ends. A block cut short (a crash mid-write) ends the list; its checksum
/// is checked when it is read.
fn scan(path: &Path, file: &mut File) -> super::Result<(Vec<Block>, u64)> {
    let size = file
        .metadata()
        .map_err(|e| io_error(path, "reading", e))?
        .len();
    if size < MAGIC.len() as u64 {
        return Ok((Vec::new(), 0));
    }
    let mut reader = std::io::BufReader::new(&mut *file);
    reader
        .seek(SeekFrom::Start(0))
        .map_err(|e| io_error(path, "reading", e))?;
    let mut magic = [0u8; 8];
    reader
        .read_exact(&mut magic)
        .map_err(|e| io_error(path, "reading", e))?;
    if &magic != MAGIC {
        return Err(corrupt(path, "not a rebench recording (bad magic)"));
    }
    let mut blocks = Vec::new();
    let mut offset = MAGIC.len() as u64;
    let mut next_first = 0u64;
    let mut header = [0u8; MAX_HEADER];
    loop {
        let available = (size - offset).min(MAX_HEADER as u64) as usize;
        if available == 0 {
            break;
        }
        reader
            .read_exact(&mut header[..available])
            .map_err(|e| io_error(path, "reading", e))?;
        let Some(block) = parse_header(&header[..available], offset) else {
            break;
        };
        // A header that does not follow on from the last one, or a payload
        // past the end, is a write the crash cut short.
        let consistent = block.len <= MAX_BLOCK
            && block.first == next_first
            && (block.new_frame || !blocks.is_empty())
            && block.end() <= size;
        if !consistent {
            break;
        }
        blocks.push(block);
        next_first = block.first + block.count;
        reader
            .seek_relative(block.end() as i64 - (offset + available as u64) as i64)
            .map_err(|e| io_error(path, "reading", e))?;
        offset = block.end();
    }
    Ok((blocks, offset))
}

/// A block header at `offset`, from the bytes there (None: cut short).
fn parse_header(bytes: &[u8], offset: u64) -> Option<Block> {
    let (len, a) = get_varint(bytes)?;
    let body = bytes.get(a + 4..)?;
    let flags = *body.first()?;
    let (first, b) = get_varint(body.get(1..)?)?;
    let (count, c) = get_varint(body.get(1 + b..)?)?;
    let body_at = offset + a as u64 + 4;
    Some(Block {
        offset,
        body_at,
        body_len: (1 + b + c) as u64 + len,
        len,
        new_frame: flags & NEW_FRAME != 0,
        first,
        count,
    })
}

/// A block's payload, its checksum checked.
fn read_payload(path: &Path, file: &mut File, block: &Block) -> super::Result<Vec<u8>> {
    let mut crc = [0u8; 4];
    let mut body = vec![0u8; block.body_len as usize];
    file.seek(SeekFrom::Start(block.body_at - 4))
        .and_then(|_| file.read_exact(&mut crc))
        .and_then(|()| file.read_exact(&mut body))
        .map_err(|e| io_error(path, "reading", e))?;
    if crc32fast::hash(&body) != u32::from_le_bytes(crc) {
        return Err(corrupt(
            path,
            format!("block at byte {} fails its checksum", block.offset),
        ));
    }
    body.drain(..(block.body_len - block.len) as usize);
    Ok(body)
}

/// Splits a block's decompressed bytes into chunks; a chunk cut by the end
/// of a block cannot happen (the writer flushes whole chunks), so
/// leftovers are damage.
fn split_chunks(
    path: &Path,
    bytes: &[u8],
    expected: u64,
    last: &mut Times,
) -> super::Result<Vec<Chunk>> {
    let short = || corrupt(path, "a chunk is cut short");
    let mut out = Vec::new();
    let mut rest = bytes;
    while let Some((&kind, tail)) = rest.split_first() {
        let kind = ChunkKind::from_byte(kind)
            .ok_or_else(|| corrupt(path, format!("unknown chunk kind {kind}")))?;
        let (at_delta, a) = get_varint(tail).ok_or_else(short)?;
        let (active_delta, b) = get_varint(&tail[a..]).ok_or_else(short)?;
        let (len, c) = get_varint(&tail[a + b..]).ok_or_else(short)?;
        let start = a + b + c;
        let data = usize::try_from(len)
            .ok()
            .and_then(|len| tail.get(start..start.checked_add(len)?))
            .ok_or_else(short)?;
        let at_ms = last.at_ms.wrapping_add(unzigzag(at_delta));
        let active_ms = last.active_ms.wrapping_add(unzigzag(active_delta) as u64);
        let at = chrono::DateTime::from_timestamp_millis(at_ms)
            .ok_or_else(|| corrupt(path, "a chunk's time is out of range"))?;
        out.push(Chunk {
            kind,
            at,
            active_ms,
            data: data.to_vec(),
        });
        *last = Times { at_ms, active_ms };
        rest = &tail[start + data.len()..];
    }
    if out.len() as u64 != expected {
        return Err(corrupt(
            path,
            format!(
                "a block holds {} chunks, its header says {expected}",
                out.len()
            ),
        ));
    }
    Ok(out)
}

/// Feeds a frame's blocks through one zstd stream decoder.
struct FrameReader {
    decoder: zstd::stream::raw::Decoder<'static>,
    buffer: Vec<u8>,
    last: Times,
}

impl FrameReader {
    fn new(path: &Path) -> super::Result<Self> {
        Ok(FrameReader {
            decoder: zstd::stream::raw::Decoder::new()
                .map_err(|e| corrupt(path, format!("zstd: {e}")))?,
            buffer: vec![0u8; 128 << 10],
            last: Times::default(),
        })
    }

    fn block(&mut self, path: &Path, payload: &[u8], count: u64) -> super::Result<Vec<Chunk>> {
        use zstd::stream::raw::Operation;
        let mut bytes = Vec::new();
        let mut input = payload;
        // Until the block's input is used and the decoder holds nothing
        // back (a full output buffer may leave more to come).
        loop {
            let status = self
                .decoder
                .run_on_buffers(input, &mut self.buffer)
                .map_err(|e| corrupt(path, format!("zstd: {e}")))?;
            bytes.extend_from_slice(&self.buffer[..status.bytes_written]);
            input = &input[status.bytes_read..];
            let stuck = status.bytes_read == 0 && status.bytes_written == 0;
            if (input.is_empty() && status.bytes_written < self.buffer.len()) || stuck {
                break;
            }
        }
        split_chunks(path, &bytes, count, &mut self.last)
    }
}

/// Reads chunks `from..from + limit` of a recording file, with the number
/// to continue from (None at the end). A missing file is an empty recording.
pub fn read_page(path: &Path, from: u64, limit: usize) -> super::Result<super::RecordingPage> {
    let mut file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((Vec::new(), None)),
        Err(e) => return Err(io_error(path, "opening", e)),
    };
    let (blocks, _) = scan(path, &mut file)?;
    let Some(start) = blocks.iter().rposition(|b| b.new_frame && b.first <= from) else {
        return Ok((Vec::new(), None));
    };
    let mut out = Vec::new();
    let mut frame: Option<FrameReader> = None;
    for block in &blocks[start..] {
        if block.new_frame {
            if !out.is_empty() && out.len() >= limit {
                return Ok((out, Some(block.first)));
            }
            frame = Some(FrameReader::new(path)?);
        }
        let payload = read_payload(path, &mut file, block)?;
        let Some(reader) = frame.as_mut() else {
            return Err(corrupt(path, "a frame without its start"));
        };
        let chunks = reader.block(path, &payload, block.count)?;
        for (i, chunk) in chunks.into_iter().enumerate() {
            let seq = block.first + i as u64;
            if seq < from {
                continue;
            }
            if out.len() >= limit {
                return Ok((out, Some(seq)));
            }
            out.push((seq, chunk));
        }
    }
    Ok((out, None))
}

/// How many chunks a recording file holds (the next chunk's number).
pub fn chunk_count(path: &Path) -> super::Result<u64> {
    let mut file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(io_error(path, "opening", e)),
    };
    let (blocks, _) = scan(path, &mut file)?;
    Ok(blocks.last().map_or(0, |b| b.first + b.count))
}

/// The writer of one shell's recording. Chunks are compressed as they come
/// and reach the file at `write_out` (the OS) and `sync` (the disk).
pub struct RecordingWriter {
    path: PathBuf,
    state: Mutex<WriterState>,
    /// The same open file, for `sync`: the disk's wait happens outside the
    /// lock, so the shell's output (which takes the lock to be recorded)
    /// never waits for an fdatasync.
    sync_handle: File,
    /// Queued for the next sync (see `Store::sync_recordings`).
    dirty: std::sync::atomic::AtomicBool,
}

struct WriterState {
    file: File,
    /// The stream of the frame being written; None: the next block starts one.
    encoder: Option<zstd::stream::write::Encoder<'static, Vec<u8>>>,
    frame_input: usize,
    /// The times the next chunk is coded against.
    last: Times,
    next_seq: u64,
    /// The block being gathered.
    block_first: u64,
    block_count: u64,
    block_new_frame: bool,
    /// Whole blocks not yet in the file (a write that failed is retried:
    /// the stream after them depends on them).
    unwritten: Vec<u8>,
    /// The file's length with every block written so far.
    written_len: u64,
    unsynced: bool,
}

impl RecordingWriter {
    /// Opens (or creates) a shell's recording for appending; a torn last
    /// block is cut off first.
    pub fn open(path: &Path) -> super::Result<RecordingWriter> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| io_error(dir, "creating", e))?;
        }
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| io_error(path, "opening", e))?;
        let (blocks, mut whole) = scan(path, &mut file)?;
        let size = file
            .metadata()
            .map_err(|e| io_error(path, "reading", e))?
            .len();
        if whole == 0 {
            file.set_len(0)
                .and_then(|()| file.write_all(MAGIC))
                .map_err(|e| io_error(path, "writing", e))?;
            whole = MAGIC.len() as u64;
        } else if whole < size {
            tracing::warn!(
                file = %path.display(),
                kept = whole,
                cut = size - whole,
                "a recording's torn last block is cut off"
            );
            file.set_len(whole)
                .map_err(|e| io_error(path, "truncating", e))?;
        }
        let next_seq = blocks.last().map_or(0, |b| b.first + b.count);
        let sync_handle = file.try_clone().map_err(|e| io_error(path, "opening", e))?;
        Ok(RecordingWriter {
            path: path.to_path_buf(),
            sync_handle,
            state: Mutex::new(WriterState {
                file,
                encoder: None,
                frame_input: 0,
                last: Times::default(),
                next_seq,
                block_first: next_seq,
                block_count: 0,
                block_new_frame: false,
                unwritten: Vec::new(),
                written_len: whole,
                unsynced: whole < size,
            }),
            dirty: std::sync::atomic::AtomicBool::new(false),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Marks the writer as having output to sync; true when it was not yet.
    pub fn mark_dirty(&self) -> bool {
        !self.dirty.swap(true, std::sync::atomic::Ordering::AcqRel)
    }

    pub fn clear_dirty(&self) {
        self.dirty
            .store(false, std::sync::atomic::Ordering::Release);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, WriterState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The number the next chunk will get.
    pub fn next_seq(&self) -> u64 {
        self.lock().next_seq
    }

    /// Adds a chunk (compressed now, written at the next `write_out`); returns its number.
    pub fn append(&self, chunk: &Chunk) -> super::Result<u64> {
        let mut state = self.lock();
        if state.encoder.is_none() {
            let encoder = zstd::stream::write::Encoder::new(Vec::new(), LEVEL)
                .map_err(|e| corrupt(&self.path, format!("zstd: {e}")))?;
            state.encoder = Some(encoder);
            state.frame_input = 0;
            state.last = Times::default();
            state.block_new_frame = true;
        }
        let mut encoded = Vec::with_capacity(24 + chunk.data.len());
        encode_chunk(chunk, &mut state.last, &mut encoded);
        if let Some(encoder) = state.encoder.as_mut() {
            encoder
                .write_all(&encoded)
                .map_err(|e| corrupt(&self.path, format!("zstd: {e}")))?;
        }
        state.frame_input += encoded.len();
        state.block_count += 1;
        let seq = state.next_seq;
        state.next_seq += 1;
        Ok(seq)
    }

    /// Closes the block being gathered and hands every whole block to the OS
    /// (readers see it; a crash of this process loses nothing).
    pub fn write_out(&self) -> super::Result<()> {
        let mut state = self.lock();
        self.close_block(&mut state)?;
        if state.unwritten.is_empty() {
            return Ok(());
        }
        let before = state.written_len;
        let state = &mut *state;
        let written = state
            .file
            .seek(SeekFrom::Start(before))
            .and_then(|_| state.file.write_all(&state.unwritten));
        match written {
            Ok(()) => {
                state.written_len += state.unwritten.len() as u64;
                state.unwritten.clear();
                state.unsynced = true;
                Ok(())
            }
            Err(e) => {
                // No half block stays behind a later one: cut it, retry it all later.
                let _ = state.file.set_len(before);
                Err(io_error(&self.path, "writing", e))
            }
        }
    }

    /// `write_out`, then makes the file durable. Everything written out
    /// before the call is durable when it returns; output recorded while
    /// the disk works is not held up (it is marked for the next sync).
    pub fn sync(&self) -> super::Result<()> {
        self.write_out()?;
        let unsynced = std::mem::take(&mut self.lock().unsynced);
        if unsynced && let Err(e) = self.sync_handle.sync_data() {
            self.lock().unsynced = true;
            return Err(io_error(&self.path, "syncing", e));
        }
        Ok(())
    }

    fn close_block(&self, state: &mut WriterState) -> super::Result<()> {
        if state.block_count == 0 {
            return Ok(());
        }
        let end_frame = state.frame_input >= FRAME_INPUT;
        let payload = match state.encoder.take() {
            Some(mut encoder) if !end_frame => {
                encoder
                    .flush()
                    .map_err(|e| corrupt(&self.path, format!("zstd: {e}")))?;
                let payload = std::mem::take(encoder.get_mut());
                state.encoder = Some(encoder);
                payload
            }
            Some(encoder) => encoder
                .finish()
                .map_err(|e| corrupt(&self.path, format!("zstd: {e}")))?,
            None => Vec::new(),
        };
        let mut body = Vec::with_capacity(21 + payload.len());
        body.push(if state.block_new_frame { NEW_FRAME } else { 0 });
        put_varint(&mut body, state.block_first);
        put_varint(&mut body, state.block_count);
        body.extend_from_slice(&payload);
        put_varint(&mut state.unwritten, payload.len() as u64);
        state
            .unwritten
            .extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
        state.unwritten.extend_from_slice(&body);
        state.block_first = state.next_seq;
        state.block_count = 0;
        state.block_new_frame = false;
        Ok(())
    }
}

impl Drop for RecordingWriter {
    fn drop(&mut self) {
        if let Err(e) = self.sync() {
            tracing::error!(file = %self.path.display(), "the recording's last output was not saved: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::DateTime;

    fn chunk(i: u64, data: &[u8]) -> Chunk {
        Chunk {
            kind: ChunkKind::Output,
            at: DateTime::from_timestamp_millis(1_700_000_000_000 + i as i64).unwrap(),
            active_ms: i,
            data: data.to_vec(),
        }
    }

    fn all(path: &Path) -> Vec<Chunk> {
        read_page(path, 0, usize::MAX)
            .unwrap()
            .0
            .into_iter()
            .map(|(_, c)| c)
            .collect()
    }

    #[test]
    fn chunks_come_back_in_order_across_blocks_frames_and_reopens() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s/0.rec");
        let mut expected = Vec::new();
        {
            let writer = RecordingWriter::open(&path).unwrap();
            for i in 0..50u64 {
                let c = chunk(i, format!("line {i}\r\n").as_bytes());
                assert_eq!(writer.append(&c).unwrap(), i);
                expected.push(c);
                if i % 7 == 0 {
                    writer.write_out().unwrap();
                }
            }
            // A frame past FRAME_INPUT ends and a new one starts.
            let big: Vec<u8> = (0..FRAME_INPUT + 10).map(|i| (i % 251) as u8).collect();
            let c = chunk(50, &big);
            writer.append(&c).unwrap();
            expected.push(c);
            writer.sync().unwrap();
            let c = chunk(51, b"after the big one");
            writer.append(&c).unwrap();
            expected.push(c);
        }
        let writer = RecordingWriter::open(&path).unwrap();
        assert_eq!(writer.next_seq(), 52);
        let c = chunk(52, b"after a reopen");
        assert_eq!(writer.append(&c).unwrap(), 52);
        expected.push(c);
        writer.write_out().unwrap();
        assert_eq!(all(&path), expected);
        assert_eq!(chunk_count(&path).unwrap(), 53);
        // Pages from anywhere, across frame starts.
        for from in [0u64, 3, 49, 50, 51, 52] {
            let (page, next) = read_page(&path, from, 2).unwrap();
            let seqs: Vec<u64> = page.iter().map(|(s, _)| *s).collect();
            let want: Vec<u64> = (from..(from + 2).min(53)).collect();
            assert_eq!(seqs, want, "from {from}");
            assert_eq!(next, (from + 2 < 53).then_some(from + 2), "from {from}");
            assert_eq!(page[0].1, expected[from as usize]);
        }
        assert_eq!(read_page(&path, 53, 5).unwrap(), (Vec::new(), None));
    }

    #[test]
    fn times_that_step_back_and_every_kind_come_back_exactly() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("0.rec");
        let at = |ms: i64| DateTime::from_timestamp_millis(ms).unwrap();
        let chunks = vec![
            Chunk::resize(at(1_700_000_000_000), 0, 200, 50),
            Chunk {
                kind: ChunkKind::Input,
                at: at(1_700_000_005_000),
                active_ms: 5_000,
                data: b"ls\r".to_vec(),
            },
            // The wall clock stepped back (NTP); active time never does, but
            // a stored value is what it is.
            Chunk {
                kind: ChunkKind::Output,
                at: at(1_699_999_000_000),
                active_ms: 4_000,
                data: vec![],
            },
            Chunk {
                kind: ChunkKind::Exit,
                at: at(i64::from(i32::MAX) * 1000),
                active_ms: u64::from(u32::MAX) * 10,
                data: 0i32.to_be_bytes().to_vec(),
            },
        ];
        let writer = RecordingWriter::open(&path).unwrap();
        for c in &chunks {
            writer.append(c).unwrap();
        }
        drop(writer);
        assert_eq!(all(&path), chunks);
        for v in [0u64, 1, 127, 128, 300, u64::from(u32::MAX), u64::MAX] {
            let mut out = Vec::new();
            put_varint(&mut out, v);
            assert_eq!(get_varint(&out), Some((v, out.len())));
            assert_eq!(get_varint(&out[..out.len() - 1]), None, "cut short");
        }
        for v in [0i64, -1, 1, i64::MIN, i64::MAX] {
            assert_eq!(unzigzag(zigzag(v)), v);
        }
    }

    #[test]
    fn a_block_of_a_flood_decodes_whole() {
        // Many 16 KiB reads in one flush: more output than the decoder's
        // buffer holds, which once left chunks cut short.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("0.rec");
        let writer = RecordingWriter::open(&path).unwrap();
        let mut expected = Vec::new();
        let mut n = 0u64;
        for i in 0..120u64 {
            let mut data = Vec::new();
            while data.len() < 16 * 1024 {
                n += 1;
                data.extend_from_slice(format!("{n}\r\n").as_bytes());
            }
            let c = chunk(i, &data);
            writer.append(&c).unwrap();
            expected.push(c);
        }
        drop(writer);
        assert_eq!(all(&path), expected);
    }

    #[test]
    fn a_torn_last_block_is_skipped_by_readers_and_cut_by_the_writer() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("0.rec");
        {
            let writer = RecordingWriter::open(&path).unwrap();
            writer.append(&chunk(0, b"kept")).unwrap();
            writer.sync().unwrap();
            writer.append(&chunk(1, b"torn")).unwrap();
            writer.sync().unwrap();
        }
        let full = std::fs::metadata(&path).unwrap().len();
        let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        f.set_len(full - 3).unwrap();
        drop(f);
        assert_eq!(all(&path), vec![chunk(0, b"kept")]);
        let writer = RecordingWriter::open(&path).unwrap();
        assert_eq!(writer.next_seq(), 1);
        writer.append(&chunk(1, b"again")).unwrap();
        drop(writer);
        assert_eq!(all(&path), vec![chunk(0, b"kept"), chunk(1, b"again")]);
    }

    #[test]
    fn damage_inside_a_block_is_named_and_a_stranger_file_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("0.rec");
        {
            let writer = RecordingWriter::open(&path).unwrap();
            writer.append(&chunk(0, b"some output here")).unwrap();
        }
        let mut bytes = std::fs::read(&path).unwrap();
        let last = bytes.len() - 2;
        bytes[last] ^= 0xff;
        std::fs::write(&path, &bytes).unwrap();
        let err = read_page(&path, 0, 10).unwrap_err().to_string();
        assert!(err.contains("0.rec") && err.contains("checksum"), "{err}");
        std::fs::write(&path, b"hello, this is not a recording").unwrap();
        let err = read_page(&path, 0, 10).unwrap_err().to_string();
        assert!(err.contains("bad magic"), "{err}");
        assert!(RecordingWriter::open(&path).is_err());
    }

    #[test]
    fn small_lines_are_stored_in_fewer_bytes_than_printed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("0.rec");
        let writer = RecordingWriter::open(&path).unwrap();
        let mut printed = 0;
        for i in 0..1200u64 {
            let line = format!(
                "2026-12-03T10:{:02}:{:02} step {i} loss {:.4}\r\n",
                i / 600,
                i / 10 % 60,
                1.0 / (i as f64 + 1.0)
            );
            printed += line.len();
            writer.append(&chunk(i * 100, line.as_bytes())).unwrap();
            // One flush every two lines, as a line every 0.1 s meets the 200 ms flush.
            if i % 2 == 1 {
                writer.write_out().unwrap();
            }
        }
        drop(writer);
        let stored = std::fs::metadata(&path).unwrap().len() as usize;
        assert!(
            stored < printed,
            "stored {stored} bytes for {printed} printed"
        );
        assert_eq!(all(&path).len(), 1200);
    }
}
