//! Crashes and other processes: a child (this test binary re-run with one ignored test) writes a
//! store or a dataset and is SIGKILLed at a random moment; the parent reopens what it left and
//! checks every committed record. (Readers beside a live writer: `concurrency.rs`.)
//!
//! The default tier is a few iterations, so the suite stays quick; `scripts/reliability.sh` runs
//! hundreds through the environment:
//! - `LOADERX_CRASH_ITERS`: kills per mode (default 3);
//! - `LOADERX_CRASH_SEED`: seed of the kill moments (default: from the clock, printed);
//! - `LOADERX_CONCURRENCY_MS`: how long the concurrency tests run (default 1000).
//!
//! Each crash loop prints `crash MODE FORMAT: N passed, M failed`; an iteration that fails is
//! reported, the store is recreated and the loop goes on, then the test fails if any did. Every
//! loop and concurrency test runs on both store formats.

use std::collections::HashSet;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use loaderx_core::{
    Codec, DType, DatasetWriter, DenseDataset, Format, RaggedDataset, Store, StoreOptions, WriteOptions,
    convert::NpyHeader,
};

use crate::common::{FORMATS, check_record, opts, record};

const CHILD_ENV: &str = "LOADERX_CRASH_CHILD";
/// Records per append in the `append` mode, and per append of the `compact` mode's cycle.
pub(crate) const APPEND_BATCH: u64 = 50;
const COMPACT_BATCH: u64 = 400;
/// Rows of the `.npy` input of the `convert` mode, and records of its ragged datasets.
const NPY_ROWS: usize = 12_000;
const RAGGED_RECORDS: u64 = 5_000;

/// The `compact` mode writes every 7th record empty: an empty record shares its offset with
/// the next one, the case that once made compaction overwrite records (issue 27).
fn compact_record(id: u64) -> Vec<u8> {
    if id % 7 == 3 { Vec::new() } else { record(id) }
}

/// The `fixed` mode's records: [`FIXED_SIZE`] bytes, an id and bytes derived from it, in a
/// fixed-stride store whose chunks hold 102 of them (a block of 25 a chunk's last short).
const FIXED_SIZE: usize = 40;

fn fixed_record(id: u64) -> Vec<u8> {
    let mut r = id.to_le_bytes().to_vec();
    r.extend((8..FIXED_SIZE).map(|j| (id as usize * 131 + j * 7) as u8));
    r
}

/// The id of an intact record of `mode`.
fn check_any(mode: &str, bytes: &[u8]) -> Option<u64> {
    if mode == "fixed" {
        let id = u64::from_le_bytes(bytes.get(..8)?.try_into().ok()?);
        (fixed_record(id) == bytes).then_some(id)
    } else {
        check_record(bytes)
    }
}

/// What the store shows of id `id` written in `mode`: its id, or [`EMPTY`] for an empty record
/// (which carries none).
fn shown(mode: &str, id: u64) -> u64 {
    if matches!(mode, "compact" | "compact16") && id % 7 == 3 { EMPTY } else { id }
}

/// An empty record, as [`check_store`] reads it.
const EMPTY: u64 = u64::MAX;

