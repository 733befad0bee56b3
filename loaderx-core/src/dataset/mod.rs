//! Typed views over stores: element types, schema, dense and ragged datasets.

pub(crate) mod dtype;
