//! METR Task Standard families as environments: a folder `<family>/` with
//! `<family>.py` (a `TaskFamily` class), an optional `manifest.yaml` (per
//! task resources and scoring flags) and our optional sidecar
//! `rebench.toml` (budget, normalization). Each task of a family becomes one
//! [`Environment`] with the id `<family>/<task>`. Reading is pure apart from
//! the files; asking the family's own code (its task names, when the
//! manifest lists none) is `probe`'s job. See `docs/task-standard.md`.

pub mod helper;
pub mod probe;
mod sidecar;
mod yaml;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::manifest::{
    Budget, Hardware, Manifest, Metric, RecordingSettings, SandboxSettings, Scoring,
};
use super::{EnvError, Environment, Problem};
pub use sidecar::{SIDECAR_FILE, Sidecar, SidecarScoring, read_file as read_sidecar};
pub use yaml::{FAMILY_MANIFEST, FamilyManifest, TaskManifest};

/// Budget of a family task's session when its sidecar sets none (RE-Bench's
/// human runs were 8 hours).
const DEFAULT_BUDGET: &str = "8h";
/// How long one call into the family (a score, an aggregate) may take.
const DEFAULT_SCORING_TIMEOUT: &str = "30m";

/// What a session needs to know of the family task it runs, fixed when it
/// is made.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskRef {
    /// Where it was found (a search folder's entry, maybe a link made by
    /// `env add`): the server opens it again from there, with the
    /// operator's overrides beside it.
    pub entry: PathBuf,
    pub family: String,
    pub task: String,
    /// sha256 (hex) over every file of the family folder.
    pub content_hash: String,
    /// The manifest's `scoring.instructions` (how the task is scored),
    /// given to the participant after the task's own instructions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scoring_instructions: Option<String>,
}

/// A family folder, read.
#[derive(Debug, Clone, PartialEq)]
pub struct Family {
    /// Absolute, links resolved.
    pub dir: PathBuf,
    /// The path it was opened at.
    pub entry: PathBuf,
    pub name: String,
    pub manifest: FamilyManifest,
    pub sidecar: Sidecar,
    pub content_hash: String,
}

/// The family's name when `dir` holds a family: `<dir>/<name>.py` where
/// `name` is the folder's own name, in the standard's snake case.
pub fn family_name(dir: &Path) -> Option<String> {
    let name = dir.file_name()?.to_str()?.to_string();
    let snake = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && !name.starts_with(|c: char| c.is_ascii_digit());
    (snake && dir.join(format!("{name}.py")).is_file()).then_some(name)
}

