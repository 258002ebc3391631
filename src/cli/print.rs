//! Human-readable output of views. `--json` prints the views themselves.

use crate::protocol::{ScoreView, SessionView};
use crate::session::PauseReason;
use crate::session::{Phase, ScorePhase};

pub use crate::command_line::printable;

/// `1:02:03` or `4:05` (minutes:seconds under an hour).
pub fn clock(seconds: f64) -> String {
    let total = seconds.max(0.0).round() as u64;
    let (h, m, s) = (total / 3600, (total / 60) % 60, total % 60);
    if h > 0 {
        format!("{h}:{m:02}:{s:02}")
    } else {
        format!("{m}:{s:02}")
    }
}

fn number(x: Option<f64>) -> String {
    match x {
        Some(v) if v.abs() >= 1000.0 || v == v.trunc() => format!("{v:.1}"),
        Some(v) => format!("{v:.4}"),
        None => "-".into(),
    }
}

pub fn state_line(v: &SessionView) -> String {
    match (&v.pause_reason, &v.end_reason) {
        (_, Some(end)) => format!("ENDED ({end})"),
        (Some(p), None) => format!("PAUSED ({p})"),
        (None, None) => v.state.as_str().to_uppercase(),
    }
}

/// What every UI calls a scoring run: `start`, `run 1`, `run 2`, …, and
/// the last one taken at the end `run 4 (final)`.
pub fn run_label(s: &ScoreView) -> String {
    match s.phase {
        ScorePhase::Starting => "start".into(),
        ScorePhase::Final => format!("run {} (final)", s.run),
        ScorePhase::Intermediate => format!("run {}", s.run),
    }
}

/// `run 3   1:02:04  raw 2.141 ms  normalized 0.219  — n: 20000`: the
/// scorer's message set apart from the value it explains.
fn score_line_raw(s: &ScoreView, unit: &str) -> String {
    let label = run_label(s);
    if s.hidden && s.raw.is_none() {
        return format!("{label:<15} {:>8}  {}", clock(s.active_s), s.message);
    }
    let validity = match s.valid {
        Some(false) => "INVALID ",
        Some(true) | None => "",
    };
    let message = if s.message.is_empty() {
        String::new()
    } else {
        format!("  — {}", s.message)
    };
    format!(
        "{label:<15} {:>8}  {validity}raw {:>10} {unit:<4} normalized {:>7}{message}",
        clock(s.active_s),
        number(s.raw),
        number(s.normalized),
    )
}

fn session_raw(v: &SessionView) -> String {
    let mut out = String::new();
    let profile = v
        .profile
        .as_deref()
        .map(|p| format!(", profile {p}"))
        .unwrap_or_default();
    out.push_str(&format!(
        "session {}: {} ({}{profile})\n",
        v.id, v.title, v.environment
    ));
    out.push_str(&format!(
        "participant {} ({}), {}\n",
        v.participant,
        v.kind,
        state_line(v)
    ));
    out.push_str(&format!(
        "budget {}, active {}, remaining {}\n",
        clock(v.budget_s),
        clock(v.active_s),
        clock(v.remaining_s)
    ));
    if let Some(agent) = &v.agent {
        out.push_str(&format!(
            "agent {}, model {}, scaffold {}\n",
            printable(&agent.name),
            printable(if agent.model.is_empty() {
                "?"
            } else {
                &agent.model
            }),
            printable(&agent.scaffold)
        ));
    }
    match &v.imported {
        Some(source) => out.push_str(&format!(
            "imported from {} ({} log, task {}, sample {}, epoch {}): read-only\n",
            printable(&source.file),
            source.format,
            printable(&source.task),
            printable(&source.sample),
            source.epoch
        )),
        None => out.push_str(&isolation_lines(v)),
    }
    if !v.hardware_missing.is_empty() {
        out.push_str(&format!(
            "hardware missing (allowed): {}\n",
            v.hardware_missing.join("; ")
        ));
    }
    // Until the end it is the score so far, not a final one.
    let which = if v.state == Phase::Ended {
        "final score".to_string()
    } else if v.aggregate == "last" {
        "latest so far".to_string()
    } else {
        "best so far".to_string()
    };
    if let Some(f) = &v.final_score {
        out.push_str(&format!(
            "{which}: raw {} {}, normalized {}\n",
            number(Some(f.raw)),
            v.unit,
            number(Some(f.normalized))
        ));
    } else if !v.visible {
        out.push_str(&format!("{which}: hidden\n"));
    }
    if let Some(n) = &v.normalization {
        let given = v.imported.as_ref().is_some_and(|i| i.normalization_given);
        out.push_str(&normalization_line(n, &v.unit, given));
    }
    // Scoring runs stop the clock too, but they are not pauses anyone took.
    let (scoring, pauses): (Vec<_>, Vec<_>) = v
        .pauses
        .iter()
        .partition(|p| p.reason == PauseReason::Scoring);
    if !pauses.is_empty() {
        out.push_str("pauses:\n");
        for p in pauses {
            let end = p
                .end
                .map(|e| e.format("%H:%M:%S").to_string())
                .unwrap_or_else(|| "now".into());
            let note = p
                .note
                .as_deref()
                .map(|n| format!(" ({n})"))
                .unwrap_or_default();
            out.push_str(&format!(
                "  {} by {}: {} – {end}{note}\n",
                p.reason,
                p.by,
                p.start.format("%H:%M:%S")
            ));
        }
    }
    if !scoring.is_empty() {
        out.push_str(&format!(
            "scoring runs stopped the clock {} time(s) (their time is not counted)\n",
            scoring.len()
        ));
    }
    for e in &v.extensions {
        let (what, by_s) = if e.by_s < 0.0 {
            ("reduced", -e.by_s)
        } else {
            ("extended", e.by_s)
        };
        out.push_str(&format!(
            "budget {what} by {} by {}: {}\n",
            clock(by_s),
            e.by,
            e.reason
        ));
    }
    for n in &v.notes {
        out.push_str(&format!(
            "note at {} by {}: {}\n",
            clock(n.active_s),
            n.by,
            n.text
        ));
    }
    if let Some(scores) = &v.scores {
        let runs = scores
            .iter()
            .filter(|s| s.phase != ScorePhase::Starting)
            .count();
        out.push_str(&format!(
            "scoring runs: {runs} after the start ({}, {} counts):\n",
            v.metric, v.aggregate
        ));
        for s in scores {
            out.push_str(&format!("  {}\n", score_line(s, &v.unit)));
        }
    }
    out
}