pub(crate) fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// A small xorshift generator: the kill moments, reproducible from the printed seed.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    fn from_env() -> Rng {
        let seed =
            std::env::var("LOADERX_CRASH_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(1, |d| d.as_nanos() as u64)
            });
        eprintln!("crash seed {seed} (LOADERX_CRASH_SEED)");
        Rng(seed | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

// ------------------------------------------------------------------ the child

/// Codec of the `k`-th append of a child: every codec in turn, including the first `zstd_dict`
/// append that trains and writes `dict.zr`.
pub(crate) fn codec_of(k: u64) -> Codec {
    let codecs = Format::V1.codecs();
    codecs[(k % codecs.len() as u64) as usize]
}

/// The codecs a child's store cycles through: LZ4 too in a v2 store.
fn codec_in(store: &Store, k: u64) -> Codec {
    let codecs = store.format().codecs();
    codecs[(k % codecs.len() as u64) as usize]
}

/// Runs in a child process (see [`crash_loop`]): writes until it is killed, printing `STEP k`
/// after the `k`-th operation has returned (so it is committed) and `READY` once the store is open.
#[test]
#[ignore = "runs only as the child of a crash test"]
fn crash_child() {
    let Ok(spec) = std::env::var(CHILD_ENV) else { return };
    let mut parts = spec.splitn(3, ':');
    let (mode, first, path) = (parts.next().unwrap(), parts.next().unwrap(), parts.next().unwrap());
    let mut next: u64 = first.parse().unwrap();
    if let Some(format) = mode.strip_prefix("convert.") {
        return convert_child(Path::new(path), format.parse().unwrap());
    }
    if mode == "migrate" {
        // To the other format and back, one migration per step.
        println!("READY");
        for k in 1.. {
            let to = if Store::open(path).unwrap().format() == Format::V1 { Format::V2 } else { Format::V1 };
            Store::migrate(path, to, &|_, _| {}).unwrap();
            println!("STEP {k}");
        }
    }
    let opts = StoreOptions::new().chunk_capacity(1 << 20).deferred_sync(mode == "deferred");
    let mut store = Store::open_rw(path, opts).unwrap();
    println!("READY");
    for k in 1.. {
        match mode {
            // Appends only; in a reader-visible order: ids rise with the index. `deferred`: the
            // same, published without waiting for the disk (`StoreOptions::deferred_sync`).
            "append" | "writer" | "deferred" => {
                let recs: Vec<Vec<u8>> = (next..next + APPEND_BATCH).map(record).collect();
                crate::common::append(&store, &recs, codec_in(&store, k));
                next += APPEND_BATCH;
            }
            // append, delete every third record, compact: one store operation per step (`fixed`:
            // raw records of one size in a fixed-stride store, where a delete moves bytes).
            "compact" | "fixed" | "compact16" => match k % 3 {
                1 if mode == "fixed" => {
                    let recs: Vec<Vec<u8>> = (next..next + COMPACT_BATCH).map(fixed_record).collect();
                    store.append(&recs, Codec::Raw).unwrap();
                    next += COMPACT_BATCH;
                }
                1 => {
                    let recs: Vec<Vec<u8>> = (next..next + COMPACT_BATCH).map(compact_record).collect();
                    // A compact-entry store (`compact16`) takes raw records only.
                    let codec = if mode == "compact16" { Codec::Raw } else { codec_in(&store, k / 3) };
                    crate::common::append(&store, &recs, codec);
                    next += COMPACT_BATCH;
                }
                2 => store.delete(&(0..store.len()).step_by(3).collect::<Vec<_>>()).unwrap(),
                _ => {
                    store.compact().unwrap();
                }
            },
            other => panic!("unknown mode {other}"),
        }
        println!("STEP {k}");
    }
}

/// The `convert` child: converts into `dir/out{k}` for k = 1, 2, ... (odd: `convert::npy` of
/// `dir/in.npy`; even: a ragged dataset through [`DatasetWriter`]), printing `STEP k` after each.
fn convert_child(dir: &Path, format: Format) {
    println!("READY");
    for k in 1u64.. {
        let out = dir.join(format!("out{k}"));
        let opts = WriteOptions::new().format(format).codec(codec_of(k / 2));
        if k % 2 == 1 {
            loaderx_core::convert::npy(dir.join("in.npy"), &out, opts).unwrap();
        } else {
            let mut w = DatasetWriter::ragged::<u8>(&out, vec![], opts).unwrap();
            for id in 0..RAGGED_RECORDS {
                w.append_record(&record(id)).unwrap();
            }
            w.finish().unwrap();
        }
        println!("STEP {k}");
    }
}

// ------------------------------------------------------------------ the parent

/// What a killed child reported: the number of steps it finished.
struct Killed {
    steps: u64,
}

/// Starts a child in `mode`, waits until it is ready, lets it run for `run` and SIGKILLs it.
fn run_and_kill(mode: &str, first_id: u64, path: &Path, run: Duration) -> Result<Killed, String> {
    let (mut child, lines) = spawn_child(mode, first_id, path);
    let ready = lines.recv_timeout(Duration::from_secs(30));
    if ready.as_deref() != Ok("READY") {
        let _ = child.kill();
        let status = child.wait().map_err(|e| e.to_string())?;
        return Err(format!("the child never got ready ({ready:?}, {status})"));
    }
    std::thread::sleep(run);
    child.kill().map_err(|e| format!("kill: {e}"))?;
    let status = child.wait().map_err(|e| e.to_string())?;
    if status.success() {
        return Err(format!("the child must have been killed, not have finished: {status}"));
    }
    let mut steps = 0;
    for line in lines.iter() {
        if let Some(k) = line.strip_prefix("STEP ") {
            steps = k.parse().map_err(|e| format!("bad step line {line:?}: {e}"))?;
        }
    }
    Ok(Killed { steps })
}

/// Runs `crash_child` in `mode` as a child process; its stdout lines arrive on the channel.
pub(crate) fn spawn_child(mode: &str, first_id: u64, path: &Path) -> (Child, mpsc::Receiver<String>) {
    let mut child = crate::common::this_binary()
        .args(["--ignored", "--exact", "crash::crash_child", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, format!("{mode}:{first_id}:{}", path.display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let out = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            // libtest prints `test crash::crash_child ... ` without a newline before the child's
            // first line, so the markers are found anywhere in a line.
            let marker = if line.ends_with("READY") {
                Some("READY".to_string())
            } else {
                line.find("STEP ").map(|at| line[at..].to_string())
            };
            if let Some(m) = marker
                && tx.send(m).is_err()
            {
                break;
            }
        }
    });
    (child, rx)
}

/// The ids a store holds, index by index, after `steps` operations of a child in `mode` that
/// started from `ids` with its next id at `next` (the same operations, on a plain `Vec`).
fn simulate(mode: &str, ids: &[u64], mut next: u64, steps: u64) -> (Vec<u64>, u64) {
    let mut ids = ids.to_vec();
    for k in 1..=steps {
        match (mode, k % 3) {
            ("append" | "deferred", _) => {
                ids.extend(next..next + APPEND_BATCH);
                next += APPEND_BATCH;
            }
            ("compact" | "fixed" | "compact16", 1) => {
                ids.extend(next..next + COMPACT_BATCH);
                next += COMPACT_BATCH;
            }
            ("compact" | "fixed" | "compact16", 2) => {
                // The store's delete: descending order, the last record swapped into each hole.
                let doomed: Vec<usize> = (0..ids.len()).step_by(3).collect();
                for &i in doomed.iter().rev() {
                    ids.swap_remove(i);
                }
            }
            // Compaction moves bytes, never indices.
            _ => {}
        }
    }
    (ids, next)
}

/// Reopens the store a killed child left and checks it against the model: every record intact,
/// and the ids exactly those after the operations the child reported (or one more, which may
/// have committed before the kill without being reported).
fn check_store(
    mode: &str,
    path: &Path,
    ids: &[u64],
    next: u64,
    killed: &Killed,
) -> Result<(Vec<u64>, u64), String> {
    let store = Store::open_rw(path, StoreOptions::new()).map_err(|e| format!("reopen: {e}"))?;
    let n = store.len();
    let got = store.gather(&(0..n).collect::<Vec<_>>()).map_err(|e| format!("gather: {e}"))?;
    let mut found = Vec::with_capacity(got.len());
    for (i, r) in got.iter().enumerate() {
        if r.is_empty() && matches!(mode, "compact" | "compact16") {
            found.push(EMPTY);
            continue;
        }
        found.push(check_any(mode, r).ok_or_else(|| format!("record {i} is torn ({} bytes)", r.len()))?);
    }
    let bad = store.verify().map_err(|e| format!("verify: {e}"))?.bad;
    if let Some((i, e)) = bad.first() {
        return Err(format!("verify: record {i}: {e} ({} bad)", bad.len()));
    }
    let (reported, _) = simulate(mode, ids, next, killed.steps);
    let (one_more, next_after) = simulate(mode, ids, next, killed.steps + 1);
    let shown_as = |v: &[u64]| v.iter().map(|&id| shown(mode, id)).collect::<Vec<u64>>();
    let matched = if found == shown_as(&reported) {
        Some(reported.clone())
    } else if found == shown_as(&one_more) {
        Some(one_more.clone())
    } else {
        None
    };
    // The caller goes on from the ids themselves (an empty record's id is known by its place).
    matched.map(|ids| (ids, next_after)).ok_or_else(|| {
        let unique: HashSet<&u64> = found.iter().collect();
        format!(
            "after {} reported steps the store holds {} records ({} distinct), expected {} or {}",
            killed.steps,
            found.len(),
            unique.len(),
            reported.len(),
            one_more.len()
        )
    })
}

fn crash_loop(mode: &str, format: Format) {
    let iterations = env_u64("LOADERX_CRASH_ITERS", 3);
    let mut rng = Rng::from_env();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let seed = |path: &Path| {
        let o = opts(format).overwrite(true);
        let o = match mode {
            "fixed" => o.chunk_capacity(4080).fixed_stride(FIXED_SIZE as u32),
            "compact16" => o.compact_entries(true),
            _ => o,
        };
        let store = Store::create(path, o).unwrap();
        if mode == "migrate" {
            // A store to migrate: records over several chunks and codecs.
            for b in 0..4u64 {
                let recs: Vec<Vec<u8>> = (b * 500..(b + 1) * 500).map(record).collect();
                crate::common::append(&store, &recs, codec_of(b));
            }
            ((0..2000).collect::<Vec<u64>>(), 2000)
        } else {
            (Vec::new(), 0)
        }
    };
    let (mut ids, mut next) = seed(&path);
    let (mut passed, mut failed) = (0u64, 0u64);
    for it in 0..iterations {
        let run = Duration::from_millis(rng.below(300));
        let result = run_and_kill(mode, next, &path, run)
            .and_then(|killed| check_store(mode, &path, &ids, next, &killed));
        match result {
            Ok((now, n)) => {
                passed += 1;
                (ids, next) = (now, n);
            }
            Err(e) => {
                failed += 1;
                eprintln!("crash {mode} {format}: iteration {it} (killed after {run:?}): {e}");
                // Start over from a fresh store: what is left is already reported.
                (ids, next) = seed(&path);
            }
        }
    }
    println!("crash {mode} {format}: {passed} passed, {failed} failed");
    assert_eq!(failed, 0, "crash {mode} {format}: {failed} of {iterations} iterations failed");
}

#[test]
fn crash_during_append_leaves_every_committed_record_intact() {
    for format in FORMATS {
        crash_loop("append", format);
    }
}

/// A deferred-sync writer killed at any point (the process: the page cache, which holds what it
/// published, outlives it; a machine crash before `Store::sync` is another matter) leaves every
/// record it published intact, as a writer syncing at every commit does, and the next writer
/// brings the manifest up to date.
#[test]
fn a_killed_deferred_sync_writer_leaves_every_published_record_intact() {
    for format in FORMATS {
        crash_loop("deferred", format);
    }
}

/// A migration killed at any point leaves the store (in the format it had, or the other)
/// holding every record.
#[test]
fn crash_during_migration_leaves_the_store_intact() {
    for format in FORMATS {
        crash_loop("migrate", format);
    }
}

/// A fixed-stride store killed while it appends, deletes (moving the last records' bytes into
/// the holes through the journal) and compacts: every record intact, each block's checksum right
/// (`verify`), the ids those of the operations reported.
#[test]
fn crash_during_fixed_stride_appends_and_deletes_leaves_every_committed_record_intact() {
    crash_loop("fixed", Format::V2);
}

/// A store of the compact layout (16-byte entries, raw records, every 7th empty) killed while
/// it appends, deletes and compacts: every record intact and checked (`verify`), the ids those
/// of the operations reported.
#[test]
fn crash_during_compact_entry_appends_deletes_and_compaction_leaves_every_record_intact() {
    crash_loop("compact16", Format::V2);
}

#[test]
fn crash_during_delete_and_compaction_leaves_every_committed_record_intact() {
    for format in FORMATS {
        crash_loop("compact", format);
    }
}

/// Checks one output of the `convert` child: a complete, correct dataset.
fn check_output(out: &Path, k: u64, values: &[f32]) -> Result<(), String> {
    if k % 2 == 1 {
        let d = DenseDataset::<f32>::open(out).map_err(|e| format!("open: {e}"))?;
        if d.len() != NPY_ROWS {
            return Err(format!("{} rows, expected {NPY_ROWS}", d.len()));
        }
        let got = d.get_vec(&(0..NPY_ROWS as u32).collect::<Vec<_>>()).map_err(|e| e.to_string())?;
        if got != values {
            return Err("values differ from the input".into());
        }
    } else {
        let d = RaggedDataset::<u8>::open(out).map_err(|e| format!("open: {e}"))?;
        if d.len() as u64 != RAGGED_RECORDS {
            return Err(format!("{} records, expected {RAGGED_RECORDS}", d.len()));
        }
        let got = d.get_batch(&(0..RAGGED_RECORDS as u32).collect::<Vec<_>>()).map_err(|e| e.to_string())?;
        if let Some(i) = got.iter().enumerate().position(|(i, r)| check_record(r) != Some(i as u64)) {
            return Err(format!("record {i} is not intact"));
        }
    }
    Ok(())
}

/// After a killed conversion: every reported output is complete; the one in flight is complete
/// or absent; nothing later exists; no staging directory opens as a dataset.
fn check_convert(dir: &Path, killed: &Killed, values: &[f32], format: Format) -> Result<(), String> {
    for k in 1..=killed.steps + 1 {
        let out = dir.join(format!("out{k}"));
        if k > killed.steps && !out.exists() {
            continue;
        }
        check_output(&out, k, values).map_err(|e| format!("{}: {e}", out.display()))?;
        let written = Store::open(&out).map_err(|e| e.to_string())?.format();
        if written != format {
            return Err(format!("{} is a {written} store, expected {format}", out.display()));
        }
    }
    let later = dir.join(format!("out{}", killed.steps + 2));
    if later.exists() {
        return Err(format!("{} exists after {} reported steps", later.display(), killed.steps));
    }
    for entry in std::fs::read_dir(dir).map_err(|e| e.to_string())? {
        let p = entry.map_err(|e| e.to_string())?.path();
        if p.to_string_lossy().ends_with(".partial")
            && (DenseDataset::<f32>::open(&p).is_ok() || RaggedDataset::<u8>::open(&p).is_ok())
        {
            return Err(format!("the staging directory {} opens as a dataset", p.display()));
        }
    }
    Ok(())
}

#[test]
fn crash_during_conversion_leaves_a_complete_dataset_or_none() {
    for format in FORMATS {
        crash_convert(format);
    }
}

fn crash_convert(format: Format) {
    let iterations = env_u64("LOADERX_CRASH_ITERS", 3);
    let mut rng = Rng::from_env();
    let root = tempfile::tempdir().unwrap();
    let values: Vec<f32> = (0..NPY_ROWS * 16).map(|i| (i % 251) as f32 * 0.5 - (i % 7) as f32).collect();
    let mut npy = NpyHeader::encode(DType::F32, &[NPY_ROWS, 16]).unwrap();
    npy.extend(values.iter().flat_map(|v| v.to_le_bytes()));
    let (mut passed, mut failed) = (0u64, 0u64);
    for it in 0..iterations {
        let dir: PathBuf = root.path().join(format!("it{it}"));
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("in.npy"), &npy).unwrap();
        let run = Duration::from_millis(rng.below(800));
        let mode = format!("convert.{format}");
        match run_and_kill(&mode, 0, &dir, run)
            .and_then(|killed| check_convert(&dir, &killed, &values, format))
        {
            Ok(()) => passed += 1,
            Err(e) => {
                failed += 1;
                eprintln!("crash convert {format}: iteration {it} (killed after {run:?}): {e}");
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
    println!("crash convert {format}: {passed} passed, {failed} failed");
    assert_eq!(failed, 0, "crash convert {format}: {failed} of {iterations} iterations failed");
}
