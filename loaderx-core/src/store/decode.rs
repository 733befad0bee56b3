//! One record from its stored bytes into a gather's destination: its crc32c checked where the
//! codec table says (or the caller asks), then copied or decoded. Every gather (the local
//! variable and fixed-stride ones, a remote store's) goes through [`decode_record`], so the rule
//! of which records are checked lives once, beside the codec facts it reads
//! ([`Codec::checked_on_every_read`]).

use super::codec::{DecodeError, Decoder};
use crate::format::Codec;
use crate::sys::{Destination, Summer};

/// A record as its index entry describes it, with its stored bytes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Stored<'a> {
    /// The bytes as stored (a slice of a chunk's map, or of a response).
    pub(crate) bytes: &'a [u8],
    /// How they are encoded.
    pub(crate) codec: Codec,
    /// The record's length as handed out.
    pub(crate) logical: usize,
    /// The crc32c of `bytes` the index holds (0 in a v1 store, never checked there).
    pub(crate) crc: u32,
}

/// Why a record did not reach its destination.
#[derive(Debug)]
pub(crate) enum RecordError {
    /// The stored bytes sum to this, not to the index's crc32c.
    Checksum(u32),
    /// The stored bytes do not decode to the record.
    Decode(DecodeError),
}

/// Whether `codec`'s stored bytes are summed before they are handed out: when the caller
/// verifies, or whatever it asks when the codec does not check itself.
#[inline(always)]
pub(crate) fn needs_check(codec: Codec, verify: bool) -> bool {
    verify || codec.checked_on_every_read()
}

/// Checks `rec`'s stored bytes against its crc32c when [`needs_check`] says so, without copying
/// them (a record handed out where it lies).
///
/// # Errors
/// [`RecordError::Checksum`] with the sum found.
#[inline(always)]
pub(crate) fn check_record(rec: &Stored<'_>, verify: bool) -> Result<(), RecordError> {
    if needs_check(rec.codec, verify) {
        let got = crc32c::crc32c(rec.bytes);
        if got != rec.crc {
            return Err(RecordError::Checksum(got));
        }
    }
    Ok(())
}

/// Writes record `rec` at `dst`'s cursor: a raw record copied (its sum, when checked, fused with
/// the copy through `summer` when there is one: records of one length reuse its plan), a
/// compressed one checked first as [`check_record`] says and decoded by `decoder` into exactly
/// `rec.logical` bytes. An empty record is checked and writes nothing.
///
/// Nothing is allocated and nothing copied twice: this is the inner loop of every gather.
///
/// # Errors
/// [`RecordError::Checksum`] for stored bytes that fail their sum (the destination then holds
/// no usable data: the gather's contract on error); [`RecordError::Decode`] for a frame that
/// does not decode, or decodes to another length.
///
/// # Panics
/// When the record is longer than `dst`'s remaining bytes (a gather sizes `dst` from the same
/// entries first).
#[inline(always)]
pub(crate) fn decode_record(
    rec: Stored<'_>,
    verify: bool,
    decoder: &mut Decoder<'_>,
    summer: Option<&mut Summer>,
    dst: &mut Destination<'_>,
) -> Result<(), RecordError> {
    if rec.codec == Codec::Raw {
        match summer {
            Some(summer) if verify => {
                let got = dst.copy_crc32c(rec.bytes, summer);
                if got != rec.crc {
                    return Err(RecordError::Checksum(got));
                }
            }
            _ => {
                check_record(&rec, verify)?;
                dst.copy(rec.bytes);
            }
        }
        return Ok(());
    }
    check_record(&rec, verify)?;
    if rec.logical == 0 {
        return Ok(());
    }
    decoder.decode(rec.codec, rec.bytes, dst, rec.logical).map_err(RecordError::Decode)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::fill_slice;

    fn run(rec: Stored<'_>, verify: bool, fused: bool, out: &mut [u8]) -> Result<(), RecordError> {
        let mut summer = Summer::default();
        fill_slice(out, |mut d| {
            let summer = fused.then_some(&mut summer);
            Ok(decode_record(rec, verify, &mut Decoder::new(None), summer, &mut d))
        })
        .unwrap()
    }

    #[test]
    fn a_raw_record_is_checked_only_when_asked_fused_or_not() {
        let bytes = vec![7u8; 4096];
        let crc = crc32c::crc32c(&bytes);
        for fused in [false, true] {
            let good = Stored { bytes: &bytes, codec: Codec::Raw, logical: bytes.len(), crc };
            let mut out = vec![0u8; bytes.len()];
            run(good, true, fused, &mut out).unwrap();
            assert_eq!(out, bytes);
            let bad = Stored { crc: crc ^ 1, ..good };
            assert!(matches!(run(bad, true, fused, &mut out), Err(RecordError::Checksum(c)) if c == crc));
            run(bad, false, fused, &mut out).unwrap();
        }
    }

    #[test]
    fn an_lz4_record_is_checked_on_every_read() {
        let record = b"abcabcabcabcabcabcabcabcabcabcabcabc".repeat(8);
        let bytes = lz4_flex::block::compress(&record);
        let crc = crc32c::crc32c(&bytes);
        let good = Stored { bytes: &bytes, codec: Codec::Lz4, logical: record.len(), crc };
        let mut out = vec![0u8; record.len()];
        run(good, false, false, &mut out).unwrap();
        assert_eq!(out, record);
        let bad = Stored { crc: crc ^ 1, ..good };
        assert!(matches!(run(bad, false, false, &mut out), Err(RecordError::Checksum(c)) if c == crc));
        let short = Stored { logical: record.len() - 1, ..good };
        let mut out = vec![0u8; record.len() - 1];
        assert!(matches!(run(short, false, false, &mut out), Err(RecordError::Decode(_))));
    }
}
