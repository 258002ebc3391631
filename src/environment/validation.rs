//! Checking an environment folder, collecting every problem rather than the first.

use super::Problem;
use super::duration::parse_duration;
use super::manifest::{Calibrate, Manifest, Prepare, Profile};
use super::normalize::{Aggregate, Transform};
use super::structure::{self, line_of};
use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

pub const MANIFEST_FILE: &str = "environment.toml";

/// Parses and checks manifest text; `Err` holds every problem found:
/// unknown keys, wrong types and missing keys (with their line), then what
/// the values mean. Only a syntax error stops checking (nothing after it
/// can be read).
pub fn parse_and_check(dir: &Path, bytes: &[u8]) -> Result<Manifest, Vec<Problem>> {
    let mut report = Report {
        file: dir.join(MANIFEST_FILE),
        problems: Vec::new(),
    };
    let text = match std::str::from_utf8(bytes) {
        Ok(text) => text,
        Err(e) => {
            report.add("", format!("not valid UTF-8 ({e})"));
            return Err(report.problems);
        }
    };
    let table: toml::Table = match toml::from_str(text) {
        Ok(table) => table,
        Err(e) => {
            let field = match e.span() {
                Some(span) => format!("line {}", line_of(text, span.start)),
                None => String::new(),
            };
            report.add(&field, e.message().trim().to_string());
            return Err(report.problems);
        }
    };
    let structure = structure::deserialize(text, toml::Value::Table(table));
    for problem in &structure.problems {
        let message = match problem.line {
            Some(line) => format!("{} (line {line})", problem.message),
            None => problem.message.clone(),
        };
        report.add(&problem.field, message);
    }
    let Some(manifest) = structure.manifest.as_ref() else {
        return Err(report.problems);
    };
    // Checks of stand-in values would only repeat the problem above.
    let mut meaning = Report {
        file: report.file.clone(),
        problems: Vec::new(),
    };
    check_manifest(dir, manifest, &mut meaning);
    report.problems.extend(
        meaning
            .problems
            .into_iter()
            .filter(|p| !structure.is_stand_in(&p.field)),
    );
    match structure.manifest {
        Some(manifest) if report.problems.is_empty() => Ok(manifest),
        _ => Err(report.problems),
    }
}

struct Report {
    file: PathBuf,
    problems: Vec<Problem>,
}

impl Report {
    fn add(&mut self, field: &str, message: impl Into<String>) {
        self.problems.push(Problem {
            file: self.file.clone(),
            field: field.to_string(),
            message: message.into(),
        });
    }
}

/// The longest environment id (it names folders and appears in every table).
const MAX_ID_LEN: usize = 64;

fn is_valid_id(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_ID_LEN
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

fn check_manifest(dir: &Path, m: &Manifest, report: &mut Report) {
    if !is_valid_id(&m.id) {
        report.add(
            "id",
            format!(
                "invalid id \"{}\" (use 1 to {MAX_ID_LEN} lowercase letters, digits and '-')",
                m.id.chars().take(80).collect::<String>()
            ),
        );
    }
    for (field, value) in [("title", &m.title), ("summary", &m.summary)] {
        if value.trim().is_empty() {
            report.add(field, "must not be empty");
        }
    }
    check_env_path(dir, "instructions", &m.instructions, false, report);
    let workspace_ok = check_env_path(dir, "workspace", &m.workspace, true, report);
    if let Some(name) = &m.default_profile
        && !m.profiles.contains_key(name)
    {
        report.add(
            "default_profile",
            format!(
                "profile \"{name}\" is not defined in [profiles] (known: {})",
                known_list(m)
            ),
        );
    }
    check_budget(m, report);
    check_hardware(m, report);
    check_scoring(dir, m, workspace_ok, report);
    for (name, profile) in &m.profiles {
        check_profile(dir, m, name, profile, report);
    }
    if let Some(prepare) = &m.prepare {
        check_prepare(dir, prepare, report);
    }
    if let Some(calibrate) = &m.calibrate {
        check_calibrate(calibrate, report);
    }
    check_sandbox(&m.sandbox, report);
}

fn check_sandbox(s: &super::manifest::SandboxSettings, report: &mut Report) {
    if let Some(network) = &s.network
        && !super::manifest::SANDBOX_NETWORKS.contains(&network.as_str())
    {
        report.add(
            "sandbox.network",
            format!("{network:?} is not a network: use \"none\" or \"bridge\""),
        );
    }
    if let Some(image) = &s.image {
        let ok = !image.is_empty()
            && image.len() <= 255
            && image
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "._-/:@".contains(c));
        if !ok {
            report.add(
                "sandbox.image",
                format!("{image:?} is not an image name (letters, digits and ._-/:@, at most 255)"),
            );
        }
    }
}

