//! Where a data dir keeps things.

use std::path::{Path, PathBuf};

/// The files of one data dir (one server, one database).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataPaths {
    pub root: PathBuf,
}

impl DataPaths {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// `--data-dir`, else `REBENCH_DATA_DIR`, else `$XDG_DATA_HOME/rebench`, else `~/.local/share/rebench`.
    pub fn resolve(flag: Option<&Path>) -> Self {
        if let Some(dir) = flag {
            return Self::new(absolute(dir));
        }
        if let Some(dir) = std::env::var_os("REBENCH_DATA_DIR").filter(|d| !d.is_empty()) {
            return Self::new(absolute(Path::new(&dir)));
        }
        if let Some(xdg) = std::env::var_os("XDG_DATA_HOME").filter(|d| !d.is_empty()) {
            return Self::new(PathBuf::from(xdg).join("rebench"));
        }
        let home = std::env::var_os("HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/tmp"));
        Self::new(home.join(".local/share/rebench"))
    }

    /// The admin socket (mode 0600): the CLI, the proctor, the expert's own UI.
    pub fn socket(&self) -> PathBuf {
        self.root.join("rebench.sock")
    }
    /// The participant socket: every connection must present a session token.
    /// The participant socket's own folder: a session's jail or container
    /// shows this folder (not the socket file), so the socket a restarted
    /// server makes is the one they see.
    pub fn participant_dir(&self) -> PathBuf {
        self.root.join("participant")
    }
    pub fn participant_socket(&self) -> PathBuf {
        self.participant_dir().join("participant.sock")
    }
    pub fn database(&self) -> PathBuf {
        self.root.join("db")
    }
    pub fn lock_file(&self) -> PathBuf {
        self.root.join("server.lock")
    }
    pub fn log_file(&self) -> PathBuf {
        self.root.join("rebench.log")
    }
    pub fn workspaces(&self) -> PathBuf {
        self.root.join("workspaces")
    }
    pub fn workspace(&self, session: &str) -> PathBuf {
        self.workspaces().join(session)
    }
    pub fn environments(&self) -> PathBuf {
        self.root.join("environments")
    }
    pub fn assets(&self) -> PathBuf {
        self.root.join("assets")
    }

    /// Creates the data dir, private to its owner.
    pub fn create(&self) -> std::io::Result<()> {
        use std::os::unix::fs::PermissionsExt;
        std::fs::create_dir_all(&self.root)?;
        std::fs::set_permissions(&self.root, std::fs::Permissions::from_mode(0o700))?;
        std::fs::create_dir_all(self.workspaces())?;
        std::fs::create_dir_all(self.assets())?;
        // Searchable by a container's user, who connects to the socket in it.
        std::fs::create_dir_all(self.participant_dir())?;
        std::fs::set_permissions(
            self.participant_dir(),
            std::fs::Permissions::from_mode(0o711),
        )?;
        Ok(())
    }
}

fn absolute(p: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir()
            .map(|cwd| cwd.join(p))
            .unwrap_or_else(|_| p.to_path_buf())
    }
}
