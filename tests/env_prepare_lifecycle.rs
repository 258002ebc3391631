//! `environment::prepare` on a tiny fixture environment: an empty
//! requirements.txt (a venv, no network) and a command that writes a data
//! file and counts its runs. Covers reuse, `check`, damage, staleness,
//! failing or hanging commands, and venvs shared between environments with
//! identical requirements (also when prepared concurrently).

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is a failure with its message

use rebench::environment::Environment;
use rebench::environment::prepare::{PrepareError, check, prepare, prepared_dir};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

const MANIFEST: &str = r#"id = "prep-demo"
title = "Prepare demo"
summary = "A fixture with a [prepare] section."
default_profile = "full"

[budget]
default = "1h"

[scoring]
command = ["python3", "{env}/score.py"]
timeout = "1m"
metric = { name = "runtime", unit = "ms" }
starting = 2
reference = 1

[prepare]
requirements = "requirements.txt"
command = ["{python}", "{env}/prepare/make_data.py", "{prepared}"]
timeout = "2m"

[profiles.full]
prepare_env = { DATA_SIZE = "4096" }

[profiles.smoke]
prepare_env = { DATA_SIZE = "100" }
"#;

/// Counts its runs in <env>/runs.txt, writes data/x.bin (DATA_SIZE bytes)
/// and data/info.json (what it was run with) into the preparation folder.
const MAKE_DATA: &str = r#"import json, os, sys
env_dir = os.environ["REBENCH_ENV_DIR"]
counter = os.path.join(env_dir, "runs.txt")
runs = int(open(counter).read()) if os.path.exists(counter) else 0
open(counter, "w").write(str(runs + 1))
prepared = os.environ["REBENCH_PREPARED"]
assert sys.argv[1] == prepared and os.getcwd() == prepared
os.makedirs("data", exist_ok=True)
open("data/x.bin", "wb").write(b"\x07" * int(os.environ["DATA_SIZE"]))
info = {"profile": os.environ["REBENCH_PROFILE"], "python": sys.prefix,
        "venv": os.environ.get("VIRTUAL_ENV"), "path": os.environ["PATH"]}
json.dump(info, open("data/info.json", "w"))
print("wrote data/x.bin")
if os.environ.get("FAIL_PREPARE"):
    print("cannot fetch the weights", file=sys.stderr)
    sys.exit(4)
"#;

fn python_available() -> bool {
    let found = Command::new("python3")
        .args(["-c", "import venv"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        use std::io::Write;
        // Straight to fd 2: the test harness does not capture this, so the skip is seen.
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED: python3 with venv not found; prepare tests did not run"
        );
    }
    found
}

struct Fixture {
    _tmp: tempfile::TempDir,
    env: Environment,
    data: PathBuf,
}

fn fixture(manifest: &str) -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("prep-demo");
    fs::create_dir_all(dir.join("workspace")).unwrap();
    fs::create_dir_all(dir.join("prepare")).unwrap();
    fs::write(dir.join("instructions.md"), "Prepare me.\n").unwrap();
    fs::write(dir.join("requirements.txt"), "# nothing to install\n").unwrap();
    fs::write(dir.join("prepare/make_data.py"), MAKE_DATA).unwrap();
    fs::write(dir.join("environment.toml"), manifest).unwrap();
    let env = Environment::load(&dir).unwrap();
    let data = tmp.path().join("data");
    Fixture {
        _tmp: tmp,
        env,
        data,
    }
}

fn runs(env: &Environment) -> u32 {
    fs::read_to_string(env.dir.join("runs.txt"))
        .map(|t| t.trim().parse().unwrap())
        .unwrap_or(0)
}

fn prepare_logged(f: &Fixture, profile: Option<&str>) -> (Result<PathBuf, PrepareError>, String) {
    let mut log = Vec::new();
    let result = prepare(&f.env, profile, &f.data, &mut log).map(|p| p.dir);
    (result, String::from_utf8(log).unwrap())
}

fn check_message(f: &Fixture, profile: Option<&str>) -> String {
    check(&f.env, profile, &f.data).unwrap_err().to_string()
}

