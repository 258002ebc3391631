//! `rebench env …`: environment tools that need no server.

use std::io::Write;
use std::path::Path;

use anyhow::Context;
use clap::Subcommand;

use crate::environment::duration::format_duration;
use crate::environment::{
    Environment, calibration, discovery, family, hardware, prepare, validate,
};
use crate::paths::DataPaths;

use super::env_calibrate;

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
        /// Skip measuring starting and reference here (timing environments
        /// otherwise are, for profiles not pinned to a GPU model).
        #[arg(long)]
        no_calibrate: bool,
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
        /// Store the values with the prepared environment: new sessions on
        /// this machine normalize with them (and record that they did).
        #[arg(long)]
        save: bool,
    },
    /// How steady the scores are here: the starting and reference solutions
    /// scored --runs times each while --busy threads spin (see docs/timing.md).
    Bench {
        env: String,
        #[arg(long)]
        profile: Option<String>,
        #[arg(long, default_value_t = 10)]
        runs: u32,
        /// Spinning threads beside the scorer (default 1: "the other core is busy").
        #[arg(long, default_value_t = 1)]
        busy: usize,
    },
}

/// Scorer runs per solution when `env prepare` calibrates by itself.
const PREPARE_CALIBRATION_RUNS: u32 = 5;

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
                println!("no environments found; looked in:");
                for place in &search.places {
                    println!("  {} ({})", place.dir.display(), place.origin);
                }
                println!("{}", search.advice());
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
            show(&env, &paths.root, json)?;
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
        EnvCommand::Prepare {
            env,
            profile,
            no_calibrate,
        } => {
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
            if !no_calibrate && calibration::on_prepare(&env, profile.as_deref()) {
                writeln!(
                    out,
                    "{}: measuring starting and reference on this machine ({PREPARE_CALIBRATION_RUNS} runs each; --no-calibrate skips this)",
                    env.id()
                )?;
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()?;
                let plan = env.scoring(profile.as_deref())?;
                let measured = runtime.block_on(env_calibrate::measure_both(
                    &env,
                    &plan,
                    &prepared,
                    PREPARE_CALIBRATION_RUNS,
                    json,
                ))?;
                match measured.both() {
                    Some((starting, reference)) => {
                        let file = env_calibrate::save_calibration(
                            &env,
                            &plan,
                            &prepared,
                            starting,
                            reference,
                            PREPARE_CALIBRATION_RUNS,
                        )?;
                        writeln!(
                            out,
                            "starting = {starting}, reference = {reference} (manifest: {} and {}); saved in {}",
                            plan.normalizer.starting,
                            plan.normalizer.reference,
                            file.display()
                        )?;
                    }
                    None => anyhow::bail!(
                        "{}: the calibration had no valid run of the {} solution (see above); sessions would clip to the manifest's values. Fix it, or prepare with --no-calibrate",
                        env.id(),
                        if measured.starting.is_none() {
                            "starting"
                        } else {
                            "reference"
                        }
                    ),
                }
            }
            if json {
                println!("{}", serde_json::to_string(&prepared)?);
            } else {
                println!("{} is prepared in {}", env.id(), prepared.dir.display());
            }
            Ok(0)
        }
        EnvCommand::Bench {
            env,
            profile,
            runs,
            busy,
        } => {
            let env = discovery::resolve(&env, &search)?;
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            runtime.block_on(super::env_bench::bench(
                &env,
                profile.as_deref(),
                &paths.root,
                runs.max(1),
                busy,
                json,
            ))
        }
        EnvCommand::Calibrate {
            env,
            profile,
            runs,
            save,
        } => {
            let env = discovery::resolve(&env, &search)?;
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            runtime.block_on(env_calibrate::calibrate(
                &env,
                profile.as_deref(),
                &paths.root,
                runs.max(1),
                json,
                save,
            ))
        }
    }
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or("")
}

fn show(env: &Environment, data_dir: &Path, json: bool) -> anyhow::Result<()> {
    let missing = hardware::missing(&env.hardware(), &hardware::this_machine());
    let mut plans = Vec::new();
    let mut ignored = Vec::new();
    for name in std::iter::once(None).chain(env.profile_names().into_iter().map(Some)) {
        let mut plan = env.scoring(name.as_deref())?;
        // No profile asked for is `default_profile`: shown once.
        if plans
            .iter()
            .any(|p: &crate::environment::ScoringPlan| p.profile == plan.profile)
        {
            continue;
        }
        // As a new session here would normalize.
        let prepared = prepare::prepared_dir(data_dir, env, plan.profile.as_deref());
        if let Err(why) = calibration::use_here(&mut plan, env, &prepared) {
            ignored.push(why);
        }
        plans.push(plan);
    }
    if json {
        let value = serde_json::json!({
            "id": env.id(), "title": env.manifest.title, "summary": env.manifest.summary,
            "path": env.dir, "manifest_hash": env.manifest_hash,
            "instructions": env.instructions_path(), "workspace": env.workspace_dir(),
            "budget": env.manifest.budget, "hardware": env.manifest.hardware,
            "hardware_missing": missing, "default_profile": env.manifest.default_profile,
            "scoring": plans, "calibration_ignored": ignored,
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
        if let Some(c) = &plan.calibration {
            println!(
                "           {}; the manifest says {} → {}",
                c.origin(),
                c.manifest_starting,
                c.manifest_reference
            );
        }
    }
    for why in ignored.iter().filter(|_| !json) {
        println!("  calibration not used: {why}");
    }
    if let Some(d) = &m.default_profile {
        println!("default profile: {d}");
    }
    Ok(())
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
