//! Token layer (issue 45): random windows of 1,025 `u16` tokens, 64 a batch, gathered from a
//! token file by loaderx's `windows` sampler against the ceiling (a memcpy of the same windows
//! from the same mapping into a page-aligned buffer), interleaved; then the first batch of a
//! freshly opened file, by its size: windows of 1- and 10-billion-token headerless files (sparse:
//! their bytes read as zeros) and Megatron's GPT samples over 1 billion tokens in 1, 5 and 10
//! million documents (the `.idx` real, the `.bin` sparse), each timed from the open to the first
//! batch in hand.

use std::hint::black_box;
use std::io::Write;
use std::path::Path;
use std::time::Instant;

use loaderx_core::framing::MappedFile;
use loaderx_core::tokens::{TokenFile, TokenType};

use crate::report::{self, Report, Row, Section};
use crate::run::Config;
use crate::timing::{self, Contender};
use crate::workloads::PageAligned;

const WINDOW: usize = 1025;
const BATCH: usize = 64;
const CEILING: &str = "memcpy → page-aligned buffer";

/// xorshift64*: the windows' starts, the same for every contender.
fn starts(seed: u64, n: usize, below: u64) -> Vec<u32> {
    let mut s = seed | 1;
    (0..n)
        .map(|_| {
            s ^= s >> 12;
            s ^= s << 25;
            s ^= s >> 27;
            (s.wrapping_mul(0x2545_f491_4f6c_dd1d) % below) as u32
        })
        .collect()
}

/// A headerless file of `tokens` pseudo-random `u16` tokens.
fn write_tokens(path: &Path, tokens: usize) -> std::io::Result<()> {
    let mut f = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(path)?);
    let mut s = 0x9e37_79b9_7f4a_7c15u64;
    for _ in 0..tokens {
        s = s.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        f.write_all(&((s >> 48) as u16 % 50_257).to_le_bytes())?;
    }
    f.flush()
}

/// A Megatron dataset at `prefix`: `docs` documents of `tokens / docs` tokens each (`u16`), the
/// `.idx` written whole, the `.bin` sparse.
fn write_sparse_megatron(prefix: &Path, tokens: u64, docs: u64) -> std::io::Result<()> {
    let per = tokens / docs;
    let mut idx = Vec::with_capacity(34 + 20 * docs as usize + 8);
    idx.extend_from_slice(b"MMIDIDX\x00\x00");
    idx.extend_from_slice(&1u64.to_le_bytes());
    idx.push(8); // u16
    idx.extend_from_slice(&docs.to_le_bytes());
    idx.extend_from_slice(&(docs + 1).to_le_bytes());
    for _ in 0..docs {
        idx.extend_from_slice(&(per as i32).to_le_bytes());
    }
    for d in 0..docs {
        idx.extend_from_slice(&((d * per * 2) as i64).to_le_bytes());
    }
    for d in 0..=docs {
        idx.extend_from_slice(&(d as i64).to_le_bytes());
    }
    std::fs::write(prefix.with_extension("idx"), idx)?;
    std::fs::File::create(prefix.with_extension("bin"))?.set_len(per * docs * 2)
}

/// This process's resident memory, from `/proc/self/statm` (Linux; `None` elsewhere).
fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}

/// Seconds from `open` to the first batch in hand, the median of `rounds` fresh opens; and the
/// resident memory the last open added.
fn first_batch(rounds: usize, open: impl Fn() -> loaderx_core::DenseSource) -> (f64, Option<u64>) {
    let mut times = Vec::with_capacity(rounds);
    let mut grew = None;
    for _ in 0..rounds {
        let before = resident_bytes();
        let t = Instant::now();
        let source = open();
        let idx = starts(7, BATCH, source.len() as u64);
        let batch = source.get_batch(&idx).expect("a batch");
        times.push(t.elapsed().as_secs_f64());
        black_box(&batch);
        grew = before.zip(resident_bytes()).map(|(b, a)| a.saturating_sub(b));
    }
    times.sort_by(f64::total_cmp);
    (times[times.len() / 2], grew)
}

fn mib(b: Option<u64>) -> String {
    b.map_or_else(|| "n/a".into(), |b| format!("{:.1} MiB", b as f64 / f64::from(1 << 20)))
}

