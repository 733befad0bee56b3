//! The C interface from C: the programs in tests/c/ compiled with `cc -Wall -Werror` against
//! include/, linked against the built libloaderx_capi.so (with an rpath) and libloaderx_capi.a,
//! and run; the exported symbols against symbols.txt and the headers; a Python ctypes smoke test;
//! one AddressSanitizer run.
//!
//! Skipped (with a line on stderr) only where the machine lacks the tool: `cc` for the C
//! programs, `nm` for the symbol list, `python3` for ctypes, ASan support for the sanitizer run;
//! with `LOADERX_REQUIRE_C=1` (CI) a missing tool fails the test instead.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use loaderx_core::{Codec, DType, Format, Sampler, SamplerMode, Schema, Store, StoreOptions};

// The guards of issue 40 from C, in tests/c/guards.rs beside their C program (one test binary).
#[path = "c/guards.rs"]
mod guards;
// The programs under AddressSanitizer, and the headers as C99 and C++ (tests/c/toolchain.rs).
#[path = "c/toolchain.rs"]
mod toolchain;

const RECORDS: u64 = 200;
const ITEMS: u32 = 100;

/// Record `i` of the stores the C programs write and read (store.c's rule).
fn record(i: u64) -> Vec<u8> {
    let len = 100 + ((i * 37) % 200) as usize;
    (0..len).map(|j| b'a' + ((i + (j / 8) as u64) % 5) as u8).collect()
}

fn manifest_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Where cargo put this crate's shared and static libraries: `deps/`, beside the test binary,
/// built with it (the copies `cargo build` puts one level up may be older).
fn lib_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let deps = exe.parent().expect("the test binary's directory");
    [Some(deps), deps.parent()]
        .into_iter()
        .flatten()
        .find(|d| d.join("libloaderx_capi.so").exists() && d.join("libloaderx_capi.a").exists())
        .unwrap_or_else(|| panic!("libloaderx_capi.so and .a not found beside {}", deps.display()))
        .to_path_buf()
}

fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("loaderx-capi").join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn have(tool: &str) -> bool {
    Command::new(tool).arg("--version").output().is_ok_and(|o| o.status.success())
}

/// Notes a check skipped for want of a tool, or fails under `LOADERX_REQUIRE_C`.
fn skip(why: &str) {
    assert!(std::env::var_os("LOADERX_REQUIRE_C").is_none(), "LOADERX_REQUIRE_C is set, but {why}");
    eprintln!("skipped: {why}");
}

/// A C program built both ways.
struct Program {
    dynamic: PathBuf,
    fixed: PathBuf,
}

fn cc(args: &[&std::ffi::OsStr]) {
    let out = Command::new("cc").args(args).output().expect("cc runs");
    assert!(out.status.success(), "cc {args:?} failed:\n{}", String::from_utf8_lossy(&out.stderr));
}

/// Compiles tests/c/`name`.c against the headers and links it dynamically and statically.
fn compile(name: &str, dir: &Path, extra: &[&str]) -> Program {
    let src = manifest_dir().join("tests/c").join(format!("{name}.c"));
    let include = manifest_dir().join("include");
    let libs = lib_dir();
    let dynamic = dir.join(format!("{name}-dynamic"));
    let fixed = dir.join(format!("{name}-static"));
    let warn = ["-Wall", "-Wextra", "-Werror", "-std=c11", "-D_POSIX_C_SOURCE=200809L", "-pthread"];
    let mut common: Vec<std::ffi::OsString> = warn.iter().chain(extra).map(Into::into).collect();
    common.push("-I".into());
    common.push(include.into());
    common.push(src.into());
    let mut args = common.clone();
    args.extend([
        "-o".into(),
        dynamic.clone().into(),
        "-L".into(),
        libs.clone().into(),
        "-lloaderx_capi".into(),
    ]);
    args.push(format!("-Wl,-rpath,{}", libs.display()).into());
    cc(&args.iter().map(|a| a.as_os_str()).collect::<Vec<_>>());
    let mut args = common;
    args.extend(["-o".into(), fixed.clone().into(), libs.join("libloaderx_capi.a").into()]);
    args.extend(["-lpthread", "-ldl", "-lm"].map(Into::into));
    // Without ASan's `-g`, the static program drops the library's debug info (hundreds of MB
    // in a dev build) and keeps its symbols: a crash still names the function.
    if !extra.contains(&"-g") {
        args.push("-Wl,--strip-debug".into());
    }
    cc(&args.iter().map(|a| a.as_os_str()).collect::<Vec<_>>());
    Program { dynamic, fixed }
}

