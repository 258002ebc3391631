//! Recordings out and in: `rebench export` writes a session as asciicast
//! v2/v3 (one shell, markers for scores, notes, pauses...) or as rebench
//! jsonl (everything); `rebench replay` plays a session or a file (asciicast
//! v2/v3, rebench jsonl, util-linux `script`) in the terminal player
//! (`tui::replay`), which reads it through [`load`].
//!
//! Every source becomes a [`timeline::Timeline`]; the exporters and the
//! player only know timelines. Nothing here draws. See docs/recording.md.

pub mod asciicast_v2;
pub mod asciicast_v3;
pub mod cast;
pub mod jsonl;
pub mod keyframes;
mod lines;
pub mod markers;
pub mod script;
pub mod session_data;
pub mod session_timeline;
pub mod timeline;
pub mod timemap;
pub mod transcript;
pub mod utf8;

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

use crate::client::Client;
use crate::paths::DataPaths;
use cast::CastHeader;
use session_data::SessionRecording;
use timeline::{Timeline, Track};

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportFormat {
    AsciicastV2,
    AsciicastV3,
    Jsonl,
    // An Inspect eval log (`.eval`, a zip): see docs/inspect.md. (No doc
    // comment: a described value would switch `--help` to clap's long form.)
    Inspect,
}

#[derive(clap::Args, Debug, Clone)]
pub struct ExportArgs {
    /// The session's id (`rebench sessions` lists them).
    pub session: String,
    /// asciicast-v2 or asciicast-v3 (one shell's terminal), jsonl (the
    /// complete log) or inspect (an Inspect eval log, `.eval`: docs/inspect.md).
    #[arg(long)]
    pub format: ExportFormat,
    /// The shell to export (asciicast holds one terminal; default: the first). For jsonl: only this shell's chunks.
    #[arg(long)]
    pub shell: Option<u32>,
    /// Write here instead of to stdout.
    #[arg(short = 'o', long)]
    pub output: Option<PathBuf>,
}

/// What an export wrote, for the message on stderr.
#[derive(Debug, Clone, PartialEq)]
pub struct ExportSummary {
    pub lines: usize,
    pub shell: Option<u32>,
    pub notes: Vec<String>,
}

pub async fn export(args: ExportArgs, paths: &DataPaths) -> anyhow::Result<i32> {
    let mut client = Client::connect_admin(paths, "rebench export").await?;
    // Fetch first, so a failed export leaves no empty file behind.
    let rec = session_data::fetch(&mut client, &args.session, args.shell).await?;
    drop(client);
    let summary = match &args.output {
        Some(path) => {
            let file = std::fs::File::create(path)
                .with_context(|| format!("cannot create {}", path.display()))?;
            let mut out = std::io::BufWriter::new(file);
            let summary = write_export(&rec, args.format, args.shell, &mut out)
                .with_context(|| format!("cannot write {}", path.display()))?;
            out.flush()
                .with_context(|| format!("cannot write {}", path.display()))?;
            summary
        }
        None => {
            let stdout = std::io::stdout();
            let mut out = std::io::BufWriter::new(stdout.lock());
            write_export(&rec, args.format, args.shell, &mut out)?
        }
    };
    for note in &summary.notes {
        eprintln!("rebench export: {note}");
    }
    if let Some(path) = &args.output {
        let what = match args.format {
            ExportFormat::Inspect => {
                format!("an Inspect eval log (one sample, {} events)", summary.lines)
            }
            _ => format!("{} lines", summary.lines),
        };
        eprintln!("rebench export: wrote {what} to {}", path.display());
    }
    Ok(0)
}

/// The export itself, over a connected admin client (tests call this).
pub async fn export_to(
    client: &mut Client,
    args: &ExportArgs,
    out: &mut dyn Write,
) -> anyhow::Result<ExportSummary> {
    let rec = session_data::fetch(client, &args.session, args.shell).await?;
    write_export(&rec, args.format, args.shell, out)
}

/// Writes an already-fetched recording in `format`.
pub fn write_export(
    rec: &SessionRecording,
    format: ExportFormat,
    shell: Option<u32>,
    out: &mut dyn Write,
) -> anyhow::Result<ExportSummary> {
    let mut counter = LineCounter {
        inner: out,
        lines: 0,
    };
    type CastWriter =
        fn(&CastHeader, &Track, &[timeline::Marker], &mut dyn Write) -> anyhow::Result<()>;
    let write_cast: CastWriter = match format {
        ExportFormat::Jsonl => {
            jsonl::write(rec, &mut counter)?;
            return Ok(ExportSummary {
                lines: counter.lines,
                shell,
                notes: Vec::new(),
            });
        }
        ExportFormat::Inspect => {
            let written = crate::inspect::export::write(rec, out)?;
            // `lines` counts the sample's events here.
            return Ok(ExportSummary {
                lines: written.events,
                shell: None,
                notes: Vec::new(),
            });
        }
        ExportFormat::AsciicastV2 => asciicast_v2::write,
        ExportFormat::AsciicastV3 => asciicast_v3::write,
    };
    let timeline = session_timeline::build(rec);
    let mut notes = Vec::new();
    let track = pick_track(&timeline, shell, &mut notes)?;
    let header = CastHeader {
        cols: track.cols,
        rows: track.rows,
        timestamp: timeline
            .origin
            .map(|o| o.timestamp() + (track.start() / 1000) as i64),
        title: Some(timeline.title.clone()),
    };
    write_cast(&header, track, &timeline.markers, &mut counter)?;
    Ok(ExportSummary {
        lines: counter.lines,
        shell: track.shell,
        notes,
    })
}

