//! `docker`: the session's processes run in one container of its own on a
//! Docker engine, created with its first process from the base image (see
//! `sandbox::docker::image`), as the unprivileged `agent` user, with no
//! network. The workspace is bound at `/home/agent` (and at its own path,
//! so that paths a scorer passes mean the same inside). Pause is the
//! engine's pause (the cgroup freezer: nothing in the container computes,
//! however it was started); stop removes the container.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use bollard::exec::{CreateExecOptions, StartExecResults};
use bollard::models::{ContainerCreateBody, DeviceMapping, DeviceRequest, HostConfig};
use bollard::query_parameters::{CreateContainerOptions, RemoveContainerOptions};
use futures_util::StreamExt;

use crate::environment::manifest::SandboxSettings;
use crate::hardware::DeviceGrant;
use crate::hardware::inventory::{dev_dir, gpu_node, shared_gpu_nodes};
use crate::sandbox::docker::image::{AGENT_HOME, AGENT_UID, AGENT_USER, ensure_base_image};
use crate::sandbox::docker::{Engine, block_on};
use crate::sandbox::enter::{DockerTarget, Launch, prefix};

use super::{Deferred, Groups, Sandbox, Spec};

/// The label every session container carries (operators and tests find them by it).
pub const SESSION_LABEL: &str = "rebench.session";
/// What root may do in a family's container (the family's code runs as
/// root: it owns, reads and hands over files, and stops what it started).
/// Capabilities do not survive the exec of a process as `agent`, and no new
/// privileges can be gained, so the participant has none of them.
const ROOT_CAPABILITIES: &[&str] = &[
    "CHOWN",
    "DAC_OVERRIDE",
    "DAC_READ_SEARCH",
    "FOWNER",
    "FSETID",
    "KILL",
    "SETGID",
    "SETUID",
];
/// Processes a container may hold at once (a fork bomb stops there).
const PIDS_LIMIT: i64 = 4096;

pub struct Docker {
    exe: PathBuf,
    /// Stop the container at the end instead of removing it.
    keep: bool,
    engine: Engine,
    session: String,
    workspace: PathBuf,
    /// The environment's image and network (`[sandbox]`).
    settings: SandboxSettings,
    /// The cores, memory and GPUs it holds.
    grant: Option<DeviceGrant>,
    /// Host paths the container shows at the same path: (path, writable).
    shared: Vec<(PathBuf, bool)>,
    /// The host-side `sandbox-enter` proxies carry the session's marker.
    groups: Groups,
    /// The container's name, once it runs.
    container: Mutex<Option<String>>,
}

impl Docker {
    /// `kill -SIG -1` as the session's user in its container: every
    /// process of that user but the kill itself (`unpause` first: a paused
    /// container runs no exec).
    fn signal_user_processes(
        &self,
        signal: &str,
        unpause: bool,
    ) -> Result<(), bollard::errors::Error> {
        let client = &self.engine.client;
        let name = self.name();
        block_on(async {
            if unpause {
                client.unpause_container(&name).await.ok();
            }
            let options = CreateExecOptions::<String> {
                cmd: Some(vec!["kill".into(), format!("-{signal}"), "-1".into()]),
                user: Some(self.exec_user()),
                attach_stdout: Some(true),
                attach_stderr: Some(true),
                ..Default::default()
            };
            let exec = client.create_exec(&name, options).await?;
            if let StartExecResults::Attached { mut output, .. } =
                client.start_exec(&exec.id, None).await?
            {
                while output.next().await.is_some() {}
            }
            Ok(())
        })
    }
    pub fn new(exe: PathBuf, keep: bool, engine: Engine, spec: Spec) -> Docker {
        // What a jail shows, a container shows at the same paths.
        let shared = spec
            .layout
            .read_only
            .iter()
            .map(|p| (p.clone(), false))
            .chain(spec.layout.writable.iter().map(|p| (p.clone(), true)))
            .collect();
        Docker {
            exe,
            keep,
            engine,
            session: spec.session,
            workspace: spec.workspace,
            settings: spec.container,
            grant: spec.grant,
            shared,
            groups: spec.groups,
            container: Mutex::new(None),
        }
    }

    fn name(&self) -> String {
        format!("rebench-{}", self.session)
    }

