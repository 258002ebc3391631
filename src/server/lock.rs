//! One server per data dir: an exclusive `flock` on `server.lock`, held for
//! the server's life (the kernel drops it if the process dies).

use std::fs::File;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error("another rebench server owns this data dir ({path} is locked{})", pid.as_ref().map(|p| format!(" by pid {p}")).unwrap_or_default())]
    Held { path: PathBuf, pid: Option<String> },
    #[error("cannot open the lock file {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

pub struct ServerLock {
    _file: File,
}

impl ServerLock {
    pub fn acquire(path: &Path) -> Result<ServerLock, LockError> {
        let io = |source| LockError::Io {
            path: path.to_path_buf(),
            source,
        };
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(path)
            .map_err(io)?;
        // SAFETY: flock on a file descriptor we own; no memory is shared with the call.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc != 0 {
            let pid = std::fs::read_to_string(path)
                .ok()
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty());
            return Err(LockError::Held {
                path: path.to_path_buf(),
                pid,
            });
        }
        file.set_len(0).map_err(io)?;
        write!(file, "{}", std::process::id()).map_err(io)?;
        Ok(ServerLock { _file: file })
    }
}

/// Whether a server holds the lock at `path` now: a shared lock taken and
/// dropped at once (a server starting in that instant is refused once),
/// and nothing written.
pub fn lock_held(path: &Path) -> bool {
    let Ok(file) = File::open(path) else {
        return false;
    };
    // SAFETY: flock on a file descriptor we own; no memory is shared with the call.
    unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_SH | libc::LOCK_NB) != 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_is_refused_with_the_holder_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("server.lock");
        let first = ServerLock::acquire(&path).unwrap();
        let err = ServerLock::acquire(&path).err().unwrap().to_string();
        assert!(err.contains("another rebench server"), "{err}");
        assert!(err.contains(&std::process::id().to_string()), "{err}");
        assert!(lock_held(&path));
        let pid = std::fs::read_to_string(&path).unwrap();
        drop(first);
        assert!(!lock_held(&path));
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            pid,
            "a look writes nothing"
        );
        assert!(ServerLock::acquire(&path).is_ok());
        assert!(
            !lock_held(&dir.path().join("none")),
            "no lock file, no server"
        );
    }
}
