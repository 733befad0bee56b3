//! Per-record compression: plain zstd (level 3), zstd against a trained dictionary (level 19),
//! and (v2 stores) LZ4.
//!
//! Every zstd frame carries its content size and a checksum, so a damaged frame is caught before
//! its bytes are handed out; an LZ4 block has neither, so its length is checked after decoding
//! and v2 checks its stored bytes' crc32c on every verified read. A record that does not shrink is
//! stored raw.

use std::sync::Arc;

use zstd::bulk::{Compressor, Decompressor};
use zstd::dict::{DecoderDictionary, EncoderDictionary};
use zstd::zstd_safe::CParameter;

use crate::format::{Codec, MAX_RECORD_SIZE};
use crate::sys::Destination;

/// Level of plain zstd records.
pub(crate) const ZSTD_LEVEL: i32 = 3;
/// Level of dictionary records.
pub(crate) const ZSTD_DICT_LEVEL: i32 = 19;
/// Default upper bound of a trained dictionary (zstd's own default).
pub(crate) const DEFAULT_DICT_CAP: usize = 112_640;

/// A trained dictionary, prepared once for both directions and shared by every thread.
pub(crate) struct Dictionary {
    pub(crate) raw: Vec<u8>,
    pub(crate) encoder: EncoderDictionary<'static>,
    pub(crate) decoder: DecoderDictionary<'static>,
}

impl Dictionary {
    /// Prepares `raw` for both directions.
    ///
    /// # Errors
    /// Why zstd refused it (damaged entropy tables, a truncated file): `dict.zr` is read from
    /// disk or a server, and the zstd crate's own constructors panic on such input, so it is
    /// first loaded with the fallible ones.
    pub(crate) fn new(raw: Vec<u8>) -> Result<Arc<Dictionary>, String> {
        if zstd::zstd_safe::CDict::try_create(&raw, ZSTD_DICT_LEVEL).is_none() {
            return Err(
                "zstd cannot load it as a compression dictionary (damaged or truncated tables)".into()
            );
        }
        if zstd::zstd_safe::DDict::try_create(&raw).is_none() {
            return Err(
                "zstd cannot load it as a decompression dictionary (damaged or truncated tables)".into()
            );
        }
        let encoder = EncoderDictionary::copy(&raw, ZSTD_DICT_LEVEL);
        let decoder = DecoderDictionary::copy(&raw);
        Ok(Arc::new(Dictionary { raw, encoder, decoder }))
    }
}

/// Trains a dictionary on `samples`, sized to the data: about a twentieth of the sample bytes,
/// between 4 KiB and `cap` (default 110 KiB). `None` when there is too little data to train on.
/// The dictionary id a zstd frame names in its header (0 for none, or not a frame).
pub(crate) fn frame_dict_id(frame: &[u8]) -> u32 {
    zstd::zstd_safe::get_dict_id_from_frame(frame).map_or(0, std::num::NonZeroU32::get)
}

pub(crate) fn train(samples: &[&[u8]], cap: Option<usize>) -> Option<Vec<u8>> {
    let total: usize = samples.iter().map(|s| s.len()).sum();
    let cap = cap.unwrap_or(DEFAULT_DICT_CAP).clamp(256, crate::format::dict::MAX_LEN as usize);
    let size = (total / 20).clamp(4096.min(cap), cap);
    // zstd needs a handful of samples and more sample bytes than the dictionary it builds.
    if samples.len() < 8 || total < 2 * size {
        return None;
    }
    zstd::dict::from_samples(samples, size).ok()
}

/// Picks up to `max` records spread evenly over `records` as training samples.
pub(crate) fn sample<R: AsRef<[u8]>>(records: &[R], max: usize) -> Vec<&[u8]> {
    let step = records.len().div_ceil(max.max(1)).max(1);
    records.iter().step_by(step).map(|r| r.as_ref()).filter(|r| !r.is_empty()).collect()
}

/// One worker's compression context, reused across every record it handles.
pub(crate) struct Encoder<'d> {
    ctx: Option<Compressor<'d>>,
    codec: Codec,
    buf: Vec<u8>,
}

/// A record as it will be stored.
pub(crate) enum Encoded {
    /// Store the caller's bytes as they are.
    Raw,
    /// Store these bytes under this codec.
    Packed(Vec<u8>, Codec),
}

