//! A family's image, the standard's equivalent made from rebench's own base
//! image without any registry: user `agent` (uid 1000), group `protected`,
//! `/protected/score.log` (root:protected, folder 0750), the family's files
//! in `/root`, the helper in `/opt/rebench`, then `TaskFamily.install()` run
//! as root with the variables the family requires. Built in a container
//! that is committed (the variables reach install through its stdin, so no
//! layer or image setting holds them), tagged by the family's content hash.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use bollard::models::{ContainerConfig, ContainerCreateBody, HostConfig};
use bollard::query_parameters::{
    CommitContainerOptions, CreateContainerOptions, RemoveContainerOptions,
};
use sha2::{Digest, Sha256};

use super::call::{FAMILY_DIR, call};
use super::required_values;
use crate::environment::family::Family;
use crate::environment::family::helper::{self, strings};
use crate::sandbox::docker::Engine;
use crate::sandbox::docker::image::ensure_base_image;
use crate::sandbox::enter::{DockerTarget, Launch, prefix};

/// How long `install()` may take.
const INSTALL_LIMIT: Duration = Duration::from_secs(4 * 3600);
/// Where the image keeps what `/home/agent` held after install: a
/// session's `/home/agent` is its workspace, filled from here.
pub const AGENT_HOME_SKELETON: &str = "/opt/rebench/agent-home";
/// The label family images carry (the family's name).
const FAMILY_LABEL: &str = "rebench.family";
/// The label holding what the family said of itself (`FamilyImage::info`).
const INFO_LABEL: &str = "rebench.family.info";

/// `rebench-family-<family>:<hash>`: of the family's files, the helper and
/// the base image (so a change to any makes a new image).
pub fn tag(family: &Family) -> String {
    let recipe = format!(
        "{} {} {} v1",
        family.content_hash,
        format_args!("{:x}", Sha256::digest(helper::SOURCE.as_bytes())),
        crate::sandbox::docker::image::base_image_tag()
    );
    let hash = format!("{:x}", Sha256::digest(recipe.as_bytes()));
    format!("rebench-family-{}:{}", family.name, &hash[..16])
}

/// A family's image and what its code said of itself when it was built:
/// `{required_environment_variables, has_score, …, tasks: {name:
/// {permissions, aux_vm}}}` (the helper's `describe`).
#[derive(Debug, Clone)]
pub struct FamilyImage {
    pub tag: String,
    pub info: serde_json::Value,
}

impl FamilyImage {
    /// Why `task` cannot run here, if it cannot.
    pub fn refusal(&self, task: &str) -> Option<String> {
        match self.info["tasks"].get(task) {
            None => Some(format!("the family has no task \"{task}\"")),
            Some(t) if t["aux_vm"].as_bool() == Some(true) => Some(
                "the task asks for an auxiliary VM (get_aux_vm_spec), which rebench does not support"
                    .into(),
            ),
            Some(_) => None,
        }
    }

    /// The variables the family declared it needs.
    pub fn required_env(&self) -> Vec<String> {
        strings(&self.info["required_environment_variables"])
    }

    /// `get_permissions(t)`.
    pub fn permissions(&self, task: &str) -> Vec<String> {
        strings(&self.info["tasks"][task]["permissions"])
    }
}

/// The image of `task`'s family on the local engine (the one sessions run
/// on), built when missing; Err also when the task cannot run there (an
/// auxiliary VM, no such task). Used by `new` and `env prepare` alike.
pub async fn ensure_for_task(
    task: &crate::environment::family::TaskRef,
    progress: &(dyn Fn(&str) + Sync),
) -> anyhow::Result<FamilyImage> {
    let endpoint = match crate::sandbox::jail::Isolation::named("docker")? {
        crate::sandbox::jail::Isolation::Docker(endpoint) => endpoint,
        _ => bail!("no Docker engine for the family's container"),
    };
    let engine = Engine::connect("local", &endpoint)?;
    let family = crate::environment::family::open(&task.entry)?;
    let image = ensure(&engine, &family, progress).await?;
    if let Some(refusal) = image.refusal(&task.task) {
        bail!("{}/{}: {refusal}", task.family, task.task);
    }
    Ok(image)
}

