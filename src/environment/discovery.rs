//! Finding environments by name on a search path.

use super::{EnvError, Environment, MANIFEST_FILE, family};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Colon-separated extra folders to search, after `./environments`.
pub const SEARCH_PATH_VAR: &str = "REBENCH_ENVIRONMENTS";

/// One folder environments are looked for in, and why it is on the path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchPlace {
    pub dir: PathBuf,
    pub origin: String,
}

/// Where environments are looked for, first first, and how a user adds a
/// folder (for the message when one is not found).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SearchPath {
    pub places: Vec<SearchPlace>,
    /// The user's config file, named in the advice.
    pub config_file: Option<PathBuf>,
}

impl SearchPath {
    /// Folders given as they are (tests, and callers that know their own).
    pub fn of(dirs: &[PathBuf]) -> SearchPath {
        SearchPath {
            places: dirs
                .iter()
                .map(|dir| SearchPlace {
                    dir: dir.clone(),
                    origin: "given".into(),
                })
                .collect(),
            config_file: None,
        }
    }

    pub fn dirs(&self) -> impl Iterator<Item = &PathBuf> {
        self.places.iter().map(|p| &p.dir)
    }

    fn push(&mut self, dir: PathBuf, origin: impl Into<String>) {
        let dir = normalize(&dir);
        if !self.places.iter().any(|p| p.dir == dir) {
            self.places.push(SearchPlace {
                dir,
                origin: origin.into(),
            });
        }
    }

    /// How to put a folder of environments on the path.
    pub fn advice(&self) -> String {
        let config = self
            .config_file
            .as_ref()
            .map_or("~/.config/rebench/config.toml".into(), |p| {
                p.display().to_string()
            });
        format!(
            "add a folder of environments with {SEARCH_PATH_VAR}=DIR[:DIR...] or \
             `environments = [\"DIR\"]` in {config}, or give the environment's folder as a path"
        )
    }
}

/// The checkout this binary was built from: bundled environments are found
/// from any folder as long as it is there.
const BUILD_CHECKOUT: &str = env!("CARGO_MANIFEST_DIR");

/// Where environments are looked for, first wins: `./environments`,
/// `$REBENCH_ENVIRONMENTS`, the config file's `environments`,
/// `<data_dir>/environments`, beside the binary (`<bin>/environments`,
/// `<bin>/../share/rebench/environments`), and the checkout it was built from.
pub fn search_path(data_dir: &Path) -> SearchPath {
    let cwd = std::env::current_dir().unwrap_or_default();
    let extra = std::env::var_os(SEARCH_PATH_VAR).map(|v| v.to_string_lossy().into_owned());
    let config_file = crate::settings::user_config_path();
    // A broken config file is reported by the UIs that read it; here it adds nothing.
    let configured = config_file
        .as_deref()
        .and_then(|p| crate::settings::Config::load(p).ok())
        .map(|c| c.environments)
        .unwrap_or_default();
    let binary_dir = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(Path::to_path_buf));
    let mut path = search_path_from(&Sources {
        cwd: &cwd,
        data_dir,
        extra: extra.as_deref(),
        configured: &configured,
        binary_dir: binary_dir.as_deref(),
        build_checkout: Path::new(BUILD_CHECKOUT),
    });
    path.config_file = config_file;
    path
}

/// What the search path is made of, spelled out for tests.
pub struct Sources<'a> {
    pub cwd: &'a Path,
    pub data_dir: &'a Path,
    pub extra: Option<&'a str>,
    pub configured: &'a [PathBuf],
    pub binary_dir: Option<&'a Path>,
    pub build_checkout: &'a Path,
}

/// `search_path` from its inputs; relative folders are taken against `cwd`.
pub fn search_path_from(sources: &Sources) -> SearchPath {
    let cwd = sources.cwd;
    let mut path = SearchPath::default();
    path.push(cwd.join("environments"), "the current folder");
    for entry in sources.extra.unwrap_or("").split(':') {
        if !entry.trim().is_empty() {
            path.push(cwd.join(entry), format!("${SEARCH_PATH_VAR}"));
        }
    }
    for dir in sources.configured {
        path.push(cwd.join(dir), "the config file");
    }
    path.push(
        cwd.join(sources.data_dir).join("environments"),
        "the data dir",
    );
    if let Some(bin) = sources.binary_dir {
        path.push(bin.join("environments"), "beside the binary");
        path.push(
            bin.join("../share/rebench/environments"),
            "beside the binary",
        );
    }
    path.push(
        sources.build_checkout.join("environments"),
        "the checkout rebench was built from",
    );
    path
}

