//! The `loaderx` command-line tool.

fn main() {}
