//! Which of the server's environment variables session processes must not
//! inherit: the operator's credentials (model and judge endpoint keys, cloud
//! tokens) reach scorers, which need them, but never a participant's shell
//! or command.

/// Words that mark a variable as a credential when they are a whole
/// `_`-separated part of its name (`OPENAI_API_KEY`, `HF_TOKEN`,
/// `AWS_SECRET_ACCESS_KEY`), in any case.
const SECRET_WORDS: &[&str] = &[
    "KEY",
    "APIKEY",
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "CREDENTIAL",
    "CREDENTIALS",
];

/// Whether a session process must not inherit `name`: every `REBENCH_*`
/// variable of the server (operator settings such as `REBENCH_JUDGE_URL`;
/// the session's own ones are set afresh) and anything named like a
/// credential.
pub fn is_withheld(name: &str) -> bool {
    name.starts_with("REBENCH_")
        || name
            .split('_')
            .any(|part| SECRET_WORDS.iter().any(|w| part.eq_ignore_ascii_case(w)))
}

/// The names among `inherited` that session processes must not get.
pub fn withheld<I, K>(inherited: I) -> Vec<String>
where
    I: IntoIterator<Item = K>,
    K: AsRef<std::ffi::OsStr>,
{
    inherited
        .into_iter()
        .filter_map(|name| name.as_ref().to_str().map(str::to_string))
        .filter(|name| is_withheld(name))
        .collect()
}

/// The names in this process's environment that session processes must not get.
pub fn withheld_from_here() -> Vec<String> {
    withheld(std::env::vars_os().map(|(name, _)| name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_and_operator_settings_are_withheld() {
        for name in [
            "OPENAI_API_KEY",
            "ANTHROPIC_API_KEY",
            "HF_TOKEN",
            "GITHUB_TOKEN",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_SESSION_TOKEN",
            "DB_PASSWORD",
            "my_secret",
            "REBENCH_JUDGE_URL",
            "REBENCH_MODEL_KEY",
            "GOOGLE_APPLICATION_CREDENTIALS",
        ] {
            assert!(is_withheld(name), "{name}");
        }
        for name in [
            "PATH",
            "HOME",
            "LANG",
            "KEYBOARD_LAYOUT",
            "MONKEY",
            "TOKENIZERS_PARALLELISM",
            "CUDA_VISIBLE_DEVICES",
            "PIP_FIND_LINKS",
            "SSH_AUTH_SOCK",
        ] {
            assert!(!is_withheld(name), "{name}");
        }
    }

    #[test]
    fn withheld_picks_names_from_an_environment() {
        let names = withheld(["PATH", "HF_TOKEN", "REBENCH_JUDGE_KEY", "TERM"]);
        assert_eq!(names, vec!["HF_TOKEN", "REBENCH_JUDGE_KEY"]);
    }
}
