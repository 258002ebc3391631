//! Preparing an environment on this machine (`rebench env prepare`): a Python
//! virtual environment built from the manifest's `[prepare] requirements`,
//! then the `[prepare] command` (hidden data, downloads, builds) in
//! `<data-dir>/prepared/<env-id>/<profile or "base">`. The venv is shared:
//! environments whose requirements file and interpreter are identical use
//! one, `<data-dir>/venvs/<key>` (see `venv`). What went in and what came
//! out is hashed into `prepared.json`, so `check` can refuse a session on a
//! machine where the preparation is missing, outdated or damaged.

mod record;
mod step;
mod venv;

use super::duration::parse_duration;
use super::manifest::Prepare;
use super::{EnvError, Environment};
pub use record::RECORD_FILE;
use record::{LEGACY_VENV_DIR, Record, venv_python};
use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
pub use venv::VENVS_DIR;

/// Folder name used when no profile applies.
const BASE: &str = "base";

/// A preparation that is ready for sessions.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Prepared {
    /// `<data-dir>/prepared/<env-id>/<profile or "base">`; may not exist for
    /// an environment without `[prepare]`.
    pub dir: PathBuf,
    /// The virtual environment, when `[prepare] requirements` is set:
    /// `<data-dir>/venvs/<key>`, shared with every environment whose
    /// requirements and interpreter are the same.
    pub venv: Option<PathBuf>,
    /// `venv/bin`, to put first on PATH for shells, exec and the scorer.
    pub bin_dir: Option<PathBuf>,
}

impl Prepared {
    /// Variables for session shells and exec: with a venv, `VIRTUAL_ENV` and
    /// `PATH` = bin_dir + `inherited_path`; nothing otherwise. Deliberately
    /// without `REBENCH_PREPARED`: hidden data is the scorer's business.
    pub fn session_env(&self, inherited_path: Option<&OsStr>) -> Vec<(String, String)> {
        let (Some(venv), Some(bin)) = (&self.venv, &self.bin_dir) else {
            return Vec::new();
        };
        let mut path = bin.to_string_lossy().into_owned();
        if let Some(rest) = inherited_path.filter(|p| !p.is_empty()) {
            path.push(':');
            path.push_str(&rest.to_string_lossy());
        }
        vec![
            (
                "VIRTUAL_ENV".to_string(),
                venv.to_string_lossy().into_owned(),
            ),
            ("PATH".to_string(), path),
        ]
    }

    /// Variables for the scorer (and the prepare command): `session_env` plus
    /// `REBENCH_PREPARED`, the folder holding hidden data.
    pub fn scorer_env(&self, inherited_path: Option<&OsStr>) -> Vec<(String, String)> {
        let mut vars = self.session_env(inherited_path);
        vars.push((
            "REBENCH_PREPARED".to_string(),
            self.dir.to_string_lossy().into_owned(),
        ));
        vars
    }
}

