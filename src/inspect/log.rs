//! Reading Inspect eval logs as `inspect_ai` writes them: `.eval` (a zip of
//! `header.json` and one `samples/ID_epoch_N.json` per sample, zstd or
//! deflate) and `.json` (the whole log, samples inside). Only the fields
//! rebench uses are typed; a sample that cannot be read is an error of its
//! own, naming the member and the field, and the others still read.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

use anyhow::{Context, bail};
use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::Value;

/// The log versions this reader knows (`EvalLog.version`).
pub const SUPPORTED_VERSIONS: [u32; 2] = [1, 2];

/// Largest member read from a `.eval` (a sample's JSON, decompressed).
const MAX_MEMBER_BYTES: u64 = 1 << 30;

/// A log as read: its header, and each sample or why it could not be read.
pub struct InspectLog {
    pub header: Header,
    /// In the log's order (by sample id, then epoch).
    pub samples: Vec<Result<Sample, SampleError>>,
    /// sha256 of the file: the log's identity when the header has no `eval_id`.
    pub sha256: String,
}

/// A sample that could not be used: where, and why.
#[derive(Debug, Clone)]
pub struct SampleError {
    /// `samples/ID_epoch_N.json` or `samples[I]`.
    pub member: String,
    /// The sample's id and epoch where they were read.
    pub sample: Option<(String, u32)>,
    pub message: String,
}

