//! The sled store: session metadata, append-only event logs, heartbeats and
//! terminal recordings. Anything that changes state or score is flushed
//! before the caller acknowledges it; terminal output is batched by the caller.
//!
//! Layout (one sled tree each):
//! - `sessions`: id → `SessionMeta` (JSON)
//! - `events/<id>`: seq (u64 BE) → `Event` (JSON)
//! - `heartbeat`: id → `{at, active_ms}` (JSON), overwritten every few seconds
//! - `campaigns`: name → `CampaignRecord` (JSON)
//! - `imports`: imported run's source key → session id
//!
//! Terminal recordings live beside the database, not in it: one append-only
//! file per shell, `recordings/<id>/<shell>.rec` (see `recording_file`).

mod group_flush;
pub mod recording;
pub mod recording_file;
pub mod space;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::session::campaign::CampaignRecord;
use crate::session::{Event, SessionMeta};
pub use recording::{Chunk, ChunkKind};
use recording_file::RecordingWriter;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error(
        "the database in {dir} is in use by another process (another rebench server owns this data dir); \
         stop it (`rebench shutdown --data-dir {dir}`) or use another --data-dir"
    )]
    Locked { dir: PathBuf },
    #[error(
        "could not open the database in {dir}: {source}. The data dir may be damaged; \
         keep a copy of it (cp -a) before trying anything else, and report the error"
    )]
    Open { dir: PathBuf, source: sled::Error },
    #[error("database error: {0}")]
    Db(#[from] sled::Error),
    #[error("the flush to disk did not complete: {0}")]
    Flush(String),
    #[error("stored record {what} is unreadable: {message}")]
    Corrupt { what: String, message: String },
    #[error(
        "the database in {dir} has schema version {found}, newer than this rebench knows ({known}); \
         use a newer rebench for this data dir"
    )]
    TooNew {
        dir: PathBuf,
        found: u32,
        known: u32,
    },
    #[error(
        "the disk holding the data dir is almost full ({free_mb} MiB free): terminal output is not recorded until there is room"
    )]
    DiskLow { free_mb: u64 },
}

pub type Result<T> = std::result::Result<T, StoreError>;

/// The store's layout version. 1: no version recorded (every data dir made
/// before versioning). 2: the same trees; sessions and events gained
/// optional fields only (read with serde defaults), so a 1 opens as is.
/// 3: terminal recordings are files beside the database, no longer the
/// `rec/<id>` trees (keyed by shell u32 BE and chunk u64 BE).
/// A migration that rewrites data goes in `check_schema`, keyed by version.
pub const SCHEMA_VERSION: u32 = 3;
const SCHEMA_KEY: &[u8] = b"schema_version";

/// Refuses a store made by a newer rebench; records the current version
/// on an older one (after migrating it, when a version needs that).
fn check_schema(db: &sled::Db, dir: &Path, recordings: &Path) -> Result<()> {
    let found = match db.get(SCHEMA_KEY)? {
        None => 1,
        Some(bytes) => match <[u8; 4]>::try_from(bytes.as_ref()) {
            Ok(b) => u32::from_be_bytes(b),
            Err(_) => {
                return Err(StoreError::Corrupt {
                    what: "schema_version".into(),
                    message: format!("{} bytes instead of 4", bytes.len()),
                });
            }
        },
    };
    if found > SCHEMA_VERSION {
        return Err(StoreError::TooNew {
            dir: dir.to_path_buf(),
            found,
            known: SCHEMA_VERSION,
        });
    }
    if found < SCHEMA_VERSION {
        // 1 -> 2: nothing to rewrite. 2 -> 3: recordings move to files.
        if found < 3 {
            migrate_recordings(db, recordings)?;
        }
        db.insert(SCHEMA_KEY, &SCHEMA_VERSION.to_be_bytes())?;
        db.flush()?;
        tracing::info!(from = found, to = SCHEMA_VERSION, "store upgraded");
    }
    Ok(())
}

/// Moves each `rec/<id>` tree (schema 2 and before) into recording files:
/// written whole under a temporary name, renamed into place, and only
/// then is the tree dropped, so a crash part way leaves every recording in
/// one of the two places (a rerun redoes the session it was at).
fn migrate_recordings(db: &sled::Db, recordings: &Path) -> Result<()> {
    for name in db.tree_names() {
        let Some(id) = name.strip_prefix(b"rec/") else {
            continue;
        };
        let id = String::from_utf8_lossy(id).into_owned();
        let tree = db.open_tree(&name)?;
        let target = session_recordings(recordings, &id)?;
        let partial = recordings.join(format!(".{id}.migrating"));
        let _ = std::fs::remove_dir_all(&partial);
        let mut writers: HashMap<u32, RecordingWriter> = HashMap::new();
        for item in tree.iter() {
            let (key, bytes) = item?;
            let shell_bytes: [u8; 4] =
                key.get(..4)
                    .and_then(|k| k.try_into().ok())
                    .ok_or_else(|| StoreError::Corrupt {
                        what: format!("recording key in rec/{id}"),
                        message: format!("{} bytes, not 12", key.len()),
                    })?;
            let shell = u32::from_be_bytes(shell_bytes);
            let chunk = Chunk::decode(&bytes).map_err(|message| StoreError::Corrupt {
                what: format!("recording {id}/{shell}/{}", key_u64(&key[4..])),
                message,
            })?;
            let writer = match writers.entry(shell) {
                std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::hash_map::Entry::Vacant(e) => e.insert(RecordingWriter::open(
                    &partial.join(format!("{shell}.rec")),
                )?),
            };
            writer.append(&chunk)?;
        }
        for writer in writers.values() {
            writer.sync()?;
        }
        drop(writers);
        if target.exists() {
            std::fs::remove_dir_all(&target)
                .map_err(|e| StoreError::Flush(format!("removing {}: {e}", target.display())))?;
        }
        if partial.exists() {
            std::fs::rename(&partial, &target)
                .map_err(|e| StoreError::Flush(format!("renaming {}: {e}", partial.display())))?;
            sync_dir(recordings)?;
        }
        db.drop_tree(&name)?;
        db.flush()?;
        tracing::info!(session = %id, "recording moved out of the database");
    }
    Ok(())
}

