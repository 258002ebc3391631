//! util-linux `script` recordings: the typescript (raw terminal output after
//! a `Script started on ...` header line) with its timing file, either the
//! classic `DELAY BYTES` lines or `-m advanced` lines (`O`/`I DELAY BYTES`,
//! `S DELAY SIGWINCH ROWS=R COLS=C`, `H DELAY NAME VALUE`). Delays are seconds
//! since the previous entry.

use chrono::{DateTime, NaiveDateTime, Utc};

use super::lines::{self, Line};
use super::timeline::{Ms, TermEvent, TermKind, Timeline, Track};

const HEADER_START: &[u8] = b"Script started on ";
const FOOTER_START: &[u8] = b"\nScript done on ";

/// Whether a file looks like a typescript (`script` writes this header).
pub fn sniff(bytes: &[u8]) -> bool {
    bytes.starts_with(HEADER_START)
}

struct Header {
    cols: u16,
    rows: u16,
    start: Option<DateTime<Utc>>,
}

pub fn read(
    typescript: &[u8],
    ts_file: &str,
    timing: Option<(&[u8], &str)>,
) -> anyhow::Result<Timeline> {
    let (header, body) = split_header(typescript);
    let mut reader = Reader {
        body,
        pos: 0,
        clock: 0.0,
        track: Track::new(None, "terminal", header.cols, header.rows),
        start: header.start,
        exit: None,
    };
    let damage = match timing {
        None => {
            // No timing: everything at once, without the footer line.
            let end = find_last(body, FOOTER_START).map_or(body.len(), |i| i + 1);
            reader.output(end);
            None
        }
        Some((text, timing_file)) => reader.timed(text, timing_file, ts_file)?,
    };
    let mut track = reader.track;
    if let Some(code) = reader.exit {
        let t = track.end();
        track.events.push(TermEvent {
            t,
            kind: TermKind::Exit(code),
        });
    }
    Ok(Timeline {
        title: ts_file.to_string(),
        source: ts_file.to_string(),
        origin: reader.start,
        tracks: vec![track],
        damage,
        ..Timeline::default()
    })
}

struct Reader<'a> {
    body: &'a [u8],
    pos: usize,
    clock: f64,
    track: Track,
    start: Option<DateTime<Utc>>,
    exit: Option<i32>,
}

