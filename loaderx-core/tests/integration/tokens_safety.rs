//! Token files against hostile input and their writers' neighbours (issue 40's twelfth to
//! fifteenth looks): writers touching only their own files, indexes of empty or overlapping
//! documents, long documents, lying headers given a dtype.

use loaderx_core::Error;
use loaderx_core::tokens::{MegatronWriter, TokenFile, TokenType, write_llmc};

use crate::tokens::{documents, refused, rows, suffixed, write_megatron};

/// Twelfth look, L1-L3 and L8: the token writers write only files of their own. A user's
/// `X.partial` is never removed; a second writer of one prefix is `Locked`; without overwrite, a
/// file that appears at the output meanwhile is kept (`AlreadyExists`); and nothing is renamed
/// until both files are written, so a failure leaves the dataset there before whole.
#[test]
fn token_writers_touch_only_their_own_files() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    let theirs = [p.join("corpus.bin.partial"), p.join("corpus.idx.partial"), p.join("train.bin.partial")];
    for f in &theirs {
        std::fs::write(f, b"my half-downloaded corpus").unwrap();
    }
    let prefix = write_megatron(p, &documents(5));
    let prefix_plain = p.join("corpus");
    let mut w = MegatronWriter::create(&prefix_plain, TokenType::U16, false).unwrap();
    w.add_document(&[1u16, 2]).unwrap();
    w.finish().unwrap();
    write_llmc(p.join("train.bin"), &[1u16, 2, 3], false).unwrap();
    for f in &theirs {
        assert_eq!(std::fs::read(f).unwrap(), b"my half-downloaded corpus", "{}", f.display());
    }

    // One writer a prefix.
    let a = MegatronWriter::create(p.join("two"), TokenType::U16, false).unwrap();
    let refused = MegatronWriter::create(p.join("two"), TokenType::U16, false);
    assert!(matches!(refused, Err(Error::Locked { .. })), "{refused:?}");
    drop(a);
    let leftovers: Vec<_> = std::fs::read_dir(p)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with(".two") || n.starts_with("two"))
        .collect();
    assert!(leftovers.is_empty(), "a dropped writer leaves nothing: {leftovers:?}");

    // A .bin that appears while a writer without overwrite writes is kept.
    let mut w = MegatronWriter::create(p.join("late"), TokenType::U16, false).unwrap();
    w.add_document(&[1u16, 2, 3]).unwrap();
    std::fs::write(p.join("late.bin"), b"the user's own").unwrap();
    assert!(matches!(w.finish(), Err(Error::AlreadyExists { .. })));
    assert_eq!(std::fs::read(p.join("late.bin")).unwrap(), b"the user's own");
    assert!(!p.join("late.idx").exists());

    // An overwrite that fails (the .idx turned into a directory meanwhile) leaves the old
    // dataset whole: nothing was renamed.
    let old_bin = std::fs::read(suffixed(&prefix, ".bin")).unwrap();
    let mut w = MegatronWriter::create(&prefix, TokenType::U16, true).unwrap();
    w.add_document(&[9u16; 50]).unwrap();
    let idx = suffixed(&prefix, ".idx");
    let old_idx = std::fs::read(&idx).unwrap();
    std::fs::remove_file(&idx).unwrap();
    std::fs::create_dir(&idx).unwrap();
    std::fs::write(idx.join("x"), b"").unwrap();
    assert!(matches!(w.finish(), Err(Error::NotReplaceable { .. })));
    assert_eq!(std::fs::read(suffixed(&prefix, ".bin")).unwrap(), old_bin);
    std::fs::remove_dir_all(&idx).unwrap();
    std::fs::write(&idx, old_idx).unwrap();
    TokenFile::open(&prefix).unwrap().verify().unwrap();
}

