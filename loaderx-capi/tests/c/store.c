/*
 * The loaderx.h interface: stores, schemas and the sampler from C.
 *
 *   store selftest DIR             argument checks, write/read/delete/compact round trips
 *   store write STORE DATASET      writes both (tests/c.rs reads them back from Rust)
 *   store read STORE DATASET       reads what tests/c.rs wrote with the Rust API
 *   store damaged STORE            prints the code and text a damaged store gives
 *   store verify-many STORE N      verifies a store of N records, every one damaged: all
 *                                  counted, the peak memory grown by less than 64 MiB
 *   store sampler                  prints batches (tests/c.rs compares with loaderx-core's)
 *
 * Record i of a STORE is record_len(i) bytes, byte j being record_byte(i, j); item i of a
 * DATASET is 4 u32 values, 4i .. 4i+3 (tests/c.rs uses the same rule).
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _WIN32
/* Windows has no getrusage: the memory bound of verify is checked where it has (Linux), the
 * counts everywhere. */
static long peak_kib(void) { return 0; }
#else
#include <sys/resource.h>
static long peak_kib(void) {
    struct rusage u;
    return getrusage(RUSAGE_SELF, &u) == 0 ? u.ru_maxrss : -1; /* KiB on Linux */
}
#endif

#include "loaderx.h"

#define RECORDS 200
#define ITEMS 100

static int checks;
static int failures;

#define CHECK(cond)                                                                \
    do {                                                                           \
        checks++;                                                                  \
        if (!(cond)) {                                                             \
            failures++;                                                            \
            fprintf(stderr, "%s:%d: check failed: %s (last error: %s)\n", __FILE__, __LINE__, #cond, \
                    lx_last_error() ? lx_last_error() : "none");                   \
        }                                                                          \
    } while (0)

static size_t record_len(uint64_t i) { return 100 + (size_t)((i * 37) % 200); }
/* Runs of 8 equal letters: every codec shrinks them, so none falls back to raw. */
static uint8_t record_byte(uint64_t i, size_t j) { return (uint8_t)('a' + (i + j / 8) % 5); }

/* Records first .. first+count-1 laid out for lx_store_append. */
static uint8_t *records(uint64_t first, size_t count, uint64_t *offsets) {
    size_t total = 0;
    for (size_t k = 0; k < count; k++) {
        total += record_len(first + k);
    }
    uint8_t *data = malloc(total);
    offsets[0] = 0;
    for (size_t k = 0; k < count; k++) {
        size_t n = record_len(first + k);
        for (size_t j = 0; j < n; j++) {
            data[offsets[k] + j] = record_byte(first + k, j);
        }
        offsets[k + 1] = offsets[k] + n;
    }
    return data;
}

/* Whether `text` names `path`, either separator matching either (Windows writes a path's
 * separators as backslashes, whatever they were given as). */
static int mentions(const char *text, const char *path) {
    size_t n = strlen(path);
    for (; text != NULL && *text != '\0'; text++) {
        size_t k = 0;
        for (; k < n && text[k] != '\0'; k++) {
            int a = text[k] == '\\' ? '/' : text[k], b = path[k] == '\\' ? '/' : path[k];
            if (a != b) break;
        }
        if (k == n) return 1;
    }
    return 0;
}

static int record_ok(uint64_t i, const uint8_t *bytes, size_t len) {
    if (len != record_len(i)) {
        return 0;
    }
    for (size_t j = 0; j < len; j++) {
        if (bytes[j] != record_byte(i, j)) {
            return 0;
        }
    }
    return 1;
}

static char *join(const char *dir, const char *name) {
    size_t n = strlen(dir) + strlen(name) + 2;
    char *path = malloc(n);
    snprintf(path, n, "%s/%s", dir, name);
    return path;
}

