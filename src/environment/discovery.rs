//! Finding environments by name on a search path.

use super::{EnvError, Environment, MANIFEST_FILE, family};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Colon-separated extra folders to search, after the built-in ones.
pub const SEARCH_PATH_VAR: &str = "REBENCH_ENVIRONMENTS";

/// `./environments`, `<data_dir>/environments`, then each entry of
/// `$REBENCH_ENVIRONMENTS`, all made absolute against the current directory.
pub fn search_path(data_dir: &Path) -> Vec<PathBuf> {
    let cwd = std::env::current_dir().unwrap_or_default();
    let extra = std::env::var_os(SEARCH_PATH_VAR).map(|v| v.to_string_lossy().into_owned());
    search_path_from(&cwd, data_dir, extra.as_deref())
}

/// `search_path` with its inputs spelled out, for tests.
pub fn search_path_from(cwd: &Path, data_dir: &Path, extra: Option<&str>) -> Vec<PathBuf> {
    let mut out = vec![
        cwd.join("environments"),
        cwd.join(data_dir).join("environments"),
    ];
    for entry in extra.unwrap_or("").split(':') {
        if !entry.trim().is_empty() {
            out.push(cwd.join(entry));
        }
    }
    out
}

fn has_manifest(dir: &Path) -> bool {
    dir.join(MANIFEST_FILE).is_file()
}

fn looks_like_path(s: &str) -> bool {
    s.contains('/') || s.starts_with('.')
}

/// A folder path (anything with '/' or starting with '.', or an existing
/// folder holding environment.toml) is loaded directly; a bare name is the
/// first `<dir>/<name>/environment.toml` on `search`.
pub fn resolve(name_or_path: &str, search: &[PathBuf]) -> Result<Environment, EnvError> {
    let as_path = Path::new(name_or_path);
    if let Some(found) = resolve_family_task(name_or_path, search) {
        return found;
    }
    if looks_like_path(name_or_path) {
        if has_manifest(as_path) {
            return Environment::load(as_path);
        }
        return Err(EnvError::NotFound {
            name: name_or_path.to_string(),
            searched: vec![as_path.to_path_buf()],
        });
    }
    if has_manifest(as_path) {
        return Environment::load(as_path);
    }
    let candidates: Vec<PathBuf> = search.iter().map(|dir| dir.join(name_or_path)).collect();
    match candidates.iter().find(|c| has_manifest(c)) {
        Some(found) => Environment::load(found),
        None => Err(EnvError::NotFound {
            name: name_or_path.to_string(),
            searched: candidates,
        }),
    }
}

/// A Task Standard task: `<family>/<task>` on the search path, or a path
/// whose parent folder is a family (`families/count_odds/main`). None when
/// `name` is neither (then it is an environment name or folder).
fn resolve_family_task(name: &str, search: &[PathBuf]) -> Option<Result<Environment, EnvError>> {
    let as_path = Path::new(name);
    if has_manifest(as_path) {
        return None;
    }
    if let Some((family, task)) = family::split_task_id(name)
        && let Some(root) = search
            .iter()
            .find(|root| family::family_name(&root.join(family)).as_deref() == Some(family))
    {
        return Some(family::open_task(&root.join(family), task));
    }
    let parent = as_path.parent()?;
    let task = as_path.file_name()?.to_str()?;
    family::family_name(parent)?;
    Some(family::open_task(parent, task))
}

/// Every environment folder on `search`, loaded (or why not), one per id
/// (the first on the path wins), sorted by id. A folder that fails to load is
/// keyed by its folder name.
pub fn list(search: &[PathBuf]) -> Vec<(PathBuf, Result<Environment, EnvError>)> {
    let mut by_id: BTreeMap<String, (PathBuf, Result<Environment, EnvError>)> = BTreeMap::new();
    for root in search {
        let Ok(entries) = std::fs::read_dir(root) else {
            continue; // Missing search folders are normal (e.g. no ./environments).
        };
        let mut dirs: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| has_manifest(p) || family::family_name(p).is_some())
            .collect();
        dirs.sort();
        for dir in dirs {
            if !has_manifest(&dir) {
                for (key, loaded) in family_tasks(&dir) {
                    by_id.entry(key).or_insert((dir.clone(), loaded));
                }
                continue;
            }
            let loaded = Environment::load(&dir);
            let key = match &loaded {
                Ok(env) => env.id().to_string(),
                Err(_) => dir
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
            };
            by_id.entry(key).or_insert((dir, loaded));
        }
    }
    by_id.into_values().collect()
}

