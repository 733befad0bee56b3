//! `info` and `verify` of stores and store sets on object storage (`s3://...`).

use std::process::ExitCode;

use anyhow::Context;
use loaderx_core::remote::{RemoteOptions, RemoteStore};
use loaderx_core::{Error, Format, RemotePart, RemoteSet, SCHEMA_FILE, Schema};

use crate::inspect::{kind_name, set_info};

/// The store at `url`, or the store set there when no store is (a set has no index: opening it
/// as a store says "not a store"). A URL holding neither is the store's error.
enum Opened {
    Store(Box<RemoteStore>),
    Set(RemoteSet),
}

fn open(url: &str, options: &RemoteOptions) -> loaderx_core::Result<Opened> {
    match RemoteStore::open(url, options.clone()) {
        Ok(store) => Ok(Opened::Store(Box::new(store))),
        Err(not_a_store @ Error::NotAStore { .. }) => match loaderx_core::remote_set(url, options)? {
            Some(set) => Ok(Opened::Set(set)),
            None => Err(not_a_store),
        },
        Err(e) => Err(e),
    }
}

/// `loaderx info s3://...`: what the remote index says (nothing else fetched but the schema),
/// or for a store set what its manifest says, as `info` of a local set.
pub fn info(url: &str, json: bool) -> anyhow::Result<()> {
    let options = RemoteOptions::new().with_env_cache()?;
    let store = match open(url, &options).with_context(|| format!("info {url}"))? {
        Opened::Store(store) => store,
        Opened::Set(set) => {
            let parts: Vec<(String, u64)> = set.parts.into_iter().map(|p| (p.url, p.records)).collect();
            return set_info(url, &set.schema, &parts, json);
        }
    };
    let s = store.summary();
    // A raw store has no schema to fetch; a damaged one is an error, as locally (look 93, F3:
    // shown as a raw store).
    let schema = match store.get_file(SCHEMA_FILE) {
        Ok(b) => Some(
            Schema::decode(&b, std::path::Path::new(&format!("{url}/{SCHEMA_FILE}")))
                .with_context(|| format!("info {url}"))?,
        ),
        Err(_) => None,
    };
    let ratio = if s.stored_bytes == 0 { 1.0 } else { s.logical_bytes as f64 / s.stored_bytes as f64 };
    if json {
        let v = serde_json::json!({
            "path": url,
            "format": store.format().to_string(),
            "kind": schema.as_ref().map_or("raw", |s| kind_name(s.kind)),
            "dtype": schema.as_ref().map(|s| s.dtype.name()),
            "shape": schema.as_ref().map(|s| s.shape.clone()),
            "length": s.records,
            "codecs": s.codecs.iter().map(|(c, n)| (c.name().to_string(), n.into())).collect::<serde_json::Map<_, _>>(),
            "logical_bytes": s.logical_bytes,
            "stored_bytes": s.stored_bytes,
            "ratio": ratio,
        });
        return crate::print(&format!("{v}\n"));
    }
    let what = schema
        .map_or_else(|| "raw".to_string(), |sc| format!("{:?} {} {:?}", sc.kind, sc.dtype.name(), sc.shape));
    let codecs: Vec<String> = s.codecs.iter().map(|(c, n)| format!("{c} {n}")).collect();
    crate::print(&format!(
        "{url}\n  format {}, {what}\n  {} records, {} logical, {} stored (ratio {ratio:.2}x)\n  codecs: {}\n",
        store.format(),
        s.records,
        crate::convert::human(s.logical_bytes),
        crate::convert::human(s.stored_bytes),
        codecs.join(", ")
    ))
}

/// What a remote verify found: records checked (all of them, or `None` past a damaged one: a
/// remote verify reads no further in that store), the damaged record (its index in the URL's
/// numbering) and the problems of a set's parts (a part missing, changed since stitching, of
/// another schema).
struct Found {
    checked: Option<u64>,
    damaged: Option<(u64, String)>,
    problems: Vec<String>,
    format: Format,
}

