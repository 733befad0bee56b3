// `loaderx convert ... --part-from-env` under each scheduler's variables and `--part K --parts N`,
// for every converter, then `loaderx stitch DIR SET`: the stitched set is the whole conversion
// record for record; bad variables and incomplete directories of parts are one-line errors
// naming the variable or the parts.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use loaderx_core::convert::NpyHeader;
use loaderx_core::{DType, DenseSource, Kind, RaggedSource, Schema};

/// Every variable `--part-from-env` reads: cleared in each child, so that a test run inside a
/// Slurm job or a Kubernetes pod sees only the test's own.
const VARS: [&str; 6] = [
    "LOADERX_PART",
    "LOADERX_PARTS",
    "SLURM_ARRAY_TASK_ID",
    "SLURM_ARRAY_TASK_MIN",
    "SLURM_ARRAY_TASK_COUNT",
    "JOB_COMPLETION_INDEX",
];

/// `loaderx ARGS` with the scheduler variables `env` (and no others).
fn loaderx(args: &[&dyn AsRef<std::ffi::OsStr>], env: &[(&str, String)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_loaderx"));
    for v in VARS {
        c.env_remove(v);
    }
    c.envs(env.iter().map(|(k, v)| (*k, v.as_str())));
    c.args(args).output().unwrap()
}

fn ok(o: &Output) -> String {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The one-line error of a failed run.
fn err(o: &Output) -> String {
    assert!(!o.status.success(), "{}", String::from_utf8_lossy(&o.stdout));
    let e = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(e.trim_end().lines().count(), 1, "{e}");
    e
}

/// Every record of the dataset or store set at `p`, as bytes.
fn records_of(p: &Path) -> Vec<Vec<u8>> {
    let schema = Schema::read(p).unwrap();
    let unit = schema.unit_bytes();
    if schema.kind == Kind::Dense {
        let s = DenseSource::open(p).unwrap();
        let all: Vec<u32> = (0..s.len() as u32).collect();
        let mut buf = vec![0u8; all.len() * unit];
        s.gather_bytes(&all, &mut buf).unwrap();
        return buf.chunks(unit.max(1)).map(<[u8]>::to_vec).collect();
    }
    let s = RaggedSource::open(p).unwrap();
    let all: Vec<u32> = (0..s.len() as u32).collect();
    let b = s.get_batch(&all).unwrap();
    let (off, bytes) = (b.offsets(), b.values().as_bytes());
    (0..all.len()).map(|k| bytes[off[k] * unit..off[k + 1] * unit].to_vec()).collect()
}

/// The scheduler variables of task `k` of `n`, a different scheduler for each `style`.
fn task_env(style: usize, k: usize, n: usize) -> (Vec<(&'static str, String)>, Vec<String>) {
    match style % 3 {
        0 => (
            vec![
                ("SLURM_ARRAY_TASK_ID", (k + 10).to_string()),
                ("SLURM_ARRAY_TASK_MIN", "10".into()),
                ("SLURM_ARRAY_TASK_COUNT", n.to_string()),
            ],
            vec![],
        ),
        1 => (vec![("JOB_COMPLETION_INDEX", k.to_string())], vec!["--parts".into(), n.to_string()]),
        _ => (vec![("LOADERX_PART", k.to_string()), ("LOADERX_PARTS", n.to_string())], vec![]),
    }
}

/// A converter's format, its input paths, the datasets it writes (`""`: one at OUT itself) and
/// its other flags.
type Conversion = (&'static str, Vec<PathBuf>, Vec<&'static str>, Vec<&'static str>);

/// The inputs of every converter this build has, in `dir`.
fn inputs(dir: &Path) -> Vec<Conversion> {
    let npy = dir.join("a.npy");
    let mut bytes = NpyHeader::encode(DType::U16, &[10, 3]).unwrap();
    bytes.extend((0..30u16).flat_map(|x| (x * 3).to_le_bytes()));
    std::fs::write(&npy, bytes).unwrap();
    let idx = dir.join("a.idx");
    let mut bytes = vec![0, 0, 8, 1, 0, 0, 0, 7];
    bytes.extend(0..7u8);
    std::fs::write(&idx, bytes).unwrap();
    let files = dir.join("files");
    std::fs::create_dir(&files).unwrap();
    for k in 0..5 {
        std::fs::write(files.join(format!("f{k}")), vec![k as u8; k]).unwrap();
    }
    let jsonl = dir.join("a.jsonl");
    std::fs::write(&jsonl, (0..200).map(|i| format!("{{\"i\":{i}}}\n")).collect::<String>()).unwrap();
    let st = dir.join("m.safetensors");
    let w: Vec<u8> = (0..16).collect();
    let t = safetensors::tensor::TensorView::new(safetensors::tensor::Dtype::U8, vec![8, 2], &w).unwrap();
    std::fs::write(&st, safetensors::serialize(vec![("w", t)], None).unwrap()).unwrap();
    #[allow(unused_mut, reason = "the images converter is added only with its feature")]
    let mut all = vec![
        ("npy", vec![npy], vec![""], vec![]),
        ("idx", vec![idx], vec![""], vec![]),
        ("dir", vec![files], vec![""], vec![]),
        ("jsonl", vec![jsonl], vec![""], vec![]),
        ("safetensors", vec![st], vec!["w"], vec![]),
    ];
    #[cfg(feature = "images")]
    {
        let folder = dir.join("folder");
        for (class, n) in [("a", 2), ("b", 3)] {
            std::fs::create_dir_all(folder.join(class)).unwrap();
            for k in 0..n {
                std::fs::write(folder.join(class).join(format!("{k}.png")), crate::ingest::RED_PNG).unwrap();
            }
        }
        all.push(("images", vec![folder], vec!["images", "labels"], vec!["--size", "4x3"]));
    }
    all
}

/// Each converter run as the 4 tasks of a Slurm array (its ids from 10), a Kubernetes indexed
/// job or with LOADERX_PART: each task writes OUT/part-0000K, and `stitch OUT SET --parts 4`
/// is the whole conversion, record for record (the parts of a directory of datasets stitched
/// into one set per dataset).
#[test]
fn every_converter_run_from_the_environment_stitches_to_the_whole_conversion() {
    let dir = tempfile::tempdir().unwrap();
    for (style, (format, input, datasets, extra)) in inputs(dir.path()).into_iter().enumerate() {
        let whole = dir.path().join(format!("{format}-whole"));
        let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> = vec![&"convert", &format];
        args.extend(input.iter().map(|p| p as &dyn AsRef<std::ffi::OsStr>));
        args.extend(extra.iter().map(|a| a as &dyn AsRef<std::ffi::OsStr>));
        let mut whole_args = args.clone();
        whole_args.push(&whole);
        ok(&loaderx(&whole_args, &[]));
        let out = dir.path().join(format!("{format}-parts"));
        for k in 0..4 {
            let (env, flags) = task_env(style, k, 4);
            let mut a = args.clone();
            a.push(&out);
            a.push(&"--part-from-env");
            a.extend(flags.iter().map(|f| f as &dyn AsRef<std::ffi::OsStr>));
            let text = ok(&loaderx(&a, &env));
            let part = out.join(format!("part-0000{k}"));
            assert!(text.contains(&part.display().to_string()), "{format}: {text}");
            assert!(part.is_dir(), "{format}: task {k} writes {}", part.display());
        }
        let set = dir.path().join(format!("{format}-set"));
        let text = ok(&loaderx(&[&"stitch", &out, &set, &"--parts", &"4"], &[]));
        assert!(text.contains("4 parts"), "{format}: {text}");
        for name in datasets {
            let want = records_of(&whole.join(name));
            assert!(!want.is_empty());
            assert_eq!(records_of(&set.join(name)), want, "{format} {name}: stitched parts = the whole");
        }
    }
}

/// `--part K --parts N` writes OUT itself (the caller names each part); the same part from the
/// environment goes to OUT/part-NNNNN; `--parts` alone and `--part` with `--part-from-env` are
/// refused.
#[test]
fn an_explicit_part_writes_out_itself_and_flag_mixes_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (_, input, _, _) = inputs(dir.path()).swap_remove(0);
    let explicit = dir.path().join("p1");
    ok(&loaderx(&[&"convert", &"npy", &input[0], &explicit, &"--part", &"1", &"--parts", &"3"], &[]));
    let env = [("LOADERX_PART", "1".to_string()), ("LOADERX_PARTS", "3".to_string())];
    let parts = dir.path().join("parts");
    ok(&loaderx(&[&"convert", &"npy", &input[0], &parts, &"--part-from-env"], &env));
    let want = records_of(&parts.join("part-00001"));
    assert_eq!(want.len(), 3, "rows 3..6 of 10");
    assert_eq!(records_of(&explicit), want);
    let e = err(&loaderx(&[&"convert", &"npy", &input[0], &dir.path().join("x"), &"--parts", &"3"], &[]));
    assert!(e.contains("--parts N needs --part K or --part-from-env"), "{e}");
    let e = err(&loaderx(
        &[
            &"convert",
            &"npy",
            &input[0],
            &dir.path().join("x"),
            &"--part",
            &"1",
            &"--parts",
            &"3",
            &"--part-from-env",
        ],
        &env,
    ));
    assert!(e.contains("--part-from-env") && e.contains("--part"), "{e}");
    assert!(!dir.path().join("x").exists());
}

#[test]
fn bad_scheduler_variables_are_errors_naming_them_and_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (_, input, _, _) = inputs(dir.path()).swap_remove(0);
    let out = dir.path().join("out");
    let s = |v: &str| v.to_string();
    // The variables, the flags, and what the error says.
    type Case<'a> = (Vec<(&'a str, String)>, Vec<&'a str>, &'a str);
    let cases: Vec<Case<'_>> = vec![
        (vec![], vec![], "none of LOADERX_PART, SLURM_ARRAY_TASK_ID and JOB_COMPLETION_INDEX is set"),
        (
            vec![("SLURM_ARRAY_TASK_ID", s("x1")), ("SLURM_ARRAY_TASK_COUNT", s("4"))],
            vec![],
            "SLURM_ARRAY_TASK_ID: \"x1\" is not a non-negative integer",
        ),
        (
            vec![("SLURM_ARRAY_TASK_ID", s("4")), ("SLURM_ARRAY_TASK_COUNT", s("4"))],
            vec![],
            "SLURM_ARRAY_TASK_ID: part 4",
        ),
        (vec![("SLURM_ARRAY_TASK_ID", s("1"))], vec![], "SLURM_ARRAY_TASK_COUNT: not set"),
        (
            vec![("SLURM_ARRAY_TASK_ID", s("1")), ("SLURM_ARRAY_TASK_MIN", s("2"))],
            vec!["--parts", "4"],
            "below SLURM_ARRAY_TASK_MIN=2",
        ),
        (vec![("JOB_COMPLETION_INDEX", s("2"))], vec![], "--parts: JOB_COMPLETION_INDEX=2 is set"),
        (
            vec![("JOB_COMPLETION_INDEX", s("2"))],
            vec!["--parts", "2"],
            "JOB_COMPLETION_INDEX: part 2 is not below the 2 parts",
        ),
        (
            vec![("LOADERX_PART", s("0")), ("LOADERX_PARTS", s("3"))],
            vec!["--parts", "4"],
            "LOADERX_PARTS: 3 parts, but --parts 4",
        ),
    ];
    for (env, flags, want) in cases {
        let mut a: Vec<&dyn AsRef<std::ffi::OsStr>> =
            vec![&"convert", &"npy", &input[0], &out, &"--part-from-env"];
        a.extend(flags.iter().map(|f| f as &dyn AsRef<std::ffi::OsStr>));
        let e = err(&loaderx(&a, &env));
        assert!(e.contains(want), "{env:?} {flags:?}: {e}");
        assert!(!out.exists(), "{env:?}");
    }
}

