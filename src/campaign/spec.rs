//! `campaign.toml`: agents, environments, run lengths and attempts, read
//! into a checked [`CampaignSpec`] and expanded into the runs it plans.
//! Every error names the file and the field.

use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::environment::duration::{format_duration, parse_duration};
use crate::session::RunLimits;
use crate::session::campaign::{CampaignPlan, RunPlan, valid_name};

/// How an agent reaches its model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Api {
    /// OpenAI-compatible chat completions with tools.
    Openai,
    /// The Anthropic Messages API with tools.
    Anthropic,
    /// An external scaffold, run like `rebench agent`.
    Command,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentSpec {
    pub name: String,
    pub api: Api,
    #[serde(default)]
    pub base_url: Option<String>,
    #[serde(default)]
    pub model: Option<String>,
    /// The variable the key is read from (never the key itself).
    #[serde(default)]
    pub key_env: Option<String>,
    /// USD per million input tokens.
    #[serde(default)]
    pub price_in: f64,
    /// USD per million output tokens.
    #[serde(default)]
    pub price_out: f64,
    #[serde(default)]
    pub command: Option<Vec<String>>,
    /// The most tokens one answer may have.
    #[serde(default = "default_max_output")]
    pub max_output_tokens: u32,
    /// The conversation is kept under this many characters by dropping old tool outputs.
    #[serde(default = "default_context_chars")]
    pub context_chars: usize,
}

fn default_max_output() -> u32 {
    4096
}

