//! The engine behind `mmap_chunker.h`: one mapped file and its current plan.
//!
//! Every plan comes from loaderx-core's `framing` planners; this module only keeps the plan a
//! handle holds and answers its chunks. The texts are mmap-chunker 0.2.6's, byte for byte, so a
//! program that compares them keeps working.

use std::path::Path;

use loaderx_core::framing::{
    MappedFile, PartRange, chunk_boundaries, chunk_boundaries_pattern, fixed_chunk_bounds, fixed_chunk_count,
    partition,
};

/// `mmap_engine_open(NULL)`.
pub(crate) const PATH_NULL: &str = "path is null";
/// A file that cannot be opened or mapped (missing, a directory, unreadable).
pub(crate) const OPEN_FAILED: &str = "failed to open or map file";
/// A null handle.
pub(crate) const HANDLE_NULL: &str = "handle is null";
/// `mmap_engine_get_chunk` without a place to write the view.
pub(crate) const OUT_NULL: &str = "out_chunk is null";
/// `get_chunk`'s `out_chunk` not aligned for a `CChunkView` (not a text of the reference, which
/// does not check alignment).
pub(crate) const OUT_MISALIGNED: &str = "out_chunk is misaligned for a CChunkView";
/// `get_chunk`'s `out_chunk` pointing into the handle itself (a write there would overwrite the
/// handle's plan; not a text of the reference, which does not check this).
pub(crate) const OUT_OVERLAPS_HANDLE: &str =
    "out_chunk overlaps the handle: an output buffer may share no byte with another buffer of the call";
/// An index at or past the plan's chunk count.
pub(crate) const OUT_OF_BOUNDS: &str = "chunk index out of bounds";
/// A pattern scan given a null pattern.
pub(crate) const DELIMITER_NULL: &str = "delimiter is null";
/// A pattern scan given an empty pattern.
pub(crate) const DELIMITER_EMPTY: &str = "delimiter_len must be > 0";
/// A pattern longer than any object can be.
pub(crate) const DELIMITER_TOO_LONG: &str = "delimiter_len exceeds supported range";
/// Partitioning into zero parts.
pub(crate) const PARTS_ZERO: &str = "requested_partitions must be > 0";
/// A plan with more ranges than memory holds (a range per byte: a file of delimiters cut every
/// byte); not a text of the reference, which aborts.
pub(crate) const PLAN_TOO_LARGE: &str =
    "the plan does not fit in memory; ask for larger chunks or fewer partitions";

/// mmap-chunker's capability bits: zero copy, configurable delimiter, error strings, fixed-size
/// chunking, record partitioning, multi-byte delimiter.
pub(crate) const CAPABILITIES: u32 = 0x3F;

/// A plan: explicit ranges, a partition's ranges as planned, or fixed-size chunks computed on
/// demand (no list of size N).
enum Plan {
    Ranges(Vec<(usize, usize)>),
    Parts(Vec<PartRange>),
    Fixed { size: u64, count: usize },
}

/// What a `CEngineHandle` points at.
pub(crate) struct Engine {
    file: MappedFile,
    plan: Plan,
}

impl Engine {
    /// Maps `path`; an empty file opens (its plans are empty).
    pub(crate) fn open(path: &Path) -> Option<Engine> {
        let file = MappedFile::open(path).ok()?;
        Some(Engine { file, plan: Plan::Ranges(Vec::new()) })
    }

    fn count(&self) -> usize {
        match &self.plan {
            Plan::Ranges(ranges) => ranges.len(),
            Plan::Parts(parts) => parts.len(),
            Plan::Fixed { count, .. } => *count,
        }
    }

