//! What holds a session's processes on the server's own machine: its cgroup
//! where the machine lets the server make one (a process cannot leave it),
//! else its jail's pid namespace or its marker (see `procs::Members`).

use std::path::PathBuf;

use crate::sandbox::SessionMarker;
use crate::sandbox::cgroup::Cgroup;
use crate::sandbox::limits::{LimitGroup, LimitRoot};
use crate::sandbox::procs::{self, Members};

use super::Deferred;

pub struct Groups {
    /// The session's cgroup.
    pub cgroup: Option<Cgroup>,
    /// Where in-shell `rebench task` clients wait out a freeze for a short
    /// grace, so that `pause` typed in a shell gets its reply.
    pub clients: Option<Cgroup>,
    /// On every process the session starts (the last resort).
    pub marker: SessionMarker,
    /// What holds it to its grant's cores and memory (None: no grant, or
    /// no controllers here).
    pub limits: Option<SessionLimits>,
}

/// A session's (or its scoring run's) limit groups and where they were
/// made (to remove them).
pub struct SessionLimits {
    pub root: LimitRoot,
    pub name: String,
    pub group: LimitGroup,
}

impl SessionLimits {
    /// Folders every process of the session joins besides its cgroup.
    pub fn join(&self) -> &[PathBuf] {
        &self.group.join
    }
}

impl Groups {
    /// No cgroup, no limits: only the marker (what a stand-in holds).
    pub fn bare(marker: &str) -> Groups {
        Groups {
            cgroup: None,
            clients: None,
            marker: SessionMarker::new(marker.to_string()),
            limits: None,
        }
    }

    /// The `cgroup.procs` folder a new process joins (None: it stays where
    /// its caller is).
    /// Also every limit group: participant code a scorer starts stays in
    /// the scoring run's group, but on the session's cores and memory.
    pub fn join(&self, own_group: bool) -> Vec<PathBuf> {
        let own = self
            .cgroup
            .as_ref()
            .filter(|_| own_group)
            .map(|g| g.path().to_path_buf());
        own.into_iter().chain(self.limit_dirs()).collect()
    }

    /// The limit groups' folders (empty where the limits are on `cgroup`).
    pub fn limit_dirs(&self) -> Vec<PathBuf> {
        self.limits
            .as_ref()
            .map(|l| l.join().to_vec())
            .unwrap_or_default()
    }

    /// `cgroup`, else `fallback` (what the backend finds members by).
    pub fn containment(&self, fallback: &'static str) -> &'static str {
        if self.cgroup.is_some() {
            "cgroup"
        } else {
            fallback
        }
    }

    /// Freezes the cgroup (task clients moved aside first), else stops
    /// what `fallback` finds by signal.
    pub fn freeze(&self, fallback: &Members, shells: &[i32]) -> Option<Deferred> {
        let Some(session) = &self.cgroup else {
            procs::freeze_members(fallback, shells);
            return None;
        };
        if let Some(clients) = &self.clients {
            for pid in session
                .pids()
                .into_iter()
                .filter(|p| procs::is_task_client(*p))
            {
                let _ = clients.add(pid);
            }
        }
        if let Err(e) = session.freeze() {
            tracing::error!("{e:#}; freezing by signal instead");
            procs::freeze_members(fallback, shells);
        }
        let clients = self.clients.clone()?;
        Some(Box::new(move || {
            let _ = clients.freeze();
        }))
    }

    /// Thaws the groups, and what a fallback freeze (or an older server)
    /// stopped by signal.
    pub fn thaw(&self, fallback: &Members, shells: &[i32]) {
        for group in [&self.clients, &self.cgroup].into_iter().flatten() {
            if let Err(e) = group.thaw() {
                tracing::error!("thawing: {e:#}");
            }
        }
        procs::thaw_members(fallback, shells);
    }

    /// `freeze`, `thaw` with the marker as the fallback.
    pub fn freeze_marked(&self, shells: &[i32]) -> Option<Deferred> {
        self.freeze(&Members::Marker(self.marker.clone()), shells)
    }

    pub fn thaw_marked(&self, shells: &[i32]) {
        self.thaw(&Members::Marker(self.marker.clone()), shells);
    }

    /// Kills everything in the groups and by the marker, and removes the groups.
    pub fn kill(&self) {
        for group in [&self.cgroup, &self.clients].into_iter().flatten() {
            group.remove();
        }
        procs::kill_all(&self.marker);
        if let Some(limits) = &self.limits {
            limits.root.remove(&limits.name);
        }
    }
}
