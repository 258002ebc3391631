//! Issue 19, item 3: the score log of every bundled environment's session
//! starts with a valid entry at about 0, through real sessions (the
//! server, its sandbox and the starting solution's setup where the
//! environment needs one), at the smoke profile. The PyTorch environments
//! are prepared in the data dir their own tests share (`common::torch_env`),
//! so this usually reuses those preparations.

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is a failure with its message

mod common;

use common::torch_env::{PROFILE, data_dir, loud};
use common::{TestServer, repo_root};
use rebench::environment::{Environment, prepare};
use rebench::session::ScorePhase;

/// Every bundled environment, and whether its metric is a runtime (a
/// starting solution measured faster here than where the manifest's values
/// were measured normalizes above 0; slower clips to 0).
const ENVIRONMENTS: [(&str, bool); 8] = [
    ("fix-embedding", false),
    ("gpt2-chat-rl", false),
    ("optimize-kernel", true),
    ("optimize-llm-foundry", true),
    ("prefix-sum", true),
    ("restricted-mlm", false),
    ("rust-codecontests", false),
    ("scaling-law", false),
];

/// A session's state through the CLI (callable from a sync closure).
fn state_of(server: &TestServer, id: &str) -> rebench::session::Phase {
    let out = server.cli(&["show", id, "--json"]);
    let view: rebench::protocol::SessionView = serde_json::from_slice(&out.stdout).unwrap();
    view.state
}

#[tokio::test(flavor = "multi_thread")]
async fn every_bundled_environment_starts_its_log_with_a_valid_entry_at_about_zero() {
    let data = data_dir();
    for (id, _) in ENVIRONMENTS {
        let env = Environment::load(&repo_root().join("environments").join(id)).unwrap();
        let mut log = Vec::new();
        if let Err(e) = prepare::prepare(&env, Some(PROFILE), &data, &mut log) {
            let text = format!("SKIPPED: could not prepare {id} (smoke): {e}");
            if std::env::var_os("REBENCH_REQUIRE_TORCH").is_some_and(|v| v == "1") {
                panic!("{text}\n{}", String::from_utf8_lossy(&log));
            }
            loud(&text);
            return;
        }
    }
    // The server works in the shared data dir, where the preparations are;
    // nothing else in this test binary uses it.
    let server = TestServer::start_in(&data, &[]);
    // Sessions an interrupted earlier run left would hold hardware this
    // one's wait for: they end first.
    let listed = server.cli(&["sessions", "--json"]);
    let views: Vec<rebench::protocol::SessionView> =
        serde_json::from_slice(&listed.stdout).unwrap();
    for view in views
        .iter()
        .filter(|v| v.state != rebench::session::Phase::Ended)
    {
        // One whose starting score runs now ends once it is in.
        let ended = common::wait_until(std::time::Duration::from_secs(300), || {
            server.cli(&["end", &view.id]);
            state_of(&server, &view.id) == rebench::session::Phase::Ended
        });
        assert!(ended, "could not end {} left by an earlier run", view.id);
    }
    let mut seen = Vec::new();
    for (id, timing) in ENVIRONMENTS {
        let session = server.new_session_cli(&repo_root().join("environments").join(id), PROFILE);
        let view = server.show(&session).await;
        let scores = view.scores.clone().unwrap_or_default();
        let first = scores
            .first()
            .unwrap_or_else(|| panic!("{id}: no score-log entry: {view:#?}"));
        assert_eq!(first.phase, ScorePhase::Starting, "{id}: {first:#?}");
        assert_eq!(
            first.valid,
            Some(true),
            "{id}: the starting entry is invalid: {}",
            first.message
        );
        let normalized = first
            .normalized
            .expect("a valid entry has a normalized score");
        let band = if timing { 0.5 } else { 0.25 };
        assert!(
            (0.0..=band).contains(&normalized),
            "{id}: the starting entry normalizes to {normalized} (raw {:?}), not about 0",
            first.raw
        );
        seen.push(format!("{id} {normalized:.3} (raw {:?})", first.raw));
        // Its hardware goes back for the next (on a small machine the
        // sessions would otherwise wait for each other in the queue).
        let ended = server.cli(&["end", &session]);
        assert!(
            ended.status.success(),
            "{}",
            String::from_utf8_lossy(&ended.stderr)
        );
    }
    loud(&format!("starting entries: {}", seen.join(", ")));
}
