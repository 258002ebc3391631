//! Turns terminal input (keys, pastes, mouse) into the bytes xterm would send
//! to the program in the shell. Pure: the caller passes the modes the
//! program asked for (read from the shell's vt100 screen).

use ratatui::crossterm::event::{
    KeyCode, KeyEvent, KeyEventKind, KeyModifiers, MouseButton, MouseEvent, MouseEventKind,
};
use vt100::{MouseProtocolEncoding, MouseProtocolMode};

/// What the program in the shell asked of the terminal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct InputModes {
    /// DECCKM: arrows and Home/End send `ESC O x` instead of `ESC [ x`.
    pub application_cursor: bool,
    /// Pastes are wrapped in `ESC[200~ … ESC[201~`.
    pub bracketed_paste: bool,
    pub mouse_mode: MouseProtocolMode,
    pub mouse_encoding: MouseProtocolEncoding,
}

impl InputModes {
    pub fn of(screen: &vt100::Screen) -> InputModes {
        InputModes {
            application_cursor: screen.application_cursor(),
            bracketed_paste: screen.bracketed_paste(),
            mouse_mode: screen.mouse_protocol_mode(),
            mouse_encoding: screen.mouse_protocol_encoding(),
        }
    }

    pub fn wants_mouse(&self) -> bool {
        self.mouse_mode != MouseProtocolMode::None
    }
}

/// Key releases are not input (terminals with the kitty protocol report them).
pub fn is_input(key: &KeyEvent) -> bool {
    matches!(key.kind, KeyEventKind::Press | KeyEventKind::Repeat)
}

const ESC: u8 = 0x1b;

/// The xterm modifier parameter: 1 + shift + 2·alt + 4·ctrl.
fn modifier_param(mods: KeyModifiers) -> u8 {
    1 + u8::from(mods.contains(KeyModifiers::SHIFT))
        + 2 * u8::from(mods.contains(KeyModifiers::ALT))
        + 4 * u8::from(mods.contains(KeyModifiers::CONTROL))
}

/// `ESC [ 1 ; m x` when modified, else `ESC [ x` (or `ESC O x` in application mode).
fn cursor_key(letter: u8, mods: KeyModifiers, app_mode: bool) -> Vec<u8> {
    let m = modifier_param(mods);
    if m > 1 {
        format!("\x1b[1;{m}{}", letter as char).into_bytes()
    } else if app_mode {
        vec![ESC, b'O', letter]
    } else {
        vec![ESC, b'[', letter]
    }
}

/// `ESC [ n ~`, or `ESC [ n ; m ~` when modified.
fn tilde_key(n: u8, mods: KeyModifiers) -> Vec<u8> {
    let m = modifier_param(mods);
    if m > 1 {
        format!("\x1b[{n};{m}~").into_bytes()
    } else {
        format!("\x1b[{n}~").into_bytes()
    }
}

/// The control byte for Ctrl+`c`, as xterm maps it (`@`..`_` and friends).
fn control_byte(c: char) -> Option<u8> {
    match c {
        'a'..='z' => Some(c as u8 & 0x1f),
        'A'..='Z' => Some(c.to_ascii_lowercase() as u8 & 0x1f),
        '@' | ' ' | '2' => Some(0x00),
        '[' | '3' => Some(0x1b),
        // crossterm reports 0x1c..0x1f as Ctrl+4..7.
        '\\' | '4' => Some(0x1c),
        ']' | '5' => Some(0x1d),
        '^' | '6' => Some(0x1e),
        '_' | '7' | '-' | '/' => Some(0x1f),
        '8' | '?' => Some(0x7f),
        _ => None,
    }
}

