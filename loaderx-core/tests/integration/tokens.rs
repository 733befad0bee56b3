//! Token streams (issue 45): Megatron, llm.c and headerless token files read where they lie,
//! their samplers as loader streams, and every lying header field a typed error naming the file
//! and the field.

use std::path::{Path, PathBuf};

use loaderx_core::tokens::{MegatronWriter, TokenFile, TokenFormat, TokenType, write_llmc};
use loaderx_core::{DataLoader, Error, SamplerMode};

/// Token `j` of document `k`: the document and the position in one id (documents of under
/// 1,000 tokens, at most 65 of them, fit `u16`).
fn token(k: usize, j: usize) -> u16 {
    (k * 1000 + j) as u16
}

/// Documents of varied lengths, some empty.
pub(crate) fn documents(count: usize) -> Vec<Vec<u16>> {
    (0..count).map(|k| (0..(k * 37 + 11) % 300).map(|j| token(k, j)).collect()).collect()
}

pub(crate) fn write_megatron(dir: &Path, docs: &[Vec<u16>]) -> PathBuf {
    let prefix = dir.join("corpus.v1");
    let mut w = MegatronWriter::create(&prefix, TokenType::U16, false).unwrap();
    for d in docs {
        w.add_document(d).unwrap();
    }
    w.finish().unwrap();
    prefix
}

pub(crate) fn suffixed(p: &Path, s: &str) -> PathBuf {
    PathBuf::from(format!("{}{s}", p.display()))
}

/// The tokens of every record of `source`, gathered through the loader's own path (a dataset
/// view's batch).
pub(crate) fn rows(source: &loaderx_core::DenseSource, indices: &[u32]) -> Vec<Vec<u16>> {
    let n = source.item_shape()[0];
    let batch = source.get_batch(indices).unwrap();
    batch.as_slice::<u16>().unwrap().chunks(n).map(<[u16]>::to_vec).collect()
}

#[test]
fn a_megatron_dataset_opens_by_prefix_bin_or_idx_and_its_windows_are_its_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let docs = documents(40);
    let prefix = write_megatron(dir.path(), &docs);
    let all: Vec<u16> = docs.concat();
    for path in [prefix.clone(), suffixed(&prefix, ".bin"), suffixed(&prefix, ".idx")] {
        let f = TokenFile::open(&path).unwrap();
        assert_eq!(f.len(), all.len() as u64, "{}", path.display());
        assert_eq!(f.documents(), Some(40));
        assert_eq!(f.token_type(), TokenType::U16);
        assert!(matches!(f.format(), TokenFormat::Megatron { .. }));
        f.verify().unwrap();
    }
    let f = TokenFile::open(&prefix).unwrap();
    let w = f.windows(65, None).unwrap();
    assert_eq!(w.len(), all.len() - 64);
    let last = (all.len() - 65) as u32;
    for (i, row) in [0u32, 1, 777, last].iter().zip(rows(&w, &[0, 1, 777, last])) {
        assert_eq!(row, &all[*i as usize..*i as usize + 65]);
    }
    assert!(matches!(w.get_batch(&[last + 1]), Err(Error::IndexOutOfRange { .. })));
    let strided = f.windows(65, Some(64)).unwrap();
    assert_eq!(strided.len(), (all.len() - 65) / 64 + 1);
    assert_eq!(rows(&strided, &[3])[0], &all[192..257]);
    // A stride past the file leaves the one window at 0 (its byte offset overflowed).
    for stride in [all.len() as u64, 1 << 63, u64::MAX] {
        let one = f.windows(65, Some(stride)).unwrap();
        assert_eq!(one.len(), 1, "{stride}");
        assert_eq!(rows(&one, &[0])[0], &all[..65], "{stride}");
    }
    assert_eq!(f.read(5, 3).unwrap(), all[5..8].iter().map(|&t| i64::from(t)).collect::<Vec<_>>());
}

