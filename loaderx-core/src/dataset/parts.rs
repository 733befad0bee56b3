//! Directories of parts: the name `part-00007` a conversion under a scheduler writes its part to
//! (one per array task, so that tasks never collide), and such a directory listed back in part
//! order with every number from 0 present exactly once.

use std::path::{Path, PathBuf};

use crate::{Error, Result};

/// What every part's name starts with.
pub const PART_PREFIX: &str = "part-";

/// The fewest digits of a part's number.
const MIN_DIGITS: usize = 5;

/// The name of part `index` of `count`: [`PART_PREFIX`] and the index zero-padded to the width of
/// `count - 1`, at least 5 digits (`part-00007`; `part-123456` of 200,000), so that the names of
/// one conversion's parts sort in part order.
///
/// # Examples
/// ```
/// assert_eq!(loaderx_core::convert::part_name(7, 64), "part-00007");
/// assert_eq!(loaderx_core::convert::part_name(3, 200_000), "part-000003");
/// ```
pub fn part_name(index: usize, count: usize) -> String {
    let width = count.saturating_sub(1).to_string().len().max(MIN_DIGITS);
    format!("{PART_PREFIX}{index:0width$}")
}

/// The number in a part's name: [`PART_PREFIX`] and decimal digits only (`part-3`, `part-00003`;
/// not `part-00003.partial`, a conversion still running), `None` for any other name.
fn part_number(name: &str) -> Option<usize> {
    let digits = name.strip_prefix(PART_PREFIX)?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// The parts in `dir`, in numeric order: its entries named `part-` and digits (any other entry
/// is left alone: logs, a part still being written as `part-00003.partial`). Every number from
/// 0 to the highest must be there exactly once; with `count`, the highest is `count - 1`
/// (without it, a missing last part cannot be seen).
///
/// # Errors
/// [`Error::Io`] naming `dir` when it cannot be listed; [`Error::BadInput`] naming `dir` when it
/// holds no part, when a number is missing (naming the missing parts), when one number has two
/// names (`part-3` and `part-00003`, naming both), or when a part is numbered `count` or above.
pub fn part_dirs(dir: impl AsRef<Path>, count: Option<usize>) -> Result<Vec<PathBuf>> {
    let dir = dir.as_ref();
    let mut found: Vec<(usize, String)> = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| Error::io("read directory", dir, e))? {
        let entry = entry.map_err(|e| Error::io("read directory", dir, e))?;
        if let Some(name) = entry.file_name().to_str()
            && let Some(n) = part_number(name)
        {
            found.push((n, name.to_string()));
        }
    }
    found.sort();
    check_numbers(&found, count).map_err(|reason| Error::BadInput {
        path: dir.to_path_buf(),
        reason,
        source: None,
    })?;
    Ok(found.into_iter().map(|(_, name)| dir.join(name)).collect())
}

/// [`part_dirs`] on object storage: the parts under the `s3://` URL `url` (the "directories"
/// directly under it named `part-` and digits), in numeric order, as URLs, every number from 0
/// to the highest (or `count - 1`) there exactly once.
///
/// # Errors
/// As [`part_dirs`], naming `url`; [`Error::Remote`] for a failed listing.
#[cfg(feature = "remote")]
pub fn remote_part_urls(
    url: &str,
    count: Option<usize>,
    options: crate::remote::RemoteOptions,
) -> Result<Vec<String>> {
    let mut found: Vec<(usize, String)> = crate::remote::list_dirs(url, options)?
        .into_iter()
        .filter_map(|name| part_number(&name).map(|n| (n, name)))
        .collect();
    found.sort();
    check_numbers(&found, count).map_err(|reason| Error::BadInput {
        path: url.into(),
        reason,
        source: None,
    })?;
    let base = url.trim_end_matches('/');
    Ok(found.into_iter().map(|(_, name)| format!("{base}/{name}")).collect())
}

/// Why the sorted `(number, name)`s are not the parts `0..count` (or `0..=highest`), each once.
fn check_numbers(found: &[(usize, String)], count: Option<usize>) -> std::result::Result<(), String> {
    let Some(highest) = found.last().map(|(n, _)| *n) else {
        return Err(format!("no parts: no entry is named {PART_PREFIX}<number>"));
    };
    if let Some(c) = count
        && highest >= c
    {
        return Err(format!(
            "{} is numbered {highest}: {c} parts are numbered 0 to {}",
            found[found.len() - 1].1,
            c.saturating_sub(1)
        ));
    }
    let dups: Vec<String> =
        found.windows(2).filter(|w| w[0].0 == w[1].0).map(|w| format!("{} and {}", w[0].1, w[1].1)).collect();
    if !dups.is_empty() {
        return Err(format!("one part under two names: {}", dups.join(", ")));
    }
    let end = count.unwrap_or(highest + 1);
    let mut missing = Vec::new();
    let mut next = found.iter().map(|(n, _)| *n).peekable();
    for n in 0..end {
        if next.peek() == Some(&n) {
            next.next();
        } else {
            missing.push(n);
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    let names: Vec<String> = missing.iter().take(8).map(|&n| part_name(n, end)).collect();
    let more = if missing.len() > 8 { format!(" and {} more", missing.len() - 8) } else { String::new() };
    Err(format!("{} of {end} parts missing: {}{more}", missing.len(), names.join(", ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(names: &[&str]) -> Vec<(usize, String)> {
        let mut v: Vec<(usize, String)> =
            names.iter().map(|n| (part_number(n).unwrap(), (*n).to_string())).collect();
        v.sort();
        v
    }

    #[test]
    fn names_are_padded_to_the_width_of_the_last_part_and_parse_back() {
        assert_eq!(part_name(0, 1), "part-00000");
        assert_eq!(part_name(99_999, 100_000), "part-99999");
        assert_eq!(part_name(7, 100_001), "part-000007");
        for (k, n) in [(0, 1), (63, 64), (123_456, 200_000)] {
            assert_eq!(part_number(&part_name(k, n)), Some(k));
        }
        for other in ["part-", "part-3.partial", "part-x", "parts-1", "part--1", "slurm-12.out"] {
            assert_eq!(part_number(other), None, "{other}");
        }
    }

    #[test]
    fn missing_duplicate_and_surplus_numbers_are_named() {
        assert!(check_numbers(&found(&["part-00000", "part-1", "part-00002"]), Some(3)).is_ok());
        let e = check_numbers(&found(&["part-00000", "part-00001", "part-00003"]), None).unwrap_err();
        assert!(e.contains("1 of 4 parts missing: part-00002"), "{e}");
        let e = check_numbers(&found(&["part-00000", "part-00001"]), Some(4)).unwrap_err();
        assert!(e.contains("2 of 4 parts missing: part-00002, part-00003"), "{e}");
        let e = check_numbers(&found(&["part-00000", "part-3", "part-00003", "part-1", "part-2"]), None)
            .unwrap_err();
        assert!(e.contains("part-00003 and part-3") || e.contains("part-3 and part-00003"), "{e}");
        let e = check_numbers(&found(&["part-00000", "part-00004"]), Some(4)).unwrap_err();
        assert!(e.contains("part-00004 is numbered 4"), "{e}");
        assert!(check_numbers(&[], None).unwrap_err().contains("no parts"));
        let many: Vec<String> = (0..20).map(|k| part_name(k * 2, 40)).collect();
        let refs: Vec<&str> = many.iter().map(String::as_str).collect();
        let e = check_numbers(&found(&refs), None).unwrap_err();
        assert!(e.contains("19 of 39 parts missing") && e.contains("and 11 more"), "{e}");
    }
}
