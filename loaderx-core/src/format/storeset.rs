//! `storeset.msgpack`: a store set's manifest, the parts in order with their record counts and
//! identities (MessagePack, named fields), beside a copy of the parts' `schema.msgpack` (which a
//! set stitched on object storage also carries inside).

use serde::{Deserialize, Serialize};

/// The set's manifest file.
pub const SET_FILE: &str = "storeset.msgpack";

/// The most bytes a manifest may have (a million parts' paths is far below it).
pub const MAX_SET_MANIFEST: u64 = 64 << 20;

/// The decoded manifest. A field of another name is refused, not skipped: one byte damaged in
/// `identity`'s name made it "absent", as in sets stitched before identities were kept, and
/// turned the part check off without a word (look 164, L164-1). A field added later comes with
/// a new version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetManifest {
    /// The layout's version (1).
    pub version: u32,
    /// The parts, in index order.
    pub parts: Vec<SetPart>,
    /// The set's schema (the bytes of a `schema.msgpack`) where the manifest carries it: a set
    /// stitched on object storage, whose commit is the manifest's one put, so that a commit
    /// killed after the schema file beside it changed leaves the old set readable (look 156,
    /// L156-1). Readers take it over the file beside it; sets stitched locally carry none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<Vec<u8>>,
}

/// One part of a set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetPart {
    /// Relative to the set's directory (or absolute, when the part is on another root).
    pub path: String,
    /// Its records when stitched.
    pub records: u64,
    /// Its store's identity when stitched (absent in sets written before it was kept): a part
    /// replaced by another dataset of the same schema and length is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<u64>,
}

impl SetManifest {
    /// A manifest of version 1 over `parts`.
    pub fn new(parts: Vec<SetPart>) -> SetManifest {
        SetManifest { version: 1, parts, schema: None }
    }

    /// This manifest carrying the set's schema, `schema` (a `schema.msgpack`'s bytes).
    #[must_use]
    pub fn with_schema(self, schema: Vec<u8>) -> SetManifest {
        SetManifest { schema: Some(schema), ..self }
    }

    /// The bytes of the manifest.
    pub fn encode(&self) -> Vec<u8> {
        // Plain data of strings and integers: MessagePack encodes it without failing.
        rmp_serde::to_vec_named(self).unwrap_or_default()
    }

    /// The manifest in `bytes`.
    ///
    /// # Errors
    /// [`ManifestError`]: not MessagePack of this layout (the decoder's error its `source`),
    /// another version, or no part. Never panics on any input.
    pub fn decode(bytes: &[u8]) -> Result<SetManifest, ManifestError> {
        // Read through a cursor: where the decoder stopped is the byte an error names (look 172,
        // L172-5: every error said byte 0).
        let mut cursor = std::io::Cursor::new(bytes);
        let decoded = SetManifest::deserialize(&mut rmp_serde::Deserializer::new(&mut cursor));
        let end = cursor.position();
        let m = decoded.map_err(|e| ManifestError {
            offset: end,
            reason: "not a store set manifest (damaged, or cut short, where the decoder stopped)".into(),
            source: Some(e),
        })?;
        if m.version != 1 || m.parts.is_empty() {
            let reason = format!(
                "version {} with {} parts (this build reads version 1, ≥ 1 part)",
                m.version,
                m.parts.len()
            );
            // Another version named at its value; no part at the manifest's start.
            let version = bytes.windows(8).position(|w| w == b"\xa7version").map_or(0, |at| at + 8);
            let offset = if m.version != 1 { version as u64 } else { 0 };
            return Err(ManifestError { offset, reason, source: None });
        }
        if end < bytes.len() as u64 {
            let reason = format!(
                "bytes after it: {} past the manifest's end (bytes added, or a count in it lowered: damaged)",
                bytes.len() as u64 - end
            );
            return Err(ManifestError { offset: end, reason, source: None });
        }
        // Exactly as the layout encodes it: an identity written as nil was read as a part
        // without one and turned its check off (look 166, L166-1).
        let encoded = m.encode();
        if encoded != bytes {
            // Where the bytes part from the encoding: the manifest's end, or the damaged field.
            let at =
                encoded.iter().zip(bytes).position(|(a, b)| a != b).unwrap_or(encoded.len().min(bytes.len()));
            let reason =
                "not as a store set manifest is encoded: a field of another encoding (damaged)".to_string();
            return Err(ManifestError { offset: at as u64, reason, source: None });
        }
        Ok(m)
    }
}