impl Reader<'_> {
    fn now(&self) -> Ms {
        (self.clock * 1000.0).round() as Ms
    }

    /// Takes output up to byte `end` of the body, as one event now.
    fn output(&mut self, end: usize) {
        if end > self.pos {
            let data = self.body[self.pos..end].to_vec();
            self.pos = end;
            self.track.events.push(TermEvent {
                t: self.now(),
                kind: TermKind::Output(data),
            });
        }
    }

    /// Takes `n` bytes of a stream; Err when the typescript ends first.
    fn take(&mut self, n: usize, kind: fn(Vec<u8>) -> TermKind) -> Result<(), String> {
        let end = self.pos.saturating_add(n);
        if end > self.body.len() {
            let have = self.body.len() - self.pos;
            let data = self.body[self.pos..].to_vec();
            self.pos = self.body.len();
            let t = self.now();
            self.track.events.push(TermEvent {
                t,
                kind: kind(data),
            });
            return Err(format!(
                "the timing wants {n} bytes but the typescript has only {have} left"
            ));
        }
        let data = self.body[self.pos..end].to_vec();
        self.pos = end;
        let t = self.now();
        self.track.events.push(TermEvent {
            t,
            kind: kind(data),
        });
        Ok(())
    }

    fn timed(
        &mut self,
        text: &[u8],
        timing_file: &str,
        ts_file: &str,
    ) -> anyhow::Result<Option<String>> {
        let all = lines::lines(text);
        let entries: Vec<&Line<'_>> = all.iter().filter(|l| !l.is_blank()).collect();
        let advanced = entries
            .first()
            .is_some_and(|l| matches!(l.bytes, [b'O' | b'I' | b'S' | b'H', b' ', ..]));
        // With `-B`, input and output share one file and interleave in it.
        let input_inline = advanced && shared_log(&entries);
        for line in entries {
            let result = if advanced {
                self.advanced(line, input_inline)
            } else {
                self.classic(line)
            };
            if let Err(message) = result {
                if message.starts_with("the timing wants") {
                    return Ok(Some(format!(
                        "{ts_file}: {message} (at {timing_file}:{}; playing up to there)",
                        line.number
                    )));
                }
                return lines::damaged(timing_file, line, message).map(Some);
            }
        }
        Ok(None)
    }

    fn classic(&mut self, line: &Line<'_>) -> Result<(), String> {
        let text = line.text()?;
        let mut fields = text.split_whitespace();
        let (Some(delay), Some(bytes), None) = (fields.next(), fields.next(), fields.next()) else {
            return Err(format!("expected \"DELAY BYTES\", found {text:?}"));
        };
        self.advance(delay)?;
        let n = bytes
            .parse()
            .map_err(|_| format!("byte count {bytes:?} is not a number"))?;
        self.take(n, TermKind::Output)
    }

    fn advanced(&mut self, line: &Line<'_>, input_inline: bool) -> Result<(), String> {
        let text = line.text()?;
        let mut fields = text.splitn(3, ' ');
        let (Some(kind), Some(delay)) = (fields.next(), fields.next()) else {
            return Err(format!("expected \"TYPE DELAY ...\", found {text:?}"));
        };
        let rest = fields.next().unwrap_or("").trim();
        self.advance(delay)?;
        let count = || -> Result<usize, String> {
            rest.parse()
                .map_err(|_| format!("byte count {rest:?} is not a number"))
        };
        match kind {
            "O" => self.take(count()?, TermKind::Output),
            "I" if input_inline => self.take(count()?, TermKind::Input),
            // The input went to a log we were not given: keep only its time.
            "I" => count().map(|_| ()),
            "S" => {
                if let Some((cols, rows)) = winch_size(rest) {
                    let t = self.now();
                    self.track.events.push(TermEvent {
                        t,
                        kind: TermKind::Resize { cols, rows },
                    });
                }
                Ok(())
            }
            "H" => {
                self.header_entry(rest);
                Ok(())
            }
            other => Err(format!(
                "unknown entry type {other:?} (expected O, I, S or H)"
            )),
        }
    }

    fn header_entry(&mut self, rest: &str) {
        let (name, value) = rest.split_once(' ').unwrap_or((rest, ""));
        let number = || value.trim().parse::<u16>().ok().filter(|n| *n > 0);
        match name {
            "COLUMNS" => self.track.cols = number().unwrap_or(self.track.cols),
            "LINES" => self.track.rows = number().unwrap_or(self.track.rows),
            "START_TIME" => self.start = self.start.or_else(|| parse_time(value)),
            "EXIT_CODE" => self.exit = value.trim().parse().ok(),
            _ => {}
        }
    }

    fn advance(&mut self, delay: &str) -> Result<(), String> {
        let d: f64 = delay
            .parse()
            .map_err(|_| format!("delay {delay:?} is not a number of seconds"))?;
        if !d.is_finite() || d < 0.0 {
            return Err(format!("bad delay {delay}"));
        }
        self.clock += d;
        Ok(())
    }
}

