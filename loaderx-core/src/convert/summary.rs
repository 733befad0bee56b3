//! What a conversion did: [`ConvertSummary`].

use crate::{DatasetWriter, Result, Store};

/// What a converter wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ConvertSummary {
    /// Records written.
    pub records: u64,
    /// Input bytes converted (the record payload; headers excluded, decompressed for `.gz`).
    pub bytes_in: u64,
    /// Bytes the dataset takes in its chunk files and dictionary.
    pub bytes_on_disk: u64,
}

impl ConvertSummary {
    /// `bytes_in / bytes_on_disk` (1.0 for an empty dataset).
    pub fn ratio(&self) -> f64 {
        if self.bytes_on_disk == 0 { 1.0 } else { self.bytes_in as f64 / self.bytes_on_disk as f64 }
    }
}

/// Finishes `writer` and measures the result at its directory (as the writer resolved it).
pub(crate) fn finish(writer: DatasetWriter, bytes_in: u64) -> Result<ConvertSummary> {
    let out = writer.out().to_path_buf();
    let records = writer.finish()?;
    let (chunk_bytes, dict_bytes) = Store::open(&out)?.footprint()?;
    Ok(ConvertSummary { records, bytes_in, bytes_on_disk: chunk_bytes + dict_bytes })
}