fn known_list(m: &Manifest) -> String {
    if m.profiles.is_empty() {
        "none".to_string()
    } else {
        m.profiles.keys().cloned().collect::<Vec<_>>().join(", ")
    }
}

/// Checks that `rel` is a relative path to an existing file (or folder).
/// Returns whether it is usable.
fn check_env_path(dir: &Path, field: &str, rel: &str, want_dir: bool, report: &mut Report) -> bool {
    if rel.trim().is_empty() {
        report.add(field, "must not be empty");
        return false;
    }
    if Path::new(rel).is_absolute() {
        report.add(
            field,
            format!("\"{rel}\" must be relative to the environment folder"),
        );
        return false;
    }
    // Inside the folder: a workspace of "../../.." would copy the host.
    if Path::new(rel)
        .components()
        .any(|c| matches!(c, Component::ParentDir))
    {
        report.add(field, format!("\"{rel}\" must not contain \"..\""));
        return false;
    }
    let full = dir.join(rel);
    let (exists, kind) = if want_dir {
        (full.is_dir(), "folder")
    } else {
        (full.is_file(), "file")
    };
    if !exists {
        report.add(
            field,
            format!("{kind} \"{rel}\" not found in {}", dir.display()),
        );
    }
    exists
}

/// Parses a positive duration, reporting under `field` when it is not one.
fn check_duration(field: &str, text: &str, report: &mut Report) {
    match parse_duration(text) {
        Ok(d) if d.is_zero() => {
            report.add(field, format!("duration \"{text}\" must be more than 0s"))
        }
        Ok(_) => {}
        Err(e) => report.add(field, e),
    }
}

fn check_budget(m: &Manifest, report: &mut Report) {
    check_duration("budget.default", &m.budget.default, report);
    for (i, preset) in m.budget.presets.iter().enumerate() {
        check_duration(&format!("budget.presets[{i}]"), preset, report);
    }
}

fn check_hardware(m: &Manifest, report: &mut Report) {
    check_hardware_table("hardware", &m.hardware, report);
    for (name, profile) in &m.profiles {
        if let Some(h) = &profile.hardware {
            check_hardware_table(&format!("profiles.{name}.hardware"), h, report);
        }
    }
}

fn check_hardware_table(prefix: &str, h: &super::manifest::Hardware, report: &mut Report) {
    let has_model = h.gpu_model.as_deref().is_some_and(|s| !s.trim().is_empty());
    if h.gpus > 0 && !has_model {
        report.add(
            &format!("{prefix}.gpu_model"),
            format!("required when {prefix}.gpus > 0 (gpus = {})", h.gpus),
        );
    }
    if !h.memory_gb.is_finite() || h.memory_gb < 0.0 {
        report.add(
            &format!("{prefix}.memory_gb"),
            format!("must be a number >= 0, got {}", h.memory_gb),
        );
    }
}

fn check_scoring(dir: &Path, m: &Manifest, workspace_ok: bool, report: &mut Report) {
    let s = &m.scoring;
    if s.command.is_empty() {
        report.add("scoring.command", "must name a program to run");
    } else if s.command[0].trim().is_empty() {
        report.add("scoring.command[0]", "program name must not be empty");
    }
    for (i, arg) in s.command.iter().enumerate() {
        if arg.contains('\0') {
            report.add(
                &format!("scoring.command[{i}]"),
                "must not contain a NUL byte",
            );
        }
    }
    check_duration("scoring.timeout", &s.timeout, report);
    if s.metric.name.trim().is_empty() {
        report.add("scoring.metric.name", "must not be empty");
    }
    if let Err(e) = s.aggregate.parse::<Aggregate>() {
        report.add("scoring.aggregate", e);
    }
    match s.transform.parse::<Transform>() {
        Ok(t) => check_endpoints(&t, "scoring", s.starting, s.reference, (true, true), report),
        Err(e) => report.add("scoring.transform", e),
    }
    for (i, name) in s.pass_env.iter().enumerate() {
        let field = format!("scoring.pass_env[{i}]");
        let well_formed = name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !well_formed {
            report.add(
                &field,
                format!("{name:?} is not a variable name (letters, digits, _)"),
            );
        }
    }
    for (i, rel) in s.protected.iter().enumerate() {
        let field = format!("scoring.protected[{i}]");
        if let Err(e) = check_protected_path(rel) {
            report.add(&field, e);
        } else if workspace_ok && !dir.join(&m.workspace).join(rel).exists() {
            report.add(&field, format!("\"{rel}\" not found in {}", m.workspace));
        }
    }
}