/* Appends records 0 .. RECORDS-1 in four batches: raw, zstd, lz4, zstd with the dictionary. */
static void write_store(const char *path) {
    lx_store *s = NULL;
    CHECK(lx_store_open(path, LX_OPEN_CREATE, LX_FORMAT_V2, &s) == LX_OK);
    CHECK(lx_last_error() == NULL);
    uint64_t offsets[RECORDS + 1];
    uint8_t *all = records(0, RECORDS, offsets);
    int32_t trained = -1;
    CHECK(lx_store_train_dictionary(s, all, offsets, RECORDS, &trained) == LX_OK);
    CHECK(trained == 1);
    free(all);
    int32_t codecs[4] = {LX_CODEC_RAW, LX_CODEC_ZSTD, LX_CODEC_LZ4, LX_CODEC_ZSTD_DICT};
    for (int b = 0; b < 4; b++) {
        uint64_t first = (uint64_t)b * (RECORDS / 4), at = 99;
        uint8_t *data = records(first, RECORDS / 4, offsets);
        CHECK(lx_store_append(s, data, offsets, RECORDS / 4, codecs[b], &at) == LX_OK);
        CHECK(at == first);
        free(data);
    }
    lx_stats st;
    CHECK(lx_store_stats(s, &st) == LX_OK);
    CHECK(st.length == RECORDS);
    CHECK(st.records_raw == 50 && st.records_zstd == 50 && st.records_lz4 == 50 && st.records_zstd_dict == 50);
    CHECK(st.dict_bytes > 0 && st.live_bytes < st.logical_bytes);
    CHECK(lx_store_sync(s) == LX_OK);
    lx_store_close(s);
}

/* A dense dataset of ITEMS u32 [4] items: a store of 16-byte records and its schema. */
static void write_dataset(const char *path) {
    lx_store *s = NULL;
    CHECK(lx_store_open(path, LX_OPEN_CREATE, LX_FORMAT_DEFAULT, &s) == LX_OK);
    uint32_t values[ITEMS * 4];
    uint64_t offsets[ITEMS + 1];
    for (uint32_t v = 0; v < ITEMS * 4; v++) {
        values[v] = v;
    }
    for (size_t i = 0; i <= ITEMS; i++) {
        offsets[i] = i * 16;
    }
    CHECK(lx_store_append(s, (const uint8_t *)values, offsets, ITEMS, LX_CODEC_ZSTD, NULL) == LX_OK);
    lx_store_close(s);
    lx_schema schema = {.kind = LX_KIND_DENSE, .dtype = LX_DTYPE_U32, .ndim = 1, .shape = {4}};
    CHECK(lx_schema_write(path, &schema) == LX_OK);
}

/* Reads a store of RECORDS records and a dataset of ITEMS items, whoever wrote them. */
static void read_back(const char *store_path, const char *dataset_path) {
    lx_store *s = NULL;
    CHECK(lx_store_open(store_path, LX_OPEN_READ, 0, &s) == LX_OK);
    uint64_t len = 0;
    CHECK(lx_store_len(s, &len) == LX_OK && len == RECORDS);
    int32_t format = 0;
    CHECK(lx_store_format(s, &format) == LX_OK && format == LX_FORMAT_V2);

    uint64_t indices[RECORDS];
    for (size_t k = 0; k < RECORDS; k++) {
        indices[k] = (k * 17) % RECORDS; /* every record, out of order */
    }
    uint32_t lens[RECORDS];
    CHECK(lx_store_record_lens(s, indices, RECORDS, lens) == LX_OK);
    CHECK(lens[1] == record_len(indices[1]));
    uint64_t total = 0;
    CHECK(lx_store_gather_size(s, indices, RECORDS, &total) == LX_OK);
    uint8_t *out = malloc(total + 10);
    uint64_t offsets[RECORDS + 1], used = 0;
    CHECK(lx_store_gather(s, indices, RECORDS, out, total + 10, offsets, &used) == LX_OK);
    CHECK(used == total && offsets[0] == 0 && offsets[RECORDS] == total);
    int all_ok = 1;
    for (size_t k = 0; k < RECORDS; k++) {
        all_ok &= record_ok(indices[k], out + offsets[k], offsets[k + 1] - offsets[k]);
    }
    CHECK(all_ok);
    /* Too small a buffer is refused. */
    CHECK(lx_store_gather(s, indices, RECORDS, out, total - 1, offsets, NULL) == LX_ERR_INVALID_ARGUMENT);
    CHECK(lx_last_error() != NULL && strstr(lx_last_error(), "needs") != NULL);
    free(out);

    /* Out of range names the store; a read-only store refuses writes. */
    uint64_t past = RECORDS;
    CHECK(lx_store_record_lens(s, &past, 1, lens) == LX_ERR_OUT_OF_RANGE);
    CHECK(mentions(lx_last_error(), store_path));
    uint64_t one[2] = {0, 1};
    CHECK(lx_store_append(s, (const uint8_t *)"x", one, 1, LX_CODEC_RAW, NULL) == LX_ERR_READ_ONLY);
    CHECK(lx_store_delete(s, one, 1) == LX_ERR_READ_ONLY);
    lx_verify_report report;
    CHECK(lx_store_verify(s, &report) == LX_OK);
    CHECK(report.checked == RECORDS && report.bad_records == 0 && report.first_bad_index == UINT64_MAX);
    CHECK(lx_last_error() == NULL);
    lx_store_close(s);

    lx_schema schema;
    CHECK(lx_schema_read(dataset_path, &schema) == LX_OK);
    CHECK(schema.kind == LX_KIND_DENSE && schema.dtype == LX_DTYPE_U32 && schema.elem_size == 4);
    CHECK(schema.ndim == 1 && schema.shape[0] == 4);
    size_t item = schema.elem_size * schema.shape[0];
    CHECK(lx_store_open(dataset_path, LX_OPEN_READ, 0, &s) == LX_OK);
    uint64_t picks[3] = {7, 0, ITEMS - 1};
    uint32_t values[12];
    CHECK(lx_store_gather_fixed(s, picks, 3, item, (uint8_t *)values, sizeof values) == LX_OK);
    CHECK(values[0] == 28 && values[3] == 31 && values[4] == 0 && values[11] == ITEMS * 4 - 1);
    CHECK(lx_store_gather_fixed(s, picks, 3, item, (uint8_t *)values, sizeof values - 1) == LX_ERR_INVALID_ARGUMENT);
    CHECK(lx_store_gather_fixed(s, picks, 2, item - 4, (uint8_t *)values, 2 * (item - 4)) == LX_ERR_CORRUPT);
    lx_store_close(s);
}

