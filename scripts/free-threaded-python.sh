#!/usr/bin/env bash
# A free-threaded CPython (3.14t, built with --disable-gil) for the Python package's tests and
# benches, built from source and installed under a cache directory that later runs reuse. Prints
# the interpreter's path on stdout (and nothing else there); progress goes to stderr.
#
#   scripts/free-threaded-python.sh [--gil] [CACHE_DIR]
#
# Why 3.14t and not 3.13t (Debian trixie's python3.13, which builds with --disable-gil as well):
# PyO3 0.30, the binding's, refuses free-threaded CPython below 3.14 ("PyO3 does not support the
# free-threaded build of CPython versions below 3.14"; 0.29 dropped 3.13t, which CPython called
# experimental); the loaderx specification's own free-threaded rows are 3.14t's. `--gil` builds
# the same source with the GIL, the benches' baseline (loaderx-py/bench/interpreters.py), into
# its own cache directory.
#
# The source: CPython 3.14.4's release tarball as Ubuntu 26.04 LTS ships it (the release pocket
# of its source package python3.14, whose files do not move; Debian carries 3.14 only in testing
# and unstable, whose files are replaced with each upload), checked against the SHA-256 pinned
# below before it is unpacked.
#
# CACHE_DIR defaults to $LOADERX_FT_CACHE, else ~/.cache/loaderx/cpython-3.14t (with --gil:
# ~/.cache/loaderx/cpython-3.14). Build dependencies: a C compiler, make, curl, and the -dev
# packages of OpenSSL, zlib, libffi, bzip2, xz, sqlite3 and readline (pip needs OpenSSL and zlib).
set -euo pipefail

url=http://archive.ubuntu.com/ubuntu/pool/main/p/python3.14/python3.14_3.14.4.orig.tar.xz
sha256=d923c51303e38e249136fc1bdf3568d56ecb03214efdef48516176d3d7faaef8

gil=0
if [ "${1:-}" = --gil ]; then
    gil=1
    shift
fi
if [ "$gil" = 1 ]; then
    cache=${1:-$HOME/.cache/loaderx/cpython-3.14}
    py="$cache/bin/python3.14" flags=() want=True
else
    cache=${1:-${LOADERX_FT_CACHE:-$HOME/.cache/loaderx/cpython-3.14t}}
    py="$cache/bin/python3.14t" flags=(--disable-gil) want=False
fi
log() { echo "free-threaded-python: $*" >&2; }

# An interpreter that runs, with ssl and zlib, and with the GIL as asked, is reused as it is.
usable() {
    [ -x "$py" ] && "$py" -c "import sys, ssl, zlib; sys.exit(0 if sys._is_gil_enabled() == $want else 1)" \
        >/dev/null 2>&1
}
if usable; then
    echo "$py"
    exit 0
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/loaderx-ft.XXXXXX")
trap 'rm -rf "$work"' EXIT
tarball="$work/$(basename "$url")"
log "fetching $url"
curl -fsS --retry 3 -o "$tarball" "$url"
echo "$sha256  $tarball" | sha256sum -c --quiet - >&2 || { log "$tarball is not the pinned CPython 3.14.4"; exit 1; }
log "building $(basename "$tarball") ${flags[*]:-with the GIL} into $cache"
tar -xJf "$tarball" -C "$work"
src=$(find "$work" -maxdepth 1 -type d -name 'Python-3.14.*' | head -n 1)
[ -n "$src" ] || { log "no Python-3.14.* directory in $tarball"; exit 1; }
rm -rf "$cache"
(
    cd "$src"
    ./configure --quiet "${flags[@]}" --prefix="$cache" --with-ensurepip=install >&2
    make -j"$(nproc)" --quiet >&2 2>"$work/make.log" || { tail -n 40 "$work/make.log" >&2; exit 1; }
    make --quiet install >>"$work/make.log" 2>&1 || { tail -n 40 "$work/make.log" >&2; exit 1; }
)
usable || { log "the interpreter built at $py does not run (or not with the GIL as asked)"; exit 1; }
log "$("$py" -VV)"
echo "$py"
