//! Token files into datasets and back. [`tokens`] writes a token file as a ragged dataset of
//! token records (a Megatron dataset's documents, or a stream cut into records of `chunk`
//! tokens), where a user wants checksums, compression and remote reads; [`megatron`] writes a
//! dataset of token records as a Megatron-LM indexed dataset (one document a record), so
//! Megatron reads ours.

use std::path::Path;

use super::block::BLOCK_BYTES;
use super::summary::ConvertSummary;
use crate::tokens::{MegatronWriter, TokenFile, TokenType};
use crate::{DType, DatasetWriter, Error, RaggedSource, Result, Schema, WriteOptions};

/// Documents a block of the conversion gathers at once (each block bounded by its documents'
/// own sizes: a record is whole in memory when written).
const DOCUMENTS_PER_BLOCK: usize = 1024;

/// The token type of a dataset's dtype, where a token file has one.
fn token_type(dtype: DType) -> Option<TokenType> {
    Some(match dtype {
        DType::U8 => TokenType::U8,
        DType::I8 => TokenType::I8,
        DType::I16 => TokenType::I16,
        DType::U16 => TokenType::U16,
        DType::I32 => TokenType::I32,
        DType::U32 => TokenType::U32,
        DType::I64 => TokenType::I64,
        _ => return None,
    })
}

/// Writes the token file `input` as the ragged dataset `out` (rows of one token, the file's
/// dtype): one record a document for a Megatron dataset, else the tokens in order cut into
/// records of `chunk` tokens (the last one shorter), so no token is lost.
///
/// # Errors
/// [`Error::InvalidArgument`] for a `chunk` of 0; as [`TokenFile::documents_source`] for a
/// lying index; [`Error::BadInput`] for a token outside the vocabulary (when one is set) or
/// negative; the writer's errors ([`Error::AlreadyExists`] without overwrite).
pub fn tokens(
    input: &TokenFile,
    out: impl AsRef<Path>,
    chunk: usize,
    opts: WriteOptions,
) -> Result<ConvertSummary> {
    if chunk == 0 {
        return Err(Error::InvalidArgument("records of 0 tokens".into()));
    }
    let dtype = crate::tokens::dtype_of(input.token_type());
    let size = input.token_type().size();
    let mut w = DatasetWriter::with_schema(out.as_ref(), Schema::ragged(dtype, Vec::new()), opts.clone())?;
    let mut bytes_in = 0u64;
    if input.documents().is_some() {
        let docs = input.documents_source()?;
        let n = docs.len();
        // What the documents may hold: the .bin's tokens. An index whose sequences overlap
        // would list the same tokens again and again (review M2); refused before more is read.
        let budget = input.len();
        let mut done = 0usize;
        let mut tokens = 0u64;
        while done < n {
            // Up to DOCUMENTS_PER_BLOCK documents' lengths read once, then gathered in blocks of
            // about BLOCK_BYTES of tokens (at least one document, whole).
            let ahead: Vec<u32> = (done as u32..(done + DOCUMENTS_PER_BLOCK.min(n - done)) as u32).collect();
            let rows = docs.record_rows(&ahead)?;
            let mut from = 0usize;
            while from < ahead.len() {
                let (mut k, mut block_tokens) = (from, 0u64);
                while k < rows.len()
                    && (k == from || (block_tokens + rows[k]) * size as u64 <= BLOCK_BYTES as u64)
                {
                    block_tokens += rows[k];
                    k += 1;
                }
                tokens += block_tokens;
                if tokens > budget {
                    return Err(Error::BadInput {
                        path: input.path().to_path_buf(),
                        reason: format!(
                            "its documents hold more than the .bin's {budget} tokens: the index's sequences overlap"
                        ),
                        source: None,
                    });
                }
                let batch = docs.get_batch(&ahead[from..k])?;
                let (offsets, values) = (batch.offsets(), batch.values().as_bytes());
                // What `verify` refuses is not certified in a new dataset (look 182, L182-2).
                input.check_ids(values, tokens - block_tokens)?;
                let records: Vec<&[u8]> =
                    offsets.windows(2).map(|o| &values[o[0] * size..o[1] * size]).collect();
                w.append_bytes(&records)?;
                bytes_in += values.len() as u64;
                opts.report(bytes_in);
                from = k;
            }
            done += ahead.len();
        }
    } else {
        let record = chunk.checked_mul(size).filter(|&b| u32::try_from(b).is_ok()).ok_or_else(|| {
            Error::InvalidArgument(format!("records of {chunk} tokens: a record holds under 4 GiB"))
        })?;
        let all = input.token_bytes(0, input.len()).expect("the file's own tokens");
        // Whole records a block, about BLOCK_BYTES (at least one).
        let per_block = (BLOCK_BYTES / record).max(1) * record;
        for block in all.chunks(per_block) {
            input.check_ids(block, bytes_in / size as u64)?;
            let records: Vec<&[u8]> = block.chunks(record).collect();
            w.append_bytes(&records)?;
            bytes_in += block.len() as u64;
            opts.report(bytes_in);
        }
    }
    super::summary::finish(w, bytes_in)
}

