# Sourced by scripts that run Windows builds under Wine: `wine_prefix DIR` makes DIR the Wine
# prefix (exported as WINEPREFIX, with WINEDEBUG=-all) and gives it what Rust programs need.
# Rust's standard library draws random bytes with ProcessPrng from bcryptprimitives.dll, which
# Wine before 9.0 (Debian 12 ships 8.0) lacks: a stand-in of that one function, over advapi32's
# RtlGenRandom, is compiled with mingw-w64 into the prefix's system32 once.
wine_prefix() {
    export WINEDEBUG=-all WINEPREFIX="$1"
    local dll="$WINEPREFIX/drive_c/windows/system32/bcryptprimitives.dll"
    [ -f "$dll" ] && return 0
    wineboot --init >/dev/null 2>&1 || true
    mkdir -p "$(dirname "$dll")"
    local src="$WINEPREFIX/prng.c"
    printf '%s\n' '#include <windows.h>' \
        'BOOLEAN WINAPI SystemFunction036(PVOID, ULONG);' \
        '__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len) {' \
        '    while (len) { ULONG n = len > 0x10000000 ? 0x10000000 : (ULONG)len;' \
        '        if (!SystemFunction036(data, n)) return FALSE; data += n; len -= n; }' \
        '    return TRUE; }' > "$src"
    x86_64-w64-mingw32-gcc -shared -O2 -o "$dll" "$src" -ladvapi32
}