/// The family's image on `engine`, built first when it lacks it (the
/// variables the family requires are read from this process's environment).
pub async fn ensure(
    engine: &Engine,
    family: &Family,
    progress: &(dyn Fn(&str) + Sync),
) -> anyhow::Result<FamilyImage> {
    let tag = tag(family);
    let _building = crate::sandbox::docker::build_lock(engine, &tag).await;
    if let Ok(image) = engine.client.inspect_image(&tag).await {
        let info = image
            .config
            .and_then(|c| c.labels)
            .and_then(|l| l.get(INFO_LABEL).cloned())
            .and_then(|text| serde_json::from_str(&text).ok())
            .unwrap_or_default();
        return Ok(FamilyImage { tag, info });
    }
    let base = ensure_base_image(engine, progress).await?;
    progress(&format!(
        "building the image of family {} ({tag}) on Docker host {}: its install() runs now",
        family.name, engine.name
    ));
    let scratch = tempfile::Builder::new()
        .prefix("rebench-family-")
        .tempdir()
        .context("a scratch folder for the helper")?;
    std::fs::write(scratch.path().join("taskhelper.py"), helper::SOURCE)
        .context("writing the helper")?;
    let name = format!(
        "rebench-build-{}-{:08x}",
        family.name.replace('_', "-"),
        rand::random::<u32>()
    );
    let built = build(engine, family, &base, &name, scratch.path(), &tag).await;
    let options = RemoveContainerOptions {
        force: true,
        ..Default::default()
    };
    let _ = engine.client.remove_container(&name, Some(options)).await;
    built.map(|info| FamilyImage { tag, info })
}

async fn build(
    engine: &Engine,
    family: &Family,
    base: &str,
    name: &str,
    helper_dir: &Path,
    tag: &str,
) -> anyhow::Result<serde_json::Value> {
    let body = ContainerCreateBody {
        image: Some(base.to_string()),
        user: Some("0:0".into()),
        working_dir: Some(FAMILY_DIR.into()),
        cmd: Some(vec!["sleep".into(), "infinity".into()]),
        host_config: Some(HostConfig {
            binds: Some(vec![
                format!("{}:/rebench-family:ro", family.dir.display()),
                format!("{}:/rebench-helper:ro", helper_dir.display()),
            ]),
            // install() may download what the family needs.
            network_mode: Some("bridge".into()),
            init: Some(true),
            ..Default::default()
        }),
        ..Default::default()
    };
    let options = CreateContainerOptions {
        name: Some(name.to_string()),
        ..Default::default()
    };
    engine
        .client
        .create_container(Some(options), body)
        .await
        .map_err(|e| anyhow::anyhow!(engine.explain("creating the family's build container", e)))?;
    engine
        .client
        .start_container(name, None)
        .await
        .map_err(|e| anyhow::anyhow!(engine.explain("starting the family's build container", e)))?;
    let root = root_prefix(engine, name)?;
    let layout = format!(
        "set -e; groupadd -f protected; mkdir -p /protected /opt/rebench; touch /protected/score.log; \
         chown -R root:protected /protected; chmod 0750 /protected; chmod 0660 /protected/score.log; \
         cp -a /rebench-family/. {FAMILY_DIR}/; rm -rf {FAMILY_DIR}/__pycache__; \
         install -m 0644 /rebench-helper/taskhelper.py {}; chmod 0700 {FAMILY_DIR}",
        helper::IMAGE_PATH
    );
    run_shell(&root, &layout).context("laying out the family image")?;
    let described = ask(
        &root,
        &family.name,
        "describe",
        serde_json::json!({}),
        "describing the family",
    )
    .await?;
    let required: Vec<String> = strings(&described["required_environment_variables"]);
    let env =
        required_values(&required).map_err(|e| anyhow::anyhow!("family {}: {e}", family.name))?;
    let env: HashMap<_, _> = env.into_iter().collect();
    ask(
        &root,
        &family.name,
        "install",
        serde_json::json!({"env": env}),
        "install()",
    )
    .await?;
    // What each task is, asked once here (after install, with its files).
    let mut tasks = serde_json::Map::new();
    for task in strings(&described["tasks"]) {
        let one = ask(
            &root,
            &family.name,
            "describe",
            serde_json::json!({"task": task, "env": env}),
            &format!("describing task {task}"),
        )
        .await?;
        tasks.insert(
            task,
            serde_json::json!({"permissions": one["permissions"], "aux_vm": one["aux_vm"]}),
        );
    }
    let mut info = described.clone();
    info["tasks"] = serde_json::Value::Object(tasks);
    let root = root_prefix(engine, name)?;
    run_shell(
        &root,
        &format!(
            "set -e; mkdir -p {AGENT_HOME_SKELETON}; cp -a /home/agent/. {AGENT_HOME_SKELETON}/"
        ),
    )
    .context("keeping /home/agent")?;
    engine
        .client
        .stop_container(name, None)
        .await
        .map_err(|e| anyhow::anyhow!(engine.explain("stopping the family's build container", e)))?;
    let (repo, version) = tag.split_once(':').unwrap_or((tag, "latest"));
    let options = CommitContainerOptions {
        container: Some(name.to_string()),
        repo: Some(repo.to_string()),
        tag: Some(version.to_string()),
        comment: Some(format!("rebench: Task Standard family {}", family.name)),
        ..Default::default()
    };
    let config = ContainerConfig {
        user: Some("root".into()),
        working_dir: Some(FAMILY_DIR.into()),
        cmd: Some(vec!["sleep".into(), "infinity".into()]),
        // Debian's pip refuses system-wide installs unless told; the
        // standard's image (python:3.11) does not.
        env: Some(vec!["PIP_BREAK_SYSTEM_PACKAGES=1".into()]),
        labels: Some(HashMap::from([
            (FAMILY_LABEL.to_string(), family.name.clone()),
            (INFO_LABEL.to_string(), info.to_string()),
        ])),
        ..Default::default()
    };
    engine
        .client
        .commit_container(options, config)
        .await
        .map_err(|e| anyhow::anyhow!(engine.explain("saving the family's image", e)))?;
    Ok(info)
}