/// Twelfth look, L6: an index of many empty documents (sparse: no disk, every field agreeing
/// with the file) sizes nothing: its documents that hold tokens are none, and an index of more
/// documents than a u32 numbers is refused before a document is read.
#[test]
fn empty_documents_size_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let write_index = |name: &str, entries: u64| {
        let prefix = dir.path().join(name);
        let mut head = b"MMIDIDX\x00\x00".to_vec();
        head.extend(1u64.to_le_bytes());
        head.push(8);
        head.extend(0u64.to_le_bytes());
        head.extend(entries.to_le_bytes());
        let f = std::fs::File::create(suffixed(&prefix, ".idx")).unwrap();
        std::io::Write::write_all(&mut &f, &head).unwrap();
        f.set_len(34 + 8 * entries).unwrap(); // every entry 0: empty documents
        std::fs::File::create(suffixed(&prefix, ".bin")).unwrap();
        prefix
    };
    let f = TokenFile::open(write_index("many", 1 << 20)).unwrap();
    assert_eq!(f.documents(), Some((1 << 20) - 1));
    f.verify().unwrap();
    assert_eq!(f.documents_source().unwrap().len(), (1 << 20) - 1, "every document, read from the index");
    assert!(matches!(f.sequences(2, Some(1)), Err(Error::InvalidArgument(_))));
    let f = TokenFile::open(write_index("huge", (1 << 32) + 2)).unwrap();
    assert!(matches!(f.sequences(2, Some(1)), Err(Error::InvalidArgument(m)) if m.contains("u32")));
    assert!(matches!(f.documents_source(), Err(Error::InvalidArgument(_))));
}

/// Look 85, F85-1: a document of three sequences of 2^31 - 1 tokens (legal in Megatron's
/// format, over the u32 this reader counts a document's tokens in) is refused as a limit of the
/// reader, naming the index, never as damage (`BadInput`, which `verify` calls "damaged").
#[test]
fn a_document_past_the_readers_u32_is_a_limit_not_damage() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = dir.path().join("big");
    let m = i32::MAX;
    let mut idx = b"MMIDIDX\x00\x00".to_vec();
    idx.extend(1u64.to_le_bytes());
    idx.push(1); // u8 tokens
    idx.extend(3u64.to_le_bytes());
    idx.extend(2u64.to_le_bytes());
    (0..3).for_each(|_| idx.extend(m.to_le_bytes()));
    (0..3i64).for_each(|s| idx.extend((s * i64::from(m)).to_le_bytes()));
    [0i64, 3].iter().for_each(|d| idx.extend(d.to_le_bytes()));
    std::fs::write(suffixed(&prefix, ".idx"), idx).unwrap();
    // Sparse: 6 GiB of address space, no blocks written.
    std::fs::File::create(suffixed(&prefix, ".bin")).unwrap().set_len(3 * m as u64).unwrap();
    let f = TokenFile::open(&prefix).unwrap();
    assert_eq!((f.len(), f.documents()), (3 * m as u64, Some(1)));
    for err in
        [f.verify().unwrap_err(), f.sequences(129, Some(1)).unwrap_err(), f.documents_source().unwrap_err()]
    {
        assert!(
            matches!(&err, Error::InvalidArgument(m) if m.contains("big.idx") && m.contains("not damage")),
            "{err}"
        );
    }
}

