//! asciicast v3 (asciinema 3.x): a header line with `term: {cols, rows, type}`,
//! then `[interval, code, data]` lines where the interval is seconds since
//! the previous event. Adds the `x` exit event; lines starting with `#` are
//! comments.

use std::io::Write;

use serde::Serialize;

use super::cast::{self, CastHeader, CastImport};
use super::lines;
use super::timeline::{Marker, Timeline, Track};

pub fn write(
    header: &CastHeader,
    track: &Track,
    markers: &[Marker],
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let head = Header {
        version: 3,
        term: Term {
            cols: header.cols,
            rows: header.rows,
            kind: cast::TERM_TYPE,
        },
        timestamp: header.timestamp,
        title: header.title.as_deref(),
        env: Env { shell: cast::SHELL },
    };
    let head = serde_json::to_string(&head)?;
    writeln!(out, "{head}")?;
    let mut prev = 0;
    for e in cast::cast_events(track, markers) {
        let interval = e.t.saturating_sub(prev);
        prev = e.t;
        writeln!(
            out,
            "{}",
            cast::event_line(cast::seconds(interval), e.code, &e.data)
        )?;
    }
    out.flush()?;
    Ok(())
}

#[derive(Serialize)]
struct Header<'a> {
    version: u32,
    term: Term,
    #[serde(skip_serializing_if = "Option::is_none")]
    timestamp: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    title: Option<&'a str>,
    env: Env,
}

#[derive(Serialize)]
struct Term {
    cols: u16,
    rows: u16,
    #[serde(rename = "type")]
    kind: &'static str,
}

#[derive(Serialize)]
struct Env {
    #[serde(rename = "SHELL")]
    shell: &'static str,
}

pub fn sniff(header: &serde_json::Value) -> bool {
    header["version"] == 3
}

pub fn read(bytes: &[u8], file: &str) -> anyhow::Result<Timeline> {
    let all = lines::lines(bytes);
    let mut rest = all
        .iter()
        .filter(|l| !l.is_blank() && !l.bytes.starts_with(b"#"));
    let first = rest
        .next()
        .ok_or_else(|| anyhow::anyhow!("{file} is empty"))?;
    let bad = |m: String| lines::at_line(file, first.number, m);
    let head: serde_json::Value =
        lines::json(first).map_err(|e| bad(format!("bad header: {e}")))?;
    if !sniff(&head) {
        return Err(bad(format!(
            "not an asciicast v3 header (version {})",
            head["version"]
        )));
    }
    let header = CastHeader {
        cols: cast::size_field(&head["term"]["cols"], "term.cols").map_err(bad)?,
        rows: cast::size_field(&head["term"]["rows"], "term.rows").map_err(bad)?,
        timestamp: head["timestamp"].as_i64(),
        title: head["title"].as_str().map(String::from),
    };
    let mut import = CastImport::new(&header, file);
    import.timeline.idle_limit_ms = head["idle_time_limit"]
        .as_f64()
        .map(|s| (s * 1000.0) as u64);
    let mut damage = None;
    // Sum intervals in seconds, not rounded ms, so long files do not drift.
    let mut clock = 0.0;
    for line in rest {
        let result = cast::parse_event(line).and_then(|(dt, code, data)| {
            clock += dt;
            import.push(clock, &code, data)
        });
        if let Err(message) = result {
            damage = Some(lines::damaged(file, line, message)?);
            break;
        }
    }
    Ok(import.finish(damage))
}