/// The bytes for one key press, or None for keys a terminal sends nothing for.
pub fn encode_key(key: &KeyEvent, modes: &InputModes) -> Option<Vec<u8>> {
    let mods = key.modifiers;
    let alt = mods.contains(KeyModifiers::ALT);
    let ctrl = mods.contains(KeyModifiers::CONTROL);
    let app = modes.application_cursor;
    // Keys whose plain form is a byte get Alt as an ESC prefix.
    let with_alt = |bytes: Vec<u8>| {
        if alt {
            let mut out = vec![ESC];
            out.extend(bytes);
            out
        } else {
            bytes
        }
    };
    let bytes = match key.code {
        KeyCode::Char(c) => {
            let base = if ctrl {
                match control_byte(c) {
                    Some(b) => vec![b],
                    None => c.to_string().into_bytes(),
                }
            } else {
                c.to_string().into_bytes()
            };
            with_alt(base)
        }
        KeyCode::Enter => with_alt(vec![b'\r']),
        KeyCode::Backspace => with_alt(vec![if ctrl { 0x08 } else { 0x7f }]),
        KeyCode::Tab if mods.contains(KeyModifiers::SHIFT) => b"\x1b[Z".to_vec(),
        KeyCode::Tab => with_alt(vec![b'\t']),
        KeyCode::BackTab => b"\x1b[Z".to_vec(),
        KeyCode::Esc => with_alt(vec![ESC]),
        KeyCode::Up => cursor_key(b'A', mods, app),
        KeyCode::Down => cursor_key(b'B', mods, app),
        KeyCode::Right => cursor_key(b'C', mods, app),
        KeyCode::Left => cursor_key(b'D', mods, app),
        KeyCode::Home => cursor_key(b'H', mods, app),
        KeyCode::End => cursor_key(b'F', mods, app),
        KeyCode::PageUp => tilde_key(5, mods),
        KeyCode::PageDown => tilde_key(6, mods),
        KeyCode::Insert => tilde_key(2, mods),
        KeyCode::Delete => tilde_key(3, mods),
        KeyCode::F(n @ 1..=4) => {
            let letter = b'P' + (n - 1);
            let m = modifier_param(mods);
            if m > 1 {
                format!("\x1b[1;{m}{}", letter as char).into_bytes()
            } else {
                vec![ESC, b'O', letter]
            }
        }
        KeyCode::F(n @ 5..=12) => {
            let code = [15, 17, 18, 19, 20, 21, 23, 24][usize::from(n - 5)];
            tilde_key(code, mods)
        }
        KeyCode::Null => vec![0],
        _ => return None,
    };
    Some(bytes)
}

const PASTE_START: &[u8] = b"\x1b[200~";
const PASTE_END: &[u8] = b"\x1b[201~";

/// A paste as a terminal sends it: newlines become CR (what Enter sends) and,
/// when the program asked, the text is bracketed. An end marker inside the
/// pasted text is dropped so a paste can never break out of the brackets.
pub fn encode_paste(text: &str, modes: &InputModes) -> Vec<u8> {
    let body = text
        .replace("\r\n", "\r")
        .replace('\n', "\r")
        .replace("\x1b[201~", "");
    if modes.bracketed_paste {
        let mut out = PASTE_START.to_vec();
        out.extend_from_slice(body.as_bytes());
        out.extend_from_slice(PASTE_END);
        out
    } else {
        body.into_bytes()
    }
}