impl<'d> Encoder<'d> {
    /// A context for `codec` (`Zstd` or `ZstdDict`, the latter needing `dict`).
    pub(crate) fn new(codec: Codec, dict: Option<&'d Dictionary>) -> std::io::Result<Encoder<'d>> {
        let mut ctx = match (codec, dict) {
            (Codec::ZstdDict, Some(d)) => Compressor::with_prepared_dictionary(&d.encoder)?,
            // A frame tagged zstd_dict must be compressed against the dictionary.
            (Codec::ZstdDict, None) => {
                return Err(std::io::Error::other("zstd_dict compression without a dictionary"));
            }
            (Codec::Lz4, _) | (Codec::Raw, _) => {
                return Ok(Encoder { ctx: None, codec, buf: Vec::new() });
            }
            (Codec::Zstd, _) => Compressor::new(ZSTD_LEVEL)?,
        };
        // The frame checksum is what makes zstd `Codec::self_checking`.
        ctx.set_parameter(CParameter::ChecksumFlag(true))?;
        ctx.set_parameter(CParameter::ContentSizeFlag(true))?;
        let buf = Vec::with_capacity(zstd::zstd_safe::compress_bound(MAX_RECORD_SIZE));
        Ok(Encoder { ctx: Some(ctx), codec, buf })
    }

    /// Compresses one record; a record that does not shrink stays raw.
    pub(crate) fn encode(&mut self, record: &[u8]) -> std::io::Result<Encoded> {
        if record.is_empty() {
            return Ok(Encoded::Raw);
        }
        self.buf.clear();
        match &mut self.ctx {
            Some(ctx) => {
                self.buf.reserve(zstd::zstd_safe::compress_bound(record.len()));
                ctx.compress_to_buffer(record, &mut self.buf)?;
            }
            None if self.codec == Codec::Lz4 => {
                self.buf.resize(lz4_flex::block::get_maximum_output_size(record.len()), 0);
                let n =
                    lz4_flex::block::compress_into(record, &mut self.buf).map_err(std::io::Error::other)?;
                self.buf.truncate(n);
            }
            None => return Ok(Encoded::Raw),
        }
        Ok(if self.buf.len() < record.len() {
            Encoded::Packed(self.buf.clone(), self.codec)
        } else {
            Encoded::Raw
        })
    }
}

/// Why a frame did not decode.
#[derive(Debug)]
pub(crate) enum DecodeError {
    /// A `zstd_dict` frame, and no dictionary to decode it with.
    MissingDictionary,
    /// The frame is damaged or does not fit the record: what is wrong, and the decompressor's
    /// error when it is the one that said so (the record's error's `source`).
    Frame {
        /// What is wrong.
        reason: String,
        /// The decompressor's error.
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
}

impl DecodeError {
    /// A frame refused for `reason` by the decoder's own checks.
    fn frame(reason: String) -> DecodeError {
        DecodeError::Frame { reason, source: None }
    }