/// Megatron's samples: `n - 1` tokens apart, overlapping by one, running from a document into
/// the next; with a seed the documents come in a shuffled order, each whole and once.
#[test]
fn megatron_samples_cut_the_shuffled_documents_into_overlapping_windows() {
    let dir = tempfile::tempdir().unwrap();
    let docs = documents(60);
    let prefix = write_megatron(dir.path(), &docs);
    let f = TokenFile::open(&prefix).unwrap();
    let total: usize = docs.iter().map(Vec::len).sum();
    let n = 129;
    let plain = f.sequences(n, None).unwrap();
    assert_eq!(plain.len(), (total - 1) / (n - 1));
    let all = docs.concat();
    let idx: Vec<u32> = (0..plain.len() as u32).collect();
    for (i, row) in rows(&plain, &idx).iter().enumerate() {
        assert_eq!(row, &all[i * (n - 1)..i * (n - 1) + n], "sample {i}");
    }
    let mut orders = Vec::new();
    for seed in [1u64, 2, 1] {
        let shuffled = f.sequences(n, Some(seed)).unwrap();
        assert_eq!(shuffled.len(), plain.len());
        let order = document_order(&rows(&shuffled, &idx), &docs);
        orders.push(order);
    }
    assert_eq!(orders[0], orders[2], "the order is the seed's");
    assert_ne!(orders[0], orders[1]);
    assert_ne!(orders[0], (0..orders[0].len()).collect::<Vec<_>>());
}

/// The documents, in order, of the stream that consecutive Megatron samples cut: the first
/// sample whole, then each without its overlap, whole documents (the last one cut), each once.
fn document_order(samples: &[Vec<u16>], docs: &[Vec<u16>]) -> Vec<usize> {
    let mut stream = samples[0].clone();
    for (s, prev) in samples[1..].iter().zip(samples) {
        assert_eq!(s[0], *prev.last().unwrap(), "samples overlap by one token");
        stream.extend_from_slice(&s[1..]);
    }
    let mut order = Vec::new();
    let mut at = 0;
    while at < stream.len() {
        let k = stream[at] as usize / 1000;
        let doc = &docs[k];
        let take = doc.len().min(stream.len() - at);
        assert_eq!(&stream[at..at + take], &doc[..take], "document {k} at {at}");
        assert!(!order.contains(&k), "document {k} twice");
        order.push(k);
        at += take;
    }
    order
}