/// Why bytes are not a manifest: where and what, and the MessagePack decoder's error when it
/// found it (kept as the cause, its text not repeated in `reason`).
#[derive(Debug)]
pub struct ManifestError {
    /// Byte offset of the problem.
    pub offset: u64,
    /// What is wrong.
    pub reason: String,
    /// The decoder's error, when the bytes are not MessagePack of this layout.
    pub source: Option<rmp_serde::decode::Error>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manifest_round_trips_and_bad_ones_are_refused() {
        let m = SetManifest::new(vec![
            SetPart { path: "../parts/p0".into(), records: 10, identity: Some(7) },
            SetPart { path: "p1".into(), records: 0, identity: None },
        ]);
        assert_eq!(SetManifest::decode(&m.encode()).unwrap(), m);
        let carrying = m.clone().with_schema(vec![0x81, 0xa1, b'k', 0x01]);
        assert_eq!(SetManifest::decode(&carrying.encode()).unwrap(), carrying);
        // Bytes after the manifest; an identity written as nil (look 166, L166-1).
        let mut trailing = carrying.encode();
        trailing.extend_from_slice(&[0xcf, 0, 0, 0, 0, 0, 0, 0, 7]);
        let nil = m.encode();
        let at = nil.windows(9).rposition(|w| w == b"\xa8identity").unwrap() + 9;
        let nil = [&nil[..at], &[0xc0], &nil[at + 1..]].concat();
        let end = carrying.encode().len() as u64;
        let e = SetManifest::decode(&trailing).unwrap_err();
        assert!(e.reason.contains("bytes after it: 9 past the manifest's end"), "{}", e.reason);
        assert_eq!(e.offset, end);
        let e = SetManifest::decode(&nil).unwrap_err();
        assert!(e.reason.contains("a field of another encoding"), "{}", e.reason);
        assert!(e.offset <= at as u64, "{} {at}", e.offset);
        // A manifest cut short: the byte where the decoder stopped (look 172, L172-5: byte 0).
        let whole = carrying.encode();
        let e = SetManifest::decode(&whole[..whole.len() / 2]).unwrap_err();
        assert!(e.offset > 0 && e.offset <= whole.len() as u64 / 2, "{}", e.offset);
        // One byte of a field's name damaged: refused, not read as the field absent (L164-1).
        for name in [&b"identity"[..], b"schema", b"records"] {
            let bytes = carrying.encode();
            let at = bytes.windows(name.len()).position(|w| w == name).unwrap();
            let mut damaged = bytes.clone();
            damaged[at + 2] ^= 0x01;
            let e = SetManifest::decode(&damaged).unwrap_err();
            assert!(e.reason.contains("not a store set manifest"), "{}", e.reason);
        }
        let garbage = SetManifest::decode(b"\xc1").unwrap_err();
        assert!(garbage.source.is_some() && !garbage.reason.contains(&garbage.source.unwrap().to_string()));
        assert!(
            matches!(
                SetManifest::decode(&SetManifest::new(Vec::new()).encode()),
                Err(ManifestError { offset: 0, ref reason, source: None }) if reason.contains("with 0 parts")
            ),
            "no part"
        );
        let v2 = SetManifest {
            version: 2,
            ..SetManifest::new(vec![SetPart { path: "p".into(), records: 1, identity: None }])
        };
        assert!(
            matches!(
                SetManifest::decode(&v2.encode()),
                Err(ManifestError { offset: 9, ref reason, source: None }) if reason.starts_with("version 2 ")
            ),
            "another version"
        );
    }
}
