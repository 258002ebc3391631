//! `rebench env …`: environment tools that need no server.

use std::path::Path;

use anyhow::Context;
use clap::Subcommand;

use std::time::Duration;

use crate::environment::duration::{format_duration, parse_duration};
use crate::environment::{
    Environment, ScoringPlan, discovery, family, files, hardware, prepare, validate,
};
use crate::paths::DataPaths;
use crate::sandbox::exec::{ExecSpec, exec};
use crate::scoring::{OUTPUT_LIMIT, ScorerInvocation, run_scorer};

#[derive(Debug, Subcommand)]
pub enum EnvCommand {
    /// Environments on the search path.
    List,
    /// One environment: manifest, profiles, hardware check.
    Show { env: String },
    /// Check an environment folder; every problem is reported with file and field (exit 1).
    Validate { path: String },
    /// Make everything a session needs on this machine (virtual environment, data, models).
    Prepare {
        env: String,
        #[arg(long)]
        profile: Option<String>,
    },
    /// Register a METR Task Standard family folder (or a folder of families):
    /// each of its tasks becomes the environment `<family>/<task>`.
    Add {
        path: std::path::PathBuf,
        /// The raw score of the starting solution (normalizes the family's scores).
        #[arg(long, requires = "reference")]
        starting: Option<f64>,
        /// The raw score of the reference solution.
        #[arg(long, requires = "starting")]
        reference: Option<f64>,
        /// identity (default), log or log-minus:C.
        #[arg(long)]
        transform: Option<String>,
    },
    /// Measure `starting` and `reference` on this machine (scorer on the starting and reference solutions).
    Calibrate {
        env: String,
        #[arg(long)]
        profile: Option<String>,
        #[arg(long, default_value_t = 3)]
        runs: u32,
    },
}

pub fn run(command: EnvCommand, paths: &DataPaths, json: bool) -> anyhow::Result<i32> {
    let search = discovery::search_path(&paths.root);
    match command {
        EnvCommand::List => {
            let found = discovery::list(&search);
            if json {
                let items: Vec<serde_json::Value> = found
                    .iter()
                    .map(|(dir, env)| match env {
                        Ok(env) => serde_json::json!({
                            "id": env.id(), "title": env.manifest.title, "summary": env.manifest.summary,
                            "path": env.dir, "profiles": env.profile_names(), "valid": true,
                        }),
                        Err(e) => serde_json::json!({"path": dir, "valid": false, "error": e.to_string()}),
                    })
                    .collect();
                println!("{}", serde_json::to_string_pretty(&items)?);
            } else if found.is_empty() {
                let places: Vec<String> = search.iter().map(|p| p.display().to_string()).collect();
                println!("no environments found (looked in {})", places.join(", "));
            } else {
                for (dir, env) in &found {
                    match env {
                        Ok(env) => println!(
                            "{:<24} {}  [{}]",
                            env.id(),
                            env.manifest.title,
                            env.profile_names().join(", ")
                        ),
                        Err(e) => println!(
                            "{:<24} INVALID: {}",
                            dir.display(),
                            first_line(&e.to_string())
                        ),
                    }
                }
            }
            Ok(0)
        }
        EnvCommand::Show { env } => {
            let env = discovery::resolve(&env, &search)?;
            show(&env, json)?;
            Ok(0)
        }
        EnvCommand::Validate { path } => {
            let problems = validate(Path::new(&path));
            if json {
                println!(
                    "{}",
                    serde_json::json!({"valid": problems.is_empty(), "problems": problems})
                );
            } else if problems.is_empty() {
                println!("{path}: valid");
            } else {
                for p in &problems {
                    println!("{p}");
                }
                eprintln!("{} problem(s)", problems.len());
            }
            Ok(if problems.is_empty() { 0 } else { 1 })
        }
        EnvCommand::Add {
            path,
            starting,
            reference,
            transform,
        } => {
            let given = starting.is_some() || transform.is_some();
            let overrides = family::Sidecar {
                scoring: given.then_some(family::SidecarScoring {
                    starting,
                    reference,
                    transform,
                    timeout: None,
                }),
                ..Default::default()
            };
            let added = add_families(&path, &paths.environments(), &overrides)?;
            if json {
                println!("{}", serde_json::json!({"added": added}));
            } else {
                for id in &added {
                    println!("added {id}");
                }
                println!(
                    "prepare a family's image ahead of its first session with `rebench env prepare <family>/<task>`"
                );
            }
            Ok(0)
        }
        EnvCommand::Prepare { env, profile } => {
            let env = discovery::resolve(&env, &search)?;
            if let Some(task) = &env.family {
                let tag = prepare_family(task)?;
                if json {
                    println!("{}", serde_json::json!({"id": env.id(), "image": tag}));
                } else {
                    println!("{} is prepared: image {tag}", env.id());
                }
                return Ok(0);
            }
            // Progress goes to stderr when stdout carries JSON.
            let mut out: Box<dyn std::io::Write> = if json {
                Box::new(std::io::stderr())
            } else {
                Box::new(std::io::stdout())
            };
            let prepared = prepare::prepare(&env, profile.as_deref(), &paths.root, &mut out)?;
            if json {
                println!("{}", serde_json::to_string(&prepared)?);
            } else {
                println!("{} is prepared in {}", env.id(), prepared.dir.display());
            }
            Ok(0)
        }
        EnvCommand::Calibrate { env, profile, runs } => {
            let env = discovery::resolve(&env, &search)?;
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            runtime.block_on(calibrate(
                &env,
                profile.as_deref(),
                &paths.root,
                runs.max(1),
                json,
            ))
        }
    }
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or("")
}

