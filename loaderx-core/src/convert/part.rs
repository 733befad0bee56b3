//! [`Part`]: which of the parts of a conversion cut into many this process converts, given or
//! read from a scheduler's environment (a Slurm job array, a Kubernetes indexed job).

use std::ops::Range;

use crate::{Error, Result};

/// Part `index` of a conversion cut into `count` parts: which one this process converts.
///
/// Every converter takes one (`npy_part`, `jsonl_part`, ...). The parts, in order, hold exactly
/// the records of the whole conversion: a converter of rows (`npy`, `safetensors`, `idx`) gives
/// part `k` the rows [`Part::rows`] of `n`, `dir` and `images` the same range of their files in
/// name order, `parquet` whole row groups, each to the part whose row range holds the group's
/// first row, and `jsonl` the record-aligned byte ranges of the framing planner.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Part {
    /// Zero-based part to convert, below `count`.
    pub index: usize,
    /// How many parts the input is cut into.
    pub count: usize,
}

impl Part {
    /// The whole conversion: part 0 of 1.
    pub const WHOLE: Part = Part { index: 0, count: 1 };

    /// Part `index` of `count`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `count` is 0 or `index` is not below it.
    pub fn new(index: usize, count: usize) -> Result<Part> {
        if count == 0 || index >= count {
            return Err(Error::InvalidArgument(format!(
                "part {index} of {count} is out of range: a part index is below the number of parts"
            )));
        }
        Ok(Part { index, count })
    }

    /// This part checked (its fields are public, so it may have been built out of range).
    ///
    /// # Errors
    /// As [`Part::new`].
    pub(crate) fn checked(self) -> Result<Part> {
        Part::new(self.index, self.count)
    }

    /// The rows of `n` this part holds: `[index * n / count, (index + 1) * n / count)`. The
    /// parts' ranges are adjacent and cover `0..n`; their lengths differ by at most one (a part
    /// of fewer rows than parts may hold none).
    ///
    /// # Examples
    /// ```
    /// # use loaderx_core as loaderx;
    /// use loaderx::convert::Part;
    /// assert_eq!(Part::new(1, 3)?.rows(10), 3..6);
    /// assert_eq!(Part::new(0, 4)?.rows(2), 0..0);
    /// # Ok::<(), loaderx::Error>(())
    /// ```
    pub fn rows(self, n: u64) -> Range<u64> {
        let at = |k: usize| (k as u128 * u128::from(n) / self.count.max(1) as u128) as u64;
        at(self.index)..at(self.index + 1)
    }

    /// The name of this part in a directory of parts: `part-00007` ([`part_name`](super::part_name)).
    pub fn name(self) -> String {
        crate::dataset::part_name(self.index, self.count)
    }

    /// Reads the part from the process environment; see [`Part::from_lookup`].
    ///
    /// # Errors
    /// As [`Part::from_lookup`].
    pub fn from_env(parts: Option<usize>) -> Result<Part> {
        Part::from_lookup(|k| std::env::var(k).ok(), parts)
    }

