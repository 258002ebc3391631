//! Shared virtual environments: `<data-dir>/venvs/<key>/`, one per distinct
//! (interpreter, requirements file) pair, so every PyTorch environment with
//! the same `requirements.txt` uses one 5 GB venv instead of one each.
//!
//! The key is a sha256 prefix of the interpreter's resolved path, its
//! `sys.version` and the requirements file's bytes (comments included).
//! A venv is built under its own lock file, `venvs/.<key>.lock`, so two
//! `prepare`s (say, from parallel test binaries) never both build it; the
//! marker `.rebench-venv.json` is written last, atomically, and a venv
//! without a matching marker is never used: a build that died half-way is
//! removed and redone by the next `prepare`.
//!
//! The venv is built at its final path rather than elsewhere and renamed:
//! venvs are not relocatable (pip writes the venv's absolute path into the
//! `#!` line of every script it installs, `pip` and `torchrun` included).

use super::record::{self, venv_packages, venv_python};
use super::{PrepareError, io_error, lock_file, step};
use serde::{Deserialize, Serialize};
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// Folder in the data dir that holds the shared venvs.
pub const VENVS_DIR: &str = "venvs";
/// In the venv: what it was built from and which packages pip left there.
pub const MARKER: &str = ".rebench-venv.json";
/// Hex digits of the sha256 used as the folder name.
const KEY_LEN: usize = 16;
const MARKER_FORMAT: u32 = 1;

/// What a venv is built from; equal specs share one venv.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec {
    /// The `[prepare] python` setting, e.g. "python3".
    pub python: String,
    /// `os.path.realpath(sys.executable)` of that interpreter.
    pub executable: String,
    /// Its `sys.version`.
    pub version: String,
    /// The requirements file (absolute) and the sha256 of its bytes.
    pub requirements: PathBuf,
    pub requirements_hash: String,
}

impl Spec {
    /// Asks the interpreter who it is and hashes the requirements file.
    pub fn probe(python: &str, requirements: &Path) -> Result<Spec, PrepareError> {
        let requirements_hash = record::hash_entry(requirements).map_err(io_error(requirements))?;
        let step = "asking the python for its version";
        let script = "import json, os, sys\n\
                      print(json.dumps({'executable': os.path.realpath(sys.executable), \
                      'version': sys.version}))";
        let output = Command::new(python)
            .args(["-c", script])
            .output()
            .map_err(|source| PrepareError::Spawn {
                step: step.to_string(),
                program: python.to_string(),
                source,
            })?;
        let stdout = String::from_utf8_lossy(&output.stdout);
        let parsed = stdout
            .lines()
            .last()
            .and_then(|line| serde_json::from_str::<serde_json::Value>(line).ok());
        let field = |name: &str| {
            parsed
                .as_ref()
                .and_then(|v| v[name].as_str())
                .map(str::to_string)
        };
        match (
            output.status.success(),
            field("executable"),
            field("version"),
        ) {
            (true, Some(executable), Some(version)) => Ok(Spec {
                python: python.to_string(),
                executable,
                version,
                requirements: requirements.to_path_buf(),
                requirements_hash,
            }),
            _ => Err(PrepareError::StepFailed {
                step: step.to_string(),
                status: output.status.to_string(),
                tail: format!("{stdout}{}", String::from_utf8_lossy(&output.stderr)),
            }),
        }
    }

    /// The venv's folder name: the first 16 hex digits of a sha256 over the
    /// resolved interpreter, its version and the requirements' bytes. The
    /// `python` setting itself is left out, so "python3" and the path it
    /// resolves to share a venv.
    pub fn key(&self) -> String {
        let text = format!(
            "executable={}\nversion={}\nrequirements={}\n",
            self.executable, self.version, self.requirements_hash
        );
        let mut key = record::hash_bytes(text.as_bytes());
        key.truncate(KEY_LEN);
        key
    }
}

/// The marker, written last once the venv is complete.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Marker {
    pub format: u32,
    pub key: String,
    pub python: String,
    pub executable: String,
    pub version: String,
    /// sha256 of the requirements file it was installed from.
    pub requirements: String,
    /// `*.dist-info` names right after pip finished.
    pub packages: Vec<String>,
    pub built_at: String,
}

/// `<data-dir>/venvs/<key>`.
pub fn venv_path(data_dir: &Path, key: &str) -> PathBuf {
    data_dir.join(VENVS_DIR).join(key)
}