/* Delete and compact on a store of 10 records. */
static void maintain(const char *dir) {
    char *path = join(dir, "maintain");
    lx_store *s = NULL;
    CHECK(lx_store_open(path, LX_OPEN_APPEND, LX_FORMAT_V2, &s) == LX_OK); /* created */
    uint64_t offsets[11];
    uint8_t *data = records(0, 10, offsets);
    CHECK(lx_store_append(s, data, offsets, 10, LX_CODEC_ZSTD, NULL) == LX_OK);
    free(data);
    uint64_t gone[2] = {0, 3};
    CHECK(lx_store_delete(s, gone, 2) == LX_OK);
    uint64_t len = 0;
    CHECK(lx_store_len(s, &len) == LX_OK && len == 8);
    lx_compact_report report = {0};
    CHECK(lx_store_compact(s, &report) == LX_OK);
    CHECK(report.bytes_after < report.bytes_before);
    CHECK(lx_store_compact(s, NULL) == LX_OK);
    CHECK(lx_store_verify(s, NULL) == LX_OK);
    /* The 8 left are the 10 but 0 and 3, in some order. */
    uint64_t all[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    uint32_t lens[8];
    CHECK(lx_store_record_lens(s, all, 8, lens) == LX_OK);
    size_t sum = 0, expected = 0;
    for (int k = 0; k < 8; k++) {
        sum += lens[k];
    }
    for (uint64_t i = 0; i < 10; i++) {
        expected += (i == 0 || i == 3) ? 0 : record_len(i);
    }
    CHECK(sum == expected);
    lx_store_close(s);

    /* One writer at a time, and a second create needs to replace. */
    lx_store *a = NULL, *b = NULL;
    CHECK(lx_store_open(path, LX_OPEN_APPEND, 0, &a) == LX_OK);
    CHECK(lx_store_open(path, LX_OPEN_APPEND, 0, &b) == LX_ERR_LOCKED);
    CHECK(b == NULL);
    lx_store_close(a);
    CHECK(lx_store_open(path, LX_OPEN_CREATE, LX_FORMAT_V1, &a) == LX_OK);
    CHECK(lx_store_len(a, &len) == LX_OK && len == 0);
    int32_t format = 0;
    CHECK(lx_store_format(a, &format) == LX_OK && format == LX_FORMAT_V1);
    uint64_t o[2] = {0, 3};
    CHECK(lx_store_append(a, (const uint8_t *)"abc", o, 1, LX_CODEC_LZ4, NULL) != LX_OK); /* lz4 is v2 only */
    lx_store_close(a);
    free(path);
}

/* Every pointer and value checked; the last error set by failures and cleared by successes. */
static void arguments(const char *dir) {
    CHECK(lx_abi_version() == LX_ABI_VERSION);
    CHECK(lx_abi_version() >> 16 == 1);
    CHECK(strcmp(lx_error_name(LX_ERR_CORRUPT), "LX_ERR_CORRUPT") == 0);
    CHECK(strcmp(lx_error_name(LX_ERR_COMMITTED), "LX_ERR_COMMITTED") == 0);
    CHECK(strcmp(lx_error_name(LX_OK), "LX_OK") == 0);
    CHECK(strcmp(lx_error_name(42), "LX_ERR_UNKNOWN") == 0);

    lx_store *s = (lx_store *)0;
    CHECK(lx_store_open(NULL, LX_OPEN_READ, 0, &s) == LX_ERR_INVALID_ARGUMENT);
    CHECK(strcmp(lx_last_error(), "path is null") == 0);
    CHECK(lx_store_open(dir, LX_OPEN_READ, 0, NULL) == LX_ERR_INVALID_ARGUMENT);
    CHECK(strcmp(lx_last_error(), "out_store is null") == 0);
    CHECK(lx_store_open(dir, 9, 0, &s) == LX_ERR_INVALID_ARGUMENT);
    CHECK(lx_store_open(dir, LX_OPEN_CREATE, 7, &s) == LX_ERR_INVALID_ARGUMENT);
    char *missing = join(dir, "missing");
    CHECK(lx_store_open(missing, LX_OPEN_READ, 0, &s) == LX_ERR_NOT_A_STORE);
    CHECK(strstr(lx_last_error(), missing) != NULL);
    CHECK(s == NULL);
    free(missing);

    uint64_t len = 0;
    CHECK(lx_store_len(NULL, &len) == LX_ERR_INVALID_ARGUMENT);
    CHECK(strcmp(lx_last_error(), "store is null") == 0);
    CHECK(lx_store_stats(NULL, NULL) == LX_ERR_INVALID_ARGUMENT);
    CHECK(lx_store_verify(NULL, NULL) == LX_ERR_INVALID_ARGUMENT);
    CHECK(lx_store_sync(NULL) == LX_ERR_INVALID_ARGUMENT);
    CHECK(lx_store_compact(NULL, NULL) == LX_ERR_INVALID_ARGUMENT);
    CHECK(lx_store_delete(NULL, NULL, 0) == LX_ERR_INVALID_ARGUMENT);
    lx_store_close(NULL);

    char *path = join(dir, "args");
    CHECK(lx_store_open(path, LX_OPEN_CREATE, 0, &s) == LX_OK);
    CHECK(lx_last_error() == NULL);
    CHECK(lx_store_len(s, NULL) == LX_ERR_INVALID_ARGUMENT);
    CHECK(strcmp(lx_last_error(), "out_len is null") == 0);
    CHECK(lx_store_len(s, &len) == LX_OK && len == 0);
    CHECK(lx_last_error() == NULL);
    uint64_t bad[3] = {0, 5, 2}; /* decreasing */
    CHECK(lx_store_append(s, (const uint8_t *)"hello", bad, 2, LX_CODEC_RAW, NULL) == LX_ERR_INVALID_ARGUMENT);
    CHECK(lx_store_append(s, (const uint8_t *)"hello", NULL, 1, LX_CODEC_RAW, NULL) == LX_ERR_INVALID_ARGUMENT);
    CHECK(strcmp(lx_last_error(), "offsets is null") == 0);
    uint64_t ok[2] = {0, 5};
    CHECK(lx_store_append(s, NULL, ok, 1, LX_CODEC_RAW, NULL) == LX_ERR_INVALID_ARGUMENT);
    CHECK(lx_store_append(s, (const uint8_t *)"hello", ok, 1, 17, NULL) == LX_ERR_INVALID_ARGUMENT);
    /* No dictionary trained yet: the caller's order of calls, not a corrupt store (look 92, F1). */
    CHECK(lx_store_append(s, (const uint8_t *)"hello", ok, 1, LX_CODEC_ZSTD_DICT, NULL) == LX_ERR_INVALID_ARGUMENT);
    CHECK(strstr(lx_last_error(), "dictionary") != NULL);
    CHECK(lx_store_append(s, NULL, NULL, 0, LX_CODEC_RAW, NULL) == LX_OK); /* nothing to append */
    /* A misaligned output, even an optional one, is refused before anything is appended. */
    uint64_t storage[3] = {0, 0, 0};
    uint64_t *odd_out = (uint64_t *)((uint8_t *)storage + 1);
    CHECK(lx_store_append(s, (const uint8_t *)"hello", ok, 1, LX_CODEC_RAW, odd_out) == LX_ERR_INVALID_ARGUMENT);
    CHECK(strcmp(lx_last_error(), "out_first is not aligned for its element type") == 0);
    CHECK(lx_store_len(s, &len) == LX_OK && len == 0);
    CHECK(lx_store_append(s, (const uint8_t *)"hello", ok, 1, LX_CODEC_RAW, NULL) == LX_OK);
    /* A misaligned index array. */
    const uint64_t *odd = (const uint64_t *)((const uint8_t *)storage + 1);
    uint32_t lens[2];
    CHECK(lx_store_record_lens(s, odd, 1, lens) == LX_ERR_INVALID_ARGUMENT);
    CHECK(strstr(lx_last_error(), "aligned") != NULL);
    CHECK(lx_store_record_lens(s, storage, 1, NULL) == LX_ERR_INVALID_ARGUMENT);
    CHECK(lx_store_gather(s, storage, 1, NULL, 0, NULL, NULL) == LX_ERR_INVALID_ARGUMENT);
    uint8_t buf[5];
    uint64_t offs[2];
    CHECK(lx_store_gather(s, storage, 1, buf, 5, offs, NULL) == LX_OK);
    CHECK(memcmp(buf, "hello", 5) == 0 && offs[1] == 5);
    CHECK(lx_store_gather_fixed(s, storage, 1, 5, buf, 5) == LX_OK);
    CHECK(lx_store_gather_size(s, storage, 1, NULL) == LX_ERR_INVALID_ARGUMENT);
    lx_store_close(s);
    free(path);

    lx_schema schema = {0};
    CHECK(lx_schema_read(NULL, &schema) == LX_ERR_INVALID_ARGUMENT);
    CHECK(lx_schema_read(dir, NULL) == LX_ERR_INVALID_ARGUMENT);
    CHECK(lx_schema_read(dir, &schema) == LX_ERR_NOT_A_STORE);
    lx_schema wide = {.kind = LX_KIND_DENSE, .dtype = LX_DTYPE_F32, .ndim = LX_MAX_DIMS + 1};
    CHECK(lx_schema_write(dir, &wide) == LX_ERR_INVALID_ARGUMENT);
    lx_schema odd_kind = {.kind = 5, .dtype = LX_DTYPE_F32};
    CHECK(lx_schema_write(dir, &odd_kind) == LX_ERR_INVALID_ARGUMENT);

    lx_sampler *smp = NULL;
    lx_sampler_config config = {.seed = 1, .len = 100, .batch_size = 10, .mode = LX_SAMPLER_CYCLIC};
    CHECK(lx_sampler_new(NULL, &smp) == LX_ERR_INVALID_ARGUMENT);
    CHECK(lx_sampler_new(&config, NULL) == LX_ERR_INVALID_ARGUMENT);
    config.mode = 9;
    CHECK(lx_sampler_new(&config, &smp) == LX_ERR_INVALID_ARGUMENT);
    config.mode = LX_SAMPLER_CYCLIC;
    config.len = 0;
    CHECK(lx_sampler_new(&config, &smp) == LX_ERR_INVALID_ARGUMENT);
    CHECK(lx_last_error() != NULL);
    config.len = 100;
    config.world = 3; /* 10 is not a multiple of 3 */
    CHECK(lx_sampler_new(&config, &smp) == LX_ERR_INVALID_ARGUMENT);
    config.world = 0;
    CHECK(lx_sampler_new(&config, &smp) == LX_OK && smp != NULL);
    uint32_t size = 0, batch[10];
    CHECK(lx_sampler_batch_size(smp, &size) == LX_OK && size == 10);
    CHECK(lx_sampler_batch(smp, 0, batch, 9) == LX_ERR_INVALID_ARGUMENT);
    CHECK(lx_sampler_batch(smp, 0, NULL, 10) == LX_ERR_INVALID_ARGUMENT);
    CHECK(lx_sampler_batch(NULL, 0, batch, 10) == LX_ERR_INVALID_ARGUMENT);
    CHECK(lx_sampler_batch(smp, 0, batch, 10) == LX_OK);
    /* A cycle of 10 steps of 10 covers 0..99 once. */
    int seen[100] = {0}, once = 1;
    for (uint64_t step = 0; step < 10; step++) {
        CHECK(lx_sampler_batch(smp, step, batch, 10) == LX_OK);
        for (int k = 0; k < 10; k++) {
            seen[batch[k]]++;
        }
    }
    for (int k = 0; k < 100; k++) {
        once &= seen[k] == 1;
    }
    CHECK(once);
    lx_sampler_free(smp);
    lx_sampler_free(NULL);
}

/* The last error says `out` overlaps `other` (the buffers it names, in that order). */
static int overlap_named(const char *out, const char *other) {
    char want[64];
    snprintf(want, sizeof want, "%s overlaps %s:", out, other);
    return lx_last_error() != NULL && strncmp(lx_last_error(), want, strlen(want)) == 0;
}

#define REFUSED(call, out, other)                          \
    do {                                                   \
        CHECK((call) == LX_ERR_INVALID_ARGUMENT);          \
        CHECK(overlap_named(out, other));                  \
    } while (0)

/* Every call given an output buffer that shares bytes with another of its buffers refuses it
 * (naming both) before writing anything; buffers that only touch are fine. */
static void overlapping(const char *dir) {
    char *path = join(dir, "overlap");
    lx_store *s = NULL;
    CHECK(lx_store_open(path, LX_OPEN_CREATE, 0, &s) == LX_OK);
    uint64_t offsets[5];
    uint8_t *data = records(0, 4, offsets);
    CHECK(lx_store_append(s, data, offsets, 4, LX_CODEC_RAW, NULL) == LX_OK);
    free(data);
    uint64_t saved[64], arena[64];
    for (size_t k = 0; k < 64; k++) {
        arena[k] = k % 4; /* indices 0 1 2 3 0 1 ... */
    }
    memcpy(saved, arena, sizeof arena);
#define UNTOUCHED() CHECK(memcmp(arena, saved, sizeof arena) == 0)

    /* The gather of issue 40: the indices passed as out_offsets too. */
    uint8_t out[1024];
    REFUSED(lx_store_gather(s, arena, 2, out, sizeof out, arena, NULL), "out_offsets", "indices");
    UNTOUCHED();
    REFUSED(lx_store_gather(s, arena, 2, out, sizeof out, arena + 1, NULL), "out_offsets", "indices");
    REFUSED(lx_store_gather(s, arena, 2, (uint8_t *)arena + 15, 16, arena + 8, NULL), "out", "indices");
    REFUSED(lx_store_gather(s, arena, 2, (uint8_t *)(arena + 8), 300, arena + 20, NULL), "out", "out_offsets");
    REFUSED(lx_store_gather(s, arena, 2, out, sizeof out, arena + 8, arena + 10), "out_offsets", "out_total");
    REFUSED(lx_store_gather(s, arena, 2, out, sizeof out, arena + 8, arena + 1), "out_total", "indices");
    REFUSED(lx_store_gather(s, arena, 2, (uint8_t *)(arena + 8), 300, arena + 2, arena + 10), "out", "out_total");
    UNTOUCHED();
    /* Back to back in one array, touching but not overlapping: indices, out_offsets, out. */
    uint64_t total = 0;
    CHECK(lx_store_gather(s, arena, 2, (uint8_t *)(arena + 5), 59 * 8, arena + 2, &total) == LX_OK);
    CHECK(total == record_len(0) + record_len(1) && arena[2] == 0 && arena[3] == record_len(0));
    CHECK(record_ok(0, (uint8_t *)(arena + 5), record_len(0)));
    CHECK(record_ok(1, (uint8_t *)(arena + 5) + record_len(0), record_len(1)));
    memcpy(arena, saved, sizeof arena);

    uint64_t zeros[4] = {0, 0, 0, 0};
    memcpy(arena, zeros, sizeof zeros);
    memcpy(saved, arena, sizeof arena);
    REFUSED(lx_store_gather_fixed(s, arena, 3, record_len(0), (uint8_t *)(arena + 2), 300), "out", "indices");
    UNTOUCHED();
    CHECK(lx_store_gather_fixed(s, arena, 3, record_len(0), (uint8_t *)(arena + 3), 300) == LX_OK);
    CHECK(record_ok(0, (uint8_t *)(arena + 3) + 200, record_len(0)));
    memcpy(arena, saved, sizeof arena);

    REFUSED(lx_store_record_lens(s, arena, 4, (uint32_t *)(arena + 3)), "out_lens", "indices");
    UNTOUCHED();
    REFUSED(lx_store_gather_size(s, arena, 4, arena + 3), "out_total", "indices");
    UNTOUCHED();
    CHECK(lx_store_gather_size(s, arena, 4, arena + 4) == LX_OK && arena[4] == 4 * record_len(0));
    memcpy(arena, saved, sizeof arena);

    /* Appends: out_first inside offsets or data; nothing appended. */
    uint64_t one[8] = {0, 5, 0, 0, 0, 0, 0, 0};
    memcpy(one + 2, "hello", 5);
    REFUSED(lx_store_append(s, (const uint8_t *)(one + 2), one, 1, LX_CODEC_RAW, one + 1), "out_first", "offsets");
    REFUSED(lx_store_append(s, (const uint8_t *)(one + 2), one, 1, LX_CODEC_RAW, one + 2), "out_first", "data");
    CHECK(one[1] == 5 && memcmp(one + 2, "hello", 5) == 0);
    int32_t *trained = (int32_t *)(one + 2);
    REFUSED(lx_store_train_dictionary(s, (const uint8_t *)(one + 2), one, 1, trained), "out_trained", "data");
    uint64_t len = 0;
    CHECK(lx_store_len(s, &len) == LX_OK && len == 4);
    CHECK(lx_store_append(s, (const uint8_t *)(one + 2), one, 1, LX_CODEC_RAW, one + 3) == LX_OK && one[3] == 4);
    lx_stats st;
    CHECK(lx_store_stats(s, &st) == LX_OK && st.dict_bytes == 0);
    lx_store_close(s);

    /* Open, schema read and sampler: the out pointer inside the path, the dir, the config. */
    union {
        char text[256];
        lx_store *store;
        lx_schema schema;
        lx_sampler *sampler;
        uint64_t align;
    } u[2];
    char *fresh = join(dir, "overlap-never-created");
    snprintf(u[0].text, sizeof u[0].text, "%s", fresh);
    REFUSED(lx_store_open(u[0].text, LX_OPEN_CREATE, 0, &u[0].store), "out_store", "path");
    CHECK(strcmp(u[0].text, fresh) == 0);
    CHECK(lx_store_open(fresh, LX_OPEN_READ, 0, &s) == LX_ERR_NOT_A_STORE);
    snprintf(u[0].text, sizeof u[0].text, "%s", path);
    REFUSED(lx_schema_read(u[0].text, &u[0].schema), "out_schema", "dir");
    CHECK(strcmp(u[0].text, path) == 0);
    lx_sampler_config config = {.seed = 1, .len = 100, .batch_size = 10, .mode = LX_SAMPLER_CYCLIC};
    memcpy(u[1].text, &config, sizeof config);
    REFUSED(lx_sampler_new((const lx_sampler_config *)u[1].text, &u[1].sampler), "out_sampler", "config");
    CHECK(memcmp(u[1].text, &config, sizeof config) == 0);
#undef UNTOUCHED
    free(fresh);
    free(path);
}

/* Whether `dir` holds a file whose name starts with `prefix`. */
static int holds(const char *dir, const char *prefix) {
    DIR *d = opendir(dir);
    int found = 0;
    for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;) {
        found |= strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    }
    if (d != NULL) {
        closedir(d);
    }
    return found;
}

