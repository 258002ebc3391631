//! Hand-made environment folders for unit tests.

use std::fs;
use std::path::{Path, PathBuf};

pub const VALID_MANIFEST: &str = r#"id = "demo"
title = "Demo"
summary = "A demo environment."
instructions = "instructions.md"
workspace = "workspace"
default_profile = "full"

[budget]
default = "8h"
presets = ["2h", "8h", "32h"]

[hardware]
gpus = 0
cpus = 1
memory_gb = 1

[scoring]
command = ["python3", "{env}/scorer/score.py", "{workspace}"]
timeout = "5m"
metric = { name = "runtime", unit = "ms" }
transform = "log"
starting = 4.76
reference = 1.6
aggregate = "best"
visible = true
protected = ["score.py"]

[profiles.full]

[profiles.smoke]
starting = 120.0
reference = 30.0
timeout = "60s"
env = { PREFIX_SUM_N = "20000" }
"#;

/// Creates `<parent>/<name>/` with instructions, a workspace holding
/// score.py, and `manifest` as environment.toml. Returns the folder.
pub fn make_env(parent: &Path, name: &str, manifest: &str) -> PathBuf {
    let dir = parent.join(name);
    fs::create_dir_all(dir.join("workspace")).unwrap();
    fs::write(dir.join("instructions.md"), "Do the thing.\n").unwrap();
    fs::write(dir.join("workspace/score.py"), "print('hi')\n").unwrap();
    fs::write(dir.join("environment.toml"), manifest).unwrap();
    dir
}

/// The `demo` environment (`VALID_MANIFEST`), loaded, in a temp dir of its own.
pub fn demo_env() -> (tempfile::TempDir, super::Environment) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = make_env(tmp.path(), "demo", VALID_MANIFEST);
    let env = super::Environment::load(&dir).unwrap();
    (tmp, env)
}

/// `VALID_MANIFEST` with the id replaced.
pub fn manifest_with_id(id: &str) -> String {
    VALID_MANIFEST.replace("id = \"demo\"", &format!("id = \"{id}\""))
}
