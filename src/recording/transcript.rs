//! An agent's exec calls as a terminal transcript: a prompt with the
//! command when it started, its output when it finished, so agent sessions
//! replay like shell sessions.

use super::timeline::{Ms, TermEvent, TermKind, Track};
use crate::session::ModelCallRecord;
use crate::session::event::ExecRecord;

pub const COLS: u16 = 100;
pub const ROWS: u16 = 30;

/// Adds one exec call that ran from `start` to `end`.
pub fn push_exec(track: &mut Track, start: Ms, end: Ms, exec: &ExecRecord) {
    let mut prompt = format!("\x1b[1;32m$\x1b[0m {}", exec.command.trim_end()).into_bytes();
    prompt.extend_from_slice(b"\r\n");
    track.events.push(TermEvent {
        t: start,
        kind: TermKind::Output(crlf(prompt)),
    });
    let mut out = Vec::new();
    out.extend_from_slice(exec.stdout.as_bytes());
    if exec.stdout_truncated {
        out.extend_from_slice(b"\n\x1b[2m[stdout truncated]\x1b[0m\n");
    }
    if !exec.stderr.is_empty() {
        ensure_newline(&mut out);
        out.extend_from_slice(b"\x1b[31m");
        out.extend_from_slice(exec.stderr.trim_end_matches('\n').as_bytes());
        out.extend_from_slice(b"\x1b[0m\n");
    }
    if exec.stderr_truncated {
        out.extend_from_slice(b"\n\x1b[2m[stderr truncated]\x1b[0m\n");
    }
    ensure_newline(&mut out);
    let status = match (exec.timed_out, exec.exit_code, exec.signal) {
        (true, _, _) => Some(format!("timed out after {:.1}s", ms_s(exec.duration_ms))),
        (_, Some(0), _) => None,
        (_, Some(code), _) => Some(format!("exit {code}")),
        (_, None, Some(sig)) => Some(format!("killed by signal {sig}")),
        (_, None, None) => Some("no exit status".into()),
    };
    if let Some(status) = status {
        out.extend_from_slice(format!("\x1b[33m[{status}]\x1b[0m\n").as_bytes());
    }
    track.events.push(TermEvent {
        t: end.max(start),
        kind: TermKind::Output(crlf(out)),
    });
}

/// An agent's model call at `t`: what it said (dimmed cyan) and the tools
/// it asked for other than bash (whose commands the exec calls show).
pub fn push_model_call(track: &mut Track, t: Ms, call: &ModelCallRecord) {
    let mut out = Vec::new();
    // Model text is not trusted: no escape sequence of its own reaches the screen.
    let clean = |text: &str| -> String {
        text.chars()
            .map(|c| if c.is_control() && c != '\n' { ' ' } else { c })
            .collect()
    };
    for line in clean(call.output.text.trim()).lines() {
        out.extend_from_slice(format!("\x1b[36m# {line}\x1b[0m\n").as_bytes());
    }
    for tool in call.output.tool_calls.iter().filter(|c| c.name != "bash") {
        let arguments = clean(&tool.arguments);
        out.extend_from_slice(
            format!("\x1b[36m# -> {}({arguments})\x1b[0m\n", clean(&tool.name)).as_bytes(),
        );
    }
    if out.is_empty() {
        return;
    }
    track.events.push(TermEvent {
        t,
        kind: TermKind::Output(crlf(out)),
    });
}

fn ms_s(ms: u64) -> f64 {
    ms as f64 / 1000.0
}

fn ensure_newline(out: &mut Vec<u8>) {
    if out.last().is_some_and(|&b| b != b'\n') {
        out.push(b'\n');
    }
}

/// exec output is not from a terminal: bare newlines must also return the cursor.
fn crlf(bytes: Vec<u8>) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len() + bytes.len() / 16);
    let mut prev = 0u8;
    for b in bytes {
        if b == b'\n' && prev != b'\r' {
            out.push(b'\r');
        }
        out.push(b);
        prev = b;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_command_shows_its_prompt_output_and_status() {
        let exec = ExecRecord {
            command: "python solve.py".into(),
            cwd: "/w".into(),
            exit_code: Some(2),
            signal: None,
            timed_out: false,
            duration_ms: 1500,
            stdout: "line 1\nline 2".into(),
            stderr: "oops\n".into(),
            stdout_truncated: false,
            stderr_truncated: false,
        };
        let mut track = Track::new(None, "agent", 60, 10);
        push_exec(&mut track, 100, 1600, &exec);
        assert_eq!(track.events.len(), 2);
        assert_eq!(track.events[1].t, 1600);
        let mut parser = vt100::Parser::new(10, 60, 0);
        for e in &track.events {
            if let TermKind::Output(d) = &e.kind {
                parser.process(d);
            }
        }
        let text = parser.screen().contents();
        assert_eq!(
            text.lines().collect::<Vec<_>>(),
            vec!["$ python solve.py", "line 1", "line 2", "oops", "[exit 2]"]
        );
    }

    #[test]
    fn a_model_call_shows_what_the_agent_said_and_its_other_tools() {
        use crate::session::agent::{Message, Role, ToolCall};
        let mut output = Message::new(
            Role::Assistant,
            "Let me score.\x1b]52;c;AAAA\x07 Then submit.",
        );
        output.tool_calls = vec![
            ToolCall {
                id: "1".into(),
                name: "bash".into(),
                arguments: "{}".into(),
            },
            ToolCall {
                id: "2".into(),
                name: "score".into(),
                arguments: "{}".into(),
            },
        ];
        let call = ModelCallRecord {
            model: "m".into(),
            input: Vec::new(),
            output,
            request_messages: 2,
            request_bytes: 10,
            tokens_in: 1,
            tokens_out: 1,
            cost_usd: 0.0,
            latency_ms: 1,
            stop_reason: String::new(),
        };
        let mut track = Track::new(None, "agent", 60, 10);
        push_model_call(&mut track, 5, &call);
        let mut parser = vt100::Parser::new(10, 60, 0);
        if let TermKind::Output(d) = &track.events[0].kind {
            assert!(!d.contains(&0x07), "the model's escape sequence is defused");
            parser.process(d);
        }
        let text = parser.screen().contents();
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("# Let me score."), "{lines:?}");
        assert_eq!(lines[1], "# -> score({})");
    }
}
