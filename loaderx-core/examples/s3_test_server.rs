//! A test S3 server for other processes' tests (the Python package's): s3s-fs serving the
//! directory `ROOT` (bucket `B` is `ROOT/B`, its objects the files under it) on 127.0.0.1 and a
//! free port, with the access key `loaderx-test` and secret `loaderx-test-secret`.
//!
//! `cargo run -p loaderx-core --example s3_test_server -- ROOT` prints `http://127.0.0.1:PORT` on
//! its first line, then serves until its standard input is closed (the test that started it
//! ends or dies) and exits.

use std::io::{BufRead, Write};

use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder as ConnBuilder;

const KEY: &str = "loaderx-test";
const SECRET: &str = "loaderx-test-secret";

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = std::env::args_os().nth(1).ok_or("usage: s3_test_server ROOT")?;
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    // s3s-fs's error has no Display: its Debug is all it says.
    let fs = s3s_fs::FileSystem::new(&root)
        .map_err(|e| format!("cannot serve {}: {e:?}", root.to_string_lossy()))?;
    let mut b = s3s::service::S3ServiceBuilder::new(fs);
    b.set_auth(s3s::auth::SimpleAuth::from_single(KEY, SECRET));
    let service = b.build();
    let listener = runtime.block_on(tokio::net::TcpListener::bind(("127.0.0.1", 0)))?;
    println!("http://{}", listener.local_addr()?);
    std::io::stdout().flush()?;
    runtime.spawn(async move {
        let http = ConnBuilder::new(TokioExecutor::new());
        while let Ok((socket, _)) = listener.accept().await {
            let conn = http.serve_connection(TokioIo::new(socket), service.clone()).into_owned();
            tokio::spawn(async move {
                let _ = conn.await;
            });
        }
    });
    // Serve until the parent closes our standard input (or exits).
    for line in std::io::stdin().lock().lines() {
        if line.is_err() {
            break;
        }
    }
    runtime.shutdown_background();
    Ok(())
}
