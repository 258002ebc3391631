//! `prepared.json`: what a preparation was made from and what it produced,
//! so a later check can tell "intact" from "changed, damaged or missing".

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// The record, written last (atomically) so a half-done preparation has none.
pub const RECORD_FILE: &str = "prepared.json";
/// Where format-1 preparations kept their own venv; such a folder is
/// removed by the next `prepare` (venvs are shared now) and never hashed.
pub const LEGACY_VENV_DIR: &str = "venv";
/// 2: the venv is shared, `<data-dir>/venvs/<venv>`.
const FORMAT: u32 = 2;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    pub format: u32,
    pub env: String,
    pub profile: Option<String>,
    /// sha256 of environment.toml when prepared; for the record only (a new
    /// starting value must not force reinstalling torch).
    pub manifest_hash: String,
    /// What the preparation was made from: "[prepare]" (the settings and the
    /// profile's prepare_env), the requirements file, files the command
    /// names, each with its sha256. Any difference means "outdated".
    pub inputs: BTreeMap<String, String>,
    /// The shared venv's key (`<data-dir>/venvs/<key>`), with `[prepare] requirements`.
    pub venv: Option<String>,
    /// `*.dist-info` folder names in the venv: a cheap fingerprint of what pip installed.
    pub venv_packages: Vec<String>,
    /// Every file the preparation holds outside the venv → sha256.
    pub files: BTreeMap<String, String>,
    pub prepared_at: String,
}

impl Record {
    pub fn new(
        env: &str,
        profile: Option<&str>,
        manifest_hash: &str,
        inputs: BTreeMap<String, String>,
    ) -> Record {
        Record {
            format: FORMAT,
            env: env.to_string(),
            profile: profile.map(str::to_string),
            manifest_hash: manifest_hash.to_string(),
            inputs,
            venv: None,
            venv_packages: Vec::new(),
            files: BTreeMap::new(),
            prepared_at: chrono::Utc::now().to_rfc3339(),
        }
    }

    /// `None` when there is no record; `Err` when one is there but unreadable.
    pub fn load(dir: &Path) -> Result<Option<Record>, String> {
        let path = dir.join(RECORD_FILE);
        let bytes = match fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(format!("{RECORD_FILE} unreadable ({e})")),
        };
        match serde_json::from_slice::<Record>(&bytes) {
            Ok(record) if record.format == FORMAT => Ok(Some(record)),
            Ok(record) => Err(format!(
                "{RECORD_FILE} has format {} (expected {FORMAT})",
                record.format
            )),
            Err(e) => Err(format!("{RECORD_FILE} unreadable ({e})")),
        }
    }

    /// Writes via a temporary file and rename, so readers never see half a record.
    pub fn save(&self, dir: &Path) -> io::Result<()> {
        let tmp = dir.join(format!("{RECORD_FILE}.tmp"));
        let text = serde_json::to_string_pretty(self).map_err(io::Error::other)?;
        fs::write(&tmp, text + "\n")?;
        fs::rename(&tmp, dir.join(RECORD_FILE))
    }

    /// Names of the inputs whose hash differs from `current` (or is only on one side).
    pub fn changed_inputs(&self, current: &BTreeMap<String, String>) -> Vec<String> {
        let mut names: Vec<String> = self
            .inputs
            .iter()
            .filter(|(name, hash)| current.get(*name) != Some(hash))
            .map(|(name, _)| name.clone())
            .collect();
        names.extend(
            current
                .keys()
                .filter(|name| !self.inputs.contains_key(*name))
                .cloned(),
        );
        names
    }

    /// What is wrong with the files in `dir` compared with this record,
    /// e.g. "data/x.bin changed"; empty = intact. The venv is checked apart
    /// (`venv::damage`): it lives outside `dir`.
    pub fn damage(&self, dir: &Path) -> Vec<String> {
        let mut problems = Vec::new();
        for (rel, expected) in &self.files {
            match hash_entry(&dir.join(rel)) {
                Ok(hash) if &hash == expected => {}
                Ok(_) => problems.push(format!("{rel} changed")),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    problems.push(format!("{rel} missing"))
                }
                Err(e) => problems.push(format!("{rel} unreadable ({e})")),
            }
        }
        problems
    }
}

pub fn venv_python(venv: &Path) -> PathBuf {
    venv.join("bin").join("python")
}

/// Sorted `*.dist-info` names under `venv/lib/python*/site-packages`.
pub fn venv_packages(venv: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let Ok(libs) = fs::read_dir(venv.join("lib")) else {
        return found;
    };
    for lib in libs.filter_map(Result::ok) {
        let Ok(entries) = fs::read_dir(lib.path().join("site-packages")) else {
            continue;
        };
        found.extend(
            entries
                .filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|name| name.ends_with(".dist-info")),
        );
    }
    found.sort();
    found
}