/// One call into the family in the build container; Err with its traceback.
async fn ask(
    root: &[String],
    family: &str,
    operation: &str,
    request: serde_json::Value,
    what: &str,
) -> anyhow::Result<serde_json::Value> {
    let (root, family_name, operation_name) =
        (root.to_vec(), family.to_string(), operation.to_string());
    let called = tokio::task::spawn_blocking(move || {
        call(
            &root,
            &operation_name,
            &family_name,
            &request,
            INSTALL_LIMIT,
        )
    })
    .await
    .context("calling into the family")?
    .map_err(anyhow::Error::msg)?;
    called.result.map_err(|e| {
        anyhow::anyhow!(
            "family {family}: {what} failed: {e}\n{}",
            called.output.trim_end()
        )
    })
}

/// `sandbox-enter` into container `name` as root, in `/root`.
fn root_prefix(engine: &Engine, name: &str) -> anyhow::Result<Vec<String>> {
    let exe: PathBuf = std::env::current_exe().context("finding the rebench binary")?;
    Ok(prefix(
        &exe,
        &Launch {
            target: None,
            cgroups: Vec::new(),
            docker: Some(DockerTarget {
                endpoint: engine.endpoint.clone(),
                container: name.to_string(),
                user: "root".into(),
            }),
            cwd: PathBuf::from(FAMILY_DIR),
            env: vec!["HOME=/root".into()],
            argv: Vec::new(),
        },
    ))
}

/// Runs `script` with `sh -c` through `prefix`; Err with its output.
pub fn run_shell(prefix: &[String], script: &str) -> anyhow::Result<()> {
    let (program, rest) = prefix.split_first().context("an empty prefix")?;
    let out = std::process::Command::new(program)
        .args(rest)
        .args(["sh", "-c", script])
        .stdin(std::process::Stdio::null())
        .output()
        .with_context(|| format!("running {program}"))?;
    if !out.status.success() {
        bail!(
            "{} (exit {:?}):\n{}{}",
            script,
            out.status.code(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}
