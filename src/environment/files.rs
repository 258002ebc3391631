//! Copying an environment's starting workspace, and laying the hidden
//! reference files over a copy to build the reference solution.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// Recursively copies `src` into `dst`, keeping file modes and symlinks.
/// `dst` must not exist or be an empty directory, so a session never starts
/// on top of leftovers.
pub fn copy_workspace(src: &Path, dst: &Path) -> io::Result<()> {
    if !fs::metadata(src)?.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} is not a directory", src.display()),
        ));
    }
    match fs::read_dir(dst) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    format!("{} already exists and is not empty", dst.display()),
                ));
            }
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => fs::create_dir_all(dst)?,
        Err(e) => return Err(e),
    }
    copy_tree(src, dst)
}

/// Where a preparation keeps files that belong in every session's workspace
/// (e.g. models trained by `prepare`); the rest of the preparation stays hidden.
pub const PREPARED_WORKSPACE: &str = "workspace";

/// A session's starting workspace: the environment's `workspace/`, then the
/// preparation's `workspace/` files (if any) laid over it.
pub fn assemble_workspace(
    starting: &Path,
    prepared_dir: Option<&Path>,
    dst: &Path,
) -> io::Result<()> {
    copy_workspace(starting, dst)?;
    if let Some(extra) = prepared_dir
        .map(|d| d.join(PREPARED_WORKSPACE))
        .filter(|d| d.is_dir())
    {
        overlay(&extra, dst)?;
    }
    Ok(())
}

/// Lays the reference solution (`reference/`) over a workspace for
/// `profile`: every file, then each per-profile variant `<stem>.<profile>.<ext>`
/// in place of `<stem>.<ext>` (an answer that depends on the profile's
/// scale), the variant's own copy removed. Scorers read only the names the
/// instructions give; the variants reach them only this way.
pub fn overlay_reference(reference: &Path, dst: &Path, profile: Option<&str>) -> io::Result<()> {
    overlay(reference, dst)?;
    let Some(profile) = profile else {
        return Ok(());
    };
    let marker = format!(".{profile}");
    for rel in relative_files(reference)? {
        let Some(name) = rel.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        let plain = match name.split_once('.') {
            Some((stem, rest)) if format!(".{rest}").starts_with(&marker) => {
                let ext = &rest[profile.len()..];
                if !(ext.is_empty() || ext.starts_with('.')) {
                    continue;
                }
                format!("{stem}{ext}")
            }
            _ => continue,
        };
        let variant = dst.join(&rel);
        fs::copy(&variant, variant.with_file_name(plain))?;
        fs::remove_file(&variant)?;
    }
    Ok(())
}

fn relative_files(root: &Path) -> io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir)? {
            let path = entry?.path();
            if path.is_dir() {
                stack.push(path);
            } else if let Ok(rel) = path.strip_prefix(root) {
                out.push(rel.to_path_buf());
            }
        }
    }
    Ok(out)
}

/// Copies every file under `src` onto `dst`, creating folders as needed and
/// replacing files that are already there. Files only in `dst` are kept.
pub fn overlay(src: &Path, dst: &Path) -> io::Result<()> {
    fs::create_dir_all(dst)?;
    copy_tree(src, dst)
}

fn copy_tree(src: &Path, dst: &Path) -> io::Result<()> {
    for entry in fs::read_dir(src)? {
        let entry = entry?;
        let from = entry.path();
        let to = dst.join(entry.file_name());
        let kind = entry.file_type()?;
        if kind.is_dir() {
            // symlink_metadata: never follow a symlinked folder out of `dst`.
            let is_real_dir = fs::symlink_metadata(&to).is_ok_and(|m| m.is_dir());
            if !is_real_dir {
                remove_if_present(&to)?;
                fs::create_dir(&to)?;
            }
            copy_tree(&from, &to)?;
            // Set the mode last: a read-only source folder would otherwise block its own copy.
            fs::set_permissions(&to, fs::metadata(&from)?.permissions())?;
        } else if kind.is_symlink() {
            remove_if_present(&to)?;
            copy_symlink(&from, &to)?;
        } else {
            // Remove first so a read-only or symlinked target is replaced, not written through.
            remove_if_present(&to)?;
            fs::copy(&from, &to)?;
        }
    }
    Ok(())
}