/// Over several epochs the documents come in a new order each epoch (Megatron's per-epoch
/// document index), record `i` sample `i % s` of epoch `i / s`; the first epoch is the one-epoch
/// sampler's; an epoch's order is the same whichever sample reads it first; without a seed, or
/// without documents, every epoch is the first.
#[test]
fn megatron_samples_shuffle_the_documents_anew_each_epoch() {
    let dir = tempfile::tempdir().unwrap();
    let docs = documents(60);
    let prefix = write_megatron(dir.path(), &docs);
    let f = TokenFile::open(&prefix).unwrap();
    let n = 65;
    let one = f.sequences(n, Some(5)).unwrap();
    let per = one.len() as u32;
    let three = f.sequences_epochs(n, Some(5), 3).unwrap();
    assert_eq!(three.len(), 3 * one.len());
    let epoch = |e: u32| (e * per..(e + 1) * per).collect::<Vec<u32>>();
    let epochs: Vec<Vec<Vec<u16>>> = (0..3).map(|e| rows(&three, &epoch(e))).collect();
    assert_eq!(epochs[0], rows(&one, &epoch(0)), "the first epoch is the one-epoch sampler's");
    let orders: Vec<Vec<usize>> = epochs.iter().map(|s| document_order(s, &docs)).collect();
    assert!(orders[0] != orders[1] && orders[1] != orders[2] && orders[0] != orders[2], "{orders:?}");
    // Read last epoch first, on a new source, samples of all three mixed in one batch.
    let again = f.sequences_epochs(n, Some(5), 3).unwrap();
    let mixed: Vec<u32> = vec![2 * per + 7, 7, per + 7, 2 * per];
    assert_eq!(
        rows(&again, &mixed),
        vec![epochs[2][7].clone(), epochs[0][7].clone(), epochs[1][7].clone(), epochs[2][0].clone()]
    );
    assert!(matches!(again.get_batch(&[3 * per]), Err(Error::IndexOutOfRange { .. })));
    // No seed: the file's order every epoch.
    let plain = f.sequences_epochs(n, None, 2).unwrap();
    assert_eq!(rows(&plain, &epoch(1)), rows(&plain, &epoch(0)));
    // No documents: the same samples every epoch.
    let raw = dir.path().join("raw.bin");
    std::fs::write(&raw, (0..70_000u32).flat_map(|t| (t as u16).to_le_bytes()).collect::<Vec<u8>>()).unwrap();
    let r = TokenFile::open_raw(&raw, TokenType::U16).unwrap();
    let two = r.sequences_epochs(9, Some(1), 2).unwrap();
    let s = (70_000 - 1) / 8;
    assert_eq!(two.len(), 2 * s);
    assert_eq!(rows(&two, &[3, s as u32 + 3]), vec![rows(&two, &[3])[0].clone(); 2]);
    // Epochs from 1 to 65,536, and at most 2^32 - 1 samples in all.
    for bad in [0, 65_537] {
        let e = f.sequences_epochs(n, Some(5), bad);
        assert!(matches!(e, Err(Error::InvalidArgument(ref m)) if m.contains("epochs")), "{bad}: {e:?}");
    }
    let many = r.sequences_epochs(2, Some(1), 65_536);
    assert!(matches!(many, Err(Error::InvalidArgument(ref m)) if m.contains("2^32 - 1")), "{many:?}");
    assert_eq!(r.sequences_epochs(2, Some(1), 1_000).unwrap().len(), 69_999 * 1_000);
}

/// The loader takes a token sampler as any dense stream: `[B, n]` batches of the file's dtype,
/// resumed exactly from a saved state.
#[test]
fn token_windows_are_a_loader_stream_that_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = write_megatron(dir.path(), &documents(30));
    let f = TokenFile::open(&prefix).unwrap();
    let b = DataLoader::builder()
        .stream("tokens", f.windows(33, None).unwrap())
        .batch_size(8)
        .seed(3)
        .mode(SamplerMode::Iid)
        .threads(2);
    let take = |l: &mut DataLoader<loaderx_core::Batch>, k: usize| -> Vec<Vec<u16>> {
        (0..k)
            .map(|_| {
                let batch = l.next_batch().unwrap().unwrap();
                let t = batch.get("tokens").unwrap();
                assert_eq!(t.shape(), &[8, 33]);
                t.as_slice::<u16>().unwrap().to_vec()
            })
            .collect()
    };
    let full = take(&mut b.clone().build().unwrap(), 12);
    let mut first = b.clone().build().unwrap();
    let head = take(&mut first, 5);
    let state = first.state();
    drop(first);
    let rest = take(&mut b.state(state).build().unwrap(), 7);
    assert_eq!([head, rest].concat(), full);
}