struct Programs {
    chunker: Program,
    store: Program,
    readme: Program,
    /// Compiled with the rest, so that it keeps building; run by the tests below marked
    /// "needs core fix" (see there).
    guards: Program,
}

/// The C programs, compiled once for the whole test binary; None without a C compiler.
fn programs() -> Option<&'static Programs> {
    static PROGRAMS: OnceLock<Option<Programs>> = OnceLock::new();
    PROGRAMS
        .get_or_init(|| {
            if !have("cc") {
                skip("no C compiler (cc) on PATH");
                return None;
            }
            let dir = scratch("bin");
            Some(Programs {
                chunker: compile("chunker", &dir, &[]),
                store: compile("store", &dir, &[]),
                readme: compile("readme", &dir, &[]),
                guards: compile("guards", &dir, &[]),
            })
        })
        .as_ref()
}

/// Runs a C program. `cargo test` puts `target/debug` (where `cargo build` leaves a copy of the
/// library, perhaps an older one) on `LD_LIBRARY_PATH`, which outranks the rpath: it is removed
/// so that the dynamic build loads the library it was linked against.
fn run(exe: &Path, args: &[&Path]) -> Output {
    Command::new(exe)
        .args(args)
        .env_remove("LD_LIBRARY_PATH")
        .output()
        .unwrap_or_else(|e| panic!("{} does not run: {e}", exe.display()))
}

