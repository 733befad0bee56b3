//! The client and runtime a process reaches the object store through.
//!
//! A store opened before a `fork` (torch's fork workers, `multiprocessing`) is copied into the
//! child with the parent's tokio runtime as the fork left it: its worker threads are not there,
//! so the child's first request waited for good, and the client's pooled connections are the
//! parent's own sockets. [`Links`] hands each process a link of its own: the opening process the
//! one made at open, a forked child one made at its first request (kept for its later ones). The
//! parent's link is never dropped in a child: a runtime dropped there would wait for worker
//! threads that are not there.

use std::sync::Arc;

use object_store::ObjectStore;

use crate::sys::{MadeIn, PerProcess};
use crate::{Error, Result};

/// An S3 client and the runtime its requests run on.
pub(super) struct Link {
    pub(super) store: Arc<dyn ObjectStore>,
    pub(super) runtime: tokio::runtime::Runtime,
}

impl Link {
    /// A client built by `store` on a runtime of two worker threads of this process.
    pub(super) fn new(url: &str, store: Arc<dyn ObjectStore>) -> Result<Link> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|e| Error::io("start the runtime of", url, e))?;
        Ok(Link { store, runtime })
    }
}

/// The link of the process that opened the store, and one of a process forked from it.
pub(super) struct Links {
    made_in: MadeIn,
    /// The opening process's link (an `Option` only so that a child can leave it undropped).
    home: Option<Arc<Link>>,
    /// A forked process's own link.
    forked: PerProcess<Link>,
}

impl Links {
    pub(super) fn new(home: Link) -> Links {
        Links { made_in: MadeIn::here(), home: Some(Arc::new(home)), forked: PerProcess::new() }
    }

    /// This process's link: in a forked child, made by `make` at its first request. Where the
    /// child's own slot was held at a fork of its own, a link is made for the call alone.
    pub(super) fn get(&self, make: impl FnOnce() -> Result<Link>) -> Result<Arc<Link>> {
        if self.made_in.is_here()
            && let Some(home) = &self.home
        {
            return Ok(Arc::clone(home));
        }
        self.forked.get(make)
    }
}

impl Drop for Links {
    fn drop(&mut self) {
        if !self.made_in.is_here() {
            std::mem::forget(self.home.take());
        }
    }
}
