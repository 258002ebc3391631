//! The user's settings: `$XDG_CONFIG_HOME/rebench/config.toml` (default
//! `~/.config/rebench/config.toml`). Every setting is optional.
//!
//! ```toml
//! prefix = "C-g"      # the workspace command key (Ctrl plus a letter, or C-\ C-] C-^ C-_ C-space)
//! mouse = true        # capture the mouse: the wheel scrolls; Shift+drag still selects text
//! side_panel = true   # show the score panel at start
//! sandbox = "bwrap"   # `rebench serve`: the sessions' default backend (local | bwrap | docker),
//!                     # after REBENCH_BACKEND and before the machine's safest
//! environments = ["/srv/rebench/environments"]  # more folders of environments
//!                     # (relative to this file's folder), after $REBENCH_ENVIRONMENTS
//! operator_bashrc = false  # `rebench serve`: session shells also load ~/.bashrc
//! ```

use std::path::{Path, PathBuf};

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use serde::Deserialize;

/// A Ctrl key, kept as the control byte it sends (so Ctrl-\ matches however
/// the terminal library names it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PrefixKey {
    pub byte: u8,
}

impl PrefixKey {
    pub const DEFAULT: PrefixKey = PrefixKey { byte: 0x07 };

    /// Parses `C-g`, `Ctrl-g`, `^g` (letters in either case), `C-\`, `C-]`, `C-^`, `C-_`, `C-space`.
    pub fn parse(text: &str) -> Result<PrefixKey, String> {
        let trimmed = text.trim();
        let lower = trimmed.to_ascii_lowercase();
        let rest = ["ctrl-", "ctrl+", "c-", "^"]
            .iter()
            .find_map(|p| lower.strip_prefix(p).map(|_| &trimmed[p.len()..]));
        let bad = || {
            format!(
                "{text:?} cannot be the prefix key: use Ctrl plus a letter such as \"C-g\" \
                 (or C-\\, C-], C-^, C-_, C-space)"
            )
        };
        let rest = rest.ok_or_else(bad)?;
        let byte = match rest {
            "space" | "Space" | "SPACE" | "@" => 0x00,
            "\\" => 0x1c,
            "]" => 0x1d,
            "^" => 0x1e,
            "_" => 0x1f,
            one if one.chars().count() == 1 => {
                let c = one.chars().next().ok_or_else(bad)?;
                if !c.is_ascii_alphabetic() {
                    return Err(bad());
                }
                c.to_ascii_lowercase() as u8 & 0x1f
            }
            _ => return Err(bad()),
        };
        // These arrive as Tab, Enter and Esc: the shell could never get those keys.
        match byte {
            0x09 => Err(format!("{text:?} is the Tab key; pick another prefix")),
            0x0d => Err(format!("{text:?} is the Enter key; pick another prefix")),
            0x1b => Err(format!("{text:?} is the Esc key; pick another prefix")),
            _ => Ok(PrefixKey { byte }),
        }
    }

    /// Whether a key press is this prefix.
    pub fn matches(&self, key: &KeyEvent) -> bool {
        if !key.modifiers.contains(KeyModifiers::CONTROL)
            || key.modifiers.contains(KeyModifiers::ALT)
        {
            return false;
        }
        match key.code {
            KeyCode::Char(c) => {
                let byte = match c {
                    'a'..='z' | 'A'..='Z' => c.to_ascii_lowercase() as u8 & 0x1f,
                    ' ' | '@' | '2' => 0x00,
                    '\\' | '4' => 0x1c,
                    ']' | '5' => 0x1d,
                    '^' | '6' => 0x1e,
                    '_' | '7' => 0x1f,
                    _ => return false,
                };
                byte == self.byte
            }
            _ => false,
        }
    }

    /// How the help and footer name it: `C-g`.
    pub fn label(&self) -> String {
        match self.byte {
            0x00 => "C-space".into(),
            0x1c => "C-\\".into(),
            0x1d => "C-]".into(),
            0x1e => "C-^".into(),
            0x1f => "C-_".into(),
            b => format!("C-{}", (b + b'a' - 1) as char),
        }
    }
}

