//! `rebench env calibrate` and the calibration `env prepare` makes: the
//! scorer run on the starting and reference solutions on this machine, as
//! the server runs it, and the values stored (`environment::calibration`).

use std::path::Path;
use std::time::Duration;

use anyhow::Context;

use crate::environment::duration::parse_duration;
use crate::environment::{Environment, ScoringPlan, calibration, files, prepare};
use crate::sandbox::exec::{ExecSpec, exec};
use crate::scoring::{OUTPUT_LIMIT, ScorerInvocation, run_scorer};

/// What one calibration scores with: the environment, its plan and its preparation.
pub(super) struct Scorer<'a> {
    pub env: &'a Environment,
    pub plan: &'a ScoringPlan,
    pub prepared: &'a prepare::Prepared,
}

impl Scorer<'_> {
    pub async fn run_once(&self, workspace: &Path) -> crate::scoring::ScorerOutcome {
        // As the server runs it: the allowlisted base and what the manifest grants.
        let mut env = crate::sandbox::environ::passed_from_here();
        env.extend(crate::sandbox::environ::granted_from_here(
            &self.plan.pass_env,
        ));
        env.extend(self.plan.scorer_env(&self.env.dir, workspace));
        env.extend(
            self.prepared
                .scorer_env(std::env::var_os("PATH").as_deref()),
        );
        let invocation = ScorerInvocation {
            argv: self.plan.argv(&self.env.dir, workspace),
            cwd: workspace.to_path_buf(),
            env,
            env_clear: true,
            cgroups: Vec::new(),
            timeout: self.plan.timeout,
            output_limit: OUTPUT_LIMIT,
        };
        run_scorer(&invocation).await
    }

    /// `[calibrate] setup` in `workspace`, as a participant would run it in a
    /// session shell: the session's environment, no hidden paths. Err = why
    /// the solution cannot be measured.
    pub async fn setup(&self, workspace: &Path, label: &str, json: bool) -> Result<(), String> {
        let Some(calibrate) = &self.env.manifest.calibrate else {
            return Ok(());
        };
        if !json {
            eprintln!("{label}: setup `{}`", calibrate.setup);
        }
        let spec = ExecSpec {
            command: calibrate.setup.clone(),
            cwd: workspace.to_path_buf(),
            env: {
                let mut env = crate::sandbox::environ::passed_from_here();
                env.extend(
                    self.prepared
                        .session_env(std::env::var_os("PATH").as_deref()),
                );
                env
            },
            env_clear: true,
            prefix: Vec::new(),
            timeout: parse_duration(&calibrate.timeout).unwrap_or(Duration::from_secs(3600)),
            output_limit: OUTPUT_LIMIT,
            stdin: None,
        };
        let result = exec(&spec)
            .await
            .map_err(|e| format!("setup could not start: {e}"))?;
        if result.exit_code == Some(0) && !result.timed_out {
            return Ok(());
        }
        let status = if result.timed_out {
            format!("timed out after {}", calibrate.timeout)
        } else if let Some(signal) = result.signal {
            format!("killed by signal {signal}")
        } else {
            format!("exit status {}", result.exit_code.unwrap_or(-1))
        };
        let output = format!("{}{}", result.stdout, result.stderr);
        let tail: Vec<&str> = output.lines().rev().take(20).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        Err(format!(
            "setup `{}` failed ({status}); its last output:\n{}",
            calibrate.setup,
            tail.join("\n")
        ))
    }

    /// The valid raw values of `runs` runs, and how many were invalid; each
    /// run is reported on stderr unless `json`.
    pub async fn raw_values(
        &self,
        workspace: &Path,
        runs: u32,
        label: &str,
        json: bool,
    ) -> (Vec<f64>, usize) {
        let (mut values, mut invalid) = (Vec::new(), 0);
        for i in 1..=runs {
            let outcome = self.run_once(workspace).await;
            let valid = outcome.raw.filter(|_| outcome.valid);
            if !json {
                let shown = match valid {
                    Some(value) => format!("{value:?}"),
                    None => format!("INVALID: {}", outcome.message),
                };
                eprintln!("{label} run {i}/{runs}: {shown}");
            }
            match valid {
                Some(value) => values.push(value),
                None => invalid += 1,
            }
        }
        (values, invalid)
    }

    /// The median valid raw value of `runs` runs, or None when none was valid
    /// (or the setup failed).
    async fn measure(&self, workspace: &Path, runs: u32, label: &str, json: bool) -> Option<f64> {
        if let Err(why) = self.setup(workspace, label, json).await {
            eprintln!("{label}: {why}");
            return None;
        }
        let (mut values, _) = self.raw_values(workspace, runs, label, json).await;
        values.sort_by(|a, b| a.total_cmp(b));
        values.get(values.len() / 2).copied()
    }
}