/// Makes a folder's new and renamed entries durable.
fn sync_dir(dir: &Path) -> Result<()> {
    std::fs::File::open(dir)
        .and_then(|f| f.sync_all())
        .map_err(|e| StoreError::Flush(format!("syncing {}: {e}", dir.display())))
}

/// A session's recording folder; ids are ours (letters, digits, `-`, `_`),
/// and anything else is refused rather than joined into a path.
fn session_recordings(recordings: &Path, id: &str) -> Result<PathBuf> {
    let plain = !id.is_empty()
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if !plain {
        return Err(StoreError::Corrupt {
            what: format!("session id {id:?}"),
            message: "not a session id (letters, digits, '-' and '_' only)".into(),
        });
    }
    Ok(recordings.join(id))
}

/// Every record of a tree of JSON values keyed by name; an unreadable one
/// is an error naming it (`session abc123`).
fn read_all<T: serde::de::DeserializeOwned>(tree: &sled::Tree, what: &str) -> Result<Vec<T>> {
    let mut out = Vec::new();
    for item in tree.iter() {
        let (key, bytes) = item?;
        out.push(from_json(
            &bytes,
            &format!("{what} {}", String::from_utf8_lossy(&key)),
        )?);
    }
    Ok(out)
}

/// Numbered chunks of a recording, and the number to continue from (None at the end).
pub type RecordingPage = (Vec<(u64, Chunk)>, Option<u64>);

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Heartbeat {
    pub at: DateTime<Utc>,
    pub active_ms: u64,
}

#[derive(Clone)]
pub struct Store {
    db: sled::Db,
    sessions: sled::Tree,
    heartbeats: sled::Tree,
    campaigns: sled::Tree,
    /// Imported runs: source key → session id (`import_session`).
    imports: sled::Tree,
    dir: PathBuf,
    space: std::sync::Arc<space::SpaceGuard>,
    /// Whether sled compresses this store (fixed when it was made).
    compressed: bool,
    /// `recordings/` beside the database.
    recordings: PathBuf,
    /// Flushes shared by the callers waiting at the same time.
    group: Arc<group_flush::GroupFlush>,
    /// The shells being recorded now (a read writes out their output first).
    writers: Arc<Mutex<LiveWriters>>,
    /// The writers with output since the last sync: the periodic sync
    /// looks at these only, so idle shells cost it nothing.
    dirty: Arc<Mutex<Vec<Weak<RecordingWriter>>>>,
    /// Database writes not yet flushed by their writer (`append_unflushed`,
    /// import claims): the periodic flush skips sled when there are none.
    unflushed: Arc<std::sync::atomic::AtomicBool>,
    /// Told when something starts waiting for the periodic sync, so that
    /// an idle server's sync task sleeps instead of ticking.
    written: Arc<tokio::sync::Notify>,
}

/// The writers of the shells being recorded, by session and shell.
type LiveWriters = HashMap<(String, u32), Weak<RecordingWriter>>;

/// A shell's recorder: chunks go into its recording file, numbered in order.
pub struct ShellRecording {
    writer: Arc<RecordingWriter>,
    space: Arc<space::SpaceGuard>,
    dirty: Arc<Mutex<Vec<Weak<RecordingWriter>>>>,
    written: Arc<tokio::sync::Notify>,
}

impl ShellRecording {
    /// The number the next chunk gets.
    pub fn next_seq(&self) -> u64 {
        self.writer.next_seq()
    }

    /// Records a terminal chunk; it reaches the file at the store's next
    /// `sync_recordings` (the server runs one every 200 ms).
    ///
    /// Refused while the disk is low: the room left is for the events that
    /// pause the sessions.
    pub fn record(&self, chunk: &Chunk) -> Result<u64> {
        if self.space.is_low() {
            return Err(StoreError::DiskLow {
                free_mb: self.space.free() / (1024 * 1024),
            });
        }
        let seq = self.writer.append(chunk)?;
        if self.writer.mark_dirty() {
            self.dirty
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(Arc::downgrade(&self.writer));
            self.written.notify_one();
        }
        Ok(seq)
    }
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("dir", &self.dir).finish()
    }
}

/// sled's refusal to open a store created with compression with it off.
fn made_with_compression(e: &sled::Error) -> bool {
    matches!(e, sled::Error::Unsupported(text)
        if text.contains("use_compression loaded from disk: true"))
}

fn is_lock_error(err: &sled::Error) -> bool {
    match err {
        sled::Error::Io(io) => {
            io.kind() == std::io::ErrorKind::WouldBlock
                || io.raw_os_error() == Some(libc::EWOULDBLOCK)
                || io.to_string().contains("lock")
        }
        _ => false,
    }
}

/// The operator's bound on sled's page cache, in MiB.
pub const CACHE_VAR: &str = "REBENCH_DB_CACHE_MB";
const DEFAULT_CACHE_MB: u64 = 32;

/// sled's page cache size: `REBENCH_DB_CACHE_MB`, else 32 MiB (sled's own
/// default is 1 GiB; with recordings in files of their own, the database
/// holds sessions and their event logs, which a smaller cache serves).
pub fn cache_bytes(value: Option<&str>) -> u64 {
    let mb = match value.map(str::trim).filter(|v| !v.is_empty()) {
        None => DEFAULT_CACHE_MB,
        Some(v) => match v.parse::<u64>() {
            Ok(mb) if (1..=65_536).contains(&mb) => mb,
            _ => {
                tracing::warn!(
                    "{CACHE_VAR}={v:?} is not a size in MiB (1 to 65536); using {DEFAULT_CACHE_MB}"
                );
                DEFAULT_CACHE_MB
            }
        },
    };
    mb * 1024 * 1024
}