#[derive(Debug, thiserror::Error)]
pub enum PrepareError {
    #[error(transparent)]
    Env(#[from] EnvError),
    #[error("{who} is not prepared on this machine: run `{command}`")]
    NotPrepared { who: String, command: String },
    #[error("{who} changed since it was prepared ({}); run `{command}`", changed.join(", "))]
    Outdated {
        who: String,
        changed: Vec<String>,
        command: String,
    },
    #[error("{who} was damaged: {}; run `{command}`", problems.join("; "))]
    Damaged {
        who: String,
        problems: Vec<String>,
        command: String,
    },
    #[error("{step} failed ({status}); its last output:\n{tail}")]
    StepFailed {
        step: String,
        status: String,
        tail: String,
    },
    #[error("{step} timed out after {timeout}; its last output:\n{tail}")]
    TimedOut {
        step: String,
        timeout: String,
        tail: String,
    },
    #[error("{step} could not start: {program}: {source}")]
    Spawn {
        step: String,
        program: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl PrepareError {
    /// True when the cure is running `rebench env prepare` (not a bug or I/O trouble).
    pub fn needs_prepare(&self) -> bool {
        matches!(
            self,
            PrepareError::NotPrepared { .. }
                | PrepareError::Outdated { .. }
                | PrepareError::Damaged { .. }
        )
    }
}

pub(crate) fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> PrepareError + '_ {
    move |source| PrepareError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// `<data-dir>/prepared/<env-id>/<profile>`; `None` means the environment's
/// `default_profile`, else "base". The profile is not checked here.
pub fn prepared_dir(data_dir: &Path, env: &Environment, profile: Option<&str>) -> PathBuf {
    let name = profile
        .or(env.manifest.default_profile.as_deref())
        .unwrap_or(BASE);
    data_dir
        .join("prepared")
        .join(super::environment_file_name(env.id()))
        .join(name)
}

/// The chosen profile and everything derived from it.
struct Target<'a> {
    env: &'a Environment,
    profile: Option<String>,
    data_dir: PathBuf,
    dir: PathBuf,
    /// `[prepare]` with the profile's overrides applied (its `requirements`).
    settings: Option<Prepare>,
}

impl<'a> Target<'a> {
    fn new(
        env: &'a Environment,
        profile: Option<&str>,
        data_dir: &Path,
    ) -> Result<Self, PrepareError> {
        // `scoring` resolves the default profile and rejects unknown ones.
        let profile = env.scoring(profile)?.profile;
        let overrides = profile.as_ref().and_then(|p| env.manifest.profiles.get(p));
        let settings = env.manifest.prepare.clone().map(|mut settings| {
            if let Some(requirements) = overrides.and_then(|o| o.requirements.clone()) {
                settings.requirements = Some(requirements);
            }
            settings
        });
        Ok(Target {
            env,
            data_dir: data_dir.to_path_buf(),
            dir: prepared_dir(data_dir, env, profile.as_deref()),
            profile,
            settings,
        })
    }

    /// "environment optimize-kernel (profile smoke)".
    fn who(&self) -> String {
        match &self.profile {
            Some(p) => format!("environment {} (profile {p})", self.env.id()),
            None => format!("environment {}", self.env.id()),
        }
    }

    /// The command that fixes any `check` failure.
    fn fix_command(&self) -> String {
        match &self.profile {
            Some(p) => format!("rebench env prepare {} --profile {p}", self.env.id()),
            None => format!("rebench env prepare {}", self.env.id()),
        }
    }

    /// Whether the preparation has a venv (`[prepare] requirements`).
    fn wants_venv(&self) -> bool {
        self.settings
            .as_ref()
            .is_some_and(|s| s.requirements.is_some())
    }

    fn prepared(&self, venv: Option<PathBuf>) -> Prepared {
        Prepared {
            dir: self.dir.clone(),
            bin_dir: venv.as_ref().map(|v| v.join("bin")),
            venv,
        }
    }

    fn prepare_env(&self) -> BTreeMap<String, String> {
        self.profile
            .as_ref()
            .and_then(|p| self.env.manifest.profiles.get(p))
            .map(|p| p.prepare_env.clone())
            .unwrap_or_default()
    }

    /// The command's argv with `{python}` (the venv's; "" without one),
    /// `{env}` and `{prepared}` replaced.
    fn command(&self, settings: &Prepare, venv: Option<&Path>) -> Vec<String> {
        let python = venv
            .map(|v| venv_python(v).to_string_lossy().into_owned())
            .unwrap_or_default();
        let env_dir = self.env.dir.to_string_lossy();
        let dir = self.dir.to_string_lossy();
        settings
            .command
            .iter()
            .map(|arg| {
                arg.replace("{python}", &python)
                    .replace("{env}", &env_dir)
                    .replace("{prepared}", &dir)
            })
            .collect()
    }

    /// What the preparation is made from, each with its hash; see `Record::inputs`.
    fn inputs(&self, settings: &Prepare) -> Result<BTreeMap<String, String>, PrepareError> {
        let mut inputs = BTreeMap::new();
        let recipe = serde_json::json!({"prepare": settings, "prepare_env": self.prepare_env()});
        inputs.insert(
            "[prepare]".to_string(),
            record::hash_bytes(recipe.to_string().as_bytes()),
        );
        let mut files: Vec<PathBuf> = settings
            .requirements
            .iter()
            .map(|rel| self.env.dir.join(rel))
            .collect();
        // Scripts the command runs from the environment folder: editing one
        // must cause a re-preparation just like editing requirements.txt.
        files.extend(
            self.command(settings, None)
                .iter()
                .map(PathBuf::from)
                .filter(|p| p.starts_with(&self.env.dir) && p.is_file()),
        );
        for path in files {
            let hash = record::hash_entry(&path).map_err(io_error(&path))?;
            let rel = path.strip_prefix(&self.env.dir).unwrap_or(&path);
            inputs.insert(rel.to_string_lossy().into_owned(), hash);
        }
        Ok(inputs)
    }

    /// `check` on an already-resolved target.
    fn check(&self) -> Result<Prepared, PrepareError> {
        let Some(settings) = &self.settings else {
            return Ok(self.prepared(None));
        };
        let record = match Record::load(&self.dir) {
            Ok(Some(record)) => record,
            Ok(None) => return Err(self.not_prepared()),
            Err(problem) => return Err(self.damaged(vec![problem])),
        };
        let changed = record.changed_inputs(&self.inputs(settings)?);
        if !changed.is_empty() {
            return Err(PrepareError::Outdated {
                who: self.who(),
                changed,
                command: self.fix_command(),
            });
        }
        let mut problems = Vec::new();
        let venv = match (&record.venv, self.wants_venv()) {
            (Some(key), true) => {
                problems.extend(venv::damage(&self.data_dir, key, &record.venv_packages));
                Some(venv::venv_path(&self.data_dir, key))
            }
            (None, true) => {
                problems.push(format!("{RECORD_FILE} names no venv"));
                None
            }
            (_, false) => None,
        };
        problems.extend(record.damage(&self.dir));
        if !problems.is_empty() {
            return Err(self.damaged(problems));
        }
        Ok(self.prepared(venv))
    }

    fn not_prepared(&self) -> PrepareError {
        PrepareError::NotPrepared {
            who: self.who(),
            command: self.fix_command(),
        }
    }

    fn damaged(&self, problems: Vec<String>) -> PrepareError {
        PrepareError::Damaged {
            who: self.who(),
            problems,
            command: self.fix_command(),
        }
    }
}

/// Checks a preparation before a session starts: the record must exist, its
/// inputs (the `[prepare]` settings, requirements, command scripts) must be
/// unchanged, every recorded file must still be there with its hash, and the
/// shared venv it names must be complete (its marker) with the recorded
/// packages. Environments without `[prepare]` always pass (venv `None`).
pub fn check(
    env: &Environment,
    profile: Option<&str>,
    data_dir: &Path,
) -> Result<Prepared, PrepareError> {
    Target::new(env, profile, data_dir)?.check()
}

/// Makes everything a session needs on this machine; reuses what is already
/// there and valid. Prints progress lines to `log`.
///
/// Intact → nothing runs. Otherwise the shared venv for the requirements is
/// reused when complete, else built (under its own lock); files that changed
/// since the last preparation are deleted; the command is rerun; the record
/// is rewritten.
pub fn prepare(
    env: &Environment,
    profile: Option<&str>,
    data_dir: &Path,
    log: &mut dyn Write,
) -> Result<Prepared, PrepareError> {
    let target = Target::new(env, profile, data_dir)?;
    let Some(settings) = &target.settings else {
        let _ = writeln!(log, "{}: nothing to prepare", target.who());
        return Ok(target.prepared(None));
    };
    let started = Instant::now();
    fs::create_dir_all(&target.dir).map_err(io_error(&target.dir))?;
    let _lock = lock(&target, log)?;
    match target.check() {
        Ok(prepared) => {
            let _ = writeln!(
                log,
                "{} is already prepared in {}",
                target.who(),
                target.dir.display()
            );
            return Ok(prepared);
        }
        Err(e) if e.needs_prepare() => {
            let _ = writeln!(
                log,
                "preparing {} in {} ({})",
                target.who(),
                target.dir.display(),
                reason(&e)
            );
        }
        Err(e) => return Err(e),
    }
    let timeout = parse_duration(&settings.timeout).unwrap_or(Duration::from_secs(3600));
    let inputs = target.inputs(settings)?;
    let old = Record::load(&target.dir).ok().flatten();
    // Never leave an old record that could vouch for a half-done preparation.
    remove_if_present(&target.dir.join(RECORD_FILE))?;
    if let Some(old) = &old {
        remove_changed_files(&target.dir, old, log)?;
    }
    remove_legacy_venv(&target.dir, log)?;

    let mut record = Record::new(
        env.id(),
        target.profile.as_deref(),
        &env.manifest_hash,
        inputs,
    );
    let mut venv = None;
    if let Some(requirements) = &settings.requirements {
        let spec = venv::Spec::probe(&settings.python, &env.dir.join(requirements))?;
        let (path, packages) = venv::ensure(data_dir, &spec, &target.dir, timeout, log)?;
        record.venv = Some(spec.key());
        record.venv_packages = packages;
        venv = Some(path);
    }
    let prepared = target.prepared(venv);
    if !settings.command.is_empty() {
        run_command(&target, &prepared, settings, timeout, log)?;
    }

    record.files = record::hash_outputs(&target.dir).map_err(io_error(&target.dir))?;
    record.save(&target.dir).map_err(io_error(&target.dir))?;
    let _ = writeln!(
        log,
        "prepared {} in {:.1} s ({} file(s) recorded in {RECORD_FILE})",
        target.who(),
        started.elapsed().as_secs_f64(),
        record.files.len()
    );
    Ok(prepared)
}

/// Runs `[prepare] command` in the preparation folder with the venv first on
/// PATH, the profile's `prepare_env` and the REBENCH_* variables.
fn run_command(
    target: &Target,
    prepared: &Prepared,
    settings: &Prepare,
    timeout: Duration,
    log: &mut dyn Write,
) -> Result<(), PrepareError> {
    let mut vars = prepared.session_env(std::env::var_os("PATH").as_deref());
    vars.extend(target.prepare_env());
    // Last, so a prepare_env cannot override them.
    vars.extend([
        (
            "REBENCH_PROFILE".to_string(),
            target.profile.clone().unwrap_or_default(),
        ),
        (
            "REBENCH_ENV_DIR".to_string(),
            target.env.dir.to_string_lossy().into_owned(),
        ),
        (
            "REBENCH_PREPARED".to_string(),
            target.dir.to_string_lossy().into_owned(),
        ),
    ]);
    let argv = target.command(settings, prepared.venv.as_deref());
    let _ = writeln!(log, "running {}", argv.join(" "));
    step::run(
        &step::Step {
            name: "the prepare command",
            argv: &argv,
            cwd: &target.dir,
            env: &vars,
            timeout,
        },
        log,
    )
}

/// The short "why" of a check failure, for the progress log.
fn reason(e: &PrepareError) -> String {
    match e {
        PrepareError::NotPrepared { .. } => "not prepared yet".to_string(),
        PrepareError::Outdated { changed, .. } => format!("changed: {}", changed.join(", ")),
        PrepareError::Damaged { problems, .. } => format!("damaged: {}", problems.join("; ")),
        other => other.to_string(),
    }
}

/// One `prepare` per preparation folder at a time; a second one waits.
fn lock(target: &Target, log: &mut dyn Write) -> Result<fs::File, PrepareError> {
    let name = target
        .dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let path = target.dir.with_file_name(format!(".{name}.lock"));
    lock_file(&path, log, || {
        format!(
            "waiting for another `rebench env prepare` of {} to finish",
            target.who()
        )
    })
}

/// An exclusive lock on `path` (created if needed), held until the returned
/// file is dropped; the OS releases it if the process dies. Logs `waiting()`
/// before blocking on someone else's lock.
pub(crate) fn lock_file(
    path: &Path,
    log: &mut dyn Write,
    waiting: impl FnOnce() -> String,
) -> Result<fs::File, PrepareError> {
    let file = fs::File::create(path).map_err(io_error(path))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(fs::TryLockError::WouldBlock) => {
            let _ = writeln!(log, "{}", waiting());
            file.lock().map_err(io_error(path))?;
            Ok(file)
        }
        Err(fs::TryLockError::Error(source)) => Err(PrepareError::Io {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Removes the venv a format-1 preparation kept in its own folder (~5 GB
/// for torch): venvs live in `<data-dir>/venvs` now.
fn remove_legacy_venv(dir: &Path, log: &mut dyn Write) -> Result<(), PrepareError> {
    let legacy = dir.join(LEGACY_VENV_DIR);
    if !legacy.join("pyvenv.cfg").is_file() {
        return Ok(());
    }
    let _ = writeln!(
        log,
        "removing the old venv {} (venvs are shared in {VENVS_DIR}/ now)",
        legacy.display()
    );
    fs::remove_dir_all(&legacy).map_err(io_error(&legacy))
}

/// Deletes recorded files whose content changed, so the command rebuilds
/// them instead of trusting a damaged copy.
fn remove_changed_files(dir: &Path, old: &Record, log: &mut dyn Write) -> Result<(), PrepareError> {
    for (rel, expected) in &old.files {
        let path = dir.join(rel);
        let Ok(hash) = record::hash_entry(&path) else {
            continue; // missing already
        };
        if &hash != expected {
            let _ = writeln!(log, "removing {rel} (changed since the last preparation)");
            remove_if_present(&path)?;
        }
    }
    Ok(())
}

fn remove_if_present(path: &Path) -> Result<(), PrepareError> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io_error(path)(e)),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{VALID_MANIFEST, make_env};
    use super::*;

    fn load(manifest: &str) -> (tempfile::TempDir, Environment) {
        let tmp = tempfile::tempdir().unwrap();
        let dir = make_env(tmp.path(), "demo", manifest);
        fs::write(dir.join("requirements.txt"), "").unwrap();
        (tmp, Environment::load(&dir).unwrap())
    }

    const WITH_PREPARE: &str = "\n[prepare]\nrequirements = \"requirements.txt\"\n";

    #[test]
    fn prepared_dir_uses_profile_then_default_then_base() {
        let (_tmp, env) = load(VALID_MANIFEST);
        let data = Path::new("/data");
        assert_eq!(
            prepared_dir(data, &env, Some("smoke")),
            PathBuf::from("/data/prepared/demo/smoke")
        );
        assert_eq!(
            prepared_dir(data, &env, None),
            PathBuf::from("/data/prepared/demo/full")
        );
        let (_tmp, plain) = load(&VALID_MANIFEST.replace("default_profile = \"full\"\n", ""));
        assert_eq!(
            prepared_dir(data, &plain, None),
            PathBuf::from("/data/prepared/demo/base")
        );
    }

    #[test]
    fn no_prepare_section_needs_nothing() {
        let (tmp, env) = load(VALID_MANIFEST);
        let prepared = check(&env, Some("smoke"), tmp.path()).unwrap();
        assert_eq!(prepared.venv, None);
        assert_eq!(prepared.bin_dir, None);
        let mut log = Vec::new();
        assert_eq!(
            prepare(&env, None, tmp.path(), &mut log).unwrap().venv,
            None
        );
        assert_eq!(
            String::from_utf8(log).unwrap(),
            "environment demo (profile full): nothing to prepare\n"
        );
        assert!(!tmp.path().join("prepared").exists());
    }

    #[test]
    fn check_names_the_command_to_run() {
        let (tmp, env) = load(&format!("{VALID_MANIFEST}{WITH_PREPARE}"));
        let err = check(&env, Some("smoke"), tmp.path()).unwrap_err();
        assert!(err.needs_prepare());
        assert_eq!(
            err.to_string(),
            "environment demo (profile smoke) is not prepared on this machine: \
             run `rebench env prepare demo --profile smoke`"
        );
        let plain = VALID_MANIFEST.replace("default_profile = \"full\"\n", "");
        let (tmp, env) = load(&format!("{plain}{WITH_PREPARE}"));
        assert_eq!(
            check(&env, None, tmp.path()).unwrap_err().to_string(),
            "environment demo is not prepared on this machine: run `rebench env prepare demo`"
        );
        let err = check(&env, Some("nope"), tmp.path()).unwrap_err();
        assert!(matches!(
            err,
            PrepareError::Env(EnvError::UnknownProfile { .. })
        ));
        assert!(!err.needs_prepare());
    }

    #[test]
    fn env_vars_put_the_venv_first() {
        let prepared = Prepared {
            dir: "/d/p".into(),
            venv: Some("/d/p/venv".into()),
            bin_dir: Some("/d/p/venv/bin".into()),
        };
        let session = prepared.session_env(Some(OsStr::new("/usr/bin:/bin")));
        assert_eq!(
            session,
            vec![
                ("VIRTUAL_ENV".to_string(), "/d/p/venv".to_string()),
                (
                    "PATH".to_string(),
                    "/d/p/venv/bin:/usr/bin:/bin".to_string()
                ),
            ]
        );
        let scorer = prepared.scorer_env(None);
        assert_eq!(scorer[1], ("PATH".to_string(), "/d/p/venv/bin".to_string()));
        assert_eq!(
            scorer[2],
            ("REBENCH_PREPARED".to_string(), "/d/p".to_string())
        );
        let bare = Prepared {
            dir: "/d/p".into(),
            venv: None,
            bin_dir: None,
        };
        assert!(bare.session_env(None).is_empty());
        assert_eq!(bare.scorer_env(None).len(), 1);
    }

    #[test]
    fn inputs_cover_settings_requirements_and_scripts() {
        let manifest = format!(
            "{VALID_MANIFEST}{WITH_PREPARE}command = [\"{{python}}\", \"{{env}}/make.py\", \"{{prepared}}/out\"]\n"
        );
        let (tmp, env) = load(&manifest);
        fs::write(env.dir.join("make.py"), "print(1)\n").unwrap();
        let target = Target::new(&env, Some("smoke"), tmp.path()).unwrap();
        let settings = target.settings.as_ref().unwrap();
        let argv = target.command(settings, Some(Path::new("/data/venvs/k")));
        assert_eq!(argv[0], "/data/venvs/k/bin/python");
        assert_eq!(argv[1], format!("{}/make.py", env.dir.display()));
        assert_eq!(argv[2], format!("{}/out", target.dir.display()));
        let inputs = target.inputs(settings).unwrap();
        assert_eq!(
            inputs.keys().collect::<Vec<_>>(),
            vec!["[prepare]", "make.py", "requirements.txt"]
        );
        assert_eq!(inputs["make.py"], record::hash_bytes(b"print(1)\n"));
    }

    #[test]
    fn a_profile_can_replace_the_requirements() {
        let manifest = format!("{VALID_MANIFEST}{WITH_PREPARE}").replacen(
            "[profiles.full]\n",
            "[profiles.full]\nrequirements = \"requirements-full.txt\"\n",
            1,
        );
        let tmp = tempfile::tempdir().unwrap();
        let dir = make_env(tmp.path(), "demo", &manifest);
        fs::write(dir.join("requirements.txt"), "").unwrap();
        fs::write(dir.join("requirements-full.txt"), "big\n").unwrap();
        let env = Environment::load(&dir).unwrap();
        let full = Target::new(&env, Some("full"), tmp.path()).unwrap();
        let full_settings = full.settings.as_ref().unwrap();
        assert_eq!(
            full_settings.requirements.as_deref(),
            Some("requirements-full.txt")
        );
        let inputs = full.inputs(full_settings).unwrap();
        assert_eq!(
            inputs.keys().collect::<Vec<_>>(),
            vec!["[prepare]", "requirements-full.txt"]
        );
        assert_eq!(
            inputs["requirements-full.txt"],
            record::hash_bytes(b"big\n")
        );
        // Other profiles keep [prepare]'s own file.
        let smoke = Target::new(&env, Some("smoke"), tmp.path()).unwrap();
        let smoke_settings = smoke.settings.as_ref().unwrap();
        assert_eq!(
            smoke
                .inputs(smoke_settings)
                .unwrap()
                .keys()
                .collect::<Vec<_>>(),
            vec!["[prepare]", "requirements.txt"]
        );
    }
}
