//! Remote reads on loopback (feature `remote`): a v2 store pushed to an S3-compatible server
//! started here (s3s-fs on 127.0.0.1; chunk files of 16 MiB), then batches of 256 records of 12 KiB gathered locally,
//! remotely with the default coalescing, remotely one request per record, and remotely in
//! block-cyclic order. Interleaved rounds, median per-round ratios to the local gather; no
//! network in the way, so this measures the request path's cost, not a link's speed.
//!
//! `cargo bench --features remote --bench remote`

use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder as ConnBuilder;
use loaderx::remote::{RemoteOptions, push};
use loaderx::{Codec, DType, DenseSource, Sampler, SamplerMode, Schema, Store, StoreOptions};
use loaderx_bench::timing::{FixedContender, interleaved_fixed};

const RECORDS: u32 = 20_000;
const ELEMS: usize = 3072;
const BATCH: u32 = 256;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let tmp = tempfile::tempdir()?;
    let root = tmp.path().join("s3");
    std::fs::create_dir_all(root.join("bucket"))?;
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let fs = s3s_fs::FileSystem::new(&root).map_err(|e| format!("{e:?}"))?;
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
    let opts = RemoteOptions::new()
        .endpoint(&endpoint)
        .region("us-east-1")
        .credentials("AKIDBENCH", "SECRETBENCHKEY")
        .allow_http(true);

    let local_dir = tmp.path().join("x");
    // Chunk files of 16 MiB: objects of the size a store on object storage would use.
    let store = Store::create(&local_dir, StoreOptions::new().chunk_capacity(16 << 20))?;
    for lo in (0..RECORDS).step_by(2000) {
        let recs: Vec<Vec<u8>> = (lo..lo + 2000)
            .map(|i| (0..ELEMS).flat_map(|e| ((i as usize * ELEMS + e) as f32).to_ne_bytes()).collect())
            .collect();
        store.append(&recs, Codec::Raw)?;
    }
    drop(store);
    Schema::dense(DType::F32, vec![ELEMS]).write(&local_dir)?;
    push(&local_dir, "s3://bucket/x", opts.clone(), |_| {})?;
    let local = DenseSource::open(&local_dir)?;
    let coalesced = DenseSource::open_remote("s3://bucket/x", opts.clone())?;
    let per_record = DenseSource::open_remote("s3://bucket/x", opts.clone().max_gap(0).max_request(1))?;
    let cyclic = Sampler::builder(RECORDS).batch_size(BATCH).mode(SamplerMode::Cyclic).seed(7).build()?;
    let blocks = Sampler::builder(RECORDS)
        .batch_size(BATCH)
        .mode(SamplerMode::BlockCyclic { block: 64, window: 8 })
        .seed(7)
        .build()?;
    let gather = |source: &DenseSource, sampler: &Sampler, step: &mut u64| {
        let idx = sampler.batch(*step);
        *step += 1;
        std::hint::black_box(source.get_batch(&idx).expect("a batch"));
    };
    let (mut s0, mut s1, mut s2, mut s3) = (0u64, 0u64, 0u64, 0u64);
    let mut contenders: Vec<FixedContender<'_>> = vec![
        ("local gather (random batch)", Box::new(|| gather(&local, &cyclic, &mut s0))),
        ("remote, coalesced (random batch)", Box::new(|| gather(&coalesced, &cyclic, &mut s1))),
        ("remote, one request per record", Box::new(|| gather(&per_record, &cyclic, &mut s2))),
        ("remote, coalesced, block-cyclic batch (64 x 8)", Box::new(|| gather(&coalesced, &blocks, &mut s3))),
    ];
    let results = interleaved_fixed(7, 8, &mut contenders);
    let mib = f64::from(BATCH) * (ELEMS * 4) as f64 / f64::from(1 << 20);
    println!(
        "Remote reads on loopback: {RECORDS} records of 12 KiB, batch {BATCH}, median of 7 interleaved rounds"
    );
    println!("| contender | per batch | MiB/s | vs local |");
    println!("|---|---:|---:|---:|");
    for r in &results {
        let secs = r.median_ns / 1e9;
        println!("| {} | {:.2} ms | {:.0} | {:.3}x |", r.name, secs * 1e3, mib / secs, r.speed_vs_baseline);
    }
    drop(contenders);
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    Ok(())
}