impl Default for PrefixKey {
    fn default() -> Self {
        PrefixKey::DEFAULT
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub prefix: PrefixKey,
    pub mouse: bool,
    pub side_panel: bool,
    /// The server's default sandbox backend, checked by the server.
    pub sandbox: Option<String>,
    /// Folders of environments, absolute.
    pub environments: Vec<PathBuf>,
    /// The server's session shells also load the operator's `~/.bashrc`.
    pub operator_bashrc: bool,
    /// `[machine]`: what sessions are never granted (kept for the server,
    /// the operator and the system).
    pub machine: MachineReserve,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            prefix: PrefixKey::DEFAULT,
            mouse: true,
            side_panel: true,
            sandbox: None,
            environments: Vec::new(),
            operator_bashrc: false,
            machine: MachineReserve::default(),
        }
    }
}

/// What the operator keeps for the server and the system: sessions are
/// never granted these (`[machine]`; `crate::hardware` reads it).
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, Deserialize)]
pub struct MachineReserve {
    pub cpus: u32,
    pub memory_gb: f64,
}

/// `[machine]` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct MachineSection {
    reserve_cpus: Option<u32>,
    reserve_memory_gb: Option<f64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigFile {
    prefix: Option<String>,
    mouse: Option<bool>,
    side_panel: Option<bool>,
    sandbox: Option<String>,
    environments: Option<Vec<PathBuf>>,
    operator_bashrc: Option<bool>,
    machine: Option<MachineSection>,
}

impl Config {
    /// Parses a config file's text; errors name the file and the key.
    pub fn parse(text: &str, path: &Path) -> anyhow::Result<Config> {
        let file: ConfigFile = toml::from_str(text)
            .map_err(|e| anyhow::anyhow!("bad workspace settings in {}: {e}", path.display()))?;
        let mut config = Config::default();
        if let Some(prefix) = file.prefix {
            config.prefix = PrefixKey::parse(&prefix)
                .map_err(|e| anyhow::anyhow!("{}: key `prefix`: {e}", path.display()))?;
        }
        if let Some(mouse) = file.mouse {
            config.mouse = mouse;
        }
        if let Some(side) = file.side_panel {
            config.side_panel = side;
        }
        config.sandbox = file.sandbox;
        config.operator_bashrc = file.operator_bashrc.unwrap_or(false);
        if let Some(machine) = file.machine {
            let memory = machine.reserve_memory_gb.unwrap_or(0.0);
            if !memory.is_finite() || memory < 0.0 {
                anyhow::bail!(
                    "{}: key `machine.reserve_memory_gb`: expected a number of GB, 0 or more",
                    path.display()
                );
            }
            config.machine = MachineReserve {
                cpus: machine.reserve_cpus.unwrap_or(0),
                memory_gb: memory,
            };
        }
        let base = path.parent().unwrap_or(Path::new("/"));
        config.environments = file
            .environments
            .unwrap_or_default()
            .into_iter()
            .map(|dir| base.join(dir))
            .collect();
        Ok(config)
    }

    /// Loads the file if it exists; a missing file means the defaults.
    pub fn load(path: &Path) -> anyhow::Result<Config> {
        match std::fs::read_to_string(path) {
            Ok(text) => Config::parse(&text, path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Config::default()),
            Err(e) => Err(anyhow::anyhow!("cannot read {}: {e}", path.display())),
        }
    }
}

/// `$XDG_CONFIG_HOME/rebench/config.toml`, else `$HOME/.config/rebench/config.toml`.
pub fn config_path(xdg_config_home: Option<&str>, home: Option<&str>) -> Option<PathBuf> {
    if let Some(xdg) = xdg_config_home.filter(|x| !x.is_empty()) {
        return Some(PathBuf::from(xdg).join("rebench/config.toml"));
    }
    home.filter(|h| !h.is_empty())
        .map(|h| PathBuf::from(h).join(".config/rebench/config.toml"))
}

/// This user's config file, from the environment.
pub fn user_config_path() -> Option<PathBuf> {
    let xdg = std::env::var("XDG_CONFIG_HOME").ok();
    let home = std::env::var("HOME").ok();
    config_path(xdg.as_deref(), home.as_deref())
}