/// The starting workspace, and the reference solution laid over another
/// copy of it when the environment has one, in `temp`: as a session's.
pub(super) fn solution_workspaces(
    env: &Environment,
    plan: &ScoringPlan,
    prepared: &prepare::Prepared,
    temp: &Path,
) -> anyhow::Result<(std::path::PathBuf, Option<std::path::PathBuf>)> {
    let starting = temp.join("starting");
    files::assemble_workspace(&env.workspace_dir(), Some(&prepared.dir), &starting)
        .context("copying the starting workspace")?;
    let Some(reference_dir) = env.reference_dir() else {
        return Ok((starting, None));
    };
    let reference = temp.join("reference");
    files::assemble_workspace(&env.workspace_dir(), Some(&prepared.dir), &reference)
        .context("copying the starting workspace")?;
    files::overlay_reference(&reference_dir, &reference, plan.profile.as_deref())
        .context("laying the reference solution over the workspace")?;
    Ok((starting, Some(reference)))
}

/// The starting and reference solutions' medians on this machine.
pub(super) struct Measured {
    pub starting: Option<f64>,
    pub reference: Option<f64>,
    /// Whether the environment has a reference solution at all.
    pub has_reference: bool,
}

impl Measured {
    pub fn both(&self) -> Option<(f64, f64)> {
        self.starting.zip(self.reference)
    }
}

/// Scores the starting workspace and the reference solution `runs` times each.
pub(super) async fn measure_both(
    env: &Environment,
    plan: &ScoringPlan,
    prepared: &prepare::Prepared,
    runs: u32,
    json: bool,
) -> anyhow::Result<Measured> {
    let scorer = Scorer {
        env,
        plan,
        prepared,
    };
    let temp = tempdir()?;
    let (starting_ws, reference_ws) = solution_workspaces(env, plan, prepared, &temp)?;
    let starting = scorer.measure(&starting_ws, runs, "starting", json).await;
    let reference = match &reference_ws {
        Some(workspace) => scorer.measure(workspace, runs, "reference", json).await,
        None => None,
    };
    let _ = std::fs::remove_dir_all(&temp);
    Ok(Measured {
        starting,
        reference,
        has_reference: reference_ws.is_some(),
    })
}

/// Stores measured values with the prepared environment; the file written.
pub(super) fn save_calibration(
    env: &Environment,
    plan: &ScoringPlan,
    prepared: &prepare::Prepared,
    starting: f64,
    reference: f64,
    runs: u32,
) -> anyhow::Result<std::path::PathBuf> {
    let measured = calibration::Calibration {
        env: env.id().to_string(),
        profile: plan.profile.clone(),
        starting,
        reference,
        runs,
        measured_at: chrono::Utc::now(),
        host: calibration::host_name(),
        manifest_hash: env.manifest_hash.clone(),
    };
    // Refuse values no session could normalize with, before storing them.
    calibration::apply(&mut plan.clone(), &measured)
        .map_err(|e| anyhow::anyhow!("{}: {e}", env.id()))?;
    calibration::save(&prepared.dir, &measured)
        .with_context(|| format!("saving the calibration in {}", prepared.dir.display()))
}

pub(super) async fn calibrate(
    env: &Environment,
    profile: Option<&str>,
    data_dir: &Path,
    runs: u32,
    json: bool,
    save: bool,
) -> anyhow::Result<i32> {
    let plan = env.scoring(profile)?;
    let prepared = prepare::check(env, profile, data_dir)?;
    let measured = measure_both(env, &plan, &prepared, runs, json).await?;
    let saved = match (save, measured.both()) {
        (true, Some((starting, reference))) => Some(save_calibration(
            env, &plan, &prepared, starting, reference, runs,
        )?),
        _ => None,
    };
    let Measured {
        starting,
        reference,
        has_reference,
    } = measured;
    let profile_name = plan.profile.clone().unwrap_or_else(|| "(base)".into());
    if json {
        println!(
            "{}",
            serde_json::json!({"env": env.id(), "profile": plan.profile, "runs": runs, "starting": starting, "reference": reference, "saved": saved})
        );
    } else {
        println!("measured on this machine, median of {runs} run(s), profile {profile_name}:");
        println!(
            "starting = {}",
            starting.map_or("no valid run".into(), |v| v.to_string())
        );
        match (&reference, has_reference) {
            (_, false) => println!("reference: the environment has no reference/ folder"),
            (Some(v), _) => println!("reference = {v}"),
            (None, _) => println!("reference = no valid run"),
        }
        println!(
            "(manifest: starting = {}, reference = {})",
            plan.normalizer.starting, plan.normalizer.reference
        );
        match &saved {
            Some(file) => println!(
                "saved in {}: new sessions on this machine normalize with these values",
                file.display()
            ),
            None if save => println!("not saved: both values are needed"),
            None => {}
        }
    }
    Ok(
        if starting.is_some()
            && (reference.is_some() || !has_reference)
            && (saved.is_some() || !save)
        {
            0
        } else {
            1
        },
    )
}

pub(super) fn tempdir() -> anyhow::Result<std::path::PathBuf> {
    let dir = std::env::temp_dir().join(format!(
        "rebench-calibrate-{}-{}",
        std::process::id(),
        crate::session::ids::new_secret()
    ));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}