    /// The container's name, created and started if need be.
    fn ensure_container(&self) -> Result<String, String> {
        let mut slot = self.container.lock().unwrap_or_else(|e| e.into_inner());
        let name = self.name();
        let client = &self.engine.client;
        let state = block_on(client.inspect_container(&name, None))
            .ok()
            .and_then(|c| c.state);
        match state {
            Some(state) if state.running == Some(true) => {}
            Some(_) => {
                // Stopped from outside (or the host rebooted): its files are
                // the workspace's, outside it; start it again.
                tracing::warn!(session = %self.session, container = %name, "the session's container had stopped; starting it again");
                block_on(client.start_container(&name, None))
                    .map_err(|e| self.engine.explain("restarting the session's container", e))?;
            }
            None => self.create(&name)?,
        }
        *slot = Some(name.clone());
        Ok(name)
    }

    /// How the engine gives a container its GPUs: through the NVIDIA
    /// runtime where the engine has it, else the device nodes themselves.
    fn gpu_access(&self) -> GpuAccess {
        let has_runtime = block_on(self.engine.client.info())
            .ok()
            .and_then(|info| info.runtimes)
            .is_some_and(|runtimes| runtimes.contains_key("nvidia"));
        if has_runtime {
            GpuAccess::NvidiaRuntime
        } else {
            GpuAccess::DeviceNodes(dev_dir())
        }
    }

    fn create(&self, name: &str) -> Result<(), String> {
        let client = &self.engine.client;
        let image = self.image()?;
        self.hand_over_workspace()?;
        let mut binds = vec![
            format!("{}:{AGENT_HOME}", self.workspace.display()),
            format!("{}:{}", self.workspace.display(), self.workspace.display()),
        ];
        for (path, writable) in &self.shared {
            if path.exists() && path != &self.workspace {
                let mode = if *writable { "" } else { ":ro" };
                binds.push(format!("{}:{}{mode}", path.display(), path.display()));
            }
        }
        let body = ContainerCreateBody {
            image: Some(image),
            // The container's own processes run as root (without
            // capabilities); every session process runs as `user`.
            user: Some("0:0".into()),
            working_dir: Some(AGENT_HOME.into()),
            cmd: Some(vec!["sleep".into(), "infinity".into()]),
            env: Some(vec![format!("HOME={AGENT_HOME}")]),
            labels: Some(HashMap::from([(
                SESSION_LABEL.to_string(),
                self.session.clone(),
            )])),
            host_config: Some(HostConfig {
                binds: Some(binds),
                network_mode: Some(
                    self.settings
                        .network
                        .clone()
                        .unwrap_or_else(|| "none".into()),
                ),
                init: Some(true),
                pids_limit: Some(PIDS_LIMIT),
                security_opt: Some(vec!["no-new-privileges".into()]),
                cap_drop: Some(vec!["ALL".into()]),
                cap_add: self
                    .settings
                    .task_standard
                    .then(|| ROOT_CAPABILITIES.iter().map(|c| c.to_string()).collect()),
                ..limits(self.grant.as_ref(), self.gpu_access())
            }),
            ..Default::default()
        };
        let options = CreateContainerOptions {
            name: Some(name.to_string()),
            ..Default::default()
        };
        block_on(client.create_container(Some(options), body))
            .map_err(|e| self.engine.explain("creating the session's container", e))?;
        block_on(client.start_container(name, None))
            .map_err(|e| self.engine.explain("starting the session's container", e))?;
        tracing::info!(session = %self.session, container = %name, host = %self.engine.name, "session container started");
        Ok(())
    }

    /// The environment's image, which the engine must hold, else the base
    /// image (built on the engine the first time).
    fn image(&self) -> Result<String, String> {
        match &self.settings.image {
            Some(image) => {
                block_on(self.engine.client.inspect_image(image)).map_err(|e| {
                    self.engine.explain(
                        &format!(
                            "the environment's image {image} is not available (build or load it there first)"
                        ),
                        e,
                    )
                })?;
                Ok(image.clone())
            }
            None => block_on(ensure_base_image(
                &self.engine,
                &|line| tracing::info!(session = %self.session, "{line}"),
            ))
            .map_err(|e| format!("{e:#}")),
        }
    }