impl Store {
    /// Opens (or creates) the database at `dir`.
    pub fn open(dir: &Path) -> Result<Store> {
        let cache = cache_bytes(std::env::var(CACHE_VAR).ok().as_deref());
        let config = |compressed: bool| {
            sled::Config::new()
                .path(dir)
                .cache_capacity(cache)
                // Only explicit flushes write, each after a look at the free
                // space (see `space`); the server flushes every 200 ms anyway.
                .flush_every_ms(None)
                // New stores are not compressed: recordings are files of
                // their own (compressed there), and sled makes a zstd context
                // for every write, which was a seventh of the server's time
                // per agent command (exec_load: 0.82x -> 0.86-0.90x `bash -c`).
                // Stores made compressed stay so (sled fixes it at creation).
                .use_compression(compressed)
                .compression_factor(3)
        };
        let mut compressed = false;
        let db = match config(false).open() {
            Err(e) if made_with_compression(&e) => {
                compressed = true;
                config(true).open()
            }
            other => other,
        };
        let db = db.map_err(|source| {
            if is_lock_error(&source) {
                StoreError::Locked {
                    dir: dir.to_path_buf(),
                }
            } else {
                StoreError::Open {
                    dir: dir.to_path_buf(),
                    source,
                }
            }
        })?;
        let recordings = dir
            .parent()
            .map_or_else(|| dir.join("recordings"), |p| p.join("recordings"));
        check_schema(&db, dir, &recordings)?;
        let sessions = db.open_tree("sessions")?;
        let heartbeats = db.open_tree("heartbeat")?;
        let campaigns = db.open_tree("campaigns")?;
        let imports = db.open_tree("imports")?;
        Ok(Store {
            db,
            sessions,
            heartbeats,
            campaigns,
            imports,
            dir: dir.to_path_buf(),
            space: std::sync::Arc::new(space::SpaceGuard::new(dir)),
            compressed,
            recordings,
            group: Arc::default(),
            writers: Arc::default(),
            dirty: Arc::default(),
            unflushed: Arc::default(),
            written: Arc::default(),
        })
    }

    /// Copies every tree into a new database at `target`; returns how many
    /// trees. The caller keeps writers out for a consistent copy.
    pub fn backup_to(&self, target: &Path) -> Result<usize> {
        std::fs::create_dir_all(target)
            .map_err(|e| StoreError::Flush(format!("creating {}: {e}", target.display())))?;
        let copy = sled::Config::new()
            .path(target)
            .use_compression(self.compressed)
            .compression_factor(3)
            // No background flusher: it would hold the lock for a while after the drop.
            .flush_every_ms(None)
            .open()?;
        let export = self.db.export();
        let trees = export.len();
        copy.import(export);
        copy.flush()?;
        drop(copy);
        self.sync_recordings()?;
        let target_recordings = target
            .parent()
            .map_or_else(|| target.join("recordings"), |p| p.join("recordings"));
        copy_recordings(&self.recordings, &target_recordings)?;
        Ok(trees)
    }

