//! Starting and reference values measured on this machine.
//!
//! A timing metric depends on the machine that measures it: a manifest's
//! `starting`/`reference` were measured on someone else's, so on a slower
//! one every starting solution clips to 0. For an environment whose
//! `[scoring] per_machine` is set, `rebench env prepare` (for profiles not
//! pinned to a GPU model) or `rebench env calibrate --save` (any profile)
//! measures both here and stores them with the prepared environment, in
//! `<prepared>/calibration.json`. New sessions normalize with them and
//! record where their values came from (`ScoringPlan::calibration`).
//! A calibration made under another version of the manifest is not used.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{Environment, ScoringPlan};

pub const FILE: &str = "calibration.json";

/// One profile's values as measured here.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    pub env: String,
    pub profile: Option<String>,
    pub starting: f64,
    pub reference: f64,
    /// Scorer runs per solution; each value is their median.
    pub runs: u32,
    pub measured_at: chrono::DateTime<chrono::Utc>,
    /// The machine's name, for the record.
    pub host: String,
    /// The manifest it was measured under.
    pub manifest_hash: String,
}

/// Where a session's `starting` and `reference` came from, kept in its plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CalibrationSource {
    pub measured_at: chrono::DateTime<chrono::Utc>,
    pub host: String,
    pub runs: u32,
    /// The manifest's own values, which the measured ones replaced.
    pub manifest_starting: f64,
    pub manifest_reference: f64,
}

impl CalibrationSource {
    /// "measured on HOST at 2026-12-04 15:00 UTC (5 runs)".
    pub fn origin(&self) -> String {
        format!(
            "measured on {} at {} ({} runs)",
            self.host,
            self.measured_at.format("%Y-%m-%d %H:%M UTC"),
            self.runs
        )
    }
}

/// What was found in a prepared folder.
#[derive(Debug, Clone, PartialEq)]
pub enum Found {
    None,
    Usable(Calibration),
    /// There, but not for this manifest or not readable: why.
    Ignored(String),
}

pub fn path(prepared_dir: &Path) -> PathBuf {
    prepared_dir.join(FILE)
}

/// The calibration stored in `prepared_dir` for `env`, if it may be used.
pub fn find(prepared_dir: &Path, env: &Environment) -> Found {
    let file = path(prepared_dir);
    let bytes = match std::fs::read(&file) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Found::None,
        Err(e) => return Found::Ignored(format!("{}: {e}", file.display())),
    };
    let calibration: Calibration = match serde_json::from_slice(&bytes) {
        Ok(c) => c,
        Err(e) => return Found::Ignored(format!("{}: {e}", file.display())),
    };
    if calibration.manifest_hash != env.manifest_hash {
        return Found::Ignored(format!(
            "{}: measured under another version of {}'s manifest (recalibrate with `rebench env calibrate {} --save`)",
            file.display(),
            env.id(),
            env.id()
        ));
    }
    if !(calibration.starting.is_finite() && calibration.reference.is_finite()) {
        return Found::Ignored(format!("{}: values are not finite", file.display()));
    }
    Found::Usable(calibration)
}

/// Normalizes `plan` as a new session on this machine is: with the
/// calibration in `prepared_dir` when there is a usable one (the plan then
/// records it), else with the manifest's values. Err = why one that is
/// there was not used.
pub fn use_here(
    plan: &mut ScoringPlan,
    env: &Environment,
    prepared_dir: &Path,
) -> Result<(), String> {
    match find(prepared_dir, env) {
        Found::None => Ok(()),
        Found::Ignored(why) => Err(why),
        Found::Usable(calibration) => apply(plan, &calibration),
    }
}

/// Writes `calibration` into `prepared_dir` (atomically: a half-written
/// file is never read).
pub fn save(prepared_dir: &Path, calibration: &Calibration) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(prepared_dir)?;
    let file = path(prepared_dir);
    let temp = prepared_dir.join(format!(".{FILE}.tmp"));
    let text = serde_json::to_string_pretty(calibration).map_err(std::io::Error::other)?;
    std::fs::write(&temp, text + "\n")?;
    std::fs::rename(&temp, &file)?;
    Ok(file)
}

