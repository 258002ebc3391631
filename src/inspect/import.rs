//! `rebench import inspect LOG…`: every sample (and epoch) of Inspect eval
//! logs becomes an ended, read-only agent session on the server. A log or
//! sample that cannot be imported is reported with its file, sample and
//! field; the others are imported all the same.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context;

use super::convert::{self, Choices};
use super::log;
use crate::client::{Client, ClientError};
use crate::environment::discovery;
use crate::paths::DataPaths;
use crate::protocol::{ErrorCode, NormalizerValues, Request, SessionView};

#[derive(clap::Args, Debug, Clone)]
pub struct ImportInspectArgs {
    /// Inspect eval logs: `.eval` or `.json`, as `inspect_ai` writes them.
    #[arg(required = true, value_name = "LOG")]
    pub logs: Vec<PathBuf>,
    /// The environment of every sample (default: the log's task name).
    #[arg(long, value_name = "ID", conflicts_with = "map")]
    pub environment: Option<String>,
    /// A TOML file of `task = "environment"` lines, for logs whose task names differ.
    #[arg(long, value_name = "FILE")]
    pub map: Option<PathBuf>,
    /// The scoring profile to normalize by (default: the environment's `default_profile`).
    #[arg(long)]
    pub profile: Option<String>,
    /// The raw score of the starting solution, for an environment rebench
    /// does not have (or instead of the environment's).
    #[arg(long, requires = "reference", allow_hyphen_values = true)]
    pub starting: Option<f64>,
    /// The raw score of the reference solution (normalized to 1).
    #[arg(long, requires = "starting", allow_hyphen_values = true)]
    pub reference: Option<f64>,
    /// The scorer whose value is the score (default: the sample's first).
    #[arg(long)]
    pub scorer: Option<String>,
    /// The agent's name in the report (default: `MODEL (SOLVER)` from the log).
    #[arg(long)]
    pub agent: Option<String>,
    /// The budget, e.g. 8h, where the log has no time or working limit (it wins over them).
    #[arg(long)]
    pub budget: Option<String>,
}

/// What an import did, for `--json` and the summary.
#[derive(Debug, Default, serde::Serialize)]
pub struct ImportOutcome {
    /// The new sessions.
    pub ids: Vec<String>,
    /// Runs imported before (their session ids).
    pub already: Vec<String>,
    /// What could not be imported, each naming its file (and sample).
    pub errors: Vec<String>,
}

pub async fn run(args: ImportInspectArgs, paths: &DataPaths, json: bool) -> anyhow::Result<i32> {
    let mut client = Client::connect_admin(paths, "rebench import").await?;
    let outcome = import(&mut client, &args, paths).await?;
    if json {
        println!("{}", serde_json::to_string(&outcome)?);
    } else {
        for id in &outcome.ids {
            println!("{id}");
        }
        for line in &outcome.already {
            eprintln!("rebench import: {line}");
        }
    }
    for error in &outcome.errors {
        eprintln!("rebench import: {error}");
    }
    if !json {
        eprintln!(
            "rebench import: {} imported, {} imported before, {} not imported",
            outcome.ids.len(),
            outcome.already.len(),
            outcome.errors.len()
        );
    }
    Ok(if outcome.errors.is_empty() { 0 } else { 1 })
}

