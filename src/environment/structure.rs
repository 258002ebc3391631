//! Structural checks of a manifest: every unknown key, wrong type and
//! missing required key at once, each under its dotted field name.
//!
//! serde stops at its first error, so the parsed TOML is deserialized
//! again and again: after each error the offending key is removed (unknown
//! keys) or replaced by a stand-in value of the right type (wrong types,
//! missing keys) and the problem is kept. The serde structs in `manifest`
//! stay the one description of the format; nothing here repeats it.

use super::manifest::Manifest;
use toml::Value;

/// One structural problem: the dotted field (`hardware.gpus`,
/// `scoring.protected[0]`) and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldProblem {
    pub field: String,
    pub message: String,
    /// 1-based line of the key (of its table, when the key is missing).
    pub line: Option<usize>,
}

/// What deserializing found: the manifest (with stand-ins where values were
/// wrong or missing, so semantic checks can still run on the rest), the
/// problems, and the fields that hold stand-ins (checks of those are moot).
pub struct Structure {
    pub manifest: Option<Manifest>,
    pub problems: Vec<FieldProblem>,
    pub stand_ins: Vec<String>,
}

impl Structure {
    /// Whether `field` is, or lies inside, a stand-in value.
    pub fn is_stand_in(&self, field: &str) -> bool {
        self.stand_ins.iter().any(|s| {
            field == s
                || field
                    .strip_prefix(s.as_str())
                    .is_some_and(|rest| rest.starts_with('.') || rest.starts_with('['))
        })
    }
}

/// More errors than this in one manifest is not a manifest.
const MAX_ROUNDS: usize = 200;

/// Deserializes `text` (already parsed as `root`), collecting every problem.
pub fn deserialize(text: &str, root: Value) -> Structure {
    let mut found = deserialize_value(root);
    if let Ok(doc) = toml_edit::ImDocument::parse(text) {
        for (problem, path) in found.problems.iter_mut().zip(&found.paths) {
            problem.line = offset_of(doc.as_item(), path).map(|at| line_of(text, at));
        }
    }
    found.problems.sort_by_key(|p| p.line.unwrap_or(0));
    Structure {
        manifest: found.manifest,
        problems: found.problems,
        stand_ins: found.stand_ins.iter().map(|p| dotted(p)).collect(),
    }
}

/// 1-based line number of a byte offset.
pub fn line_of(text: &str, offset: usize) -> usize {
    let end = offset.min(text.len());
    text.as_bytes()[..end]
        .iter()
        .filter(|b| **b == b'\n')
        .count()
        + 1
}

/// Where `path` is written: its key, else the deepest table on the way.
fn offset_of(root: &toml_edit::Item, path: &[Segment]) -> Option<usize> {
    let mut at = root;
    let mut best = None;
    for segment in path {
        let next = match segment {
            Segment::Key(key) => {
                if let Some(span) = at
                    .as_table_like()
                    .and_then(|t| t.get_key_value(key))
                    .and_then(|(k, _)| k.span())
                {
                    best = Some(span.start);
                }
                at.get(key.as_str())
            }
            Segment::Index(index) => at.get(*index),
        };
        match next {
            Some(item) => {
                if let Some(span) = item.span() {
                    best = Some(best.map_or(span.start, |b: usize| b.max(span.start)));
                }
                at = item;
            }
            None => break,
        }
    }
    best
}

struct Found {
    manifest: Option<Manifest>,
    problems: Vec<FieldProblem>,
    paths: Vec<Vec<Segment>>,
    stand_ins: Vec<Vec<Segment>>,
}

fn deserialize_value(mut root: Value) -> Found {
    let mut problems = Vec::new();
    let mut paths = Vec::new();
    let mut stand_ins: Vec<Vec<Segment>> = Vec::new();
    for _ in 0..MAX_ROUNDS {
        let error = match attempt(&root) {
            Ok(manifest) => {
                return Found {
                    manifest: Some(manifest),
                    problems,
                    paths,
                    stand_ins,
                };
            }
            Err(error) => error,
        };
        let inside_stand_in = stand_ins.iter().any(|s| error.path.starts_with(s));
        let (target, problem) = match classify(&error) {
            Kind::Unknown(key) => {
                let mut target = error.path.clone();
                if target.last() != Some(&key_segment(&key)) {
                    target.push(key_segment(&key));
                }
                let field = dotted(&target);
                let fixed = remove(&mut root, &target);
                if !fixed {
                    break;
                }
                problems.push(FieldProblem {
                    field,
                    message: format!("unknown key `{key}`"),
                    line: None,
                });
                paths.push(target);
                continue;
            }
            Kind::Missing(key) => {
                let mut target = error.path.clone();
                target.push(key_segment(&key));
                let problem = FieldProblem {
                    field: dotted(&target),
                    message: "missing required key".into(),
                    line: None,
                };
                (target, problem)
            }
            Kind::Invalid(message) => {
                let problem = FieldProblem {
                    field: dotted(&error.path),
                    message,
                    line: None,
                };
                (error.path.clone(), problem)
            }
        };
        if !place_stand_in(&mut root, &target) {
            // Nothing of any type satisfies serde here: report and stop.
            problems.push(problem);
            paths.push(target);
            break;
        }
        if !inside_stand_in {
            problems.push(problem);
            paths.push(target.clone());
        }
        stand_ins.push(target);
    }
    Found {
        manifest: None,
        problems,
        paths,
        stand_ins,
    }
}

