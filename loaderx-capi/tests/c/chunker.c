/*
 * The mmap_chunker.h interface as its header documents it.
 *
 *   chunker selftest DIR                      every check below; files are written into DIR
 *   chunker plan FILE MODE SIZE [DELIM]       one plan, "start end" per chunk (tests/c.rs
 *                                             compares it with loaderx-core's planners)
 *     MODE: lines | byte | pattern | fixed | partition; DELIM: one byte, or a pattern
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mmap_chunker.h"

static int checks;
static int failures;

#define CHECK(cond)                                                                \
    do {                                                                           \
        checks++;                                                                  \
        if (!(cond)) {                                                             \
            failures++;                                                            \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
        }                                                                          \
    } while (0)

/* The last error is exactly `text` (NULL: no error). */
static int error_is(const char *text) {
    const char *e = mmap_engine_last_error();
    if (text == NULL) {
        return e == NULL;
    }
    return e != NULL && strcmp(e, text) == 0;
}

static char *join(const char *dir, const char *name) {
    size_t n = strlen(dir) + strlen(name) + 2;
    char *path = malloc(n);
    snprintf(path, n, "%s/%s", dir, name);
    return path;
}

static void write_file(const char *path, const uint8_t *bytes, size_t len) {
    FILE *f = fopen(path, "wb");
    if (f == NULL || (len > 0 && fwrite(bytes, 1, len, f) != len) || fclose(f) != 0) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(2);
    }
}

/* The chunks of the current plan cover `bytes` exactly, in order, each a view into one mapping. */
static int covers(CEngineHandle *h, size_t count, const uint8_t *bytes, size_t len) {
    size_t at = 0;
    const uint8_t *next = NULL;
    for (size_t i = 0; i < count; i++) {
        CChunkView v = {0};
        if (mmap_engine_get_chunk(h, i, &v) != 0 || v.len == 0 || at + v.len > len) {
            return 0;
        }
        if ((next != NULL && v.data != next) || memcmp(v.data, bytes + at, v.len) != 0) {
            return 0;
        }
        at += v.len;
        next = v.data + v.len;
    }
    return at == len;
}

/* Every chunk but the last ends with `delim`. */
static int ends_on(CEngineHandle *h, size_t count, uint8_t delim) {
    for (size_t i = 0; i + 1 < count; i++) {
        CChunkView v = {0};
        if (mmap_engine_get_chunk(h, i, &v) != 0 || v.data[v.len - 1] != delim) {
            return 0;
        }
    }
    return 1;
}

static size_t chunk_len(CEngineHandle *h, size_t i) {
    CChunkView v = {0};
    return mmap_engine_get_chunk(h, i, &v) == 0 ? v.len : (size_t)-1;
}

static void versions(void) {
    CHECK(mmap_engine_abi_version() == MMAP_ENGINE_ABI_VERSION);
    CHECK(mmap_engine_abi_version() == 0x00010003U);
    CHECK(mmap_engine_capabilities() == 0x3FU);
    uint32_t all = MMAP_ENGINE_CAP_ZERO_COPY | MMAP_ENGINE_CAP_CONFIGURABLE_DELIMITER |
                   MMAP_ENGINE_CAP_ERROR_STRINGS | MMAP_ENGINE_CAP_FIXED_SIZE_CHUNKING |
                   MMAP_ENGINE_CAP_RECORD_PARTITIONING | MMAP_ENGINE_CAP_MULTI_BYTE_DELIMITER;
    CHECK(all == 0x3FU);
    CHECK((mmap_engine_capabilities() & all) == all);
    CHECK(sizeof(CChunkView) == 2 * sizeof(void *));
    CHECK(error_is(NULL));
}