/// Thirteenth look, M2-M7: an index whose sequences overlap cannot make its documents larger
/// than the `.bin` (a converted dataset or a sampler sized by them); a chunk past a record's
/// limit is an error; a user's `PREFIX.lock` is not the writer's; a Megatron writer and an llm.c
/// writer of one `.bin` exclude each other; empty documents and empty records keep their
/// numbers through `convert` and `export`.
#[test]
fn thirteenth_look_token_paths() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    // M2: eight documents, each the whole .bin.
    let prefix = p.join("forged");
    let mut w = MegatronWriter::create(&prefix, TokenType::U16, false).unwrap();
    w.add_document(&(0..100u16).collect::<Vec<_>>()).unwrap();
    w.finish().unwrap();
    let mut idx = b"MMIDIDX\x00\x00".to_vec();
    idx.extend(1u64.to_le_bytes());
    idx.push(8);
    idx.extend(8u64.to_le_bytes());
    idx.extend(9u64.to_le_bytes());
    (0..8).for_each(|_| idx.extend(100i32.to_le_bytes()));
    (0..8).for_each(|_| idx.extend(0i64.to_le_bytes()));
    (0..9i64).for_each(|d| idx.extend(d.to_le_bytes()));
    std::fs::write(suffixed(&prefix, ".idx"), idx).unwrap();
    let f = TokenFile::open(&prefix).unwrap();
    let out = p.join("amplified");
    let err = loaderx_core::convert::tokens(&f, &out, 10, loaderx_core::WriteOptions::new()).unwrap_err();
    assert!(matches!(&err, Error::BadInput { reason, .. } if reason.contains("overlap")), "{err}");
    assert!(!out.exists());
    assert!(
        matches!(f.sequences(9, Some(1)), Err(Error::BadInput { reason, .. }) if reason.contains("overlap"))
    );

    // M3: records of 2^54 tokens.
    let l = p.join("l.bin");
    write_llmc(&l, &[1u16, 2, 3], false).unwrap();
    let err = loaderx_core::convert::tokens(
        &TokenFile::open(&l).unwrap(),
        p.join("c"),
        1 << 54,
        loaderx_core::WriteOptions::new(),
    )
    .unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");

    // M4, M5: a user's data.lock (empty, as flock(1) leaves it) is not the writer's lock; an
    // llm.c writer of the .bin a Megatron writer holds is Locked.
    std::fs::write(p.join("data.lock"), b"").unwrap();
    let mut w = MegatronWriter::create(p.join("data"), TokenType::U16, true).unwrap();
    w.add_document(&[1u16]).unwrap();
    let refused = write_llmc(p.join("data.bin"), &[7u16; 3], true);
    assert!(matches!(refused, Err(Error::Locked { .. })), "{refused:?}");
    w.finish().unwrap();
    assert_eq!(std::fs::read(p.join("data.lock")).unwrap(), b"");
    assert_eq!(TokenFile::open(p.join("data")).unwrap().read(0, 1).unwrap(), [1]);

    // M6: documents [1, 2], [], [3] keep their numbers through convert and export.
    let prefix = p.join("gaps");
    let mut w = MegatronWriter::create(&prefix, TokenType::U16, false).unwrap();
    for d in [&[1u16, 2][..], &[], &[3]] {
        w.add_document(d).unwrap();
    }
    w.finish().unwrap();
    let f = TokenFile::open(&prefix).unwrap();
    assert_eq!(f.documents_source().unwrap().len(), 3);
    let ds = p.join("gaps-ds");
    assert_eq!(
        loaderx_core::convert::tokens(&f, &ds, 10, loaderx_core::WriteOptions::new()).unwrap().records,
        3
    );
    let back = p.join("gaps-back");
    loaderx_core::export::megatron(&ds, &back, false).unwrap();
    for ext in [".bin", ".idx"] {
        assert_eq!(
            std::fs::read(suffixed(&back, ext)).unwrap(),
            std::fs::read(suffixed(&prefix, ext)).unwrap()
        );
    }

    // M7: three dense records of no tokens export as three empty documents.
    let empty = p.join("empty");
    let mut w = loaderx_core::DatasetWriter::dense::<u16>(&empty, vec![0], loaderx_core::WriteOptions::new())
        .unwrap();
    w.append_bytes(&[[0u8; 0]; 3]).unwrap();
    assert_eq!(w.finish().unwrap(), 3);
    loaderx_core::export::megatron(&empty, p.join("empty-m"), false).unwrap();
    assert_eq!(TokenFile::open(p.join("empty-m")).unwrap().documents(), Some(3));
}