    /// Who the session's processes run as: `agent` when the server runs as
    /// root (the workspace is handed to it when the container is made),
    /// else the server's own user (whose files the workspace holds).
    fn exec_user(&self) -> String {
        // SAFETY: getuid/getgid cannot fail.
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        if uid == 0 {
            AGENT_USER.into()
        } else {
            format!("{uid}:{gid}")
        }
    }

    /// Hands the workspace to the container's user, when that is `agent`.
    fn hand_over_workspace(&self) -> Result<(), String> {
        // A family's setup hands it over itself, protected files kept.
        if self.exec_user() != AGENT_USER || self.settings.task_standard {
            return Ok(());
        }
        chown_tree(&self.workspace, AGENT_UID).map_err(|e| {
            format!(
                "handing the workspace {} to the container's user: {e}",
                self.workspace.display()
            )
        })
    }

    /// The `sandbox-enter` prefix that runs a command in the container (made
    /// if need be) as `user`, in `cwd` (a container path), with `home`.
    fn enter(&self, user: String, cwd: PathBuf, home: String) -> Result<Vec<String>, String> {
        let container = self.ensure_container()?;
        Ok(prefix(
            &self.exe,
            &Launch {
                target: None,
                cgroups: Vec::new(),
                docker: Some(DockerTarget {
                    endpoint: self.engine.endpoint.clone(),
                    container,
                    user,
                }),
                cwd,
                env: vec![home.into()],
                argv: Vec::new(),
            },
        ))
    }

    /// Where `cwd` (a host path) is in the container.
    fn container_cwd(&self, cwd: &Path) -> PathBuf {
        match cwd.strip_prefix(&self.workspace) {
            Ok(rest) => Path::new(AGENT_HOME).join(rest),
            Err(_) => cwd.to_path_buf(),
        }
    }
}

impl Sandbox for Docker {
    fn backend(&self) -> &'static str {
        "docker"
    }

    fn isolation(&self) -> &'static str {
        "docker"
    }

    fn host(&self) -> &str {
        &self.engine.name
    }

    fn containment(&self) -> &'static str {
        "container"
    }

    fn launcher(&self, cwd: &Path, _own_group: bool) -> Result<Vec<String>, String> {
        // HOME also for the code a scorer runs, whose environment is the scorer's.
        let home = format!("HOME={AGENT_HOME}");
        self.enter(self.exec_user(), self.container_cwd(cwd), home)
    }

    fn admin_launcher(&self, cwd: &Path) -> Result<Vec<String>, String> {
        self.enter("root".into(), cwd.to_path_buf(), "HOME=/root".into())
    }

    fn groups(&self) -> &Groups {
        &self.groups
    }

    fn freeze(&self, _shells: &[i32]) -> Option<Deferred> {
        // By name: a container from before a server restart is paused too.
        if let Err(e) = block_on(self.engine.client.pause_container(&self.name())) {
            report(
                &self.engine,
                &self.session,
                "pausing the session's container",
                e,
            );
        }
        None
    }

    fn thaw(&self, _shells: &[i32]) {
        if let Err(e) = block_on(self.engine.client.unpause_container(&self.name())) {
            report(
                &self.engine,
                &self.session,
                "resuming the session's container",
                e,
            );
        }
        // One that died meanwhile (the session paused for it) runs again.
        let made = self
            .container
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some();
        if made
            && self.check().is_err()
            && let Err(e) = self.ensure_container()
        {
            tracing::error!(session = %self.session, "{e}");
        }
    }

    /// The container is paused, which would stop the scorer's exec too:
    /// every process of the session's user is killed instead (the
    /// container's own processes run as root and stay), then it is resumed.
    fn before_final_score(&self) {
        if let Err(e) = self.signal_user_processes("KILL", true) {
            report(
                &self.engine,
                &self.session,
                "stopping the session's processes for the final score",
                e,
            );
        }
    }

    /// Pausing the container would stop the scorer's worker too: every
    /// process of the session's user is stopped by signal instead (twice,
    /// for one forked during the first sweep); the worker, started after,
    /// runs.
    fn hold_for_scoring(&self, _shells: &[i32]) {
        let stopped = self
            .signal_user_processes("STOP", false)
            .and_then(|()| self.signal_user_processes("STOP", false));
        if let Err(e) = stopped {
            report(
                &self.engine,
                &self.session,
                "stopping the session's processes for an exclusive score",
                e,
            );
        }
    }

    fn release_after_scoring(&self, _shells: &[i32]) {
        if let Err(e) = self.signal_user_processes("CONT", false) {
            report(
                &self.engine,
                &self.session,
                "resuming the session's processes after an exclusive score",
                e,
            );
        }
    }

    fn check(&self) -> Result<(), String> {
        let made = self
            .container
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some();
        if !made {
            return Ok(());
        }
        let state = match block_on(self.engine.client.inspect_container(&self.name(), None)) {
            Ok(container) => container.state.unwrap_or_default(),
            Err(e) if e.to_string().contains("No such container") => {
                return Err(format!(
                    "the session's container on Docker host {} was removed from outside",
                    self.engine.name
                ));
            }
            // An engine that does not answer right now is not a dead container.
            Err(_) => return Ok(()),
        };
        if state.running == Some(true) {
            return Ok(());
        }
        let how = if state.oom_killed == Some(true) {
            "was killed for want of memory".to_string()
        } else {
            format!("stopped (exit code {})", state.exit_code.unwrap_or(-1))
        };
        Err(format!(
            "the session's container on Docker host {} {how}",
            self.engine.name
        ))
    }

    /// Seldom: the engine's events say when the container stops
    /// (`failure_signal`); this finds what they missed (an engine restarted).
    fn check_every(&self) -> Option<std::time::Duration> {
        Some(std::time::Duration::from_secs(30))
    }

    fn failure_signal(&self) -> Option<super::FailureSignal> {
        let died = crate::sandbox::docker::events::died(&self.engine, self.name())?;
        Some(Box::pin(died))
    }

    fn stop(&self) {
        self.container
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        let name = self.name();
        let client = &self.engine.client;
        let stopped = if self.keep {
            // Kept for inspection: nothing runs in it any more.
            block_on(async {
                client.unpause_container(&name).await.ok();
                client.kill_container(&name, None).await
            })
        } else {
            let options = RemoveContainerOptions {
                force: true,
                ..Default::default()
            };
            block_on(client.remove_container(&name, Some(options)))
        };
        if let Err(e) = stopped {
            report(
                &self.engine,
                &self.session,
                "ending the session's container",
                e,
            );
        }
        self.groups.kill();
    }
}