    /// Reads the part through `get` (a variable's value): the first set of
    /// - `LOADERX_PART`, of `LOADERX_PARTS` parts;
    /// - a Slurm job array's `SLURM_ARRAY_TASK_ID` minus `SLURM_ARRAY_TASK_MIN` (0 when unset),
    ///   of `SLURM_ARRAY_TASK_COUNT` parts;
    /// - a Kubernetes indexed job's `JOB_COMPLETION_INDEX`, of `parts` parts (Kubernetes sets
    ///   no count).
    ///
    /// `parts` (the CLI's `--parts`) stands in for a count variable that is unset, and must
    /// agree with one that is set. A variable set to an empty string counts as unset.
    ///
    /// # Errors
    /// [`Error::Config`] naming the variable (or `--parts`) when a value is not a non-negative
    /// integer, when no count is known, when the count is 0 or disagrees with `parts`, when the
    /// part is not below the count (a Slurm array with a step, `--array=0-63:2`, numbers its tasks
    /// past their count) or a task id is below the array's minimum, and naming
    /// `--part-from-env` when none of the part variables is set.
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>, parts: Option<usize>) -> Result<Part> {
        let num = |k: &'static str| -> Result<Option<usize>> {
            match get(k) {
                Some(v) if !v.trim().is_empty() => v.trim().parse::<usize>().map(Some).map_err(|_| {
                    Error::Config { what: k, reason: format!("{v:?} is not a non-negative integer") }
                }),
                _ => Ok(None),
            }
        };
        let (var, index, count) = if let Some(i) = num("LOADERX_PART")? {
            ("LOADERX_PART", i, count_of("LOADERX_PARTS", num("LOADERX_PARTS")?, parts)?)
        } else if let Some(id) = num("SLURM_ARRAY_TASK_ID")? {
            let min = num("SLURM_ARRAY_TASK_MIN")?.unwrap_or(0);
            let index = id.checked_sub(min).ok_or_else(|| Error::Config {
                what: "SLURM_ARRAY_TASK_ID",
                reason: format!("{id} is below SLURM_ARRAY_TASK_MIN={min}"),
            })?;
            let count = count_of("SLURM_ARRAY_TASK_COUNT", num("SLURM_ARRAY_TASK_COUNT")?, parts)?;
            ("SLURM_ARRAY_TASK_ID", index, count)
        } else if let Some(i) = num("JOB_COMPLETION_INDEX")? {
            let count = parts.filter(|&n| n > 0).ok_or_else(|| Error::Config {
                what: "--parts",
                reason: format!(
                    "JOB_COMPLETION_INDEX={i} is set but a Kubernetes indexed job says no count: pass \
                     --parts N (the job's completions, at least 1)"
                ),
            })?;
            ("JOB_COMPLETION_INDEX", i, count)
        } else {
            return Err(Error::Config {
                what: "--part-from-env",
                reason: "none of LOADERX_PART, SLURM_ARRAY_TASK_ID and JOB_COMPLETION_INDEX is set".into(),
            });
        };
        if index >= count {
            let min = if var == "SLURM_ARRAY_TASK_ID" { " (less SLURM_ARRAY_TASK_MIN)" } else { "" };
            return Err(Error::Config {
                what: var,
                reason: format!("part {index}{min} is not below the {count} parts"),
            });
        }
        Ok(Part { index, count })
    }
}