#[test]
fn llmc_and_headerless_files_open_and_window() {
    let dir = tempfile::tempdir().unwrap();
    let t16: Vec<u16> = (0..5000).map(|i| (i * 7 % 50257) as u16).collect();
    let t32: Vec<u32> = (0..3000).map(|i| i * 101 % 128_256).collect();
    let (a, b) = (dir.path().join("gpt2.bin"), dir.path().join("llama.bin"));
    write_llmc(&a, &t16, false).unwrap();
    write_llmc(&b, &t32, false).unwrap();
    assert!(matches!(write_llmc(&a, &t16, false), Err(Error::AlreadyExists { .. })));
    let fa = TokenFile::open(&a).unwrap();
    assert_eq!((fa.len(), fa.token_type(), fa.documents()), (5000, TokenType::U16, None));
    assert!(matches!(fa.format(), TokenFormat::Llmc { version: 1 }));
    assert_eq!(rows(&fa.windows(10, None).unwrap(), &[4990])[0], &t16[4990..5000]);
    let fb = TokenFile::open(&b).unwrap();
    assert_eq!((fb.len(), fb.token_type()), (3000, TokenType::U32));
    let w = fb.windows(4, None).unwrap();
    assert_eq!(w.get_batch(&[17]).unwrap().as_slice::<u32>().unwrap(), &t32[17..21]);
    // A file without documents is one: its samples are windows n - 1 apart.
    let s = fa.sequences(101, Some(9)).unwrap();
    assert_eq!(s.len(), 4999 / 100);
    assert_eq!(rows(&s, &[2])[0], &t16[200..301]);

    let raw = dir.path().join("train.bin");
    std::fs::write(&raw, bytemuck::cast_slice::<u16, u8>(&t16)).unwrap();
    let Err(Error::BadInput { path, reason, .. }) = TokenFile::open(&raw) else { panic!("needs its dtype") };
    assert_eq!(path, raw);
    assert!(reason.contains("open_raw"), "{reason}");
    let f = TokenFile::open_raw(&raw, TokenType::U16).unwrap();
    assert_eq!(f.len(), 5000);
    assert_eq!(rows(&f.windows(3, None).unwrap(), &[0])[0], &t16[..3]);
    assert!(matches!(TokenFile::open_raw(&raw, TokenType::U32), Ok(f) if f.len() == 2500));
    drop(f); // Windows refuses to cut a file a handle maps
    std::fs::write(&raw, [1u8, 2, 3]).unwrap();
    assert!(
        matches!(TokenFile::open_raw(&raw, TokenType::U16), Err(Error::BadInput { path, .. }) if path == raw)
    );
    // Too short for a window; windows and samples of 0 or 1 token.
    let f = TokenFile::open(&a).unwrap();
    assert!(matches!(f.windows(5001, None), Err(Error::InvalidArgument(_))));
    assert!(matches!(f.windows(0, None), Err(Error::InvalidArgument(_))));
    assert!(matches!(f.windows(2, Some(0)), Err(Error::InvalidArgument(_))));
    assert!(matches!(f.sequences(1, None), Err(Error::InvalidArgument(_))));
}

/// Rewrites bytes `at..` of `path` with `bytes`.
fn patch(path: &Path, at: usize, bytes: &[u8]) {
    let mut b = std::fs::read(path).unwrap();
    b[at..at + bytes.len()].copy_from_slice(bytes);
    std::fs::write(path, b).unwrap();
}

pub(crate) fn refused(r: loaderx_core::Result<impl std::fmt::Debug>) -> (PathBuf, String) {
    match r {
        Err(Error::BadInput { path, reason, .. }) => (path, reason),
        other => panic!("expected BadInput, got {other:?}"),
    }
}