    /// Free bytes, when the disk holding the store is almost full.
    pub fn low_space(&self) -> Option<u64> {
        self.space.is_low().then(|| self.space.free())
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn events_tree(&self, id: &str) -> Result<sled::Tree> {
        Ok(self.db.open_tree(format!("events/{id}"))?)
    }

    /// Makes everything written so far durable.
    ///
    /// Not `flush_async`: in sled 0.34 concurrent `flush_async` callers can
    /// wait forever (spacejam/sled#1308), which froze sessions under parallel
    /// agent execs. The blocking flush runs on the blocking pool, one
    /// runner at a time for every caller waiting (`group_flush`).
    pub async fn flush(&self) -> Result<()> {
        let ticket = self.group.join();
        if ticket.lead {
            let store = self.clone();
            let lead = group_flush::Lead::new(self.group.clone());
            tokio::task::spawn_blocking(move || lead.run(|| store.flush_now()));
        }
        group_flush::outcome(ticket.done.await).map_err(StoreError::Flush)
    }

    /// `flush`, from a thread that may block. Callers at the same time
    /// share one flush (group commit).
    pub fn flush_blocking(&self) -> Result<()> {
        let ticket = self.group.join();
        if ticket.lead {
            self.group.run(|| self.flush_now());
        }
        group_flush::outcome(ticket.done.blocking_recv()).map_err(StoreError::Flush)
    }

    /// One flush of the database, after a look at the free space.
    fn flush_now(&self) -> std::result::Result<(), String> {
        self.space.check();
        self.db.flush().map(drop).map_err(|e| e.to_string())
    }

    /// Makes every shell's recorded output durable (only the files that
    /// gained output since the last sync are written).
    pub fn sync_recordings(&self) -> Result<()> {
        let dirty = std::mem::take(&mut *self.dirty.lock().unwrap_or_else(|e| e.into_inner()));
        let mut first_error = None;
        for writer in dirty.iter().filter_map(Weak::upgrade) {
            // Cleared first: output from now on queues the writer again.
            writer.clear_dirty();
            if let Err(e) = writer.sync() {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// A database write that waits for the periodic flush.
    fn mark_unflushed(&self) {
        self.unflushed
            .store(true, std::sync::atomic::Ordering::Release);
        self.written.notify_one();
    }

    /// Returns once something waits for the periodic sync (at once when
    /// something came since the last call returned).
    pub async fn written(&self) {
        self.written.notified().await;
    }

    /// Whether a recording or a database write waits for `flush_all`.
    fn has_unsynced(&self) -> bool {
        self.unflushed.load(std::sync::atomic::Ordering::Acquire)
            || !self
                .dirty
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .is_empty()
    }

    /// `flush_all` when something waits to be written, else only the
    /// periodic look at the free space (one `statfs`, done in place: an idle
    /// server then wakes no blocking-pool thread five times a second).
    pub async fn sync_or_check_space(&self) -> Result<()> {
        if !self.has_unsynced() && self.space.check_in_place().is_some() {
            return Ok(());
        }
        self.flush_all().await
    }

    /// Recordings and database both durable (the server's periodic flush,
    /// and its last one).
    pub async fn flush_all(&self) -> Result<()> {
        let store = self.clone();
        tokio::task::spawn_blocking(move || {
            let recordings = store.sync_recordings();
            if store
                .unflushed
                .swap(false, std::sync::atomic::Ordering::AcqRel)
            {
                store.flush_blocking()?;
            } else {
                // No flush, but the look at the free space stays periodic.
                store.space.check();
            }
            recordings
        })
        .await
        .map_err(|e| StoreError::Flush(e.to_string()))?
    }

    /// Stores a new session's metadata and its first event, durably.
    pub async fn create_session(&self, meta: &SessionMeta, first: &Event) -> Result<()> {
        let bytes = to_json(meta)?;
        if self
            .sessions
            .compare_and_swap(meta.id.as_bytes(), None as Option<&[u8]>, Some(bytes))?
            .is_err()
        {
            return Err(StoreError::Corrupt {
                what: format!("session {}", meta.id),
                message: "a session with this id already exists".into(),
            });
        }
        self.events_tree(&meta.id)?
            .insert(first.seq.to_be_bytes(), to_json(first)?)?;
        self.flush().await
    }

    pub fn session(&self, id: &str) -> Result<Option<SessionMeta>> {
        match self.sessions.get(id.as_bytes())? {
            Some(bytes) => Ok(Some(from_json(&bytes, &format!("session {id}"))?)),
            None => Ok(None),
        }
    }

    pub fn sessions(&self) -> Result<Vec<SessionMeta>> {
        read_all(&self.sessions, "session")
    }

    /// Appends an event durably. The caller assigns `seq` (it owns the session's order).
    ///
    /// An event that could not be made durable is taken out again, so a
    /// failed append (a full disk) leaves neither a hole nor a sequence
    /// number that the next append would collide with.
    pub async fn append(&self, session: &str, event: &Event) -> Result<()> {
        self.append_unflushed(session, event)?;
        if let Err(e) = self.flush().await {
            if let Ok(tree) = self.events_tree(session) {
                let _ = tree.remove(event.seq.to_be_bytes());
            }
            return Err(e);
        }
        Ok(())
    }

    /// Appends without waiting for the disk (for events whose loss is harmless).
    pub fn append_unflushed(&self, session: &str, event: &Event) -> Result<()> {
        self.mark_unflushed();
        let tree = self.events_tree(session)?;
        let key = event.seq.to_be_bytes();
        // One step, not a lookup and then an insert: the lookup was a
        // sixth of the server's time per agent command.
        let stored = tree.compare_and_swap(key, None as Option<&[u8]>, Some(to_json(event)?))?;
        if stored.is_err() {
            return Err(StoreError::Corrupt {
                what: format!("event {session}/{}", event.seq),
                message: "an event with this sequence number already exists".into(),
            });
        }
        Ok(())
    }

    pub fn events(&self, session: &str) -> Result<Vec<Event>> {
        let tree = self.events_tree(session)?;
        let mut out = Vec::new();
        for item in tree.iter() {
            let (key, bytes) = item?;
            let seq = key_u64(&key);
            out.push(from_json(&bytes, &format!("event {session}/{seq}"))?);
        }
        Ok(out)
    }

    /// Claims an imported run's source `key` for session `id`: None when it
    /// is now ours, else the session that has it. A claim whose session
    /// was never stored (`exists` says no: a crash between claim and
    /// store) is taken over.
    pub fn reserve_import(
        &self,
        key: &str,
        id: &str,
        exists: impl Fn(&str) -> bool,
    ) -> Result<Option<String>> {
        self.mark_unflushed();
        loop {
            let current = self.imports.get(key.as_bytes())?;
            if let Some(earlier) = &current {
                let earlier = String::from_utf8_lossy(earlier).into_owned();
                if exists(&earlier) {
                    return Ok(Some(earlier));
                }
            }
            if self
                .imports
                .compare_and_swap(key.as_bytes(), current, Some(id.as_bytes()))?
                .is_ok()
            {
                return Ok(None);
            }
        }
    }

    /// Gives up a claim made by `reserve_import` (the run was not stored).
    pub fn forget_import(&self, key: &str, id: &str) -> Result<()> {
        self.mark_unflushed();
        let _ = self.imports.compare_and_swap(
            key.as_bytes(),
            Some(id.as_bytes()),
            None as Option<&[u8]>,
        )?;
        Ok(())
    }

    /// Stores an imported run whole, durably: its events first, then its
    /// metadata (which makes it a session), then one flush.
    pub async fn import_session(&self, meta: &SessionMeta, events: &[Event]) -> Result<()> {
        let tree = self.events_tree(&meta.id)?;
        let mut batch = sled::Batch::default();
        for event in events {
            batch.insert(&event.seq.to_be_bytes(), to_json(event)?);
        }
        tree.apply_batch(batch)?;
        if self
            .sessions
            .compare_and_swap(
                meta.id.as_bytes(),
                None as Option<&[u8]>,
                Some(to_json(meta)?),
            )?
            .is_err()
        {
            return Err(StoreError::Corrupt {
                what: format!("session {}", meta.id),
                message: "a session with this id already exists".into(),
            });
        }
        self.flush().await
    }

    /// Stores a campaign (new or changed), durably.
    pub async fn put_campaign(&self, record: &CampaignRecord) -> Result<()> {
        self.campaigns
            .insert(record.plan.name.as_bytes(), to_json(record)?)?;
        self.flush().await
    }

    pub fn campaign(&self, name: &str) -> Result<Option<CampaignRecord>> {
        match self.campaigns.get(name.as_bytes())? {
            Some(bytes) => Ok(Some(from_json(&bytes, &format!("campaign {name}"))?)),
            None => Ok(None),
        }
    }

    pub fn campaigns(&self) -> Result<Vec<CampaignRecord>> {
        read_all(&self.campaigns, "campaign")
    }

    /// Stores the heartbeats of every running session at once: one record
    /// (`RUNNING_BEATS`) and one flush, a few kilobytes every beat for
    /// hundreds of sessions. A session that stopped running drops out of
    /// it; its pause or end event holds a later clock than any beat did.
    pub async fn set_heartbeats(&self, beats: &[(String, Heartbeat)]) -> Result<()> {
        if beats.is_empty() {
            return Ok(());
        }
        self.heartbeats.insert(RUNNING_BEATS, encode_beats(beats))?;
        self.flush().await
    }

    /// A session's last heartbeat: from the running sessions' record, else
    /// the one it was given alone (stores made before that record).
    pub fn heartbeat(&self, session: &str) -> Result<Option<Heartbeat>> {
        if let Some(bytes) = self.heartbeats.get(RUNNING_BEATS)? {
            let beats = decode_beats(&bytes).ok_or_else(|| StoreError::Corrupt {
                what: "the running sessions' heartbeats".into(),
                message: "cut short or out of range".into(),
            })?;
            if let Some((_, beat)) = beats.into_iter().find(|(id, _)| id == session) {
                return Ok(Some(beat));
            }
        }
        match self.heartbeats.get(session.as_bytes())? {
            Some(bytes) => Ok(Some(from_json(&bytes, &format!("heartbeat {session}"))?)),
            None => Ok(None),
        }
    }

    fn recording_path(&self, session: &str, shell: u32) -> Result<PathBuf> {
        Ok(session_recordings(&self.recordings, session)?.join(format!("{shell}.rec")))
    }

    /// The recorder of a shell (a shell that comes back after a restart
    /// continues its recording).
    pub fn recorder(&self, session: &str, shell: u32) -> Result<ShellRecording> {
        let key = (session.to_string(), shell);
        let mut writers = self.writers.lock().unwrap_or_else(|e| e.into_inner());
        let writer = match writers.get(&key).and_then(Weak::upgrade) {
            Some(writer) => writer,
            None => {
                let writer = Arc::new(RecordingWriter::open(
                    &self.recording_path(session, shell)?,
                )?);
                writers.retain(|_, w| w.strong_count() > 0);
                writers.insert(key, Arc::downgrade(&writer));
                writer
            }
        };
        Ok(ShellRecording {
            writer,
            space: self.space.clone(),
            dirty: self.dirty.clone(),
            written: self.written.clone(),
        })
    }

    /// A live shell's output so far goes to its file, so a read sees it.
    fn write_out_live(&self, session: &str, shell: u32) -> Result<()> {
        let live = self
            .writers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&(session.to_string(), shell))
            .and_then(Weak::upgrade);
        match live {
            Some(writer) => writer.write_out(),
            None => Ok(()),
        }
    }

    /// All chunks of one shell's recording, in order.
    pub fn recording(&self, session: &str, shell: u32) -> Result<Vec<Chunk>> {
        let (chunks, _) = self.recording_page(session, shell, 0, usize::MAX)?;
        Ok(chunks.into_iter().map(|(_, c)| c).collect())
    }

    /// Up to `limit` chunks of a shell's recording from chunk `from` on, with
    /// their numbers, and the number to continue from (None at the end).
    pub fn recording_page(
        &self,
        session: &str,
        shell: u32,
        from: u64,
        limit: usize,
    ) -> Result<RecordingPage> {
        self.write_out_live(session, shell)?;
        recording_file::read_page(&self.recording_path(session, shell)?, from, limit)
    }

    /// Shell numbers that have a recording.
    pub fn recorded_shells(&self, session: &str) -> Result<Vec<u32>> {
        let dir = session_recordings(&self.recordings, session)?;
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(StoreError::Flush(format!("reading {}: {e}", dir.display()))),
        };
        let mut shells: Vec<u32> = entries
            .filter_map(|entry| {
                let name = entry.ok()?.file_name();
                name.to_str()?.strip_suffix(".rec")?.parse().ok()
            })
            .collect();
        shells.sort_unstable();
        Ok(shells)
    }
}

/// Copies every recording file (each a valid prefix at least: a block
/// being appended meanwhile is cut off when the copy is next opened).
fn copy_recordings(from: &Path, to: &Path) -> Result<()> {
    let fail = |what: &Path, e: std::io::Error| {
        StoreError::Flush(format!("copying {}: {e}", what.display()))
    };
    let sessions = match std::fs::read_dir(from) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(fail(from, e)),
    };
    for session in sessions {
        let session = session.map_err(|e| fail(from, e))?;
        if !session.path().is_dir() || session.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        let target = to.join(session.file_name());
        std::fs::create_dir_all(&target).map_err(|e| fail(&target, e))?;
        for file in std::fs::read_dir(session.path()).map_err(|e| fail(&session.path(), e))? {
            let file = file.map_err(|e| fail(&session.path(), e))?;
            let dest = target.join(file.file_name());
            std::fs::copy(file.path(), &dest).map_err(|e| fail(&file.path(), e))?;
            std::fs::File::open(&dest)
                .and_then(|f| f.sync_all())
                .map_err(|e| fail(&dest, e))?;
        }
    }
    Ok(())
}

/// The heartbeats tree's key for the running sessions' beats (no session
/// id starts with a NUL).
const RUNNING_BEATS: &[u8] = b"\0running";

/// The first byte of a shared-clock record (an id length, which starts
/// the older record, is never 0).
const BEATS_SHARED_CLOCK: u8 = 0;

/// `[0][wall ms i64 LE]`, then `[id len u8][id][active ms LEB128]` per
/// session: every beat of one record was taken at the same moment, so the
/// wall clock is stored once (11 bytes a session instead of 23; 200
/// running sessions' beats are rewritten every 2 s).
fn encode_beats(beats: &[(String, Heartbeat)]) -> Vec<u8> {
    let mut out = Vec::with_capacity(9 + beats.len() * 12);
    out.push(BEATS_SHARED_CLOCK);
    let at = beats
        .first()
        .map_or(0, |(_, beat)| beat.at.timestamp_millis());
    out.extend_from_slice(&at.to_le_bytes());
    for (id, beat) in beats {
        let id = &id.as_bytes()[..id.len().min(255)];
        out.push(id.len() as u8);
        out.extend_from_slice(id);
        let mut active = beat.active_ms;
        loop {
            let low = (active & 0x7f) as u8;
            active >>= 7;
            if active == 0 {
                out.push(low);
                break;
            }
            out.push(low | 0x80);
        }
    }
    out
}

fn decode_beats(bytes: &[u8]) -> Option<Vec<(String, Heartbeat)>> {
    match bytes.split_first() {
        Some((&BEATS_SHARED_CLOCK, rest)) => decode_shared_clock_beats(rest),
        _ => decode_beats_each_with_clock(bytes),
    }
}

fn decode_shared_clock_beats(bytes: &[u8]) -> Option<Vec<(String, Heartbeat)>> {
    let at = DateTime::from_timestamp_millis(i64::from_le_bytes(bytes.get(..8)?.try_into().ok()?))?;
    let mut bytes = &bytes[8..];
    let mut out = Vec::new();
    while let Some((&len, rest)) = bytes.split_first() {
        let id = rest.get(..len as usize)?;
        bytes = &rest[len as usize..];
        let mut active_ms = 0u64;
        for shift in (0..64).step_by(7) {
            let (&byte, rest) = bytes.split_first()?;
            bytes = rest;
            active_ms |= u64::from(byte & 0x7f).checked_shl(shift)?;
            if byte & 0x80 == 0 {
                break;
            }
            if shift == 63 {
                return None;
            }
        }
        out.push((
            String::from_utf8_lossy(id).into_owned(),
            Heartbeat { at, active_ms },
        ));
    }
    Some(out)
}

/// The older record: `[id len u8][id][wall ms i64 LE][active ms u64 LE]`
/// per session.
fn decode_beats_each_with_clock(mut bytes: &[u8]) -> Option<Vec<(String, Heartbeat)>> {
    let mut out = Vec::new();
    while let Some((&len, rest)) = bytes.split_first() {
        let id = rest.get(..len as usize)?;
        let at = rest.get(len as usize..len as usize + 8)?;
        let active = rest.get(len as usize + 8..len as usize + 16)?;
        let at = DateTime::from_timestamp_millis(i64::from_le_bytes(at.try_into().ok()?))?;
        out.push((
            String::from_utf8_lossy(id).into_owned(),
            Heartbeat {
                at,
                active_ms: u64::from_le_bytes(active.try_into().ok()?),
            },
        ));
        bytes = &rest[len as usize + 16..];
    }
    Some(out)
}

fn key_u64(bytes: &[u8]) -> u64 {
    let mut buf = [0u8; 8];
    let n = bytes.len().min(8);
    buf[8 - n..].copy_from_slice(&bytes[bytes.len() - n..]);
    u64::from_be_bytes(buf)
}

fn to_json<T: Serialize>(value: &T) -> Result<Vec<u8>> {
    serde_json::to_vec(value).map_err(|e| StoreError::Corrupt {
        what: "value to store".into(),
        message: e.to_string(),
    })
}

fn from_json<T: for<'de> Deserialize<'de>>(bytes: &[u8], what: &str) -> Result<T> {
    serde_json::from_slice(bytes).map_err(|e| StoreError::Corrupt {
        what: what.into(),
        message: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::EventKind;

    /// sled opened directly, as an older build made (or reads) the store.
    fn raw_sled(path: &Path, compressed: bool) -> sled::Db {
        sled::Config::new()
            .path(path)
            .use_compression(compressed)
            .compression_factor(3)
            // No background flusher: it would hold the lock for a while after the drop.
            .flush_every_ms(None)
            .open()
            .unwrap()
    }

    /// Opens the store again after this process dropped its handle. The
    /// last flush's runner and sled's own I/O threads let go of the lock a
    /// moment after the drop (sled #1289), so a quick reopen may find it
    /// held: wait for it (a store held for good still fails, after 5 s).
    fn reopen(path: &Path) -> Store {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        loop {
            match Store::open(path) {
                Err(StoreError::Locked { .. }) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                other => return other.unwrap(),
            }
        }
    }

    fn event(seq: u64) -> Event {
        Event {
            seq,
            at: DateTime::from_timestamp(1_700_000_000, 0).unwrap(),
            active_ms: seq * 10,
            origin: None,
            kind: EventKind::Note {
                text: format!("n{seq}"),
                by: "t".into(),
            },
        }
    }

    #[test]
    fn a_store_records_its_schema_and_refuses_a_newer_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        drop(Store::open(&path).unwrap());
        {
            let db = raw_sled(&path, false);
            assert_eq!(
                db.get(SCHEMA_KEY).unwrap().unwrap().as_ref(),
                SCHEMA_VERSION.to_be_bytes()
            );
            db.insert(SCHEMA_KEY, &(SCHEMA_VERSION + 1).to_be_bytes())
                .unwrap();
            db.flush().unwrap();
        }
        let err = Store::open(&path).unwrap_err().to_string();
        assert!(err.contains("newer than this rebench knows"), "{err}");
    }

    #[tokio::test]
    async fn events_come_back_in_order_and_duplicates_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("db")).unwrap();
        for seq in [0, 1, 2, 10, 300] {
            store.append("s1", &event(seq)).await.unwrap();
        }
        store.append("s2", &event(0)).await.unwrap();
        let seqs: Vec<u64> = store.events("s1").unwrap().iter().map(|e| e.seq).collect();
        assert_eq!(
            seqs,
            vec![0, 1, 2, 10, 300],
            "big-endian keys keep numeric order"
        );
        assert_eq!(store.events("s2").unwrap().len(), 1);
        let err = store.append("s1", &event(2)).await.unwrap_err().to_string();
        assert!(err.contains("already exists"), "{err}");
    }

