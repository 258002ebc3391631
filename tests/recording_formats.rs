//! Recording formats without a server: asciicast v2/v3 round trips (same
//! screens at the same times), asciinema's own reader on our v2, util-linux
//! `script` recordings, damaged files, and seeking in a long recording.

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is a failure with its message

use std::path::Path;
use std::process::Command;

use rebench::recording::cast::CastHeader;
use rebench::recording::keyframes::{KeyframePolicy, Keyframes, TrackScreen, screen_at};
use rebench::recording::timeline::{Marker, MarkerKind, TermEvent, TermKind, Timeline, Track};
use rebench::recording::{asciicast_v2, asciicast_v3, read_bytes, read_file};

/// A shell-like track: prompts, colours, a full-screen app, a resize,
/// characters split across chunks, input and an exit.
fn sample_track() -> Track {
    let mut track = Track::new(Some(0), "shell 0", 60, 12);
    let mut t = 5_000; // the shell's first chunk is not at the session's zero
    let mut push = |dt: u64, kind: TermKind| {
        t += dt;
        track.events.push(TermEvent { t, kind });
    };
    push(0, TermKind::Resize { cols: 60, rows: 12 });
    push(100, TermKind::Output(b"\x1b[1;32m$\x1b[0m ".to_vec()));
    push(800, TermKind::Input(b"echo h\xc3\xa9llo\r".to_vec()));
    push(20, TermKind::Output(b"echo h\xc3".to_vec())); // é split here...
    push(
        5,
        TermKind::Output(b"\xa9llo\r\nh\xc3\xa9llo \xe2\x82".to_vec()),
    ); // ...and € here
    push(5, TermKind::Output(b"\xac\r\n\x1b[1;32m$\x1b[0m ".to_vec()));
    for i in 0..30 {
        push(
            250,
            TermKind::Output(format!("\x1b[3{}mline {i}\x1b[0m\r\n", i % 8).into_bytes()),
        );
    }
    push(3_000, TermKind::Resize { cols: 80, rows: 20 });
    push(
        10,
        TermKind::Output(b"\x1b[?1049h\x1b[H\x1b[2Jtop - 12:00\x1b[5;10Hbusy".to_vec()),
    );
    push(61_000, TermKind::Output(b"\x1b[?1049l".to_vec()));
    push(100, TermKind::Output(b"exit\r\n".to_vec()));
    push(50, TermKind::Exit(0));
    track
}

fn markers() -> Vec<Marker> {
    vec![
        Marker {
            t: 0,
            kind: MarkerKind::Start,
            label: "session started by tess".into(),
        },
        Marker {
            t: 9_000,
            kind: MarkerKind::Score,
            label: "score 0.590 (raw 2.5, intermediate, by tess): ok".into(),
        },
        Marker {
            t: 20_000,
            kind: MarkerKind::Note,
            label: "note by proctor: \"quoted\" \\ and\nnewline".into(),
        },
    ]
}

fn header(track: &Track) -> CastHeader {
    CastHeader {
        cols: track.cols,
        rows: track.rows,
        timestamp: Some(1_764_000_000),
        title: Some("prefix-sum — tess (human)".into()),
    }
}

fn contents(screen: &vt100::Screen) -> (Vec<u8>, (u16, u16), (u16, u16)) {
    (
        screen.contents_formatted(),
        screen.cursor_position(),
        screen.size(),
    )
}

/// Every moment of `original` (its own times) looks the same in `imported`
/// (times since the original's first event).
fn assert_same_screens(original: &Track, imported: &Track) {
    let zero = original.start();
    let mut times: Vec<u64> = original.events.iter().map(|e| e.t).collect();
    times.extend(original.events.iter().map(|e| e.t + 1));
    for t in times {
        let a = screen_at(original, t);
        let b = screen_at(imported, t - zero);
        assert_eq!(
            contents(&a),
            contents(&b),
            "screens differ at {} ms: {:?} vs {:?}",
            t - zero,
            a.contents(),
            b.contents()
        );
    }
}

fn v2_bytes(track: &Track, markers: &[Marker]) -> Vec<u8> {
    let mut out = Vec::new();
    asciicast_v2::write(&header(track), track, markers, &mut out).unwrap();
    out
}

fn v3_bytes(track: &Track, markers: &[Marker]) -> Vec<u8> {
    let mut out = Vec::new();
    asciicast_v3::write(&header(track), track, markers, &mut out).unwrap();
    out
}