fn show(env: &Environment, json: bool) -> anyhow::Result<()> {
    let missing = hardware::missing(&env.hardware(), &hardware::HardwareInfo::detect());
    let mut plans = Vec::new();
    for name in std::iter::once(None).chain(env.profile_names().into_iter().map(Some)) {
        plans.push(env.scoring(name.as_deref())?);
    }
    if json {
        let value = serde_json::json!({
            "id": env.id(), "title": env.manifest.title, "summary": env.manifest.summary,
            "path": env.dir, "manifest_hash": env.manifest_hash,
            "instructions": env.instructions_path(), "workspace": env.workspace_dir(),
            "budget": env.manifest.budget, "hardware": env.manifest.hardware,
            "hardware_missing": missing, "default_profile": env.manifest.default_profile,
            "scoring": plans,
        });
        println!("{}", serde_json::to_string_pretty(&value)?);
        return Ok(());
    }
    let m = &env.manifest;
    println!("{} — {}\n{}\n", m.id, m.title, m.summary);
    println!("folder        {}", env.dir.display());
    match &env.family {
        Some(task) => {
            println!(
                "instructions  the family's get_instructions(t), given when a session is set up"
            );
            println!(
                "image         {} (built by `rebench env prepare {}`, else at the first session)",
                crate::taskstd::image::tag(&family::open(&task.entry)?),
                m.id
            );
        }
        None => println!("instructions  {}", env.instructions_path().display()),
    }
    println!(
        "budget        {} (presets {})",
        m.budget.default,
        m.budget.presets.join(", ")
    );
    let h = &m.hardware;
    println!(
        "hardware      {} GPU(s){}, {} CPU(s), {} GB: {}",
        h.gpus,
        h.gpu_model
            .as_deref()
            .map(|g| format!(" {g}"))
            .unwrap_or_default(),
        h.cpus,
        h.memory_gb,
        if missing.is_empty() {
            "available here".to_string()
        } else {
            format!("MISSING here: {}", missing.join("; "))
        }
    );
    if env.family.is_some() {
        println!(
            "scoring       the family's own (intermediate_score and aggregate_scores, or score(t, answer)), visible: {}",
            m.scoring.visible
        );
    } else {
        println!(
            "scoring       {} ({}), {:?} of the log, visible: {}",
            m.scoring.metric.name, m.scoring.metric.unit, m.scoring.aggregate, m.scoring.visible
        );
    }
    if !env.normalized {
        println!(
            "  raw scores: no starting and reference given (rebench.toml or `env add --starting … --reference …`)"
        );
    }
    for plan in plans.iter().filter(|_| env.normalized) {
        println!(
            "  profile {:<8} starting {} → reference {} ({}), timeout {}",
            plan.profile.as_deref().unwrap_or("(base)"),
            plan.normalizer.starting,
            plan.normalizer.reference,
            plan.normalizer.transform,
            format_duration(plan.timeout)
        );
    }
    if let Some(d) = &m.default_profile {
        println!("default profile: {d}");
    }
    Ok(())
}

