//! The CLI commands README and the user guide show in their shell and YAML blocks: each names a
//! subcommand this binary has (a converter too) and only options its help lists. The blocks
//! themselves cannot run here (they name a cluster, a bucket, files of the reader's), so what
//! is checked is what a reader copying them would meet first: "unrecognized subcommand" or
//! "unexpected argument".

use std::path::{Path, PathBuf};
use std::process::Command;

/// Every `loaderx ...` command of a `sh`, `bash` or `yaml` block of README.md and the guide:
/// (file, tokens after `loaderx`), comments and quotes stripped.
fn commands() -> Vec<(PathBuf, Vec<String>)> {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf();
    let mut pages = vec![repo.join("README.md")];
    let mut guide: Vec<PathBuf> = std::fs::read_dir(repo.join("docs/guide/src"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    guide.sort();
    pages.extend(guide);
    let mut found = Vec::new();
    for page in pages {
        let text = std::fs::read_to_string(&page).unwrap();
        let mut in_block = false;
        for line in text.lines() {
            let fence = line.trim_start();
            if let Some(lang) = fence.strip_prefix("```") {
                in_block = !in_block && ["sh", "bash", "yaml"].contains(&lang.trim());
                continue;
            }
            if !in_block {
                continue;
            }
            // Each command of the line (`a; b && c`), from `loaderx ` to a comment, a closing
            // quote or its end.
            let line = line.split(" #").next().unwrap();
            for part in line.split(';').flat_map(|p| p.split("&&")).flat_map(|p| p.split('|')) {
                let Some(at) = part
                    .find("loaderx ")
                    .filter(|&i| i == 0 || !part.as_bytes()[i - 1].is_ascii_alphanumeric())
                else {
                    continue;
                };
                let rest = part[at + "loaderx ".len()..].split('"').next().unwrap();
                let tokens: Vec<String> = rest.split_whitespace().map(str::to_owned).collect();
                if !tokens.is_empty() {
                    found.push((page.clone(), tokens));
                }
            }
        }
    }
    found
}

/// Whether this build has the subcommand `sub` (some come with features).
fn built(sub: &[String]) -> bool {
    let gated = |feature_on: bool, name: &str, converter: Option<&str>| {
        sub[0] == name && converter.is_none_or(|c| sub.get(1).is_some_and(|s| s == c)) && !feature_on
    };
    !(gated(cfg!(feature = "remote"), "push", None)
        || gated(cfg!(feature = "parquet"), "convert", Some("parquet"))
        || gated(cfg!(feature = "images"), "convert", Some("images")))
}

#[test]
fn the_guides_cli_commands_name_subcommands_and_options_that_exist() {
    let found = commands();
    assert!(found.len() >= 10, "the guide lost its CLI examples: {found:?}");
    let mut checked = 0;
    for (page, tokens) in found {
        let depth = if tokens[0] == "convert" { 2 } else { 1 };
        let sub: Vec<String> = tokens.iter().take(depth).cloned().collect();
        if !built(&sub) {
            continue;
        }
        let out = Command::new(env!("CARGO_BIN_EXE_loaderx")).args(&sub).arg("--help").output().unwrap();
        let help = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{}: `loaderx {}`: {}",
            page.display(),
            sub.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
        for option in tokens.iter().skip(depth).filter(|t| t.starts_with("--")) {
            let name = option.split('=').next().unwrap();
            assert!(
                help.contains(&format!("{name} "))
                    || help.contains(&format!("{name}\n"))
                    || help.contains(&format!("{name},")),
                "{}: `loaderx {}` has no option {name}",
                page.display(),
                tokens.join(" ")
            );
        }
        checked += 1;
    }
    assert!(checked >= 5, "only {checked} commands checked");
}