/// sha256 hex of a file's bytes; of "symlink:<target>" for a symlink, which
/// is recorded as a link rather than followed out of the folder.
pub fn hash_entry(path: &Path) -> io::Result<String> {
    let meta = fs::symlink_metadata(path)?;
    let mut hasher = Sha256::new();
    if meta.file_type().is_symlink() {
        let target = fs::read_link(path)?;
        hasher.update(b"symlink:");
        hasher.update(target.to_string_lossy().as_bytes());
    } else {
        io::copy(&mut fs::File::open(path)?, &mut hasher)?;
    }
    Ok(format!("{:x}", hasher.finalize()))
}

pub fn hash_bytes(bytes: &[u8]) -> String {
    format!("{:x}", Sha256::digest(bytes))
}

/// Every file under `dir` except a legacy venv and the record itself, as
/// '/'-separated relative path → sha256.
pub fn hash_outputs(dir: &Path) -> io::Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    walk(dir, "", &mut out)?;
    Ok(out)
}

fn walk(dir: &Path, prefix: &str, out: &mut BTreeMap<String, String>) -> io::Result<()> {
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let rel = format!("{prefix}{name}");
        if prefix.is_empty() && is_bookkeeping(&name) {
            continue;
        }
        if entry.file_type()?.is_dir() {
            walk(&entry.path(), &format!("{rel}/"), out)?;
        } else {
            out.insert(rel, hash_entry(&entry.path())?);
        }
    }
    Ok(())
}

/// Top-level names that are rebench's own, not the preparation's output.
fn is_bookkeeping(name: &str) -> bool {
    name == LEGACY_VENV_DIR || name == RECORD_FILE || name == format!("{RECORD_FILE}.tmp")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, text: &str) {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }

    #[test]
    fn outputs_skip_the_venv_and_record() {
        let tmp = tempfile::tempdir().unwrap();
        write(&tmp.path().join("data/x.bin"), "abc");
        write(&tmp.path().join("venv/bin/python"), "");
        write(&tmp.path().join(RECORD_FILE), "{}");
        std::os::unix::fs::symlink("/etc/passwd", tmp.path().join("link")).unwrap();
        let files = hash_outputs(tmp.path()).unwrap();
        assert_eq!(files.keys().collect::<Vec<_>>(), vec!["data/x.bin", "link"]);
        assert_eq!(
            files["data/x.bin"],
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(files["link"], hash_bytes(b"symlink:/etc/passwd"));
    }

    #[test]
    fn damage_names_changed_and_missing_files() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        write(&dir.join("a.txt"), "a");
        write(&dir.join("b.txt"), "b");
        write(&dir.join("venv/bin/python"), "");
        let mut record = Record::new("x", None, "m", BTreeMap::new());
        record.files = hash_outputs(dir).unwrap();
        assert!(record.damage(dir).is_empty());

        write(&dir.join("a.txt"), "changed");
        fs::remove_file(dir.join("b.txt")).unwrap();
        fs::remove_file(dir.join("venv/bin/python")).unwrap();
        assert_eq!(record.damage(dir), vec!["a.txt changed", "b.txt missing"]);
    }

    #[test]
    fn packages_are_the_dist_info_names() {
        let tmp = tempfile::tempdir().unwrap();
        let venv = tmp.path();
        write(
            &venv.join("lib/python3.11/site-packages/torch-2.dist-info/RECORD"),
            "",
        );
        write(&venv.join("lib/python3.11/site-packages/torch/x.py"), "");
        assert_eq!(venv_packages(venv), vec!["torch-2.dist-info"]);
        assert!(venv_packages(&venv.join("nowhere")).is_empty());
    }

    #[test]
    fn save_and_load_round_trip() {
        let tmp = tempfile::tempdir().unwrap();
        assert_eq!(Record::load(tmp.path()), Ok(None));
        let inputs = BTreeMap::from([("[prepare]".to_string(), "h".to_string())]);
        let record = Record::new("x", Some("smoke"), "m", inputs);
        record.save(tmp.path()).unwrap();
        assert_eq!(Record::load(tmp.path()), Ok(Some(record.clone())));
        assert!(!tmp.path().join("prepared.json.tmp").exists());

        let changed = BTreeMap::from([("requirements.txt".to_string(), "r".to_string())]);
        assert_eq!(
            record.changed_inputs(&changed),
            vec!["[prepare]", "requirements.txt"]
        );
        fs::write(tmp.path().join(RECORD_FILE), "{").unwrap();
        let err = Record::load(tmp.path()).unwrap_err();
        assert!(err.starts_with("prepared.json unreadable"), "{err}");
    }
}
