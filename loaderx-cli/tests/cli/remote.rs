// The read commands on `s3://` URLs (feature `remote`): `push`, then `info`, `verify`, `export`
// and `bench --store` against an S3 server started here (s3s-fs on 127.0.0.1, a free port),
// endpoint and keys given the way a user gives them, in the AWS environment variables.

use std::path::Path;
use std::process::{Command, Output};

use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder as ConnBuilder;

const KEY: &str = "AKIDCLITEST";
const SECRET: &str = "cli-test-secret-0123456789abcdef";

/// s3s-fs over `root` on a free loopback port; the runtime (and server) stop when dropped.
fn server(root: &Path) -> (tokio::runtime::Runtime, String) {
    std::fs::create_dir_all(root.join("bucket")).unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let fs = s3s_fs::FileSystem::new(root).map_err(|e| format!("{e:?}")).unwrap();
    let mut b = s3s::service::S3ServiceBuilder::new(fs);
    b.set_auth(s3s::auth::SimpleAuth::from_single(KEY, SECRET));
    let service = b.build();
    let listener = runtime.block_on(tokio::net::TcpListener::bind(("127.0.0.1", 0))).unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    runtime.spawn(async move {
        let http = ConnBuilder::new(TokioExecutor::new());
        while let Ok((socket, _)) = listener.accept().await {
            let conn = http.serve_connection(TokioIo::new(socket), service.clone()).into_owned();
            tokio::spawn(async move {
                let _ = conn.await;
            });
        }
    });
    (runtime, endpoint)
}

fn loaderx(endpoint: &str, cache: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_loaderx"))
        .args(args)
        .env("AWS_ENDPOINT_URL", endpoint)
        .env("AWS_ACCESS_KEY_ID", KEY)
        .env("AWS_SECRET_ACCESS_KEY", SECRET)
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ALLOW_HTTP", "true")
        .env("LOADERX_CACHE_DIR", cache)
        .output()
        .expect("run loaderx")
}

fn ok(out: &Output) -> String {
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(!text.contains(SECRET) && !String::from_utf8_lossy(&out.stderr).contains(SECRET));
    text
}

/// A `.npy` file at `path` of the dtype `descr` and `shape` holding `data`; returns its bytes.
fn write_npy(path: &Path, descr: &str, shape: &str, data: impl Iterator<Item = u8>) -> Vec<u8> {
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    while !(10 + header.len() + 1).is_multiple_of(64) {
        header.push(' ');
    }
    header.push('\n');
    bytes.extend_from_slice(&(header.len() as u16).to_le_bytes());
    bytes.extend_from_slice(header.as_bytes());
    bytes.extend(data);
    std::fs::write(path, &bytes).unwrap();
    bytes
}

