//! `convert parquet` of arbitrary bytes: a conversion or a typed error naming the file, never a
//! panic or an abort (the decoder's own panics on damaged files are caught at the conversion
//! boundary and become `BadInput`; one that escapes it aborts here).
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use loaderx_core::convert::{Nulls, parquet};
use loaderx_core::{Error, WriteOptions};

/// A directory of this process's own, reused by every input (the converter takes paths).
fn work() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let d = std::env::temp_dir().join(format!("loaderx-fuzz-parquet-{}", std::process::id()));
        std::fs::create_dir_all(&d).expect("a working directory");
        d
    })
}

fuzz_target!(|data: &[u8]| {
    let dir = work();
    let input = dir.join("in.parquet");
    std::fs::write(&input, data).expect("the input written");
    let out = dir.join("out");
    // Nulls filled, so that damaged levels reach the value decoders instead of stopping at the
    // first null.
    let opts = WriteOptions::new().overwrite(true);
    if let Err(Error::BadInput { path, .. }) = parquet(&[&input], &out, &[], Nulls::Fill(0.0), opts) {
        assert_eq!(path, input, "a bad input names the file");
    }
    let _ = std::fs::remove_dir_all(&out);
});