/// The count of parts from the variable `var` (its value `env`) and `--parts`.
fn count_of(var: &'static str, env: Option<usize>, parts: Option<usize>) -> Result<usize> {
    let count = match (env, parts) {
        (Some(c), Some(p)) if c != p => {
            return Err(Error::Config { what: var, reason: format!("{c} parts, but --parts {p}") });
        }
        (Some(c), _) | (None, Some(c)) => c,
        (None, None) => {
            return Err(Error::Config { what: var, reason: "not set, and no --parts N was given".into() });
        }
    };
    if count == 0 {
        return Err(Error::Config { what: var, reason: "0 parts: a conversion has at least one".into() });
    }
    Ok(count)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup(vars: &[(&str, &str)], parts: Option<usize>) -> Result<Part> {
        let vars: Vec<(String, String)> = vars.iter().map(|(k, v)| ((*k).into(), (*v).into())).collect();
        Part::from_lookup(|k| vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()), parts)
    }

    fn refused(vars: &[(&str, &str)], parts: Option<usize>) -> (&'static str, String) {
        match lookup(vars, parts) {
            Err(Error::Config { what, reason }) => (what, reason),
            other => panic!("{vars:?} {parts:?}: {other:?}"),
        }
    }

    #[test]
    fn rows_of_the_parts_are_adjacent_and_cover_every_row() {
        for n in [0u64, 1, 2, 7, 64, 1000, u64::MAX] {
            for count in [1usize, 2, 3, 7, 64] {
                let mut next = 0u64;
                for k in 0..count {
                    let r = Part::new(k, count).unwrap().rows(n);
                    assert_eq!(r.start, next, "{n} rows, part {k} of {count}");
                    assert!(r.end - r.start <= n.div_ceil(count as u64));
                    next = r.end;
                }
                assert_eq!(next, n);
            }
        }
        assert_eq!(Part::WHOLE.rows(5), 0..5);
        assert_eq!(Part::new(7, 64).unwrap().name(), "part-00007");
    }

    #[test]
    fn each_scheduler_gives_its_part() {
        let p = |i, n| Part::new(i, n).unwrap();
        assert_eq!(lookup(&[("LOADERX_PART", "3"), ("LOADERX_PARTS", "8")], None).unwrap(), p(3, 8));
        assert_eq!(lookup(&[("LOADERX_PART", "3")], Some(8)).unwrap(), p(3, 8));
        let slurm = [("SLURM_ARRAY_TASK_ID", "12"), ("SLURM_ARRAY_TASK_COUNT", "64")];
        assert_eq!(lookup(&slurm, None).unwrap(), p(12, 64));
        let offset =
            [("SLURM_ARRAY_TASK_ID", "12"), ("SLURM_ARRAY_TASK_MIN", "10"), ("SLURM_ARRAY_TASK_COUNT", "4")];
        assert_eq!(lookup(&offset, None).unwrap(), p(2, 4));
        assert_eq!(lookup(&[("JOB_COMPLETION_INDEX", "0")], Some(1)).unwrap(), p(0, 1));
        // LOADERX_* comes first, then Slurm, then Kubernetes.
        let all = [
            ("LOADERX_PART", "1"),
            ("LOADERX_PARTS", "2"),
            ("SLURM_ARRAY_TASK_ID", "5"),
            ("JOB_COMPLETION_INDEX", "9"),
        ];
        assert_eq!(lookup(&all, None).unwrap(), p(1, 2));
        assert_eq!(
            lookup(&[("SLURM_ARRAY_TASK_ID", "5"), ("JOB_COMPLETION_INDEX", "1")], Some(6)).unwrap(),
            p(5, 6)
        );
        assert_eq!(lookup(&[("LOADERX_PART", ""), ("JOB_COMPLETION_INDEX", "1")], Some(2)).unwrap(), p(1, 2));
    }

    #[test]
    fn bad_values_are_config_errors_naming_the_variable() {
        let (what, why) = refused(&[("SLURM_ARRAY_TASK_ID", "seven"), ("SLURM_ARRAY_TASK_COUNT", "8")], None);
        assert_eq!(what, "SLURM_ARRAY_TASK_ID");
        assert!(why.contains("\"seven\" is not a non-negative integer"), "{why}");
        assert_eq!(
            refused(&[("SLURM_ARRAY_TASK_ID", "1"), ("SLURM_ARRAY_TASK_COUNT", "-2")], None).0,
            "SLURM_ARRAY_TASK_COUNT"
        );
        let (what, why) = refused(&[("SLURM_ARRAY_TASK_ID", "8"), ("SLURM_ARRAY_TASK_COUNT", "8")], None);
        assert_eq!(what, "SLURM_ARRAY_TASK_ID");
        assert!(why.contains("part 8 (less SLURM_ARRAY_TASK_MIN) is not below the 8 parts"), "{why}");
        let (what, why) = refused(&[("SLURM_ARRAY_TASK_ID", "3"), ("SLURM_ARRAY_TASK_MIN", "4")], Some(2));
        assert_eq!(what, "SLURM_ARRAY_TASK_ID");
        assert!(why.contains("below SLURM_ARRAY_TASK_MIN=4"), "{why}");
        let (what, why) = refused(&[("SLURM_ARRAY_TASK_ID", "3")], None);
        assert_eq!(what, "SLURM_ARRAY_TASK_COUNT");
        assert!(why.contains("not set"), "{why}");
        let (what, why) = refused(&[("LOADERX_PART", "1"), ("LOADERX_PARTS", "4")], Some(5));
        assert_eq!(what, "LOADERX_PARTS");
        assert!(why.contains("4 parts, but --parts 5"), "{why}");
        assert_eq!(refused(&[("LOADERX_PART", "0"), ("LOADERX_PARTS", "0")], None).0, "LOADERX_PARTS");
        assert_eq!(refused(&[("LOADERX_PART", "4")], Some(4)).0, "LOADERX_PART");
        let (what, why) = refused(&[("JOB_COMPLETION_INDEX", "2")], None);
        assert_eq!(what, "--parts");
        assert!(why.contains("JOB_COMPLETION_INDEX=2"), "{why}");
        assert_eq!(refused(&[("JOB_COMPLETION_INDEX", "2")], Some(2)).0, "JOB_COMPLETION_INDEX");
        assert_eq!(refused(&[("JOB_COMPLETION_INDEX", "x")], Some(2)).0, "JOB_COMPLETION_INDEX");
        let (what, why) = refused(&[], Some(3));
        assert_eq!(what, "--part-from-env");
        assert!(
            why.contains("LOADERX_PART")
                && why.contains("SLURM_ARRAY_TASK_ID")
                && why.contains("JOB_COMPLETION_INDEX")
        );
    }
}
