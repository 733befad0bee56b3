//! ARCHITECTURE.md's layering rule, checked against the code: every `crate::` path in each of
//! loaderx-core's modules (through `use crate::{...}` groups and the root's re-exports) names only
//! modules the rule lets it use, and no two modules use each other. A change that adds an edge
//! the rule does not allow fails here, and the rule (this table and ARCHITECTURE.md) changes with
//! it, or the code does.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The rule: each module of `loaderx-core/src` and the modules it may use (besides `error`, which
/// every module may use, and itself). Read with ARCHITECTURE.md's "The rooms of loaderx-core".
const RULE: &[(&str, &[&str])] = &[
    ("error", &[]),
    ("format", &[]),
    ("sys", &["format"]),
    ("store", &["format", "sys"]),
    ("remote", &["store", "format", "sys"]),
    ("framing", &["sys"]),
    ("sampler", &["sys"]),
    ("kernels", &["sys"]),
    ("dataset", &["store", "remote", "sampler", "format", "sys"]),
    ("tokens", &["dataset", "sampler", "store", "format", "sys"]),
    ("vision", &["sampler", "dataset", "sys"]),
    ("convert", &["dataset", "framing", "store", "tokens", "format", "sys", "vision"]),
    ("loader", &["dataset", "sampler", "store", "remote", "format", "vision"]),
];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every `.rs` file under `dir`.
fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The code of a file without its comment lines (doc comments name modules in prose).
fn code(path: &Path) -> String {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The first segment of each path a `use` tree names: `{a::b, C, d::{e, f}}` gives a, C, d.
fn first_segments(tree: &str, out: &mut Vec<String>) {
    let tree = tree.trim();
    if let Some(inner) = tree.strip_prefix('{').and_then(|t| t.strip_suffix('}')) {
        let mut depth = 0;
        let mut start = 0;
        for (i, c) in inner.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    first_segments(&inner[start..i], out);
                    start = i + 1;
                }
                _ => {}
            }
        }
        first_segments(&inner[start..], out);
        return;
    }
    let head: String = tree.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
    if !head.is_empty() && head != "self" {
        out.push(head);
    }
}

/// The names `crate::` paths in `code` start with.
fn crate_names(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        let after = &rest[at + "crate::".len()..];
        if after.starts_with('{') {
            let end = after.find(';').unwrap_or(after.len());
            let tree = &after[..end];
            // A `use` tree ends at its matching brace.
            let close = tree.rfind('}').map_or(tree.len(), |i| i + 1);
            first_segments(&tree[..close], &mut out);
        } else {
            first_segments(after, &mut out);
        }
        rest = after;
    }
    out
}

/// The module each name the crate root re-exports comes from (`pub use dataset::{A, B}` maps A and
/// B to `dataset`), plus the root's own inline modules.
fn root_names(lib: &str) -> BTreeMap<String, String> {
    let mut map = BTreeMap::new();
    for stmt in lib.split(';') {
        // `pub use` and the root's crate-private short paths (`pub(crate) use`).
        let Some(path) = ["pub use ", "pub(crate) use "]
            .iter()
            .find_map(|p| stmt.find(p).map(|at| stmt[at + p.len()..].trim()))
        else {
            continue;
        };
        if path.starts_with("crate::") {
            continue;
        }
        let module: String = path.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
        let names = path.rsplit("::").next().unwrap_or("");
        let names = names.trim().trim_start_matches('{').trim_end_matches('}');
        for name in names.split(',') {
            // `a as b` is known by b.
            let name = name.split(" as ").last().unwrap_or("").trim();
            if !name.is_empty() {
                map.insert(name.to_string(), module.clone());
            }
        }
    }
    // The root's inline modules and type: `export` re-exports the converters' export, `staging`
    // and `adapter` the loader's.
    map.insert("export".into(), "convert".into());
    map.insert("staging".into(), "loader".into());
    map.insert("adapter".into(), "loader".into());
    map.insert("prelude".into(), "lib".into());
    map
}

#[test]
fn every_module_uses_only_what_the_layering_rule_allows_and_there_is_no_cycle() {
    let lib = code(&src().join("lib.rs"));
    let roots = root_names(&lib);
    let rule: BTreeMap<&str, BTreeSet<&str>> =
        RULE.iter().map(|(m, deps)| (*m, deps.iter().copied().collect())).collect();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut unplaced = Vec::new();
    let mut unknown = BTreeSet::new();
    for entry in std::fs::read_dir(src()).unwrap() {
        let p = entry.unwrap().path();
        let module = p.file_stem().unwrap().to_string_lossy().into_owned();
        if module == "lib" {
            continue;
        }
        if !rule.contains_key(module.as_str()) {
            unplaced.push(module.clone());
            continue;
        }
        let mut paths = Vec::new();
        if p.is_dir() {
            files(&p, &mut paths)
        } else {
            paths.push(p.clone())
        }
        for f in paths {
            for name in crate_names(&code(&f)) {
                let target = if rule.contains_key(name.as_str()) {
                    name.clone()
                } else if let Some(m) = roots.get(&name) {
                    m.clone()
                } else {
                    unknown.insert(format!("{name} (in {})", f.display()));
                    continue;
                };
                if target != module {
                    edges.entry(module.clone()).or_default().insert(target);
                }
            }
        }
    }
    assert!(unplaced.is_empty(), "modules the rule does not place: {unplaced:?}");
    assert!(unknown.is_empty(), "crate:: names that resolve to no module: {unknown:?}");
    let mut broken = Vec::new();
    for (from, tos) in &edges {
        for to in tos {
            if to != "error" && !rule[from.as_str()].contains(to.as_str()) {
                broken.push(format!("{from} -> {to}"));
            }
        }
    }
    assert!(broken.is_empty(), "uses the layering rule does not allow: {broken:?}\nall uses: {edges:?}");
    // The rule itself has no cycle (so neither has the code it admits): every module's uses are
    // placed before it in RULE.
    for (i, (m, deps)) in RULE.iter().enumerate() {
        for d in deps.iter() {
            let j = RULE.iter().position(|(n, _)| n == d).unwrap_or(usize::MAX);
            assert!(j < i, "the rule lets {m} use {d}, which is not below it");
        }
    }
    // And the rule is not looser than it needs to be by accident: every module is used by the
    // code as the rule says at least once (a stale allowance is removed from the rule).
    for (m, deps) in RULE {
        for d in deps.iter() {
            assert!(
                edges.get(*m).is_some_and(|t| t.contains(*d)),
                "the rule lets {m} use {d}, but nothing in {m} does: tighten the rule\nall uses: {edges:?}"
            );
        }
    }
}

#[test]
fn the_use_tree_parser_finds_first_segments() {
    let mut out = Vec::new();
    first_segments("{a::b, C, d::{e, f::g}, self}", &mut out);
    assert_eq!(out, ["a", "C", "d"]);
    assert_eq!(crate_names("use crate::{x::Y, Z};\nlet v = crate::w::f();"), ["x", "Z", "w"]);
}
