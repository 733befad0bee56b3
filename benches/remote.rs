//! Remote reads on loopback (feature `remote`): a v2 store pushed to an S3-compatible server
//! started here (s3s-fs on 127.0.0.1; chunk files of 16 MiB), then batches of 256 records of 12 KiB gathered locally,
//! remotely with the default coalescing (cyclic and IID order), remotely one request per record,
//! remotely in block-cyclic order, through a warm page cache, and a plain GET of one 16 MiB chunk
//! object (the server's ceiling for one request). Interleaved rounds, median per-round ratios to
//! the local gather; then, counted on the store, requests per batch and bytes fetched per byte
//! used for each order. No network in the way, so this measures the request path's cost, not a
//! link's speed.
//!
//! `cargo bench --features remote --bench remote`

use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder as ConnBuilder;
use loaderx::remote::{RemoteOptions, RemoteStore, push};
use loaderx::{Codec, DType, DenseSource, Sampler, SamplerMode, Schema, Store, StoreOptions};
use loaderx_bench::timing::{FixedContender, interleaved_fixed};

const RECORDS: u32 = 20_000;
const ELEMS: usize = 3072;
const BATCH: u32 = 256;

/// s3s-fs serving `root` on 127.0.0.1 and a free port: its runtime (the server runs while it
/// lives) and its endpoint.
fn start_server(
    root: &std::path::Path,
) -> Result<(tokio::runtime::Runtime, String), Box<dyn std::error::Error>> {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let fs = s3s_fs::FileSystem::new(root).map_err(|e| format!("{e:?}"))?;
    let mut b = s3s::service::S3ServiceBuilder::new(fs);
    b.set_auth(s3s::auth::SimpleAuth::from_single("AKIDBENCH", "SECRETBENCHKEY"));
    let service = b.build();
    let listener = runtime.block_on(tokio::net::TcpListener::bind(("127.0.0.1", 0)))?;
    let endpoint = format!("http://{}", listener.local_addr()?);
    runtime.spawn(async move {
        let http = ConnBuilder::new(TokioExecutor::new());
        while let Ok((socket, _)) = listener.accept().await {
            let conn = http.serve_connection(TokioIo::new(socket), service.clone()).into_owned();
            tokio::spawn(async move {
                let _ = conn.await;
            });
        }
    });
    Ok((runtime, endpoint))
}