/// Fourteenth look, N1-N3 and N6: a document of many empty sequences (every read would walk
/// them) is refused by every check; `verify` and the documents' source refuse overlapping
/// sequences as the sampler does; a dtype given for an llm.c file does not read its header as
/// tokens.
#[test]
fn fourteenth_look_token_paths() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    let index = |name: &str, lengths: &[i32], pointers: &[i64], entries: &[i64], tokens: usize| {
        let prefix = p.join(name);
        let mut idx = b"MMIDIDX\x00\x00".to_vec();
        idx.extend(1u64.to_le_bytes());
        idx.push(8);
        idx.extend((lengths.len() as u64).to_le_bytes());
        idx.extend((entries.len() as u64).to_le_bytes());
        lengths.iter().for_each(|l| idx.extend(l.to_le_bytes()));
        pointers.iter().for_each(|q| idx.extend(q.to_le_bytes()));
        entries.iter().for_each(|e| idx.extend(e.to_le_bytes()));
        std::fs::write(suffixed(&prefix, ".idx"), idx).unwrap();
        std::fs::write(
            suffixed(&prefix, ".bin"),
            (0..tokens as u16).flat_map(u16::to_le_bytes).collect::<Vec<u8>>(),
        )
        .unwrap();
        TokenFile::open(&prefix).unwrap()
    };
    // N1: one document of 1,000 empty sequences and one of 4 tokens.
    let mut lengths = vec![0i32; 1000];
    lengths.push(4);
    let f = index("empties", &lengths, &vec![0i64; 1001], &[0, 1001], 4);
    for r in
        [f.verify().map(|_| 0), f.documents_source().map(|s| s.len()), f.sequences(2, None).map(|s| s.len())]
    {
        assert!(
            matches!(&r, Err(Error::BadInput { reason, .. }) if reason.contains("empty sequences")),
            "{r:?}"
        );
    }
    // One empty sequence beside one with tokens is a document as Megatron writes it.
    let f = index("one-empty", &[0, 4], &[0, 0], &[0, 2], 4);
    assert_eq!(
        f.documents_source().unwrap().get_batch(&[0]).unwrap().values().as_bytes(),
        &[0, 0, 1, 0, 2, 0, 3, 0]
    );
    // N2, N3: three sequences, each the whole .bin.
    let f = index("overlap", &[100, 100, 100], &[0, 0, 0], &[0, 3], 100);
    for r in [f.verify().map(|_| 0), f.documents_source().map(|s| s.len())] {
        assert!(matches!(&r, Err(Error::BadInput { reason, .. }) if reason.contains("overlap")), "{r:?}");
    }
    // N6: an llm.c file given a dtype.
    let l = p.join("l.bin");
    write_llmc(&l, &[1u16, 2, 3, 4], false).unwrap();
    let r = TokenFile::open_raw(&l, TokenType::U16);
    assert!(matches!(&r, Err(Error::BadInput { reason, .. }) if reason.contains("llm.c")), "{r:?}");
}

/// Fifteenth look, P1 and P4: a document of many sequences is read from its nearest checkpoint
/// (every sample right, wherever it lies in the document), and `read` keeps to the vocabulary.
#[test]
fn long_documents_and_the_vocabulary_in_read() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = dir.path().join("one");
    // One document of 5,000 sequences of 1 to 3 tokens (some empty ones between), contiguous.
    let lens: Vec<i32> = (0..5000).map(|s| if s % 97 == 5 { 0 } else { 1 + s % 3 }).collect();
    let total: i64 = lens.iter().map(|&l| i64::from(l)).sum();
    let mut idx = b"MMIDIDX\x00\x00".to_vec();
    idx.extend(1u64.to_le_bytes());
    idx.push(8);
    idx.extend((lens.len() as u64).to_le_bytes());
    idx.extend(2u64.to_le_bytes());
    lens.iter().for_each(|l| idx.extend(l.to_le_bytes()));
    let mut at = 0i64;
    for &l in &lens {
        idx.extend((at * 2).to_le_bytes());
        at += i64::from(l);
    }
    idx.extend(0i64.to_le_bytes());
    idx.extend((lens.len() as i64).to_le_bytes());
    std::fs::write(suffixed(&prefix, ".idx"), idx).unwrap();
    let stream: Vec<u16> = (0..total as u16).collect();
    std::fs::write(
        suffixed(&prefix, ".bin"),
        stream.iter().flat_map(|t| t.to_le_bytes()).collect::<Vec<u8>>(),
    )
    .unwrap();
    let f = TokenFile::open(&prefix).unwrap();
    let s = f.sequences(33, None).unwrap();
    let idx: Vec<u32> = (0..s.len() as u32).collect();
    for (i, row) in rows(&s, &idx).iter().enumerate() {
        assert_eq!(row, &stream[i * 32..i * 32 + 33], "sample {i}");
    }
    let f = f.vocabulary(100);
    let r = f.read(95, 10);
    assert!(
        matches!(&r, Err(Error::BadInput { reason, .. }) if reason.contains("token 100 is 100")),
        "{r:?}"
    );
    assert_eq!(f.read(0, 100).unwrap().len(), 100);
}

