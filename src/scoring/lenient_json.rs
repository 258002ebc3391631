//! JSON parsing that also accepts the `NaN`, `Infinity` and `-Infinity`
//! tokens Python's `json.dumps` emits for non-finite floats.
//!
//! serde_json rejects those tokens and `Value` cannot hold non-finite numbers,
//! so we rewrite each bare token into a sentinel string before parsing and
//! map the sentinels back afterwards.

use serde_json::Value;

const SENTINEL_PREFIX: &str = "\u{0}rebench-nonfinite:";
const TOKENS: [(&str, f64); 3] = [
    ("-Infinity", f64::NEG_INFINITY),
    ("Infinity", f64::INFINITY),
    ("NaN", f64::NAN),
];

/// Parses `text`, turning non-finite tokens into sentinel strings (see [`non_finite`]).
/// A number too large for a float (`1e400`) is read as ±Infinity, as
/// Python reads it, so that it is "not finite" rather than "malformed".
pub(crate) fn parse(text: &str) -> Result<Value, serde_json::Error> {
    if !TOKENS.iter().any(|(token, _)| text.contains(token)) {
        match serde_json::from_str(text) {
            Err(e) if e.to_string().starts_with("number out of range") => {}
            other => return other,
        }
    }
    serde_json::from_str(&replace_bare_tokens(text))
}

/// The non-finite number a sentinel produced by [`parse`] stands for.
pub(crate) fn non_finite(value: &Value) -> Option<f64> {
    let token = value.as_str()?.strip_prefix(SENTINEL_PREFIX)?;
    TOKENS
        .iter()
        .find(|(name, _)| *name == token)
        .map(|(_, number)| *number)
}

/// Replaces sentinels anywhere in `value` by the plain token text ("NaN"),
/// which is how they are best shown to people and stored.
pub(crate) fn sentinels_to_text(value: &mut Value) {
    match value {
        Value::String(text) => {
            if let Some(token) = text.strip_prefix(SENTINEL_PREFIX) {
                *text = token.to_string();
            }
        }
        Value::Array(items) => items.iter_mut().for_each(sentinels_to_text),
        Value::Object(map) => map.values_mut().for_each(sentinels_to_text),
        _ => {}
    }
}

/// Rewrites tokens outside string literals; a token must stand alone (not part
/// of a longer word), so malformed input stays malformed.
fn replace_bare_tokens(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 32);
    let mut in_string = false;
    let mut escaped = false;
    let mut previous: Option<char> = None;
    let mut rest = text;
    'scan: while let Some(c) = rest.chars().next() {
        if in_string {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => in_string = false,
                _ => {}
            }
        } else if c == '"' {
            in_string = true;
        } else if !previous.is_some_and(is_word_char) {
            let number_len = rest
                .find(|c: char| !(c.is_ascii_digit() || "+-.eE".contains(c)))
                .unwrap_or(rest.len());
            if number_len > 0
                && let Ok(number) = rest[..number_len].parse::<f64>()
                && number.is_infinite()
            {
                let token = if number < 0.0 {
                    "-Infinity"
                } else {
                    "Infinity"
                };
                out.push_str(&format!("\"\\u0000rebench-nonfinite:{token}\""));
                previous = Some('0');
                rest = &rest[number_len..];
                continue 'scan;
            }
            for (token, _) in TOKENS {
                let after = rest.strip_prefix(token);
                if let Some(after) = after.filter(|after| !after.starts_with(is_word_char)) {
                    // `\u0000` keeps the sentinel valid JSON text.
                    out.push_str(&format!("\"\\u0000rebench-nonfinite:{token}\""));
                    previous = token.chars().last();
                    rest = after;
                    continue 'scan;
                }
            }
        }
        out.push(c);
        previous = Some(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_' || c == '.'
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn numbers_beyond_a_float_are_infinite_not_malformed() {
        let value = parse(r#"{"raw": 1e400, "b": -2E+999, "c": 1.5, "d": "1e400"}"#).unwrap();
        assert_eq!(non_finite(&value["raw"]), Some(f64::INFINITY));
        assert_eq!(non_finite(&value["b"]), Some(f64::NEG_INFINITY));
        assert_eq!(value["c"], json!(1.5));
        assert_eq!(value["d"], json!("1e400"));
    }

    #[test]
    fn standard_json_is_untouched() {
        assert_eq!(
            parse(r#"{"a": [1, "NaN"]}"#).unwrap(),
            json!({"a": [1, "NaN"]})
        );
    }

    #[test]
    fn bare_tokens_become_sentinels() {
        let value =
            parse(r#"{"a": NaN, "b": [Infinity, -Infinity], "c": "x NaN \" Infinity"}"#).unwrap();
        assert!(non_finite(&value["a"]).unwrap().is_nan());
        assert_eq!(non_finite(&value["b"][0]), Some(f64::INFINITY));
        assert_eq!(non_finite(&value["b"][1]), Some(f64::NEG_INFINITY));
        assert_eq!(value["c"], json!("x NaN \" Infinity"));
        let mut shown = value.clone();
        sentinels_to_text(&mut shown);
        assert_eq!(
            shown,
            json!({"a": "NaN", "b": ["Infinity", "-Infinity"], "c": "x NaN \" Infinity"})
        );
    }

    #[test]
    fn tokens_inside_words_stay_malformed() {
        assert!(parse(r#"{"a": NaNa}"#).is_err());
        assert!(parse(r#"{"a": xNaN}"#).is_err());
        assert!(parse(r#"{"a": Infinit}"#).is_err());
    }
}