/// One step into the document: a table key or an array index.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    Key(String),
    Index(usize),
}

struct PathError {
    path: Vec<Segment>,
    message: String,
}

fn attempt(root: &Value) -> Result<Manifest, PathError> {
    serde_path_to_error::deserialize(root.clone()).map_err(|e| PathError {
        path: e
            .path()
            .iter()
            .map(|segment| match segment {
                serde_path_to_error::Segment::Seq { index } => Segment::Index(*index),
                serde_path_to_error::Segment::Map { key } => Segment::Key(key.clone()),
                serde_path_to_error::Segment::Enum { variant } => Segment::Key(variant.clone()),
                serde_path_to_error::Segment::Unknown => Segment::Key("?".into()),
            })
            .collect(),
        message: e.into_inner().message().trim().to_string(),
    })
}

enum Kind {
    Unknown(String),
    Missing(String),
    Invalid(String),
}

/// serde's messages for these two are fixed: "unknown field `x`, expected
/// ..." and "missing field `x`".
fn classify(error: &PathError) -> Kind {
    let quoted = |prefix: &str| {
        let rest = error.message.strip_prefix(prefix)?;
        let end = rest.find('`')?;
        Some(rest[..end].to_string())
    };
    if let Some(key) = quoted("unknown field `") {
        Kind::Unknown(key)
    } else if let Some(key) = quoted("missing field `") {
        Kind::Missing(key)
    } else {
        Kind::Invalid(error.message.clone())
    }
}

fn key_segment(key: &str) -> Segment {
    Segment::Key(key.to_string())
}

/// `budget.default`, `scoring.protected[0]`.
fn dotted(path: &[Segment]) -> String {
    let mut out = String::new();
    for segment in path {
        match segment {
            Segment::Index(index) => out.push_str(&format!("[{index}]")),
            Segment::Key(key) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(key);
            }
        }
    }
    out
}

/// The value at `path`'s parent, as a mutable slot.
fn parent_of<'a>(root: &'a mut Value, path: &[Segment]) -> Option<&'a mut Value> {
    let (_, parents) = path.split_last()?;
    let mut at = root;
    for segment in parents {
        at = match segment {
            Segment::Key(key) => at.as_table_mut()?.get_mut(key)?,
            Segment::Index(index) => at.as_array_mut()?.get_mut(*index)?,
        };
    }
    Some(at)
}

fn remove(root: &mut Value, path: &[Segment]) -> bool {
    match (parent_of(root, path), path.last()) {
        (Some(Value::Table(table)), Some(Segment::Key(key))) => table.remove(key).is_some(),
        _ => false,
    }
}

fn set(root: &mut Value, path: &[Segment], value: Value) -> bool {
    match (parent_of(root, path), path.last()) {
        (Some(Value::Table(table)), Some(Segment::Key(key))) => {
            table.insert(key.clone(), value);
            true
        }
        (Some(Value::Array(items)), Some(Segment::Index(index))) if *index < items.len() => {
            items[*index] = value;
            true
        }
        _ => false,
    }
}