/// `queued: waiting for 1 GPU (H100) (0 free), 2nd in line` for a
/// session that waits for its hardware.
pub fn queue_line(v: &SessionView) -> Option<String> {
    if v.state != crate::session::Phase::Queued {
        return None;
    }
    let why = v.waiting_for.as_deref().unwrap_or("its hardware");
    Some(match v.queue_position {
        Some(n) => format!(
            "queued: waiting for {}, {} in line; it starts by itself when the hardware is free",
            printable(why),
            crate::hardware::queue::ordinal(n)
        ),
        None => format!("queued: waiting for {}", printable(why)),
    })
}

/// `hardware: GPU 1 (…), core 3, 16 GB memory on local (GPUs: enforced)`.
fn hardware_line(v: &SessionView) -> Option<String> {
    let grant = v.grant.as_ref()?;
    let mut line = format!("hardware: {}", printable(&grant.describe()));
    if !grant.gpus.is_empty() && !v.gpu_isolation.is_empty() {
        line.push_str(&format!(" (gpu isolation: {})", v.gpu_isolation));
    }
    Some(line)
}

/// Where a session's processes run and how they are held.
fn isolation_lines(v: &SessionView) -> String {
    let mut out = String::new();
    out.push_str(&format!("workspace {}\n", v.workspace));
    if let Some(line) = queue_line(v) {
        // Nothing of it runs yet: where it will is decided with its grant.
        out.push_str(&line);
        out.push('\n');
        return out;
    }
    if let Some(line) = hardware_line(v) {
        out.push_str(&line);
        out.push('\n');
    }
    if v.isolation == "bwrap" {
        out.push_str("isolation: bwrap jail (docs/sandbox.md)\n");
    } else if v.isolation == "docker" {
        out.push_str(&format!(
            "isolation: docker container on host {} (docs/sandbox.md)\n",
            printable(&v.host)
        ));
    } else if v.isolation == "none" {
        out.push_str("isolation: none (processes run as the server's user)\n");
    }
    if let Some(warning) = &v.sandbox_warning {
        out.push_str(&format!("WARNING: {warning}\n"));
    }
    match v.containment.as_str() {
        "" => {}
        "marker" => out.push_str(
            "containment: marker (a process that drops REBENCH_SANDBOX escapes pause and end)\n",
        ),
        other => out.push_str(&format!("containment: {other}\n")),
    }
    out
}

/// "normalized with starting 17.4 ms, reference 13.3 ms (measured on HOST …)".
fn normalization_line(
    n: &crate::protocol::NormalizationView,
    unit: &str,
    given_at_import: bool,
) -> String {
    let source = match &n.calibration {
        _ if given_at_import => "given at import".to_string(),
        Some(c) => format!(
            "{}; the manifest says {} and {}",
            c.origin(),
            number(Some(c.manifest_starting)),
            number(Some(c.manifest_reference))
        ),
        None => "the manifest's".to_string(),
    };
    format!(
        "normalized with starting {} {unit}, reference {} {unit}: {source}\n",
        number(Some(n.starting)),
        number(Some(n.reference))
    )
}