/// Runs `exe` and returns its stdout, failing the test (with its stderr) unless it exits 0.
fn run_ok(exe: &Path, args: &[&Path]) -> String {
    let out = run(exe, args);
    assert!(
        out.status.success(),
        "{} {args:?}: {}\nstdout:\n{}\nstderr:\n{}",
        exe.display(),
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn chunker_behaves_as_its_header_says_linked_both_ways() {
    let Some(p) = programs() else { return };
    for exe in [&p.chunker.dynamic, &p.chunker.fixed] {
        let dir = scratch(&format!("chunker-{}", exe.file_name().unwrap().to_string_lossy()));
        let out = run_ok(exe, &[Path::new("selftest"), &dir]);
        assert!(out.contains(" 0 failed"), "{out}");
    }
}

/// A byte string of records of random lengths (some giant), by a fixed xorshift.
fn random_records(seed: u64, len: usize, delimiter: &[u8]) -> Vec<u8> {
    let mut state = seed | 1;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut out = Vec::with_capacity(len + 5000);
    while out.len() < len {
        let n = if next() % 12 == 0 { 500 + next() % 2000 } else { next() % 60 };
        out.extend((0..n).map(|_| b'a' + (next() % 26) as u8));
        out.extend_from_slice(delimiter);
    }
    out.truncate(len);
    out
}

fn plan_from_c(exe: &Path, file: &Path, mode: &str, size: usize, delimiter: &str) -> Vec<(usize, usize)> {
    let size = size.to_string();
    let out =
        run_ok(exe, &[Path::new("plan"), file, Path::new(mode), Path::new(&size), Path::new(delimiter)]);
    out.lines()
        .map(|line| {
            let (a, b) = line.split_once(' ').unwrap();
            (a.parse().unwrap(), b.parse().unwrap())
        })
        .collect()
}

#[test]
fn every_plan_from_c_is_loaderx_cores_plan() {
    use loaderx_core::framing::{chunk_boundaries, chunk_boundaries_pattern, fixed_chunk_bounds, partition};
    let Some(p) = programs() else { return };
    let dir = scratch("plans");
    let lf = random_records(7, 60_000, b"\n");
    let crlf = random_records(11, 60_000, b"\r\n");
    let (lf_path, crlf_path) = (dir.join("lf.txt"), dir.join("crlf.txt"));
    std::fs::write(&lf_path, &lf).unwrap();
    std::fs::write(&crlf_path, &crlf).unwrap();
    let exe = &p.chunker.dynamic;
    for size in [0, 1, 7, 64, 1000, 4096, 59_999, 60_000, 1 << 20] {
        assert_eq!(
            plan_from_c(exe, &lf_path, "lines", size, "\n"),
            chunk_boundaries(&lf, size, b'\n').unwrap(),
            "{size}"
        );
        assert_eq!(
            plan_from_c(exe, &lf_path, "byte", size, "a"),
            chunk_boundaries(&lf, size, b'a').unwrap(),
            "{size}"
        );
        assert_eq!(
            plan_from_c(exe, &crlf_path, "pattern", size, "\r\n"),
            chunk_boundaries_pattern(&crlf, size, b"\r\n").unwrap(),
            "{size}"
        );
        let fixed: Vec<_> = (0..)
            .map_while(|i| fixed_chunk_bounds(lf.len() as u64, size as u64, i))
            .map(|(a, b)| (a as usize, b as usize))
            .collect();
        if fixed.len() <= 100_000 {
            assert_eq!(plan_from_c(exe, &lf_path, "fixed", size, "\n"), fixed, "{size}");
        }
    }
    for parts in (1..=40).chain([64, 500, 4096, 60_000, 1 << 30]) {
        let expected: Vec<_> = partition(&lf, parts, b'\n')
            .unwrap()
            .iter()
            .map(|r| (r.start as usize, r.end as usize))
            .collect();
        assert_eq!(plan_from_c(exe, &lf_path, "partition", parts, "\n"), expected, "{parts}");
    }
}

#[test]
fn store_api_behaves_as_its_header_says_linked_both_ways() {
    let Some(p) = programs() else { return };
    for exe in [&p.store.dynamic, &p.store.fixed] {
        let dir = scratch(&format!("store-{}", exe.file_name().unwrap().to_string_lossy()));
        let out = run_ok(exe, &[Path::new("selftest"), &dir]);
        assert!(out.contains(" 0 failed"), "{out}");
    }
}

/// The `loaderx` binary `cargo test-all` builds beside this test, when it is there.
fn cli() -> Option<PathBuf> {
    let exe = std::env::current_exe().expect("the test binary's path");
    let path = exe.parent()?.parent()?.join("loaderx");
    path.exists().then_some(path)
}

#[test]
fn a_store_written_from_c_reads_back_in_rust_and_the_cli() {
    let Some(p) = programs() else { return };
    let dir = scratch("c-writes");
    let (store_dir, dataset_dir) = (dir.join("store"), dir.join("dataset"));
    let out = run_ok(&p.store.fixed, &[Path::new("write"), &store_dir, &dataset_dir]);
    assert!(out.contains(" 0 failed"), "{out}");

    let store = Store::open(&store_dir).unwrap();
    assert_eq!(store.len(), RECORDS);
    let indices: Vec<u64> = (0..RECORDS).collect();
    for (i, bytes) in store.gather(&indices).unwrap().iter().enumerate() {
        assert_eq!(bytes, &record(i as u64), "record {i}");
    }
    assert!(store.verify().unwrap().is_ok());
    let stats = store.stats().unwrap();
    for codec in [Codec::Raw, Codec::Zstd, Codec::ZstdDict, Codec::Lz4] {
        assert_eq!(stats.codecs.get(codec), RECORDS / 4, "{codec:?}");
    }

    assert_eq!(Schema::read(&dataset_dir).unwrap(), Schema::dense(DType::U32, vec![4]));
    let items = Store::open(&dataset_dir).unwrap();
    let mut values = vec![0u8; 16 * ITEMS as usize];
    items.gather_fixed(&(0..u64::from(ITEMS)).collect::<Vec<_>>(), 16, &mut values).unwrap();
    let expected: Vec<u8> = (0..ITEMS * 4).flat_map(u32::to_ne_bytes).collect();
    assert_eq!(values, expected);

    let Some(cli) = cli() else {
        eprintln!("the loaderx binary is not built here (cargo test-all builds it): its checks skipped");
        return;
    };
    let verify = run_ok(&cli, &[Path::new("verify"), &store_dir]);
    assert!(verify.contains("all 200 records intact"), "{verify}");
    let npy = dir.join("items.npy");
    run_ok(&cli, &[Path::new("export"), &dataset_dir, &npy]);
    let bytes = std::fs::read(&npy).unwrap();
    assert!(bytes.starts_with(b"\x93NUMPY"));
    assert!(bytes.ends_with(&expected), "the .npy holds the items after its header");
}

/// What store.c reads: the same records and items, written by the Rust API.
fn write_from_rust(store_dir: &Path, dataset_dir: &Path) {
    let store = Store::create(store_dir, StoreOptions::new().format(Format::V2)).unwrap();
    let all: Vec<Vec<u8>> = (0..RECORDS).map(record).collect();
    assert!(store.train_dictionary(&all).unwrap());
    for (k, codec) in [Codec::Raw, Codec::Zstd, Codec::Lz4, Codec::ZstdDict].into_iter().enumerate() {
        let quarter = (RECORDS / 4) as usize;
        store.append(&all[k * quarter..(k + 1) * quarter], codec).unwrap();
    }
    drop(store);
    let items = Store::create(dataset_dir, StoreOptions::new()).unwrap();
    let records: Vec<Vec<u8>> =
        (0..ITEMS).map(|i| (4 * i..4 * i + 4).flat_map(u32::to_ne_bytes).collect()).collect();
    items.append(&records, Codec::Lz4).unwrap();
    Schema::dense(DType::U32, vec![4]).write(dataset_dir).unwrap();
}

#[test]
fn a_store_written_in_rust_reads_back_from_c() {
    let Some(p) = programs() else { return };
    let dir = scratch("rust-writes");
    let (store_dir, dataset_dir) = (dir.join("store"), dir.join("dataset"));
    write_from_rust(&store_dir, &dataset_dir);
    for exe in [&p.store.dynamic, &p.store.fixed] {
        let out = run_ok(exe, &[Path::new("read"), &store_dir, &dataset_dir]);
        assert!(out.contains(" 0 failed"), "{out}");
    }
}

#[test]
fn a_damaged_store_is_an_error_code_and_a_text_naming_the_file_never_a_crash() {
    let Some(p) = programs() else { return };
    type Damage = fn(&Path);
    let flip_chunk: Damage = |d| {
        let path = d.join("0.zr");
        let mut bytes = std::fs::read(&path).unwrap();
        let mid = bytes.len() / 2;
        for b in &mut bytes[mid..mid + 64] {
            *b ^= 0x5A;
        }
        std::fs::write(&path, bytes).unwrap();
    };
    let truncate_chunk: Damage = |d| {
        let path = d.join("0.zr");
        let len = std::fs::metadata(&path).unwrap().len();
        std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(len / 3).unwrap();
    };
    let garble_index: Damage = |d| {
        let path = d.join("index.zr");
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[..64].fill(0xEE);
        std::fs::write(&path, bytes).unwrap();
    };
    let truncate_index: Damage = |d| {
        std::fs::OpenOptions::new().write(true).open(d.join("index.zr")).unwrap().set_len(10).unwrap();
    };
    let garble_dictionary: Damage = |d| std::fs::write(d.join("dict.zr"), b"not a dictionary").unwrap();
    let cases = [
        ("flipped chunk bytes", flip_chunk),
        ("truncated chunk", truncate_chunk),
        ("garbled index header", garble_index),
        ("truncated index", truncate_index),
        ("garbled dictionary", garble_dictionary),
    ];
    for (what, damage) in cases {
        let dir = scratch(&format!("damaged-{}", what.replace(' ', "-")));
        let (store_dir, dataset_dir) = (dir.join("store"), dir.join("dataset"));
        write_from_rust(&store_dir, &dataset_dir);
        damage(&store_dir);
        for exe in [&p.store.dynamic, &p.store.fixed] {
            let out = run(exe, &[Path::new("damaged"), &store_dir]);
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(out.status.success(), "{what}: {} (no error, or a crash)\n{stdout}", out.status);
            assert!(
                stdout.contains("code=LX_ERR_CORRUPT") || stdout.contains("code=LX_ERR_NOT_A_STORE"),
                "{what}: {stdout}"
            );
            let message = stdout.lines().find_map(|l| l.strip_prefix("message=")).unwrap();
            assert!(
                message.contains(&*store_dir.to_string_lossy()),
                "{what}: the text names the store: {stdout}"
            );
        }
    }
}

/// A store of `n` raw 4-byte records laid out as `opts` says, then every byte of its chunk files
/// flipped: every record damaged.
fn store_of_damaged_records(dir: &Path, n: u64, opts: StoreOptions) {
    let store = Store::create(dir, opts).unwrap();
    for first in (0..n).step_by(1 << 16) {
        let batch: Vec<[u8; 4]> =
            (first..n.min(first + (1 << 16))).map(|i| (i as u32).to_le_bytes()).collect();
        store.append(&batch, Codec::Raw).unwrap();
    }
    drop(store);
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.strip_suffix(".zr").is_some_and(|id| id.bytes().all(|b| b.is_ascii_digit())) {
            let flipped: Vec<u8> = std::fs::read(&path).unwrap().iter().map(|b| !b).collect();
            std::fs::write(&path, flipped).unwrap();
        }
    }
}

#[test]
fn verify_from_c_counts_every_damaged_record_in_flat_memory() {
    let Some(p) = programs() else { return };
    // store.c bounds the growth of the peak resident set by 64 MiB. Keeping every damaged
    // record's error grew it by about 120 MB on the first store and 290 MB on the second;
    // streaming, by about 33 MB (mostly the index's pages) and 6 MB.
    let layouts = [
        ("entries", StoreOptions::new(), 300_000u64),
        ("fixed", StoreOptions::new().fixed_stride(4), 1 << 20),
    ];
    for (layout, opts, n) in layouts {
        let dir = scratch(&format!("verify-many-{layout}"));
        store_of_damaged_records(&dir.join("store"), n, opts);
        let out = run_ok(
            &p.store.fixed,
            &[Path::new("verify-many"), &dir.join("store"), Path::new(&n.to_string())],
        );
        assert!(out.contains(" 0 failed"), "{layout}: {out}");
    }
}

#[test]
fn sampler_batches_from_c_are_loaderx_cores() {
    let Some(p) = programs() else { return };
    let out = run_ok(&p.store.dynamic, &[Path::new("sampler")]);
    let mut expected = String::new();
    let modes = [
        SamplerMode::Sequential,
        SamplerMode::Iid,
        SamplerMode::Cyclic,
        SamplerMode::BlockCyclic { block: 4, window: 2 },
    ];
    for (m, mode) in modes.into_iter().enumerate() {
        let s = Sampler::builder(1000).batch_size(8).mode(mode).seed(42).rank(1).world(2).build().unwrap();
        for step in (0..5).map(|k| k * 1000) {
            let batch: Vec<String> = s.batch(step).iter().map(u32::to_string).collect();
            expected.push_str(&format!("{m} {step}: {}\n", batch.join(" ")));
        }
    }
    assert_eq!(out, expected);
}

#[test]
fn the_guides_example_is_tests_c_readme_c_and_runs() {
    let source = std::fs::read_to_string(manifest_dir().join("tests/c/readme.c")).unwrap();
    let guide = std::fs::read_to_string(manifest_dir().join("../docs/guide/src/c.md")).unwrap();
    let body = source.split_once('\n').unwrap().1;
    assert!(
        guide.contains(&format!("```c\n{body}```")),
        "the guide's C example (docs/guide/src/c.md) differs from tests/c/readme.c"
    );

    let Some(p) = programs() else { return };
    let dir = scratch("readme");
    let input = dir.join("in.jsonl");
    let lines: String = (0..1000).map(|i| format!("{{\"n\": {i}}}\n")).collect();
    std::fs::write(&input, lines).unwrap();
    for exe in [&p.readme.dynamic, &p.readme.fixed] {
        let out = run_ok(exe, &[&input, &dir.join("store")]);
        assert!(out.starts_with("4 parts; step 0 reads parts "), "{out}");
        assert_eq!(Store::open(dir.join("store")).unwrap().len(), 4);
    }
}

/// The identifiers `name(` of functions declared in a header, comments left out.
fn declared(header: &str) -> Vec<String> {
    let mut code = String::new();
    let mut rest = header;
    while let Some(start) = rest.find("/*") {
        code.push_str(&rest[..start]);
        rest = rest[start..].split_once("*/").map_or("", |(_, after)| after);
    }
    code.push_str(rest);
    let mut names = Vec::new();
    for (at, _) in code.match_indices('(') {
        let before = &code[..at];
        let start = before.rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).map_or(0, |i| i + 1);
        let name = &before[start..];
        if name.starts_with("mmap_engine_") || name.starts_with("lx_") {
            names.push(name.to_string());
        }
    }
    names.sort();
    names
}

