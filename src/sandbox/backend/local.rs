//! `local`: the session's processes run on the server's machine as the
//! server's user, held by its cgroup (else its marker). No isolation.

use std::path::{Path, PathBuf};

use crate::sandbox::enter::{Launch, prefix};

use super::{Groups, Sandbox};

pub struct Local {
    exe: PathBuf,
    groups: Groups,
}

impl Local {
    pub fn new(exe: PathBuf, groups: Groups) -> Local {
        Local { exe, groups }
    }
}

impl Sandbox for Local {
    fn backend(&self) -> &'static str {
        "local"
    }

    fn isolation(&self) -> &'static str {
        "none"
    }

    fn gpu_isolation(&self) -> &'static str {
        // Device nodes cannot be hidden without a jail.
        "advisory"
    }

    fn containment(&self) -> &'static str {
        self.groups.containment("marker")
    }

    fn runs_spawner(&self) -> bool {
        true
    }

    fn launcher(&self, cwd: &Path, own_group: bool) -> Result<Vec<String>, String> {
        Ok(prefix(
            &self.exe,
            &Launch {
                target: None,
                cgroups: self.groups.join(own_group),
                docker: None,
                cwd: cwd.to_path_buf(),
                env: Vec::new(),
                argv: Vec::new(),
            },
        ))
    }

    fn groups(&self) -> &Groups {
        &self.groups
    }
}
