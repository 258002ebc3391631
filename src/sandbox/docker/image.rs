//! The base image sessions run in when their environment names none, made
//! without any registry: a Debian root filesystem from the Debian mirror
//! (debootstrap), an unprivileged `agent` user added, imported into the
//! engine. Tagged by a hash of this recipe, so each engine builds it once.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, bail};
use bollard::query_parameters::CreateImageOptions;
use futures_util::StreamExt;
use sha2::{Digest, Sha256};

use super::Engine;
use crate::sandbox::jail::find_on_path;

/// The Debian release and the packages a session's shell expects.
const SUITE: &str = "bookworm";
const PACKAGES: &str = "python3,python3-pip,procps,less,vim-tiny,ca-certificates,bash-completion";
/// The participant's user in every container (not root).
pub const AGENT_USER: &str = "agent";
pub const AGENT_UID: u32 = 1000;
pub const AGENT_HOME: &str = "/home/agent";
const REPOSITORY: &str = "rebench-base";

/// `rebench-base:<hash>`: the recipe's own tag.
pub fn base_image_tag() -> String {
    let recipe = format!("{SUITE} {PACKAGES} {AGENT_USER}:{AGENT_UID}:{AGENT_HOME} v1");
    let hash = format!("{:x}", Sha256::digest(recipe.as_bytes()));
    format!("{REPOSITORY}:{}", &hash[..12])
}

/// The mirror debootstrap reads (`REBENCH_DEBIAN_MIRROR` overrides).
fn mirror() -> String {
    std::env::var("REBENCH_DEBIAN_MIRROR")
        .ok()
        .filter(|m| !m.is_empty())
        .unwrap_or_else(|| "http://deb.debian.org/debian".to_string())
}

/// The base image's tag, built on `engine` first if it lacks it.
/// `progress` hears what is going on (a build takes minutes).
pub async fn ensure_base_image(
    engine: &Engine,
    progress: &(dyn Fn(&str) + Sync),
) -> anyhow::Result<String> {
    let tag = base_image_tag();
    if engine.client.inspect_image(&tag).await.is_ok() {
        return Ok(tag);
    }
    let _building = super::build_lock(engine, &tag).await;
    if engine.client.inspect_image(&tag).await.is_ok() {
        return Ok(tag);
    }
    progress(&format!(
        "building the base image {tag} on Docker host {} (Debian {SUITE} from {}; a few minutes, once per host)",
        engine.name,
        mirror()
    ));
    let dir = tempfile::Builder::new()
        .prefix("rebench-rootfs-")
        .tempdir()
        .context("making a folder for the image's root filesystem")?;
    let rootfs = dir.path().join("rootfs");
    let tar = dir.path().join("rootfs.tar");
    let (rootfs2, tar2) = (rootfs.clone(), tar.clone());
    tokio::task::spawn_blocking(move || build_rootfs(&rootfs2, &tar2))
        .await
        .context("building the root filesystem")??;
    progress("importing the root filesystem into the engine");
    let bytes = tokio::fs::read(&tar)
        .await
        .with_context(|| format!("reading {}", tar.display()))?;
    let (repo, version) = tag.split_once(':').unwrap_or((REPOSITORY, "latest"));
    let options = CreateImageOptions {
        from_src: Some("-".into()),
        repo: Some(repo.into()),
        tag: Some(version.into()),
        changes: vec![
            format!("USER {AGENT_USER}"),
            format!("WORKDIR {AGENT_HOME}"),
            "CMD [\"sleep\", \"infinity\"]".into(),
        ],
        ..Default::default()
    };
    let mut stream =
        engine
            .client
            .create_image(Some(options), Some(bollard::body_full(bytes.into())), None);
    while let Some(step) = stream.next().await {
        step.map_err(|e| anyhow::anyhow!(engine.explain("importing the base image", e)))?;
    }
    engine
        .client
        .inspect_image(&tag)
        .await
        .map_err(|e| anyhow::anyhow!(engine.explain("checking the imported base image", e)))?;
    progress(&format!("the base image {tag} is ready"));
    Ok(tag)
}

/// debootstrap into `rootfs`, the agent user added, then a tarball of it.
fn build_rootfs(rootfs: &Path, tar: &Path) -> anyhow::Result<()> {
    // sbin is not on every user's PATH.
    let debootstrap = find_on_path("debootstrap")
        .or_else(|| {
            ["/usr/sbin/debootstrap", "/sbin/debootstrap"]
                .iter()
                .map(std::path::PathBuf::from)
                .find(|p| p.is_file())
        })
        .context(
        "the base image needs debootstrap (apt install debootstrap), run as root; or name an image in the environment",
    )?;
    let out = Command::new(debootstrap)
        .args(["--variant=minbase", &format!("--include={PACKAGES}"), SUITE])
        .arg(rootfs)
        .arg(mirror())
        .output()
        .context("running debootstrap")?;
    if !out.status.success() {
        let log = String::from_utf8_lossy(&out.stderr);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let tail: Vec<&str> = stdout.lines().chain(log.lines()).rev().take(8).collect();
        bail!(
            "debootstrap {SUITE} failed ({}): {}",
            out.status,
            tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
        );
    }
    add_agent_user(rootfs)?;
    let status = Command::new("tar")
        .arg("-C")
        .arg(rootfs)
        .args(["--numeric-owner", "-cf"])
        .arg(tar)
        .arg(".")
        .status()
        .context("running tar")?;
    if !status.success() {
        bail!("tar of the root filesystem failed ({status})");
    }
    Ok(())
}

/// The `agent` user and its home, written into the tree's account files.
fn add_agent_user(rootfs: &Path) -> anyhow::Result<()> {
    let append = |file: &str, line: String| -> anyhow::Result<()> {
        use std::io::Write;
        let path = rootfs.join(file);
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .with_context(|| format!("opening {}", path.display()))?;
        writeln!(f, "{line}").with_context(|| format!("writing {}", path.display()))
    };
    append(
        "etc/passwd",
        format!(
            "{AGENT_USER}:x:{AGENT_UID}:{AGENT_UID}:rebench participant:{AGENT_HOME}:/bin/bash"
        ),
    )?;
    append("etc/group", format!("{AGENT_USER}:x:{AGENT_UID}:"))?;
    append("etc/shadow", format!("{AGENT_USER}:*:19000:0:99999:7:::"))?;
    let home = rootfs.join(AGENT_HOME.trim_start_matches('/'));
    std::fs::create_dir_all(&home).with_context(|| format!("creating {}", home.display()))?;
    std::os::unix::fs::chown(&home, Some(AGENT_UID), Some(AGENT_UID))
        .with_context(|| format!("handing {} to the agent user", home.display()))
}