static void errors(const char *dir) {
    CHECK(mmap_engine_open(NULL) == NULL);
    CHECK(error_is("path is null"));
    char *missing = join(dir, "missing.txt");
    CHECK(mmap_engine_open(missing) == NULL);
    CHECK(error_is("failed to open or map file"));
    free(missing);
    CHECK(mmap_engine_open(dir) == NULL);
    CHECK(error_is("failed to open or map file"));

    CChunkView v = {0};
    CHECK(mmap_engine_scan_chunks(NULL, 8) == 0);
    CHECK(error_is("handle is null"));
    CHECK(mmap_engine_scan_chunks_ex(NULL, 8, ',') == 0);
    CHECK(error_is("handle is null"));
    CHECK(mmap_engine_scan_chunks_pattern(NULL, 8, (const uint8_t *)"\r\n", 2) == 0);
    CHECK(error_is("handle is null"));
    CHECK(mmap_engine_scan_fixed(NULL, 8) == 0);
    CHECK(error_is("handle is null"));
    CHECK(mmap_engine_partition_records(NULL, 4, '\n') == 0);
    CHECK(error_is("handle is null"));
    CHECK(mmap_engine_get_chunk(NULL, 0, &v) == -1);
    CHECK(error_is("handle is null"));
    mmap_engine_free(NULL);

    char *path = join(dir, "errors.txt");
    write_file(path, (const uint8_t *)"aa\nbb\ncc\n", 9);
    CEngineHandle *h = mmap_engine_open(path);
    CHECK(h != NULL);
    CHECK(error_is(NULL));
    /* Before any plan there is no chunk. */
    CHECK(mmap_engine_get_chunk(h, 0, &v) == -1);
    CHECK(error_is("chunk index out of bounds"));
    CHECK(mmap_engine_scan_chunks(h, 1) == 3);
    CHECK(error_is(NULL));
    CHECK(mmap_engine_get_chunk(h, 0, NULL) == -1);
    CHECK(error_is("out_chunk is null"));
    v.data = (const uint8_t *)"untouched";
    v.len = 9;
    CHECK(mmap_engine_get_chunk(h, 3, &v) == -1);
    CHECK(error_is("chunk index out of bounds"));
    CHECK(v.len == 9 && memcmp(v.data, "untouched", 9) == 0);
    CHECK(mmap_engine_get_chunk(h, (size_t)-1, &v) == -1);
    CHECK(error_is("chunk index out of bounds"));

    /* Refused pattern and partition calls keep the plan (3 chunks of "aa\n" "bb\n" "cc\n"). */
    CHECK(mmap_engine_scan_chunks_pattern(h, 1, NULL, 0) == 0);
    CHECK(error_is("delimiter_len must be > 0"));
    CHECK(mmap_engine_scan_chunks_pattern(h, 1, (const uint8_t *)"x", 0) == 0);
    CHECK(error_is("delimiter_len must be > 0"));
    CHECK(mmap_engine_scan_chunks_pattern(h, 1, NULL, 2) == 0);
    CHECK(error_is("delimiter is null"));
    CHECK(chunk_len(h, 2) == 3);
    CHECK(mmap_engine_partition_records(h, 0, '\n') == 0);
    CHECK(error_is("requested_partitions must be > 0"));
    CHECK(chunk_len(h, 2) == 3);
    CHECK(error_is(NULL));
    mmap_engine_free(h);
    free(path);
}

static void empty_file(const char *dir) {
    char *path = join(dir, "empty.txt");
    write_file(path, NULL, 0);
    CEngineHandle *h = mmap_engine_open(path);
    CHECK(h != NULL);
    CHECK(error_is(NULL));
    CHECK(mmap_engine_scan_chunks(h, 16) == 0);
    CHECK(error_is(NULL));
    CHECK(mmap_engine_scan_chunks_ex(h, 0, ',') == 0);
    CHECK(error_is(NULL));
    CHECK(mmap_engine_scan_chunks_pattern(h, 4, (const uint8_t *)"\r\n", 2) == 0);
    CHECK(error_is(NULL));
    CHECK(mmap_engine_scan_fixed(h, 4) == 0);
    CHECK(error_is(NULL));
    CHECK(mmap_engine_partition_records(h, 4, '\n') == 0);
    CHECK(error_is(NULL));
    CHECK(mmap_engine_partition_records(h, 0, '\n') == 0);
    CHECK(error_is(NULL));
    CChunkView v = {0};
    CHECK(mmap_engine_get_chunk(h, 0, &v) == -1);
    CHECK(error_is("chunk index out of bounds"));
    mmap_engine_free(h);
    free(path);
}