/// `stitch DIR SET` refuses a directory of parts with a number missing (at the end too, with
/// --parts) or under two names, naming them, and writes nothing.
#[test]
fn stitch_of_a_directory_names_missing_and_duplicate_parts() {
    let dir = tempfile::tempdir().unwrap();
    let (_, input, _, _) = inputs(dir.path()).swap_remove(0);
    let out = dir.path().join("out");
    for k in [0, 1, 3] {
        let env = [("LOADERX_PART", k.to_string()), ("LOADERX_PARTS", "4".to_string())];
        ok(&loaderx(&[&"convert", &"npy", &input[0], &out, &"--part-from-env"], &env));
    }
    let set = dir.path().join("set");
    let e = err(&loaderx(&[&"stitch", &out, &set], &[]));
    assert!(e.contains("1 of 4 parts missing: part-00002") && e.contains(&out.display().to_string()), "{e}");
    let e = err(&loaderx(&[&"stitch", &out, &set, &"--parts", &"6"], &[]));
    assert!(e.contains("3 of 6 parts missing: part-00002, part-00004, part-00005"), "{e}");
    ok(&loaderx(
        &[&"convert", &"npy", &input[0], &out.join("part-00002"), &"--part", &"2", &"--parts", &"4"],
        &[],
    ));
    ok(&loaderx(
        &[&"convert", &"npy", &input[0], &out.join("part-1"), &"--part", &"1", &"--parts", &"4"],
        &[],
    ));
    let e = err(&loaderx(&[&"stitch", &out, &set], &[]));
    assert!(e.contains("one part under two names: part-00001 and part-1"), "{e}");
    assert!(!set.exists());
    let e = err(&loaderx(
        &[&"stitch", &out.join("part-00000"), &out.join("part-00002"), &set, &"--parts", &"2"],
        &[],
    ));
    assert!(e.contains("--parts N counts the parts of one directory"), "{e}");
    std::fs::remove_dir_all(out.join("part-1")).unwrap();
    let text = ok(&loaderx(&[&"stitch", &out, &set, &"--parts", &"4"], &[]));
    assert!(text.contains("a store set of 4 parts, 10 records"), "{text}");
}