fn check_protected_path(rel: &str) -> Result<(), String> {
    let path = Path::new(rel);
    if rel.trim().is_empty() {
        return Err("must not be empty".to_string());
    }
    if path.is_absolute() {
        return Err(format!("\"{rel}\" must be relative to the workspace"));
    }
    if path.components().any(|c| matches!(c, Component::ParentDir)) {
        return Err(format!("\"{rel}\" must not contain \"..\""));
    }
    Ok(())
}

/// Checks starting/reference under the transform. `own` says which of the two
/// values are set at this level, so inherited ones are not reported twice.
fn check_endpoints(
    t: &Transform,
    prefix: &str,
    starting: f64,
    reference: f64,
    own: (bool, bool),
    report: &mut Report,
) {
    let s = t.apply(starting);
    let r = t.apply(reference);
    for (name, raw, value, is_own) in [
        ("starting", starting, s, own.0),
        ("reference", reference, r, own.1),
    ] {
        if value.is_none() && is_own {
            report.add(
                &format!("{prefix}.{name}"),
                format!(
                    "{raw} is undefined under transform {t} (must be {})",
                    t.domain_hint()
                ),
            );
        }
    }
    if let (Some(s), Some(r)) = (s, r)
        && s == r
    {
        report.add(
            &format!("{prefix}.reference"),
            format!(
                "starting ({starting}) and reference ({reference}) are equal after \
                 transform {t}, so no score can be computed"
            ),
        );
    }
}

fn check_profile(dir: &Path, m: &Manifest, name: &str, p: &Profile, report: &mut Report) {
    let prefix = format!("profiles.{name}");
    if !is_valid_id(name) {
        report.add(
            &prefix,
            format!("invalid profile name \"{name}\" (use lowercase letters, digits and '-')"),
        );
    }
    if let Some(timeout) = &p.timeout {
        check_duration(&format!("{prefix}.timeout"), timeout, report);
    }
    // The profile's own transform, else the base one (a bad base transform is
    // already reported under scoring.transform).
    let transform = match &p.transform {
        Some(text) => match text.parse::<Transform>() {
            Ok(t) => Some(t),
            Err(e) => {
                report.add(&format!("{prefix}.transform"), e);
                None
            }
        },
        None => m.scoring.transform.parse::<Transform>().ok(),
    };
    if let Some(t) = transform
        && (p.starting.is_some() || p.reference.is_some() || p.transform.is_some())
    {
        check_endpoints(
            &t,
            &prefix,
            p.starting.unwrap_or(m.scoring.starting),
            p.reference.unwrap_or(m.scoring.reference),
            (p.starting.is_some(), p.reference.is_some()),
            report,
        );
    }
    check_env_vars(&format!("{prefix}.env"), &p.env, report);
    check_env_vars(&format!("{prefix}.prepare_env"), &p.prepare_env, report);
    if !p.prepare_env.is_empty() && m.prepare.is_none() {
        report.add(
            &format!("{prefix}.prepare_env"),
            "set, but there is no [prepare] section to use it",
        );
    }
    if let Some(rel) = &p.requirements {
        let field = format!("{prefix}.requirements");
        if m.prepare.is_none() {
            report.add(&field, "set, but there is no [prepare] section to use it");
        } else {
            check_env_path(dir, &field, rel, false, report);
        }
    }
}

fn check_env_vars(prefix: &str, vars: &BTreeMap<String, String>, report: &mut Report) {
    for (key, value) in vars {
        let field = format!("{prefix}.{key}");
        if key.is_empty() || key.contains('=') || key.contains('\0') {
            report.add(&field, "not a valid environment variable name");
        }
        if value.contains('\0') {
            report.add(&field, "value must not contain a NUL byte");
        }
    }
}