impl Family {
    /// Reads the family in `dir`: its manifest.yaml and sidecar, checked
    /// (each problem names the file and field), and its content hash.
    /// `overrides` (from `rebench env add --starting …`) win over the sidecar.
    pub fn load(dir: &Path, overrides: Option<&Sidecar>) -> Result<Family, EnvError> {
        let entry = dir.to_path_buf();
        let name = family_name(dir).ok_or_else(|| {
            EnvError::Invalid(vec![Problem {
                file: dir.to_path_buf(),
                field: String::new(),
                message: "not a Task Standard family: it needs <folder name>.py, the folder name in snake case".into(),
            }])
        })?;
        let dir = std::fs::canonicalize(dir).map_err(|source| EnvError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
        let manifest = yaml::read(&dir).map_err(|p| EnvError::Invalid(vec![p]))?;
        let mut sidecar = sidecar::read(&dir).map_err(EnvError::Invalid)?;
        if let Some(extra) = overrides {
            sidecar.overlay(extra);
        }
        let content_hash = content_hash(&dir).map_err(|source| EnvError::Io {
            path: dir.clone(),
            source,
        })?;
        Ok(Family {
            dir,
            entry,
            name,
            manifest,
            sidecar,
            content_hash,
        })
    }

    /// The environment of one of its tasks. The task is not checked
    /// against the family's code here (that runs in its image).
    pub fn task_environment(&self, task: &str) -> Result<Environment, EnvError> {
        let invalid = |field: String, message: String| {
            EnvError::Invalid(vec![Problem {
                file: self.dir.join(SIDECAR_FILE),
                field,
                message,
            }])
        };
        let task_manifest = self.manifest.tasks.get(task).cloned().unwrap_or_default();
        let scoring = self.sidecar.scoring_for(task);
        let transform = scoring
            .transform
            .clone()
            .unwrap_or_else(|| "identity".into());
        let parsed: super::normalize::Transform = transform
            .parse()
            .map_err(|e| invalid("scoring.transform".into(), e))?;
        let (starting, reference, normalized) = match (scoring.starting, scoring.reference) {
            (Some(s), Some(r)) => {
                let (ts, tr) = (parsed.apply(s), parsed.apply(r));
                if ts.is_none() || tr.is_none() || ts == tr {
                    return Err(invalid(
                        "scoring.starting".into(),
                        format!(
                            "starting {s} and reference {r} must be {} and differ under {transform}",
                            parsed.domain_hint()
                        ),
                    ));
                }
                (s, r, true)
            }
            (None, None) => (0.0, 1.0, false),
            _ => {
                return Err(invalid(
                    "scoring".into(),
                    "give both starting and reference, or neither".into(),
                ));
            }
        };
        let budget = self.sidecar.budget.clone().unwrap_or(Budget {
            default: DEFAULT_BUDGET.into(),
            presets: vec!["2h".into(), DEFAULT_BUDGET.into()],
        });
        for text in std::iter::once(&budget.default).chain(&budget.presets) {
            super::duration::parse_duration(text).map_err(|e| invalid("budget".into(), e))?;
        }
        let timeout = scoring
            .timeout
            .clone()
            .unwrap_or_else(|| DEFAULT_SCORING_TIMEOUT.into());
        super::duration::parse_duration(&timeout)
            .map_err(|e| invalid("scoring.timeout".into(), e))?;
        let title = self
            .manifest
            .meta
            .as_ref()
            .and_then(|m| m.name.clone())
            .unwrap_or_else(|| self.name.clone());
        let manifest = Manifest {
            id: format!("{}/{task}", self.name),
            title: format!("{title} ({task})"),
            summary: format!(
                "Task {task} of the METR Task Standard family {}{}",
                self.name,
                if normalized {
                    ""
                } else {
                    " (raw scores: no starting/reference given)"
                }
            ),
            instructions: String::new(),
            workspace: String::new(),
            default_profile: None,
            budget,
            hardware: task_manifest.hardware(),
            scoring: Scoring {
                // Filled in by the server: its own binary calls into the family.
                command: Vec::new(),
                timeout,
                metric: Metric {
                    name: "score".into(),
                    unit: String::new(),
                },
                transform,
                starting,
                reference,
                // The final entry holds the family's own aggregate.
                aggregate: "last".into(),
                visible: task_manifest.scoring.visible_to_agent.unwrap_or(true),
                protected: Vec::new(),
                pass_env: Vec::new(),
                per_machine: false,
                exclusive: false,
            },
            profiles: BTreeMap::new(),
            prepare: None,
            recording: RecordingSettings::default(),
            calibrate: None,
            sandbox: SandboxSettings::default(),
        };
        Ok(Environment {
            dir: self.dir.clone(),
            manifest,
            manifest_hash: self.content_hash.clone(),
            family: Some(TaskRef {
                entry: self.entry.clone(),
                family: self.name.clone(),
                task: task.to_string(),
                content_hash: self.content_hash.clone(),
                scoring_instructions: task_manifest.scoring.instructions.clone(),
            }),
            normalized,
            // The standard's default is no score at the limit.
            score_at_budget_end: task_manifest.scoring.score_on_usage_limits.unwrap_or(false),
        })
    }

    /// Its task names: the manifest's, else the family's own `get_tasks()`.
    pub fn task_names(&self) -> Result<Vec<String>, String> {
        if !self.manifest.tasks.is_empty() {
            return Ok(self.manifest.tasks.keys().cloned().collect());
        }
        probe::task_names(&self.dir, &self.name)
    }
}

/// Where `env add` keeps the operator's overrides for the family whose
/// entry (link) is `entry`: beside it, `<family>.rebench.toml`.
pub fn overrides_file(entry: &Path) -> Option<PathBuf> {
    let name = entry.file_name()?.to_str()?;
    Some(entry.with_file_name(format!("{name}.{SIDECAR_FILE}")))
}

/// The family at `entry` with the operator's overrides kept beside it.
pub fn open(entry: &Path) -> Result<Family, EnvError> {
    let overrides = match overrides_file(entry) {
        Some(file) => Some(sidecar::read_file(&file).map_err(EnvError::Invalid)?),
        None => None,
    };
    Family::load(entry, overrides.as_ref())
}

/// One task of the family at `entry`, checked against its task names.
pub fn open_task(entry: &Path, task: &str) -> Result<Environment, EnvError> {
    let family = open(entry)?;
    let names = family.task_names().map_err(|message| {
        EnvError::Invalid(vec![Problem {
            file: family.dir.join(format!("{}.py", family.name)),
            field: "get_tasks".into(),
            message,
        }])
    })?;
    if !names.iter().any(|n| n == task) {
        return Err(EnvError::Invalid(vec![Problem {
            file: family.dir.clone(),
            field: String::new(),
            message: format!(
                "family {} has no task \"{task}\" (its tasks: {})",
                family.name,
                names.join(", ")
            ),
        }]));
    }
    family.task_environment(task)
}

/// `<family>/<task>` split, when `id` has that shape.
pub fn split_task_id(id: &str) -> Option<(&str, &str)> {
    let (family, task) = id.split_once('/')?;
    let ok = !family.is_empty()
        && !task.is_empty()
        && family
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    ok.then_some((family, task))
}

/// A task id as a file name: `/` becomes `__` (family names have no `/`,
/// and their `_` runs are kept apart by the double underscore).
pub fn file_name(id: &str) -> String {
    id.replace('/', "__")
}

/// sha256 over the family folder: each file's relative path and bytes, in
/// path order (caches, `.git` and editors' leftovers skipped).
pub fn content_hash(dir: &Path) -> std::io::Result<String> {
    let mut files = Vec::new();
    collect(dir, dir, &mut files)?;
    files.sort();
    let mut hasher = Sha256::new();
    for rel in files {
        let bytes = std::fs::read(dir.join(&rel))?;
        hasher.update(rel.to_string_lossy().as_bytes());
        hasher.update([0]);
        hasher.update((bytes.len() as u64).to_le_bytes());
        hasher.update(&bytes);
    }
    Ok(format!("{:x}", hasher.finalize()))
}

fn collect(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        if matches!(name.to_str(), Some(".git" | "__pycache__" | ".mypy_cache")) {
            continue;
        }
        let path = entry.path();
        let kind = entry.file_type()?;
        if kind.is_dir() {
            collect(root, &path, out)?;
        } else if kind.is_file() {
            out.push(path.strip_prefix(root).unwrap_or(&path).to_path_buf());
        }
    }
    Ok(())
}