/// A review of the Megatron checks, W1: a piece whose first document-index entry is -1 (the
/// last entry of the piece before), then 0: a typed error naming the field, never a panic of
/// the piece that starts there (the pieces of 65,536 documents are checked in parallel).
#[test]
fn a_negative_entry_at_a_piece_boundary_is_refused_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = dir.path().join("w1");
    const P: usize = 1 << 16;
    let docs = 2 * P + 1;
    let mut idx = b"MMIDIDX\x00\x00".to_vec();
    idx.extend(1u64.to_le_bytes());
    idx.push(8);
    idx.extend((docs as u64).to_le_bytes());
    idx.extend((docs as u64 + 1).to_le_bytes());
    (0..docs).for_each(|_| idx.extend(1i32.to_le_bytes()));
    (0..docs as i64).for_each(|s| idx.extend((2 * s).to_le_bytes()));
    for e in 0..=docs as i64 {
        let e = match e as usize {
            P => -1,
            x if x == P + 1 => 0,
            _ => e,
        };
        idx.extend(e.to_le_bytes());
    }
    std::fs::write(suffixed(&prefix, ".idx"), idx).unwrap();
    std::fs::write(suffixed(&prefix, ".bin"), vec![0u8; 2 * docs]).unwrap();
    let f = TokenFile::open(&prefix).unwrap();
    let (path, why) = refused(f.verify());
    assert!(path.ends_with("w1.idx") && why.contains("document_indices"), "{why}");
    let (_, why) = refused(f.sequences(9, Some(1)));
    assert!(why.contains("document_indices"), "{why}");
}

/// Look 71, L71-3: a sequence length lowered or a pointer moved in the `.idx` (each still inside
/// the `.bin`) read other tokens and passed `verify`, which promises lying offsets are found;
/// now `verify` checks the sequences lie back to back from the `.bin`'s start, as Megatron writes
/// them (the open checks the last ends the file), and names the array; so does every reader of
/// the index (look 84). The dataset as written verifies; its `.bin` is not opened headerless.
#[test]
fn verify_finds_sequences_that_do_not_tile_the_bin() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = write_megatron(dir.path(), &documents(40));
    TokenFile::open(&prefix).unwrap().verify().unwrap();
    let idx = suffixed(&prefix, ".idx");
    let good = std::fs::read(&idx).unwrap();
    // The header: 9 magic bytes, a u64 version, a dtype byte, then the sequence and document
    // counts (u64 each); the lengths (i32 each), then the pointers (i64 each).
    let sequences = u64::from_le_bytes(good[18..26].try_into().unwrap()) as usize;
    let (lengths, pointers) = (34, 34 + 4 * sequences);
    let len_of =
        |i: usize| i32::from_le_bytes(good[lengths + 4 * i..lengths + 4 * i + 4].try_into().unwrap());
    let ptr_of =
        |i: usize| i64::from_le_bytes(good[pointers + 8 * i..pointers + 8 * i + 8].try_into().unwrap());
    let k = (1..sequences).find(|&i| len_of(i) > 8).unwrap();
    let cases: [(usize, Vec<u8>, &str); 3] = [
        (lengths + 4 * k, (len_of(k) - 8).to_le_bytes().to_vec(), "sequence_pointers"),
        (pointers + 8 * k, (ptr_of(k) + 32).to_le_bytes().to_vec(), "sequence_pointers"),
        (pointers, 2i64.to_le_bytes().to_vec(), "sequence_pointers"),
    ];
    for (at, bytes, field) in cases {
        let mut damaged = good.clone();
        damaged[at..at + bytes.len()].copy_from_slice(&bytes);
        std::fs::write(&idx, &damaged).unwrap();
        match TokenFile::open(&prefix).unwrap().verify() {
            Err(Error::BadInput { path, reason, .. }) => {
                assert_eq!(path, idx);
                assert!(reason.starts_with(field), "{field}: {reason}");
            }
            other => panic!("{field} at byte {at}: {other:?}"),
        }
        // Every reader of the index checks it too (look 84, F84-1: sequences and documents
        // read overlapping sequences, some tokens twice and others never).
        let f = TokenFile::open(&prefix).unwrap();
        let reads = [
            ("sequences", f.sequences(2, None).map(drop)),
            ("shuffled", f.sequences_epochs(2, Some(1), 2).map(drop)),
            ("documents", f.documents_source().map(drop)),
        ];
        for (what, got) in reads {
            assert!(
                matches!(&got, Err(Error::BadInput { reason, .. }) if reason.starts_with(field)),
                "{what}, {field}: {got:?}"
            );
        }
    }
    std::fs::write(&idx, &good).unwrap();
    TokenFile::open(&prefix).unwrap().verify().unwrap();
    // Its `.bin` opened as headerless tokens would drop the index and its checks (look 84,
    // F84-2: a damaged index "intact", the tokens read as any type given).
    let bin = suffixed(&prefix, ".bin");
    match TokenFile::open_raw(&bin, TokenType::U32) {
        Err(Error::BadInput { path, reason, .. }) => {
            assert!(path == bin && reason.contains("Megatron"), "{reason}")
        }
        other => panic!("{other:?}"),
    }
    // Its `.idx` opened so (look 151, L151-1: its header and offsets read as 1,021 tokens,
    // verified intact).
    match TokenFile::open_raw(&idx, TokenType::U16) {
        Err(Error::BadInput { path, reason, .. }) => {
            assert!(path == idx && reason.contains("Megatron dataset's index"), "{reason}")
        }
        other => panic!("{other:?}"),
    }
}