/// What one calibration scores with: the environment, its plan and its preparation.
struct Scorer<'a> {
    env: &'a Environment,
    plan: &'a ScoringPlan,
    prepared: &'a prepare::Prepared,
}

impl Scorer<'_> {
    async fn run_once(&self, workspace: &Path) -> crate::scoring::ScorerOutcome {
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
            cgroup: None,
            timeout: self.plan.timeout,
            output_limit: OUTPUT_LIMIT,
        };
        run_scorer(&invocation).await
    }

    /// `[calibrate] setup` in `workspace`, as a participant would run it in a
    /// session shell: the session's environment, no hidden paths. Err = why
    /// the solution cannot be measured.
    async fn setup(&self, workspace: &Path, label: &str, json: bool) -> Result<(), String> {
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

    /// The median valid raw value of `runs` runs, or None when none was valid
    /// (or the setup failed).
    async fn measure(&self, workspace: &Path, runs: u32, label: &str, json: bool) -> Option<f64> {
        if let Err(why) = self.setup(workspace, label, json).await {
            eprintln!("{label}: {why}");
            return None;
        }
        let mut values = Vec::new();
        for i in 1..=runs {
            let outcome = self.run_once(workspace).await;
            if !json {
                let shown = if outcome.valid {
                    format!("{:?}", outcome.raw.unwrap_or(f64::NAN))
                } else {
                    format!("INVALID: {}", outcome.message)
                };
                eprintln!("{label} run {i}/{runs}: {shown}");
            }
            if let Some(raw) = outcome.raw.filter(|_| outcome.valid) {
                values.push(raw);
            }
        }
        values.sort_by(|a, b| a.total_cmp(b));
        values.get(values.len() / 2).copied()
    }
}

async fn calibrate(
    env: &Environment,
    profile: Option<&str>,
    data_dir: &Path,
    runs: u32,
    json: bool,
) -> anyhow::Result<i32> {
    let plan = env.scoring(profile)?;
    let prepared = prepare::check(env, profile, data_dir)?;
    let scorer = Scorer {
        env,
        plan: &plan,
        prepared: &prepared,
    };
    let temp = tempdir()?;
    let starting_ws = temp.join("starting");
    files::assemble_workspace(&env.workspace_dir(), Some(&prepared.dir), &starting_ws)
        .context("copying the starting workspace")?;
    let starting = scorer.measure(&starting_ws, runs, "starting", json).await;
    let reference = match env.reference_dir() {
        Some(reference_dir) => {
            let reference_ws = temp.join("reference");
            files::assemble_workspace(&env.workspace_dir(), Some(&prepared.dir), &reference_ws)?;
            files::overlay_reference(&reference_dir, &reference_ws, plan.profile.as_deref())
                .context("laying the reference solution over the workspace")?;
            scorer.measure(&reference_ws, runs, "reference", json).await
        }
        None => None,
    };
    let _ = std::fs::remove_dir_all(&temp);
    let profile_name = plan.profile.clone().unwrap_or_else(|| "(base)".into());
    if json {
        println!(
            "{}",
            serde_json::json!({"env": env.id(), "profile": plan.profile, "runs": runs, "starting": starting, "reference": reference})
        );
    } else {
        println!("measured on this machine, median of {runs} run(s), profile {profile_name}:");
        println!(
            "starting = {}",
            starting.map_or("no valid run".into(), |v| v.to_string())
        );
        match (&reference, env.reference_dir()) {
            (_, None) => println!("reference: the environment has no reference/ folder"),
            (Some(v), _) => println!("reference = {v}"),
            (None, _) => println!("reference = no valid run"),
        }
        println!(
            "(manifest now: starting = {}, reference = {})",
            plan.normalizer.starting, plan.normalizer.reference
        );
    }
    Ok(
        if starting.is_some() && (reference.is_some() || env.reference_dir().is_none()) {
            0
        } else {
            1
        },
    )
}