/// An index whose counts, offsets, boundaries or dtype lie, a `.bin` shorter than its index
/// says, a token past a declared vocabulary: typed errors naming the file and the field.
#[test]
fn lying_token_files_are_typed_errors_naming_the_file_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let docs = documents(10);
    let prefix = write_megatron(dir.path(), &docs);
    let (bin, idx) = (suffixed(&prefix, ".bin"), suffixed(&prefix, ".idx"));
    let good_idx = std::fs::read(&idx).unwrap();
    let good_bin = std::fs::read(&bin).unwrap();
    let restore = || {
        std::fs::write(&idx, &good_idx).unwrap();
        std::fs::write(&bin, &good_bin).unwrap();
    };
    let s = docs.len();
    let (lengths, pointers, entries) = (34, 34 + 4 * s, 34 + 12 * s);

    patch(&idx, 17, &[7]); // f32: not token ids
    let (p, r) = refused(TokenFile::open(&prefix));
    assert_eq!(p, idx);
    assert!(r.starts_with("dtype"), "{r}");
    restore();
    patch(&idx, 18, &u64::MAX.to_le_bytes());
    assert!(refused(TokenFile::open(&prefix)).1.starts_with("sequence_count"));
    restore();
    patch(&idx, 26, &(1u64 << 40).to_le_bytes());
    assert!(refused(TokenFile::open(&prefix)).1.starts_with("sequence_count"));
    restore();

    // A .bin shorter than the index says.
    std::fs::write(&bin, &good_bin[..good_bin.len() - 2]).unwrap();
    let (p, r) = refused(TokenFile::open(&prefix));
    assert_eq!(p, bin);
    assert!(r.contains("ends the file"), "{r}");
    restore();

    // Lies an open does not read are found by sequences() and verify(), naming the array.
    let cases: [(usize, Vec<u8>, &str); 4] = [
        (lengths + 4, (-5i32).to_le_bytes().to_vec(), "sequence_lengths"),
        (pointers + 8 * 2, (1i64 << 50).to_le_bytes().to_vec(), "sequence_pointers"),
        (pointers + 8 * 3, 3i64.to_le_bytes().to_vec(), "sequence_pointers"),
        (entries + 8 * 4, 1i64.to_le_bytes().to_vec(), "document_indices"),
    ];
    for (at, bytes, field) in cases {
        patch(&idx, at, &bytes);
        let f = TokenFile::open(&prefix).unwrap();
        let (p, r) = refused(f.sequences(17, Some(1)));
        assert_eq!(p, idx, "{field}");
        assert!(r.starts_with(field), "{field}: {r}");
        assert!(refused(f.verify()).1.starts_with(field));
        // Windows read the .bin alone and still work.
        assert_eq!(
            f.windows(5, None).unwrap().get_batch(&[0]).unwrap().as_slice::<u16>().unwrap(),
            &good_tokens(&good_bin)[..5]
        );
        // Closed first: Windows refuses to cut a file a handle maps.
        drop(f);
        restore();
    }
    patch(&idx, entries + 8 * s, &(s as i64 - 1).to_le_bytes());
    assert!(refused(TokenFile::open(&prefix).unwrap().verify()).1.contains("not the sequence count"));
    restore();

    // A vocabulary: gathers and verify name the first token outside it.
    let f = TokenFile::open(&prefix).unwrap().vocabulary(5000);
    let w = f.windows(8, None).unwrap();
    w.get_batch(&[0]).unwrap(); // document 0's ids are below 300
    let all = docs.concat();
    let bad = all.iter().position(|&t| t >= 5000).unwrap();
    let (p, r) = refused(w.get_batch(&[bad as u32 - 3]));
    assert_eq!(p, bin);
    assert!(r.contains(&format!("token {bad} is {}", all[bad])) && r.contains("vocabulary of 5000"), "{r}");
    assert!(refused(f.verify()).1.contains(&format!("token {bad} ")));

    // llm.c: a count the file does not hold, a negative one.
    let l = dir.path().join("l.bin");
    write_llmc(&l, &[1u16, 2, 3], false).unwrap();
    patch(&l, 8, &4i32.to_le_bytes());
    let (p, r) = refused(TokenFile::open(&l));
    assert_eq!(p, l);
    assert!(r.starts_with("header[2] (token count)"), "{r}");
    patch(&l, 8, &(-1i32).to_le_bytes());
    assert!(refused(TokenFile::open(&l)).1.starts_with("header[2]"));
}

fn good_tokens(bin: &[u8]) -> Vec<u16> {
    bin.chunks_exact(2).map(|c| u16::from_le_bytes([c[0], c[1]])).collect()
}