/// Look 108, L108-1: a Megatron prefix ending in `.bin` wrote `P.bin.bin` and `P.bin.idx`,
/// and every reader then took `P.bin` for the `.bin` of the pair `P`: another dataset's tokens,
/// verified intact. Such a prefix is refused, nothing written.
#[test]
fn a_megatron_prefix_ending_in_an_extension_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["corpus.bin", "corpus.idx"] {
        let prefix = dir.path().join(name);
        match MegatronWriter::create(&prefix, TokenType::U16, false) {
            Err(Error::InvalidArgument(m)) => assert!(m.contains("named without its"), "{m}"),
            other => panic!("{name}: {:?}", other.map(|_| ())),
        }
    }
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "nothing written");
    MegatronWriter::create(dir.path().join("corpus.v2"), TokenType::U16, false).unwrap();
}

/// Look 176 (L176-2): a writer of `latest/corpus` whose link `latest` moved to another directory
/// before `finish` removed that directory's `.idx`, a pair it never locked. The directory must
/// be the one the writer locked: refused, both pairs as they were. (L176-4) A path that names a
/// directory by its form (`d/.`, `d/`, `.`) is refused: made absolute, `d/.` replaced `d.bin`.
#[cfg(unix)]
#[test]
fn a_token_writer_replaces_only_what_it_locked() {
    let tmp = tempfile::tempdir().unwrap();
    let (v3, v4) = (tmp.path().join("v3"), tmp.path().join("v4"));
    let latest = tmp.path().join("latest");
    let pairs: Vec<_> = [&v3, &v4]
        .iter()
        .map(|d| {
            std::fs::create_dir(d).unwrap();
            let mut w = MegatronWriter::create(d.join("corpus"), TokenType::U16, false).unwrap();
            w.add_document(&[1u16, 2, 3]).unwrap();
            w.finish().unwrap();
            ["corpus.bin", "corpus.idx"].map(|f| std::fs::read(d.join(f)).unwrap())
        })
        .collect();
    std::os::unix::fs::symlink(&v3, &latest).unwrap();
    let mut w = MegatronWriter::create(latest.join("corpus"), TokenType::U16, true).unwrap();
    w.add_document(&[7u16, 8, 9]).unwrap();
    std::fs::remove_file(&latest).unwrap();
    std::os::unix::fs::symlink(&v4, &latest).unwrap();
    let e = w.finish().unwrap_err();
    assert!(
        matches!(&e, Error::NotReplaceable { reason, .. } if reason.contains("not the one the writer began in")),
        "{e}"
    );
    for (d, want) in [&v3, &v4].iter().zip(&pairs) {
        assert_eq!(
            &["corpus.bin", "corpus.idx"].map(|f| std::fs::read(d.join(f)).unwrap()),
            want,
            "{}",
            d.display()
        );
    }
    std::fs::write(tmp.path().join("d.bin"), b"other").unwrap();
    std::fs::create_dir(tmp.path().join("d")).unwrap();
    let d = tmp.path().join("d");
    for bad in [d.join("."), format!("{}/", d.display()).into(), std::path::PathBuf::from("."), d.join("..")]
    {
        let e = MegatronWriter::create(&bad, TokenType::U16, true).unwrap_err();
        assert!(
            matches!(&e, Error::InvalidArgument(m) if m.contains("names a directory")),
            "{}: {e}",
            bad.display()
        );
        let e = write_llmc(&bad, &[1u16, 2], true).unwrap_err();
        assert!(
            matches!(&e, Error::InvalidArgument(m) if m.contains("names a directory")),
            "{}: {e}",
            bad.display()
        );
    }
    assert_eq!(std::fs::read(tmp.path().join("d.bin")).unwrap(), b"other");
}

