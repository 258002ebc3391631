//! The environment every process of a session starts from, built from an
//! allowlist rather than the server's environment minus what looks secret:
//! the operator's credentials (model and judge keys, database URLs, cloud
//! tokens, whatever they are named) never reach a participant's shell or
//! command, the jail's first process, or participant code a scorer runs.
//! A scorer gets the same base plus the variables its manifest names in
//! `[scoring] pass_env`.

use std::ffi::OsString;

/// Variables of the server a session process keeps: how to find programs,
/// who and where it is, language and time zone. Which GPUs to use is never
/// the operator's: the server sets it from the session's grant.
const PASSED: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "TZ",
    "TERM",
    "COLORTERM",
    "TMPDIR",
    "LD_LIBRARY_PATH",
    "CUDA_HOME",
    "NVIDIA_DRIVER_CAPABILITIES",
];

/// Variables the server sets on a session's processes itself (the session's
/// id, token and socket, its marker, the preparation's venv, caches): kept
/// by `rebench sandbox-enter` when it scrubs its own environment.
const SESSION_SET: &[&str] = &[
    "REBENCH_SESSION",
    "REBENCH_TOKEN",
    "REBENCH_SOCKET",
    "REBENCH_SANDBOX",
    "REBENCH_DATA_DIR",
    // Read and unset by the session rc (`assets/session.bashrc`).
    "REBENCH_OPERATOR_BASHRC",
    "VIRTUAL_ENV",
    "XDG_CACHE_HOME",
    "TRITON_CACHE_DIR",
    "MPLCONFIGDIR",
    // From the session's grant (`hardware::grant`).
    "CUDA_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER",
    "NVIDIA_VISIBLE_DEVICES",
];

/// Words that mark a name as a credential when they are a whole
/// `_`-separated part of it or, for the long ones, anywhere in it: a second
/// guard, so that even an allowlisted prefix (`LC_`) cannot carry one.
const SECRET_PARTS: &[&str] = &["KEY", "PAT", "PASS", "PWD"];
const SECRET_WORDS: &[&str] = &[
    "APIKEY",
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "CREDENTIAL",
    "AUTH",
    "COOKIE",
    "SESSIONID",
];

/// Whether a variable of the server's environment may reach a session process.
pub fn is_passed(name: &str) -> bool {
    (PASSED.contains(&name) || name.starts_with("LC_")) && !looks_secret(name)
}

/// Whether `rebench sandbox-enter` keeps `name` when it scrubs its own
/// environment: the allowlist and what the server sets for a session.
pub fn is_kept_by_launcher(name: &str) -> bool {
    is_passed(name) || SESSION_SET.contains(&name)
}

/// Whether a name looks like it holds a credential.
pub fn looks_secret(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    upper.split('_').any(|part| SECRET_PARTS.contains(&part))
        || SECRET_WORDS.iter().any(|word| upper.contains(word))
}

/// The allowlisted variables among `vars` (names and values that are not
/// UTF-8 are dropped).
pub fn passed_from<I>(vars: I) -> Vec<(String, String)>
where
    I: IntoIterator<Item = (OsString, OsString)>,
{
    vars.into_iter()
        .filter_map(|(name, value)| Some((name.into_string().ok()?, value.into_string().ok()?)))
        .filter(|(name, _)| is_passed(name))
        .collect()
}

/// The allowlisted variables of this process: the base of every session
/// process's environment.
pub fn passed_from_here() -> Vec<(String, String)> {
    passed_from(std::env::vars_os())
}

/// The variables of this process named in `names` (a scorer's `pass_env`),
/// in that order; names that are not set are left out.
pub fn granted_from_here(names: &[String]) -> Vec<(String, String)> {
    names
        .iter()
        .filter_map(|name| Some((name.clone(), std::env::var(name).ok()?)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(pairs: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        pairs
            .iter()
            .map(|(k, v)| (OsString::from(k), OsString::from(v)))
            .collect()
    }

    #[test]
    fn only_allowlisted_variables_pass() {
        let vars = os(&[
            ("PATH", "/usr/bin"),
            ("HOME", "/root"),
            ("LC_ALL", "C.UTF-8"),
            ("CUDA_VISIBLE_DEVICES", "0"),
            ("OPENAI_API_KEY", "sk-1"),
            ("REBENCH_JUDGE_KEY", "k"),
            ("REBENCH_DATA_DIR", "/data"),
            ("DATABASE_URL", "postgres://u:pw@db/x"),
            ("GITHUB_PAT", "ghp"),
            ("MY_APIKEY", "x"),
            ("SERVICE_AUTH_HEADER", "Bearer x"),
            ("HTTPS_PROXY", "http://u:pw@proxy:1"),
            ("SSH_AUTH_SOCK", "/tmp/agent"),
            ("SOMETHING_ELSE", "1"),
        ]);
        let names: Vec<String> = passed_from(vars).into_iter().map(|(k, _)| k).collect();
        // Which GPUs a session uses is its grant's, never the operator's.
        assert_eq!(names, ["PATH", "HOME", "LC_ALL"]);
    }

    #[test]
    fn credential_names_are_recognised_even_under_an_allowed_prefix() {
        for name in [
            "LC_API_KEY",
            "LC_TOKEN",
            "GITHUB_PAT",
            "X_APIKEY_Y",
            "PROXY_AUTHORIZATION",
            "DB_PASSWORD",
            "my_secret",
            "GOOGLE_APPLICATION_CREDENTIALS",
        ] {
            assert!(looks_secret(name), "{name}");
            assert!(!is_passed(name), "{name}");
        }
        for name in ["PATH", "LC_ALL", "KEYBOARD", "PATHS"] {
            assert!(!looks_secret(name), "{name}");
        }
    }

    #[test]
    fn the_launcher_keeps_what_the_server_sets_for_a_session() {
        for name in ["REBENCH_TOKEN", "REBENCH_SANDBOX", "VIRTUAL_ENV", "PATH"] {
            assert!(is_kept_by_launcher(name), "{name}");
        }
        for name in [
            "REBENCH_PREPARED",
            "REBENCH_JAIL",
            "REBENCH_JUDGE_KEY",
            "PREFIX_SUM_N",
        ] {
            assert!(!is_kept_by_launcher(name), "{name}");
        }
    }
}