    /// A frame (or a context) the decompressor refused with `e`.
    fn refused(reason: &str, e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> DecodeError {
        DecodeError::Frame { reason: reason.to_owned(), source: Some(e.into()) }
    }
}

/// One worker's decompression context, reused across every record it handles.
pub(crate) struct Decoder<'d> {
    plain: Option<Decompressor<'d>>,
    dict: Option<Decompressor<'d>>,
    dictionary: Option<&'d Dictionary>,
}

impl<'d> Decoder<'d> {
    pub(crate) fn new(dictionary: Option<&'d Dictionary>) -> Decoder<'d> {
        Decoder { plain: None, dict: None, dictionary }
    }

    /// Whether this decoder was made with the store's dictionary.
    pub(crate) fn has_dictionary(&self) -> bool {
        self.dictionary.is_some()
    }

    /// Decompresses `src` straight into the next `len` bytes of `dst`, the record's length.
    ///
    /// # Errors
    /// [`DecodeError::MissingDictionary`] for a `zstd_dict` frame without a dictionary;
    /// [`DecodeError::Frame`] saying what is wrong with a damaged frame.
    pub(crate) fn decode(
        &mut self,
        codec: Codec,
        src: &[u8],
        dst: &mut Destination<'_>,
        len: usize,
    ) -> Result<(), DecodeError> {
        let ctx = match codec {
            Codec::Raw => return Err(DecodeError::frame("a raw record is not decoded".into())),
            Codec::Lz4 => {
                let n = dst
                    .write_zeroed(len, |out| lz4_flex::block::decompress_into(src, out))
                    .map_err(|e| DecodeError::refused("the lz4 block does not decode", e))?;
                if n != len {
                    return Err(DecodeError::frame(format!("decoded {n} bytes, the entry says {len}")));
                }
                return Ok(());
            }
            Codec::Zstd => match &mut self.plain {
                Some(c) => c,
                slot @ None => {
                    let ctx = Decompressor::new()
                        .map_err(|e| DecodeError::refused("no zstd context could be made", e))?;
                    slot.insert(ctx)
                }
            },
            Codec::ZstdDict => match &mut self.dict {
                Some(c) => c,
                slot @ None => {
                    let d = self.dictionary.ok_or(DecodeError::MissingDictionary)?;
                    slot.insert(
                        Decompressor::with_prepared_dictionary(&d.decoder)
                            .map_err(|e| DecodeError::refused("no zstd context could be made", e))?,
                    )
                }
            },
        };
        let n = dst
            .decompress(ctx, src, len)
            .map_err(|e| DecodeError::refused("the zstd frame does not decode", e))?;
        if n != len {
            return Err(DecodeError::frame(format!("decoded {n} bytes, the table says {len}")));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::fill_slice;

    /// A damaged dictionary is an error, not a panic: truncated at every length, and with bytes
    /// flipped in its tables.
    #[test]
    fn a_damaged_dictionary_is_refused_without_a_panic() {
        let recs: Vec<Vec<u8>> = (0..400u32)
            .map(|i| format!("{{\"id\":{i},\"name\":\"item-{}\"}}", i % 17).into_bytes())
            .collect();
        let raw = train(&sample(&recs, 400), Some(8192)).expect("trains");
        assert!(Dictionary::new(raw.clone()).is_ok());
        let mut refused = 0;
        for cut in (0..raw.len()).step_by(7) {
            refused += usize::from(Dictionary::new(raw[..cut].to_vec()).is_err());
        }
        assert!(refused > 0, "no truncation was refused");
        for at in 8..raw.len().min(400) {
            let mut bad = raw.clone();
            bad[at] ^= 0xff;
            // Either loads (the damage is in content, caught per frame) or is refused: no panic.
            let _ = Dictionary::new(bad);
        }
    }

    #[test]
    fn incompressible_record_stays_raw() {
        let mut enc = Encoder::new(Codec::Zstd, None).unwrap();
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        let noise: Vec<u8> = (0..4096)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        assert!(matches!(enc.encode(&noise).unwrap(), Encoded::Raw));
        assert!(matches!(enc.encode(&[7u8; 4096]).unwrap(), Encoded::Packed(_, Codec::Zstd)));
    }

    #[test]
    fn dictionary_round_trip_and_missing_dictionary() {
        let recs: Vec<Vec<u8>> = (0..200u32)
            .map(|i| {
                format!("{{\"id\":{i},\"name\":\"user{i}\",\"tags\":[\"a\",\"b\"]}}").repeat(4).into_bytes()
            })
            .collect();
        let d = Dictionary::new(train(&sample(&recs, 100), Some(8192)).expect("trains")).unwrap();
        let mut enc = Encoder::new(Codec::ZstdDict, Some(&d)).unwrap();
        let Encoded::Packed(frame, Codec::ZstdDict) = enc.encode(&recs[3]).unwrap() else {
            panic!("not packed")
        };
        let mut out = vec![0u8; recs[3].len()];
        let decode = |dec: &mut Decoder<'_>, out: &mut [u8]| {
            fill_slice(out, |mut o| {
                let len = o.remaining();
                Ok(dec.decode(Codec::ZstdDict, &frame, &mut o, len))
            })
            .unwrap()
        };
        decode(&mut Decoder::new(Some(&d)), &mut out).unwrap();
        assert_eq!(out, recs[3]);
        assert!(matches!(decode(&mut Decoder::new(None), &mut out), Err(DecodeError::MissingDictionary)));
    }

    #[test]
    fn damaged_frame_is_an_error() {
        let mut enc = Encoder::new(Codec::Zstd, None).unwrap();
        let rec = b"hello hello hello hello hello hello".repeat(10);
        let Encoded::Packed(mut frame, _) = enc.encode(&rec).unwrap() else { panic!() };
        let mid = frame.len() / 2;
        frame[mid] ^= 0x55;
        let mut out = vec![0u8; rec.len()];
        let r = fill_slice(&mut out, |mut o| {
            let len = o.remaining();
            Ok(Decoder::new(None).decode(Codec::Zstd, &frame, &mut o, len))
        });
        assert!(matches!(
            r.unwrap(),
            Err(DecodeError::Frame { reason, source: Some(_) }) if reason == "the zstd frame does not decode"
        ));
    }
}