impl TaskManifest {
    /// The standard's resources as rebench's `[hardware]`: the least GPUs
    /// of the count range.
    fn hardware(&self) -> Hardware {
        let resources = &self.resources;
        let gpus = resources
            .gpu
            .as_ref()
            .and_then(|g| g.count_range.map(|(low, _)| low))
            .unwrap_or(0);
        Hardware {
            gpus,
            gpu_model: resources
                .gpu
                .as_ref()
                .and_then(|g| g.model.clone())
                .filter(|_| gpus > 0),
            cpus: resources.cpus.unwrap_or(1),
            memory_gb: resources.memory_gb.unwrap_or(0.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn family(files: &[(&str, &str)]) -> (tempfile::TempDir, PathBuf) {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("count_odds");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("count_odds.py"), "class TaskFamily: pass\n").unwrap();
        for (name, text) in files {
            std::fs::write(dir.join(name), text).unwrap();
        }
        (tmp, dir)
    }

    #[test]
    fn a_family_is_a_snake_case_folder_with_its_module() {
        let (_tmp, dir) = family(&[]);
        assert_eq!(family_name(&dir).as_deref(), Some("count_odds"));
        let other = dir.parent().unwrap().join("Count-Odds");
        std::fs::create_dir(&other).unwrap();
        std::fs::write(other.join("Count-Odds.py"), "").unwrap();
        assert_eq!(family_name(&other), None);
        assert_eq!(family_name(dir.parent().unwrap()), None);
    }

    #[test]
    fn a_task_gets_the_manifests_hardware_and_visibility() {
        let (_tmp, dir) = family(&[(
            "manifest.yaml",
            "version: 0.3.0\nmeta:\n  name: Count odds\ntasks:\n  main:\n    resources:\n      gpu:\n        count_range: [2, 4]\n        model: h100\n      cpus: 8\n      memory_gb: 64\n    scoring:\n      visible_to_agent: false\n      score_on_usage_limits: true\n  hard: {}\n",
        )]);
        let family = Family::load(&dir, None).unwrap();
        assert_eq!(family.task_names().unwrap(), vec!["hard", "main"]);
        let env = family.task_environment("main").unwrap();
        assert_eq!(env.id(), "count_odds/main");
        let hw = &env.manifest.hardware;
        assert_eq!(
            (hw.gpus, hw.gpu_model.as_deref(), hw.cpus, hw.memory_gb),
            (2, Some("h100"), 8, 64.0)
        );
        assert!(!env.manifest.scoring.visible);
        assert!(!env.normalized);
        assert!(env.manifest.title.contains("Count odds"));
        let plan = env.scoring(None).unwrap();
        assert_eq!(plan.normalizer.starting, 0.0);
        let hard = family.task_environment("hard").unwrap();
        assert!(hard.manifest.scoring.visible);
        assert_eq!(hard.manifest.hardware.gpus, 0);
        assert_eq!(hard.default_budget().as_secs(), 8 * 3600);
    }

    #[test]
    fn the_sidecar_normalizes_per_task_and_overrides_win() {
        let (_tmp, dir) = family(&[(
            "rebench.toml",
            "[budget]\ndefault = \"2h\"\n[scoring]\nstarting = 0.1\nreference = 0.9\n[tasks.hard.scoring]\nstarting = 5.0\nreference = 1.0\ntransform = \"log\"\n",
        )]);
        let family = Family::load(&dir, None).unwrap();
        let main = family.task_environment("main").unwrap();
        assert!(main.normalized);
        let plan = main.scoring(None).unwrap();
        assert_eq!(
            (plan.normalizer.starting, plan.normalizer.reference),
            (0.1, 0.9)
        );
        assert_eq!(main.default_budget().as_secs(), 7200);
        let hard = family
            .task_environment("hard")
            .unwrap()
            .scoring(None)
            .unwrap();
        assert_eq!(hard.normalizer.starting, 5.0);
        assert_eq!(hard.normalizer.transform.to_string(), "log");
        let cli = Sidecar {
            scoring: Some(SidecarScoring {
                starting: Some(2.0),
                reference: Some(3.0),
                ..Default::default()
            }),
            ..Default::default()
        };
        let overridden = Family::load(&dir, Some(&cli)).unwrap();
        let plan = overridden
            .task_environment("main")
            .unwrap()
            .scoring(None)
            .unwrap();
        assert_eq!(
            (plan.normalizer.starting, plan.normalizer.reference),
            (2.0, 3.0)
        );
    }

    #[test]
    fn bad_sidecars_and_manifests_name_file_and_field() {
        let (_tmp, dir) = family(&[("rebench.toml", "[scoring]\nstarting = 1.0\nbogus = 2\n")]);
        let err = Family::load(&dir, None).unwrap_err().to_string();
        assert!(
            err.contains("rebench.toml") && err.contains("bogus"),
            "{err}"
        );
        std::fs::write(dir.join("rebench.toml"), "[scoring]\nstarting = 1.0\n").unwrap();
        let err = Family::load(&dir, None)
            .unwrap()
            .task_environment("main")
            .unwrap_err()
            .to_string();
        assert!(err.contains("neither"), "{err}");
        std::fs::write(dir.join("rebench.toml"), "").unwrap();
        std::fs::write(
            dir.join("manifest.yaml"),
            "tasks:\n  main:\n    resources:\n      cpus: lots\n",
        )
        .unwrap();
        let err = Family::load(&dir, None).unwrap_err().to_string();
        assert!(
            err.contains("manifest.yaml") && err.contains("cpus"),
            "{err}"
        );
    }

    #[test]
    fn task_ids_split_and_escape() {
        assert_eq!(
            split_task_id("ai_rd_triton_cumsum/main"),
            Some(("ai_rd_triton_cumsum", "main"))
        );
        assert_eq!(split_task_id("my-envs/prefix-sum"), None);
        assert_eq!(split_task_id("fam/"), None);
        assert_eq!(split_task_id("./x"), None);
        assert_eq!(file_name("fam/task"), "fam__task");
    }

    #[test]
    fn the_content_hash_follows_every_file() {
        let (_tmp, dir) = family(&[("assets.txt", "a")]);
        let first = content_hash(&dir).unwrap();
        std::fs::create_dir(dir.join("__pycache__")).unwrap();
        std::fs::write(dir.join("__pycache__/x.pyc"), "junk").unwrap();
        assert_eq!(content_hash(&dir).unwrap(), first);
        std::fs::write(dir.join("assets.txt"), "b").unwrap();
        assert_ne!(content_hash(&dir).unwrap(), first);
    }
}
