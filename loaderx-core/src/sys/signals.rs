//! The process's signal dispositions a program may ask for at its edge: the engine itself never
//! changes them (a library's host owns its process).
#![cfg_attr(unix, expect(unsafe_code, reason = "signal(2) is a foreign function"))]

/// Makes a write past the file-size limit (`ulimit -f`, `RLIMIT_FSIZE`) fail with `EFBIG`
/// instead of killing the process with `SIGXFSZ`: a write that fails is an error the engine
/// cleans up after (its temporary removed, the output untouched), where a process killed by a
/// signal leaves its temporary behind (look 91, N3-2). For a program's `main` (the CLI's); a
/// no-op where the platform has no such signal.
pub fn file_size_limit_as_error() {
    #[cfg(unix)]
    // SAFETY: setting SIGXFSZ to SIG_IGN installs no handler (no code runs on the signal), takes
    // no pointer, and cannot fail for a valid signal number.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
}