fn check_calibrate(c: &Calibrate, report: &mut Report) {
    if c.setup.trim().is_empty() {
        report.add("calibrate.setup", "must not be empty");
    }
    check_duration("calibrate.timeout", &c.timeout, report);
}

fn check_prepare(dir: &Path, p: &Prepare, report: &mut Report) {
    if p.requirements.is_none() && p.command.is_empty() {
        report.add(
            "prepare",
            "nothing to prepare: set requirements, command or both",
        );
    }
    if let Some(rel) = &p.requirements {
        check_env_path(dir, "prepare.requirements", rel, false, report);
    }
    if p.python.trim().is_empty() {
        report.add("prepare.python", "must not be empty");
    }
    if p.command
        .first()
        .is_some_and(|program| program.trim().is_empty())
    {
        report.add("prepare.command[0]", "program name must not be empty");
    }
    // Without requirements there is no venv, so {python} would mean nothing.
    if p.requirements.is_none() && p.command.iter().any(|arg| arg.contains("{python}")) {
        report.add(
            "prepare.command",
            "uses {python}, which needs prepare.requirements (the venv's python)",
        );
    }
    check_duration("prepare.timeout", &p.timeout, report);
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{VALID_MANIFEST, make_env};
    use super::super::validate;
    use super::*;

    /// Problems as "field: message" for the manifest text, all naming the file.
    fn problems(manifest: &str) -> Vec<String> {
        let tmp = tempfile::tempdir().unwrap();
        let dir = make_env(tmp.path(), "x", manifest);
        let found = validate(&dir);
        for p in &found {
            assert_eq!(p.file, dir.join("environment.toml"));
            assert!(
                p.to_string()
                    .starts_with(&format!("{}: ", p.file.display()))
            );
        }
        found
            .iter()
            .map(|p| format!("{}: {}", p.field, p.message))
            .collect()
    }

    fn edit(from: &str, to: &str) -> String {
        assert!(VALID_MANIFEST.contains(from), "{from}");
        VALID_MANIFEST.replacen(from, to, 1)
    }

    fn assert_one(manifest: &str, expected: &str) {
        assert_eq!(problems(manifest), vec![expected.to_string()]);
    }

    #[test]
    fn valid_manifest_has_no_problems() {
        assert_eq!(problems(VALID_MANIFEST), Vec::<String>::new());
    }

    #[test]
    fn display_names_file_field_and_message() {
        let p = Problem {
            file: PathBuf::from("environments/x/environment.toml"),
            field: "scoring.transform".into(),
            message: "unknown transform \"sqrt\" (expected identity, log or log-minus:C)".into(),
        };
        assert_eq!(
            p.to_string(),
            "environments/x/environment.toml: scoring.transform: unknown transform \"sqrt\" \
             (expected identity, log or log-minus:C)"
        );
    }

    #[test]
    fn bad_ids() {
        assert_one(
            &edit("id = \"demo\"", "id = \"Demo_1\""),
            "id: invalid id \"Demo_1\" (use 1 to 64 lowercase letters, digits and '-')",
        );
        assert_one(
            &edit("[profiles.smoke]", "[profiles.Smoke]"),
            "profiles.Smoke: invalid profile name \"Smoke\" (use lowercase letters, digits and '-')",
        );
        assert_one(
            &edit("title = \"Demo\"", "title = \" \""),
            "title: must not be empty",
        );
    }

    #[test]
    fn missing_paths() {
        let found = problems(&edit("instructions.md", "README.md"));
        assert_eq!(found.len(), 1);
        assert!(
            found[0].starts_with("instructions: file \"README.md\" not found in "),
            "{found:?}"
        );

        let found = problems(&edit("workspace = \"workspace\"", "workspace = \"start\""));
        assert_eq!(found.len(), 1);
        assert!(
            found[0].starts_with("workspace: folder \"start\" not found in "),
            "{found:?}"
        );

        assert_one(
            &edit("instructions.md", "/etc/passwd"),
            "instructions: \"/etc/passwd\" must be relative to the environment folder",
        );
    }

    #[test]
    fn bad_durations() {
        assert_one(
            &edit("default = \"8h\"", "default = \"8 hours\""),
            "budget.default: invalid duration \"8 hours\" (expected e.g. \"90s\", \"30m\", \"8h\" or \"1h30m\")",
        );
        assert_one(
            &edit("\"32h\"]", "\"0s\"]"),
            "budget.presets[2]: duration \"0s\" must be more than 0s",
        );
        assert_one(
            &edit("timeout = \"5m\"", "timeout = \"5\""),
            "scoring.timeout: invalid duration \"5\" (expected e.g. \"90s\", \"30m\", \"8h\" or \"1h30m\")",
        );
        assert_one(
            &edit("timeout = \"60s\"", "timeout = \"0m\""),
            "profiles.smoke.timeout: duration \"0m\" must be more than 0s",
        );
    }

    #[test]
    fn gpus_need_a_model() {
        assert_one(
            &edit("gpus = 0", "gpus = 2"),
            "hardware.gpu_model: required when hardware.gpus > 0 (gpus = 2)",
        );
        assert_eq!(
            problems(&edit("gpus = 0", "gpus = 1\ngpu_model = \"H100\"")),
            Vec::<String>::new()
        );
        assert_one(
            &edit("memory_gb = 1", "memory_gb = -2"),
            "hardware.memory_gb: must be a number >= 0, got -2",
        );
    }

    #[test]
    fn bad_transform_and_aggregate() {
        assert_one(
            &edit("transform = \"log\"", "transform = \"sqrt\""),
            "scoring.transform: unknown transform \"sqrt\" (expected identity, log or log-minus:C)",
        );
        assert_one(
            &edit("aggregate = \"best\"", "aggregate = \"max\""),
            "scoring.aggregate: unknown aggregate \"max\" (expected best or last)",
        );
    }

    #[test]
    fn endpoints_must_differ_after_transform() {
        assert_one(
            &edit("reference = 1.6", "reference = 4.76"),
            "scoring.reference: starting (4.76) and reference (4.76) are equal after transform log, \
             so no score can be computed",
        );
        assert_one(
            &edit("starting = 120.0", "starting = 30"),
            "profiles.smoke.reference: starting (30) and reference (30) are equal after transform log, \
             so no score can be computed",
        );
    }

    #[test]
    fn endpoints_must_be_defined_under_transform() {
        assert_one(
            &edit("starting = 4.76", "starting = 0"),
            "scoring.starting: 0 is undefined under transform log (must be greater than 0)",
        );
        assert_one(
            &edit("reference = 30.0", "reference = -1"),
            "profiles.smoke.reference: -1 is undefined under transform log (must be greater than 0)",
        );
        let log_minus = edit("transform = \"log\"", "transform = \"log-minus:1.5\"");
        let log_minus = log_minus.replacen("reference = 1.6", "reference = 1.5", 1);
        assert_one(
            &log_minus,
            "scoring.reference: 1.5 is undefined under transform log-minus:1.5 (must be greater than 1.5)",
        );
        assert_one(
            &edit("starting = 4.76", "starting = nan"),
            "scoring.starting: NaN is undefined under transform log (must be greater than 0)",
        );
    }

    #[test]
    fn command_must_not_be_empty() {
        assert_one(
            &edit(
                "command = [\"python3\", \"{env}/scorer/score.py\", \"{workspace}\"]",
                "command = []",
            ),
            "scoring.command: must name a program to run",
        );
        assert_one(
            &edit("command = [\"python3\",", "command = [\"\","),
            "scoring.command[0]: program name must not be empty",
        );
    }

    #[test]
    fn protected_paths() {
        let found = problems(&edit(
            "protected = [\"score.py\"]",
            "protected = [\"score.py\", \"../x\", \"/etc/passwd\", \"missing.py\", \"\"]",
        ));
        assert_eq!(
            found,
            vec![
                "scoring.protected[1]: \"../x\" must not contain \"..\"",
                "scoring.protected[2]: \"/etc/passwd\" must be relative to the workspace",
                "scoring.protected[3]: \"missing.py\" not found in workspace",
                "scoring.protected[4]: must not be empty",
            ]
        );
    }

    #[test]
    fn default_profile_must_exist() {
        assert_one(
            &edit("default_profile = \"full\"", "default_profile = \"fast\""),
            "default_profile: profile \"fast\" is not defined in [profiles] (known: full, smoke)",
        );
    }

    #[test]
    fn paths_ids_and_commands_from_outside_are_bounded() {
        assert_one(
            &edit("workspace = \"workspace\"", "workspace = \"../../..\""),
            "workspace: \"../../..\" must not contain \"..\"",
        );
        let long = "a".repeat(100_000);
        let found = problems(&edit("id = \"demo\"", &format!("id = \"{long}\"")));
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].starts_with("id: invalid id"), "{found:?}");
        assert!(found[0].len() < 200, "the message quotes a bounded part");
        assert_one(
            &edit(
                "\"{env}/scorer/score.py\"",
                "\"{env}/scorer/score.py\\u0000\"",
            ),
            "scoring.command[1]: must not contain a NUL byte",
        );
    }

    #[test]
    fn pass_env_names() {
        assert_one(
            &edit(
                "protected = [\"score.py\"]",
                "protected = [\"score.py\"]\npass_env = [\"OK_KEY\", \"A=B\"]",
            ),
            "scoring.pass_env[1]: \"A=B\" is not a variable name (letters, digits, _)",
        );
    }

    #[test]
    fn profile_env_names() {
        assert_one(
            &edit("PREFIX_SUM_N = \"20000\"", "\"A=B\" = \"1\""),
            "profiles.smoke.env.A=B: not a valid environment variable name",
        );
    }

    #[test]
    fn prepare_section() {
        let with = |section: &str| format!("{VALID_MANIFEST}\n[prepare]\n{section}\n");
        let tmp = tempfile::tempdir().unwrap();
        let dir = make_env(
            tmp.path(),
            "x",
            &with("requirements = \"requirements.txt\""),
        );
        std::fs::write(dir.join("requirements.txt"), "").unwrap();
        assert_eq!(validate(&dir), Vec::new());

        assert_one(
            &with("timeout = \"1h\""),
            "prepare: nothing to prepare: set requirements, command or both",
        );
        assert_eq!(
            problems(&with(
                "command = [\"{python}\", \"x.py\"]\ntimeout = \"soon\""
            )),
            vec![
                "prepare.command: uses {python}, which needs prepare.requirements (the venv's python)",
                "prepare.timeout: invalid duration \"soon\" (expected e.g. \"90s\", \"30m\", \"8h\" or \"1h30m\")",
            ]
        );
        let found = problems(&with("requirements = \"missing.txt\"\npython = \"\""));
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(
            found[0].starts_with("prepare.requirements: file \"missing.txt\" not found in "),
            "{found:?}"
        );
        assert_eq!(found[1], "prepare.python: must not be empty");
        assert_one(
            &with("command = [\" \"]"),
            "prepare.command[0]: program name must not be empty",
        );
    }

    #[test]
    fn prepare_env_needs_a_prepare_section() {
        assert_one(
            &edit(
                "[profiles.full]",
                "[profiles.full]\nprepare_env = { N = \"1\" }",
            ),
            "profiles.full.prepare_env: set, but there is no [prepare] section to use it",
        );
        let text = edit(
            "[profiles.full]",
            "[profiles.full]\nprepare_env = { \"\" = \"1\" }",
        );
        assert_one(
            &format!("{text}\n[prepare]\ncommand = [\"true\"]\n"),
            "profiles.full.prepare_env.: not a valid environment variable name",
        );
    }

    #[test]
    fn profile_requirements_need_a_prepare_section_and_an_existing_file() {
        assert_one(
            &edit(
                "[profiles.full]",
                "[profiles.full]\nrequirements = \"full.txt\"",
            ),
            "profiles.full.requirements: set, but there is no [prepare] section to use it",
        );
        let text = edit(
            "[profiles.full]",
            "[profiles.full]\nrequirements = \"full.txt\"",
        );
        let found = problems(&format!("{text}\n[prepare]\ncommand = [\"true\"]\n"));
        assert_eq!(found.len(), 1, "{found:#?}");
        assert!(
            found[0].starts_with("profiles.full.requirements: file \"full.txt\" not found in "),
            "{found:#?}"
        );
    }

    #[test]
    fn sandbox_settings_name_the_field() {
        let found = problems(&format!(
            "{VALID_MANIFEST}\n[sandbox]\nnetwork = \"host\"\nimage = \"bad image\"\n"
        ));
        assert_eq!(found.len(), 2, "{found:#?}");
        assert!(
            found[0].starts_with("sandbox.network: \"host\""),
            "{found:#?}"
        );
        assert!(
            found[1].starts_with("sandbox.image: \"bad image\""),
            "{found:#?}"
        );
        assert!(
            problems(&format!(
                "{VALID_MANIFEST}\n[sandbox]\nnetwork = \"bridge\"\nimage = \"rebench-base:abc\"\n"
            ))
            .is_empty()
        );
    }

    #[test]
    fn calibrate_setup_must_be_a_command_with_a_valid_timeout() {
        let found = problems(&format!(
            "{VALID_MANIFEST}\n[calibrate]\nsetup = \"  \"\ntimeout = \"90\"\n"
        ));
        assert_eq!(found.len(), 2, "{found:#?}");
        assert_eq!(found[0], "calibrate.setup: must not be empty");
        assert!(found[1].starts_with("calibrate.timeout: "), "{found:#?}");
        assert!(
            problems(&format!(
                "{VALID_MANIFEST}\n[calibrate]\nsetup = \"make\"\n"
            ))
            .is_empty()
        );
    }

    #[test]
    fn every_problem_is_reported_at_once() {
        let text = VALID_MANIFEST
            .replacen("id = \"demo\"", "id = \"BAD\"", 1)
            .replacen("transform = \"log\"", "transform = \"sqrt\"", 1)
            .replacen("default = \"8h\"", "default = \"forever\"", 1)
            .replacen(
                "default_profile = \"full\"",
                "default_profile = \"none\"",
                1,
            )
            .replacen("protected = [\"score.py\"]", "protected = [\"nope\"]", 1);
        let fields: Vec<String> = problems(&text)
            .iter()
            .map(|p| p.split(':').next().unwrap().to_string())
            .collect();
        assert_eq!(
            fields,
            vec![
                "id",
                "default_profile",
                "budget.default",
                "scoring.transform",
                "scoring.protected[0]"
            ]
        );
    }

    #[test]
    fn unknown_keys_are_named() {
        let found = problems(&edit("visible = true", "visible = true\nhidden = false"));
        assert_eq!(
            found,
            vec!["scoring.hidden: unknown key `hidden` (line 26)".to_string()]
        );
        let found = problems(&edit("timeout = \"60s\"", "timeout = \"60s\"\nrepeats = 3"));
        assert_eq!(
            found,
            vec!["profiles.smoke.repeats: unknown key `repeats` (line 34)".to_string()]
        );
    }

    #[test]
    fn syntax_errors_name_the_line() {
        let found = problems(&edit("cpus = 1", "cpus = = 1"));
        assert_eq!(found.len(), 1);
        assert!(found[0].starts_with("line 14: "), "{found:?}");
    }

    #[test]
    fn wrong_types_and_missing_fields() {
        let found = problems(&edit("gpus = 0", "gpus = -1"));
        assert_eq!(
            found,
            vec!["hardware.gpus: invalid value: integer `-1`, expected u32 (line 13)".to_string()]
        );
        let found = problems(&edit("summary = \"A demo environment.\"\n", ""));
        assert_eq!(found, vec!["summary: missing required key".to_string()]);
    }

    #[test]
    fn type_errors_missing_keys_and_meanings_all_at_once() {
        // Four broken fields used to give one message, then three more.
        let text = VALID_MANIFEST
            .replacen("gpus = 0", "gpus = \"none\"", 1)
            .replacen("memory_gb = 1", "memory_gb = [1]", 1)
            .replacen("timeout = \"5m\"", "timeout = 300", 1)
            .replacen("[budget]\ndefault = \"8h\"\n", "[budget]\n", 1)
            .replacen("transform = \"log\"", "transform = \"sqrt\"", 1)
            .replacen("id = \"demo\"", "id = \"Demo\"", 1);
        let fields: Vec<String> = problems(&text)
            .iter()
            .map(|p| p.split(": ").next().unwrap().to_string())
            .collect();
        assert_eq!(
            fields,
            vec![
                "budget.default",
                "hardware.gpus",
                "hardware.memory_gb",
                "scoring.timeout",
                "id",
                "scoring.transform"
            ]
        );
    }

    #[test]
    fn missing_manifest_is_a_problem() {
        let tmp = tempfile::tempdir().unwrap();
        let found = validate(tmp.path());
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].file, tmp.path().join("environment.toml"));
        assert!(
            found[0].message.starts_with("cannot read: "),
            "{}",
            found[0]
        );
    }

    #[test]
    fn line_numbers() {
        assert_eq!(line_of("a\nb\nc", 0), 1);
        assert_eq!(line_of("a\nb\nc", 2), 2);
        assert_eq!(line_of("a\nb\nc", 99), 3);
    }
}
