//! The core reads top-down: plan and tape build on the graph, the graph on
//! the ops' rules, the rules on the kernels and the linear algebra, and
//! those on the elementary functions. Each module of `src/core` has a rank
//! below, and may name (`super::x`, `crate::core::x`) only modules of a
//! lower rank; nothing in the core names what lies outside it (the binding
//! layer, `crate::api`). A module added to the core fails this test until
//! it is given a rank.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// Each module of the core and its rank: lower ranks are used by higher ones.
const RANKS: &[(&str, u32)] = &[
    ("error", 0),
    ("shape", 0),
    ("widest", 0),
    ("math", 1),
    ("op", 2),
    ("special", 2),
    ("fastmath", 2),
    ("linalg", 2),
    ("kernels", 3),
    ("rules", 4),
    ("graph", 5),
    ("tangent", 6),
    ("pattern", 6),
    ("plan", 7),
    ("tape", 8),
    ("json", 8),
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

// ---------------------------------------------------------------------------
// No import circle anywhere in the crate.
//
// The graph is drawn from the source of `src/**/*.rs`: each file is a module
// (`lib.rs` the root, `x/mod.rs` and `x.rs` the module `x`), and a module
// imports another where it names it, or an item in it: by a `use` line
// (`use super::lanes::Lane`, `use crate::core::op::Op`, `use child::x`), or
// by a `crate::`, `$crate::`, `super::` or `self::` path in its code.
// Comments, strings and characters are skipped; an inline `mod x { .. }`
// belongs to its file, and its own `super::` names the file's module.
//
// A module owns what lies inside it: its own children naming it back (a
// split `impl Plan`, a parent's `pub use child::X`) is one room, not a
// circle. So an import is drawn between the two siblings it crosses
// (`core::plan::lanes` naming `core::graph` is `core::plan` → `core::graph`),
// and one naming the module's own ancestor or descendant is not drawn.
// A circle is then siblings that import each other, however indirectly.

/// A module's path from the crate root: `["core", "plan", "lanes"]`.
type ModPath = Vec<String>;

/// Where an import was seen: the file, the line, and the line's code.
type Seen = (String, usize, String);

/// The module a file under `src` holds: `core/plan/mod.rs` is `core::plan`.
fn module_of_file(rel: &str) -> ModPath {
    let rel = rel.trim_end_matches(".rs");
    let mut parts: Vec<String> = rel.split('/').map(String::from).collect();
    if parts == ["lib"] {
        return Vec::new();
    }
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts
}

/// Where a raw string (`r".."`, `r#".."#`, `br".."`) starting at `i` opens
/// its quote, and how many `#` close it.
fn raw_string_at(c: &[char], i: usize) -> Option<(usize, usize)> {
    let mut j = match (c[i], c.get(i + 1)) {
        ('r', _) => i + 1,
        ('b', Some('r')) => i + 2,
        _ => return None,
    };
    let hashes = c[j..].iter().take_while(|&&ch| ch == '#').count();
    j += hashes;
    (c.get(j) == Some(&'"')).then_some((j, hashes))
}

/// `text` with every comment, string and character literal blanked out
/// (newlines kept, so lines still count), leaving only code.
fn code_only(text: &str) -> String {
    let c: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let blank = |out: &mut String, s: &[char]| out.extend(s.iter().map(|&ch| if ch == '\n' { '\n' } else { ' ' }));
    let mut i = 0;
    while i < c.len() {
        let ident_before = i > 0 && (c[i - 1].is_alphanumeric() || c[i - 1] == '_');
        let start = i;
        if c[i] == '/' && c.get(i + 1) == Some(&'/') {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if c[i] == '/' && c.get(i + 1) == Some(&'*') {
            // Block comments nest in Rust.
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if let Some((quote, hashes)) = raw_string_at(&c, i).filter(|_| !ident_before) {
            let mut j = quote + 1;
            while !(c[j] == '"' && (1..=hashes).all(|h| c.get(j + h) == Some(&'#'))) {
                j += 1;
            }
            i = j + 1 + hashes;
        } else if c[i] == '"' {
            i += 1;
            while c[i] != '"' {
                i += if c[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
        } else if c[i] == '\'' && c.get(i + 1) == Some(&'\\') {
            // An escaped character: '\n', '\'', '\u{7f}'.
            i += 2;
            while c[i] != '\'' {
                i += 1;
            }
            i += 1;
        } else if c[i] == '\'' && c.get(i + 2) == Some(&'\'') {
            i += 3;
        } else {
            // Code (a lifetime's `'a` included).
            out.push(c[i]);
            i += 1;
            continue;
        }
        blank(&mut out, &c[start..i.min(c.len())]);
    }
    out
}

/// A `use` tree flattened into its paths, each as segments:
/// `super::{a, b::{c, d as e}}` gives `super::a`, `super::b::c`, `super::b::d`.
fn use_paths(tree: &str) -> Vec<Vec<String>> {
    fn walk(prefix: &[String], tree: &str, out: &mut Vec<Vec<String>>) {
        // Split at the commas outside braces.
        let (mut depth, mut from, mut items) = (0, 0, Vec::new());
        for (i, ch) in tree.char_indices() {
            match ch {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    items.push(&tree[from..i]);
                    from = i + 1;
                }
                _ => {}
            }
        }
        items.push(&tree[from..]);
        for item in items.into_iter().map(str::trim).filter(|s| !s.is_empty()) {
            let (head, group) = match item.find('{') {
                Some(at) => (&item[..at], Some(&item[at + 1..item.rfind('}').unwrap_or(item.len())])),
                None => (item.split(" as ").next().unwrap(), None),
            };
            let mut path = prefix.to_vec();
            path.extend(head.split("::").map(str::trim).filter(|s| !s.is_empty()).map(String::from));
            match group {
                Some(group) => walk(&path, group, out),
                None => out.push(path),
            }
        }
    }
    let mut out = Vec::new();
    walk(&[], tree.trim().trim_start_matches("::"), &mut out);
    out
}

/// The file module that `path`, written in module `here` (a file's module
/// and the inline modules around the line), names: the longest run of its
/// segments that are modules. `None` for a path outside the crate (`std::`,
/// `serde::`) and for a bare path that is no child module (an imported name).
fn resolve(path: &[String], here: &[String], modules: &BTreeSet<ModPath>) -> Option<ModPath> {
    let first = path.first()?;
    let (mut at, rest): (ModPath, &[String]) = match first.as_str() {
        "crate" | "$crate" => (Vec::new(), &path[1..]),
        "self" => (here.to_vec(), &path[1..]),
        "super" => {
            let ups = path.iter().take_while(|s| *s == "super").count();
            (here[..here.len().saturating_sub(ups)].to_vec(), &path[ups..])
        }
        _ => (here.to_vec(), path),
    };
    // Inline modules are not files: what they name is their file's.
    while !modules.contains(&at) {
        at.pop();
    }
    let bare = !matches!(first.as_str(), "crate" | "$crate" | "self" | "super");
    for (k, seg) in rest.iter().enumerate() {
        let mut next = at.clone();
        next.push(seg.clone());
        if !modules.contains(&next) {
            if bare && k == 0 {
                return None;
            }
            break;
        }
        at = next;
    }
    Some(at)
}

/// Every import of the crate whose files are `files` (path under `src`,
/// text), drawn between the two siblings it crosses, with where it was
/// first seen. (The head comment above says which imports are drawn.)
fn import_graph(files: &[(String, String)]) -> BTreeMap<(ModPath, ModPath), Seen> {
    let modules: BTreeSet<ModPath> = files.iter().map(|(rel, _)| module_of_file(rel)).collect();
    let mut edges = BTreeMap::new();
    for (rel, text) in files {
        let own = module_of_file(rel);
        let code = code_only(text);
        let lines: Vec<&str> = text.lines().collect();
        // Tokens: a path (identifiers joined by `::`, `$crate` too) or a brace.
        let chars: Vec<char> = code.chars().collect();
        let mut tokens: Vec<(usize, String)> = Vec::new();
        let (mut i, mut line) = (0, 1);
        while i < chars.len() {
            let ch = chars[i];
            let word = |ch: char| ch.is_alphanumeric() || ch == '_' || ch == '$';
            if word(ch) || (ch == ':' && chars.get(i + 1) == Some(&':')) {
                let start = i;
                while i < chars.len() && (word(chars[i]) || (chars[i] == ':' && chars.get(i + 1) == Some(&':'))) {
                    i += if chars[i] == ':' { 2 } else { 1 };
                }
                tokens.push((line, chars[start..i].iter().collect()));
                continue;
            }
            if matches!(ch, '{' | '}' | ';' | ',') {
                tokens.push((line, ch.to_string()));
            }
            if ch == '\n' {
                line += 1;
            }
            i += 1;
        }
        let mut inline: Vec<(String, usize)> = Vec::new(); // inline modules and the depth each opened at
        let mut depth = 0;
        let mut t = 0;
        while t < tokens.len() {
            let (line, tok) = &tokens[t];
            let here: ModPath = own.iter().cloned().chain(inline.iter().map(|(m, _)| m.clone())).collect();
            let mut named: Vec<Vec<String>> = Vec::new();
            match tok.as_str() {
                "mod" if tokens.get(t + 2).is_some_and(|(_, b)| b == "{") => {
                    inline.push((tokens[t + 1].1.clone(), depth));
                    depth += 1;
                    t += 3;
                    continue;
                }
                "{" => depth += 1,
                "}" => {
                    depth -= 1;
                    if inline.last().is_some_and(|&(_, d)| d == depth) {
                        inline.pop();
                    }
                }
                "use" => {
                    // The whole tree, up to its `;`.
                    let mut tree = String::new();
                    t += 1;
                    while t < tokens.len() && tokens[t].1 != ";" {
                        let tok = &tokens[t].1;
                        tree.push_str(if tok == "as" { " as " } else { tok });
                        t += 1;
                    }
                    named.extend(use_paths(&tree));
                }
                path if path.contains("::") => {
                    let segs: Vec<String> = path.split("::").filter(|s| !s.is_empty()).map(String::from).collect();
                    if matches!(segs[0].as_str(), "crate" | "$crate" | "self" | "super") {
                        named.push(segs);
                    }
                }
                _ => {}
            }
            for path in named {
                let Some(to) = resolve(&path, &here, &modules) else { continue };
                // Ancestors and descendants are the module's own room.
                let common = own.iter().zip(&to).take_while(|(a, b)| a == b).count();
                if common == own.len() || common == to.len() {
                    continue;
                }
                let seen = (format!("src/{rel}"), *line, lines.get(line - 1).map_or("", |l| l.trim()).to_string());
                edges.entry((own[..=common].to_vec(), to[..=common].to_vec())).or_insert(seen);
            }
            t += 1;
        }
    }
    edges
}

/// Every circle of `edges`, each once, as the shortest way round from its
/// first module, with where each of its imports was seen.
fn circles(edges: &BTreeMap<(ModPath, ModPath), Seen>) -> Vec<String> {
    let mut out = Vec::new();
    let mut found: BTreeSet<BTreeSet<ModPath>> = BTreeSet::new();
    let from: BTreeSet<&ModPath> = edges.keys().map(|(a, _)| a).collect();
    for start in from {
        // Breadth first from `start`, back to it.
        let mut came: BTreeMap<&ModPath, &ModPath> = BTreeMap::new();
        let mut queue = std::collections::VecDeque::from([start]);
        let mut back = None;
        'search: while let Some(at) = queue.pop_front() {
            for ((a, b), _) in edges.range((at.clone(), Vec::new())..) {
                if a != at {
                    break;
                }
                if b == start {
                    back = Some(at);
                    break 'search;
                }
                if !came.contains_key(b) {
                    came.insert(b, at);
                    queue.push_back(b);
                }
            }
        }
        let Some(mut at) = back else { continue };
        let mut way = Vec::new();
        while at != start {
            way.push(at.clone());
            at = came[at];
        }
        way.reverse();
        let ring: Vec<ModPath> = [start.clone()].into_iter().chain(way).chain([start.clone()]).collect();
        if !found.insert(ring.iter().cloned().collect()) {
            continue;
        }
        let mut text = ring[0].join("::");
        for pair in ring.windows(2) {
            let (file, line, code) = &edges[&(pair[0].clone(), pair[1].clone())];
            text += &format!("\n  -> {}   ({file}:{line}: {code})", pair[1].join("::"));
        }
        out.push(text);
    }
    out
}

#[test]
fn no_module_imports_itself_round_a_circle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut paths = Vec::new();
    rust_files(&src, &mut paths);
    paths.sort();
    let files: Vec<(String, String)> = paths
        .iter()
        .map(|p| (p.strip_prefix(&src).unwrap().to_str().unwrap().replace('\\', "/"), fs::read_to_string(p).unwrap()))
        .collect();
    let edges = import_graph(&files);
    // The graph is drawn at all: the core's first modules are there.
    let named = |a: &str, b: &str| edges.contains_key(&(a.split("::").map(String::from).collect(), b.split("::").map(String::from).collect()));
    assert!(named("core::graph", "core::kernels") && named("core::plan", "core::graph"), "the import graph misses the core's imports");
    let found = circles(&edges);
    assert!(found.is_empty(), "import circles:\n{}", found.join("\n"));
}

/// The drawing itself, on small crates whose circles are known.
#[test]
fn the_import_graph_finds_circles_and_only_circles() {
    let crate_of = |files: &[(&str, &str)]| -> Vec<(String, String)> { files.iter().map(|(p, t)| (p.to_string(), t.to_string())).collect() };
    // Siblings naming each other: by `use` in one, a `super::` path in the other.
    let two = crate_of(&[
        ("lib.rs", "mod a;\nmod b;\n"),
        ("a/mod.rs", "mod x;\nmod y;\n"),
        ("a/x.rs", "use super::y as other;\nfn f() { other::g() }\n"),
        ("a/y.rs", "// use super::x; a comment\nfn g() -> u8 { super::x::K }\n"),
        ("b.rs", "const S: &str = \"crate::a::x\";\nuse crate::a::{x::K, y};\n"),
    ]);
    let found = circles(&import_graph(&two));
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].starts_with("a::x\n  -> a::y   (src/a/x.rs:1: use super::y as other;)\n  -> a::x   (src/a/y.rs:2:"), "{}", found[0]);
    // Three round, through grouped and nested `use` trees.
    let three = crate_of(&[
        ("lib.rs", "mod p;\nmod q;\nmod r;\n"),
        ("p.rs", "use crate::{q::{self, X}, s};\n"),
        ("q.rs", "use crate::r::Y;\n"),
        ("r.rs", "fn h() { let _ = '}'; crate::p::Z; }\n"),
    ]);
    let found = circles(&import_graph(&three));
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].starts_with("p\n  -> q") && found[0].contains("-> r") && found[0].contains("src/r.rs:1"), "{}", found[0]);
    // No circle: a parent and its children (`pub use`, `super::`), an
    // inline module's `super::`, a string and a comment naming a sibling,
    // and a sibling named in one direction only.
    let none = crate_of(&[
        ("lib.rs", "mod a;\nmod b;\n"),
        ("a/mod.rs", "mod x;\nmod y;\npub use x::X;\nuse y::Y;\nstruct P;\n"),
        ("a/x.rs", "use super::P;\nuse super::y::Y;\nmod tests { use super::X; }\n"),
        ("a/y.rs", "fn s() -> &'static str { \"super::x\" } /* super::x::X */\nuse std::fmt;\n"),
        ("b.rs", "use crate::a::x::X;\n"),
    ]);
    let edges = import_graph(&none);
    assert!(circles(&edges).is_empty(), "{:?}", circles(&edges));
    let drawn: Vec<String> = edges.keys().map(|(a, b)| format!("{} -> {}", a.join("::"), b.join("::"))).collect();
    assert_eq!(drawn, ["a::x -> a::y", "b -> a"]);
}
