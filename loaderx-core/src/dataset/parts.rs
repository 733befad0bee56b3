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
/// # use loaderx_core as loaderx;
/// assert_eq!(loaderx::convert::part_name(7, 64), "part-00007");
/// assert_eq!(loaderx::convert::part_name(3, 200_000), "part-000003");
/// ```
pub fn part_name(index: usize, count: usize) -> String {
    let width = count.saturating_sub(1).to_string().len().max(MIN_DIGITS);
    format!("{PART_PREFIX}{index:0width$}")
}

/// The number in a part's name: [`PART_PREFIX`] and decimal digits only (`part-3`, `part-00003`;
/// not `part-00003.partial`, a conversion still running); `None` for any other name, `Some(Err)`
/// for a part's name whose number does not fit a `usize` (refused, never skipped).
fn part_number(name: &str) -> Option<std::result::Result<usize, String>> {
    let digits = name.strip_prefix(PART_PREFIX)?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(digits.parse().map_err(|_| format!("{name} is numbered beyond any part count")))
}

/// The `(number, name)` of every part's name in `names`.
fn numbered(names: impl IntoIterator<Item = String>) -> std::result::Result<Vec<(usize, String)>, String> {
    let mut found = Vec::new();
    for name in names {
        if let Some(n) = part_number(&name) {
            found.push((n?, name));
        }
    }
    found.sort();
    Ok(found)
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
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| Error::io("read directory", dir, e))? {
        let entry = entry.map_err(|e| Error::io("read directory", dir, e))?;
        if let Some(name) = entry.file_name().to_str() {
            names.push(name.to_string());
        }
    }
    let found = numbered(names).and_then(|found| check_numbers(&found, count).map(|()| found));
    let found = found.map_err(|reason| Error::BadInput { path: dir.to_path_buf(), reason, source: None })?;
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
    let names = crate::remote::list_dirs(url, options)?;
    let found = numbered(names).and_then(|found| check_numbers(&found, count).map(|()| found));
    let found = found.map_err(|reason| Error::BadInput { path: url.into(), reason, source: None })?;
    let base = url.trim_end_matches('/');
    Ok(found.into_iter().map(|(_, name)| format!("{base}/{name}")).collect())
}

/// Why the sorted `(number, name)`s are not the parts `0..count` (or `0..=highest`), each once.
/// The work is linear in `found`, whatever the numbers (a `part-4294967295` beside `part-0`, or
/// `count` in the billions, counts its gaps and names the first few, never walks them).
fn check_numbers(found: &[(usize, String)], count: Option<usize>) -> std::result::Result<(), String> {
    let Some((highest, last)) = found.last() else {
        return Err(format!("no parts: no entry is named {PART_PREFIX}<number>"));
    };
    if let Some(c) = count
        && *highest >= c
    {
        let expected = match c {
            0 => "no parts are expected".to_string(),
            c => format!("{c} parts are numbered 0 to {}", c - 1),
        };
        return Err(format!("{last} is numbered {highest}: {expected}"));
    }
    let dups: Vec<String> =
        found.windows(2).filter(|w| w[0].0 == w[1].0).map(|w| format!("{} and {}", w[0].1, w[1].1)).collect();
    if !dups.is_empty() {
        return Err(format!("one part under two names: {}", dups.join(", ")));
    }
    // u128: `highest + 1` overflows a usize when a part is named `part-18446744073709551615`.
    let end = count.map_or(*highest as u128 + 1, |c| c as u128);
    // Distinct and all below `end` (both checked above), so the rest of `0..end` is missing.
    let missing = end - found.len() as u128;
    if missing == 0 {
        return Ok(());
    }
    const SHOWN: usize = 8;
    let width = usize::try_from(end).unwrap_or(usize::MAX);
    let mut names = Vec::with_capacity(SHOWN);
    let mut next = 0u128;
    for n in found.iter().map(|(n, _)| *n as u128).chain(std::iter::once(end)) {
        while next < n && names.len() < SHOWN {
            // Below `end`, which is at most `usize::MAX + 1`: the cast is exact.
            names.push(part_name(next as usize, width));
            next += 1;
        }
        if names.len() == SHOWN {
            break;
        }
        next = n + 1;
    }
    let shown = names.len() as u128;
    let more = if missing > shown { format!(" and {} more", missing - shown) } else { String::new() };
    Err(format!("{missing} of {end} parts missing: {}{more}", names.join(", ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(names: &[&str]) -> Vec<(usize, String)> {
        let mut v: Vec<(usize, String)> =
            names.iter().map(|n| (part_number(n).unwrap().unwrap(), (*n).to_string())).collect();
        v.sort();
        v
    }

    #[test]
    fn names_are_padded_to_the_width_of_the_last_part_and_parse_back() {
        assert_eq!(part_name(0, 1), "part-00000");
        assert_eq!(part_name(99_999, 100_000), "part-99999");
        assert_eq!(part_name(7, 100_001), "part-000007");
        for (k, n) in [(0, 1), (63, 64), (123_456, 200_000)] {
            assert_eq!(part_number(&part_name(k, n)), Some(Ok(k)));
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

    #[test]
    fn numbers_far_past_the_listing_are_counted_not_walked() {
        let e = check_numbers(&found(&["part-00000", "part-4294967295"]), None).unwrap_err();
        assert!(e.contains("4294967294 of 4294967296 parts missing: part-0000000001,"), "{e}");
        assert!(e.contains("and 4294967286 more"), "{e}");
        let e = check_numbers(&found(&["part-00000"]), Some(4_294_967_296)).unwrap_err();
        assert!(e.contains("4294967295 of 4294967296 parts missing"), "{e}");
        let top = format!("part-{}", usize::MAX);
        let e = check_numbers(&found(&["part-00000", &top]), None).unwrap_err();
        assert!(
            e.contains(&format!("{} of {} parts missing", usize::MAX - 1, usize::MAX as u128 + 1)),
            "{e}"
        );
        let e = check_numbers(&found(&["part-00003"]), Some(0)).unwrap_err();
        assert!(e.contains("part-00003 is numbered 3: no parts are expected"), "{e}");
        let huge = numbered(["part-00000".to_string(), "part-99999999999999999999999".to_string()]);
        assert!(huge.unwrap_err().contains("part-99999999999999999999999 is numbered beyond any part count"));
        let gaps = check_numbers(&found(&["part-00001", "part-00003", "part-00009"]), None).unwrap_err();
        assert!(
            gaps.contains("7 of 10 parts missing: part-00000, part-00002, part-00004, part-00005"),
            "{gaps}"
        );
        assert!(gaps.contains("part-00008") && !gaps.contains("more"), "{gaps}");
    }
}