/// Measures the layer and adds its rows and tables.
///
/// # Errors
/// Writing the data files.
pub(crate) fn run(cfg: &Config, report: &mut Report) -> anyhow::Result<()> {
    let dir = tempfile::tempdir_in(&cfg.dir)?;
    let tokens = if cfg.quick { 4 << 20 } else { 64 << 20 };
    let path = dir.path().join("tokens.bin");
    cfg.progress("tokens: writing the token file");
    write_tokens(&path, tokens)?;

    // 1. Warm windows against the memcpy of the same windows.
    let map = MappedFile::open(&path)?;
    let file = TokenFile::open_raw(&path, TokenType::U16)?;
    let windows = file.windows(WINDOW, Some(1))?;
    let batches: Vec<Vec<u32>> = (0..64).map(|k| starts(k + 1, BATCH, windows.len() as u64)).collect();
    let bytes = BATCH * WINDOW * 2;
    let (mut a, mut b) = (PageAligned::new(bytes, 0), PageAligned::new(bytes, 0));
    let (mut ka, mut kb) = (0usize, 0usize);
    let src = map.bytes();
    let mut contenders = vec![
        Contender::new(
            CEILING,
            Box::new(|| {
                let dst = a.slice();
                for (j, &s) in batches[ka % batches.len()].iter().enumerate() {
                    let at = s as usize * 2;
                    dst[j * WINDOW * 2..(j + 1) * WINDOW * 2].copy_from_slice(&src[at..at + WINDOW * 2]);
                }
                ka += 1;
                black_box(&dst);
            }),
        ),
        Contender::new(
            "loaderx windows",
            Box::new(|| {
                windows.gather_bytes(&batches[kb % batches.len()], b.slice()).expect("a batch");
                kb += 1;
                black_box(b.slice());
            }),
        ),
    ];
    cfg.progress("tokens: windows");
    let t = timing::interleaved(cfg.rounds, cfg.target, 2, &mut contenders);
    let workload = format!("{BATCH} windows of {WINDOW} u16 tokens, file of {} Mi tokens", tokens >> 20);
    let mut s = Section::new(
        format!("Tokens — random windows, {workload}, warm, one thread"),
        &["contender", "per batch", "GB/s", "vs memcpy"],
    );
    for name in contenders.iter().map(|c| c.name.clone()) {
        let secs = t.median_secs(&name);
        let gbs = bytes as f64 / secs / 1e9;
        let speed = t.speed_vs(&name, CEILING);
        let mut row = Row::new("tokens", &name, &workload, gbs, "GB/s");
        if name != CEILING {
            row = row.vs(CEILING, speed);
        }
        report.rows.push(row);
        s.rows.push(vec![name.clone(), report::duration(secs), format!("{gbs:.2}"), report::ratio(speed)]);
    }
    s.notes.push(
        "Both copy the same windows (the same starts) out of the same mapping; loaderx's row is \
         `windows(1025).gather_bytes`, the sampler's dataset as the loader calls it."
            .into(),
    );
    report.sections.push(s);
    drop(contenders);

    first_batches(cfg, dir.path(), report)
}

/// Section 2: the first batch of a freshly opened file, by its size (sparse files in `dir`).
fn first_batches(cfg: &Config, dir: &Path, report: &mut Report) -> anyhow::Result<()> {
    // 2. First batch of a freshly opened file, by its size (sparse files: no disk is read): the
    // windows of two headerless files ten times apart, the Megatron samples of one billion
    // tokens in 1, 5 and 10 million documents (the range).
    let sizes: &[u64] = if cfg.quick { &[10_000_000, 100_000_000] } else { &[1_000_000_000, 10_000_000_000] };
    let corpora: &[(u64, u64)] = if cfg.quick {
        &[(10_000_000, 50_000)]
    } else {
        &[(1_000_000_000, 1_000_000), (1_000_000_000, 5_000_000), (1_000_000_000, 10_000_000)]
    };
    let rounds = cfg.rounds.max(3);
    let mut s = Section::new(
        "Tokens — the first batch of a freshly opened file (open, sampler, 64 samples of 1,025 tokens)",
        &["file", "sampler", "open to first batch", "resident memory added"],
    );
    for &big in sizes {
        let raw = dir.join(format!("big-{big}.bin"));
        std::fs::File::create(&raw)?.set_len(big * 2)?;
        cfg.progress("tokens: first batches of windows");
        let (secs, mem) = first_batch(rounds, || {
            TokenFile::open_raw(&raw, TokenType::U16).and_then(|f| f.windows(WINDOW, None)).expect("opens")
        });
        let name = format!("{} tokens, headerless u16", report::thousands(big as f64));
        report.rows.push(Row::new("tokens", "first batch, windows", &name, secs, "s"));
        s.rows.push(vec![name, "windows(1025)".into(), report::duration(secs), mib(mem)]);
        std::fs::remove_file(&raw)?;
    }
    for &(docs_tokens, docs) in corpora {
        let prefix = dir.join(format!("corpus-{docs}"));
        cfg.progress("tokens: writing a Megatron index");
        write_sparse_megatron(&prefix, docs_tokens, docs)?;
        cfg.progress("tokens: first batches of Megatron samples");
        let (secs, mem) = first_batch(rounds, || {
            TokenFile::open(&prefix).and_then(|f| f.sequences(WINDOW, Some(1))).expect("opens")
        });
        let name = format!(
            "{} tokens in {} documents, Megatron",
            report::thousands(docs_tokens as f64),
            report::thousands(docs as f64)
        );
        report.rows.push(Row::new("tokens", "first batch, Megatron samples", &name, secs, "s"));
        s.rows.push(vec![name, "sequences(1025, seed)".into(), report::duration(secs), mib(mem)]);
        for ext in ["bin", "idx"] {
            std::fs::remove_file(prefix.with_extension(ext))?;
        }
    }
    s.notes.push(format!(
        "Median of {rounds} fresh opens, page cache warm for the index. The .bin files are sparse \
         (their tokens read as zeros), so the times are the open's and the sampler's, not the \
         disk's. Megatron's samples check every sequence and document of the index and order \
         the documents by the seed (4.5 bytes a document where the index holds one sequence a \
         document) before the first batch."
    ));
    report.sections.push(s);
    Ok(())
}