#[test]
fn prepare_reuses_checks_and_repairs() {
    if !python_available() {
        return;
    }
    let f = fixture(MANIFEST);
    let fix = "run `rebench env prepare prep-demo --profile smoke`";
    assert_eq!(
        check_message(&f, Some("smoke")),
        format!("environment prep-demo (profile smoke) is not prepared on this machine: {fix}")
    );

    let mut log = Vec::new();
    let prepared = prepare(&f.env, Some("smoke"), &f.data, &mut log).unwrap();
    let log = String::from_utf8(log).unwrap();
    let dir = f.data.join("prepared/prep-demo/smoke");
    assert_eq!(prepared.dir, dir);
    assert_eq!(prepared_dir(&f.data, &f.env, Some("smoke")), dir);
    // The venv is the shared one for these requirements: <data>/venvs/<key>.
    let venv = prepared.venv.clone().unwrap();
    assert_eq!(venv.parent(), Some(f.data.join("venvs").as_path()));
    let key = venv.file_name().unwrap().to_string_lossy().into_owned();
    assert_eq!(key.len(), 16, "{key}");
    assert_eq!(prepared.bin_dir, Some(venv.join("bin")));
    assert!(venv.join("bin/python").exists());
    assert!(venv.join(".rebench-venv.json").exists());
    assert!(!dir.join("venv").exists());
    assert!(log.contains("creating a venv"), "{log}");
    assert!(log.contains("  | wrote data/x.bin"), "{log}");
    assert!(log.contains("2 file(s) recorded in prepared.json"), "{log}");
    assert_eq!(runs(&f.env), 1);
    assert_eq!(fs::read(dir.join("data/x.bin")).unwrap().len(), 100);

    // The command ran with the venv's python, first on PATH, under the profile.
    let info: serde_json::Value =
        serde_json::from_slice(&fs::read(dir.join("data/info.json")).unwrap()).unwrap();
    assert_eq!(info["profile"], "smoke");
    assert_eq!(info["venv"], venv.to_string_lossy().as_ref());
    assert_eq!(
        Path::new(info["python"].as_str().unwrap())
            .canonicalize()
            .unwrap(),
        venv.canonicalize().unwrap()
    );
    let path = info["path"].as_str().unwrap();
    assert!(path.starts_with(&format!("{}:", venv.join("bin").display())));

    // Intact: a second prepare runs nothing.
    let (again, log) = prepare_logged(&f, Some("smoke"));
    assert_eq!(again.unwrap(), dir);
    assert!(log.contains("is already prepared"), "{log}");
    assert_eq!(runs(&f.env), 1);
    assert_eq!(check(&f.env, Some("smoke"), &f.data).unwrap(), prepared);

    // Damage is named with the command that repairs it.
    fs::write(dir.join("data/x.bin"), b"tampered").unwrap();
    let err = check(&f.env, Some("smoke"), &f.data).unwrap_err();
    assert!(err.needs_prepare());
    assert_eq!(
        err.to_string(),
        format!("environment prep-demo (profile smoke) was damaged: data/x.bin changed; {fix}")
    );
    let (repaired, log) = prepare_logged(&f, Some("smoke"));
    repaired.unwrap();
    assert!(log.contains("removing data/x.bin"), "{log}");
    assert!(log.contains("reusing the venv"), "{log}");
    assert_eq!(runs(&f.env), 2);
    assert_eq!(fs::read(dir.join("data/x.bin")).unwrap().len(), 100);
    check(&f.env, Some("smoke"), &f.data).unwrap();

    fs::remove_file(dir.join("data/x.bin")).unwrap();
    assert_eq!(
        check_message(&f, Some("smoke")),
        format!("environment prep-demo (profile smoke) was damaged: data/x.bin missing; {fix}")
    );
    prepare_logged(&f, Some("smoke")).0.unwrap();

    // A venv that lost its interpreter is rebuilt, in the same place.
    fs::remove_file(venv.join("bin/python")).unwrap();
    let message = check_message(&f, Some("smoke"));
    assert!(
        message.contains(&format!("was damaged: venvs/{key}/bin/python missing;")),
        "{message}"
    );
    let (rebuilt, log) = prepare_logged(&f, Some("smoke"));
    rebuilt.unwrap();
    assert!(log.contains("removing the old venv"), "{log}");
    assert_eq!(
        check(&f.env, Some("smoke"), &f.data).unwrap().venv,
        Some(venv.clone())
    );

    // A half-built venv (no marker: its build died) is not trusted.
    fs::remove_file(venv.join(".rebench-venv.json")).unwrap();
    let message = check_message(&f, Some("smoke"));
    assert!(
        message.contains(&format!("venvs/{key} is incomplete")),
        "{message}"
    );
    prepare_logged(&f, Some("smoke")).0.unwrap();
    check(&f.env, Some("smoke"), &f.data).unwrap();

    // Editing the prepare script makes the preparation outdated.
    let script = f.env.dir.join("prepare/make_data.py");
    fs::write(&script, format!("{MAKE_DATA}\n# v2\n")).unwrap();
    assert_eq!(
        check_message(&f, Some("smoke")),
        format!(
            "environment prep-demo (profile smoke) changed since it was prepared \
             (prepare/make_data.py); {fix}"
        )
    );

    // No record at all reads as "not prepared".
    fs::remove_file(dir.join("prepared.json")).unwrap();
    assert!(check_message(&f, Some("smoke")).contains("is not prepared on this machine"));
}