#[test]
fn push_then_info_verify_export_and_bench_on_the_url() {
    let tmp = tempfile::tempdir().unwrap();
    let (_runtime, endpoint) = server(&tmp.path().join("s3"));
    let cache = tmp.path().join("cache");
    // A dense dataset: 300 records of 8 f32, from a .npy through `convert npy`.
    let npy = tmp.path().join("x.npy");
    let values: Vec<f32> = (0..2400).map(|v| v as f32 * 0.5).collect();
    let bytes = write_npy(&npy, "<f4", "(300, 8)", values.iter().flat_map(|v| v.to_le_bytes()));
    let store = tmp.path().join("x");
    ok(&loaderx(&endpoint, &cache, &["convert", "npy", npy.to_str().unwrap(), store.to_str().unwrap()]));
    let url = "s3://bucket/data/x";
    ok(&loaderx(&endpoint, &cache, &["push", store.to_str().unwrap(), url]));
    let info = ok(&loaderx(&endpoint, &cache, &["info", url]));
    assert!(info.contains("300"), "{info}");
    let verify = ok(&loaderx(&endpoint, &cache, &["verify", url]));
    assert!(verify.contains("300"), "{verify}");
    // --json on a URL (look 77: it printed text).
    let json = ok(&loaderx(&endpoint, &cache, &["verify", "--json", url]));
    let v: serde_json::Value = serde_json::from_str(json.trim()).unwrap_or_else(|e| panic!("{e}: {json}"));
    assert_eq!((v["checked"].as_u64(), v["damaged"].as_u64()), (Some(300), Some(0)), "{json}");
    // export from the URL equals the input, byte for byte past the header.
    let back = tmp.path().join("back.npy");
    ok(&loaderx(&endpoint, &cache, &["export", url, back.to_str().unwrap()]));
    let got = std::fs::read(&back).unwrap();
    assert_eq!(&got[got.len() - 9600..], &bytes[bytes.len() - 9600..]);
    let bench = ok(&loaderx(&endpoint, &cache, &["bench", "--store", url, "--batch", "64", "--steps", "2"]));
    for order in ["cyclic", "IID", "block-cyclic (64 x 1)"] {
        let row = bench
            .lines()
            .find(|l| l.starts_with(&format!("| {order} |")))
            .unwrap_or_else(|| panic!("{bench}"));
        let requests: f64 = row.split('|').nth(4).unwrap().trim().parse().unwrap_or_else(|_| panic!("{row}"));
        assert!(requests >= 1.0, "a remote batch costs requests: {row}");
    }
    // A local store measured the same way: no request column.
    let local =
        ok(&loaderx(&endpoint, &cache, &["bench", "--store", store.to_str().unwrap(), "--steps", "1"]));
    assert!(local.lines().any(|l| l.starts_with("| cyclic |") && l.ends_with("| - | - |")), "{local}");
    // A dtype swapped for another of its width in the pushed schema (look 90, F90-1: "all
    // intact", every record then read as the other type): damage, named.
    let schema = tmp.path().join("s3/bucket/data/x/schema.msgpack");
    let mut b = std::fs::read(&schema).unwrap();
    let at = b.windows(3).position(|w| w == b"f32").unwrap();
    b[at] = b'u';
    std::fs::write(&schema, b).unwrap();
    let damaged = loaderx(&endpoint, &cache, &["verify", url]);
    let said = String::from_utf8_lossy(&damaged.stdout);
    assert_eq!(damaged.status.code(), Some(1), "{said}");
    assert!(said.contains("schema.msgpack") && said.contains("checksum does not match"), "{said}");
    // And `info` says so, not "raw" (look 93, F3).
    let info = loaderx(&endpoint, &cache, &["info", url]);
    let said = String::from_utf8_lossy(&info.stderr);
    assert!(!info.status.success() && said.contains("checksum does not match"), "{said}");
    // A URL with no store there: an error naming it.
    let missing = loaderx(&endpoint, &cache, &["info", "s3://bucket/none"]);
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("s3://bucket/none"));
}