/// Puts at `path` the first value, of any TOML type, that serde accepts
/// there (an error left inside a stand-in table is fixed in a later round
/// and not reported). False when none is accepted.
fn place_stand_in(root: &mut Value, path: &[Segment]) -> bool {
    let candidates = [
        Value::String(String::new()),
        Value::Integer(0),
        Value::Float(0.0),
        Value::Boolean(false),
        Value::Array(Vec::new()),
        Value::Table(toml::Table::new()),
    ];
    for candidate in candidates {
        if !set(root, path, candidate) {
            return false;
        }
        match attempt(root) {
            Ok(_) => return true,
            Err(e) if !e.path.starts_with(path) || e.path.len() > path.len() => return true,
            Err(e) if matches!(classify(&e), Kind::Missing(_)) => return true,
            Err(_) => {}
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::super::test_support::VALID_MANIFEST;
    use super::*;

    fn structure(text: &str) -> Structure {
        deserialize(text, Value::Table(toml::from_str(text).unwrap()))
    }

    fn found(text: &str) -> Vec<String> {
        structure(text)
            .problems
            .iter()
            .map(|p| format!("{}: {}", p.field, p.message))
            .collect()
    }

    #[test]
    fn a_valid_manifest_has_no_problems() {
        let s = structure(VALID_MANIFEST);
        assert!(s.problems.is_empty());
        assert!(s.stand_ins.is_empty());
        assert_eq!(s.manifest.unwrap().id, "demo");
    }

    #[test]
    fn every_wrong_type_and_missing_key_at_once() {
        let text = VALID_MANIFEST
            .replacen("gpus = 0", "gpus = \"two\"", 1)
            .replacen("title = \"Demo\"\n", "", 1)
            .replacen("timeout = \"5m\"", "timeout = 5", 1)
            .replacen("visible = true", "visible = \"yes\"", 1)
            .replacen("protected = [\"score.py\"]", "protected = [\"a\", 3]", 1);
        let s = structure(&text);
        let problems = found(&text);
        assert_eq!(problems.len(), 5, "{problems:?}");
        let fields: Vec<&str> = problems
            .iter()
            .map(|p| p.split(": ").next().unwrap())
            .collect();
        for field in [
            "title",
            "hardware.gpus",
            "scoring.timeout",
            "scoring.visible",
            "scoring.protected[1]",
        ] {
            assert!(fields.contains(&field), "{field} not in {problems:?}");
        }
        assert!(problems.contains(&"title: missing required key".to_string()));
        let lines: Vec<Option<usize>> = s.problems.iter().map(|p| p.line).collect();
        // In file order: title (missing at top level: no line), gpus,
        // timeout, visible, protected.
        assert_eq!(lines, vec![None, Some(12), Some(18), Some(24), Some(25)]);
        assert!(s.manifest.is_some(), "stand-ins make the rest checkable");
        assert!(s.is_stand_in("hardware.gpus"));
        assert!(!s.is_stand_in("hardware.cpus"));
    }

    #[test]
    fn unknown_keys_are_named_and_checking_goes_on() {
        let text = VALID_MANIFEST
            .replacen("visible = true", "visible = true\nhidden = false", 1)
            .replacen("cpus = 1", "cpus = 1\ntpus = 2", 1)
            .replacen("gpus = 0", "gpus = -1", 1);
        let problems = found(&text);
        assert_eq!(problems.len(), 3, "{problems:?}");
        assert!(problems.contains(&"scoring.hidden: unknown key `hidden`".to_string()));
        assert!(problems.contains(&"hardware.tpus: unknown key `tpus`".to_string()));
        assert!(
            problems
                .iter()
                .any(|p| p.starts_with("hardware.gpus: invalid value")),
            "{problems:?}"
        );
    }

    #[test]
    fn a_wrong_table_is_one_problem_not_one_per_missing_key_inside() {
        let text = VALID_MANIFEST.replacen(
            "[budget]\ndefault = \"8h\"",
            "[budgets]\nx = 1\n[budget]\ndefault = 8",
            1,
        );
        let mut problems = found(&text);
        problems.sort();
        assert_eq!(
            problems,
            vec![
                "budget.default: invalid type: integer `8`, expected a string".to_string(),
                "budgets: unknown key `budgets`".to_string(),
            ]
        );
        let text = format!(
            "budget = 5\n{}",
            VALID_MANIFEST.replacen(
                "[budget]\ndefault = \"8h\"\npresets = [\"2h\", \"8h\", \"32h\"]\n",
                "",
                1
            )
        );
        let s = structure(&text);
        assert_eq!(s.problems.len(), 1, "{:?}", s.problems);
        assert_eq!(s.problems[0].field, "budget");
        assert!(s.is_stand_in("budget.default"));
    }

    #[test]
    fn dotted_names() {
        let path = vec![
            key_segment("scoring"),
            key_segment("protected"),
            Segment::Index(2),
        ];
        assert_eq!(dotted(&path), "scoring.protected[2]");
        assert_eq!(dotted(&[]), "");
    }
}
