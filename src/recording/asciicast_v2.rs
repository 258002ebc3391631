//! asciicast v2 (asciinema 2.x): a JSON header line, then `[time, code, data]`
//! lines with time in seconds since the start. Codes: `o` output, `i` input,
//! `r` resize (`COLSxROWS`), `m` marker. v2 has no exit event.

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
    // A struct, not a json! map, so `version` comes first as in the spec.
    let head = Header {
        version: 2,
        width: header.cols,
        height: header.rows,
        timestamp: header.timestamp,
        title: header.title.as_deref(),
        env: Env {
            term: cast::TERM_TYPE,
            shell: cast::SHELL,
        },
    };
    let head = serde_json::to_string(&head)?;
    writeln!(out, "{head}")?;
    for e in cast::cast_events(track, markers) {
        if e.code == "x" {
            continue;
        }
        writeln!(
            out,
            "{}",
            cast::event_line(cast::seconds(e.t), e.code, &e.data)
        )?;
    }
    out.flush()?;
    Ok(())
}

#[derive(Serialize)]
struct Header<'a> {
    version: u32,
    width: u16,
    height: u16,
    #[serde(skip_serializing_if = "Option::is_none")]
    timestamp: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    title: Option<&'a str>,
    env: Env,
}

#[derive(Serialize)]
struct Env {
    #[serde(rename = "TERM")]
    term: &'static str,
    #[serde(rename = "SHELL")]
    shell: &'static str,
}

pub fn sniff(header: &serde_json::Value) -> bool {
    header["version"] == 2
}

pub fn read(bytes: &[u8], file: &str) -> anyhow::Result<Timeline> {
    let all = lines::lines(bytes);
    let mut rest = all.iter().filter(|l| !l.is_blank());
    let first = rest
        .next()
        .ok_or_else(|| anyhow::anyhow!("{file} is empty"))?;
    let header = read_header(first, file)?;
    let mut import = CastImport::new(&header, file);
    if let Some(limit) = lines::json::<serde_json::Value>(first)
        .ok()
        .and_then(|h| h["idle_time_limit"].as_f64())
    {
        import.timeline.idle_limit_ms = Some((limit * 1000.0) as u64);
    }
    let mut damage = None;
    for line in rest {
        let result =
            cast::parse_event(line).and_then(|(t, code, data)| import.push(t, &code, data));
        if let Err(message) = result {
            damage = Some(lines::damaged(file, line, message)?);
            break;
        }
    }
    Ok(import.finish(damage))
}

fn read_header(line: &lines::Line<'_>, file: &str) -> anyhow::Result<CastHeader> {
    let bad = |m: String| lines::at_line(file, line.number, m);
    let head: serde_json::Value = lines::json(line).map_err(|e| bad(format!("bad header: {e}")))?;
    if !sniff(&head) {
        return Err(bad(format!(
            "not an asciicast v2 header (version {})",
            head["version"]
        )));
    }
    Ok(CastHeader {
        cols: cast::size_field(&head["width"], "width").map_err(bad)?,
        rows: cast::size_field(&head["height"], "height").map_err(bad)?,
        timestamp: head["timestamp"].as_i64(),
        title: head["title"].as_str().map(String::from),
    })
}