/// How a container gets its GPUs.
#[derive(Debug, Clone, PartialEq)]
enum GpuAccess {
    /// A device request by uuid, which the NVIDIA runtime fulfils (with the
    /// driver's libraries).
    NvidiaRuntime,
    /// The granted `/dev/nvidia<i>` nodes (and the shared control nodes)
    /// from this folder, at `/dev` in the container.
    DeviceNodes(PathBuf),
}

/// The engine's limits for a grant: its own cores (a share of them, by
/// weight, where they are shared), memory without swap beyond it, and
/// exactly the granted GPUs, by uuid: never "any N GPUs".
fn limits(grant: Option<&DeviceGrant>, gpus: GpuAccess) -> HostConfig {
    let Some(grant) = grant else {
        return HostConfig::default();
    };
    let memory = grant.memory_bytes().map(|b| b as i64);
    let weight = i64::from(grant.cpu_weight.max(1));
    let mut config = HostConfig {
        cpuset_cpus: (!grant.cpus.is_empty()).then(|| grant.cpu_list()),
        cpu_shares: grant.shared_cpus.then_some(weight * 1024),
        // Shared (or unplaced) cores: at most what it asked for.
        nano_cpus: (grant.shared_cpus && grant.cpu_weight > 0).then_some(weight * 1_000_000_000),
        memory,
        memory_swap: memory,
        ..Default::default()
    };
    if grant.gpus.is_empty() {
        return config;
    }
    match gpus {
        GpuAccess::NvidiaRuntime => {
            config.device_requests = Some(vec![DeviceRequest {
                driver: Some("nvidia".into()),
                device_ids: Some(grant.gpus.iter().map(|g| g.uuid.clone()).collect()),
                capabilities: Some(vec![vec!["gpu".into()]]),
                ..Default::default()
            }]);
        }
        GpuAccess::DeviceNodes(dev) => {
            let own = grant.gpus.iter().map(|g| gpu_node(&dev, g.index));
            let nodes = own.chain(shared_gpu_nodes(&dev)).filter(|p| p.exists());
            config.devices = Some(
                nodes
                    .map(|node| DeviceMapping {
                        path_in_container: node
                            .file_name()
                            .map(|n| format!("/dev/{}", n.to_string_lossy())),
                        path_on_host: Some(node.display().to_string()),
                        cgroup_permissions: Some("rwm".into()),
                    })
                    .collect(),
            );
        }
    }
    config
}