fn default_context_chars() -> usize {
    400_000
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvironmentSpec {
    pub id: String,
    #[serde(default)]
    pub profile: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct CampaignSection {
    name: String,
    #[serde(default = "one")]
    concurrency: u32,
    /// How long a failing model API is retried before the run pauses.
    #[serde(default)]
    retry_for: Option<String>,
    /// How often a paused run's endpoint is tried again.
    #[serde(default)]
    probe_every: Option<String>,
    /// The longest one model call may take.
    #[serde(default)]
    request_timeout: Option<String>,
}

fn one() -> u32 {
    1
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RunsSection {
    lengths: Vec<String>,
    #[serde(default = "one")]
    attempts: u32,
    #[serde(default)]
    max_tokens: Option<u64>,
    #[serde(default)]
    max_cost: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct CampaignFile {
    campaign: CampaignSection,
    agents: Vec<AgentSpec>,
    environments: Vec<EnvironmentSpec>,
    runs: RunsSection,
}

/// Timing of the model-API outage handling.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OutagePolicy {
    pub retry_for: Duration,
    pub probe_every: Duration,
    pub request_timeout: Duration,
}

impl Default for OutagePolicy {
    fn default() -> Self {
        OutagePolicy {
            retry_for: Duration::from_secs(30),
            probe_every: Duration::from_secs(15),
            request_timeout: Duration::from_secs(300),
        }
    }
}

/// A checked campaign file.
#[derive(Debug, Clone, PartialEq)]
pub struct CampaignSpec {
    pub name: String,
    pub file: String,
    pub source: String,
    pub concurrency: u32,
    pub agents: Vec<AgentSpec>,
    pub environments: Vec<EnvironmentSpec>,
    pub lengths: Vec<Duration>,
    pub attempts: u32,
    pub limits: RunLimits,
    pub outage: OutagePolicy,
}

impl CampaignSpec {
    pub fn load(path: &Path) -> anyhow::Result<CampaignSpec> {
        let source = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
        CampaignSpec::parse(&source, &path.display().to_string())
    }

    pub fn parse(source: &str, file: &str) -> anyhow::Result<CampaignSpec> {
        let parsed: CampaignFile =
            toml::from_str(source).map_err(|e| anyhow::anyhow!("{file}: {e}"))?;
        let fail = |field: &str, why: String| anyhow::anyhow!("{file}: {field}: {why}");
        let c = &parsed.campaign;
        if !valid_name(&c.name) {
            return Err(fail(
                "campaign.name",
                format!(
                    "{:?}: use lowercase letters, digits and dashes (at most 64)",
                    c.name
                ),
            ));
        }
        if c.concurrency == 0 {
            return Err(fail("campaign.concurrency", "must be at least 1".into()));
        }
        let duration = |field: &str, text: &Option<String>, default: Duration| match text {
            None => Ok(default),
            Some(t) => match parse_duration(t) {
                Ok(d) if d.is_zero() => Err(fail(field, "must be more than 0s".into())),
                Ok(d) => Ok(d),
                Err(e) => Err(fail(field, e)),
            },
        };
        let defaults = OutagePolicy::default();
        let outage = OutagePolicy {
            retry_for: duration("campaign.retry_for", &c.retry_for, defaults.retry_for)?,
            probe_every: duration("campaign.probe_every", &c.probe_every, defaults.probe_every)?,
            request_timeout: duration(
                "campaign.request_timeout",
                &c.request_timeout,
                defaults.request_timeout,
            )?,
        };
        if outage.probe_every > Duration::from_secs(15) {
            return Err(fail(
                "campaign.probe_every",
                "at most 15s: an outage must not cost a run more than that once the API is back"
                    .into(),
            ));
        }
        if parsed.agents.is_empty() {
            return Err(fail(
                "agents",
                "name at least one agent ([[agents]])".into(),
            ));
        }
        for (i, agent) in parsed.agents.iter().enumerate() {
            check_agent(agent, &format!("agents[{i}]")).map_err(|(f, why)| fail(&f, why))?;
            if parsed.agents[..i].iter().any(|a| a.name == agent.name) {
                return Err(fail(
                    &format!("agents[{i}].name"),
                    format!("{:?} is used twice", agent.name),
                ));
            }
        }
        if parsed.environments.is_empty() {
            return Err(fail(
                "environments",
                "name at least one environment ([[environments]])".into(),
            ));
        }
        for (i, env) in parsed.environments.iter().enumerate() {
            if env.id.trim().is_empty() {
                return Err(fail(&format!("environments[{i}].id"), "is empty".into()));
            }
            if parsed.environments[..i]
                .iter()
                .any(|e| e.id == env.id && e.profile == env.profile)
            {
                return Err(fail(
                    &format!("environments[{i}]"),
                    format!("{} is listed twice with the same profile", env.id),
                ));
            }
        }
        let runs = &parsed.runs;
        if runs.lengths.is_empty() {
            return Err(fail(
                "runs.lengths",
                "give at least one, e.g. [\"2h\"]".into(),
            ));
        }
        let mut lengths = Vec::new();
        for (i, text) in runs.lengths.iter().enumerate() {
            let field = format!("runs.lengths[{i}]");
            let length = parse_duration(text).map_err(|e| fail(&field, e))?;
            if length.is_zero() {
                return Err(fail(&field, "must be more than 0s".into()));
            }
            if lengths.contains(&length) {
                return Err(fail(&field, format!("{text} is listed twice")));
            }
            lengths.push(length);
        }
        if runs.attempts == 0 {
            return Err(fail("runs.attempts", "must be at least 1".into()));
        }
        if runs.max_tokens == Some(0) {
            return Err(fail("runs.max_tokens", "must be more than 0".into()));
        }
        if runs.max_cost.is_some_and(|c| !c.is_finite() || c <= 0.0) {
            return Err(fail(
                "runs.max_cost",
                "must be a positive number of USD".into(),
            ));
        }
        Ok(CampaignSpec {
            name: c.name.clone(),
            file: file.to_string(),
            source: source.to_string(),
            concurrency: c.concurrency,
            agents: parsed.agents.clone(),
            environments: parsed.environments.clone(),
            lengths,
            attempts: runs.attempts,
            limits: RunLimits {
                max_tokens: runs.max_tokens,
                max_cost_usd: runs.max_cost,
            },
            outage,
        })
    }

    pub fn agent(&self, name: &str) -> Option<&AgentSpec> {
        self.agents.iter().find(|a| a.name == name)
    }

    /// Every run, ordered so that the first ones cover every agent,
    /// environment and length once before any second attempt.
    pub fn runs(&self) -> Vec<RunPlan> {
        let mut runs = Vec::new();
        for attempt in 1..=self.attempts {
            for length in &self.lengths {
                for env in &self.environments {
                    for agent in &self.agents {
                        let env_label = match &env.profile {
                            Some(p) => format!("{}:{p}", env.id),
                            None => env.id.clone(),
                        };
                        runs.push(RunPlan {
                            id: format!(
                                "{}/{env_label}/{}/{attempt}",
                                agent.name,
                                format_duration(*length)
                            ),
                            agent: agent.name.clone(),
                            environment: env.id.clone(),
                            profile: env.profile.clone(),
                            length_s: length.as_secs(),
                            attempt,
                        });
                    }
                }
            }
        }
        runs
    }

    /// What decides the runs and how they are compared; timing knobs and
    /// concurrency may change between `campaign run`s, this may not.
    pub fn spec_hash(&self) -> String {
        let decided = serde_json::json!({
            "agents": self.agents,
            "environments": self.environments,
            "lengths": self.lengths.iter().map(|l| l.as_secs()).collect::<Vec<_>>(),
            "attempts": self.attempts,
            "limits": self.limits,
        });
        let digest = Sha256::digest(decided.to_string().as_bytes());
        digest.iter().map(|b| format!("{b:02x}")).collect()
    }

    pub fn plan(&self) -> CampaignPlan {
        CampaignPlan {
            name: self.name.clone(),
            spec_hash: self.spec_hash(),
            source: self.source.clone(),
            file: self.file.clone(),
            concurrency: self.concurrency,
            runs: self.runs(),
        }
    }
}

fn check_agent(agent: &AgentSpec, at: &str) -> Result<(), (String, String)> {
    let fail = |field: &str, why: &str| Err((format!("{at}.{field}"), why.to_string()));
    if agent.name.trim().is_empty()
        || agent.name.len() > 100
        || agent.name.contains('/')
        || agent.name.chars().any(char::is_control)
    {
        return fail("name", "1 to 100 printable characters, no '/'");
    }
    for (field, price) in [("price_in", agent.price_in), ("price_out", agent.price_out)] {
        if !price.is_finite() || price < 0.0 {
            return fail(
                field,
                "a price is a non-negative number (USD per million tokens)",
            );
        }
    }
    match agent.api {
        Api::Command => {
            if agent.command.as_ref().is_none_or(|c| c.is_empty()) {
                return fail(
                    "command",
                    "api = \"command\" needs command = [\"program\", \"arg\", ...]",
                );
            }
        }
        Api::Openai | Api::Anthropic => {
            match agent.base_url.as_deref() {
                None => return fail("base_url", "required for a model endpoint"),
                Some(url) if !(url.starts_with("http://") || url.starts_with("https://")) => {
                    return fail("base_url", "must start with http:// or https://");
                }
                Some(_) => {}
            }
            if agent.model.as_deref().is_none_or(|m| m.trim().is_empty()) {
                return fail("model", "required for a model endpoint");
            }
            if agent.command.is_some() {
                return fail("command", "only for api = \"command\"");
            }
            if agent.max_output_tokens == 0 {
                return fail("max_output_tokens", "must be at least 1");
            }
            if agent.context_chars < 10_000 {
                return fail("context_chars", "must be at least 10000");
            }
        }
    }
    if let Some(var) = &agent.key_env
        && (var.is_empty() || var.contains('='))
    {
        return fail("key_env", "the name of an environment variable");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEMO: &str = r#"
[campaign]
name = "demo"
concurrency = 4

[[agents]]
name = "gpt-x-basic"
api = "openai"
base_url = "http://127.0.0.1:8000/v1"
model = "gpt-x"
key_env = "OPENAI_API_KEY"
price_in = 2.5
price_out = 10.0

[[agents]]
name = "mine"
api = "command"
command = ["python3", "my_scaffold.py"]

[[environments]]
id = "prefix-sum"
profile = "smoke"

[runs]
lengths = ["30m", "2h"]
attempts = 4
max_tokens = 2000000
max_cost = 20.0
"#;

    #[test]
    fn the_issue_example_plans_every_run_once() {
        let spec = CampaignSpec::parse(DEMO, "demo.toml").unwrap();
        let runs = spec.runs();
        assert_eq!(runs.len(), 2 * 2 * 4);
        let ids: std::collections::HashSet<_> = runs.iter().map(|r| r.id.clone()).collect();
        assert_eq!(ids.len(), runs.len());
        assert_eq!(runs[0].id, "gpt-x-basic/prefix-sum:smoke/30m/1");
        assert_eq!(runs[1].agent, "mine");
        // Every first attempt comes before any second one.
        assert!(runs[..4].iter().all(|r| r.attempt == 1));
        assert_eq!(spec.limits.max_tokens, Some(2_000_000));
        assert_eq!(spec.outage, OutagePolicy::default());
    }

    #[test]
    fn the_hash_ignores_concurrency_but_not_the_model() {
        let base = CampaignSpec::parse(DEMO, "a").unwrap();
        let faster =
            CampaignSpec::parse(&DEMO.replace("concurrency = 4", "concurrency = 8"), "a").unwrap();
        let other =
            CampaignSpec::parse(&DEMO.replace("model = \"gpt-x\"", "model = \"gpt-y\""), "a")
                .unwrap();
        assert_eq!(base.spec_hash(), faster.spec_hash());
        assert_ne!(base.spec_hash(), other.spec_hash());
    }

    #[test]
    fn errors_name_the_file_and_field() {
        let cases = [
            (
                DEMO.replace("name = \"demo\"", "name = \"Demo!\""),
                "campaign.name",
            ),
            (
                DEMO.replace("base_url = \"http://127.0.0.1:8000/v1\"\n", ""),
                "agents[0].base_url",
            ),
            (
                DEMO.replace("command = [\"python3\", \"my_scaffold.py\"]", ""),
                "agents[1].command",
            ),
            (
                DEMO.replace("\"30m\", \"2h\"", "\"30m\", \"2x\""),
                "runs.lengths[1]",
            ),
            (
                DEMO.replace("attempts = 4", "attempts = 0"),
                "runs.attempts",
            ),
            (
                DEMO.replace("max_cost = 20.0", "max_cost = -1.0"),
                "runs.max_cost",
            ),
            (
                DEMO.replace("price_in = 2.5", "price_in = -2.5"),
                "agents[0].price_in",
            ),
            (
                DEMO.replace("name = \"mine\"", "name = \"gpt-x-basic\""),
                "agents[1].name",
            ),
        ];
        for (text, field) in cases {
            let err = CampaignSpec::parse(&text, "c.toml")
                .unwrap_err()
                .to_string();
            assert!(err.starts_with("c.toml: "), "{err}");
            assert!(err.contains(field), "{field}: {err}");
        }
        let err = CampaignSpec::parse(
            &DEMO.replace("attempts = 4", "attempts = 4\nretries = 2"),
            "c.toml",
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("retries") && err.contains("line"), "{err}");
    }
}