fn remove_if_present(path: &Path) -> io::Result<()> {
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => fs::remove_dir_all(path),
        Ok(_) => fs::remove_file(path),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(unix)]
fn copy_symlink(from: &Path, to: &Path) -> io::Result<()> {
    std::os::unix::fs::symlink(fs::read_link(from)?, to)
}

#[cfg(not(unix))]
fn copy_symlink(from: &Path, to: &Path) -> io::Result<()> {
    fs::copy(from, to).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn write(path: &Path, text: &str) {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }

    fn mode(path: &Path) -> u32 {
        fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn a_reference_variant_takes_the_plain_name_under_its_profile() {
        let tmp = tempfile::tempdir().unwrap();
        let reference = tmp.path().join("reference");
        write(&reference.join("answer.json"), "base");
        write(&reference.join("answer.smoke.json"), "smoke");
        write(&reference.join("sub/model.smoke"), "smoke-model");
        write(&reference.join("notes.smokey.txt"), "not a variant");
        let ws = tmp.path().join("ws");
        overlay_reference(&reference, &ws, Some("smoke")).unwrap();
        assert_eq!(fs::read_to_string(ws.join("answer.json")).unwrap(), "smoke");
        assert!(!ws.join("answer.smoke.json").exists());
        assert_eq!(
            fs::read_to_string(ws.join("sub/model")).unwrap(),
            "smoke-model"
        );
        assert!(ws.join("notes.smokey.txt").exists());
        let full = tmp.path().join("full");
        overlay_reference(&reference, &full, Some("full")).unwrap();
        assert_eq!(
            fs::read_to_string(full.join("answer.json")).unwrap(),
            "base"
        );
    }

    #[test]
    fn copies_a_tree_with_modes_and_symlinks() {
        let tmp = tempfile::tempdir().unwrap();
        let src = tmp.path().join("src");
        write(&src.join("a.txt"), "a");
        write(&src.join("sub/deep/b.sh"), "#!/bin/sh\n");
        fs::set_permissions(src.join("sub/deep/b.sh"), fs::Permissions::from_mode(0o755)).unwrap();
        fs::create_dir_all(src.join("empty")).unwrap();
        std::os::unix::fs::symlink("a.txt", src.join("link")).unwrap();

        let dst = tmp.path().join("new/ws");
        copy_workspace(&src, &dst).unwrap();
        assert_eq!(fs::read_to_string(dst.join("a.txt")).unwrap(), "a");
        assert_eq!(
            fs::read_to_string(dst.join("sub/deep/b.sh")).unwrap(),
            "#!/bin/sh\n"
        );
        assert_eq!(mode(&dst.join("sub/deep/b.sh")), 0o755);
        assert!(dst.join("empty").is_dir());
        assert_eq!(fs::read_link(dst.join("link")).unwrap(), Path::new("a.txt"));
    }

    #[test]
    fn copies_into_an_empty_existing_folder_but_not_a_full_one() {
        let tmp = tempfile::tempdir().unwrap();
        let src = tmp.path().join("src");
        write(&src.join("a.txt"), "a");
        let empty = tmp.path().join("empty");
        fs::create_dir(&empty).unwrap();
        copy_workspace(&src, &empty).unwrap();
        assert!(empty.join("a.txt").is_file());

        let err = copy_workspace(&src, &empty).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::AlreadyExists);
        assert!(copy_workspace(&tmp.path().join("missing"), &tmp.path().join("x")).is_err());
    }

    #[test]
    fn overlay_replaces_and_adds_but_keeps_others() {
        let tmp = tempfile::tempdir().unwrap();
        let ws = tmp.path().join("ws");
        write(&ws.join("solution.py"), "slow");
        write(&ws.join("score.py"), "helper");
        fs::set_permissions(ws.join("solution.py"), fs::Permissions::from_mode(0o444)).unwrap();
        let reference = tmp.path().join("reference");
        write(&reference.join("solution.py"), "fast");
        write(&reference.join("lib/extra.py"), "extra");

        overlay(&reference, &ws).unwrap();
        assert_eq!(fs::read_to_string(ws.join("solution.py")).unwrap(), "fast");
        assert_eq!(fs::read_to_string(ws.join("score.py")).unwrap(), "helper");
        assert_eq!(
            fs::read_to_string(ws.join("lib/extra.py")).unwrap(),
            "extra"
        );
    }
}