#[test]
fn asciicast_v2_round_trips_to_the_same_screens_at_the_same_times() {
    let track = sample_track();
    let bytes = v2_bytes(&track, &markers());
    let text = String::from_utf8(bytes.clone()).expect("v2 is valid UTF-8");
    let head: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(head["version"], 2);
    assert_eq!(
        (head["width"].as_u64(), head["height"].as_u64()),
        (Some(60), Some(12))
    );
    assert_eq!(head["env"]["TERM"], "xterm-256color");
    assert!(head["env"]["SHELL"].is_string());
    for line in text.lines().skip(1) {
        let (t, code, _): (f64, String, String) = serde_json::from_str(line).unwrap();
        assert!(t >= 0.0);
        assert!(["o", "i", "r", "m"].contains(&code.as_str()), "{line}");
    }
    assert!(text.contains(r#""r", "80x20""#), "{text}");
    assert!(
        !text.contains('\u{FFFD}'),
        "split characters are carried, not replaced"
    );

    let back = read_bytes(&bytes, "t.cast").unwrap();
    assert!(back.damage.is_none());
    assert_eq!(back.tracks.len(), 1);
    assert_same_screens(&track, &back.tracks[0]);
    let labels: Vec<&str> = back.markers.iter().map(|m| m.label.as_str()).collect();
    assert_eq!(labels.len(), 3);
    assert!(labels.contains(&"note by proctor: \"quoted\" \\ and\nnewline"));
    assert_eq!(back.scores.len(), 1, "scores come back from their markers");
    assert_eq!(back.scores[0].normalized, Some(0.59));
    // A marker before the shell's first chunk sits at 0.
    assert_eq!(back.markers[0].t, 0);
    assert_eq!(back.markers[1].t, 9_000 - track.start());
}

#[test]
fn asciicast_v3_round_trips_with_intervals_and_the_exit() {
    let track = sample_track();
    let bytes = v3_bytes(&track, &markers());
    let text = String::from_utf8(bytes.clone()).unwrap();
    let head: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(head["version"], 3);
    assert_eq!(head["term"]["cols"], 60);
    assert_eq!(head["term"]["type"], "xterm-256color");
    // Intervals since the previous event (here the 3 s before the resize).
    assert!(text.contains(r#"[3.000000, "r", "80x20"]"#), "{text}");
    assert!(
        text.lines().nth(1).unwrap().starts_with("[0.000000, "),
        "{text}"
    );
    assert!(
        text.lines().last().unwrap().contains(r#""x", "0""#),
        "{text}"
    );

    let back = read_bytes(&bytes, "t.cast").unwrap();
    assert_same_screens(&track, &back.tracks[0]);
    assert_eq!(
        back.tracks[0].events.last().map(|e| e.kind.clone()),
        Some(TermKind::Exit(0))
    );
    // The same moments in v2 and v3.
    let v2 = read_bytes(&v2_bytes(&track, &markers()), "t2.cast").unwrap();
    let times = |t: &Timeline| t.tracks[0].events.iter().map(|e| e.t).collect::<Vec<_>>();
    let v3_times: Vec<u64> = times(&back).into_iter().take(times(&v2).len()).collect();
    assert_eq!(v3_times, times(&v2));
}

#[test]
fn asciinema_accepts_our_v2_export() {
    let Some(asciinema) = which("asciinema") else {
        println!("SKIPPED: asciinema not found");
        return;
    };
    // `asciinema cat` reads keys from /dev/tty; `script` gives it one.
    let Some(script) = which("script") else {
        println!("SKIPPED: script not found (asciinema cat needs a terminal)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let cast = dir.path().join("s.cast");
    std::fs::write(&cast, v2_bytes(&sample_track(), &markers())).unwrap();
    let out = Command::new(script)
        .args(["-q", "-e", "-c"])
        .arg(format!("{} cat {}", asciinema.display(), cast.display()))
        .arg("/dev/null")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "asciinema cat failed: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("héllo €"), "{text}");
    assert!(text.contains("line 29"), "{text}");
}

#[test]
fn broken_files_name_the_line_and_truncated_files_play_up_to_the_damage() {
    let bytes = v2_bytes(&sample_track(), &markers());
    let text = String::from_utf8(bytes.clone()).unwrap();
    let lines: Vec<&str> = text.lines().collect();

    // A bad line in the middle: an error with file and line.
    let mut broken = lines.clone();
    broken[5] = "[1.0, \"o\", ";
    let err = read_bytes(broken.join("\n").as_bytes(), "broken.cast").unwrap_err();
    assert!(err.to_string().starts_with("broken.cast:6:"), "{err}");

    // Cut off mid-line: plays what came before, and says where it stopped.
    let cut = &bytes[..bytes.len() - 10];
    let t = read_bytes(cut, "cut.cast").unwrap();
    let damage = t.damage.expect("damage is reported");
    assert!(
        damage.starts_with(&format!("cut.cast:{}:", lines.len())),
        "{damage}"
    );
    assert!(damage.contains("truncated"), "{damage}");
    assert!(!t.tracks[0].events.is_empty());

    // A bad header, an unknown format, an unsupported version.
    let err = read_bytes(b"{\"version\": 2, \"width\": 0}\n", "h.cast").unwrap_err();
    assert!(err.to_string().contains("h.cast:1:"), "{err}");
    assert!(err.to_string().contains("width"), "{err}");
    let err = read_bytes(b"hello\n", "x.txt").unwrap_err();
    assert!(err.to_string().contains("--timing"), "{err}");
    let err = read_bytes(b"{\"version\": 1, \"stdout\": []}\n", "v1.json").unwrap_err();
    assert!(err.to_string().contains("version 1"), "{err}");

    // v3 cut mid-line as well.
    let v3 = v3_bytes(&sample_track(), &markers());
    let t = read_bytes(&v3[..v3.len() - 5], "cut3.cast").unwrap();
    assert!(t.damage.is_some());
}

fn which(name: &str) -> Option<std::path::PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| Path::new(d).join(name))
        .find(|p| p.is_file())
}

fn record_with_script(args: &[&str], dir: &Path) -> bool {
    Command::new("script")
        .args(args)
        .current_dir(dir)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn script_recordings_replay_with_classic_and_advanced_timing() {
    if which("script").is_none() {
        println!("SKIPPED: script (util-linux) not found");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // Classic: timing on stderr.
    let classic = record_with_script(
        &[
            "-q",
            "--log-timing",
            "timing",
            "-c",
            "printf 'hi\\n'; sleep 0.3; printf 'th\\303\\251re\\n'",
            "typescript",
        ],
        d,
    );
    assert!(classic, "script -t failed");
    let t = read_file(&d.join("typescript"), Some(&d.join("timing"))).unwrap();
    assert!(t.damage.is_none(), "{:?}", t.damage);
    let track = &t.tracks[0];
    let screen = screen_at(track, track.end());
    assert!(
        screen.contents().contains("hi\nthére"),
        "{:?}",
        screen.contents()
    );
    let early = screen_at(track, track.start());
    assert!(
        !early.contents().contains("thére"),
        "output keeps its timing"
    );
    assert!(
        track.end() - track.start() >= 250,
        "{} ms",
        track.end() - track.start()
    );

    // Advanced: -m advanced -T, input and output in one file (-B).
    let advanced = record_with_script(
        &[
            "-q",
            "-m",
            "advanced",
            "-T",
            "adv.timing",
            "-B",
            "adv.ts",
            "-c",
            "echo one; sleep 0.2; echo two",
        ],
        d,
    );
    assert!(advanced, "script -m advanced failed");
    let t = read_file(&d.join("adv.ts"), Some(&d.join("adv.timing"))).unwrap();
    let track = &t.tracks[0];
    let text = screen_at(track, track.end()).contents();
    assert!(text.contains("one\ntwo"), "{text:?}");
    assert!(t.origin.is_some(), "START_TIME is read");
    assert_eq!(
        track.events.last().map(|e| e.kind.clone()),
        Some(TermKind::Exit(0))
    );

    // A timing file that does not parse names its line.
    std::fs::write(d.join("bad.timing"), "0.1 4\nbogus line here\n0.2 3\n").unwrap();
    let err = read_file(&d.join("typescript"), Some(&d.join("bad.timing"))).unwrap_err();
    assert!(err.to_string().contains("bad.timing:2:"), "{err}");
}

/// A long recording with everything that makes seeking hard.
fn long_track(events: usize) -> Track {
    let mut track = Track::new(None, "t", 80, 24);
    let mut state = 0x2545_f491_u64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for i in 0..events {
        let r = next();
        let data = match r % 9 {
            0 => b"\x1b[2J\x1b[H".to_vec(),
            1 => format!(
                "\x1b[{};{}H\x1b[4{}m*\x1b[0m",
                r % 24 + 1,
                r % 80 + 1,
                r % 8
            )
            .into_bytes(),
            2 => b"\x1b[?1049h\x1b[Hfull screen".to_vec(),
            3 => b"\x1b[?1049l".to_vec(),
            4 => b"\x1b[5;20r\x1b[20;1H\n\n".to_vec(),
            5 => "ünïcödé ".as_bytes()[..(r % 5) as usize + 3].to_vec(),
            6 => b"\x1b[3".to_vec(),
            _ => format!("{i} lorem ipsum dolor sit amet\r\n").into_bytes(),
        };
        track.events.push(TermEvent {
            t: i as u64 * 37,
            kind: TermKind::Output(data),
        });
    }
    track
}

#[test]
fn a_seek_shows_the_screen_that_playing_from_the_start_shows() {
    let track = long_track(20_000);
    let keys = Keyframes::build(
        &track,
        KeyframePolicy {
            every_bytes: 4096,
            every_events: 300,
        },
    );
    assert!(keys.len() > 30);
    let mut screen = TrackScreen::new(&track);
    let mut targets: Vec<u64> = (0..60).map(|i| (i * 7_777_u64) % track.end()).collect();
    targets.extend([track.end(), 0, track.end() / 2, track.end() / 2 + 37]);
    for t in targets {
        screen.seek_time(&track, &keys, t);
        let expected = screen_at(&track, t);
        assert_eq!(
            contents(screen.screen()),
            contents(&expected),
            "after seeking to {t} ms"
        );
        assert_eq!(
            screen.screen().alternate_screen(),
            expected.alternate_screen()
        );
    }
}