fn pick_track<'a>(
    timeline: &'a Timeline,
    shell: Option<u32>,
    notes: &mut Vec<String>,
) -> anyhow::Result<&'a Track> {
    let Some(first) = timeline.tracks.first() else {
        bail!(
            "session {} has no terminal recording and no exec calls to export",
            timeline.source
        );
    };
    if let Some(shell) = shell {
        return timeline
            .tracks
            .iter()
            .find(|t| t.shell == Some(shell))
            .with_context(|| format!("session {} has no shell {shell}", timeline.source));
    }
    if timeline.tracks.len() > 1 {
        let shells: Vec<String> = timeline.tracks.iter().map(|t| t.label.clone()).collect();
        notes.push(format!(
            "the session has {}; exported {} (choose with --shell)",
            shells.join(", "),
            first.label
        ));
    }
    Ok(first)
}

/// Counts lines written, for the summary.
struct LineCounter<'a> {
    inner: &'a mut dyn Write,
    lines: usize,
}

impl Write for LineCounter<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.lines += buf[..n].iter().filter(|&&b| b == b'\n').count();
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// The timeline a replay source stands for: a recording file (with the
/// timing file of a `script` typescript) or a session id read from the
/// server. A source with nothing to play is an error.
pub async fn load(
    source: &str,
    timing: Option<&Path>,
    paths: &DataPaths,
) -> anyhow::Result<Timeline> {
    let timeline = match source_file(source)? {
        Some(path) => read_file(&path, timing)?,
        None => {
            if timing.is_some() {
                bail!("--timing goes with a typescript file, and {source} is not a file");
            }
            let mut client = Client::connect_admin(paths, "rebench replay").await?;
            let rec = session_data::fetch(&mut client, source, None).await?;
            drop(client);
            session_timeline::build(&rec)
        }
    };
    if timeline.tracks.is_empty() {
        bail!(
            "{} has no terminal recording (no shells, no exec calls)",
            timeline.source
        );
    }
    Ok(timeline)
}

/// The file a replay source names, or None for a session id.
fn source_file(source: &str) -> anyhow::Result<Option<PathBuf>> {
    let path = Path::new(source);
    if path.is_file() {
        return Ok(Some(path.to_path_buf()));
    }
    let looks_like_path = source.contains('/')
        || [".cast", ".jsonl", ".json", ".log", ".txt"]
            .iter()
            .any(|ext| source.ends_with(ext));
    if looks_like_path || path.exists() {
        bail!("{source}: no such file");
    }
    Ok(None)
}

/// Reads any supported recording file, telling the formats apart by content.
pub fn read_file(path: &Path, timing: Option<&Path>) -> anyhow::Result<Timeline> {
    let name = path.display().to_string();
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {name}"))?;
    if let Some(timing) = timing {
        let timing_name = timing.display().to_string();
        let timing_bytes =
            std::fs::read(timing).with_context(|| format!("cannot read {timing_name}"))?;
        return script::read(&bytes, &name, Some((&timing_bytes, &timing_name)));
    }
    read_bytes(&bytes, &name)
}

/// Like `read_file`, for bytes already in memory (`name` is used in errors).
pub fn read_bytes(bytes: &[u8], name: &str) -> anyhow::Result<Timeline> {
    if script::sniff(bytes) {
        return script::read(bytes, name, None);
    }
    let first_line = bytes
        .split(|&b| b == b'\n')
        .find(|l| !l.iter().all(u8::is_ascii_whitespace) && !l.starts_with(b"#"))
        .unwrap_or_default();
    let first = String::from_utf8_lossy(first_line);
    if jsonl::sniff(&first) {
        let rec = jsonl::read(bytes, name)?;
        return Ok(session_timeline::build(&rec));
    }
    let header: serde_json::Value = serde_json::from_str(&first).unwrap_or_default();
    if asciicast_v2::sniff(&header) {
        return asciicast_v2::read(bytes, name);
    }
    if asciicast_v3::sniff(&header) {
        return asciicast_v3::read(bytes, name);
    }
    if header["version"].is_number() {
        bail!(
            "{name}: asciicast version {} is not supported (this rebench reads v2 and v3)",
            header["version"]
        );
    }
    bail!(
        "{name}: not an asciicast v2/v3 file, a rebench jsonl export or a `script` typescript \
         (for a typescript recorded with a timing file, pass --timing FILE)"
    )
}