/// `a/./b/../c` as `a/c`, without touching the disk (a folder on the path
/// need not exist).
fn normalize(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    out.push("..");
                }
            }
            other => out.push(other),
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
pub fn resolve(name_or_path: &str, search: &SearchPath) -> Result<Environment, EnvError> {
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
            searched: vec![(as_path.to_path_buf(), "as given".into())],
            advice: "check the path (a folder holding environment.toml)".into(),
            known: Vec::new(),
            suggestion: None,
        });
    }
    if has_manifest(as_path) {
        return Environment::load(as_path);
    }
    let candidates: Vec<(PathBuf, String)> = search
        .places
        .iter()
        .map(|place| (place.dir.join(name_or_path), place.origin.clone()))
        .collect();
    match candidates.iter().find(|(c, _)| has_manifest(c)) {
        Some((found, _)) => Environment::load(found),
        None => {
            // Ids, and the folder names of environments that do not load.
            let known: Vec<String> = list(search)
                .into_iter()
                .map(|(dir, loaded)| match loaded {
                    Ok(env) => env.id().to_string(),
                    Err(_) => dir
                        .file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_default(),
                })
                .collect();
            Err(EnvError::NotFound {
                name: name_or_path.to_string(),
                searched: candidates,
                advice: search.advice(),
                suggestion: closest(name_or_path, &known),
                known,
            })
        }
    }
}

/// The known id a mistyped `name` most likely meant: within a third of its
/// length in edits (at least 2), the closest.
fn closest(name: &str, known: &[String]) -> Option<String> {
    let limit = (name.chars().count() / 3).max(2);
    known
        .iter()
        .map(|id| (edit_distance(name, id), id))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, id)| id.clone())
}

/// Levenshtein distance over characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitute = diagonal + usize::from(ca != *cb);
            diagonal = row[j + 1];
            row[j + 1] = substitute.min(row[j] + 1).min(diagonal + 1);
        }
    }
    row[b.len()]
}