/// "venvs/<key>", how problems name a venv (relative to the data dir).
fn label(key: &str) -> String {
    format!("{VENVS_DIR}/{key}")
}

/// The marker of a complete venv built for `key`, or why there is none.
pub fn load_marker(venv: &Path, key: &str) -> Result<Marker, String> {
    let path = venv.join(MARKER);
    let bytes = fs::read(&path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound if venv.exists() => format!(
            "{} is incomplete (no {MARKER}: its build was interrupted or is running)",
            label(key)
        ),
        std::io::ErrorKind::NotFound => format!("{} missing", label(key)),
        _ => format!("{}/{MARKER} unreadable ({e})", label(key)),
    })?;
    let marker: Marker = serde_json::from_slice(&bytes)
        .map_err(|e| format!("{}/{MARKER} unreadable ({e})", label(key)))?;
    if marker.format != MARKER_FORMAT || marker.key != key {
        return Err(format!(
            "{}/{MARKER} is for another venv (key {}, format {})",
            label(key),
            marker.key,
            marker.format
        ));
    }
    Ok(marker)
}

/// What is wrong with the venv `key` compared with the packages a
/// preparation recorded; empty = usable.
pub fn damage(data_dir: &Path, key: &str, recorded: &[String]) -> Vec<String> {
    let venv = venv_path(data_dir, key);
    if let Err(problem) = load_marker(&venv, key) {
        return vec![problem];
    }
    package_damage(&venv, key, recorded)
}

/// The interpreter (followed through its symlink: a removed base python
/// shows up here) and the `*.dist-info` list against `recorded`.
fn package_damage(venv: &Path, key: &str, recorded: &[String]) -> Vec<String> {
    if fs::metadata(venv_python(venv)).is_err() {
        return vec![format!("{}/bin/python missing", label(key))];
    }
    let now = venv_packages(venv);
    let missing: Vec<&str> = recorded
        .iter()
        .filter(|p| !now.contains(p))
        .map(String::as_str)
        .collect();
    let added: Vec<&str> = now
        .iter()
        .filter(|p| !recorded.contains(p))
        .map(String::as_str)
        .collect();
    let mut problems = Vec::new();
    if !missing.is_empty() {
        problems.push(format!(
            "{} packages missing: {}",
            label(key),
            missing.join(", ")
        ));
    }
    if !added.is_empty() {
        problems.push(format!(
            "{} packages added: {}",
            label(key),
            added.join(", ")
        ));
    }
    problems
}

/// Makes sure `<data-dir>/venvs/<spec.key()>` is complete: reuses it when
/// its marker matches and its packages are still the ones pip installed,
/// else (re)builds it. Holds the venv's lock throughout. Returns the venv
/// and its package list.
pub fn ensure(
    data_dir: &Path,
    spec: &Spec,
    cwd: &Path,
    timeout: Duration,
    log: &mut dyn Write,
) -> Result<(PathBuf, Vec<String>), PrepareError> {
    let key = spec.key();
    let venvs = data_dir.join(VENVS_DIR);
    fs::create_dir_all(&venvs).map_err(io_error(&venvs))?;
    let venv = venvs.join(&key);
    let _lock = lock_file(&venvs.join(format!(".{key}.lock")), log, || {
        format!(
            "waiting for another `rebench env prepare` that is building the venv {}",
            venv.display()
        )
    })?;
    let why = match load_marker(&venv, &key) {
        Ok(marker) => {
            let problems = package_damage(&venv, &key, &marker.packages);
            if problems.is_empty() {
                let _ = writeln!(log, "reusing the venv in {}", venv.display());
                return Ok((venv, marker.packages));
            }
            problems.join("; ")
        }
        Err(problem) => problem,
    };
    if venv.exists() {
        let _ = writeln!(log, "removing the old venv in {} ({why})", venv.display());
        fs::remove_dir_all(&venv).map_err(io_error(&venv))?;
    }
    build(spec, &venv, cwd, timeout, log)?;
    let packages = venv_packages(&venv);
    let marker = Marker {
        format: MARKER_FORMAT,
        key,
        python: spec.python.clone(),
        executable: spec.executable.clone(),
        version: spec.version.clone(),
        requirements: spec.requirements_hash.clone(),
        packages: packages.clone(),
        built_at: chrono::Utc::now().to_rfc3339(),
    };
    let text = serde_json::to_string_pretty(&marker).map_err(|e| PrepareError::Io {
        path: venv.join(MARKER),
        source: std::io::Error::other(e),
    })?;
    let tmp = venv.join(format!("{MARKER}.tmp"));
    fs::write(&tmp, text + "\n").map_err(io_error(&tmp))?;
    let path = venv.join(MARKER);
    fs::rename(&tmp, &path).map_err(io_error(&path))?;
    Ok((venv, packages))
}