/* A schema lx_schema_read would refuse is refused by lx_schema_write, nothing written. */
static void schema_limits(const char *dir) {
    char *path = join(dir, "schema-limits");
    lx_store *s = NULL;
    CHECK(lx_store_open(path, LX_OPEN_CREATE, 0, &s) == LX_OK);
    lx_store_close(s);
    lx_schema eight_gib = {.kind = LX_KIND_DENSE, .dtype = LX_DTYPE_U8, .ndim = 1, .shape = {8ULL << 30}};
    CHECK(lx_schema_write(path, &eight_gib) == LX_ERR_INVALID_ARGUMENT);
    CHECK(lx_last_error() != NULL && strncmp(lx_last_error(), "schema: ", 8) == 0);
    CHECK(lx_last_error() != NULL && strstr(lx_last_error(), "larger than a record can be") != NULL);
    CHECK(!holds(path, "schema"));
    lx_schema schema;
    CHECK(lx_schema_read(path, &schema) == LX_ERR_SCHEMA); /* still a raw store */

    lx_schema good = {.kind = LX_KIND_DENSE, .dtype = LX_DTYPE_U8, .ndim = 1, .shape = {UINT32_MAX}};
    CHECK(lx_schema_write(path, &good) == LX_OK); /* the largest record */
    lx_schema refused[] = {
        {.kind = LX_KIND_DENSE, .dtype = LX_DTYPE_U8, .ndim = 2, .shape = {1ULL << 31, 2}},
        {.kind = LX_KIND_RAGGED, .dtype = LX_DTYPE_F32, .ndim = 1, .shape = {1ULL << 30}},
        {.kind = LX_KIND_DENSE, .dtype = LX_DTYPE_F64, .ndim = 3, .shape = {1ULL << 32, 1ULL << 32, 1ULL << 32}},
        eight_gib,
    };
    for (size_t k = 0; k < sizeof refused / sizeof refused[0]; k++) {
        CHECK(lx_schema_write(path, &refused[k]) == LX_ERR_INVALID_ARGUMENT);
    }
    CHECK(lx_schema_read(path, &schema) == LX_OK); /* the good one, untouched */
    CHECK(schema.kind == LX_KIND_DENSE && schema.ndim == 1 && schema.shape[0] == UINT32_MAX);
    free(path);
}

