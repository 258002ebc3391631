//! `bwrap`: the session's processes run in one bubblewrap jail (see
//! `sandbox::jail`), started with its first process and restarted if it
//! died; held by the session's cgroup, else the jail's pid namespace.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::sandbox::enter::{Launch, prefix};
use crate::sandbox::jail::{Jail, Layout};
use crate::sandbox::procs::Members;

use super::{Deferred, Groups, Sandbox};

/// In a jail $HOME is read-only: caches go to the session's /tmp.
const CACHES: [(&str, &str); 3] = [
    ("XDG_CACHE_HOME", "/tmp/.cache"),
    ("TRITON_CACHE_DIR", "/tmp/.cache/triton"),
    ("MPLCONFIGDIR", "/tmp/.cache/matplotlib"),
];

pub struct Bwrap {
    exe: PathBuf,
    bwrap: PathBuf,
    session: String,
    layout: Layout,
    groups: Groups,
    jail: Mutex<Option<Jail>>,
}

impl Bwrap {
    pub fn new(
        exe: PathBuf,
        bwrap: PathBuf,
        session: String,
        layout: Layout,
        groups: Groups,
    ) -> Bwrap {
        Bwrap {
            exe,
            bwrap,
            session,
            layout,
            groups,
            jail: Mutex::new(None),
        }
    }

    fn jail(&self) -> std::sync::MutexGuard<'_, Option<Jail>> {
        self.jail.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The host pid of the jail's init, the jail started if need be.
    fn target(&self) -> Result<i32, String> {
        let mut slot = self.jail();
        if slot.as_mut().is_some_and(|jail| !jail.is_running()) {
            tracing::warn!(session = %self.session, "the session's jail had stopped; starting a new one");
            *slot = None;
        }
        if let Some(jail) = slot.as_ref() {
            return Ok(jail.init_pid());
        }
        let jail = Jail::start(
            &self.bwrap,
            &self.layout,
            &self.groups.marker,
            self.groups.cgroup.as_ref(),
            &self.groups.limit_dirs(),
        )
        .map_err(|e| format!("could not start the session's jail: {e:#}"))?;
        tracing::info!(session = %self.session, init = jail.init_pid(), "session jail started");
        let init = jail.init_pid();
        *slot = Some(jail);
        Ok(init)
    }

    /// The jail's pid namespace while it runs, else the marker.
    fn members(&self) -> Members {
        match self.jail().as_ref() {
            Some(jail) => Members::PidNamespace {
                init_pid: jail.init_pid(),
            },
            None => Members::Marker(self.groups.marker.clone()),
        }
    }
}

impl Sandbox for Bwrap {
    fn backend(&self) -> &'static str {
        "bwrap"
    }

    fn isolation(&self) -> &'static str {
        "bwrap"
    }

    fn containment(&self) -> &'static str {
        // Without a cgroup, the jail's pid namespace (it exists from the first process on).
        self.groups.containment("pidns")
    }

    fn runs_spawner(&self) -> bool {
        true
    }

    fn launcher(&self, cwd: &Path, own_group: bool) -> Result<Vec<String>, String> {
        let target = self.target()?;
        Ok(prefix(
            &self.exe,
            &Launch {
                target: Some(target),
                cgroups: self.groups.join(own_group),
                docker: None,
                cwd: cwd.to_path_buf(),
                env: Vec::new(),
                argv: Vec::new(),
            },
        ))
    }

    fn env(&self) -> Vec<(String, String)> {
        CACHES
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn groups(&self) -> &Groups {
        &self.groups
    }

    fn freeze(&self, shells: &[i32]) -> Option<Deferred> {
        self.groups.freeze(&self.members(), shells)
    }

    fn thaw(&self, shells: &[i32]) {
        self.groups.thaw(&self.members(), shells);
    }

    fn stop(&self) {
        // Everything in the jail dies with its init, marked or not.
        if let Some(mut jail) = self.jail().take() {
            jail.stop();
        }
        self.groups.kill();
    }
}