/// Each task of the family in `dir` as (id, environment), or the family's
/// problem under its folder name.
fn family_tasks(dir: &Path) -> Vec<(String, Result<Environment, EnvError>)> {
    let folder = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let loaded = family::open(dir).and_then(|f| {
        let names = f.task_names().map_err(|message| {
            EnvError::Invalid(vec![super::Problem {
                file: f.dir.join(format!("{}.py", f.name)),
                field: "get_tasks".into(),
                message,
            }])
        })?;
        Ok((f, names))
    });
    match loaded {
        Ok((family, names)) => names
            .into_iter()
            .map(|task| (format!("{folder}/{task}"), family.task_environment(&task)))
            .collect(),
        Err(e) => vec![(folder, Err(e))],
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{VALID_MANIFEST, make_env, manifest_with_id};
    use super::*;

    #[test]
    fn search_path_order() {
        let cwd = Path::new("/home/u/project");
        let path = search_path_from(cwd, Path::new("data"), Some("/opt/envs::rel/envs:"));
        assert_eq!(
            path,
            vec![
                PathBuf::from("/home/u/project/environments"),
                PathBuf::from("/home/u/project/data/environments"),
                PathBuf::from("/opt/envs"),
                PathBuf::from("/home/u/project/rel/envs"),
            ]
        );
        let path = search_path_from(cwd, Path::new("/var/lib/rebench"), None);
        assert_eq!(path[1], PathBuf::from("/var/lib/rebench/environments"));
        assert_eq!(path.len(), 2);
        assert!(search_path(Path::new("/tmp/x"))[0].is_absolute());
    }

    #[test]
    fn resolve_takes_the_first_on_the_path() {
        let tmp = tempfile::tempdir().unwrap();
        let first = tmp.path().join("first");
        let second = tmp.path().join("second");
        make_env(
            &second,
            "demo",
            &VALID_MANIFEST.replace("Demo\"", "Second\""),
        );
        let search = vec![first.clone(), second.clone()];
        assert_eq!(resolve("demo", &search).unwrap().manifest.title, "Second");
        make_env(&first, "demo", &VALID_MANIFEST.replace("Demo\"", "First\""));
        assert_eq!(resolve("demo", &search).unwrap().manifest.title, "First");
    }

    #[test]
    fn resolve_loads_paths_directly() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = make_env(tmp.path(), "elsewhere", VALID_MANIFEST);
        let env = resolve(dir.to_str().unwrap(), &[]).unwrap();
        assert_eq!(env.dir, std::fs::canonicalize(&dir).unwrap());

        let missing = tmp.path().join("nope");
        match resolve(missing.to_str().unwrap(), &[tmp.path().to_path_buf()]) {
            Err(EnvError::NotFound { searched, .. }) => assert_eq!(searched, vec![missing]),
            other => panic!("expected NotFound, got {other:?}"),
        }
    }

    #[test]
    fn not_found_lists_where_it_looked() {
        let search = vec![
            PathBuf::from("/a/environments"),
            PathBuf::from("/b/environments"),
        ];
        let err = resolve("ghost", &search).unwrap_err();
        assert_eq!(
            err.to_string(),
            "environment \"ghost\" not found (looked in: /a/environments/ghost, /b/environments/ghost)"
        );
        match err {
            EnvError::NotFound { name, searched } => {
                assert_eq!(name, "ghost");
                assert_eq!(searched.len(), 2);
            }
            other => panic!("expected NotFound, got {other:?}"),
        }
    }

    #[test]
    fn list_is_sorted_and_first_wins() {
        let tmp = tempfile::tempdir().unwrap();
        let first = tmp.path().join("first");
        let second = tmp.path().join("second");
        make_env(&first, "zeta", &manifest_with_id("zeta"));
        make_env(&first, "alpha", &manifest_with_id("alpha"));
        make_env(&second, "alpha", &manifest_with_id("alpha"));
        make_env(&second, "broken", "id = ");
        make_env(&second, "mid", &manifest_with_id("mid"));
        std::fs::create_dir_all(second.join("not-an-env")).unwrap();
        let search = vec![first.clone(), tmp.path().join("missing"), second.clone()];

        let listed = list(&search);
        let names: Vec<String> = listed
            .iter()
            .map(|(dir, _)| dir.strip_prefix(tmp.path()).unwrap().display().to_string())
            .collect();
        assert_eq!(
            names,
            vec!["first/alpha", "second/broken", "second/mid", "first/zeta"]
        );
        assert!(matches!(listed[1].1, Err(EnvError::Invalid(_))));
        assert!(listed[0].1.is_ok());
    }
}
