//! The side files of a directory of datasets (`classes.txt` beside `images/` and `labels/`), as
//! [`super::set::stitch_datasets`] checks them: compared a block at a time, never read whole.

use std::path::Path;

use crate::{Error, Result};

/// Whether the files `a` and `b` hold the same bytes, read a block at a time (a part's side file
/// may be of any size: it is never read whole).
pub(super) fn same_bytes(a: &Path, b: &Path) -> Result<bool> {
    const BLOCK: usize = 64 << 10;
    let open = |p: &Path| std::fs::File::open(p).map_err(|e| Error::io("open", p, e));
    let (mut fa, mut fb) = (open(a)?, open(b)?);
    let len =
        |f: &std::fs::File, p: &Path| f.metadata().map(|m| m.len()).map_err(|e| Error::io("stat", p, e));
    if len(&fa, a)? != len(&fb, b)? {
        return Ok(false);
    }
    let (mut ba, mut bb) = (vec![0u8; BLOCK], vec![0u8; BLOCK]);
    loop {
        let n = fill(&mut fa, &mut ba).map_err(|e| Error::io("read", a, e))?;
        let m = fill(&mut fb, &mut bb).map_err(|e| Error::io("read", b, e))?;
        if ba[..n] != bb[..m] {
            return Ok(false);
        }
        if n < BLOCK {
            return Ok(true);
        }
    }
}

/// Reads into `buf` until it is full or the file ends; the bytes read.
fn fill(f: &mut impl std::io::Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}
