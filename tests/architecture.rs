//! The layering of docs/architecture.md, checked: a module may use its own
//! layer and the layers inside it, never one outside (the store never sees
//! the protocol, `recording` never draws, nothing below `tui` knows a
//! screen). A new top-level module must be given a layer here.

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is a failure with its message

use std::path::{Path, PathBuf};

/// Inner to outer; modules on one line are one layer.
const LAYERS: &[&[&str]] = &[
    &["paths", "settings", "command_line", "socket", "screen_feed"],
    &["environment", "hardware"],
    &["session"],
    &["store"],
    &["sandbox"],
    &["scoring", "taskstd"],
    &["protocol"],
    &["server"],
    &["client"],
    &["recording", "report", "campaign", "inspect"],
    &["tui"],
    &["cli", "bin"],
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|layer| layer.contains(&module))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The file without its `#[cfg(test)]` items (tests may build what they
/// need from anywhere): the item after each such attribute is cut, to its
/// closing brace or semicolon.
fn without_tests(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..i]);
        let item = &rest[i..];
        let mut depth = 0usize;
        let mut end = item.len();
        for (j, c) in item.char_indices() {
            match c {
                '{' => depth += 1,
                '}' if depth == 1 => {
                    end = j + 1;
                    break;
                }
                '}' => depth = depth.saturating_sub(1),
                ';' if depth == 0 => {
                    end = j + 1;
                    break;
                }
                _ => {}
            }
        }
        rest = &item[end..];
    }
    out.push_str(rest);
    out
}

/// `crate::name` paths in the code of a file, test items left out.
fn crate_paths(text: &str) -> Vec<String> {
    let code = without_tests(text);
    let mut found = Vec::new();
    for line in code.lines() {
        let line = line.trim_start();
        if line.starts_with("//") {
            continue;
        }
        let mut rest = line;
        while let Some(i) = rest.find("crate::") {
            let tail = &rest[i + "crate::".len()..];
            let name: String = tail
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                .collect();
            found.push(name);
            rest = tail;
        }
    }
    found
}

#[test]
fn inner_layers_never_use_outer_ones() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    assert!(files.len() > 100, "the source tree was not found");
    let mut wrong = Vec::new();
    for file in &files {
        let relative = file.strip_prefix(&src).unwrap();
        let top = relative
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy()
            .trim_end_matches(".rs")
            .to_string();
        if top == "lib" || top == "main" {
            continue;
        }
        let Some(own) = layer_of(&top) else {
            wrong.push(format!(
                "src/{top}: no layer (add it to LAYERS and docs/architecture.md)"
            ));
            continue;
        };
        let text = std::fs::read_to_string(file).unwrap();
        for used in crate_paths(&text) {
            if let Some(theirs) = layer_of(&used)
                && theirs > own
            {
                wrong.push(format!(
                    "{} ({top}) uses crate::{used}, an outer layer",
                    relative.display()
                ));
            }
        }
    }
    wrong.sort();
    wrong.dedup();
    assert!(wrong.is_empty(), "layering broken:\n{}", wrong.join("\n"));
}

#[test]
fn the_checker_sees_what_a_file_uses() {
    let text = "use crate::server::hub;\n// crate::tui in a comment\nfn f() { crate::protocol::x(); }\n#[cfg(test)]\nmod tests { fn g() { crate::cli::x(); } }\n#[cfg(test)]\nuse crate::report;\nfn h() { crate::store::y(); }";
    assert_eq!(crate_paths(text), ["server", "protocol", "store"]);
    assert_eq!(layer_of("store"), Some(3));
    assert!(layer_of("tui") > layer_of("recording"));
}