impl std::fmt::Display for SampleError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.sample {
            Some((id, epoch)) => write!(
                f,
                "sample {id} epoch {epoch} ({}): {}",
                self.member, self.message
            ),
            None => write!(f, "{}: {}", self.member, self.message),
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
pub struct Header {
    #[serde(default = "version_one")]
    pub version: u32,
    #[serde(default)]
    pub status: String,
    pub eval: EvalSpec,
    #[serde(default)]
    pub plan: Plan,
}

fn version_one() -> u32 {
    1
}

#[derive(Debug, Clone, Deserialize)]
pub struct EvalSpec {
    #[serde(default)]
    pub eval_id: String,
    pub task: String,
    pub model: String,
    #[serde(default)]
    pub solver: Option<String>,
    pub created: DateTime<Utc>,
    #[serde(default)]
    pub config: Limits,
    #[serde(default)]
    pub metadata: Option<Value>,
}

impl EvalSpec {
    /// The kind of session rebench exported this log from (`human`, `agent`), if it did.
    pub fn rebench_kind(&self) -> Option<&str> {
        self.metadata
            .as_ref()?
            .get("rebench")?
            .get("kind")?
            .as_str()
    }
}

/// The limits a sample ran under (the eval's `config`, or the sample's own fields).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Limits {
    #[serde(default)]
    pub time_limit: Option<f64>,
    #[serde(default)]
    pub working_limit: Option<f64>,
    #[serde(default)]
    pub token_limit: Option<f64>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct Plan {
    #[serde(default)]
    pub steps: Vec<PlanStep>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct PlanStep {
    pub solver: String,
}

impl Header {
    /// The scaffold: the eval's solver, else its plan's steps (`a+b`).
    pub fn scaffold(&self) -> String {
        if let Some(solver) = self.eval.solver.as_deref().filter(|s| !s.is_empty()) {
            return solver.to_string();
        }
        let steps: Vec<&str> = self.plan.steps.iter().map(|s| s.solver.as_str()).collect();
        if steps.is_empty() {
            "inspect".into()
        } else {
            steps.join("+")
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
pub struct Sample {
    pub id: SampleId,
    pub epoch: u32,
    pub input: Value,
    #[serde(default)]
    pub scores: Option<BTreeMap<String, Score>>,
    #[serde(default)]
    pub events: Vec<Value>,
    #[serde(default)]
    pub model_usage: BTreeMap<String, Usage>,
    #[serde(default)]
    pub started_at: Option<DateTime<Utc>>,
    #[serde(default)]
    pub completed_at: Option<DateTime<Utc>>,
    #[serde(default)]
    pub total_time: Option<f64>,
    #[serde(default)]
    pub working_time: Option<f64>,
    #[serde(default)]
    pub error: Option<EvalError>,
    #[serde(default)]
    pub limit: Option<SampleLimit>,
    #[serde(default, flatten)]
    pub limits: Limits,
    #[serde(default)]
    pub events_data: Option<EventsData>,
}

/// A sample id: Inspect allows numbers and strings.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum SampleId {
    Number(serde_json::Number),
    Text(String),
}

impl std::fmt::Display for SampleId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SampleId::Number(n) => write!(f, "{n}"),
            SampleId::Text(s) => f.write_str(s),
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
pub struct EvalError {
    pub message: String,
}

#[derive(Debug, Clone, Deserialize)]
pub struct SampleLimit {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub limit: Option<f64>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct EventsData {
    #[serde(default)]
    pub messages: Vec<Value>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Score {
    pub value: Value,
    #[serde(default)]
    pub answer: Option<String>,
    #[serde(default)]
    pub explanation: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct Usage {
    #[serde(default)]
    pub input_tokens: u64,
    #[serde(default)]
    pub output_tokens: u64,
    #[serde(default)]
    pub total_cost: Option<f64>,
}

/// Reads a log, telling the two formats apart by content (a zip starts with `PK`).
pub fn read(path: &Path) -> anyhow::Result<InspectLog> {
    let bytes = std::fs::read(path).context("cannot read the file")?;
    let sha256 = format!("{:x}", <sha2::Sha256 as sha2::Digest>::digest(&bytes));
    let (header, samples) = if bytes.starts_with(b"PK") {
        read_zip(&bytes)?
    } else if bytes.trim_ascii_start().starts_with(b"{") {
        read_json(&bytes)?
    } else {
        bail!("not an Inspect eval log (neither a .eval zip nor a JSON log)");
    };
    if !SUPPORTED_VERSIONS.contains(&header.version) {
        bail!(
            "field version: log version {} is not supported (this rebench reads versions {})",
            header.version,
            SUPPORTED_VERSIONS.map(|v| v.to_string()).join(" and ")
        );
    }
    Ok(InspectLog {
        header,
        samples,
        sha256,
    })
}

type Parts = (Header, Vec<Result<Sample, SampleError>>);

fn read_json(bytes: &[u8]) -> anyhow::Result<Parts> {
    let mut log: Value = serde_json::from_slice(bytes).context("not valid JSON")?;
    let samples = match log.get_mut("samples").map(Value::take) {
        Some(Value::Array(samples)) => samples,
        Some(Value::Null) | None => Vec::new(),
        Some(_) => bail!("field samples: expected a list"),
    };
    let header = typed::<Header>(log, "the log")?;
    let samples = samples
        .into_iter()
        .enumerate()
        .map(|(i, value)| sample(value, format!("samples[{i}]")))
        .collect();
    Ok((header, samples))
}

fn read_zip(bytes: &[u8]) -> anyhow::Result<Parts> {
    let mut zip = zip::ZipArchive::new(std::io::Cursor::new(bytes))
        .context("not a readable .eval file (a damaged or truncated zip)")?;
    let header = ["header.json", "_journal/start.json"]
        .into_iter()
        .find(|name| zip.index_for_name(name).is_some())
        .context("no header.json (nor _journal/start.json): not an Inspect .eval log")?;
    let header_value = member_json(&mut zip, header)?;
    let header: Header = typed(header_value, header)?;
    let mut names: Vec<String> = zip
        .file_names()
        .filter_map(Result::ok)
        .filter(|n| n.starts_with("samples/") && n.ends_with(".json"))
        .map(|n| n.to_string())
        .collect();
    names.sort();
    names.dedup();
    let samples = names
        .into_iter()
        .map(|name| match member_json(&mut zip, &name) {
            Ok(value) => sample(value, name),
            Err(e) => Err(SampleError {
                member: name,
                sample: None,
                message: format!("{e:#}"),
            }),
        })
        .collect();
    Ok((header, samples))
}

/// A member's JSON, decompressed by its method (stored, deflate, or zstd).
fn member_json(
    zip: &mut zip::ZipArchive<std::io::Cursor<&[u8]>>,
    name: &str,
) -> anyhow::Result<Value> {
    let index = zip
        .index_for_name(name)
        .with_context(|| format!("{name}: not in the zip"))?;
    let method = zip.by_index_raw(index)?.compression();
    let mut data = Vec::new();
    if method == zip::CompressionMethod::ZSTD {
        // zstd, Inspect's default: decoded here (the zip crate's zstd
        // would build a second copy of libzstd).
        let raw = zip.by_index_raw(index)?;
        zstd::stream::read::Decoder::new(raw)
            .and_then(|d| d.take(MAX_MEMBER_BYTES).read_to_end(&mut data))
            .with_context(|| format!("{name}: damaged zstd data"))?;
    } else {
        zip.by_index(index)
            .with_context(|| format!("{name}: cannot be read"))?
            .take(MAX_MEMBER_BYTES)
            .read_to_end(&mut data)
            .with_context(|| format!("{name}: damaged data (a truncated log?)"))?;
    }
    serde_json::from_slice(&data).with_context(|| format!("{name}: not valid JSON"))
}

/// A sample, with its `attachment://` references resolved.
fn sample(mut value: Value, member: String) -> Result<Sample, SampleError> {
    let id_epoch = match (value.get("id"), value.get("epoch").and_then(Value::as_u64)) {
        (Some(id), Some(epoch)) => Some((
            id.as_str().map_or_else(|| id.to_string(), str::to_string),
            epoch as u32,
        )),
        _ => None,
    };
    let attachments = match value.get_mut("attachments").map(Value::take) {
        Some(Value::Object(map)) => map,
        _ => Default::default(),
    };
    if !attachments.is_empty() {
        resolve_attachments(&mut value, &attachments);
    }
    typed::<Sample>(value, "the sample").map_err(|e| SampleError {
        member,
        sample: id_epoch,
        message: format!("{e:#}"),
    })
}

/// Big contents are stored once in `attachments` and referred to as
/// `attachment://HASH` wherever they occur.
fn resolve_attachments(value: &mut Value, attachments: &serde_json::Map<String, Value>) {
    match value {
        Value::String(text) => {
            if let Some(found) = text
                .strip_prefix("attachment://")
                .and_then(|hash| attachments.get(hash))
                .and_then(Value::as_str)
            {
                *text = found.to_string();
            }
        }
        Value::Array(items) => items
            .iter_mut()
            .for_each(|v| resolve_attachments(v, attachments)),
        Value::Object(map) => map
            .values_mut()
            .for_each(|v| resolve_attachments(v, attachments)),
        _ => {}
    }
}

/// `value` as `T`; a failure names the field (`events[3].output`).
pub fn typed<T: serde::de::DeserializeOwned>(value: Value, what: &str) -> anyhow::Result<T> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        if path == "." {
            anyhow::anyhow!("{what}: {}", e.inner())
        } else {
            anyhow::anyhow!("{what}: field {path}: {}", e.inner())
        }
    })
}