    #[tokio::test]
    async fn a_store_made_before_compression_opens_and_keeps_its_events() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        // As session 1's builds made it: no compression.
        drop(raw_sled(&path, false));
        {
            let store = Store::open(&path).unwrap();
            store.append("s1", &event(0)).await.unwrap();
            store.append("s1", &event(1)).await.unwrap();
        }
        let store = reopen(&path);
        assert_eq!(store.events("s1").unwrap().len(), 2);
    }

    #[tokio::test]
    async fn a_store_made_compressed_opens_compressed_and_keeps_its_events() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        // As builds before 2026-12-07 made it: zstd compression on.
        drop(raw_sled(&path, true));
        {
            let store = Store::open(&path).unwrap();
            assert!(store.compressed);
            store.append("s1", &event(0)).await.unwrap();
            store.append("s1", &event(1)).await.unwrap();
        }
        let store = reopen(&path);
        assert_eq!(store.events("s1").unwrap().len(), 2);
        // A backup keeps the setting, so it opens too.
        let copy = dir.path().join("copy");
        store.backup_to(&copy).unwrap();
        drop(store);
        let copied = Store::open(&copy).unwrap();
        assert!(copied.compressed);
        assert_eq!(copied.events("s1").unwrap().len(), 2);

        // And a new store is made without.
        let fresh = Store::open(&dir.path().join("new")).unwrap();
        assert!(!fresh.compressed);
    }

    #[tokio::test]
    async fn recordings_and_heartbeats_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("db")).unwrap();
        let at = DateTime::from_timestamp_millis(1_700_000_000_000).unwrap();
        let chunk = |seq: u64| Chunk {
            kind: ChunkKind::Output,
            at,
            active_ms: seq,
            data: vec![b'a' + seq as u8],
        };
        let shell0 = store.recorder("s", 0).unwrap();
        let shell2 = store.recorder("s", 2).unwrap();
        assert_eq!(shell0.record(&chunk(0)).unwrap(), 0);
        assert_eq!(shell0.record(&chunk(1)).unwrap(), 1);
        assert_eq!(shell2.record(&chunk(0)).unwrap(), 0);
        // Read while recording: what was recorded is there before any sync.
        assert_eq!(store.recorded_shells("s").unwrap(), vec![0, 2]);
        assert_eq!(store.recording("s", 0).unwrap().len(), 2);
        let (page, next) = store.recording_page("s", 0, 0, 1).unwrap();
        assert_eq!((page.len(), page[0].0, next), (1, 0, Some(1)));
        let (page, next) = store.recording_page("s", 0, 1, 10).unwrap();
        assert_eq!(
            (page.len(), page[0].1.data.clone(), next),
            (1, b"b".to_vec(), None)
        );
        // A shell recorded again (a restart) continues its numbering.
        drop(shell0);
        assert_eq!(store.recorder("s", 0).unwrap().next_seq(), 2);
        assert_eq!(store.recorder("s", 1).unwrap().next_seq(), 0);
        assert!(store.recording_page("../etc", 0, 0, 1).is_err());
        assert!(store.heartbeat("s").unwrap().is_none());
        store
            .set_heartbeats(&[(
                "s".to_string(),
                Heartbeat {
                    at,
                    active_ms: 4200,
                },
            )])
            .await
            .unwrap();
        assert_eq!(store.heartbeat("s").unwrap().unwrap().active_ms, 4200);
        // A store from before the shared record: a session's own beat.
        store
            .heartbeats
            .insert("old", to_json(&Heartbeat { at, active_ms: 7 }).unwrap())
            .unwrap();
        assert_eq!(store.heartbeat("old").unwrap().unwrap().active_ms, 7);
        // The next beat replaces the set of running sessions.
        let beats: Vec<(String, Heartbeat)> = (0..300)
            .map(|i| (format!("x{i}"), Heartbeat { at, active_ms: i }))
            .collect();
        store.set_heartbeats(&beats).await.unwrap();
        assert_eq!(
            store.heartbeat("x299").unwrap().unwrap(),
            Heartbeat { at, active_ms: 299 }
        );
        assert!(store.heartbeat("s").unwrap().is_none(), "no longer running");
        // Clocks of every size survive the compact encoding.
        for active_ms in [0, 127, 128, 16_383, 16_384, 115_200_000, u64::MAX] {
            store
                .set_heartbeats(&[("big".to_string(), Heartbeat { at, active_ms })])
                .await
                .unwrap();
            assert_eq!(
                store.heartbeat("big").unwrap().unwrap().active_ms,
                active_ms
            );
        }
        // A record in the older encoding (a wall clock per session) still reads.
        let mut older = vec![2u8];
        older.extend_from_slice(b"o1");
        older.extend_from_slice(&at.timestamp_millis().to_le_bytes());
        older.extend_from_slice(&99u64.to_le_bytes());
        store.heartbeats.insert(RUNNING_BEATS, older).unwrap();
        assert_eq!(
            store.heartbeat("o1").unwrap().unwrap(),
            Heartbeat { at, active_ms: 99 }
        );
        // Cut short, in either encoding: a clear error.
        store
            .heartbeats
            .insert(RUNNING_BEATS, &[5u8, b'a'][..])
            .unwrap();
        let err = store.heartbeat("x1").unwrap_err().to_string();
        assert!(err.contains("heartbeats"), "{err}");
        let mut cut = encode_beats(&beats);
        cut.truncate(cut.len() - 1);
        cut.push(0x80);
        store.heartbeats.insert(RUNNING_BEATS, cut).unwrap();
        let err = store.heartbeat("x1").unwrap_err().to_string();
        assert!(err.contains("heartbeats"), "{err}");
    }

    #[test]
    fn the_periodic_sync_writes_each_shell_with_new_output_and_only_those() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("db")).unwrap();
        let at = DateTime::from_timestamp_millis(1_700_000_000_000).unwrap();
        let chunk = |text: &str| Chunk {
            kind: ChunkKind::Output,
            at,
            active_ms: 1,
            data: text.as_bytes().to_vec(),
        };
        let on_disk = |shell: u32| {
            recording_file::read_page(&store.recording_path("s", shell).unwrap(), 0, 100)
                .unwrap()
                .0
                .len()
        };
        let a = store.recorder("s", 0).unwrap();
        let b = store.recorder("s", 1).unwrap();
        a.record(&chunk("one")).unwrap();
        assert_eq!(store.dirty.lock().unwrap().len(), 1, "queued once");
        a.record(&chunk("two")).unwrap();
        assert_eq!(store.dirty.lock().unwrap().len(), 1, "not twice");
        assert_eq!(on_disk(0), 0, "not yet in the file");
        store.sync_recordings().unwrap();
        assert_eq!((on_disk(0), on_disk(1)), (2, 0));
        assert!(store.dirty.lock().unwrap().is_empty());
        // Output after a sync queues the shell again.
        a.record(&chunk("three")).unwrap();
        b.record(&chunk("uno")).unwrap();
        store.sync_recordings().unwrap();
        assert_eq!((on_disk(0), on_disk(1)), (3, 1));
    }

    #[tokio::test]
    async fn the_periodic_tick_writes_whatever_waits_and_only_looks_when_nothing_does() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("db")).unwrap();
        assert!(!store.has_unsynced(), "a fresh store has nothing to write");
        store.append_unflushed("s", &event(0)).unwrap();
        assert!(store.has_unsynced(), "an unflushed event waits");
        store.sync_or_check_space().await.unwrap();
        assert!(!store.has_unsynced(), "the tick flushed it");
        let recorder = store.recorder("s", 0).unwrap();
        recorder
            .record(&Chunk {
                kind: ChunkKind::Output,
                at: DateTime::from_timestamp_millis(1_700_000_000_000).unwrap(),
                active_ms: 1,
                data: b"out".to_vec(),
            })
            .unwrap();
        assert!(store.has_unsynced(), "recorded output waits");
        store.sync_or_check_space().await.unwrap();
        assert!(!store.has_unsynced());
        let path = store.recording_path("s", 0).unwrap();
        let chunks = recording_file::read_page(&path, 0, 10).unwrap().0;
        assert_eq!(chunks.len(), 1, "the tick wrote the output to its file");
    }

    #[tokio::test]
    async fn the_sync_task_is_woken_by_a_write_and_only_by_one() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("db")).unwrap();
        let quiet = std::time::Duration::from_millis(50);
        let woken = |store: Store| async move {
            tokio::time::timeout(quiet, store.written()).await.is_ok()
        };
        assert!(!woken(store.clone()).await, "nothing was written");
        store.append_unflushed("s", &event(0)).unwrap();
        assert!(woken(store.clone()).await, "an event waits");
        assert!(!woken(store.clone()).await, "told once");
        let recorder = store.recorder("s", 0).unwrap();
        let chunk = |n: u8| Chunk {
            kind: ChunkKind::Output,
            at: DateTime::from_timestamp_millis(1_700_000_000_000).unwrap(),
            active_ms: 1,
            data: vec![n],
        };
        recorder.record(&chunk(1)).unwrap();
        assert!(woken(store.clone()).await, "output waits");
        // More output before the sync: already waiting, no new wake.
        recorder.record(&chunk(2)).unwrap();
        assert!(!woken(store.clone()).await);
        store.sync_or_check_space().await.unwrap();
        recorder.record(&chunk(3)).unwrap();
        assert!(
            woken(store.clone()).await,
            "output after the sync waits again"
        );
    }

    #[test]
    fn recordings_of_an_older_store_move_out_of_the_database() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let at = DateTime::from_timestamp_millis(1_700_000_000_000).unwrap();
        {
            // As schema 2 kept them: a rec/<id> tree keyed (shell, seq).
            let db = raw_sled(&path, true);
            db.insert(SCHEMA_KEY, &2u32.to_be_bytes()).unwrap();
            let tree = db.open_tree("rec/old1").unwrap();
            for (shell, seq, text) in [(0u32, 0u64, "one"), (0, 1, "two"), (3, 0, "three")] {
                let mut key = shell.to_be_bytes().to_vec();
                key.extend_from_slice(&seq.to_be_bytes());
                let chunk = Chunk {
                    kind: ChunkKind::Output,
                    at,
                    active_ms: seq,
                    data: text.as_bytes().to_vec(),
                };
                tree.insert(key, chunk.encode()).unwrap();
            }
            db.flush().unwrap();
        }
        let store = Store::open(&path).unwrap();
        assert_eq!(store.recorded_shells("old1").unwrap(), vec![0, 3]);
        let texts: Vec<Vec<u8>> = store
            .recording("old1", 0)
            .unwrap()
            .into_iter()
            .map(|c| c.data)
            .collect();
        assert_eq!(texts, vec![b"one".to_vec(), b"two".to_vec()]);
        assert!(
            !store.db.tree_names().iter().any(|n| n.starts_with(b"rec/")),
            "the old tree is gone"
        );
        drop(store);
        let store = reopen(&path);
        assert_eq!(store.recording("old1", 3).unwrap()[0].data, b"three");
    }

    #[test]
    fn the_cache_setting_is_a_size_in_mib() {
        assert_eq!(cache_bytes(None), 32 << 20);
        assert_eq!(cache_bytes(Some("8")), 8 << 20);
        assert_eq!(cache_bytes(Some("0")), 32 << 20);
        assert_eq!(cache_bytes(Some("a lot")), 32 << 20);
    }

    #[test]
    fn a_second_open_of_the_same_database_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let _first = Store::open(&path).unwrap();
        let err = Store::open(&path).unwrap_err();
        assert!(matches!(err, StoreError::Locked { .. }), "{err:?}");
        assert!(err.to_string().contains("another rebench server"), "{err}");
    }
}
