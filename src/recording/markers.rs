//! Markers from the event log, labelled for an admin audience (every score
//! with its value), and the reverse: score values from a marker label, so an
//! exported asciicast replays with its score chart.

use super::timeline::{MarkerKind, ScorePoint};
use crate::session::{EventKind, ScorePhase};

/// A marker for an event worth seeing on the timeline, if it is one;
/// `unit` is the metric's (raw scores are shown with it).
pub fn marker_for(kind: &EventKind, unit: &str) -> Option<(MarkerKind, String)> {
    Some(match kind {
        EventKind::Started { by } => (MarkerKind::Start, format!("session started by {by}")),
        EventKind::Scored { entry } => (MarkerKind::Score, score_label(entry, unit)),
        EventKind::Note { text, by } => (MarkerKind::Note, format!("note by {by}: {text}")),
        EventKind::Paused { reason, by, note } => (
            MarkerKind::Pause,
            match note {
                Some(n) => format!("paused ({reason}) by {by}: {n}"),
                None => format!("paused ({reason}) by {by}"),
            },
        ),
        EventKind::Resumed { by } => (MarkerKind::Resume, format!("resumed by {by}")),
        EventKind::Extended { by_ms, reason, by } => (
            MarkerKind::Extension,
            format!(
                "budget {} by {} by {by}: {reason}",
                if *by_ms < 0 { "reduced" } else { "extended" },
                super::timeline::duration_text(by_ms.unsigned_abs())
            ),
        ),
        EventKind::Warning { remaining_s, .. } => (
            MarkerKind::Warning,
            format!(
                "warning: {} left",
                super::timeline::duration_text(remaining_s * 1000)
            ),
        ),
        EventKind::Ended { reason, by, note } => (
            MarkerKind::End,
            match note {
                Some(note) => format!("session ended ({reason}) by {by}: {note}"),
                None => format!("session ended ({reason}) by {by}"),
            },
        ),
        EventKind::ModelCall(call) => (MarkerKind::Model, model_call_label(call)),
        // Which devices the session had is part of its record.
        EventKind::Granted { grant } => {
            (MarkerKind::Plain, format!("hardware: {}", grant.describe()))
        }
        EventKind::Queued { waiting_for, .. } => (
            MarkerKind::Plain,
            format!("queued: waiting for {waiting_for}"),
        ),
        EventKind::Created { .. }
        | EventKind::ShellOpened { .. }
        | EventKind::ShellExited { .. }
        | EventKind::Exec(_)
        | EventKind::Usage { .. } => return None,
    })
}

/// `model: <first line of its text> → bash: ls` (the agent's reasoning
/// and what it asked for, on one line).
pub fn model_call_label(call: &crate::session::ModelCallRecord) -> String {
    let said = call
        .output
        .text
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim();
    let mut label = format!("model {}", call.model);
    if !said.is_empty() {
        label.push_str(&format!(": {}", cut_chars(said, 120)));
    }
    for tool in &call.output.tool_calls {
        label.push_str(&format!(
            " → {}({})",
            tool.name,
            cut_chars(&tool.arguments, 120)
        ));
    }
    label
}

fn cut_chars(text: &str, limit: usize) -> String {
    match text.char_indices().nth(limit) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

fn phase_name(phase: ScorePhase) -> &'static str {
    match phase {
        ScorePhase::Starting => "starting",
        ScorePhase::Intermediate => "intermediate",
        ScorePhase::Final => "final",
    }
}

/// `score 0.590 (raw 2.5 ms, intermediate, by tess): message`, or
/// `score invalid (intermediate, by tess): why`.
pub fn score_label(entry: &crate::session::ScoreEntry, unit: &str) -> String {
    let phase = phase_name(entry.phase);
    let by = &entry.requested_by;
    let message = entry.message.trim();
    let tail = if message.is_empty() {
        String::new()
    } else {
        format!(": {message}")
    };
    match (entry.valid, entry.normalized) {
        (true, Some(n)) => {
            let raw = entry
                .raw
                .map(|r| format!("raw {} {unit}, ", short_number(r)).replace(" ,", ","))
                .unwrap_or_default();
            format!("score {n:.3} ({raw}{phase}, by {by}){tail}")
        }
        _ => format!("score invalid ({phase}, by {by}){tail}"),
    }
}

/// At most four decimals, without trailing zeros: `2.6899`, `2.5`, `142`.
fn short_number(value: f64) -> String {
    let text = format!("{value:.4}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    text.to_string()
}

/// The kind of marker a label written by `marker_for` stands for.
pub fn kind_from_label(label: &str) -> MarkerKind {
    let starts = |p: &str| label.starts_with(p);
    if starts("score ") {
        MarkerKind::Score
    } else if starts("note ") {
        MarkerKind::Note
    } else if starts("paused ") {
        MarkerKind::Pause
    } else if starts("resumed ") {
        MarkerKind::Resume
    } else if starts("budget extended ") {
        MarkerKind::Extension
    } else if starts("warning:") {
        MarkerKind::Warning
    } else if starts("session started ") {
        MarkerKind::Start
    } else if starts("session ended ") {
        MarkerKind::End
    } else if starts("model ") {
        MarkerKind::Model
    } else {
        MarkerKind::Plain
    }
}

/// The score a `score_label` describes (for imported asciicast files).
pub fn score_from_label(t: u64, label: &str) -> Option<ScorePoint> {
    let rest = label.strip_prefix("score ")?;
    if rest.starts_with("invalid") {
        return Some(ScorePoint {
            t,
            normalized: None,
            raw: None,
            valid: false,
        });
    }
    let normalized: f64 = rest.split_whitespace().next()?.parse().ok()?;
    let raw = rest
        .split_once("(raw ")
        .and_then(|(_, r)| r.split([',', ' ']).next())
        .and_then(|r| r.trim().parse().ok());
    Some(ScorePoint {
        t,
        normalized: Some(normalized),
        raw,
        valid: true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::ScoreEntry;

    fn entry(valid: bool) -> ScoreEntry {
        ScoreEntry {
            phase: ScorePhase::Intermediate,
            requested_by: "tess".into(),
            requested_active_ms: 0,
            valid,
            raw: Some(2.5),
            normalized: Some(0.5901),
            message: "ok".into(),
            scorer_message: serde_json::Value::Null,
            details: serde_json::Value::Null,
            output: String::new(),
            exit_code: Some(0),
            duration_ms: 10,
        }
    }

    #[test]
    fn score_labels_carry_values_and_read_back() {
        let label = score_label(&entry(true), "ms");
        assert_eq!(label, "score 0.590 (raw 2.5 ms, intermediate, by tess): ok");
        let back = score_from_label(7, &label).unwrap();
        assert_eq!(
            (back.normalized, back.raw, back.valid),
            (Some(0.59), Some(2.5), true)
        );
        let unitless = score_label(&entry(true), "");
        assert!(unitless.contains("(raw 2.5, "), "{unitless}");
        let bad = score_label(&entry(false), "ms");
        assert!(bad.starts_with("score invalid"), "{bad}");
        assert!(!score_from_label(0, &bad).unwrap().valid);
        assert!(score_from_label(0, "note by x: score 1").is_none());
    }
}