/// Every single-byte damage of a small index (each position, three values): an open, the
/// samplers and their gathers return typed errors or data, never a panic.
#[test]
fn damaged_indexes_never_panic() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = write_megatron(dir.path(), &documents(6));
    let idx = suffixed(&prefix, ".idx");
    let good = std::fs::read(&idx).unwrap();
    for at in 0..good.len() {
        for v in [0x00u8, 0xff, 0x7f] {
            let mut b = good.clone();
            b[at] = v;
            std::fs::write(&idx, &b).unwrap();
            let Ok(f) = TokenFile::open(&prefix) else { continue };
            let _ = f.verify();
            for s in [f.sequences(9, Some(at as u64)), f.windows(9, None)].into_iter().flatten() {
                let idx: Vec<u32> = (0..s.len().min(50) as u32).collect();
                let _ = s.get_batch(&idx);
            }
        }
    }
}

/// Document-aligned samples: a Megatron dataset's documents as a ragged stream, packed by the
/// loader into rows of 129 tokens, each row whole documents (cut only where one is longer than
/// a row), each segment a document's own tokens from its start.
#[test]
fn documents_pack_into_rows_of_whole_documents() {
    let dir = tempfile::tempdir().unwrap();
    let docs = documents(40);
    let prefix = write_megatron(dir.path(), &docs);
    let f = TokenFile::open(&prefix).unwrap();
    let source = f.documents_source().unwrap();
    assert_eq!(source.len(), 40);
    let mut loader = DataLoader::builder()
        .ragged_stream("t", source)
        .pack("t", loaderx_core::Pack::new(129))
        .batch_size(4)
        .seed(2)
        .build()
        .unwrap();
    for _ in 0..5 {
        let b = loader.next_batch().unwrap().unwrap();
        let t = b.get("t").unwrap().as_slice::<u16>().unwrap().to_vec();
        let seg = b.get("t_segments").unwrap().as_slice::<i32>().unwrap().to_vec();
        let pos = b.get("t_positions").unwrap().as_slice::<i32>().unwrap().to_vec();
        assert_eq!(t.len(), 4 * 129);
        for k in 0..t.len() {
            if seg[k] == 0 {
                continue; // padding
            }
            // The token's document and place in it are its id: k * 1000 + j.
            let (doc, at) = (t[k] as usize / 1000, t[k] as usize % 1000);
            assert_eq!(pos[k] as usize, at, "a segment starts at its document's first token");
            assert_eq!(docs[doc][at], t[k]);
        }
    }
    // Files without documents have none to give.
    let l = dir.path().join("l.bin");
    write_llmc(&l, &[1u16, 2, 3], false).unwrap();
    assert!(matches!(TokenFile::open(&l).unwrap().documents_source(), Err(Error::InvalidArgument(_))));
}

/// A weighted mixture of two corpora's windows, resumed exactly.
#[test]
fn a_mixture_of_two_token_files_resumes_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let a = TokenFile::open(write_megatron(dir.path(), &documents(20))).unwrap();
    let l = dir.path().join("b.bin");
    write_llmc(&l, &(0..5000u16).map(|t| 60_000 + t % 1000).collect::<Vec<_>>(), false).unwrap();
    let b = TokenFile::open(&l).unwrap();
    let builder = loaderx_core::LoaderBuilder::mixture(vec![
        (3.0, DataLoader::builder().stream("t", a.windows(17, None).unwrap())),
        (1.0, DataLoader::builder().stream("t", b.windows(17, None).unwrap())),
    ])
    .unwrap()
    .batch_size(8)
    .seed(5);
    let rows = |l: &mut DataLoader<loaderx_core::Batch>, k: usize| -> Vec<Vec<u16>> {
        (0..k)
            .map(|_| l.next_batch().unwrap().unwrap().get("t").unwrap().as_slice::<u16>().unwrap().to_vec())
            .collect()
    };
    let full = rows(&mut builder.clone().build().unwrap(), 10);
    let from_b = full.iter().flatten().filter(|&&t| t >= 60_000).count();
    assert!(from_b > 0 && from_b < full.len() * 8 * 17 / 2, "both corpora, the first weighted 3 to 1");
    let mut first = builder.clone().build().unwrap();
    let head = rows(&mut first, 4);
    let state = first.state();
    drop(first);
    let rest = rows(&mut builder.state(state).build().unwrap(), 6);
    assert_eq!([head, rest].concat(), full);
}