/// Normalizes `plan` with the measured values, noting where they came from.
/// Refused (Err) when they would make a normalizer that cannot work.
pub fn apply(plan: &mut ScoringPlan, calibration: &Calibration) -> Result<(), String> {
    let mut normalizer = plan.normalizer;
    normalizer.starting = calibration.starting;
    normalizer.reference = calibration.reference;
    // Same direction as the manifest's, and a span the transform can divide by.
    if normalizer.lower_is_better() != plan.normalizer.lower_is_better()
        || normalizer.normalize(calibration.reference).is_none()
    {
        return Err(format!(
            "measured starting {} and reference {} do not order like the manifest's ({} → {})",
            calibration.starting,
            calibration.reference,
            plan.normalizer.starting,
            plan.normalizer.reference
        ));
    }
    plan.calibration = Some(CalibrationSource {
        measured_at: calibration.measured_at,
        host: calibration.host.clone(),
        runs: calibration.runs,
        manifest_starting: plan.normalizer.starting,
        manifest_reference: plan.normalizer.reference,
    });
    plan.normalizer = normalizer;
    Ok(())
}

/// Whether `env prepare` measures the profile by itself: a per-machine
/// metric on hardware not pinned to a GPU model (a pinned profile keeps
/// its published values unless the operator calibrates on purpose).
pub fn on_prepare(env: &Environment, profile: Option<&str>) -> bool {
    env.family.is_none()
        && env.manifest.scoring.per_machine
        && env.hardware_for(profile).gpu_model.is_none()
}

/// This machine's name, for the record.
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".to_string())
}

#[cfg(test)]
mod tests {
    use super::super::test_support::demo_env as demo;
    use super::*;

    fn measured(env: &Environment, starting: f64, reference: f64) -> Calibration {
        Calibration {
            env: env.id().to_string(),
            profile: Some("smoke".into()),
            starting,
            reference,
            runs: 5,
            measured_at: chrono::Utc::now(),
            host: "here".into(),
            manifest_hash: env.manifest_hash.clone(),
        }
    }

    #[test]
    fn a_saved_calibration_is_found_and_replaces_the_manifest_values() {
        let (tmp, env) = demo();
        let prepared = tmp.path().join("prepared");
        assert_eq!(find(&prepared, &env), Found::None);
        let calibration = measured(&env, 150.0, 40.0);
        save(&prepared, &calibration).unwrap();
        let Found::Usable(found) = find(&prepared, &env) else {
            panic!("not usable: {:?}", find(&prepared, &env));
        };
        assert_eq!(found, calibration);
        let mut plan = env.scoring(Some("smoke")).unwrap();
        apply(&mut plan, &found).unwrap();
        assert_eq!(plan.normalizer.starting, 150.0);
        assert_eq!(plan.normalizer.reference, 40.0);
        let source = plan.calibration.unwrap();
        assert_eq!(
            (source.manifest_starting, source.manifest_reference),
            (120.0, 30.0)
        );
        assert_eq!(source.host, "here");
    }

    #[test]
    fn a_calibration_of_another_manifest_or_a_broken_file_is_ignored_with_a_reason() {
        let (tmp, env) = demo();
        let prepared = tmp.path().join("prepared");
        let mut other = measured(&env, 150.0, 40.0);
        other.manifest_hash = "0".repeat(64);
        save(&prepared, &other).unwrap();
        match find(&prepared, &env) {
            Found::Ignored(why) => assert!(why.contains("another version"), "{why}"),
            found => panic!("{found:?}"),
        }
        std::fs::write(path(&prepared), "{not json").unwrap();
        match find(&prepared, &env) {
            Found::Ignored(why) => assert!(why.contains(FILE), "{why}"),
            found => panic!("{found:?}"),
        }
    }

    #[test]
    fn values_that_reverse_the_metric_are_refused() {
        let (_tmp, env) = demo();
        let mut plan = env.scoring(Some("smoke")).unwrap();
        // The manifest's runtime falls from starting to reference; these rise.
        let err = apply(&mut plan, &measured(&env, 30.0, 120.0)).unwrap_err();
        assert!(err.contains("do not order"), "{err}");
        assert_eq!(plan.normalizer.starting, 120.0);
        assert!(plan.calibration.is_none());
        let err = apply(&mut plan, &measured(&env, 30.0, 30.0)).unwrap_err();
        assert!(err.contains("do not order"), "{err}");
    }
}