/// `<python> -m venv <venv>`, then `pip install -r <requirements>` in it.
fn build(
    spec: &Spec,
    venv: &Path,
    cwd: &Path,
    timeout: Duration,
    log: &mut dyn Write,
) -> Result<(), PrepareError> {
    let venv_text = venv.to_string_lossy().into_owned();
    let _ = writeln!(
        log,
        "creating a venv shared by environments with these requirements: {} -m venv {venv_text}",
        spec.python
    );
    let argv = [spec.python.clone(), "-m".into(), "venv".into(), venv_text];
    step::run(
        &step::Step {
            name: "creating the venv",
            argv: &argv,
            cwd,
            env: &[],
            timeout,
        },
        log,
    )?;
    let _ = writeln!(
        log,
        "installing {} (pip output follows)",
        spec.requirements.display()
    );
    let argv = [
        venv_python(venv).to_string_lossy().into_owned(),
        "-m".into(),
        "pip".into(),
        "install".into(),
        "--disable-pip-version-check".into(),
        "--no-input".into(),
        "--progress-bar".into(),
        "off".into(),
        "-r".into(),
        spec.requirements.to_string_lossy().into_owned(),
    ];
    step::run(
        &step::Step {
            name: "pip install",
            argv: &argv,
            cwd,
            env: &[],
            timeout,
        },
        log,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(requirements_hash: &str) -> Spec {
        Spec {
            python: "python3".into(),
            executable: "/usr/bin/python3.11".into(),
            version: "3.11.7 (main)".into(),
            requirements: "/e/requirements.txt".into(),
            requirements_hash: requirements_hash.into(),
        }
    }

    #[test]
    fn key_depends_on_interpreter_and_requirements_only() {
        let a = spec("aa");
        assert_eq!(a.key().len(), KEY_LEN);
        let mut same = spec("aa");
        same.python = "/usr/bin/python3".into();
        same.requirements = "/other/requirements.txt".into();
        assert_eq!(same.key(), a.key());
        assert_ne!(spec("bb").key(), a.key());
        let mut newer = spec("aa");
        newer.version = "3.11.8 (main)".into();
        assert_ne!(newer.key(), a.key());
        let mut elsewhere = spec("aa");
        elsewhere.executable = "/opt/python/bin/python3.11".into();
        assert_ne!(elsewhere.key(), a.key());
    }

    #[test]
    fn damage_needs_a_matching_marker() {
        let tmp = tempfile::tempdir().unwrap();
        let data = tmp.path();
        let key = "0123456789abcdef";
        assert_eq!(damage(data, key, &[]), vec![format!("venvs/{key} missing")]);
        let venv = venv_path(data, key);
        fs::create_dir_all(venv.join("bin")).unwrap();
        assert!(damage(data, key, &[])[0].contains("is incomplete"));
        let mut marker = Marker {
            format: MARKER_FORMAT,
            key: "ffffffffffffffff".into(),
            python: "python3".into(),
            executable: "/usr/bin/python3".into(),
            version: "3".into(),
            requirements: "r".into(),
            packages: vec![],
            built_at: "now".into(),
        };
        let write = |m: &Marker| fs::write(venv.join(MARKER), serde_json::to_string(m).unwrap());
        write(&marker).unwrap();
        assert!(damage(data, key, &[])[0].contains("is for another venv"));
        marker.key = key.into();
        write(&marker).unwrap();
        assert_eq!(
            damage(data, key, &[]),
            vec![format!("venvs/{key}/bin/python missing")]
        );
        fs::write(venv.join("bin/python"), "").unwrap();
        assert!(damage(data, key, &[]).is_empty());
        let site = venv.join("lib/python3.11/site-packages/numpy-2.dist-info");
        fs::create_dir_all(site).unwrap();
        assert_eq!(
            damage(data, key, &["torch-2.dist-info".to_string()]),
            vec![
                format!("venvs/{key} packages missing: torch-2.dist-info"),
                format!("venvs/{key} packages added: numpy-2.dist-info"),
            ]
        );
    }
}