/* Each mode on small inputs whose plans are worked out by hand. */
static void modes(const char *dir) {
    char *path = join(dir, "modes.txt");
    const char *text = "aaa\nbbb\nccc\nddd\n";
    write_file(path, (const uint8_t *)text, 16);
    CEngineHandle *h = mmap_engine_open(path);
    /* The search starts at start + size inclusive: "aaa\n" ends at 4, the first '\n' at >= 4 is 7. */
    CHECK(mmap_engine_scan_chunks(h, 4) == 2);
    CHECK(chunk_len(h, 0) == 8 && chunk_len(h, 1) == 8);
    CHECK(mmap_engine_scan_chunks_ex(h, 4, '\n') == 2);
    CHECK(mmap_engine_scan_chunks(h, 0) == 4); /* 0 counts as 1 */
    CHECK(mmap_engine_scan_chunks(h, 16) == 1);
    CHECK(mmap_engine_scan_chunks(h, 1000) == 1);
    CHECK(mmap_engine_scan_fixed(h, 4) == 4);
    CHECK(chunk_len(h, 3) == 4);
    CHECK(mmap_engine_scan_fixed(h, 5) == 4);
    CHECK(chunk_len(h, 3) == 1);
    CHECK(mmap_engine_scan_fixed(h, 0) == 16);
    CHECK(mmap_engine_scan_fixed(h, (size_t)-1) == 1);
    CHECK(covers(h, 1, (const uint8_t *)text, 16));
    /* len 16, 2 parts: target 8 starts "ccc\n", so the cut goes after it, at 12. */
    CHECK(mmap_engine_partition_records(h, 2, '\n') == 2);
    CHECK(chunk_len(h, 0) == 12 && chunk_len(h, 1) == 4);
    CHECK(mmap_engine_partition_records(h, 1, '\n') == 1);
    /* Targets 4, 8, 12: 4 cuts at 8, 8 is not past that cut, 12 cuts at the end. */
    CHECK(mmap_engine_partition_records(h, 4, '\n') == 2);
    CHECK(mmap_engine_partition_records(h, (size_t)-1, '\n') == 4);
    CHECK(covers(h, 4, (const uint8_t *)text, 16));
    CHECK(mmap_engine_partition_records(h, 8, '|') == 1); /* no delimiter: the whole file */
    CHECK(chunk_len(h, 0) == 16);
    mmap_engine_free(h);

    /* The header's example (look 68, L68-4): ten delimiters, N = 10: targets 1 .. 9, each
     * even one at the previous cut and skipped; cuts at 2, 4, 6, 8: five ranges of 2. */
    char *all = join(dir, "delimiters.txt");
    write_file(all, (const uint8_t *)"aaaaaaaaaa", 10);
    h = mmap_engine_open(all);
    CHECK(h != NULL);
    CHECK(mmap_engine_partition_records(h, 10, 'a') == 5);
    for (size_t i = 0; i < 5; i++) CHECK(chunk_len(h, i) == 2);
    mmap_engine_free(h);
    free(all);
    free(path);

    path = join(dir, "commas.txt");
    write_file(path, (const uint8_t *)"a,b,c,d,e", 9);
    h = mmap_engine_open(path);
    CHECK(mmap_engine_scan_chunks_ex(h, 2, ',') == 3);
    CHECK(chunk_len(h, 0) == 4 && chunk_len(h, 1) == 4 && chunk_len(h, 2) == 1);
    CHECK(mmap_engine_scan_chunks(h, 2) == 1); /* no '\n' */
    mmap_engine_free(h);
    free(path);

    path = join(dir, "crlf.txt");
    const char *crlf = "ab\r\ncd\r\nef";
    write_file(path, (const uint8_t *)crlf, 10);
    h = mmap_engine_open(path);
    CHECK(mmap_engine_scan_chunks_pattern(h, 1, (const uint8_t *)"\r\n", 2) == 3);
    CHECK(chunk_len(h, 0) == 4 && chunk_len(h, 1) == 4 && chunk_len(h, 2) == 2);
    CHECK(covers(h, 3, (const uint8_t *)crlf, 10));
    /* A pattern with a NUL in it, and one longer than the file. */
    CHECK(mmap_engine_scan_chunks_pattern(h, 1, (const uint8_t *)"\0x", 2) == 1);
    CHECK(mmap_engine_scan_chunks_pattern(h, 1, (const uint8_t *)"0123456789abcdef", 16) == 1);
    CHECK(chunk_len(h, 0) == 10);
    mmap_engine_free(h);
    free(path);
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ULL;
static uint64_t next_random(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* A random file of records, some of them giant, rebuilt from its plans in every mode. */
static void reconstruction(const char *dir) {
    size_t cap = 200000, len = 0;
    uint8_t *bytes = malloc(cap);
    while (len < cap - 5000) {
        size_t n = next_random() % 10 == 0 ? 1000 + next_random() % 3000 : next_random() % 80;
        for (size_t i = 0; i < n; i++) {
            bytes[len++] = (uint8_t)('a' + next_random() % 26);
        }
        bytes[len++] = '\n';
    }
    bytes[len++] = 'z'; /* no delimiter at the end */
    char *path = join(dir, "random.txt");
    write_file(path, bytes, len);
    CEngineHandle *h = mmap_engine_open(path);
    CHECK(h != NULL);

    int partition_ok = 1;
    for (size_t n = 1; n <= 512; n++) {
        size_t count = mmap_engine_partition_records(h, n, '\n');
        partition_ok &= count >= 1 && count <= n && covers(h, count, bytes, len) && ends_on(h, count, '\n');
    }
    size_t wide[] = {1000, 4096, 65536, 199999, (size_t)-1};
    for (size_t i = 0; i < sizeof wide / sizeof wide[0]; i++) {
        size_t count = mmap_engine_partition_records(h, wide[i], '\n');
        partition_ok &= count >= 1 && covers(h, count, bytes, len) && ends_on(h, count, '\n');
    }
    CHECK(partition_ok);

    int scan_ok = 1;
    for (size_t size = 0; size <= 300; size += 7) {
        size_t count = mmap_engine_scan_chunks(h, size);
        scan_ok &= covers(h, count, bytes, len) && ends_on(h, count, '\n');
        count = mmap_engine_scan_chunks_pattern(h, size * 13, (const uint8_t *)"\n", 1);
        scan_ok &= covers(h, count, bytes, len) && ends_on(h, count, '\n');
        count = mmap_engine_scan_fixed(h, size * 31);
        scan_ok &= count == (len + (size ? size * 31 : 1) - 1) / (size ? size * 31 : 1);
        scan_ok &= covers(h, count, bytes, len);
    }
    CHECK(scan_ok);

    /* Views taken from one plan keep reading the file after a new plan replaces it. */
    size_t count = mmap_engine_partition_records(h, 16, '\n');
    CChunkView views[16];
    for (size_t i = 0; i < count; i++) {
        CHECK(mmap_engine_get_chunk(h, i, &views[i]) == 0);
    }
    CHECK(mmap_engine_scan_fixed(h, 3) > 0);
    CHECK(mmap_engine_scan_chunks(h, 100) > 0);
    size_t at = 0;
    for (size_t i = 0; i < count; i++) {
        CHECK(memcmp(views[i].data, bytes + at, views[i].len) == 0);
        at += views[i].len;
    }
    CHECK(at == len);
    mmap_engine_free(h);
    free(path);
    free(bytes);
}

struct reader {
    CEngineHandle *h;
    size_t count;
    size_t total;
    int error_was_null;
};

static void *read_all(void *arg) {
    struct reader *r = arg;
    /* This thread has had no error, whatever the main thread's last call did. */
    r->error_was_null = mmap_engine_last_error() == NULL;
    for (int round = 0; round < 50; round++) {
        size_t total = 0;
        for (size_t i = 0; i < r->count; i++) {
            CChunkView v = {0};
            if (mmap_engine_get_chunk(r->h, i, &v) == 0) {
                total += v.len;
            }
        }
        r->total = total;
    }
    return NULL;
}

/* Concurrent get_chunk calls after a scan; the last error is per thread. */
static void threads(const char *dir) {
    char *path = join(dir, "threads.txt");
    uint8_t bytes[4000];
    for (size_t i = 0; i < sizeof bytes; i++) {
        bytes[i] = i % 10 == 9 ? '\n' : 'x';
    }
    write_file(path, bytes, sizeof bytes);
    CEngineHandle *h = mmap_engine_open(path);
    size_t count = mmap_engine_partition_records(h, 37, '\n');
    CChunkView v;
    CHECK(mmap_engine_get_chunk(h, count, &v) == -1); /* leaves an error on this thread */
    struct reader readers[4];
    pthread_t ids[4];
    for (int i = 0; i < 4; i++) {
        readers[i] = (struct reader){h, count, 0, 0};
        CHECK(pthread_create(&ids[i], NULL, read_all, &readers[i]) == 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(ids[i], NULL);
        CHECK(readers[i].total == sizeof bytes);
        CHECK(readers[i].error_was_null);
    }
    CHECK(error_is("chunk index out of bounds"));
    mmap_engine_free(h);
    free(path);
}

static int plan(int argc, char **argv) {
    if (argc < 5) {
        return 2;
    }
    const char *mode = argv[3];
    size_t size = (size_t)strtoull(argv[4], NULL, 10);
    const char *delim = argc > 5 ? argv[5] : "\n";
    CEngineHandle *h = mmap_engine_open(argv[2]);
    if (h == NULL) {
        fprintf(stderr, "open: %s\n", mmap_engine_last_error());
        return 1;
    }
    size_t count;
    if (strcmp(mode, "lines") == 0) {
        count = mmap_engine_scan_chunks(h, size);
    } else if (strcmp(mode, "byte") == 0) {
        count = mmap_engine_scan_chunks_ex(h, size, (uint8_t)delim[0]);
    } else if (strcmp(mode, "pattern") == 0) {
        count = mmap_engine_scan_chunks_pattern(h, size, (const uint8_t *)delim, strlen(delim));
    } else if (strcmp(mode, "fixed") == 0) {
        count = mmap_engine_scan_fixed(h, size);
    } else if (strcmp(mode, "partition") == 0) {
        count = mmap_engine_partition_records(h, size, (uint8_t)delim[0]);
    } else {
        return 2;
    }
    const uint8_t *base = NULL;
    for (size_t i = 0; i < count; i++) {
        CChunkView v;
        if (mmap_engine_get_chunk(h, i, &v) != 0) {
            return 1;
        }
        if (i == 0) {
            base = v.data;
        }
        printf("%zu %zu\n", (size_t)(v.data - base), (size_t)(v.data - base) + v.len);
    }
    mmap_engine_free(h);
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 2 && strcmp(argv[1], "plan") == 0) {
        return plan(argc, argv);
    }
    if (argc != 3 || strcmp(argv[1], "selftest") != 0) {
        fprintf(stderr, "usage: chunker selftest DIR | chunker plan FILE MODE SIZE [DELIM]\n");
        return 2;
    }
    versions();
    errors(argv[2]);
    empty_file(argv[2]);
    modes(argv[2]);
    reconstruction(argv[2]);
    threads(argv[2]);
    printf("chunker: %d checks, %d failed\n", checks, failures);
    return failures == 0 ? 0 : 1;
}