/// Whether the advanced timing says input and output went to the same file.
fn shared_log(entries: &[&Line<'_>]) -> bool {
    let value = |name: &str| {
        entries.iter().find_map(|l| {
            let text = std::str::from_utf8(l.bytes).ok()?;
            let mut f = text.splitn(4, ' ');
            (f.next()? == "H" && f.nth(1)? == name).then(|| f.next().unwrap_or("").to_string())
        })
    };
    matches!((value("INPUT_LOG"), value("OUTPUT_LOG")), (Some(i), Some(o)) if i == o)
}

fn winch_size(rest: &str) -> Option<(u16, u16)> {
    let mut cols = None;
    let mut rows = None;
    for field in rest.split_whitespace() {
        if let Some(r) = field.strip_prefix("ROWS=") {
            rows = r.parse().ok();
        } else if let Some(c) = field.strip_prefix("COLS=") {
            cols = c.parse().ok();
        }
    }
    Some((cols.filter(|c| *c > 0)?, rows.filter(|r| *r > 0)?))
}

fn split_header(bytes: &[u8]) -> (Header, &[u8]) {
    let mut header = Header {
        cols: 80,
        rows: 24,
        start: None,
    };
    if !sniff(bytes) {
        return (header, bytes);
    }
    let end = bytes
        .iter()
        .position(|&b| b == b'\n')
        .unwrap_or(bytes.len());
    let line = String::from_utf8_lossy(&bytes[..end]);
    let quoted = |name: &str| {
        let key = format!("{name}=\"");
        let (_, rest) = line.split_once(&key)?;
        rest.split('"')
            .next()?
            .parse::<u16>()
            .ok()
            .filter(|n| *n > 0)
    };
    header.cols = quoted("COLUMNS").unwrap_or(header.cols);
    header.rows = quoted("LINES").unwrap_or(header.rows);
    header.start = line
        .strip_prefix("Script started on ")
        .and_then(|rest| rest.split(" [").next())
        .and_then(parse_time);
    (header, &bytes[(end + 1).min(bytes.len())..])
}

/// `2026-12-02 13:47:16+00:00` as `script` writes it.
fn parse_time(text: &str) -> Option<DateTime<Utc>> {
    let text = text.trim();
    DateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S%:z")
        .map(|t| t.with_timezone(&Utc))
        .ok()
        .or_else(|| {
            NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S")
                .ok()
                .map(|t| t.and_utc())
        })
}

fn find_last(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).rposition(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outputs(t: &Timeline) -> Vec<(Ms, String)> {
        t.tracks[0]
            .events
            .iter()
            .filter_map(|e| match &e.kind {
                TermKind::Output(d) => Some((e.t, String::from_utf8_lossy(d).into_owned())),
                _ => None,
            })
            .collect()
    }

    const TS: &[u8] = b"Script started on 2026-12-02 13:47:25+00:00 [COMMAND=\"x\" TERM=\"xterm\" COLUMNS=\"100\" LINES=\"30\"]\nhi\r\nthere\r\n\nScript done on 2026-12-02 13:47:25+00:00 [COMMAND_EXIT_CODE=\"0\"]\n";

    #[test]
    fn classic_timing_splits_the_output_at_its_times() {
        let t = read(TS, "ts", Some((b"0.010167 4\n0.092854 7\n", "timing"))).unwrap();
        assert_eq!(
            outputs(&t),
            vec![(10, "hi\r\n".into()), (103, "there\r\n".into())]
        );
        assert_eq!((t.tracks[0].cols, t.tracks[0].rows), (100, 30));
        assert!(t.origin.is_some());
        assert!(t.damage.is_none());
    }

    #[test]
    fn advanced_timing_reads_sizes_resizes_and_the_exit() {
        let timing = b"H 0.000000 START_TIME 2026-12-02 13:47:16+00:00\nH 0.000000 COLUMNS 90\nH 0.000000 LINES 20\nO 0.010144 4\nS 0.5 SIGWINCH ROWS=40 COLS=120\nI 0.1 3\nO 0.193211 7\nH 0.000000 EXIT_CODE 3\n";
        let t = read(TS, "ts", Some((timing, "timing"))).unwrap();
        let track = &t.tracks[0];
        assert_eq!((track.cols, track.rows), (90, 20));
        assert_eq!(outputs(&t).len(), 2);
        assert!(track.events.contains(&TermEvent {
            t: 510,
            kind: TermKind::Resize {
                cols: 120,
                rows: 40
            }
        }));
        assert_eq!(track.events.last().unwrap().kind, TermKind::Exit(3));
    }

    #[test]
    fn a_short_typescript_plays_up_to_the_damage_and_bad_lines_are_named() {
        let cut = TS.windows(2).position(|w| w == b"hi").unwrap() + 6;
        let t = read(&TS[..cut], "ts", Some((b"0.01 4\n0.09 7\n", "timing"))).unwrap();
        let damage = t.damage.unwrap();
        assert!(damage.contains("timing:2"), "{damage}");
        let err = read(TS, "ts", Some((b"0.01 4\nnonsense\n0.09 7\n", "timing"))).unwrap_err();
        assert!(err.to_string().starts_with("timing:2:"), "{err}");
        let t = read(TS, "ts", Some((b"0.01 4\n0.0", "timing"))).unwrap();
        assert!(t.damage.unwrap().contains("timing:2"));
    }

    #[test]
    fn without_timing_the_footer_is_dropped() {
        let t = read(TS, "ts", None).unwrap();
        assert_eq!(outputs(&t), vec![(0, "hi\r\nthere\r\n\n".into())]);
    }
}