#[test]
fn exported_symbols_are_the_checked_in_list_and_the_headers_declarations() {
    let listed: Vec<String> = std::fs::read_to_string(manifest_dir().join("symbols.txt"))
        .unwrap()
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_string)
        .collect();
    let mut sorted = listed.clone();
    sorted.sort();
    assert_eq!(listed, sorted, "symbols.txt is sorted");

    let mut headers: Vec<String> = ["mmap_chunker.h", "loaderx.h"]
        .iter()
        .flat_map(|h| declared(&std::fs::read_to_string(manifest_dir().join("include").join(h)).unwrap()))
        .collect();
    headers.sort();
    assert_eq!(headers, listed, "the headers declare exactly the listed functions");

    if !have("nm") {
        skip("no nm on PATH");
        return;
    }
    let out = Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(lib_dir().join("libloaderx_capi.so"))
        .output()
        .unwrap();
    assert!(out.status.success());
    let mut exported: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter_map(|l| {
            let mut fields = l.split_whitespace().rev();
            let name = fields.next()?;
            (fields.next()? == "T").then(|| name.to_string())
        })
        .collect();
    exported.sort();
    assert_eq!(exported, listed, "the shared library exports exactly symbols.txt");
}

#[test]
fn python_ctypes_loads_the_chunker() {
    if !have("python3") {
        skip("no python3 on PATH");
        return;
    }
    let dir = scratch("ctypes");
    let input = dir.join("in.jsonl");
    std::fs::write(&input, random_records(3, 20_000, b"\n")).unwrap();
    let script = r#"
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
class CChunkView(ctypes.Structure):
    _fields_ = [("data", ctypes.POINTER(ctypes.c_ubyte)), ("len", ctypes.c_size_t)]
lib.mmap_engine_abi_version.restype = ctypes.c_uint32
lib.mmap_engine_capabilities.restype = ctypes.c_uint32
lib.mmap_engine_last_error.restype = ctypes.c_char_p
lib.mmap_engine_open.restype = ctypes.c_void_p
lib.mmap_engine_open.argtypes = [ctypes.c_char_p]
lib.mmap_engine_partition_records.restype = ctypes.c_size_t
lib.mmap_engine_partition_records.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint8]
lib.mmap_engine_get_chunk.restype = ctypes.c_int32
lib.mmap_engine_get_chunk.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(CChunkView)]
lib.mmap_engine_free.argtypes = [ctypes.c_void_p]
assert lib.mmap_engine_abi_version() == 0x00010003
assert lib.mmap_engine_capabilities() == 0x3F
assert lib.mmap_engine_open(None) is None
assert lib.mmap_engine_last_error() == b"path is null"
h = lib.mmap_engine_open(sys.argv[2].encode())
assert h and lib.mmap_engine_last_error() is None
data = open(sys.argv[2], "rb").read()
for n in (1, 2, 3, 8, 100):
    count = lib.mmap_engine_partition_records(h, n, ord("\n"))
    parts = []
    for i in range(count):
        view = CChunkView()
        assert lib.mmap_engine_get_chunk(h, i, ctypes.byref(view)) == 0
        parts.append(ctypes.string_at(view.data, view.len))
    assert b"".join(parts) == data and all(p.endswith(b"\n") for p in parts[:-1])
view = CChunkView()
assert lib.mmap_engine_get_chunk(h, 10**6, ctypes.byref(view)) == -1
assert lib.mmap_engine_last_error() == b"chunk index out of bounds"
lib.mmap_engine_free(h)
print("ctypes ok")
"#;
    let out = Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(lib_dir().join("libloaderx_capi.so"))
        .arg(&input)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "ctypes ok\n");
}