fn tempdir() -> anyhow::Result<std::path::PathBuf> {
    let dir = std::env::temp_dir().join(format!(
        "rebench-calibrate-{}-{}",
        std::process::id(),
        crate::session::ids::new_secret()
    ));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// Registers the family at `path` (or every family in it) in `into` (the
/// data dir's environments folder) as a link, with the operator's scoring
/// overrides beside it; the ids of the tasks it added.
fn add_families(
    path: &Path,
    into: &Path,
    overrides: &family::Sidecar,
) -> anyhow::Result<Vec<String>> {
    let path = std::path::absolute(path).with_context(|| format!("{}", path.display()))?;
    let families: Vec<std::path::PathBuf> = if family::family_name(&path).is_some() {
        vec![path.clone()]
    } else {
        let mut found: Vec<_> = std::fs::read_dir(&path)
            .with_context(|| format!("reading {}", path.display()))?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| family::family_name(p).is_some())
            .collect();
        found.sort();
        found
    };
    if families.is_empty() {
        anyhow::bail!(
            "{}: no Task Standard family here (a family is a folder <name>/ holding <name>.py)",
            path.display()
        );
    }
    std::fs::create_dir_all(into).with_context(|| format!("creating {}", into.display()))?;
    let mut added = Vec::new();
    for dir in families {
        let loaded = family::Family::load(&dir, Some(overrides))?;
        let names = loaded
            .task_names()
            .map_err(|e| anyhow::anyhow!("{}: get_tasks: {e}", dir.display()))?;
        for task in &names {
            loaded.task_environment(task)?;
            // Where the family can be imported here, an auxiliary VM is
            // refused now; elsewhere when its image is built.
            if let Ok(described) = family::probe::describe(&loaded.dir, &loaded.name, Some(task))
                && described["aux_vm"].as_bool() == Some(true)
            {
                anyhow::bail!(
                    "{}/{task}: the task asks for an auxiliary VM (get_aux_vm_spec), which rebench does not support",
                    loaded.name
                );
            }
        }
        let link = into.join(&loaded.name);
        match std::fs::read_link(&link) {
            Ok(target) if target == dir => {}
            Ok(target) => anyhow::bail!(
                "a family {} is already registered from {} (remove {} first)",
                loaded.name,
                target.display(),
                link.display()
            ),
            Err(_) if link.exists() => anyhow::bail!(
                "{} exists and is not a family link; not replacing it",
                link.display()
            ),
            Err(_) => std::os::unix::fs::symlink(&dir, &link)
                .with_context(|| format!("linking {}", link.display()))?,
        }
        if let Some(file) = family::overrides_file(&link) {
            if *overrides == family::Sidecar::default() {
                let _ = std::fs::remove_file(&file);
            } else {
                std::fs::write(&file, toml::to_string(overrides)?)
                    .with_context(|| format!("writing {}", file.display()))?;
            }
        }
        added.extend(names.iter().map(|t| format!("{}/{t}", loaded.name)));
    }
    Ok(added)
}

/// Builds the family's image on the local engine (install() runs now).
fn prepare_family(task: &family::TaskRef) -> anyhow::Result<String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let image = runtime.block_on(crate::taskstd::image::ensure_for_task(task, &|line| {
        eprintln!("{line}")
    }))?;
    Ok(image.tag)
}
