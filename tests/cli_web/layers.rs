//! Imports point one way (ARCHITECTURE.md, "Layers"): a module names only modules of a
//! lower layer, never one above it nor a neighbour of its own layer. Read from the source:
//! every `crate::<module>` a file of `src/` names outside comments and its tests.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Each top-level module of the crate and its layer, lowest first. A module missing here
/// fails the test: a new one is placed on purpose.
const LAYERS: &[(&str, u8)] = &[
    // The bottom: vocabulary and plumbing every layer may use.
    ("alert_kind", 0),
    ("dnssec", 0),
    ("logging", 0),
    ("retry", 0),
    ("secret", 0),
    ("time", 0),
    ("zone_name", 0),
    // Daemon-wide conditions, kept by the DNS observer and the provider client.
    ("condition", 1),
    // The file's values, read by config's sections and by each provider's own block.
    ("de", 1),
    // What the world says: the public DNS, the provider.
    ("dns", 2),
    ("provider", 3),
    // The pure core.
    ("lifecycle", 4),
    // Where decisions are kept, and where alerts go.
    ("store", 5),
    ("alert", 6),
    // The operator's intent, recorded (the CLI and the web console).
    ("intent", 6),
    // The engine and what runs beside it.
    ("engine", 7),
    ("metrics", 7),
    ("systemd", 7),
    ("web", 7),
    // The file format and the commands, at the top.
    ("config", 8),
    ("cli", 9),
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("src is readable") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module a file of `src/` belongs to (`src/dns/wire.rs`: `dns`), or
/// `None` for the crate roots.
fn module_of(src: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src).ok()?;
    let first = rel.components().next()?.as_os_str().to_str()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    (!matches!(name, "lib" | "main")).then(|| name.to_string())
}

/// Every `crate::<name>` in the file's code: comments and test modules left out (a
/// test may reach across layers to build its world).
fn named_modules(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let code = line.trim_start();
        if code.starts_with("#[cfg(test)]") {
            break;
        }
        if code.starts_with("//") {
            continue;
        }
        let code = code.split(" //").next().unwrap_or(code);
        let mut rest = code;
        while let Some(at) = rest.find("crate::") {
            let after = &rest[at + "crate::".len()..];
            let name: String = after
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                out.push((number + 1, name));
            }
            rest = after;
        }
    }
    out
}