/// A Megatron dataset into a loaderx dataset (a record a document) and back: the same `.bin`
/// and `.idx`, byte for byte. A file without documents becomes records of `chunk` tokens, the
/// last shorter, no token lost; a dataset of floats is not Megatron tokens.
#[test]
fn token_files_convert_into_datasets_and_export_back_to_megatron() {
    let dir = tempfile::tempdir().unwrap();
    let docs = documents(30);
    let prefix = write_megatron(dir.path(), &docs);
    let f = TokenFile::open(&prefix).unwrap();
    let out = dir.path().join("ds");
    let s = loaderx_core::convert::tokens(&f, &out, 1000, loaderx_core::WriteOptions::new()).unwrap();
    assert_eq!(s.records, 30);
    let ds = loaderx_core::RaggedDataset::<u16>::open(&out).unwrap();
    assert_eq!(ds.get_batch(&[7]).unwrap()[0], docs[7]);
    let back = dir.path().join("back");
    assert_eq!(loaderx_core::export::megatron(&out, &back, false).unwrap(), f.len());
    for ext in [".bin", ".idx"] {
        assert_eq!(
            std::fs::read(suffixed(&back, ext)).unwrap(),
            std::fs::read(suffixed(&prefix, ext)).unwrap(),
            "{ext}"
        );
    }
    assert!(matches!(loaderx_core::export::megatron(&out, &back, false), Err(Error::AlreadyExists { .. })));

    let l = dir.path().join("l.bin");
    let stream: Vec<u16> = (0..2500).collect();
    write_llmc(&l, &stream, false).unwrap();
    let out = dir.path().join("chunks");
    let s = loaderx_core::convert::tokens(
        &TokenFile::open(&l).unwrap(),
        &out,
        1000,
        loaderx_core::WriteOptions::new(),
    )
    .unwrap();
    assert_eq!((s.records, s.bytes_in), (3, 5000));
    let ds = loaderx_core::RaggedDataset::<u16>::open(&out).unwrap();
    assert_eq!(ds.get_batch(&[0, 1, 2]).unwrap().concat(), stream);

    let floats = dir.path().join("f");
    let mut w =
        loaderx_core::DatasetWriter::dense::<f32>(&floats, vec![2], loaderx_core::WriteOptions::new())
            .unwrap();
    w.append(&[1.0f32, 2.0]).unwrap();
    w.finish().unwrap();
    assert!(matches!(
        loaderx_core::export::megatron(&floats, dir.path().join("x"), false),
        Err(Error::Schema { .. })
    ));
    assert!(!dir.path().join("x.bin").exists());
}

/// More documents than one piece of the checks (65,536), with empty ones in the second piece
/// only: the lengths and numbers of the documents kept are put together across pieces that
/// left none out and pieces that did, in the file's order (the seeded order: the unit tests of
/// `tokens::documents`).
#[test]
fn megatron_samples_span_pieces_that_leave_out_empty_documents() {
    let dir = tempfile::tempdir().unwrap();
    let docs: Vec<Vec<u16>> = (0..140_000usize)
        .map(|k| if (70_000..70_100).contains(&k) && k % 3 == 0 { vec![] } else { vec![k as u16; 1 + k % 3] })
        .collect();
    let prefix = write_megatron(dir.path(), &docs);
    let f = TokenFile::open(&prefix).unwrap();
    let all = docs.concat();
    let n = 9;
    let plain = f.sequences(n, None).unwrap();
    assert_eq!(plain.len(), (all.len() - 1) / (n - 1));
    let idx: Vec<u32> = (0..plain.len() as u32).collect();
    for (i, row) in rows(&plain, &idx).iter().enumerate() {
        assert_eq!(row, &all[i * (n - 1)..i * (n - 1) + n], "sample {i}");
    }
}