/// The bench's store at `dir`: 12 KiB records of `f32`, raw, in chunk files of 16 MiB (objects
/// of the size a store on object storage would use).
fn write_store(dir: &std::path::Path) -> Result<(), Box<dyn std::error::Error>> {
    let store = Store::create(dir, StoreOptions::new().chunk_capacity(16 << 20))?;
    for lo in (0..RECORDS).step_by(2000) {
        let recs: Vec<Vec<u8>> = (lo..lo + 2000)
            .map(|i| (0..ELEMS).flat_map(|e| ((i as usize * ELEMS + e) as f32).to_ne_bytes()).collect())
            .collect();
        store.append(&recs, Codec::Raw)?;
    }
    drop(store);
    Schema::dense(DType::F32, vec![ELEMS]).write(dir)?;
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let tmp = tempfile::tempdir()?;
    let root = tmp.path().join("s3");
    std::fs::create_dir_all(root.join("bucket"))?;
    let (runtime, endpoint) = start_server(&root)?;
    let opts = RemoteOptions::new()
        .endpoint(&endpoint)
        .region("us-east-1")
        .credentials("AKIDBENCH", "SECRETBENCHKEY")
        .allow_http(true);

    let local_dir = tmp.path().join("x");
    write_store(&local_dir)?;
    push(&local_dir, "s3://bucket/x", opts.clone(), |_| {})?;
    let local = DenseSource::open(&local_dir)?;
    let coalesced = DenseSource::open_remote("s3://bucket/x", opts.clone())?;
    let per_record = DenseSource::open_remote("s3://bucket/x", opts.clone().max_gap(0).max_request(1))?;
    let cached =
        DenseSource::open_remote("s3://bucket/x", opts.clone().cache(tmp.path().join("cache"), 1 << 30))?;
    for lo in (0..RECORDS).step_by(BATCH as usize) {
        cached.get_batch(&(lo..(lo + BATCH).min(RECORDS)).collect::<Vec<_>>())?; // warmed: every page once
    }
    let whole = RemoteStore::open("s3://bucket/x", opts.clone())?;
    let chunk_bytes = whole.get_file("0.zr")?.len() as f64;
    let cyclic = Sampler::builder(RECORDS).batch_size(BATCH).mode(SamplerMode::Cyclic).seed(7).build()?;
    let iid = Sampler::builder(RECORDS).batch_size(BATCH).mode(SamplerMode::Iid).seed(7).build()?;
    let blocks = Sampler::builder(RECORDS)
        .batch_size(BATCH)
        .mode(SamplerMode::BlockCyclic { block: 64, window: 8 })
        .seed(7)
        .build()?;
    // Windows of B / K blocks: a batch is whole blocks.
    let blocks4 = Sampler::builder(RECORDS)
        .batch_size(BATCH)
        .mode(SamplerMode::BlockCyclic { block: 64, window: 4 })
        .seed(7)
        .build()?;
    let gather = |source: &DenseSource, sampler: &Sampler, step: &mut u64| {
        let idx = sampler.batch(*step);
        *step += 1;
        std::hint::black_box(source.get_batch(&idx).expect("a batch"));
    };
    let (mut s0, mut s1, mut s2, mut s3, mut s4, mut s5, mut s6) = (0u64, 0u64, 0u64, 0u64, 0u64, 0u64, 0u64);
    // A batch's bytes as one plain GET of part of a chunk object: the server's ceiling.
    let batch_bytes = u64::from(BATCH) * (ELEMS as u64 * 4);
    let plain_get = || {
        std::hint::black_box(whole.get_file("0.zr").expect("a GET"));
    };
    let mut contenders: Vec<FixedContender<'_>> = vec![
        ("local gather (random batch)", Box::new(|| gather(&local, &cyclic, &mut s0))),
        ("remote, coalesced (random batch)", Box::new(|| gather(&coalesced, &cyclic, &mut s1))),
        ("remote, coalesced (IID batch)", Box::new(|| gather(&coalesced, &iid, &mut s4))),
        ("remote, one request per record", Box::new(|| gather(&per_record, &cyclic, &mut s2))),
        ("remote, coalesced, block-cyclic batch (64 x 8)", Box::new(|| gather(&coalesced, &blocks, &mut s3))),
        (
            "remote, coalesced, block-cyclic batch (64 x 4)",
            Box::new(|| gather(&coalesced, &blocks4, &mut s6)),
        ),
        ("remote, warm page cache (random batch)", Box::new(|| gather(&cached, &cyclic, &mut s5))),
        ("plain GET of a 16 MiB chunk object (per batch's bytes)", Box::new(plain_get)),
    ];
    let results = interleaved_fixed(9, 8, &mut contenders);
    let mib = f64::from(BATCH) * (ELEMS * 4) as f64 / f64::from(1 << 20);
    println!(
        "Remote reads on loopback: {RECORDS} records of 12 KiB, batch {BATCH}, median of 9 interleaved rounds"
    );
    println!("| contender | per batch | MiB/s | vs local |");
    println!("|---|---:|---:|---:|");
    for r in &results {
        let (mut secs, mut ratio) = (r.median_ns / 1e9, r.speed_vs_baseline);
        if r.name.starts_with("plain GET") {
            // Scaled to a batch's bytes.
            let scale = batch_bytes as f64 / chunk_bytes;
            (secs, ratio) = (secs * scale, ratio / scale);
        }
        println!("| {} | {:.2} ms | {:.0} | {:.3}x |", r.name, secs * 1e3, mib / secs, ratio);
    }
    // Counted on the store, 16 batches of each order, no cache.
    println!("\n| order | requests per batch | bytes fetched per byte used |");
    println!("|---|---:|---:|");
    for (name, sampler) in [
        ("cyclic", &cyclic),
        ("IID", &iid),
        ("block-cyclic (64 x 8)", &blocks),
        ("block-cyclic (64 x 4)", &blocks4),
    ] {
        let store = RemoteStore::open("s3://bucket/x", opts.clone())?;
        let before = store.stats();
        for step in 100..116u64 {
            let idx: Vec<u64> = sampler.batch(step).into_iter().map(u64::from).collect();
            std::hint::black_box(store.gather(&idx)?);
        }
        let after = store.stats();
        let requests = (after.requests - before.requests) as f64 / 16.0;
        let fetched = (after.bytes_fetched - before.bytes_fetched) as f64 / (16.0 * batch_bytes as f64);
        println!("| {name} | {requests:.1} | {fetched:.2} |");
    }
    drop(contenders);
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    Ok(())
}