    /// Delimiter framing: chunks of about `size` bytes, each ending just after a `delimiter`;
    /// a plan larger than memory is refused and keeps the plan.
    pub(crate) fn scan(&mut self, size: usize, delimiter: u8) -> Result<usize, &'static str> {
        let ranges = chunk_boundaries(self.file.bytes(), size, delimiter).map_err(|_| PLAN_TOO_LARGE)?;
        self.plan = Plan::Ranges(ranges);
        Ok(self.count())
    }

    /// Delimiter framing on a byte pattern; an empty pattern or a plan larger than memory is
    /// refused and keeps the plan.
    pub(crate) fn scan_pattern(&mut self, size: usize, pattern: &[u8]) -> Result<usize, &'static str> {
        if pattern.is_empty() {
            return Err(DELIMITER_EMPTY);
        }
        let ranges =
            chunk_boundaries_pattern(self.file.bytes(), size, pattern).map_err(|_| PLAN_TOO_LARGE)?;
        self.plan = Plan::Ranges(ranges);
        Ok(self.count())
    }

    /// Fixed-size chunks of `size` bytes (0 counts as 1), the last one shorter.
    pub(crate) fn scan_fixed(&mut self, size: usize) -> usize {
        let size = size as u64;
        // The count is at most the file's length, which is mapped, so it fits a usize.
        let count = usize::try_from(fixed_chunk_count(self.file.len(), size)).unwrap_or(usize::MAX);
        self.plan = Plan::Fixed { size, count };
        count
    }

    /// N-way record-aligned partitioning. An empty file plans nothing, even for 0 parts; 0 parts
    /// of anything else is refused and keeps the plan.
    pub(crate) fn partition(&mut self, parts: usize, delimiter: u8) -> Result<usize, &'static str> {
        if self.file.is_empty() {
            self.plan = Plan::Ranges(Vec::new());
            return Ok(0);
        }
        if parts == 0 {
            return Err(PARTS_ZERO);
        }
        // A byte delimiter is never refused: the one error is a plan larger than memory.
        let ranges = partition(self.file.bytes(), parts, delimiter).map_err(|_| PLAN_TOO_LARGE)?;
        self.plan = Plan::Parts(ranges);
        Ok(self.count())
    }

    /// The bytes of chunk `index` of the current plan, inside the mapping.
    pub(crate) fn chunk(&self, index: usize) -> Result<&[u8], &'static str> {
        let (start, end) = match &self.plan {
            Plan::Ranges(ranges) => *ranges.get(index).ok_or(OUT_OF_BOUNDS)?,
            Plan::Parts(parts) => parts
                .get(index)
                .and_then(PartRange::to_range)
                .map(|r| (r.start, r.end))
                .ok_or(OUT_OF_BOUNDS)?,
            Plan::Fixed { size, .. } => {
                let (start, end) =
                    fixed_chunk_bounds(self.file.len(), *size, index as u64).ok_or(OUT_OF_BOUNDS)?;
                (start as usize, end as usize)
            }
        };
        self.file.bytes().get(start..end).ok_or(OUT_OF_BOUNDS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn engine(bytes: &[u8]) -> (tempfile::TempDir, Engine) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("input");
        std::fs::write(&path, bytes).unwrap();
        let engine = Engine::open(&path).unwrap();
        (dir, engine)
    }

    #[test]
    fn a_refused_pattern_or_zero_parts_keeps_the_previous_plan() {
        let (_dir, mut e) = engine(b"aa\nbb\ncc\n");
        assert_eq!(e.scan(1, b'\n'), Ok(3));
        assert_eq!(e.scan_pattern(1, b""), Err(DELIMITER_EMPTY));
        assert_eq!(e.partition(0, b'\n'), Err(PARTS_ZERO));
        assert_eq!(e.chunk(2).unwrap(), b"cc\n");
    }

    #[test]
    fn fixed_chunks_cover_the_file() {
        let (_dir, mut e) = engine(b"0123456789");
        assert_eq!(e.scan_fixed(0), 10);
        assert_eq!(e.scan_fixed(4), 3);
        assert_eq!(e.chunk(2).unwrap(), b"89");
        assert_eq!(e.chunk(3), Err(OUT_OF_BOUNDS));
    }

    #[test]
    fn an_empty_file_plans_nothing_without_an_error() {
        let (_dir, mut e) = engine(b"");
        assert_eq!(e.partition(0, b'\n'), Ok(0));
        assert_eq!(e.scan(8, b'\n'), Ok(0));
        assert_eq!(e.scan_fixed(8), 0);
        assert_eq!(e.scan_pattern(8, b"\r\n"), Ok(0));
    }
}