/// Look 178: (L178-1) one byte of a `.idx` turned u16 tokens into i16 and the pair verified
/// intact, negative ids and all: a signed type's ids are never negative, vocabulary or not.
/// (L178-4) A prefix whose `.idx` is missing, or opened with a token type, said "open PREFIX:
/// No such file": the missing `.idx` is named, the prefix said to be a Megatron dataset's.
#[test]
fn negative_ids_fail_verify_and_a_prefix_is_named_as_one() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = dir.path().join("c");
    let mut w = MegatronWriter::create(&prefix, TokenType::U16, false).unwrap();
    w.add_document(&[50_000u16, 40_000, 7, 65_535, 1]).unwrap();
    w.finish().unwrap();
    TokenFile::open(&prefix).unwrap().verify().unwrap();
    let idx = suffixed(&prefix, ".idx");
    let mut bytes = std::fs::read(&idx).unwrap();
    assert_eq!(bytes[17], 8, "u16's Megatron code");
    bytes[17] = 3;
    std::fs::write(&idx, &bytes).unwrap();
    let e = TokenFile::open(&prefix).unwrap().verify().unwrap_err();
    assert!(matches!(&e, Error::BadInput { reason, .. } if reason.contains("never negative")), "{e}");
    // Look 182, L182-2: nor is it converted into a dataset that verifies intact.
    let out = dir.path().join("ds");
    let opts = loaderx_core::WriteOptions::new();
    let e = loaderx_core::convert::tokens(&TokenFile::open(&prefix).unwrap(), &out, 1024, opts).unwrap_err();
    assert!(matches!(&e, Error::BadInput { reason, .. } if reason.contains("never negative")), "{e}");
    assert!(!out.exists());
    // A signed file of non-negative ids verifies.
    let ok = dir.path().join("ok");
    let mut w = MegatronWriter::create(&ok, TokenType::I32, false).unwrap();
    w.add_document(&[0i32, 5, i32::MAX]).unwrap();
    // Look 179, L179-4: what verify calls damage is not written.
    let e = w.add_document(&[3i32, -100]).unwrap_err();
    assert!(matches!(&e, Error::InvalidArgument(m) if m.contains("token 1 is -100")), "{e}");
    w.finish().unwrap();
    TokenFile::open(&ok).unwrap().verify().unwrap();
    let e = TokenFile::open_raw(&ok, TokenType::I32).unwrap_err();
    assert!(
        matches!(&e, Error::BadInput { reason, .. } if reason.contains("Megatron dataset's prefix")),
        "{e}"
    );
    std::fs::remove_file(suffixed(&ok, ".idx")).unwrap();
    let e = TokenFile::open(&ok).unwrap_err();
    assert!(matches!(&e, Error::Io { path, .. } if path.ends_with("ok.idx")), "{e}");
}