/// Writes the dataset `dataset` (ragged rows of one integer, or dense records of integers) as
/// the Megatron-LM indexed dataset `prefix.bin` + `prefix.idx`, one document (of one sequence)
/// a record. Returns the tokens written.
///
/// # Errors
/// [`Error::Schema`] for a dataset that is not of integer tokens (rows of more than one value,
/// floats, `u32`/`u64`, which Megatron has no code for); [`Error::AlreadyExists`] without
/// `overwrite`; the dataset's read errors; [`Error::Io`].
pub fn megatron(dataset: impl AsRef<Path>, prefix: impl AsRef<Path>, overwrite: bool) -> Result<u64> {
    let dataset = dataset.as_ref();
    let schema = Schema::read(dataset)?;
    let token = token_type(schema.dtype).filter(|t| t.megatron_code().is_some());
    let flat = match schema.kind {
        crate::Kind::Ragged => schema.shape.iter().product::<usize>() == 1,
        crate::Kind::Dense => true,
        crate::Kind::Image => false,
    };
    let Some(token) = token.filter(|_| flat) else {
        return Err(Error::Schema {
            path: dataset.to_path_buf(),
            reason: format!(
                "{} {} records of shape {:?} are not Megatron tokens (rows of one integer of a type Megatron has a code for: u8, i8, i16, u16, i32, i64)",
                schema.kind, schema.dtype, schema.shape
            ),
        });
    };
    let mut w = MegatronWriter::create(prefix, token, overwrite)?;
    match schema.kind {
        crate::Kind::Ragged | crate::Kind::Image => {
            let src = RaggedSource::open(dataset)?;
            let n = src.len();
            let mut done = 0usize;
            while done < n {
                // Up to DOCUMENTS_PER_BLOCK records' lengths read once, then gathered in blocks
                // of about BLOCK_BYTES of tokens (at least one record, whole; review N5).
                let ahead: Vec<u32> =
                    (done as u32..(done + DOCUMENTS_PER_BLOCK.min(n - done)) as u32).collect();
                let rows = src.record_rows(&ahead)?;
                let mut from = 0usize;
                while from < ahead.len() {
                    let (mut k, mut bytes) = (from, 0u64);
                    while k < rows.len()
                        && (k == from || bytes + rows[k] * token.size() as u64 <= BLOCK_BYTES as u64)
                    {
                        bytes += rows[k] * token.size() as u64;
                        k += 1;
                    }
                    let batch = src.get_batch(&ahead[from..k])?;
                    let (offsets, values) = (batch.offsets(), batch.values().as_bytes());
                    for o in offsets.windows(2) {
                        w.add_document_le(&values[o[0] * token.size()..o[1] * token.size()])?;
                    }
                    from = k;
                }
                done += ahead.len();
            }
        }
        crate::Kind::Dense => {
            let src = crate::DenseSource::open(dataset)?;
            let item = src.schema().unit_bytes();
            let n = src.len();
            // Whole records a block, about BLOCK_BYTES (at least one).
            let per_block = (BLOCK_BYTES / item.max(1)).clamp(1, DOCUMENTS_PER_BLOCK);
            let mut done = 0usize;
            while done < n {
                let k = per_block.min(n - done);
                let indices: Vec<u32> = (done as u32..(done + k) as u32).collect();
                let batch = src.get_batch(&indices)?;
                let bytes = batch.as_bytes();
                // A document a record, by the count (records of no bytes are empty documents).
                for r in 0..k {
                    w.add_document_le(&bytes[r * item..(r + 1) * item])?;
                }
                done += k;
            }
        }
    }
    w.finish()
}
