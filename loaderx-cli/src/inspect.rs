//! `info`, `stats` and `verify`: looking at stores and datasets.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use loaderx_core::{Error, Format, Schema, Store};

use crate::convert::human;

/// Arguments of `loaderx info`.
#[derive(Debug, Args)]
pub struct InfoArgs {
    /// The store (or dataset) directory, or a token file (a Megatron dataset's .bin, .idx or
    /// prefix, an llm.c token file, a headerless one with --dtype).
    store: std::path::PathBuf,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
    /// The token type of a headerless token file (u16, u32...).
    #[arg(long)]
    dtype: Option<String>,
}

/// The schema, or `None` for a raw store without one.
fn schema_of(dir: &Path) -> anyhow::Result<Option<Schema>> {
    match Schema::read(dir) {
        Ok(s) => Ok(Some(s)),
        Err(Error::Schema { .. }) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// `loaderx info STORE [--json]`: what the store's files say, in time independent of its length
/// (no index entry is read; `stats` counts codecs and logical bytes).
pub fn info(args: &InfoArgs) -> anyhow::Result<()> {
    let dir = &args.store;
    if args.dtype.is_some() || crate::tokens::is_token_path(dir) {
        return crate::tokens::info(dir, args.dtype.as_deref(), args.json);
    }
    #[cfg(feature = "remote")]
    if loaderx_core::remote::is_remote(dir) {
        return crate::remote_inspect::info(&dir.to_string_lossy(), args.json);
    }
    if let Some(parts) = loaderx_core::set_parts(dir).with_context(|| format!("info {}", dir.display()))? {
        let schema = Schema::read(dir).with_context(|| format!("info {}", dir.display()))?;
        return set_info(&dir.display().to_string(), &schema, &parts, args.json);
    }
    let store = Store::open(dir).with_context(|| format!("info {}", dir.display()))?;
    let sum = store.summary().with_context(|| format!("info {}", dir.display()))?;
    let schema = schema_of(dir)?;
    let kind = schema.as_ref().map_or("raw (no schema)", |s| kind_name(s.kind));
    if args.json {
        let v = serde_json::json!({
            "path": dir.display().to_string(),
            "format": store.format().name(),
            "kind": schema.as_ref().map_or("raw", |_| kind),
            "dtype": schema.as_ref().map(|s| s.dtype.name()),
            "shape": schema.as_ref().map(|s| s.shape.clone()),
            "length": sum.length,
            "chunk_bytes": sum.chunk_bytes,
            "dict_bytes": sum.dict_bytes,
            "chunks": sum.chunks,
            "index_bytes": sum.index_bytes,
            "layout": store.layout().name(),
            "record_size": match store.layout() {
                loaderx_core::Layout::Fixed { record_size, .. } => Some(record_size),
                loaderx_core::Layout::Entries | loaderx_core::Layout::Compact => None,
            },
        });
        return crate::print(&format!("{v}\n"));
    }
    let mut t = format!(
        "path:    {}\nformat:  {}\nlayout:  {}\nkind:    {kind}\n",
        dir.display(),
        store.format(),
        layout_text(store.layout())
    );
    if let Some(s) = &schema {
        t.push_str(&shape_text(s));
    }
    t.push_str(&format!(
        "length:  {}\nbytes:   {} in {} chunk file(s), {} dictionary, {} index\n(`loaderx stats` reads every entry: codecs, logical and live bytes)\n",
        sum.length,
        human(sum.chunk_bytes),
        sum.chunks,
        human(sum.dict_bytes),
        human(sum.index_bytes),
    ));
    crate::print(&t)
}

/// `info` of a store set: its schema and parts as its manifest lists them (the parts are not
/// opened: `verify` and the datasets check them).
pub(crate) fn set_info(
    name: &str,
    schema: &Schema,
    parts: &[(String, u64)],
    json: bool,
) -> anyhow::Result<()> {
    let kind = kind_name(schema.kind);
    let length = parts.iter().try_fold(0u64, |sum, (_, n)| sum.checked_add(*n)).with_context(|| {
        format!("info {name}: its parts claim more than 2^64 - 1 records: the set's manifest is damaged")
    })?;
    if json {
        let v = serde_json::json!({
            "path": name,
            "kind": kind,
            "set": true,
            "dtype": schema.dtype.name(),
            "shape": schema.shape,
            "length": length,
            "parts": parts.iter().map(|(p, n)| serde_json::json!({ "path": p, "records": n })).collect::<Vec<_>>(),
        });
        return crate::print(&format!("{v}\n"));
    }
    let mut t = format!(
        "path:    {name}\nkind:    {kind} (a store set of {} parts)\n{}length:  {length}\n",
        parts.len(),
        shape_text(schema)
    );
    for (p, n) in parts {
        t.push_str(&format!("part:    {p} ({n} records)\n"));
    }
    crate::print(&t)
}

/// `loaderx stats STORE`: the raw space accounting, one `key value` per line, in bytes.
pub fn stats(dir: &Path) -> anyhow::Result<()> {
    let store = Store::open(dir).with_context(|| format!("stats {}", dir.display()))?;
    let s = store.stats().with_context(|| format!("stats {}", dir.display()))?;
    let codecs: String = s.codecs.iter().map(|(c, n)| format!("{c} {n}\n")).collect();
    crate::print(&format!(
        "format {}\nlength {}\nlogical_bytes {}\nlive_bytes {}\nchunk_bytes {}\nchunks {}\ndict_bytes {}\n{codecs}index_bytes {}\nreclaimable_at_most {}\n",
        store.format(),
        s.length,
        s.logical_bytes,
        s.live_bytes,
        s.chunk_bytes,
        s.chunks,
        s.dict_bytes,
        s.index_bytes,
        s.chunk_bytes.saturating_sub(s.live_bytes),
    ))
}

/// Damaged records listed by `verify` unless `--all` is given.
const VERIFY_LISTED: u64 = 20;

/// Arguments of `loaderx verify`.
#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// The store directory, or a token file (as `info` takes).
    store: std::path::PathBuf,
    /// The token type of a headerless token file (u16, u32...).
    #[arg(long)]
    dtype: Option<String>,
    /// A token file's vocabulary size: every id must be below it (at least 1).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    vocab_size: Option<u64>,
    /// List every damaged record, not only the first 20.
    #[arg(long)]
    all: bool,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
}

/// `loaderx verify STORE [--all] [--json]`: exit 0 only if every record is intact.
///
/// Lists the first damaged records (all of them with `--all`) and counts the rest, streaming
/// the scan so a store with millions of damaged records costs no more memory than an intact one.
pub fn verify(args: &VerifyArgs) -> anyhow::Result<ExitCode> {
    let dir = &args.store;
    if args.dtype.is_some() || args.vocab_size.is_some() || crate::tokens::is_token_path(dir) {
        return crate::tokens::verify(dir, args.dtype.as_deref(), args.vocab_size, args.json);
    }
    verify_store(args)
}

/// `verify` of a store, a store set or a remote store.
fn verify_store(args: &VerifyArgs) -> anyhow::Result<ExitCode> {
    let dir = &args.store;
    #[cfg(feature = "remote")]
    if loaderx_core::remote::is_remote(dir) {
        return crate::remote_inspect::verify(&dir.to_string_lossy(), args.json);
    }
    let limit = if args.all { u64::MAX } else { VERIFY_LISTED };
    let mut listed = Vec::new();
    let mut damaged = 0u64;
    let mut listed_records = 0u64;
    let mut files = Vec::new();
    let mut format = Format::V2;
    let mut checked = 0u64;
    // A store set: the set as a whole (its parts' counts and identities, none named twice), then
    // each part, its records numbered as the set numbers them.
    let (targets, set_problem) = verify_targets(dir).with_context(|| format!("verify {}", dir.display()))?;
    files.extend(set_problem);
    // A dataset's records hold its schema's items (rows): each record's length is checked too.
    // A damaged schema is damage to report, as a damaged manifest is; the records are still
    // checked, their lengths against no schema.
    let schema = match dir.join(loaderx_core::SCHEMA_FILE).exists().then(|| Schema::read(dir)).transpose() {
        Err(e @ loaderx_core::Error::Corrupt { .. }) => {
            // Once: a set's own schema is named by the set's check already.
            let said = e.to_string();
            if !files.iter().any(|f| f.contains(&said)) {
                files.push(said);
            }
            None
        }
        schema => schema.with_context(|| format!("verify {}", dir.display()))?,
    };
    for (part, first) in targets {
        let n = Store::open(&part)
            .and_then(|s| {
                if s.format() == Format::V1 {
                    format = Format::V1;
                }
                files.extend(s.verify_files()?.iter().map(ToString::to_string));
                let mut seen = Seen::new(s.len());
                let mut report = |index: u64, err: String| {
                    if seen.first(index) {
                        damaged += 1;
                        if damaged <= limit {
                            listed_records += 1;
                        }
                    }
                    // While the list is whole, a second reason joins the record's first.
                    if damaged <= limit {
                        listed.push((first + index, err));
                    }
                };
                let n = s.verify_each(|index, err| report(index, err.to_string()))?;
                if let Some(schema) = &schema {
                    check_lengths(&s, schema, &mut report)?;
                }
                Ok(n)
            })
            .with_context(|| format!("verify {}", part.display()))?;
        checked += n;
    }
    let code = if damaged == 0 && files.is_empty() { ExitCode::SUCCESS } else { ExitCode::from(1) };
    if args.json {
        let records: Vec<_> = listed
            .iter()
            .map(|(index, error)| serde_json::json!({ "index": index, "error": error }))
            .collect();
        let v = serde_json::json!({
            "path": dir.display().to_string(),
            "checked": checked,
            "damaged": damaged,
            "listed": records.len(),
            "records": records,
            "files": files,
            "format": format.to_string(),
            // v1 records carry no checksum: only their entries and lengths could be checked.
            "checksums": format == Format::V2,
        });
        crate::print(&format!("{v}\n"))?;
        return Ok(code);
    }
    if damaged == 0 && files.is_empty() {
        let t = if format == Format::V1 {
            // Said on every clean v1 run: "intact" would claim what v1 cannot check.
            format!(
                "{}: all {checked} records readable; not checked: their bytes (v1 records carry no \
                 checksum, so bytes overwritten in place go unseen; `loaderx migrate --to v2` adds them)\n",
                dir.display()
            )
        } else {
            format!("{}: all {checked} records intact\n", dir.display())
        };
        crate::print(&t)?;
        return Ok(code);
    }
    let mut t = format!("{}: {damaged} of {checked} records damaged\n", dir.display());
    for f in &files {
        t.push_str(&format!("  store: {f}\n"));
    }
    for (index, err) in &listed {
        t.push_str(&format!("  record {index}: {err}\n"));
    }
    let unlisted = damaged - listed_records;
    if unlisted > 0 {
        t.push_str(&format!("  ... and {unlisted} more (--all lists every one)\n"));
    }
    crate::print(&t)?;
    Ok(code)
}

/// The records of a store reported so far: one reported for two reasons (its bytes overlap
/// another's and its length is not the schema's) is one damaged record, listed with both (look
/// 74, L74-1: counted twice). One bit a record, made at the first report.
struct Seen {
    len: u64,
    bits: Vec<u64>,
}

impl Seen {
    fn new(len: u64) -> Seen {
        Seen { len, bits: Vec::new() }
    }

    /// Whether this is record `index`'s first report.
    fn first(&mut self, index: u64) -> bool {
        if self.bits.is_empty() {
            self.bits = vec![0; self.len.div_ceil(64) as usize];
        }
        let (word, bit) = ((index / 64) as usize, 1u64 << (index % 64));
        match self.bits.get_mut(word) {
            Some(w) if *w & bit != 0 => false,
            Some(w) => {
                *w |= bit;
                true
            }
            None => true,
        }
    }
}

/// Hands `report` each record of `store` whose length does not hold what `schema` says (one
/// item of a dense dataset, whole rows of a ragged one), scanning the index a block at a time,
/// and of a dataset of bools each record holding a byte other than 0 or 1, which every reader
/// refuses (look 113, L113-2). A block whose entries do not resolve, or a record that does not
/// read, was reported by the record checks already.
fn check_lengths(
    store: &Store,
    schema: &Schema,
    report: &mut dyn FnMut(u64, String),
) -> loaderx_core::Result<()> {
    const BLOCK: u64 = 1 << 16;
    let unit = schema.unit_bytes() as u64;
    let fits = |len: u64| match schema.kind {
        loaderx_core::Kind::Dense => len == unit,
        loaderx_core::Kind::Ragged | loaderx_core::Kind::Image => {
            len.checked_rem(unit).map_or(len == 0, |r| r == 0)
        }
    };
    let (len, mut first) = (store.len(), 0u64);
    while first < len {
        let end = (first + BLOCK).min(len);
        let ids: Vec<u64> = (first..end).collect();
        if let Ok(lens) = store.record_lens(&ids) {
            for (i, &n) in ids.iter().zip(&lens) {
                if !fits(u64::from(n)) {
                    let what = match schema.kind {
                        loaderx_core::Kind::Dense => {
                            format!("one item of the schema ({schema}) is {unit} bytes")
                        }
                        loaderx_core::Kind::Ragged | loaderx_core::Kind::Image => {
                            format!("a row of the schema ({schema}) is {unit} bytes")
                        }
                    };
                    report(*i, format!("the record is {n} bytes; {what}"));
                }
            }
            if schema.dtype == loaderx_core::DType::Bool {
                check_bools(store, &ids, &lens, report);
            }
        }
        first = end;
    }
    Ok(())
}

/// [`check_lengths`]' bools: the records `ids` (of lengths `lens`) read in batches of at most
/// 16 MiB, each record that does not read skipped (the record checks report it).
fn check_bools(store: &Store, ids: &[u64], lens: &[u32], report: &mut dyn FnMut(u64, String)) {
    const BATCH_BYTES: u64 = 16 << 20;
    let mut check = |i: u64, record: &[u8]| {
        if let Some(at) = record.iter().position(|&b| b > 1) {
            report(i, format!("bool element {at} of the record is {}, not 0 or 1", record[at]));
        }
    };
    let mut start = 0;
    while start < ids.len() {
        let (mut end, mut bytes) = (start, 0u64);
        while end < ids.len() && (end == start || bytes + u64::from(lens[end]) <= BATCH_BYTES) {
            bytes += u64::from(lens[end]);
            end += 1;
        }
        match store.gather_flat(&ids[start..end]) {
            Ok((flat, sizes)) => {
                let mut at = 0usize;
                for (i, size) in ids[start..end].iter().zip(sizes) {
                    let size = size as usize;
                    check(*i, flat.get(at..at + size).unwrap_or(&[]));
                    at += size;
                }
            }
            Err(_) => {
                for &i in &ids[start..end] {
                    if let Ok(record) = store.get(i) {
                        check(i, &record);
                    }
                }
            }
        }
        start = end;
    }
}

/// The stores `verify DIR` checks, each with the index its first record has in `DIR`: the store
/// itself, or each part of a store set; and for a set, why it does not open whole, if it does
/// not (a part replaced, or named twice: damage in a part can show here too, so its records are
/// checked all the same).
type Targets = (Vec<(std::path::PathBuf, u64)>, Option<String>);
fn verify_targets(dir: &Path) -> anyhow::Result<Targets> {
    let Some(parts) = loaderx_core::set_parts(dir)? else { return Ok((vec![(dir.to_path_buf(), 0)], None)) };
    // A set's own schema damaged is damage to report, its parts checked all the same (look 93,
    // F4: verify stopped there); any other failure to read it stops the check.
    let whole = match Schema::read(dir) {
        Ok(s) if s.kind == loaderx_core::Kind::Dense => loaderx_core::DenseSource::open(dir).map(drop),
        Ok(_) => loaderx_core::RaggedSource::open(dir).map(drop),
        Err(e @ loaderx_core::Error::Corrupt { .. }) => Err(e),
        Err(e) => return Err(e.into()),
    };
    let mut first = 0u64;
    let targets = parts
        .into_iter()
        .map(|(p, n)| {
            let at = first;
            first = first.checked_add(n).context("the set's parts claim more than 2^64 - 1 records")?;
            Ok((dir.join(p), at))
        })
        .collect::<anyhow::Result<_>>()?;
    Ok((targets, whole.err().map(|e| format!("the set: {}", loaderx_core::error_chain(&e)))))
}

/// A layout as `info` and `migrate` print it.
pub(crate) fn layout_text(layout: loaderx_core::Layout) -> String {
    match layout {
        loaderx_core::Layout::Entries => "entries (an index entry per record)".into(),
        loaderx_core::Layout::Compact => "compact (a 16-byte index entry per raw record)".into(),
        loaderx_core::Layout::Fixed { record_size, block_records } => {
            format!("fixed ({record_size}-byte raw records, a crc32c per block of {block_records})")
        }
    }
}

/// The kind as `info` names it: `dense`, `ragged` or `image`.
pub(crate) fn kind_name(kind: loaderx_core::Kind) -> &'static str {
    match kind {
        loaderx_core::Kind::Dense => "dense",
        loaderx_core::Kind::Ragged => "ragged",
        loaderx_core::Kind::Image => "image",
    }
}

/// `info`'s dtype and shape lines of `schema` (an encoded image dataset: what its records are).
pub(crate) fn shape_text(schema: &Schema) -> String {
    match schema.kind {
        loaderx_core::Kind::Image => {
            "records: encoded images (one JPEG, PNG or WebP file a record)\n".to_string()
        }
        kind => {
            let what = if kind == loaderx_core::Kind::Dense { "item shape" } else { "row shape" };
            format!("dtype:   {}\nshape:   {:?} ({what})\n", schema.dtype, schema.shape)
        }
    }
}
