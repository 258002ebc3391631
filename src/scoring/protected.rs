//! Protected files: the scorer and data it trusts, hashed at session start and
//! re-checked before each scorer run so a participant cannot edit the grader.

use std::collections::BTreeMap;
use std::fs::File;
use std::io;
use std::path::{Component, Path, PathBuf};

use sha2::{Digest, Sha256};

use super::io_text::describe_io_error;

/// SHA-256 (lowercase hex) of each workspace-relative path.
/// Any missing or unreadable file is an error naming it.
pub fn hash_files(workspace: &Path, paths: &[String]) -> Result<BTreeMap<String, String>, String> {
    let mut hashes = BTreeMap::new();
    for path in paths {
        let full_path = resolve(workspace, path)?;
        let hash = hash_file(&full_path).map_err(|error| {
            format!(
                "cannot hash protected file {path}: {}",
                describe_io_error(&error)
            )
        })?;
        hashes.insert(path.clone(), hash);
    }
    Ok(hashes)
}

/// Checks every recorded file still has its hash; the error names each
/// changed, missing or unreadable file.
pub fn check_files(workspace: &Path, recorded: &BTreeMap<String, String>) -> Result<(), String> {
    check(workspace, recorded).map_err(|refusal| match refusal {
        Refusal::Participant(m) | Refusal::Infrastructure(m) => m,
    })
}

/// Why a scoring run cannot go ahead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The workspace's fault: recorded as an invalid entry.
    Participant(String),
    /// The machine's (out of descriptors, memory…): nothing is recorded.
    Infrastructure(String),
}

/// `check_files`, telling a changed workspace from a machine that could not read it.
pub fn check(workspace: &Path, recorded: &BTreeMap<String, String>) -> Result<(), Refusal> {
    for path in recorded.keys() {
        if let Ok(full_path) = resolve(workspace, path)
            && let Err(error) = hash_file(&full_path)
            && super::io_text::is_exhaustion(&error)
        {
            return Err(Refusal::Infrastructure(format!(
                "could not read protected file {path}: {}",
                describe_io_error(&error)
            )));
        }
    }
    check_participant(workspace, recorded).map_err(Refusal::Participant)
}

fn check_participant(workspace: &Path, recorded: &BTreeMap<String, String>) -> Result<(), String> {
    let mut changed = Vec::new();
    let mut missing = Vec::new();
    let mut unreadable = Vec::new();
    for (path, expected) in recorded {
        let current = resolve(workspace, path).and_then(|full_path| {
            hash_file(&full_path).map_err(|error| match error.kind() {
                io::ErrorKind::NotFound => String::new(),
                _ => describe_io_error(&error),
            })
        });
        match current {
            Ok(hash) if hash.eq_ignore_ascii_case(expected) => {}
            Ok(_) => changed.push(path.as_str()),
            Err(reason) if reason.is_empty() => missing.push(path.as_str()),
            Err(_) => unreadable.push(path.as_str()),
        }
    }
    let problems: Vec<String> = [
        ("protected file changed", changed),
        ("protected file missing", missing),
        ("protected file unreadable", unreadable),
    ]
    .into_iter()
    .filter(|(_, paths)| !paths.is_empty())
    .map(|(what, paths)| format!("{what}: {}", paths.join(", ")))
    .collect();
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("; "))
    }
}

/// Protected paths come from environment config; keep them inside the workspace.
fn resolve(workspace: &Path, path: &str) -> Result<PathBuf, String> {
    let relative = Path::new(path);
    let inside = !path.is_empty()
        && relative
            .components()
            .all(|component| matches!(component, Component::Normal(_) | Component::CurDir));
    if inside {
        Ok(workspace.join(relative))
    } else {
        Err(format!(
            "protected path must be relative to the workspace: {path:?}"
        ))
    }
}

fn hash_file(path: &Path) -> io::Result<String> {
    let mut file = File::open(path)?;
    let mut hasher = Sha256::new();
    io::copy(&mut file, &mut hasher)?;
    Ok(hasher
        .finalize()
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn workspace_with(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (name, content) in files {
            let path = dir.path().join(name);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, content).unwrap();
        }
        dir
    }

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|name| name.to_string()).collect()
    }

    #[test]
    fn hashes_are_sha256_hex() {
        let dir = workspace_with(&[("score.py", "abc"), ("data/x.txt", "")]);
        let hashes = hash_files(dir.path(), &names(&["score.py", "data/x.txt"])).unwrap();
        assert_eq!(
            hashes["score.py"],
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(
            hashes["data/x.txt"],
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[test]
    fn hashing_a_missing_file_names_it() {
        let dir = workspace_with(&[("score.py", "abc")]);
        let error = hash_files(dir.path(), &names(&["score.py", "gone.py"])).unwrap_err();
        assert!(error.contains("gone.py"), "{error}");
        let error = hash_files(dir.path(), &names(&["../outside"])).unwrap_err();
        assert!(error.contains("../outside"), "{error}");
    }

    #[test]
    fn check_reports_each_changed_and_missing_file() {
        let dir = workspace_with(&[("a.py", "1"), ("b.py", "2"), ("c.py", "3")]);
        let recorded = hash_files(dir.path(), &names(&["a.py", "b.py", "c.py"])).unwrap();
        assert_eq!(check_files(dir.path(), &recorded), Ok(()));

        fs::write(dir.path().join("a.py"), "changed").unwrap();
        assert_eq!(
            check_files(dir.path(), &recorded),
            Err("protected file changed: a.py".into())
        );
        fs::write(dir.path().join("c.py"), "changed too").unwrap();
        fs::remove_file(dir.path().join("b.py")).unwrap();
        assert_eq!(
            check_files(dir.path(), &recorded),
            Err("protected file changed: a.py, c.py; protected file missing: b.py".into())
        );
    }
}