/* A store of n records, each damaged: verify counts them all, and its memory does not grow with
 * them (the peak resident set grows by less than 64 MiB; keeping each damaged record's error
 * would take about 230 bytes apiece). */
static void verify_many(const char *path, uint64_t n) {
    lx_store *s = NULL;
    CHECK(lx_store_open(path, LX_OPEN_READ, 0, &s) == LX_OK);
    long before = peak_kib();
    CHECK(before >= 0);
    lx_verify_report report = {0};
    CHECK(lx_store_verify(s, &report) == LX_ERR_CORRUPT);
    CHECK(mentions(lx_last_error(), path));
    long after = peak_kib();
    CHECK(after >= 0);
    CHECK(report.checked == n && report.bad_records == n && report.first_bad_index == 0);
    long grown_kib = after - before;
    printf("verify of %llu damaged records: peak resident set grew %ld KiB\n", (unsigned long long)n, grown_kib);
    CHECK(grown_kib < 64 * 1024);
    lx_store_close(s);
}

static int damaged(const char *path) {
    lx_store *s = NULL;
    int32_t code = lx_store_open(path, LX_OPEN_READ, 0, &s);
    if (code == LX_OK) {
        lx_verify_report report;
        code = lx_store_verify(s, &report);
        if (code == LX_OK) {
            /* Verify found nothing: a plain read must then fail. */
            uint64_t n = 0, total = 0;
            lx_store_len(s, &n);
            uint64_t *all = calloc(n + 1, sizeof *all);
            for (uint64_t i = 0; i < n; i++) {
                all[i] = i;
            }
            code = lx_store_gather_size(s, all, n, &total);
            free(all);
        }
        lx_store_close(s);
    }
    printf("code=%s\nmessage=%s\n", lx_error_name(code), lx_last_error() ? lx_last_error() : "");
    return code != LX_OK && lx_last_error() != NULL ? 0 : 1;
}

