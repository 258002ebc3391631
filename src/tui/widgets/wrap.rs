//! Text after a fixed prefix (a time, a value), word-wrapped to a width with
//! its continuation lines indented, so a list stays readable when an entry
//! is longer than its panel (ratatui's own wrap starts them at column 0).

use ratatui::style::Style;
use ratatui::text::{Line, Span};

/// `prefix` then `text` in `style`, wrapped at `width` columns; the lines
/// after the first start with `indent` spaces. A word longer than a line is
/// cut across lines.
pub fn after_prefix<'a>(
    prefix: Vec<Span<'a>>,
    text: &str,
    style: Style,
    width: usize,
    indent: usize,
) -> Vec<Line<'a>> {
    let width = width.max(indent + 1);
    let mut lines = Vec::new();
    let mut spans = prefix;
    let mut used: usize = spans.iter().map(Span::width).sum();
    let mut current = String::new();
    for word in text.split(' ') {
        let mut word: Vec<char> = word.chars().collect();
        loop {
            let gap = usize::from(!current.is_empty());
            if used + gap + word.len() <= width {
                if gap == 1 {
                    current.push(' ');
                }
                current.extend(word.iter());
                used += gap + word.len();
                break;
            }
            let fresh_line = current.is_empty() && used <= indent;
            if fresh_line {
                // Longer than a whole line: cut it.
                let fits = width - used;
                current.extend(word.drain(..fits));
            }
            spans.push(Span::styled(std::mem::take(&mut current), style));
            lines.push(Line::from(std::mem::take(&mut spans)));
            spans.push(Span::raw(" ".repeat(indent)));
            used = indent;
            if fresh_line && word.is_empty() {
                break;
            }
        }
    }
    spans.push(Span::styled(current, style));
    lines.push(Line::from(spans));
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(lines: &[Line]) -> Vec<String> {
        lines
            .iter()
            .map(|l| l.spans.iter().map(|s| s.content.as_ref()).collect())
            .collect()
    }

    #[test]
    fn continuation_lines_are_indented_and_nothing_is_lost() {
        let lines = after_prefix(
            vec![Span::raw("  #2 1:06:40 ")],
            "invalid: wrong answer at index 17 (expected 3, got 4)",
            Style::default(),
            30,
            6,
        );
        assert_eq!(
            text(&lines),
            [
                "  #2 1:06:40 invalid: wrong",
                "      answer at index 17",
                "      (expected 3, got 4)",
            ]
        );
        assert!(text(&lines).iter().all(|l| l.chars().count() <= 30));
        // Short text stays on the prefix's line; a long word is cut.
        assert_eq!(
            text(&after_prefix(
                vec![Span::raw("a ")],
                "b c",
                Style::default(),
                30,
                2
            )),
            ["a b c"]
        );
        let long = text(&after_prefix(
            vec![],
            &"x".repeat(25),
            Style::default(),
            10,
            2,
        ));
        assert_eq!(long, ["xxxxxxxxxx", "  xxxxxxxx", "  xxxxxxx"]);
    }
}
