//! A session whose recorded backend does not work on this machine (bwrap
//! gone since it was made, say): nothing of it starts, with the reason,
//! rather than running unisolated; what it left running can still be
//! frozen and killed.

use std::path::Path;

use super::{Groups, Sandbox};

pub struct Unavailable {
    backend: &'static str,
    reason: String,
    groups: Groups,
}

impl Unavailable {
    pub fn new(backend: &'static str, reason: impl Into<String>, groups: Groups) -> Unavailable {
        Unavailable {
            backend,
            reason: reason.into(),
            groups,
        }
    }
}

impl Sandbox for Unavailable {
    fn backend(&self) -> &'static str {
        self.backend
    }

    fn isolation(&self) -> &'static str {
        match self.backend {
            "local" => "none",
            other => other,
        }
    }

    fn containment(&self) -> &'static str {
        self.groups.containment("marker")
    }

    fn launcher(&self, _cwd: &Path, _own_group: bool) -> Result<Vec<String>, String> {
        Err(format!(
            "the session's sandbox ({}) does not work on this machine: {}",
            self.backend, self.reason
        ))
    }

    fn groups(&self) -> &Groups {
        &self.groups
    }
}
