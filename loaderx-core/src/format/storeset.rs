//! `storeset.msgpack`: a store set's manifest, the parts in order with their record counts and
//! identities (MessagePack, named fields), beside a copy of the parts' `schema.msgpack`.

use serde::{Deserialize, Serialize};

/// The set's manifest file.
pub const SET_FILE: &str = "storeset.msgpack";

/// The most bytes a manifest may have (a million parts' paths is far below it).
pub const MAX_SET_MANIFEST: u64 = 64 << 20;

/// The decoded manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetManifest {
    /// The layout's version (1).
    pub version: u32,
    /// The parts, in index order.
    pub parts: Vec<SetPart>,
}

/// One part of a set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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
        SetManifest { version: 1, parts }
    }

    /// The bytes of the manifest.
    pub fn encode(&self) -> Vec<u8> {
        // Plain data of strings and integers: MessagePack encodes it without failing.
        rmp_serde::to_vec_named(self).unwrap_or_default()
    }

    /// The manifest in `bytes`.
    ///
    /// # Errors
    /// `(offset, reason)`: not MessagePack of this layout, another version, or no part. Never
    /// panics on any input.
    pub fn decode(bytes: &[u8]) -> Result<SetManifest, (u64, String)> {
        let m: SetManifest =
            rmp_serde::from_slice(bytes).map_err(|e| (0, format!("not a store set manifest: {e}")))?;
        if m.version != 1 || m.parts.is_empty() {
            return Err((
                0,
                format!(
                    "version {} with {} parts (this build reads version 1, ≥ 1 part)",
                    m.version,
                    m.parts.len()
                ),
            ));
        }
        Ok(m)
    }
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
        assert_eq!(SetManifest::decode(&m.encode()), Ok(m));
        assert!(SetManifest::decode(b"\xc1").is_err());
        assert!(SetManifest::decode(&SetManifest::new(Vec::new()).encode()).is_err(), "no part");
        let v2 = SetManifest {
            version: 2,
            ..SetManifest::new(vec![SetPart { path: "p".into(), records: 1, identity: None }])
        };
        assert!(SetManifest::decode(&v2.encode()).is_err(), "another version");
    }
}