/// Logs an engine error, except that the container is absent (never made,
/// or gone) or already in the state asked for.
fn report(engine: &Engine, session: &str, doing: &str, error: bollard::errors::Error) {
    let text = error.to_string();
    let moot = [
        "No such container",
        "is not paused",
        "is already paused",
        "is not running",
    ];
    if !moot.iter().any(|m| text.contains(m)) {
        tracing::error!(session = %session, "{}", engine.explain(doing, text));
    }
}

/// Hands every file under `root` to `uid` (symlinks themselves, not their targets).
fn chown_tree(root: &Path, uid: u32) -> std::io::Result<()> {
    std::os::unix::fs::lchown(root, Some(uid), Some(uid))?;
    if root.is_dir() && !root.is_symlink() {
        for entry in std::fs::read_dir(root)? {
            chown_tree(&entry?.path(), uid)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(gpus: &[u32], cpus: &[u32], shared: bool, memory_gb: f64) -> DeviceGrant {
        DeviceGrant {
            host: "local".into(),
            gpus: gpus
                .iter()
                .map(|&index| crate::hardware::GrantedGpu {
                    index,
                    uuid: format!("GPU-{index}"),
                    model: "H100".into(),
                })
                .collect(),
            cpus: cpus.to_vec(),
            shared_cpus: shared,
            cpu_weight: cpus.len() as u32,
            memory_gb,
        }
    }

    #[test]
    fn a_grant_becomes_engine_limits_by_device() {
        let none = limits(None, GpuAccess::NvidiaRuntime);
        assert_eq!(
            (none.cpuset_cpus, none.memory, none.device_requests),
            (None, None, None)
        );
        let gpu_box = limits(
            Some(&grant(&[3, 5], &[8, 9, 10], false, 200.0)),
            GpuAccess::NvidiaRuntime,
        );
        assert_eq!(gpu_box.cpuset_cpus.as_deref(), Some("8-10"));
        assert_eq!((gpu_box.nano_cpus, gpu_box.cpu_shares), (None, None));
        assert_eq!(gpu_box.memory, Some(200 * 1024 * 1024 * 1024));
        assert_eq!(gpu_box.memory_swap, gpu_box.memory);
        let request = &gpu_box.device_requests.expect("a GPU request")[0];
        assert_eq!(request.count, None, "never by count");
        assert_eq!(
            request.device_ids,
            Some(vec!["GPU-3".to_string(), "GPU-5".to_string()])
        );
        assert_eq!(request.driver.as_deref(), Some("nvidia"));
        let shared = limits(
            Some(&grant(&[], &[0, 1], true, 0.0)),
            GpuAccess::NvidiaRuntime,
        );
        assert_eq!(shared.cpu_shares, Some(2048));
        assert_eq!(shared.nano_cpus, Some(2_000_000_000));
        assert_eq!((shared.memory, shared.device_requests), (None, None));
    }

    #[test]
    fn without_the_nvidia_runtime_only_the_granted_nodes_are_mapped() {
        let dev = tempfile::tempdir().unwrap();
        for name in ["nvidia0", "nvidia1", "nvidia2", "nvidiactl", "nvidia-uvm"] {
            std::fs::write(dev.path().join(name), "").unwrap();
        }
        let config = limits(
            Some(&grant(&[1], &[0], false, 1.0)),
            GpuAccess::DeviceNodes(dev.path().to_path_buf()),
        );
        let mapped: Vec<String> = config
            .devices
            .unwrap()
            .into_iter()
            .map(|d| d.path_in_container.unwrap())
            .collect();
        assert_eq!(
            mapped,
            ["/dev/nvidia1", "/dev/nvidia-uvm", "/dev/nvidiactl"]
        );
        assert_eq!(config.device_requests, None);
    }
}