fn sessions_table_raw(views: &[SessionView]) -> String {
    let mut out = format!(
        "{:<8} {:<16} {:<6} {:<18} {:<14} {:<24} {:>9} {:>9} {:>6} {:>7}\n",
        "ID",
        "PARTICIPANT",
        "KIND",
        "ENVIRONMENT",
        "WHERE",
        "STATE",
        "ACTIVE",
        "LEFT",
        "SCORES",
        "BEST"
    );
    for v in views {
        let best = match &v.final_score {
            Some(f) => format!("{:.3}", f.normalized),
            None if !v.visible => "hidden".into(),
            None => "-".into(),
        };
        out.push_str(&format!(
            "{:<8} {:<16} {:<6} {:<18} {:<14} {:<24} {:>9} {:>9} {:>6} {:>7}\n",
            v.id,
            truncate(&v.participant, 16),
            // as_str: Kind's Display writes without the column's padding.
            v.kind.as_str(),
            truncate(&v.environment, 18),
            truncate(&placement(v), 14),
            truncate(&state_line(v), 24),
            clock(v.active_s),
            clock(v.remaining_s),
            v.score_count,
            best
        ));
    }
    out
}

/// Where a session's processes run: its backend, and the host when it is
/// not the server's machine (`docker@gpu-a`).
fn placement(v: &SessionView) -> String {
    if v.imported.is_some() {
        return "imported".into();
    }
    match v.host.as_str() {
        "" | "local" => v.sandbox.clone(),
        host => format!("{}@{host}", v.sandbox),
    }
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        s.chars().take(n - 1).chain(['…']).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(state: &str) -> SessionView {
        serde_json::from_value(serde_json::json!({
            "id": "s1", "environment": "prefix-sum", "title": "Prefix sum", "profile": "smoke",
            "participant": "alice", "kind": "human", "state": state, "pause_reason": null,
            "end_reason": null, "workspace": "/w", "budget_s": 7200.0,
            "active_s": 600.0, "remaining_s": 6600.0,
            "created_at": "2027-01-15T08:00:00Z", "started_at": null, "ended_at": null,
            "metric": "runtime", "unit": "ms", "visible": true, "aggregate": "best",
            "allow_missing_hardware": false, "hardware_missing": [],
            "pauses": [
                {"reason": "scoring", "by": "rebench", "note": null,
                 "start": "2027-01-15T08:00:00Z", "end": "2027-01-15T08:00:02Z"},
                {"reason": "break", "by": "alice", "note": null,
                 "start": "2027-01-15T08:05:00Z", "end": "2027-01-15T08:06:00Z"}
            ],
            "extensions": [], "notes": [], "score_count": 2,
            "scores": [
                {"seq": 1, "run": 0, "at": "2027-01-15T08:00:00Z", "active_s": 0.0, "phase": "starting",
                 "raw": 17.4, "normalized": 0.0, "valid": true, "message": "n: 20000",
                 "hidden": false, "duration_ms": 10},
                {"seq": 6, "run": 1, "at": "2027-01-15T08:09:00Z", "active_s": 540.0, "phase": "intermediate",
                 "raw": 13.3, "normalized": 1.0, "valid": true, "message": "n: 20000",
                 "hidden": false, "duration_ms": 10}
            ],
            "final": {"raw": 13.3, "normalized": 1.0}
        }))
        .unwrap()
    }

    #[test]
    fn the_sessions_table_keeps_its_columns() {
        let table = sessions_table_raw(&[view("running")]);
        let mut lines = table.lines();
        let header = lines.next().unwrap();
        let row = lines.next().unwrap();
        for (column, value) in [("KIND", "human"), ("ENVIRONMENT", "prefix-sum")] {
            assert_eq!(header.find(column), row.find(value), "{column}:\n{table}");
        }
    }

    #[test]
    fn the_hardware_and_the_queue_are_shown() {
        let mut v = view("queued");
        v.waiting_for = Some("1 GPU (H100) (0 free)".into());
        v.queue_position = Some(2);
        assert_eq!(
            queue_line(&v).unwrap(),
            "queued: waiting for 1 GPU (H100) (0 free), 2nd in line; it starts by itself when the hardware is free"
        );
        let mut v = view("running");
        assert_eq!(queue_line(&v), None);
        v.grant = Some(crate::hardware::DeviceGrant {
            host: "local".into(),
            gpus: vec![crate::hardware::GrantedGpu {
                index: 1,
                uuid: "GPU-1".into(),
                model: "H100".into(),
            }],
            cpus: vec![2, 3],
            shared_cpus: false,
            cpu_weight: 2,
            memory_gb: 16.0,
        });
        v.gpu_isolation = "enforced".into();
        assert_eq!(
            hardware_line(&v).unwrap(),
            "hardware: GPU 1 (H100), cores 2-3, 16 GB memory on local (gpu isolation: enforced)"
        );
    }

    #[test]
    fn runs_are_numbered_from_the_start_and_messages_stand_apart() {
        let v = view("running");
        let scores = v.scores.clone().unwrap();
        let start = score_line_raw(&scores[0], "ms");
        assert!(start.starts_with("start "), "{start}");
        let run = score_line_raw(&scores[1], "ms");
        assert!(run.starts_with("run 1 "), "not the event number #6: {run}");
        assert!(
            run.ends_with("ms   normalized     1.0  — n: 20000"),
            "{run}"
        );
        let text = session_raw(&v);
        assert!(text.contains("best so far: raw 13.3000 ms"), "{text}");
        assert!(!text.contains("final score"), "{text}");
        assert!(text.contains("scoring runs: 1 after the start"), "{text}");
        // The scoring run's stop of the clock is not listed as a pause.
        assert!(text.contains("pauses:\n  break by alice"), "{text}");
        assert!(!text.contains("scoring by rebench"), "{text}");
        assert!(text.contains("stopped the clock 1 time(s)"), "{text}");
        let ended = session_raw(&view("ended"));
        assert!(ended.contains("final score: raw 13.3000 ms"), "{ended}");
    }

    #[test]
    fn clocks_read_like_clocks() {
        assert_eq!(clock(0.0), "0:00");
        assert_eq!(clock(65.4), "1:05");
        assert_eq!(clock(3600.0 * 8.0), "8:00:00");
        assert_eq!(clock(-3.0), "0:00");
    }
}