#[test]
fn imports_point_one_way() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let layer: BTreeMap<&str, u8> = LAYERS.iter().copied().collect();
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut wrong = Vec::new();
    for file in &files {
        let Some(module) = module_of(&src, file) else {
            continue;
        };
        let file_name = file.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if file_name.starts_with("tests") {
            continue;
        }
        let Some(&own) = layer.get(module.as_str()) else {
            wrong.push(format!(
                "{}: module `{module}` has no layer in LAYERS",
                file.display()
            ));
            continue;
        };
        let text = std::fs::read_to_string(file).expect("a source file is readable");
        for (line, named) in named_modules(&text) {
            if named == module {
                continue;
            }
            match layer.get(named.as_str()) {
                None => wrong.push(format!(
                    "{}:{line}: `crate::{named}` has no layer in LAYERS",
                    file.display()
                )),
                Some(&theirs) if theirs >= own => wrong.push(format!(
                    "{}:{line}: `{module}` (layer {own}) names `crate::{named}` (layer {theirs})",
                    file.display()
                )),
                Some(_) => {}
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "imports against the layers:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_scan_sees_an_import_upwards() {
    let text = "use crate::config::Settings;\n// crate::cli in a comment\nfn f() { crate::store::x(); }\n#[cfg(test)]\nmod tests { use crate::cli; }\n";
    let named: Vec<String> = named_modules(text).into_iter().map(|(_, n)| n).collect();
    assert_eq!(named, ["config", "store"]);
}

/// The files of `src/lifecycle/` (its tests left out) a file names by `super::NAME` or
/// `crate::lifecycle::NAME` in its code.
fn core_imports(text: &str, files: &[String]) -> Vec<String> {
    imports_by(text, files, &["super::", "crate::lifecycle::"])
}

/// The same for a file inside a folder module of the core (`step/adopt.rs`), whose
/// `super::` is its folder: the core's other files it names as `crate::lifecycle::NAME`
/// or `super::super::NAME`.
fn folder_imports(text: &str, files: &[String]) -> Vec<String> {
    imports_by(text, files, &["super::super::", "crate::lifecycle::"])
}

fn imports_by(text: &str, files: &[String], prefixes: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    for line in text.lines() {
        let code = line.trim_start();
        if code.starts_with("#[cfg(test)]") {
            break;
        }
        if code.starts_with("//") {
            continue;
        }
        let code = code.split(" //").next().unwrap_or(code);
        for prefix in prefixes {
            let mut rest = code;
            while let Some(at) = rest.find(prefix) {
                let after = &rest[at + prefix.len()..];
                // `super::{a, b::C}` names each of its parts.
                let names: Vec<String> = match after.strip_prefix('{') {
                    Some(group) => group
                        .split('}')
                        .next()
                        .unwrap_or("")
                        .split(',')
                        .map(|p| p.trim().split("::").next().unwrap_or("").to_string())
                        .collect(),
                    None => vec![
                        after
                            .chars()
                            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                            .collect(),
                    ],
                };
                out.extend(names.into_iter().filter(|n| files.contains(n)));
                rest = after;
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// The pure core's files import each other without a circle (ARCHITECTURE.md, "Layers"):
/// a reader can start from a file and meet each concept before it is used.
#[test]
fn the_core_has_no_import_circle() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lifecycle");
    // A module is a file (`rules.rs`) or a folder (`step/`, its `mod.rs` and the files
    // below it): one node, whose imports are all its files'.
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .expect("src/lifecycle is readable")
        .filter_map(|e| {
            let e = e.ok()?;
            let name = e.file_name().into_string().ok()?;
            let stem = match name.strip_suffix(".rs") {
                Some(stem) => stem.to_string(),
                None if e.path().join("mod.rs").is_file() => name,
                None => return None,
            };
            (!stem.starts_with("tests") && stem != "mod").then_some(stem)
        })
        .collect();
    names.sort();
    let graph: BTreeMap<String, Vec<String>> = names
        .iter()
        .map(|n| {
            let folder = dir.join(n);
            let mut deps = if folder.is_dir() {
                let text = std::fs::read_to_string(folder.join("mod.rs"))
                    .expect("a source file is readable");
                let mut deps = core_imports(&text, &names);
                let mut inner = Vec::new();
                rust_files(&folder, &mut inner);
                for file in inner {
                    let file_name = file.file_name().and_then(|f| f.to_str()).unwrap_or("");
                    if file_name == "mod.rs" || file_name.starts_with("tests") {
                        continue;
                    }
                    let text = std::fs::read_to_string(&file).expect("a source file is readable");
                    deps.extend(folder_imports(&text, &names));
                }
                deps
            } else {
                let text = std::fs::read_to_string(dir.join(format!("{n}.rs")))
                    .expect("a source file is readable");
                core_imports(&text, &names)
            };
            deps.sort();
            deps.dedup();
            deps.retain(|d| d != n);
            (n.clone(), deps)
        })
        .collect();
    // Which files each file reaches; a circle is a set of files that reach each other.
    let reach = |from: &str| {
        let mut seen = vec![from.to_string()];
        let mut next = 0;
        while next < seen.len() {
            for d in graph.get(&seen[next]).into_iter().flatten() {
                if !seen.contains(d) {
                    seen.push(d.clone());
                }
            }
            next += 1;
        }
        seen
    };
    let mut wrong = Vec::new();
    for n in &names {
        let circle: Vec<&String> = names
            .iter()
            .filter(|m| reach(n).contains(m) && reach(m).contains(n))
            .collect();
        if circle.len() > 1 {
            wrong.push(format!("{n}: in a circle of {circle:?}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_circle_scan_reads_grouped_imports() {
    let names = ["facts", "model", "state"].map(String::from);
    let text = "use super::{facts::Facts, model};\n// super::state in a comment\nfn f() { crate::lifecycle::state::x(); }\n";
    assert_eq!(core_imports(text, &names), ["facts", "model", "state"]);
    // Inside a folder module, `super::` is the folder: only its `super::super::` names
    // the core's files.
    let inner =
        "use super::Run;\nuse super::super::facts::Facts;\nuse crate::lifecycle::{model, state};\n";
    assert_eq!(folder_imports(inner, &names), ["facts", "model", "state"]);
    assert_eq!(
        folder_imports("use super::state;\n", &names),
        Vec::<String>::new()
    );
}