/// The config of this user, from the environment.
pub fn load_user_config() -> anyhow::Result<Config> {
    match user_config_path() {
        Some(path) => Config::load(&path),
        None => Ok(Config::default()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctrl(c: char) -> KeyEvent {
        KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL)
    }

    #[test]
    fn prefix_specs_parse_in_the_usual_spellings() {
        for spec in ["C-g", "c-g", "Ctrl-g", "ctrl+G", "^g", " C-G "] {
            assert_eq!(PrefixKey::parse(spec).unwrap().byte, 0x07, "{spec}");
        }
        assert_eq!(PrefixKey::parse("C-a").unwrap().byte, 0x01);
        assert_eq!(PrefixKey::parse("C-\\").unwrap().byte, 0x1c);
        assert_eq!(PrefixKey::parse("C-space").unwrap().byte, 0x00);
        assert_eq!(PrefixKey::parse("C-b").unwrap().label(), "C-b");
        assert_eq!(PrefixKey::parse("C-]").unwrap().label(), "C-]");
    }

    #[test]
    fn unusable_prefixes_are_refused_with_a_reason() {
        for spec in ["g", "C-", "C-1", "M-x", "C-gg", ""] {
            let err = PrefixKey::parse(spec).unwrap_err();
            assert!(err.contains("C-g"), "{spec}: {err}");
        }
        assert!(PrefixKey::parse("C-i").unwrap_err().contains("Tab"));
        assert!(PrefixKey::parse("C-m").unwrap_err().contains("Enter"));
    }

    #[test]
    fn prefix_matches_key_events() {
        let g = PrefixKey::DEFAULT;
        assert!(g.matches(&ctrl('g')));
        assert!(g.matches(&KeyEvent::new(
            KeyCode::Char('G'),
            KeyModifiers::CONTROL | KeyModifiers::SHIFT
        )));
        assert!(!g.matches(&KeyEvent::new(KeyCode::Char('g'), KeyModifiers::NONE)));
        assert!(!g.matches(&KeyEvent::new(
            KeyCode::Char('g'),
            KeyModifiers::CONTROL | KeyModifiers::ALT
        )));
        // crossterm reports Ctrl-\ as Ctrl-4.
        let backslash = PrefixKey::parse("C-\\").unwrap();
        assert!(backslash.matches(&ctrl('4')));
        assert!(backslash.matches(&ctrl('\\')));
    }

    #[test]
    fn config_files_parse_and_errors_name_file_and_key() {
        let path = Path::new("/home/x/.config/rebench/config.toml");
        let c = Config::parse("prefix = \"C-b\"\nmouse = false\n", path).unwrap();
        assert_eq!(c.prefix.byte, 0x02);
        assert!(!c.mouse);
        assert!(c.side_panel);
        assert_eq!(Config::parse("", path).unwrap(), Config::default());

        let err = format!(
            "{:#}",
            Config::parse("prefix = \"banana\"", path).unwrap_err()
        );
        assert!(
            err.contains("config.toml") && err.contains("prefix"),
            "{err}"
        );
        let err = format!("{:#}", Config::parse("prefx = \"C-b\"", path).unwrap_err());
        assert!(
            err.contains("config.toml") && err.contains("prefx"),
            "{err}"
        );
        let err = format!("{:#}", Config::parse("mouse = \"yes\"", path).unwrap_err());
        assert!(err.contains("config.toml"), "{err}");

        assert!(!c.operator_bashrc);
        assert!(
            Config::parse("operator_bashrc = true", path)
                .unwrap()
                .operator_bashrc
        );
        let c = Config::parse("environments = [\"/srv/envs\", \"mine\"]", path).unwrap();
        assert_eq!(
            c.environments,
            vec![
                PathBuf::from("/srv/envs"),
                PathBuf::from("/home/x/.config/rebench/mine")
            ]
        );
    }

    #[test]
    fn config_path_respects_xdg() {
        assert_eq!(
            config_path(Some("/x"), Some("/home/u")).unwrap(),
            PathBuf::from("/x/rebench/config.toml")
        );
        assert_eq!(
            config_path(Some(""), Some("/home/u")).unwrap(),
            PathBuf::from("/home/u/.config/rebench/config.toml")
        );
        assert_eq!(config_path(None, None), None);
    }

    #[test]
    fn missing_file_means_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let c = Config::load(&dir.path().join("nope.toml")).unwrap();
        assert_eq!(c, Config::default());
        let p = dir.path().join("config.toml");
        std::fs::write(&p, "prefix = 3").unwrap();
        let err = format!("{:#}", Config::load(&p).unwrap_err());
        assert!(err.contains(&p.display().to_string()), "{err}");
    }
}