#[test]
fn profiles_are_prepared_separately() {
    if !python_available() {
        return;
    }
    let f = fixture(MANIFEST);
    // No profile asked for: the default profile (full).
    let dir = prepare_logged(&f, None).0.unwrap();
    assert_eq!(dir, f.data.join("prepared/prep-demo/full"));
    assert_eq!(fs::read(dir.join("data/x.bin")).unwrap().len(), 4096);
    check(&f.env, Some("full"), &f.data).unwrap();
    assert!(check_message(&f, Some("smoke")).contains("(profile smoke) is not prepared"));

    let err = prepare_logged(&f, Some("fast")).0.unwrap_err();
    assert!(!err.needs_prepare());
    assert!(err.to_string().contains("no profile \"fast\""), "{err}");
}

#[test]
fn failing_and_hanging_commands_leave_nothing_prepared() {
    if !python_available() {
        return;
    }
    let failing = MANIFEST.replace(
        "prepare_env = { DATA_SIZE = \"100\" }",
        "prepare_env = { DATA_SIZE = \"100\", FAIL_PREPARE = \"1\" }",
    );
    let f = fixture(&failing);
    let err = prepare_logged(&f, Some("smoke")).0.unwrap_err();
    let text = err.to_string();
    assert!(
        text.starts_with("the prepare command failed (exit status 4)"),
        "{text}"
    );
    assert!(text.contains("cannot fetch the weights"), "{text}");
    assert!(check_message(&f, Some("smoke")).contains("is not prepared on this machine"));

    let hanging = MANIFEST
        .replace(
            "command = [\"{python}\", \"{env}/prepare/make_data.py\", \"{prepared}\"]",
            "command = [\"sh\", \"-c\", \"echo started; sleep 60\"]",
        )
        // No venv either: the 1 s limit bounds every step, and venv creation takes longer.
        .replace("requirements = \"requirements.txt\"\n", "")
        .replace("timeout = \"2m\"", "timeout = \"1s\"");
    let f = fixture(&hanging);
    let started = std::time::Instant::now();
    let err = prepare_logged(&f, Some("smoke")).0.unwrap_err();
    assert!(
        matches!(err, PrepareError::TimedOut { .. }),
        "{err}: {err:?}"
    );
    assert!(err.to_string().contains("started"), "{err}");
    assert!(started.elapsed().as_secs() < 30);
    assert!(check_message(&f, Some("smoke")).contains("is not prepared on this machine"));
}

#[test]
fn environments_without_prepare_need_nothing() {
    let text = MANIFEST.split("\n[prepare]").next().unwrap().to_string() + "\n[profiles.full]\n";
    let f = fixture(&text);
    let prepared = check(&f.env, None, &f.data).unwrap();
    assert_eq!(prepared.venv, None);
    assert_eq!(prepared.bin_dir, None);
    assert_eq!(prepared.dir, f.data.join("prepared/prep-demo/full"));
}