/// `stitch` on object storage: parts converted apart (`--part K --parts 3`), pushed one by one
/// to a URL prefix, stitched from that prefix into a set read back whole; a missing part named.
#[test]
fn stitch_makes_a_set_of_parts_pushed_under_a_url_prefix() {
    let tmp = tempfile::tempdir().unwrap();
    let (_runtime, endpoint) = server(&tmp.path().join("s3"));
    let cache = tmp.path().join("cache");
    let npy = tmp.path().join("x.npy");
    let bytes = write_npy(&npy, "<i4", "(301, 3)", (0..903i32).flat_map(|v| (v * 7).to_le_bytes()));
    let run = |args: &[&str]| loaderx(&endpoint, &cache, args);
    for k in 0..3 {
        let part = tmp.path().join(format!("p{k}"));
        let (p, k) = (part.to_str().unwrap(), k.to_string());
        ok(&run(&["convert", "npy", npy.to_str().unwrap(), p, "--part", &k, "--parts", "3"]));
        if k != "1" {
            ok(&run(&["push", p, &format!("s3://bucket/gaps/part-0000{k}")]));
        }
        ok(&run(&["push", p, &format!("s3://bucket/parts/part-0000{k}")]));
    }
    let said = ok(&run(&["stitch", "s3://bucket/parts", "s3://bucket/set", "--parts", "3"]));
    assert!(said.contains("a store set of 3 parts, 301 records"), "{said}");
    let back = tmp.path().join("back.npy");
    ok(&run(&["export", "s3://bucket/set", back.to_str().unwrap()]));
    let got = std::fs::read(&back).unwrap();
    assert_eq!(&got[got.len() - 903 * 4..], &bytes[bytes.len() - 903 * 4..]);
    // Parts named one by one give the same set.
    let listed =
        ["s3://bucket/parts/part-00000", "s3://bucket/parts/part-00001", "s3://bucket/parts/part-00002"];
    let said = ok(&run(&[&["stitch"][..], &listed[..], &["s3://bucket/set2"][..]].concat()));
    assert!(said.contains("301 records"), "{said}");
    // A missing part is named, and no set is written.
    let missing = run(&["stitch", "s3://bucket/gaps", "s3://bucket/gapset", "--parts", "3"]);
    assert!(!missing.status.success());
    let e = String::from_utf8_lossy(&missing.stderr);
    assert!(e.contains("part-00001") && e.contains("s3://bucket/gaps"), "{e}");
    assert!(!tmp.path().join("s3/bucket/gapset").exists());
    // Look 128, L128-1: directories of datasets are pushed and stitched a dataset at a time,
    // and said so (they were "not a loaderx store").
    let dd = tmp.path().join("dd");
    ok(&run(&["convert", "npy", npy.to_str().unwrap(), dd.join("x").to_str().unwrap()]));
    let pushed = run(&["push", dd.to_str().unwrap(), "s3://bucket/dd"]);
    let e = String::from_utf8_lossy(&pushed.stderr);
    assert!(!pushed.status.success() && e.contains("a directory of datasets (x); push each one"), "{e}");
    for k in 0..2 {
        let p = tmp.path().join(format!("p{k}"));
        ok(&run(&["push", p.to_str().unwrap(), &format!("s3://bucket/t/T{k}/x")]));
    }
    let whole = run(&["stitch", "s3://bucket/t/T0", "s3://bucket/t/T1", "s3://bucket/t/SET"]);
    let e = String::from_utf8_lossy(&whole.stderr);
    assert!(
        !whole.status.success()
            && e.contains("a dataset at a time: loaderx stitch s3://bucket/t/T0/x s3://bucket/t/T1/x s3://bucket/t/SET/x"),
        "{e}"
    );
    ok(&run(&["stitch", "s3://bucket/t/T0/x", "s3://bucket/t/T1/x", "s3://bucket/t/SET/x"]));
    // Local and remote paths are not mixed.
    let mixed = run(&["stitch", tmp.path().join("p0").to_str().unwrap(), "s3://bucket/mixed"]);
    assert!(String::from_utf8_lossy(&mixed.stderr).contains("all local paths or all s3:// URLs"));
}

/// `rows` rows of 3 `i32` (row `r` holds `3r..3r + 3`) converted in `parts` parts under `dir`
/// (`p0`, `p1`...), each pushed to `s3://bucket/parts/part-0000K`, stitched at `s3://bucket/set`.
fn remote_set_of_parts(dir: &Path, run: &dyn Fn(&[&str]) -> Output, rows: usize, parts: usize) {
    let npy = dir.join("x.npy");
    write_npy(&npy, "<i4", &format!("({rows}, 3)"), (0..3 * rows as i32).flat_map(|v| v.to_le_bytes()));
    for k in 0..parts {
        let part = dir.join(format!("p{k}"));
        let (p, k, n) = (part.to_str().unwrap(), k.to_string(), parts.to_string());
        ok(&run(&["convert", "npy", npy.to_str().unwrap(), p, "--part", &k, "--parts", &n]));
        ok(&run(&["push", p, &format!("s3://bucket/parts/part-0000{k}")]));
    }
    ok(&run(&["stitch", "s3://bucket/parts", "s3://bucket/set", "--parts", &parts.to_string()]));
}

