//! Commands printed for the user to paste: quoted for the shell, and
//! naming this very binary when `rebench` on PATH is not it.

use crate::paths::DataPaths;
use std::path::Path;

/// `arg` as one shell word.
pub fn shell_quote(arg: &str) -> String {
    if !arg.is_empty()
        && arg
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./=:,+@%".contains(&b))
    {
        arg.to_string()
    } else {
        format!("'{}'", arg.replace('\'', r"'\''"))
    }
}

/// How to run this binary from where the user is: `rebench` when that is
/// what PATH finds, else the binary's own path.
pub fn rebench_program() -> String {
    let me = std::env::current_exe().ok();
    let path = std::env::var_os("PATH");
    program_name(me.as_deref(), path.as_deref().map(Path::new))
}

fn program_name(me: Option<&Path>, path: Option<&Path>) -> String {
    let Some(me) = me else {
        return "rebench".into();
    };
    let canonical = |p: &Path| std::fs::canonicalize(p).ok();
    let on_path = path.and_then(|path| {
        std::env::split_paths(path.as_os_str())
            .map(|dir| dir.join("rebench"))
            .find(|candidate| candidate.is_file())
    });
    match on_path {
        Some(found) if canonical(&found).is_some() && canonical(&found) == canonical(me) => {
            "rebench".into()
        }
        _ => shell_quote(&me.display().to_string()),
    }
}

/// `rebench <rest>` as the user can paste it here, with `--data-dir` when
/// it is not the default (e.g. `rebench attach 3ths5c`).
pub fn rebench_command(paths: &DataPaths, rest: &str) -> String {
    let program = rebench_program();
    if DataPaths::resolve(None) == *paths {
        format!("{program} {rest}")
    } else {
        format!(
            "{program} --data-dir {} {rest}",
            shell_quote(&paths.root.display().to_string())
        )
    }
}

/// `text` with every control character but newline and tab escaped
/// (`\u{1b}`): notes, titles and scorer messages come from participants'
/// code, and an escape sequence must not reach the operator's terminal
/// (clipboard writes, screen clears). JSON output stays exact.
pub fn printable(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() && c != '\n' && c != '\t' {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn path_of(dirs: &[PathBuf]) -> std::ffi::OsString {
        std::env::join_paths(dirs).unwrap()
    }

    #[test]
    fn quoting() {
        assert_eq!(shell_quote("plain-word_1.2"), "plain-word_1.2");
        assert_eq!(shell_quote("two words"), "'two words'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(shell_quote(""), "''");
    }

    #[test]
    fn the_bare_name_only_when_path_finds_this_binary() {
        let tmp = tempfile::tempdir().unwrap();
        let bin = tmp.path().join("bin");
        let other = tmp.path().join("other bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::create_dir_all(&other).unwrap();
        let me = bin.join("rebench");
        std::fs::write(&me, "").unwrap();
        std::fs::write(other.join("rebench"), "").unwrap();

        let path = path_of(std::slice::from_ref(&bin));
        assert_eq!(program_name(Some(&me), Some(Path::new(&path))), "rebench");
        // Another rebench first on PATH, or none at all: the full path.
        let path = path_of(&[other.clone(), bin.clone()]);
        assert_eq!(
            program_name(Some(&me), Some(Path::new(&path))),
            me.display().to_string()
        );
        let moved = other.join("rebench");
        assert_eq!(
            program_name(Some(&moved), None),
            format!("'{}'", moved.display())
        );
    }
}
