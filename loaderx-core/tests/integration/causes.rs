//! Errors keep their causes: a third-party error (a decoder's, a parser's) is the error's
//! `source()`, of its own type, and its text is not repeated in the error's own message.

use std::error::Error as _;
use std::path::Path;

use loaderx_core::{Codec, DatasetWriter, Error, Format, Schema, Store, WriteOptions};

/// `e`'s source, downcast to `T`; its text absent from `e`'s own message.
fn cause<T: std::error::Error + 'static>(e: &Error) -> &T {
    let source = e.source().unwrap_or_else(|| panic!("no source: {e}"));
    let text = source.to_string();
    assert!(!text.is_empty() && !e.to_string().contains(&text), "the cause is repeated: {e}");
    source
        .downcast_ref::<T>()
        .unwrap_or_else(|| panic!("the source of {e} is not a {}", std::any::type_name::<T>()))
}

#[test]
fn a_malformed_safetensors_header_is_the_parsers_error() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("bad.safetensors");
    std::fs::write(&input, b"\x10\x00\x00\x00\x00\x00\x00\x00{not json at all").unwrap();
    let e =
        loaderx_core::convert::safetensors(&input, dir.path().join("out"), WriteOptions::new()).unwrap_err();
    assert!(matches!(&e, Error::BadInput { path, .. } if *path == input), "{e}");
    cause::<safetensors::SafeTensorError>(&e);
}

#[test]
fn a_zstd_frame_that_does_not_decode_is_the_decompressors_error() {
    for format in [Format::V1, Format::V2] {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("d");
        let opts = WriteOptions::new().codec(Codec::Zstd).format(format);
        let mut w = DatasetWriter::dense::<u32>(&out, vec![256], opts).unwrap();
        w.append(&(0..256).map(|i| i % 7).collect::<Vec<u32>>()).unwrap();
        w.finish().unwrap();
        // The one record is the chunk's only bytes: damage the middle of its frame.
        let chunk = out.join("0.zr");
        let mut bytes = std::fs::read(&chunk).unwrap();
        let mid = bytes.len() / 2;
        bytes[mid] ^= 0xA5;
        std::fs::write(&chunk, &bytes).unwrap();
        let e = Store::open(&out).unwrap().gather(&[0]).unwrap_err();
        assert!(matches!(&e, Error::CorruptRecord { index: 0, .. }), "{format}: {e}");
        cause::<std::io::Error>(&e);
    }
}

#[test]
fn a_schema_that_is_not_messagepack_is_the_decoders_error() {
    let e = Schema::decode(b"\xc1 not a schema", Path::new("d/schema.msgpack")).unwrap_err();
    assert!(matches!(&e, Error::Corrupt { offset: 0, .. }), "{e}");
    cause::<rmp_serde::decode::Error>(&e);
}

#[cfg(feature = "parquet")]
#[test]
fn a_file_that_is_not_parquet_is_the_readers_error() {
    use loaderx_core::convert::{Nulls, parquet};
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("bad.parquet");
    std::fs::write(&input, b"PAR1 these bytes are no Parquet footer PAR1").unwrap();
    let e = parquet(&[&input], dir.path().join("out"), &[], Nulls::Error, WriteOptions::new()).unwrap_err();
    assert!(matches!(&e, Error::BadInput { path, .. } if *path == input), "{e}");
    cause::<::parquet::errors::ParquetError>(&e);
}

#[cfg(feature = "images")]
#[test]
fn an_image_that_does_not_decode_is_the_decoders_error() {
    use loaderx_core::convert::{ImageOptions, images};
    let dir = tempfile::tempdir().unwrap();
    let class = dir.path().join("in").join("cat");
    std::fs::create_dir_all(&class).unwrap();
    // A PNG signature, then bytes that are no PNG chunk.
    std::fs::write(class.join("a.png"), b"\x89PNG\r\n\x1a\nthis is not a chunk").unwrap();
    let e =
        images(dir.path().join("in"), dir.path().join("out"), ImageOptions::new(8, 8), WriteOptions::new())
            .unwrap_err();
    assert!(matches!(&e, Error::BadInput { path, .. } if path.ends_with("cat/a.png")), "{e}");
    cause::<image::ImageError>(&e);
}