/// One score as a line, printable (see `printable`).
pub fn score_line(s: &ScoreView, unit: &str) -> String {
    printable(&score_line_raw(s, unit))
}

/// `rebench show`, printable (see `printable`).
pub fn session(v: &SessionView) -> String {
    printable(&session_raw(v))
}

/// `rebench sessions`, printable (see `printable`).
pub fn sessions_table(views: &[SessionView]) -> String {
    printable(&sessions_table_raw(views))
}

#[cfg(test)]
mod printable_tests {
    use super::printable;

    #[test]
    fn control_characters_are_escaped_but_lines_stay() {
        assert_eq!(
            printable("a\x1b]52;c;ZXZpbA==\x07b\n\tc\x1b[2J\r"),
            "a\\u{1b}]52;c;ZXZpbA==\\u{7}b\n\tc\\u{1b}[2J\\r"
        );
        assert_eq!(printable("plain é ✓"), "plain é ✓");
    }
}

/// `rebench hosts`: each machine, its GPUs and who holds them, its cores
/// and memory.
pub fn hosts_text(hosts: &[crate::protocol::HostView]) -> String {
    use crate::hardware::inventory::format_cpu_list;
    let mut out = String::new();
    for host in hosts {
        out.push_str(&format!("host {}\n", printable(&host.name)));
        if host.gpus.is_empty() {
            out.push_str("  no GPUs\n");
        }
        for gpu in &host.gpus {
            let holder = match &gpu.session {
                Some(s) => format!("held by {}", printable(s)),
                None => "free".to_string(),
            };
            let used = match (gpu.utilization_pct, gpu.memory_used_mib) {
                (Some(u), Some(m)) => format!(", {u}% busy, {m} MiB used"),
                _ => String::new(),
            };
            out.push_str(&format!(
                "  GPU {} {} {} ({} MiB): {holder}{used}\n",
                gpu.index,
                printable(&gpu.uuid),
                printable(&gpu.model),
                gpu.memory_mib
            ));
        }
        let reserved = if host.reserved_cpus.is_empty() {
            String::new()
        } else {
            format!(
                " ({} reserved for the system)",
                format_cpu_list(&host.reserved_cpus)
            )
        };
        out.push_str(&format!(
            "  CPU cores {}: {} free{reserved}\n",
            format_cpu_list(&host.cpus),
            if host.cpus_free.is_empty() {
                "none".to_string()
            } else {
                format_cpu_list(&host.cpus_free)
            }
        ));
        if let (Some(total), Some(free)) = (host.memory_gb, host.memory_free_gb) {
            out.push_str(&format!(
                "  memory {} GB: {} GB not granted\n",
                crate::hardware::grant::trim_gb(total),
                crate::hardware::grant::trim_gb(free)
            ));
        }
        out.push_str(&format!(
            "  sessions holding hardware: {}; queued: {}\n",
            host.sessions.len(),
            if host.queued.is_empty() {
                "none".to_string()
            } else {
                host.queued.join(", ")
            }
        ));
    }
    out
}