/// Another environment folder (its own id) next to the fixture's, sharing its data dir.
fn sibling(f: &Fixture, id: &str, requirements: &str) -> Environment {
    let dir = f._tmp.path().join(id);
    fs::create_dir_all(dir.join("workspace")).unwrap();
    fs::create_dir_all(dir.join("prepare")).unwrap();
    fs::write(dir.join("instructions.md"), "Prepare me.\n").unwrap();
    fs::write(dir.join("requirements.txt"), requirements).unwrap();
    fs::write(dir.join("prepare/make_data.py"), MAKE_DATA).unwrap();
    let manifest = MANIFEST.replace("id = \"prep-demo\"", &format!("id = \"{id}\""));
    fs::write(dir.join("environment.toml"), manifest).unwrap();
    Environment::load(&dir).unwrap()
}

fn prepare_env(
    env: &Environment,
    data: &Path,
) -> (rebench::environment::prepare::Prepared, String) {
    let mut log = Vec::new();
    let prepared = prepare(env, Some("smoke"), data, &mut log).unwrap();
    (prepared, String::from_utf8(log).unwrap())
}

#[test]
fn identical_requirements_share_one_venv() {
    if !python_available() {
        return;
    }
    let f = fixture(MANIFEST);
    let twin = sibling(&f, "prep-twin", "# nothing to install\n");
    // A comment is enough to make the requirements, and so the venv, different.
    let other = sibling(&f, "prep-other", "# nothing to install\n# other\n");

    let (first, log) = prepare_env(&f.env, &f.data);
    assert!(log.contains("creating a venv"), "{log}");
    let (second, log) = prepare_env(&twin, &f.data);
    assert!(log.contains("reusing the venv"), "{log}");
    assert!(!log.contains("creating a venv"), "{log}");
    let (third, log) = prepare_env(&other, &f.data);
    assert!(log.contains("creating a venv"), "{log}");

    assert_eq!(first.venv, second.venv);
    assert_ne!(first.venv, third.venv);
    assert_ne!(first.dir, second.dir);
    for prepared in [&first, &second, &third] {
        let venv = prepared.venv.as_ref().unwrap();
        assert_eq!(venv.parent(), Some(f.data.join("venvs").as_path()));
    }
    let mut venvs: Vec<String> = fs::read_dir(f.data.join("venvs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| !name.starts_with('.'))
        .collect();
    venvs.sort();
    assert_eq!(venvs.len(), 2, "{venvs:?}");
    assert_eq!(check(&twin, Some("smoke"), &f.data).unwrap(), second);

    // Damage to the shared venv shows in every environment that uses it.
    let venv = first.venv.clone().unwrap();
    fs::create_dir_all(venv.join("lib/python3/site-packages/extra-1.dist-info")).unwrap();
    for env in [&f.env, &twin] {
        let err = check(env, Some("smoke"), &f.data).unwrap_err().to_string();
        assert!(err.contains("packages added: extra-1.dist-info"), "{err}");
    }
    check(&other, Some("smoke"), &f.data).unwrap();
    fs::remove_dir_all(venv.join("lib/python3")).unwrap();
    check(&twin, Some("smoke"), &f.data).unwrap();
}

#[test]
fn concurrent_prepares_build_the_shared_venv_once() {
    if !python_available() {
        return;
    }
    let f = fixture(MANIFEST);
    let twin = sibling(&f, "prep-twin", "# nothing to install\n");
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(|| prepare_env(&f.env, &f.data));
        let b = s.spawn(|| prepare_env(&twin, &f.data));
        (a.join().unwrap(), b.join().unwrap())
    });
    assert_eq!(a.0.venv, b.0.venv);
    let builds = [&a.1, &b.1]
        .iter()
        .filter(|log| log.contains("creating a venv"))
        .count();
    assert_eq!(builds, 1, "{}\n---\n{}", a.1, b.1);
    check(&f.env, Some("smoke"), &f.data).unwrap();
    check(&twin, Some("smoke"), &f.data).unwrap();
}