/// A mouse event at (`col`, `row`) of the shell pane (0-based), encoded the
/// way the program asked; None when its mouse mode does not report this event.
pub fn encode_mouse(event: &MouseEvent, col: u16, row: u16, modes: &InputModes) -> Option<Vec<u8>> {
    use MouseProtocolMode as M;
    let button_code = |b: MouseButton| match b {
        MouseButton::Left => 0u16,
        MouseButton::Middle => 1,
        MouseButton::Right => 2,
    };
    let (mut code, release) = match event.kind {
        MouseEventKind::ScrollUp => (64, false),
        MouseEventKind::ScrollDown => (65, false),
        MouseEventKind::ScrollLeft => (66, false),
        MouseEventKind::ScrollRight => (67, false),
        MouseEventKind::Down(b) => (button_code(b), false),
        MouseEventKind::Up(b) if modes.mouse_mode != M::Press => (button_code(b), true),
        MouseEventKind::Drag(b) if matches!(modes.mouse_mode, M::ButtonMotion | M::AnyMotion) => {
            (button_code(b) + 32, false)
        }
        MouseEventKind::Moved if modes.mouse_mode == M::AnyMotion => (35, false),
        _ => return None,
    };
    if modes.mouse_mode == M::None {
        return None;
    }
    if modes.mouse_mode != M::Press {
        let mods = event.modifiers;
        code += 4 * u16::from(mods.contains(KeyModifiers::SHIFT))
            + 8 * u16::from(mods.contains(KeyModifiers::ALT))
            + 16 * u16::from(mods.contains(KeyModifiers::CONTROL));
    }
    let (x, y) = (u32::from(col) + 1, u32::from(row) + 1);
    match modes.mouse_encoding {
        MouseProtocolEncoding::Sgr => {
            let end = if release { 'm' } else { 'M' };
            Some(format!("\x1b[<{code};{x};{y}{end}").into_bytes())
        }
        encoding => {
            // The legacy encodings report a release as button 3.
            let code = if release { (code & !3) | 3 } else { code };
            let mut out = b"\x1b[M".to_vec();
            out.push(32 + code as u8);
            for v in [x, y] {
                let v = 32 + v;
                if encoding == MouseProtocolEncoding::Utf8 {
                    let ch = char::from_u32(v.min(2047))?;
                    out.extend_from_slice(ch.to_string().as_bytes());
                } else {
                    // Coordinates past 223 cannot be sent in one byte.
                    out.push(v.min(255) as u8);
                }
            }
            Some(out)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(code: KeyCode, mods: KeyModifiers) -> KeyEvent {
        KeyEvent::new(code, mods)
    }

    fn plain(code: KeyCode) -> Vec<u8> {
        encode_key(&key(code, KeyModifiers::NONE), &InputModes::default()).unwrap()
    }

    fn app_cursor() -> InputModes {
        InputModes {
            application_cursor: true,
            ..InputModes::default()
        }
    }

    #[test]
    fn plain_keys_send_what_xterm_sends() {
        assert_eq!(plain(KeyCode::Char('a')), b"a");
        assert_eq!(plain(KeyCode::Char('é')), "é".as_bytes());
        assert_eq!(plain(KeyCode::Enter), b"\r");
        assert_eq!(plain(KeyCode::Backspace), [0x7f]);
        assert_eq!(plain(KeyCode::Tab), b"\t");
        assert_eq!(plain(KeyCode::BackTab), b"\x1b[Z");
        assert_eq!(plain(KeyCode::Esc), [0x1b]);
        assert_eq!(plain(KeyCode::Insert), b"\x1b[2~");
        assert_eq!(plain(KeyCode::Delete), b"\x1b[3~");
        assert_eq!(plain(KeyCode::PageUp), b"\x1b[5~");
        assert_eq!(plain(KeyCode::PageDown), b"\x1b[6~");
        assert_eq!(
            encode_key(
                &key(KeyCode::Char('A'), KeyModifiers::SHIFT),
                &InputModes::default()
            )
            .unwrap(),
            b"A"
        );
    }

    #[test]
    fn arrows_home_end_follow_the_cursor_mode() {
        let normal = InputModes::default();
        let app = app_cursor();
        let cases = [
            (KeyCode::Up, b'A'),
            (KeyCode::Down, b'B'),
            (KeyCode::Right, b'C'),
            (KeyCode::Left, b'D'),
            (KeyCode::Home, b'H'),
            (KeyCode::End, b'F'),
        ];
        for (code, letter) in cases {
            let k = key(code, KeyModifiers::NONE);
            assert_eq!(encode_key(&k, &normal).unwrap(), [0x1b, b'[', letter]);
            assert_eq!(encode_key(&k, &app).unwrap(), [0x1b, b'O', letter]);
        }
    }

    #[test]
    fn modified_arrows_carry_the_modifier_parameter() {
        let m = InputModes::default();
        let cases = [
            (KeyModifiers::SHIFT, "\x1b[1;2A"),
            (KeyModifiers::ALT, "\x1b[1;3A"),
            (KeyModifiers::SHIFT | KeyModifiers::ALT, "\x1b[1;4A"),
            (KeyModifiers::CONTROL, "\x1b[1;5A"),
            (KeyModifiers::CONTROL | KeyModifiers::SHIFT, "\x1b[1;6A"),
            (
                KeyModifiers::CONTROL | KeyModifiers::ALT | KeyModifiers::SHIFT,
                "\x1b[1;8A",
            ),
        ];
        for (mods, want) in cases {
            assert_eq!(
                encode_key(&key(KeyCode::Up, mods), &m).unwrap(),
                want.as_bytes()
            );
        }
        // Modified keys use the CSI form even in application cursor mode.
        assert_eq!(
            encode_key(&key(KeyCode::Left, KeyModifiers::CONTROL), &app_cursor()).unwrap(),
            b"\x1b[1;5D"
        );
        assert_eq!(
            encode_key(&key(KeyCode::Delete, KeyModifiers::CONTROL), &m).unwrap(),
            b"\x1b[3;5~"
        );
    }

    #[test]
    fn ctrl_letters_are_masked_to_control_bytes() {
        let m = InputModes::default();
        let ctrl = |c| encode_key(&key(KeyCode::Char(c), KeyModifiers::CONTROL), &m).unwrap();
        assert_eq!(ctrl('a'), [0x01]);
        assert_eq!(ctrl('c'), [0x03]);
        assert_eq!(ctrl('g'), [0x07]);
        assert_eq!(ctrl('z'), [0x1a]);
        assert_eq!(ctrl('C'), [0x03]);
        assert_eq!(ctrl(' '), [0x00]);
        assert_eq!(ctrl('4'), [0x1c]);
        assert_eq!(ctrl('\\'), [0x1c]);
        assert_eq!(ctrl(']'), [0x1d]);
        assert_eq!(ctrl('7'), [0x1f]);
        assert_eq!(
            encode_key(&key(KeyCode::Backspace, KeyModifiers::CONTROL), &m).unwrap(),
            [0x08]
        );
    }

    #[test]
    fn alt_prefixes_escape() {
        let m = InputModes::default();
        let alt = |code| encode_key(&key(code, KeyModifiers::ALT), &m).unwrap();
        assert_eq!(alt(KeyCode::Char('x')), b"\x1bx");
        assert_eq!(alt(KeyCode::Char('.')), b"\x1b.");
        assert_eq!(alt(KeyCode::Backspace), b"\x1b\x7f");
        assert_eq!(alt(KeyCode::Enter), b"\x1b\r");
        assert_eq!(
            encode_key(
                &key(
                    KeyCode::Char('b'),
                    KeyModifiers::ALT | KeyModifiers::CONTROL
                ),
                &m
            )
            .unwrap(),
            [0x1b, 0x02]
        );
    }

    #[test]
    fn function_keys() {
        let want = [
            "\x1bOP", "\x1bOQ", "\x1bOR", "\x1bOS", "\x1b[15~", "\x1b[17~", "\x1b[18~", "\x1b[19~",
            "\x1b[20~", "\x1b[21~", "\x1b[23~", "\x1b[24~",
        ];
        for (i, w) in want.iter().enumerate() {
            assert_eq!(plain(KeyCode::F(i as u8 + 1)), w.as_bytes(), "F{}", i + 1);
        }
        let m = InputModes::default();
        assert_eq!(
            encode_key(&key(KeyCode::F(1), KeyModifiers::SHIFT), &m).unwrap(),
            b"\x1b[1;2P"
        );
        assert_eq!(
            encode_key(&key(KeyCode::F(5), KeyModifiers::CONTROL), &m).unwrap(),
            b"\x1b[15;5~"
        );
        assert_eq!(
            encode_key(&key(KeyCode::F(13), KeyModifiers::NONE), &m),
            None
        );
    }

    #[test]
    fn releases_are_not_input() {
        let mut k = key(KeyCode::Char('a'), KeyModifiers::NONE);
        assert!(is_input(&k));
        k.kind = KeyEventKind::Repeat;
        assert!(is_input(&k));
        k.kind = KeyEventKind::Release;
        assert!(!is_input(&k));
    }

    #[test]
    fn pastes_are_bracketed_only_when_asked() {
        let plain = InputModes::default();
        assert_eq!(encode_paste("ls\npwd\r\n", &plain), b"ls\rpwd\r");
        let bracketed = InputModes {
            bracketed_paste: true,
            ..InputModes::default()
        };
        assert_eq!(encode_paste("a\nb", &bracketed), b"\x1b[200~a\rb\x1b[201~");
        // A pasted end marker cannot end the paste early.
        assert_eq!(
            encode_paste("x\x1b[201~rm -rf", &bracketed),
            b"\x1b[200~xrm -rf\x1b[201~"
        );
    }

    #[test]
    fn mouse_is_encoded_as_the_program_asked() {
        let wheel = MouseEvent {
            kind: MouseEventKind::ScrollUp,
            column: 0,
            row: 0,
            modifiers: KeyModifiers::NONE,
        };
        assert_eq!(encode_mouse(&wheel, 4, 9, &InputModes::default()), None);
        let sgr = InputModes {
            mouse_mode: MouseProtocolMode::PressRelease,
            mouse_encoding: MouseProtocolEncoding::Sgr,
            ..InputModes::default()
        };
        assert_eq!(encode_mouse(&wheel, 4, 9, &sgr).unwrap(), b"\x1b[<64;5;10M");
        let down = MouseEvent {
            kind: MouseEventKind::ScrollDown,
            ..wheel
        };
        assert_eq!(encode_mouse(&down, 0, 0, &sgr).unwrap(), b"\x1b[<65;1;1M");
        let release = MouseEvent {
            kind: MouseEventKind::Up(MouseButton::Left),
            ..wheel
        };
        assert_eq!(encode_mouse(&release, 1, 1, &sgr).unwrap(), b"\x1b[<0;2;2m");
        let legacy = InputModes {
            mouse_mode: MouseProtocolMode::PressRelease,
            ..InputModes::default()
        };
        assert_eq!(
            encode_mouse(&wheel, 4, 9, &legacy).unwrap(),
            [0x1b, b'[', b'M', 32 + 64, 32 + 5, 32 + 10]
        );
        assert_eq!(
            encode_mouse(&release, 0, 0, &legacy).unwrap(),
            [0x1b, b'[', b'M', 32 + 3, 33, 33]
        );
        // Press-only mode reports no releases and no drags.
        let press = InputModes {
            mouse_mode: MouseProtocolMode::Press,
            ..InputModes::default()
        };
        assert_eq!(encode_mouse(&release, 0, 0, &press), None);
    }
}