/// A Task Standard task: `<family>/<task>` on the search path, or a path
/// whose parent folder is a family (`families/count_odds/main`). None when
/// `name` is neither (then it is an environment name or folder).
fn resolve_family_task(name: &str, search: &SearchPath) -> Option<Result<Environment, EnvError>> {
    let as_path = Path::new(name);
    if has_manifest(as_path) {
        return None;
    }
    if let Some((family, task)) = family::split_task_id(name)
        && let Some(root) = search
            .dirs()
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
pub fn list(search: &SearchPath) -> Vec<(PathBuf, Result<Environment, EnvError>)> {
    let mut by_id: BTreeMap<String, (PathBuf, Result<Environment, EnvError>)> = BTreeMap::new();
    for root in search.dirs() {
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
        let configured = [PathBuf::from("/etc/envs"), PathBuf::from("/opt/envs")];
        let path = search_path_from(&Sources {
            cwd,
            data_dir: Path::new("data"),
            extra: Some("/opt/envs::rel/envs:"),
            configured: &configured,
            binary_dir: Some(Path::new("/usr/local/bin")),
            build_checkout: Path::new("/home/u/project"),
        });
        let places: Vec<(String, &str)> = path
            .places
            .iter()
            .map(|p| (p.dir.display().to_string(), p.origin.as_str()))
            .collect();
        assert_eq!(
            places,
            vec![
                ("/home/u/project/environments".into(), "the current folder"),
                ("/opt/envs".into(), "$REBENCH_ENVIRONMENTS"),
                ("/home/u/project/rel/envs".into(), "$REBENCH_ENVIRONMENTS"),
                ("/etc/envs".into(), "the config file"),
                ("/home/u/project/data/environments".into(), "the data dir"),
                ("/usr/local/bin/environments".into(), "beside the binary"),
                (
                    "/usr/local/share/rebench/environments".into(),
                    "beside the binary"
                ),
                // The checkout is the current folder here: listed once.
            ]
        );
        let path = search_path_from(&Sources {
            cwd: Path::new("/tmp"),
            data_dir: Path::new("/var/lib/rebench"),
            extra: None,
            configured: &[],
            binary_dir: None,
            build_checkout: Path::new("/src/rebench"),
        });
        let dirs: Vec<&PathBuf> = path.dirs().collect();
        assert_eq!(
            dirs,
            [
                Path::new("/tmp/environments"),
                Path::new("/var/lib/rebench/environments"),
                Path::new("/src/rebench/environments")
            ]
        );
        let here = search_path(Path::new("/tmp/x"));
        assert!(here.dirs().all(|d| d.is_absolute()));
        let checkout = Path::new(BUILD_CHECKOUT).join("environments");
        assert!(
            here.dirs().any(|d| *d == checkout),
            "the checkout it was built from is searched too"
        );
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
        let search = SearchPath::of(&[first.clone(), second.clone()]);
        assert_eq!(resolve("demo", &search).unwrap().manifest.title, "Second");
        make_env(&first, "demo", &VALID_MANIFEST.replace("Demo\"", "First\""));
        assert_eq!(resolve("demo", &search).unwrap().manifest.title, "First");
    }

    #[test]
    fn resolve_loads_paths_directly() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = make_env(tmp.path(), "elsewhere", VALID_MANIFEST);
        let env = resolve(dir.to_str().unwrap(), &SearchPath::default()).unwrap();
        assert_eq!(env.dir, std::fs::canonicalize(&dir).unwrap());

        let missing = tmp.path().join("nope");
        match resolve(
            missing.to_str().unwrap(),
            &SearchPath::of(&[tmp.path().to_path_buf()]),
        ) {
            Err(EnvError::NotFound { searched, .. }) => {
                assert_eq!(searched, vec![(missing, "as given".to_string())])
            }
            other => panic!("expected NotFound, got {other:?}"),
        }
    }

    #[test]
    fn a_mistyped_id_gets_the_closest_known_one() {
        let known: Vec<String> = ["prefix-sum", "optimize-kernel", "scaling-law"]
            .map(String::from)
            .into();
        assert_eq!(closest("prefx-sum", &known).as_deref(), Some("prefix-sum"));
        assert_eq!(
            closest("optimise-kernel", &known).as_deref(),
            Some("optimize-kernel")
        );
        assert_eq!(closest("zzz", &known), None);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "abc"), 3);
        let dir = tempfile::tempdir().unwrap();
        let env = dir.path().join("prefix-sum");
        std::fs::create_dir_all(&env).unwrap();
        std::fs::write(env.join("environment.toml"), "id = \"prefix-sum\"\n").unwrap();
        let mut search = SearchPath::default();
        search.push(dir.path().to_path_buf(), "the data dir");
        let message = resolve("prefx-sum", &search).unwrap_err().to_string();
        assert!(
            message.starts_with("environment \"prefx-sum\" not found: did you mean prefix-sum? (known: prefix-sum); looked in:"),
            "{message}"
        );
    }

    #[test]
    fn not_found_lists_where_it_looked_and_how_to_add_a_place() {
        let mut search = SearchPath::default();
        search.push(PathBuf::from("/a/environments"), "the current folder");
        search.push(PathBuf::from("/b/environments"), "the data dir");
        search.config_file = Some(PathBuf::from("/home/u/.config/rebench/config.toml"));
        let err = resolve("ghost", &search).unwrap_err();
        assert_eq!(
            err.to_string(),
            "environment \"ghost\" not found; looked in:\n  \
             /a/environments/ghost (the current folder)\n  \
             /b/environments/ghost (the data dir)\n\
             add a folder of environments with REBENCH_ENVIRONMENTS=DIR[:DIR...] or \
             `environments = [\"DIR\"]` in /home/u/.config/rebench/config.toml, \
             or give the environment's folder as a path"
        );
        match err {
            EnvError::NotFound { name, searched, .. } => {
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
        let search = SearchPath::of(&[first.clone(), tmp.path().join("missing"), second.clone()]);

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
