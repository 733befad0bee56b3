//! What the image converters share: the memory budgets their decodes take from, what one image
//! costs from decode to output, and why a file was not converted.

use std::sync::{Condvar, Mutex, PoisonError};

use super::images::{DECODE_BUDGET, FILE_BUDGET};
use crate::Error;
use std::path::PathBuf;

/// Bytes of memory shared by the decodes of one conversion: a decode takes its bytes before it
/// allocates and waits while they are not free.
pub(super) struct Budget {
    total: u64,
    free: Mutex<u64>,
    freed: Condvar,
}

/// Bytes taken from a [`Budget`], given back when dropped.
pub(super) struct Held<'a> {
    budget: &'a Budget,
    bytes: u64,
}

impl Budget {
    pub(super) fn new(total: u64) -> Budget {
        Budget { total, free: Mutex::new(total), freed: Condvar::new() }
    }

    /// Takes `bytes` (at most the whole budget, so that a request can always be met), waiting
    /// until they are free. No caller holds bytes of the same budget while it waits, and the
    /// holders wait for nothing of it, so the waits end.
    pub(super) fn take(&self, bytes: u64) -> Held<'_> {
        let bytes = bytes.min(self.total);
        let mut free = self.free.lock().unwrap_or_else(PoisonError::into_inner);
        while *free < bytes {
            free = self.freed.wait(free).unwrap_or_else(PoisonError::into_inner);
        }
        *free -= bytes;
        Held { budget: self, bytes }
    }

    /// [`Budget::take`] without waiting: `None` while the bytes are not free.
    #[cfg(test)]
    fn try_take(&self, bytes: u64) -> Option<Held<'_>> {
        let bytes = bytes.min(self.total);
        let mut free = self.free.lock().unwrap_or_else(PoisonError::into_inner);
        (*free >= bytes).then(|| {
            *free -= bytes;
            Held { budget: self, bytes }
        })
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        let mut free = self.budget.free.lock().unwrap_or_else(PoisonError::into_inner);
        *free += self.bytes;
        self.budget.freed.notify_all();
    }
}

/// The two budgets of one conversion's decodes, always taken in this order (files, then pixels)
/// and given back together, so that a decode holding file bytes while it waits for pixel bytes
/// waits only on decodes that wait for nothing.
pub(super) struct Budgets {
    pub(super) files: Budget,
    pub(super) pixels: Budget,
}

impl Budgets {
    pub(super) fn new() -> Budgets {
        Budgets { files: Budget::new(FILE_BUDGET), pixels: Budget::new(DECODE_BUDGET) }
    }
}

/// Bytes of memory one image of `width` x `height` takes from its decode to its output: the
/// decoder's output (`decoded` bytes), its conversion to RGB when it is something else, the
/// resizer's intermediate image (at most the larger of the two sizes on each side, RGB) and the
/// output (twice: a padded image is drawn on a canvas of its own).
pub(super) fn decode_cost(width: u32, height: u32, decoded: u64, is_rgb8: bool, out: (u32, u32)) -> u64 {
    let rgb = |w: u32, h: u32| u64::from(w) * u64::from(h) * 3;
    let converted = if is_rgb8 { 0 } else { rgb(width, height) };
    let intermediate = rgb(width.max(out.0), height.max(out.1));
    decoded.saturating_add(converted).saturating_add(intermediate).saturating_add(2 * rgb(out.0, out.1))
}

/// Why an image file was not converted: what was wrong, when the cause does not say it all,
/// and the error that caused it (the decoder's, the file system's).
pub(super) struct Undecodable {
    why: Option<String>,
    source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl Undecodable {
    /// A file refused for `why`, with no other error behind it.
    pub(super) fn why(why: String) -> Undecodable {
        Undecodable { why: Some(why), source: None }
    }

    /// A file refused because of `source` (with `why` when the cause alone would not say it).
    pub(super) fn caused(
        why: Option<&str>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Undecodable {
        Undecodable { why: why.map(str::to_owned), source: Some(source.into()) }
    }

    /// The converter's error for the file `path`.
    pub(super) fn into_error(self, path: PathBuf) -> Error {
        let refused = "not a decodable image (--skip-bad leaves such files out)";
        let reason = self.why.map_or_else(|| refused.to_owned(), |why| format!("{refused}: {why}"));
        Error::BadInput { path, reason, source: self.source }
    }

    /// The reason and its causes on one line (`why: cause: ...`), for the report of skipped files.
    pub(super) fn report(&self) -> String {
        let mut parts: Vec<String> = self.why.iter().cloned().collect();
        let mut cause = self.source.as_deref().map(|e| e as &(dyn std::error::Error + 'static));
        while let Some(e) = cause {
            parts.push(e.to_string());
            cause = e.source();
        }
        parts.join(": ")
    }
}

#[cfg(test)]
mod tests {
    use super::super::images::MAX_IMAGE_BYTES;
    use super::*;

    #[test]
    fn a_budget_gives_only_free_bytes_and_wakes_a_waiter_when_they_come_back() {
        let b = Budget::new(10);
        let held = b.take(6);
        assert!(b.try_take(6).is_none(), "4 bytes are free");
        let small = b.try_take(4).expect("4 bytes are free");
        drop(small);
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::scope(|s| {
            s.spawn(|| {
                let _h = b.take(6);
                tx.send(()).unwrap();
            });
            drop(held);
            rx.recv().expect("the waiter gets its bytes once they are given back");
        });
        assert!(b.try_take(10).is_some(), "every byte came back");
        assert_eq!(b.take(25).bytes, 10, "a request over the whole budget takes the whole budget");
    }

    #[test]
    fn a_grey_image_counts_its_conversion_and_resizing() {
        // The 255 KB grey PNG of 16384 x 16384: 256 MiB decoded, 768 MiB as RGB, 768 MiB resized.
        let side = 1u32 << 14;
        let grey = decode_cost(side, side, 1 << 28, false, (32, 32));
        assert!(grey > MAX_IMAGE_BYTES, "{grey}");
        assert_eq!(grey, (1 << 28) + 2 * 3 * (1u64 << 28) + 2 * 32 * 32 * 3);
        // An RGB photo of 4000 x 3000 takes its pixels twice.
        assert_eq!(decode_cost(4000, 3000, 36_000_000, true, (224, 224)), 72_000_000 + 2 * 224 * 224 * 3);
    }
}