/// `info` and `verify` of a store set on object storage (look 77, P77-5: "not a loaderx store"):
/// the manifest's parts and length; every part's records checked, numbered as the set numbers
/// them; a part replaced since stitching named.
#[test]
fn info_and_verify_read_a_store_set_by_its_url() {
    let tmp = tempfile::tempdir().unwrap();
    let (_runtime, endpoint) = server(&tmp.path().join("s3"));
    let cache = tmp.path().join("cache");
    let run = |args: &[&str]| loaderx(&endpoint, &cache, args);
    remote_set_of_parts(tmp.path(), &run, 301, 3);
    let info = ok(&run(&["info", "s3://bucket/set"]));
    assert!(info.contains("a store set of 3 parts") && info.contains("length:  301"), "{info}");
    assert!(info.contains("part:    s3://bucket/parts/part-00002 (101 records)"), "{info}");
    let json = ok(&run(&["info", "--json", "s3://bucket/set"]));
    let v: serde_json::Value = serde_json::from_str(json.trim()).unwrap_or_else(|e| panic!("{e}: {json}"));
    assert_eq!((v["set"].as_bool(), v["length"].as_u64()), (Some(true), Some(301)), "{json}");
    let verify = ok(&run(&["verify", "s3://bucket/set"]));
    assert!(verify.contains("301 records, all intact"), "{verify}");
    // One byte of the last part flipped on the server: its first record (a fixed-stride block's)
    // is named by the set's numbering, 200, and the exit status says damaged.
    let chunk = tmp.path().join("s3/bucket/parts/part-00002/0.zr");
    let mut bytes = std::fs::read(&chunk).unwrap();
    bytes[40] ^= 1;
    std::fs::write(&chunk, &bytes).unwrap();
    let fresh = |args: &[&str]| loaderx(&endpoint, &tmp.path().join("cache2"), args);
    let damaged = fresh(&["verify", "--json", "s3://bucket/set"]);
    assert!(!damaged.status.success());
    let text = String::from_utf8_lossy(&damaged.stdout);
    let v: serde_json::Value = serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("{e}: {text}"));
    assert_eq!((v["damaged"].as_u64(), v["records"][0]["index"].as_u64()), (Some(1), Some(200)), "{text}");
    // The last part replaced by the first (100 records, not 101): named, with both counts.
    ok(&run(&["push", tmp.path().join("p0").to_str().unwrap(), "s3://bucket/parts/part-00002"]));
    let changed = fresh(&["verify", "s3://bucket/set"]);
    assert!(!changed.status.success());
    let text = String::from_utf8_lossy(&changed.stdout);
    assert!(
        text.contains("part s3://bucket/parts/part-00002: ")
            && text.contains("the part holds 100 records, the set was stitched with 101")
            && text.contains("stitch the set again once its parts are complete"),
        "{text}"
    );
    // A manifest listing 20 parts that are not there: the check stops after 16 (look 81: each
    // absent part costs requests, and a lying manifest may list millions).
    use loaderx_core::format::storeset::{SetManifest, SetPart};
    let absent = (0..20).map(|i| SetPart { path: format!("q{i}"), records: 1, identity: None }).collect();
    std::fs::write(tmp.path().join("s3/bucket/set/storeset.msgpack"), SetManifest::new(absent).encode())
        .unwrap();
    let lying = fresh(&["verify", "s3://bucket/set"]);
    let text = String::from_utf8_lossy(&lying.stdout);
    assert!(!lying.status.success() && text.contains("stopped after 16 parts"), "{text}");
    assert_eq!(text.matches("part s3://bucket/set/q").count(), 16, "{text}");
}