/// The import itself, over a connected admin client (tests call this).
pub async fn import(
    client: &mut Client,
    args: &ImportInspectArgs,
    paths: &DataPaths,
) -> anyhow::Result<ImportOutcome> {
    let budget_ms = args
        .budget
        .as_deref()
        .map(|text| {
            crate::environment::duration::parse_duration(text)
                .map(|d| d.as_millis() as u64)
                .map_err(|e| anyhow::anyhow!("--budget: {e}"))
        })
        .transpose()?;
    let map = match &args.map {
        Some(file) => Some(read_map(file)?),
        None => None,
    };
    let search = discovery::search_path(&paths.root);
    let normalizer = args
        .starting
        .zip(args.reference)
        .map(|(starting, reference)| NormalizerValues {
            starting,
            reference,
        });
    let mut outcome = ImportOutcome::default();
    for path in &args.logs {
        let file = path.display().to_string();
        let log = match log::read(path) {
            Ok(log) => log,
            Err(e) => {
                outcome.errors.push(format!("{file}: {e:#}"));
                continue;
            }
        };
        if let Some(session) = log.header.eval.eval_id.strip_prefix("rebench-")
            && client
                .call::<SessionView>(Request::Show {
                    session: session.to_string(),
                })
                .await
                .is_ok()
        {
            outcome.errors.push(format!(
                "{file}: an export of session {session} of this store: not imported again"
            ));
            continue;
        }
        if log.header.eval.rebench_kind() == Some("human") {
            outcome.errors.push(format!(
                "{file}: field eval.metadata.rebench.kind: a human session exported by rebench; Inspect logs import as agent runs"
            ));
            continue;
        }
        let task = &log.header.eval.task;
        let choices = match target(task, args, map.as_ref(), &search, normalizer) {
            Ok(target) => Choices {
                profile: args.profile.clone(),
                scorer: args.scorer.clone(),
                agent: args.agent.clone(),
                budget_ms,
                ..target
            },
            Err(e) => {
                outcome.errors.push(format!("{file}: task {task}: {e}"));
                continue;
            }
        };
        let log_id = if log.header.eval.eval_id.is_empty() {
            log.sha256.clone()
        } else {
            log.header.eval.eval_id.clone()
        };
        let absolute = std::path::absolute(path).unwrap_or_else(|_| path.clone());
        for sample in &log.samples {
            let sample = match sample {
                Ok(sample) => sample,
                Err(e) => {
                    outcome.errors.push(format!("{file}: {e}"));
                    continue;
                }
            };
            let which = format!("{file}: sample {} epoch {}", sample.id, sample.epoch);
            let run = match convert::run(
                &absolute.display().to_string(),
                &log_id,
                &log.header,
                sample,
                &choices,
            ) {
                Ok(run) => run,
                Err(e) => {
                    outcome.errors.push(format!("{which}: {e}"));
                    continue;
                }
            };
            match client
                .call::<SessionView>(Request::ImportRun(Box::new(run)))
                .await
            {
                Ok(view) => outcome.ids.push(view.id),
                Err(ClientError::Server {
                    code: ErrorCode::Refused,
                    message,
                }) if message.contains("imported already") => {
                    outcome.already.push(format!("{which}: {message}"));
                }
                Err(ClientError::Server { message, .. }) => {
                    outcome.errors.push(format!("{which}: {message}"));
                }
                Err(e) => return Err(e).with_context(|| format!("{which}: the server")),
            }
        }
    }
    Ok(outcome)
}

/// The environment a log's task maps to: its folder when rebench has it,
/// else (with `--starting`/`--reference`) just its name.
fn target(
    task: &str,
    args: &ImportInspectArgs,
    map: Option<&(PathBuf, BTreeMap<String, String>)>,
    search: &discovery::SearchPath,
    normalizer: Option<NormalizerValues>,
) -> Result<Choices, String> {
    let name = match (&args.environment, map) {
        (Some(id), _) => id.clone(),
        (None, Some((file, map))) => map.get(task).cloned().ok_or_else(|| {
            format!(
                "{} does not map it (it maps {})",
                file.display(),
                if map.is_empty() {
                    "nothing".to_string()
                } else {
                    map.keys().cloned().collect::<Vec<_>>().join(", ")
                }
            )
        })?,
        (None, None) => task.to_string(),
    };
    match discovery::resolve(&name, search) {
        Ok(env) if env.family.is_some() => Err(format!(
            "{name} is a Task Standard task: imports go to environments (or give --starting and --reference for a name of its own)"
        )),
        Ok(env) => {
            let dir = std::path::absolute(&env.dir).unwrap_or(env.dir.clone());
            Ok(Choices {
                env_dir: Some(dir.display().to_string()),
                environment: env.id().to_string(),
                normalizer,
                ..Choices::default()
            })
        }
        Err(_) if normalizer.is_some() => Ok(Choices {
            env_dir: None,
            environment: name,
            normalizer,
            ..Choices::default()
        }),
        Err(e) => Err(format!(
            "no environment {name} here ({}). Name one with --environment ID or --map FILE, or give --starting and --reference to import it under its own name",
            e.to_string().lines().next().unwrap_or_default()
        )),
    }
}

/// A map file: `task = "environment"` per line (TOML).
fn read_map(file: &Path) -> anyhow::Result<(PathBuf, BTreeMap<String, String>)> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
    let table: toml::Table =
        toml::from_str(&text).with_context(|| format!("{}: not valid TOML", file.display()))?;
    let mut map = BTreeMap::new();
    for (task, value) in table {
        let Some(env) = value.as_str() else {
            anyhow::bail!(
                "{}: {task}: expected an environment id in quotes, found {}",
                file.display(),
                value.type_str()
            );
        };
        map.insert(task, env.to_string());
    }
    Ok((file.to_path_buf(), map))
}
