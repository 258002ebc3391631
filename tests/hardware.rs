//! Every session owns its hardware, through the real server: a stand-in
//! `nvidia-smi` first on the server's PATH and GPU device nodes made with
//! `mknod` in a folder named by `REBENCH_DEV_DIR` (docs/hardware.md).
//! Two sessions get different GPUs and see only their own (each backend
//! that runs here), a third waits in the queue and starts by itself, off
//! the clock, when the first ends; a `kill -9` of the server keeps every
//! grant; cores and memory are enforced from inside a session.

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is a failure with its message

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{TestServer, cgroups_or_skip, fixture_env};
use rebench::protocol::{CreateSession, ErrorCode, HostView, Request, SessionView};
use rebench::session::{Kind, Phase};

/// A machine with two H100s: the stand-in tool and the nodes.
struct FakeGpus {
    dir: tempfile::TempDir,
    bin: PathBuf,
    dev: PathBuf,
}

const UUIDS: [&str; 2] = ["GPU-11111111-aaaa", "GPU-22222222-bbbb"];

impl FakeGpus {
    /// What `nvidia-smi --query-compute-apps` lists from now on.
    fn set_processes(&self, csv: &str) {
        std::fs::write(self.dir.path().join("apps"), csv).unwrap();
    }

    /// None (said on stderr, a failure under REBENCH_REQUIRE_CGROUPS=1)
    /// where device nodes cannot be made (not root).
    fn new(what: &str) -> Option<FakeGpus> {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        let dev = dir.path().join("dev");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::create_dir_all(&dev).unwrap();
        let tool = bin.join("nvidia-smi");
        std::fs::write(
            &tool,
            format!(
                "#!/bin/sh\ncase \"$*\" in\n\
                 *--query-gpu=index,uuid,name,memory.total*) printf '0, {a}, NVIDIA H100 80GB HBM3, 81559\\n1, {b}, NVIDIA H100 80GB HBM3, 81559\\n' ;;\n\
                 *--query-compute-apps*) cat {apps} 2>/dev/null; exit 0 ;;\n\
                 *--query-gpu=index,uuid,utilization.gpu,memory.used*) printf '0, {a}, 7, 100\\n1, {b}, 0, 0\\n' ;;\n\
                 *) exit 1 ;;\nesac\n",
                a = UUIDS[0],
                b = UUIDS[1],
                apps = dir.path().join("apps").display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&tool, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        for (name, minor) in [("nvidia0", 0), ("nvidia1", 1), ("nvidiactl", 255)] {
            let made = std::process::Command::new("mknod")
                .arg(dev.join(name))
                .args(["c", "195", &minor.to_string()])
                .status()
                .unwrap();
            if !made.success() {
                let text = format!("SKIPPED: {what} did not run: mknod needs root");
                if std::env::var_os("REBENCH_REQUIRE_CGROUPS").is_some_and(|v| v == "1") {
                    panic!("{text}");
                }
                eprintln!("\n{text}\n");
                return None;
            }
        }
        Some(FakeGpus { dir, bin, dev })
    }

    fn server(&self, backend: &str, extra: &[(&str, &str)]) -> TestServer {
        let path = format!(
            "{}:{}",
            self.bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let mut vars = vec![
            ("PATH", path.as_str()),
            ("REBENCH_DEV_DIR", self.dev.to_str().unwrap()),
            ("REBENCH_BACKEND", backend),
        ];
        vars.extend_from_slice(extra);
        TestServer::start_with_env(&vars)
    }
}

/// The fixture environment asking for one H100 (untimed, one core).
fn one_gpu_env() -> (tempfile::TempDir, PathBuf) {
    fixture_env(|text| text.replace("gpus = 0", "gpus = 1\ngpu_model = \"H100\""))
}

async fn create(server: &TestServer, env: &Path, sandbox: &str) -> SessionView {
    server
        .admin()
        .await
        .call(Request::CreateSession(Box::new(CreateSession {
            sandbox: Some(sandbox.into()),
            ..CreateSession::new(env.display().to_string(), "tess", Kind::Agent)
        })))
        .await
        .unwrap()
}

/// The session's view once `check` holds of it (polled for up to 15 s:
/// the queue is served at once on an end and every 5 s besides).
async fn view_once(
    server: &TestServer,
    session: &str,
    check: impl Fn(&SessionView) -> bool,
) -> Option<SessionView> {
    for _ in 0..150 {
        let view = server.show(session).await;
        if check(&view) {
            return Some(view);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    None
}

/// Its view once the queue has granted its hardware.
async fn granted(server: &TestServer, session: &str) -> SessionView {
    view_once(server, session, |v| v.state == Phase::Created)
        .await
        .unwrap_or_else(|| panic!("{session} was not granted its hardware"))
}

/// Starts the clock, once the starting score (taken when the hardware was
/// granted, or again after a restart) is in.
async fn begin(server: &TestServer, session: &str) -> SessionView {
    for _ in 0..600 {
        let started = server
            .admin()
            .await
            .call(Request::Begin {
                session: session.into(),
            })
            .await;
        match started {
            Err(e) if e.code() == Some(ErrorCode::Busy) => {
                tokio::time::sleep(Duration::from_millis(100)).await
            }
            other => return other.unwrap(),
        }
    }
    panic!("the starting score of {session} never finished");
}

fn gpu_index(view: &SessionView) -> u32 {
    let grant = view.grant.as_ref().expect("a grant");
    assert_eq!(grant.gpus.len(), 1, "{grant:?}");
    grant.gpus[0].index
}

/// What a session's process sees: its nvidia nodes and its variables.
async fn seen_from_inside(server: &TestServer, session: &str) -> (Vec<String>, String) {
    let reply = server
        .exec(
            session,
            "ls /dev | grep '^nvidia' | sort | tr '\\n' ' '; echo; echo \"CVD=$CUDA_VISIBLE_DEVICES\"",
        )
        .await;
    assert_eq!(reply.exit_code, Some(0), "{reply:?}");
    let mut lines = reply.stdout.lines();
    let nodes = lines
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_string)
        .collect();
    let cvd = lines
        .find_map(|l| l.strip_prefix("CVD="))
        .unwrap_or_default()
        .to_string();
    (nodes, cvd)
}

/// Two sessions, two GPUs, a third in line; the first ends and the third
/// starts by itself; a kill -9 keeps every grant.
async fn gpus_are_owned(backend: &str) {
    let Some(gpus) = FakeGpus::new(&format!("GPU ownership ({backend})")) else {
        return;
    };
    let (_env_dir, env) = one_gpu_env();
    // The operator's own choice of GPUs must not reach any session.
    let mut server = gpus.server(
        backend,
        &[
            ("CUDA_VISIBLE_DEVICES", "0,1"),
            ("NVIDIA_VISIBLE_DEVICES", "all"),
        ],
    );

    let a = create(&server, &env, backend).await;
    let b = create(&server, &env, backend).await;
    assert_eq!(a.state, Phase::Created, "{a:?}");
    assert_eq!(b.state, Phase::Created, "{b:?}");
    let (ga, gb) = (gpu_index(&a), gpu_index(&b));
    assert_ne!(ga, gb, "two sessions were given the same GPU");

    let c = create(&server, &env, backend).await;
    assert_eq!(c.state, Phase::Queued, "{c:?}");
    assert!(c.grant.is_none());
    assert_eq!(c.queue_position, Some(1));
    assert!(
        c.waiting_for
            .as_deref()
            .unwrap_or_default()
            .contains("1 GPU (H100)"),
        "{c:?}"
    );
    let refused = server
        .admin()
        .await
        .call::<SessionView>(Request::Begin {
            session: c.id.clone(),
        })
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Some(ErrorCode::InvalidState), "{refused:?}");
    assert!(refused.to_string().contains("1st in line"), "{refused}");

    // From inside: its own GPU only (its node, where a backend can hide
    // the others) and its uuid in the variables.
    for (view, index) in [(&a, ga), (&b, gb)] {
        begin(&server, &view.id).await;
        // Its processes run on its own core only (cgroups here, the engine
        // for a container).
        if backend == "docker" || common::cgroups_usable() {
            let cores = server
                .exec(&view.id, "grep Cpus_allowed_list /proc/self/status")
                .await;
            let core = view.grant.as_ref().unwrap().cpus[0];
            assert_eq!(
                cores.stdout.split_whitespace().last(),
                Some(core.to_string().as_str()),
                "{backend}: {cores:?}"
            );
        }
        let (nodes, cvd) = seen_from_inside(&server, &view.id).await;
        assert_eq!(cvd, UUIDS[index as usize], "{backend}: {nodes:?}");
        let shown = server.show(&view.id).await;
        if backend == "local" {
            assert_eq!(shown.gpu_isolation, "advisory");
        } else {
            assert_eq!(shown.gpu_isolation, "enforced");
            assert_eq!(
                nodes,
                [format!("nvidia{index}"), "nvidiactl".to_string()],
                "{backend}: another session's GPU is visible"
            );
        }
    }

    // `hosts` names each GPU's holder and the one in line.
    let hosts: Vec<HostView> = server.admin().await.call(Request::Hosts).await.unwrap();
    let holders: Vec<Option<String>> = hosts[0].gpus.iter().map(|g| g.session.clone()).collect();
    let mut expected = vec![None, None];
    expected[ga as usize] = Some(a.id.clone());
    expected[gb as usize] = Some(b.id.clone());
    assert_eq!(holders, expected);
    assert_eq!(hosts[0].queued, std::slice::from_ref(&c.id));

    // The first ends: the third gets its GPU by itself, and its clock has
    // not started.
    server
        .admin()
        .await
        .call::<SessionView>(Request::End {
            session: a.id.clone(),
            reason: None,
            note: None,
        })
        .await
        .unwrap();
    let granted = granted(&server, &c.id).await;
    assert_eq!(gpu_index(&granted), ga, "it gets the GPU the first freed");
    assert!(granted.started_at.is_none());
    assert_eq!(granted.active_s, 0.0);

    // kill -9: every grant stands, and a fourth session still has to wait.
    server.kill9();
    server.spawn();
    assert_eq!(gpu_index(&server.show(&b.id).await), gb);
    assert_eq!(gpu_index(&server.show(&c.id).await), ga);
    let d = create(&server, &env, backend).await;
    assert_eq!(d.state, Phase::Queued, "{d:?}");
    let started = begin(&server, &c.id).await;
    assert_eq!(started.state, Phase::Running);
    let (_, cvd) = seen_from_inside(&server, &c.id).await;
    assert_eq!(cvd, UUIDS[ga as usize]);

    // The log says which devices it had.
    let events: Vec<rebench::session::Event> = server
        .admin()
        .await
        .call(Request::Events {
            session: c.id.clone(),
        })
        .await
        .unwrap();
    let kinds: Vec<&str> = events.iter().map(|e| e.kind.name()).collect();
    assert_eq!(kinds[..3], ["created", "queued", "granted"], "{kinds:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn local_sessions_get_their_own_gpu_and_wait_for_one() {
    gpus_are_owned("local").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn bwrap_sessions_see_only_their_own_gpu() {
    if !common::bwrap_works("GPU ownership (bwrap)") {
        return;
    }
    gpus_are_owned("bwrap").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn docker_sessions_see_only_their_own_gpu() {
    if !common::docker_works("GPU ownership (docker)") {
        return;
    }
    // Built once here, not by the server inside a session's creation.
    common::base_image();
    gpus_are_owned("docker").await;
}

/// The cores this machine gives sessions when all but one are reserved.
fn one_core_config() -> (tempfile::TempDir, String) {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("rebench")).unwrap();
    std::fs::write(
        dir.path().join("rebench/config.toml"),
        format!(
            "[machine]\nreserve_cpus = {}\nreserve_memory_gb = 1\n",
            cores - 1
        ),
    )
    .unwrap();
    let path = dir.path().display().to_string();
    (dir, path)
}

/// From inside a session: it runs on its granted core only, cannot move
/// to another, and memory above its limit is refused.
async fn cores_and_memory_hold(backend: &str) {
    if !cgroups_or_skip(&format!("core and memory limits ({backend})")) {
        return;
    }
    let Some(gpus) = FakeGpus::new(&format!("core and memory limits ({backend})")) else {
        return;
    };
    let (_env_dir, env) = fixture_env(|text| text.replace("memory_gb = 0.1", "memory_gb = 0.2"));
    let server = gpus.server(backend, &[]);
    let view = create(&server, &env, backend).await;
    let grant = view.grant.clone().expect("a grant");
    assert_eq!(grant.cpus.len(), 1, "{grant:?}");
    assert_eq!(grant.memory_gb, 0.2);
    begin(&server, &view.id).await;
    let core = grant.cpus[0];
    let reply = server
        .exec(&view.id, "grep Cpus_allowed_list /proc/self/status")
        .await;
    assert_eq!(
        reply.stdout.split_whitespace().last(),
        Some(core.to_string().as_str()),
        "{reply:?}"
    );
    let all = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
    if let Some(other) = (0..all).find(|c| *c != core) {
        let moved = server
            .exec(&view.id, &format!("taskset -c {other} true"))
            .await;
        assert_ne!(
            moved.exit_code,
            Some(0),
            "a process moved itself off its cores: {moved:?}"
        );
    }
    let small = server
        .exec(
            &view.id,
            "python3 -c 'x = bytearray(20 << 20); print(len(x))'",
        )
        .await;
    assert_eq!(small.exit_code, Some(0), "{small:?}");
    let big = server
        .exec(
            &view.id,
            "python3 -c 'x = bytearray(600 << 20); print(len(x))'",
        )
        .await;
    assert_ne!(
        big.exit_code,
        Some(0),
        "600 MB above a 200 MB limit: {big:?}"
    );
    assert!(!big.stdout.contains("629145600"), "{big:?}");
    // The kill is noted in the log (the participant sees it), and the
    // clock runs on.
    let noted = view_once(&server, &view.id, |v| {
        v.notes.iter().any(|n| n.text.starts_with("out of memory"))
    })
    .await
    .expect("no note of the memory kill");
    let note = noted
        .notes
        .iter()
        .find(|n| n.text.starts_with("out of memory"))
        .unwrap();
    let state = noted.state;
    // A process that detaches (`setsid env -i`, waited for here) is held
    // all the same.
    let detached = server
        .exec(
            &view.id,
            "setsid --wait env -i /usr/bin/python3 -c 'x = bytearray(600 << 20); print(len(x))'",
        )
        .await;
    assert_ne!(detached.exit_code, Some(0), "{detached:?}");
    assert!(!detached.stdout.contains("629145600"), "{detached:?}");
    if backend == "bwrap" {
        // The cgroup tree is read-only in the jail: no session widens its
        // own cores or memory.
        let widened = server
            .exec(
                &view.id,
                "n=0; for f in $(find /sys/fs/cgroup -path '*rebench*' \\( -name cpuset.cpus -o -name memory.limit_in_bytes -o -name memory.max \\) 2>/dev/null); do n=$((n+1)); echo 0-1000 > $f 2>/dev/null && echo WROTE $f; done; echo FOUND $n",
            )
            .await;
        assert!(!widened.stdout.contains("WROTE"), "{widened:?}");
        assert!(
            !widened.stdout.contains("FOUND 0"),
            "nothing tried: {widened:?}"
        );
    }
    assert_eq!(note.by, "rebench");
    assert!(note.text.contains("0.2 GB"), "{note:?}");
    assert_eq!(state, Phase::Running);
}

#[tokio::test(flavor = "multi_thread")]
async fn local_sessions_are_held_to_their_cores_and_memory() {
    cores_and_memory_hold("local").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn bwrap_sessions_are_held_to_their_cores_and_memory() {
    if !common::bwrap_works("core and memory limits (bwrap)") {
        return;
    }
    cores_and_memory_hold("bwrap").await;
}

/// A timed environment's session has its core to itself: with one core
/// for sessions, a second timed session and an untimed one both wait, and
/// the first in line gets the core when it is free. The reserve is the
/// operator's `[machine]`.
#[tokio::test(flavor = "multi_thread")]
async fn timed_sessions_never_share_a_core() {
    let Some(gpus) = FakeGpus::new("timed sessions' cores") else {
        return;
    };
    let (_config_dir, config) = one_core_config();
    let (_timed_dir, timed) =
        fixture_env(|text| text.replace("visible = true", "visible = true\nexclusive = true"));
    let (_plain_dir, plain) = fixture_env(|t| t);
    let server = gpus.server("local", &[("XDG_CONFIG_HOME", config.as_str())]);
    let first = create(&server, &timed, "local").await;
    assert_eq!(first.state, Phase::Created, "{first:?}");
    let core = first.grant.as_ref().unwrap().cpus.clone();
    assert!(!first.grant.as_ref().unwrap().shared_cpus);
    let second = create(&server, &timed, "local").await;
    assert_eq!(second.state, Phase::Queued, "{second:?}");
    assert!(
        second.waiting_for.as_deref().unwrap().contains("to itself"),
        "{second:?}"
    );
    let untimed = create(&server, &plain, "local").await;
    assert_eq!(
        untimed.state,
        Phase::Queued,
        "it may not share a timed core"
    );
    assert_eq!(untimed.queue_position, Some(2));

    let hosts: Vec<HostView> = server.admin().await.call(Request::Hosts).await.unwrap();
    assert_eq!(hosts[0].cpus, core, "the reserve leaves one core");
    assert!(hosts[0].cpus_free.is_empty());

    // A proctor moves the untimed one up: it is served first when the
    // core is free; then the second.
    let moved = server.cli(&["priority", &untimed.id, "5"]);
    assert!(
        moved.status.success(),
        "{}",
        String::from_utf8_lossy(&moved.stderr)
    );
    assert!(
        String::from_utf8_lossy(&moved.stdout).contains("1st in line"),
        "{}",
        String::from_utf8_lossy(&moved.stdout)
    );
    assert_eq!(server.show(&second.id).await.queue_position, Some(2));
    let not_queued = server.cli(&["priority", &first.id, "9"]);
    assert!(!not_queued.status.success());
    assert!(
        String::from_utf8_lossy(&not_queued.stderr).contains("is not waiting for hardware"),
        "{}",
        String::from_utf8_lossy(&not_queued.stderr)
    );
    // Ends a session, once the starting score taken at its grant is in
    // (an end waits for a scoring run in progress: `busy`).
    let end = |session: String| {
        let server = &server;
        async move {
            for _ in 0..600 {
                let ended = server
                    .admin()
                    .await
                    .call::<SessionView>(Request::End {
                        session: session.clone(),
                        reason: None,
                        note: None,
                    })
                    .await;
                match ended {
                    Err(e) if e.code() == Some(ErrorCode::Busy) => {
                        tokio::time::sleep(Duration::from_millis(100)).await
                    }
                    other => {
                        other.unwrap();
                        return;
                    }
                }
            }
            panic!("{session} could not be ended");
        }
    };
    end(first.id.clone()).await;
    let view = granted(&server, &untimed.id).await;
    assert_eq!(view.state, Phase::Created, "{view:?}");
    assert_eq!(view.grant.unwrap().cpus, core);
    assert_eq!(server.show(&second.id).await.state, Phase::Queued);
    end(untimed.id.clone()).await;
    let view = granted(&server, &second.id).await;
    assert_eq!(view.state, Phase::Created, "{view:?}");
    let grant = view.grant.unwrap();
    assert_eq!(grant.cpus, core);
    assert!(!grant.shared_cpus);
    // A proctor cancels a queued session: it never held anything.
    let third = create(&server, &timed, "local").await;
    assert_eq!(third.state, Phase::Queued);
    end(third.id.clone()).await;
    let cancelled = server.show(&third.id).await;
    assert_eq!(cancelled.state, Phase::Ended);
    assert!(cancelled.grant.is_none());
}

/// `hosts` through the CLI, as an operator reads it.
#[test]
fn the_hosts_command_lists_gpus_and_their_holders() {
    let Some(gpus) = FakeGpus::new("rebench hosts") else {
        return;
    };
    let (_env_dir, env) = one_gpu_env();
    let server = gpus.server("local", &[]);
    let out = server.cli(&["new", env.to_str().unwrap(), "--participant", "p", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let created: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(created["state"], "created");
    let id = created["id"].as_str().unwrap().to_string();
    // A second and a third: the third waits, and `new` says so.
    server.cli(&["new", env.to_str().unwrap(), "--participant", "p"]);
    let third = server.cli(&["new", env.to_str().unwrap(), "--participant", "p"]);
    assert!(third.status.success());
    let said = String::from_utf8_lossy(&third.stderr);
    assert!(
        said.contains("queued: waiting for 1 GPU (H100) (0 free), 1st in line"),
        "{said}"
    );
    assert_eq!(
        String::from_utf8_lossy(&third.stdout).trim().len(),
        6,
        "stdout is the id alone"
    );
    let out = server.cli(&["hosts"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains(&format!(
            "GPU 0 {} NVIDIA H100 80GB HBM3 (81559 MiB): held by {id}",
            UUIDS[0]
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "GPU 1 {} NVIDIA H100 80GB HBM3 (81559 MiB): held by",
            UUIDS[1]
        )),
        "{text}"
    );
    assert!(text.contains("queued: "), "{text}");
    let json = server.cli(&["hosts", "--json"]);
    let hosts: Vec<HostView> = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(hosts[0].name, "local");
    assert_eq!(hosts[0].gpus[0].utilization_pct, Some(7));
    // Its GPU's use is sampled every few seconds (the proctor's view and
    // idle-GPU alert read it).
    let sampled = common::wait_until(Duration::from_secs(15), || {
        let out = server.cli(&["show", &id, "--json"]);
        let view: SessionView = serde_json::from_slice(&out.stdout).unwrap();
        view.gpu_use.first().is_some_and(|u| u.utilization_pct == 7) && view.gpu_used_at.is_some()
    });
    assert!(sampled, "the session's GPU use was never sampled");
    let show = server.cli(&["show", &id]);
    let text = String::from_utf8_lossy(&show.stdout);
    assert!(
        text.contains("hardware: GPU 0 (NVIDIA H100 80GB HBM3)")
            && text.contains("gpu isolation: advisory"),
        "{text}"
    );
}

/// A GPU whose last holder left a process on it is not granted again
/// until the process is gone; the one in line is told why.
#[tokio::test(flavor = "multi_thread")]
async fn a_gpu_is_granted_again_only_once_nothing_runs_on_it() {
    let Some(gpus) = FakeGpus::new("GPU hygiene") else {
        return;
    };
    let (_env_dir, env) = one_gpu_env();
    let server = gpus.server("local", &[]);
    let a = create(&server, &env, "local").await;
    let _b = create(&server, &env, "local").await;
    let c = create(&server, &env, "local").await;
    assert_eq!(c.state, Phase::Queued);
    let freed = gpu_index(&a);
    // A's stray process still holds its GPU after A ends.
    gpus.set_processes(&format!("4242, {}, 2048\n", UUIDS[freed as usize]));
    server
        .admin()
        .await
        .call::<SessionView>(Request::End {
            session: a.id.clone(),
            reason: None,
            note: None,
        })
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let waiting = server.show(&c.id).await;
    assert_eq!(waiting.state, Phase::Queued, "granted a GPU still in use");
    assert!(
        waiting
            .waiting_for
            .as_deref()
            .unwrap_or_default()
            .contains("still in use by an ended session's process"),
        "{waiting:?}"
    );
    // The process goes: the queue grants it within its poll.
    gpus.set_processes("");
    let view = granted(&server, &c.id).await;
    assert_eq!(gpu_index(&view), freed);
}

/// The devices a session had are part of its record: a marker in its
/// exported recording, and a row of the report.
#[tokio::test(flavor = "multi_thread")]
async fn the_recording_and_the_report_say_which_devices_a_session_had() {
    let Some(gpus) = FakeGpus::new("devices in the record") else {
        return;
    };
    let (_env_dir, env) = one_gpu_env();
    let server = gpus.server("local", &[]);
    let view = create(&server, &env, "local").await;
    let index = gpu_index(&view);
    begin(&server, &view.id).await;
    let (driver, _shell, _) = server.drive_new_shell(&view.id, 80, 24).await;
    drop(driver);
    let submitted = server.cli(&["submit", &view.id]);
    assert!(
        submitted.status.success(),
        "{}",
        String::from_utf8_lossy(&submitted.stderr)
    );
    let cast = server.cli(&["export", &view.id, "--format", "asciicast-v2"]);
    let cast = String::from_utf8_lossy(&cast.stdout);
    let marker = format!("hardware: GPU {index} (NVIDIA H100 80GB HBM3), core");
    assert!(cast.contains(&marker), "no device marker in:\n{cast}");
    let report = server.cli(&["report", "--format", "json"]);
    let report: serde_json::Value = serde_json::from_slice(&report.stdout).unwrap();
    let rows = report["hardware"].as_array().expect("a hardware section");
    assert_eq!(rows.len(), 1, "{report}");
    assert_eq!(rows[0]["session"], view.id.as_str());
    assert!(
        rows[0]["hardware"]
            .as_str()
            .unwrap()
            .starts_with(&format!("GPU {index} (NVIDIA H100 80GB HBM3)")),
        "{report}"
    );
}

/// Without a GPU the check says so and succeeds (CI has none).
#[test]
fn the_gpu_check_script_says_when_there_is_no_gpu() {
    let out = std::process::Command::new("bash")
        .arg(common::repo_root().join("scripts/gpu-check.sh"))
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{said}");
    assert!(said.contains("no NVIDIA GPU here"), "{said}");
}

/// A participant's token reaches neither the queue's order nor the
/// machine's listing (other sessions' ids, who holds what).
#[tokio::test(flavor = "multi_thread")]
async fn a_participant_cannot_move_up_the_queue_or_list_the_hosts() {
    let Some(gpus) = FakeGpus::new("participant and the queue") else {
        return;
    };
    let (_env_dir, env) = one_gpu_env();
    let server = gpus.server("local", &[]);
    create(&server, &env, "local").await;
    create(&server, &env, "local").await;
    let first = create(&server, &env, "local").await;
    let second = create(&server, &env, "local").await;
    assert_eq!(second.queue_position, Some(2));
    let mut own = server.participant(&second.id).await;
    let moved = own
        .call::<SessionView>(Request::Prioritize {
            session: second.id.clone(),
            priority: 100,
        })
        .await
        .unwrap_err();
    assert_eq!(moved.code(), Some(ErrorCode::Forbidden), "{moved}");
    let listed = own.call::<Vec<HostView>>(Request::Hosts).await.unwrap_err();
    assert_eq!(listed.code(), Some(ErrorCode::Forbidden), "{listed}");
    assert_eq!(server.show(&second.id).await.queue_position, Some(2));
    assert_eq!(server.show(&first.id).await.queue_position, Some(1));
}
