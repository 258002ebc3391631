//! Boxes over the dashboard: the action dialogs and the help.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use super::keys_line;
use crate::tui::proctor::app::{App, Overlay};
use crate::tui::proctor::dialog::{ActionKind, Dialog, Field};
use crate::tui::widgets::overlay::draw_box;
use crate::tui::widgets::theme::Theme;

pub fn draw(app: &App, frame: &mut Frame, area: Rect) {
    match &app.overlay {
        Some(Overlay::Dialog(d)) => draw_dialog(app, d, frame, area),
        Some(Overlay::Help) => draw_help(&app.theme, frame, area),
        None => {}
    }
}

/// What the action will do, in a sentence.
fn explanation(kind: ActionKind) -> &'static str {
    match kind {
        ActionKind::Begin => {
            "The session's clock starts now, as if the participant pressed Enter on the start screen."
        }
        ActionKind::Pause => {
            "The clock stops and the participant's processes are frozen. Only a proctor can resume a proctor's pause."
        }
        ActionKind::Resume => {
            "The clock starts again. The reason, if you give one, is added as a note."
        }
        ActionKind::Extend => "Changes the session's budget: 30m adds time, -15m takes it off.",
        ActionKind::Note => {
            "Adds a note to the session's log (the participant sees notes in the workspace)."
        }
        ActionKind::End => {
            "Ends the session now: its processes are stopped and no final score is taken; the session's score is what its log has."
        }
        ActionKind::Score => {
            "Runs the scorer on the workspace now. The reason, if you give one, is added as a note."
        }
    }
}

fn field_line<'a>(theme: &Theme, label: &str, text: &str, focused: bool) -> Line<'a> {
    let marker = if focused { "▸ " } else { "  " };
    let cursor = if focused { "▏" } else { "" };
    Line::from(vec![
        Span::styled(format!("{marker}{label}: "), theme.key()),
        Span::raw(format!("{text}{cursor}")),
    ])
}

fn draw_dialog(app: &App, d: &Dialog, frame: &mut Frame, area: Rect) {
    let theme = &app.theme;
    let target = if d.others.is_empty() {
        Line::from(vec![
            Span::raw("Session "),
            Span::styled(d.session.clone(), theme.title()),
            Span::raw(format!(" of {}", d.participant)),
        ])
    } else {
        let names: Vec<&str> = std::iter::once(d.participant.as_str())
            .chain(d.others.iter().map(|(_, p)| p.as_str()))
            .collect();
        Line::from(vec![
            Span::styled(format!("{} sessions", d.target_count()), theme.title()),
            Span::raw(format!(": {}", names.join(", "))),
        ])
    };
    let mut lines = vec![
        target,
        Line::styled(explanation(d.kind), theme.dim()),
        Line::raw(""),
    ];
    if d.confirming {
        lines.push(Line::raw(format!("reason: {}", d.reason)));
        lines.push(Line::raw(""));
        lines.push(Line::styled(
            format!(
                "End the session of {} now? This cannot be undone.",
                d.participant
            ),
            theme.banner(),
        ));
        lines.push(Line::raw(""));
        lines.push(keys_line(
            theme,
            &[("y", "end it"), ("any other key", "go back")],
        ));
    } else {
        if d.has_duration() {
            lines.push(field_line(
                theme,
                "extend by",
                &d.duration,
                d.field == Field::Duration,
            ));
            if let Some(Ok(total)) = d.preview() {
                lines.push(Line::styled(format!("  {total}"), theme.dim()));
            }
        }
        let label = if d.reason_optional() {
            format!("{} (optional)", d.reason_label())
        } else {
            d.reason_label().to_string()
        };
        lines.push(field_line(
            theme,
            &label,
            &d.reason,
            d.field == Field::Reason,
        ));
        if let Some(e) = &d.error {
            lines.push(Line::styled(e.clone(), theme.bad()));
        }
        lines.push(Line::raw(""));
        let mut keys = vec![("Enter", confirm_word(d.kind)), ("Esc", "cancel")];
        if d.has_duration() {
            keys.insert(1, ("Tab", "next field"));
        }
        lines.push(keys_line(theme, &keys));
    }
    lines.push(Line::styled(format!("recorded as {}", app.me), theme.dim()));
    draw_box(
        theme,
        &format!(" {} ", d.kind.title()),
        lines,
        72,
        frame,
        area,
    );
}

fn confirm_word(kind: ActionKind) -> &'static str {
    match kind {
        ActionKind::Begin => "start the clock",
        ActionKind::Pause => "pause",
        ActionKind::Resume => "resume",
        ActionKind::Extend => "extend",
        ActionKind::Note => "save the note",
        ActionKind::End => "continue",
        ActionKind::Score => "score now",
    }
}

const HELP: [(&str, &str); 26] = [
    (
        "↑/↓ j/k",
        "select a session (PgUp/PgDn, g/G: page, first, last)",
    ),
    (
        "Enter",
        "details: shell mirrors, scores, notes, exec history",
    ),
    ("Tab", "move between the table and the alert list"),
    ("p", "pause the session (asks for a reason)"),
    ("r", "resume it"),
    (
        "x",
        "change the budget (30m adds, -15m takes off; a reason)",
    ),
    ("b", "start the clock of a session that has not started"),
    (
        "n",
        "add a note (the participant sees it at once: a message)",
    ),
    ("s", "take a score now"),
    ("E", "end the session (asks twice)"),
    (
        "a",
        "acknowledge the session's alerts (new ones show again)",
    ),
    (
        "Space",
        "mark the session for a bulk action (p, r, x, n act on every marked one)",
    ),
    ("*", "mark every session shown (again: unmark all)"),
    ("/", "search by participant"),
    (
        "f",
        "filter by state: all, live, running, paused, not started, ended",
    ),
    ("e", "filter by environment (cycles)"),
    ("t", "filter by kind: human, agent"),
    ("!", "only sessions with alerts"),
    ("c", "clear the filters"),
    (
        "o / O",
        "sort by: alerts, participant, environment, state, time left, best, idle / reverse",
    ),
    ("R", "re-read everything from the server"),
    ("Tab 1-9 [ ]", "in details: the shell to mirror"),
    (
        "↑/↓ g/G",
        "in details: the mirrored shell's history (up to 2,000 lines; G: live)",
    ),
    (
        "v",
        "in details: shells or exec history (↑/↓ picks an exec)",
    ),
    ("Esc", "in details: back to the table"),
    ("q Ctrl-c", "quit (sessions go on)"),
];

fn draw_help(theme: &Theme, frame: &mut Frame, area: Rect) {
    let mut lines: Vec<Line> = HELP
        .iter()
        .map(|(k, what)| {
            Line::from(vec![
                Span::styled(format!("{k:<12}"), theme.key()),
                Span::raw(*what),
            ])
        })
        .collect();
    lines.push(Line::raw(""));
    lines.push(Line::styled(
        "Mirrors are read-only: nothing you type reaches a participant's shell.",
        theme.dim(),
    ));
    lines.push(Line::styled("any key closes this help", theme.dim()));
    draw_box(theme, " Proctor keys ", lines, 96, frame, area);
}