/// Look 93, kept until now: `verify` of a store set on object storage whose own schema is
/// damaged stopped with that error, its parts unchecked; locally the schema is listed as damage
/// and every part checked. Now the same on a URL.
#[test]
fn verify_of_a_remote_set_with_a_damaged_schema_still_checks_its_parts() {
    let tmp = tempfile::tempdir().unwrap();
    let (_runtime, endpoint) = server(&tmp.path().join("s3"));
    let cache = tmp.path().join("cache");
    let run = |args: &[&str]| loaderx(&endpoint, &cache, args);
    remote_set_of_parts(tmp.path(), &run, 20, 2);
    let flip = |path: &Path, at: usize| {
        let mut b = std::fs::read(path).unwrap();
        b[at] ^= 1;
        std::fs::write(path, b).unwrap();
    };
    flip(&tmp.path().join("s3/bucket/set/schema.msgpack"), 3);
    // And a record of the second part: found, numbered as the set numbers it.
    flip(&tmp.path().join("s3/bucket/parts/part-00001/0.zr"), 0);
    let o = run(&["verify", "--json", "s3://bucket/set"]);
    assert_eq!(o.status.code(), Some(1), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    let v: serde_json::Value = serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("{e}: {text}"));
    assert_eq!((v["damaged"].as_u64(), v["records"][0]["index"].as_u64()), (Some(1), Some(10)), "{text}");
    let files = v["files"].to_string();
    assert!(files.contains("the set: ") && files.contains("schema.msgpack"), "{text}");
    let o = run(&["verify", "s3://bucket/set"]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(!o.status.success() && text.contains("the set: ") && text.contains("record 10"), "{text}");
}

/// Look 100: `verify s3://` said "all intact" of a store whose pushed `manifest.zr` was missing,
/// empty or another store's (L100-4), and read the index from the local copy kept under the
/// object's ETag, which a server may keep after the object's bytes change. It now checks the
/// manifest against the index and the objects, and reads every object from the server.
#[test]
fn verify_of_a_url_checks_its_manifest_and_reads_the_servers_objects() {
    let tmp = tempfile::tempdir().unwrap();
    let (_runtime, endpoint) = server(&tmp.path().join("s3"));
    let cache = tmp.path().join("cache");
    let run = |args: &[&str]| loaderx(&endpoint, &cache, args);
    let (npy, small) = (tmp.path().join("x.npy"), tmp.path().join("s.npy"));
    write_npy(&npy, "<i4", "(200, 3)", (0..600i32).flat_map(|v| v.to_le_bytes()));
    write_npy(&small, "<i4", "(50, 3)", (1000..1150i32).flat_map(|v| v.to_le_bytes()));
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    for (input, out) in [(&npy, &a), (&small, &b)] {
        ok(&run(&["convert", "npy", input.to_str().unwrap(), out.to_str().unwrap(), "--codec", "zstd"]));
    }
    ok(&run(&["push", a.to_str().unwrap(), "s3://bucket/a"]));
    assert!(ok(&run(&["verify", "s3://bucket/a"])).contains("200 records, all intact"));
    let manifest = tmp.path().join("s3/bucket/a/manifest.zr");
    let intact = std::fs::read(&manifest).unwrap();
    for (case, bytes) in [
        ("another store's", Some(std::fs::read(b.join("manifest.zr")).unwrap())),
        ("empty", Some(Vec::new())),
        ("missing", None),
    ] {
        match &bytes {
            Some(b) => std::fs::write(&manifest, b).unwrap(),
            None => std::fs::remove_file(&manifest).unwrap(),
        }
        let o = run(&["verify", "s3://bucket/a"]);
        let said = String::from_utf8_lossy(&o.stdout);
        assert_eq!(o.status.code(), Some(1), "{case}: {said}");
        assert!(said.contains("manifest.zr"), "{case}: {said}");
    }
    std::fs::write(&manifest, &intact).unwrap();
    assert!(run(&["verify", "s3://bucket/a"]).status.success());
    // The index read once (and kept here under its ETag), then a byte of it flipped on the
    // server: verify reads the server's.
    ok(&run(&["info", "s3://bucket/a"]));
    let index = tmp.path().join("s3/bucket/a/index.zr");
    let mut bytes = std::fs::read(&index).unwrap();
    bytes[8] ^= 0x10;
    std::fs::write(&index, bytes).unwrap();
    let o = run(&["verify", "s3://bucket/a"]);
    let said = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert_eq!(o.status.code(), Some(1), "{said}");
    assert!(said.contains("index.zr"), "{said}");
}