static void sampler_batches(void) {
    for (int32_t mode = 0; mode < 4; mode++) {
        lx_sampler_config config = {
            .seed = 42, .len = 1000, .batch_size = 8, .mode = mode, .block = 4, .window = 2, .rank = 1, .world = 2};
        lx_sampler *smp = NULL;
        if (lx_sampler_new(&config, &smp) != LX_OK) {
            printf("mode %d: %s\n", mode, lx_last_error());
            continue;
        }
        uint32_t batch[4];
        for (uint64_t step = 0; step < 5; step++) {
            lx_sampler_batch(smp, step * 1000, batch, 4);
            printf("%d %llu:", mode, (unsigned long long)(step * 1000));
            for (int k = 0; k < 4; k++) {
                printf(" %u", batch[k]);
            }
            printf("\n");
        }
        lx_sampler_free(smp);
    }
}

int main(int argc, char **argv) {
    const char *cmd = argc > 1 ? argv[1] : "";
    if (strcmp(cmd, "selftest") == 0 && argc == 3) {
        arguments(argv[2]);
        maintain(argv[2]);
        overlapping(argv[2]);
        schema_limits(argv[2]);
        char *st = join(argv[2], "self-store"), *ds = join(argv[2], "self-dataset");
        write_store(st);
        write_dataset(ds);
        read_back(st, ds);
        free(st);
        free(ds);
    } else if (strcmp(cmd, "write") == 0 && argc == 4) {
        write_store(argv[2]);
        write_dataset(argv[3]);
    } else if (strcmp(cmd, "read") == 0 && argc == 4) {
        read_back(argv[2], argv[3]);
    } else if (strcmp(cmd, "damaged") == 0 && argc == 3) {
        return damaged(argv[2]);
    } else if (strcmp(cmd, "verify-many") == 0 && argc == 4) {
        verify_many(argv[2], strtoull(argv[3], NULL, 10));
    } else if (strcmp(cmd, "sampler") == 0) {
        sampler_batches();
        return 0;
    } else {
        fprintf(stderr, "usage: store selftest DIR | write STORE DATASET | read STORE DATASET | damaged STORE | "
                        "verify-many STORE N | sampler\n");
        return 2;
    }
    printf("store: %d checks, %d failed\n", checks, failures);
    return failures == 0 ? 0 : 1;
}
