//! Where a session's processes run: PTY shells, exec, freeze/thaw/kill.
//!
//! Every process a session starts carries a [`SessionMarker`] in its environment.
//! Descendants inherit it whatever they do to their process group or session
//! (`setsid`, `nohup`, `disown`), so scanning `/proc` for the marker finds them
//! all, which is what makes pausing and ending a session airtight.

pub mod backend;
pub mod cgroup;
pub mod docker;
pub mod enter;
mod enter_docker;
mod entry;
pub mod environ;
pub mod exec;
pub mod jail;
pub mod limits;
mod namespaces;
pub mod procs;
pub mod pty;
pub mod pty_io;
pub mod spawner;

mod capture;
mod procfs;
pub(crate) mod sys;

/// The environment variable name every session marker uses.
pub const MARKER_KEY: &str = "REBENCH_SANDBOX";

/// Marks every process of one session: an environment variable that every descendant inherits
/// (setsid/nohup/disown keep it). The server sets it on shells and exec'd commands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionMarker {
    pub key: String,
    pub value: String,
}

impl SessionMarker {
    /// A marker with the standard key and a per-session value (use something random).
    pub fn new(value: impl Into<String>) -> Self {
        SessionMarker {
            key: MARKER_KEY.to_string(),
            value: value.into(),
        }
    }

    /// The `(key, value)` pair to add to a child's environment.
    pub fn env_pair(&self) -> (String, String) {
        (self.key.clone(), self.value.clone())
    }

    /// The exact `key=value` entry as it appears in `/proc/<pid>/environ`.
    pub(crate) fn environ_entry(&self) -> Vec<u8> {
        format!("{}={}", self.key, self.value).into_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marker_uses_standard_key() {
        let marker = SessionMarker::new("abc");
        assert_eq!(marker.key, "REBENCH_SANDBOX");
        assert_eq!(
            marker.env_pair(),
            ("REBENCH_SANDBOX".to_string(), "abc".to_string())
        );
        assert_eq!(marker.environ_entry(), b"REBENCH_SANDBOX=abc".to_vec());
    }
}