/// `verify` of a remote store or store set: every record fetched and checked against its
/// crc32c; the first damaged one of a store ends that store's check, named in the text or in
/// `--json` (the keys of a local verify, `checked` null: the records after it are not checked).
/// A set's parts are each checked so, numbered as the set numbers them, and each checked to hold
/// the records and the schema the set was stitched with.
pub fn verify(url: &str, json: bool) -> anyhow::Result<ExitCode> {
    // The objects as the server holds them: no index or pages kept here (look 100).
    let options = RemoteOptions::new().uncached();
    let opened = match open(url, &options) {
        // A set's own schema damaged is damage to report, its parts checked all the same, as
        // locally (look 93, kept: the check stopped there).
        Err(e) if matches!(&e, Error::Corrupt { path, .. } if path.ends_with(SCHEMA_FILE)) => {
            match loaderx_core::remote_set_parts(url, &options) {
                Ok(Some(parts)) => {
                    let mut found = verify_set(&parts, None, &options);
                    found.problems.insert(0, format!("the set: {}", loaderx_core::error_chain(&e)));
                    Err(found)
                }
                _ => return Err(anyhow::Error::new(e).context(format!("verify {url}"))),
            }
        }
        opened => Ok(opened.with_context(|| format!("verify {url}"))?),
    };
    let found = match opened {
        Err(found) => found,
        Ok(Opened::Set(set)) => {
            let mut found = verify_set(&set.parts, Some(&set.schema), &options);
            // The file beside a manifest that carries the schema readers take (look 156):
            // damage to it is damage, as where it is the set's schema.
            if let Err(e) = loaderx_core::remote_set_schema_file(url, &options) {
                found.problems.insert(0, format!("the set: {}", loaderx_core::error_chain(&e)));
            }
            found
        }
        Ok(Opened::Store(store)) => {
            let mut found = verify_one(&store, 0);
            // A dataset's schema (a raw store has none to fetch), checked against its checksum.
            if let Ok(bytes) = store.get_file(SCHEMA_FILE) {
                let decoded = Schema::decode(&bytes, std::path::Path::new(SCHEMA_FILE));
                found.problems.extend(decoded.err().map(|e| loaderx_core::error_chain(&e)));
            }
            found
        }
    };
    let intact = found.damaged.is_none() && found.problems.is_empty();
    let code = if intact { ExitCode::SUCCESS } else { ExitCode::FAILURE };
    if json {
        let records: Vec<_> = found
            .damaged
            .iter()
            .map(|(index, error)| serde_json::json!({ "index": index, "error": error }))
            .collect();
        let v = serde_json::json!({
            "path": url,
            "checked": found.checked,
            "damaged": records.len(),
            "listed": records.len(),
            "records": records,
            "files": found.problems,
            "format": found.format.to_string(),
            "checksums": found.format == Format::V2,
        });
        crate::print(&format!("{v}\n"))?;
        return Ok(code);
    }
    let checked = found.checked.unwrap_or_default();
    if intact {
        let t = if found.format == Format::V1 {
            format!("{url}: {checked} records, all readable (v1 records carry no checksum)\n")
        } else {
            format!("{url}: {checked} records, all intact\n")
        };
        crate::print(&t)?;
        return Ok(code);
    }
    let mut t = format!("{url}: damaged\n");
    for p in &found.problems {
        t.push_str(&format!("  store: {p}\n"));
    }
    if let Some((index, e)) = &found.damaged {
        t.push_str(&format!("  record {index}: {e}\n"));
    }
    crate::print(&t)?;
    Ok(code)
}

/// One store's check, its records numbered from `first`, and its manifest's (look 100, L100-4:
/// not looked at).
fn verify_one(store: &RemoteStore, first: u64) -> Found {
    let format = store.format();
    let mut found = match store.verify() {
        Ok(n) => Found { checked: Some(n), damaged: None, problems: vec![], format },
        Err(e @ Error::CorruptRecord { index, .. }) => {
            Found { checked: None, damaged: Some((first + index, e.to_string())), problems: vec![], format }
        }
        Err(e) => {
            Found { checked: None, damaged: None, problems: vec![loaderx_core::error_chain(&e)], format }
        }
    };
    match store.manifest_problems() {
        Ok(problems) => found.problems.extend(problems.iter().map(|e| loaderx_core::error_chain(e))),
        Err(e) => found.problems.push(loaderx_core::error_chain(&e)),
    }
    found
}

/// Parts of a set that fail to open (or hold other than the set says) before its check stops.
const MAX_PART_PROBLEMS: usize = 16;

/// A set's check: each part opened, compared with what the manifest and the set's schema say
/// (without one, the set's being damaged, with the first part's), and verified; the first
/// damaged record of the set named (a part's checks go on past it).
fn verify_set(parts: &[RemotePart], schema: Option<&Schema>, options: &RemoteOptions) -> Found {
    let mut found = Found { checked: Some(0), damaged: None, problems: vec![], format: Format::V2 };
    let mut schema = schema.cloned();
    if parts.iter().try_fold(0u64, |sum, p| sum.checked_add(p.records)).is_none() {
        found.checked = None;
        found
            .problems
            .push("its parts claim more than 2^64 - 1 records: the set's manifest is damaged".into());
        return found;
    }
    let mut first = 0u64;
    for part in parts {
        // A manifest listing parts that are not there costs a request or two each: the check
        // stops after so many (look 81: 2,000 absent parts took a minute, at 31 ms each).
        if found.problems.len() >= MAX_PART_PROBLEMS {
            found.problems.push(format!(
                "stopped after {MAX_PART_PROBLEMS} parts that could not be checked: the later parts were not checked"
            ));
            found.checked = None;
            break;
        }
        let part_found = match part_store(part, &mut schema, options) {
            Ok(store) => verify_one(&store, first),
            Err(e) => Found { checked: None, damaged: None, problems: vec![e], format: Format::V2 },
        };
        if part_found.format == Format::V1 {
            found.format = Format::V1;
        }
        found.checked = found.checked.zip(part_found.checked).map(|(a, b)| a + b);
        found.problems.extend(part_found.problems.into_iter().map(|p| format!("part {}: {p}", part.url)));
        if found.damaged.is_none() {
            found.damaged = part_found.damaged;
        }
        first += part.records; // within 2^64 - 1: summed above
    }
    found
}

/// The part `part`, opened and checked to hold what the set was stitched with (its count, and
/// its identity where the manifest keeps one) and the set's schema (none known: this part's
/// becomes the one the later parts are held to).
fn part_store(
    part: &RemotePart,
    schema: &mut Option<Schema>,
    options: &RemoteOptions,
) -> Result<RemoteStore, String> {
    let chain = |e: Error| loaderx_core::error_chain(&e);
    let store = RemoteStore::open(&part.url, options.clone()).map_err(chain)?;
    part.check(&store).map_err(chain)?;
    let own = store.get_file(SCHEMA_FILE).and_then(|b| Schema::decode(&b, std::path::Path::new(SCHEMA_FILE)));
    let own = own.map_err(chain)?;
    match schema {
        Some(s) if own != *s => return Err(format!("its schema ({own}) differs from the set's ({s})")),
        Some(_) => {}
        None => *schema = Some(own),
    }
    Ok(store)
}
