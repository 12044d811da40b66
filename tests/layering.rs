//! The core reads top-down: plan and tape build on the graph, the graph on
//! the kernels, the kernels on the linear algebra and the elementary
//! functions. Each module of `src/core` has a rank below, and may name
//! (`super::x`, `crate::core::x`) only modules of a lower rank; nothing in
//! the core names what lies outside it (the binding layer, `crate::api`).
//! A module added to the core fails this test until it is given a rank.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

/// Each module of the core and its rank: lower ranks are used by higher ones.
const RANKS: &[(&str, u32)] = &[
    ("error", 0),
    ("shape", 0),
    ("math", 0),
    ("op", 1),
    ("special", 1),
    ("fastmath", 1),
    ("linalg", 1),
    ("kernels", 2),
    ("graph", 3),
    ("tangent", 4),
    ("plan", 5),
    ("tape", 6),
    ("json", 6),
];

fn rank(module: &str) -> Option<u32> {
    RANKS.iter().find(|(m, _)| *m == module).map(|&(_, r)| r)
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn ident(s: &str) -> &str {
    let end = s.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(s.len());
    &s[..end]
}

/// The first path segment after each `prefix` in `line`; for `prefix{a, b::c}`
/// each item's first segment.
fn segments_after<'a>(line: &'a str, prefix: &str, out: &mut Vec<&'a str>) {
    let mut rest = line;
    while let Some(at) = rest.find(prefix) {
        rest = &rest[at + prefix.len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let group = &group[..group.find('}').unwrap_or(group.len())];
            out.extend(group.split(',').map(|item| ident(item.trim())).filter(|s| !s.is_empty()));
        } else {
            out.push(ident(rest));
        }
    }
}

/// The core modules `text` names, given the module it belongs to and whether
/// it is a file within that module's folder (where `super::` is the module).
fn named_modules(text: &str, nested: bool) -> Vec<(usize, String, String)> {
    let mut found = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let code = line.split("//").next().unwrap_or("");
        let mut names = Vec::new();
        // `super::super::x` from a nested file, `super::x` from a top-level one.
        let up = if nested { "super::super::" } else { "super::" };
        segments_after(code, up, &mut names);
        let mut core = Vec::new();
        segments_after(code, "crate::core::", &mut core);
        names.extend(core);
        let mut outside = Vec::new();
        segments_after(code, "crate::", &mut outside);
        for name in outside {
            match name {
                // `crate::fail!` is the error module's macro.
                "fail" => names.push("error"),
                "core" => {}
                other => found.push((n + 1, other.to_string(), line.trim().to_string())),
            }
        }
        for name in names {
            // `super::x` where x is not a module of the core is an item of
            // the module itself (as in `mod tests { use super::helper; }`).
            if rank(name).is_some() {
                found.push((n + 1, name.to_string(), line.trim().to_string()));
            }
        }
    }
    found
}

#[test]
fn the_core_reads_top_down() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/core");
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    files.sort();
    let mut violations = Vec::new();
    let mut seen = BTreeSet::new();
    for file in &files {
        let rel = file.strip_prefix(&root).unwrap();
        let parts: Vec<&str> = rel.iter().map(|p| p.to_str().unwrap()).collect();
        if parts == ["mod.rs"] {
            continue;
        }
        let module = parts[0].trim_end_matches(".rs");
        // In `kernels/matrix.rs`, `super::` is `kernels`; in `kernels/mod.rs`, the core.
        let nested = parts.len() > 1 && parts[parts.len() - 1] != "mod.rs";
        let Some(own) = rank(module) else {
            violations.push(format!("src/core/{}: module {module} has no rank in tests/layering.rs", rel.display()));
            continue;
        };
        seen.insert(module.to_string());
        let text = fs::read_to_string(file).unwrap();
        for (line, name, code) in named_modules(&text, nested) {
            let ok = match rank(&name) {
                Some(r) => r < own || name == module,
                None => false,
            };
            if !ok {
                violations.push(format!("src/core/{}:{line}: {module} (rank {own}) names {name}: {code}", rel.display()));
            }
        }
    }
    assert!(violations.is_empty(), "imports running up the core:\n{}", violations.join("\n"));
    for (module, _) in RANKS {
        assert!(seen.contains(*module), "tests/layering.rs ranks {module}, which src/core does not have");
    }
}
