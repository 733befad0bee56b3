//! [`ItemStore`]: serde items as MessagePack records, and the decoder that reads them in place.
//!
//! | module | job |
//! | --- | --- |
//! | `store` | [`ItemStore`] and [`ItemWriter`]: the burn `Dataset` and its writer |
//! | `msgpack` | a serde decoder giving exactly rmp-serde's values, faster |

pub mod msgpack;
mod store;

pub use store::{ItemStore, ItemWriter};
