/*
 * loaderx.h: loaderx's record store (Zrecord) and sampler, from C.
 *
 * Link -lloaderx_capi (libloaderx_capi.so, or libloaderx_capi.a with -lpthread -ldl -lm).
 * Stores written here are the stores the `loaderx` CLI and the Rust and Python APIs read, and
 * the other way round; a dataset is a store plus its schema (lx_schema_read / lx_schema_write).
 *
 * Conventions:
 * - Every function but lx_abi_version, lx_last_error, lx_error_name and the *_close / *_free
 *   calls returns an int32_t: LX_OK (0) or a negative LX_ERR_* code. Results go through out
 *   pointers, written only on success.
 * - Every pointer and length is checked: NULL where an object is needed, a misaligned array, or
 *   a buffer of the wrong size is LX_ERR_INVALID_ARGUMENT, never a crash. A pointer may be NULL
 *   when its length is 0. What cannot be checked is the caller's promise: a non-NULL pointer is
 *   valid for the length given, and a handle is live (not closed) and came from this library.
 * - No panic or other unwinding leaves the library: a bug inside is LX_ERR_INTERNAL.
 * - lx_last_error() is per thread: the text of the last failed call on this thread, or NULL
 *   after a call that succeeded. It stays valid until the next lx_ call on the thread. Texts
 *   name the file (and the record) concerned, with the cause after ": ".
 * - An output (an array or a single value written through a pointer) may share no byte with
 *   any other buffer of the same call, input or output: lx_store_gather given its indices as
 *   out_offsets, say, is LX_ERR_INVALID_ARGUMENT, with a text naming both ("out_offsets
 *   overlaps indices: ..."), checked before anything is written. Inputs may overlap each other.
 * - An output array may be overwritten (zeroed) even by a call that then fails.
 *
 * Threading: a store handle may be shared by threads: gathers, appends, stats, verify and sync
 * run at once; delete and compact wait for the others and run alone. One process writes a store
 * at a time (the store's write.lock; another is LX_ERR_LOCKED); readers in other processes see
 * each committed append. A sampler is immutable: share it freely.
 *
 * fork(): a child may go on reading through the parent's handles (its calls run on threads of
 * its own); a call that meets a handle another thread of the parent was using when the fork came
 * is LX_ERR_LOCKED at once (that thread is not in the child), as is every write from a fork. A
 * child reads a read-write handle through a read-only handle of its own, opened at its first
 * call: the store as it is then, and the parent's delete and compaction LX_ERR_LOCKED while the
 * child lives, as for any other reader.
 *
 * Platforms: built and tested on Linux x86-64; scripts/dist.sh builds the library for Linux
 * arm64, Windows x86-64 (GNU ABI) and macOS, and runs a C program against it on arm64 (qemu)
 * and Windows (Wine); macOS builds are not run (the guide's reliability chapter has the table).
 */
#ifndef LOADERX_H
#define LOADERX_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* (major << 16) | minor: v1.1. A minor version only adds functions and constants
   (v1.1: LX_ERR_COMMITTED). */
#define LX_ABI_VERSION 0x00010001U

/* Error codes. */
#define LX_OK                    0
#define LX_ERR_INVALID_ARGUMENT (-1)  /* NULL, misaligned, wrong size, unknown value, bad config */
#define LX_ERR_IO               (-2)  /* an I/O call failed (disk full included) */
#define LX_ERR_CORRUPT          (-3)  /* damaged bytes: a file, a record, a missing dictionary */
#define LX_ERR_NOT_A_STORE      (-4)  /* no store (or dataset) at the path */
#define LX_ERR_OUT_OF_RANGE     (-5)  /* a record index >= the store's length */
#define LX_ERR_LOCKED           (-6)  /* another handle holds the lock the call needs (another process's, or another
                                         handle of this process: a second writer, or readers open
                                         while the writer deletes or compacts) */
#define LX_ERR_READ_ONLY        (-7)  /* a write to a store opened with LX_OPEN_READ */
#define LX_ERR_ALREADY_EXISTS   (-8)  /* something is where a store was to be created */
#define LX_ERR_LIMIT            (-9)  /* a record or store over the format's limits */
#define LX_ERR_SCHEMA           (-10) /* no schema, or not the one needed */
#define LX_ERR_UNSUPPORTED      (-11) /* a format version or byte order this build does not read */
#define LX_ERR_OTHER            (-12) /* any other engine error */
#define LX_ERR_INTERNAL         (-13) /* a bug in the library, caught at the boundary */
#define LX_ERR_COMMITTED        (-14) /* the write committed and stands, but a step after its
                                         commit failed (durability, a journal's removal): do not
                                         repeat it; lx_last_error says what to do */

/* Open modes. */
#define LX_OPEN_READ   0 /* an existing store, read-only */
#define LX_OPEN_APPEND 1 /* read-write; created (empty) when the path holds no store */
#define LX_OPEN_CREATE 2 /* a new empty store; a store already at the path is replaced, with
                            a dataset's schema.msgpack there (other files a store would
                            overwrite, or a file at the path: LX_ERR_ALREADY_EXISTS) */

/* Formats (for creating; 0 is the default, v2). */
#define LX_FORMAT_DEFAULT 0
#define LX_FORMAT_V1      1
#define LX_FORMAT_V2      2

/* Codecs, a record's tag on disk. LZ4 needs a v2 store; ZSTD_DICT a trained dictionary. */
#define LX_CODEC_RAW       0
#define LX_CODEC_ZSTD      1
#define LX_CODEC_ZSTD_DICT 2
#define LX_CODEC_LZ4       3

/* Dataset kinds and element types (schema.msgpack). */
#define LX_KIND_DENSE  0 /* every record is one item of `shape` */
#define LX_KIND_RAGGED 1 /* records are sequences of rows of `shape` */
#define LX_KIND_IMAGE  2 /* records are encoded image files (u8, shape []), read as ragged bytes */
#define LX_DTYPE_U8   0
#define LX_DTYPE_I8   1
#define LX_DTYPE_U16  2
#define LX_DTYPE_I16  3
#define LX_DTYPE_U32  4
#define LX_DTYPE_I32  5
#define LX_DTYPE_U64  6
#define LX_DTYPE_I64  7
#define LX_DTYPE_F16  8
#define LX_DTYPE_BF16 9
#define LX_DTYPE_F32  10
#define LX_DTYPE_F64  11
#define LX_DTYPE_BOOL 12
#define LX_MAX_DIMS   8

/* Sampler modes. */
#define LX_SAMPLER_SEQUENTIAL   0 /* in order, wrapping around */
#define LX_SAMPLER_IID          1 /* uniform with replacement */
#define LX_SAMPLER_CYCLIC       2 /* without replacement, a fresh permutation per cycle */
#define LX_SAMPLER_BLOCK_CYCLIC 3 /* cyclic over blocks of `block` records, windows of `window` blocks */

/* Handles. Opaque: only pointers to them exist. */
typedef struct lx_store lx_store;
typedef struct lx_sampler lx_sampler;

typedef struct {
    uint64_t moved;        /* records rewritten */
    uint64_t skipped;      /* records already in place */
    uint64_t bytes_before; /* chunk bytes before */
    uint64_t bytes_after;  /* chunk bytes after */
} lx_compact_report;

typedef struct {
    uint64_t length;        /* records */
    uint64_t logical_bytes; /* their bytes, decoded */
    uint64_t live_bytes;    /* their bytes as stored */
    uint64_t chunk_bytes;   /* the chunk files' size (live bytes plus holes) */
    uint64_t chunks;        /* chunk files */
    uint64_t dict_bytes;    /* the zstd dictionary */
    uint64_t index_bytes;   /* the index */
    uint64_t records_raw, records_zstd, records_zstd_dict, records_lz4;
} lx_stats;

typedef struct {
    uint64_t checked;         /* records read back */
    uint64_t bad_records;     /* of which damaged (every one counted) */
    uint64_t file_problems;   /* problems with the store's own files (header, manifest) */
    uint64_t first_bad_index; /* the lowest damaged record's index, or UINT64_MAX */
} lx_verify_report;

typedef struct {
    int32_t kind;       /* LX_KIND_* */
    int32_t dtype;      /* LX_DTYPE_* */
    uint32_t elem_size; /* bytes per element (filled by lx_schema_read; ignored when writing) */
    uint32_t ndim;      /* dimensions used in shape, at most LX_MAX_DIMS */
    uint64_t shape[LX_MAX_DIMS]; /* dense: the item shape; ragged: one row's shape */
} lx_schema;

typedef struct {
    uint64_t seed;
    uint32_t len;        /* the index space 0 .. len-1 (at least 1) */
    uint32_t batch_size; /* the global batch, over all ranks (a multiple of world) */
    int32_t mode;        /* LX_SAMPLER_* */
    uint32_t block;      /* LX_SAMPLER_BLOCK_CYCLIC only: records per block (at least 1) */
    uint32_t window;     /* LX_SAMPLER_BLOCK_CYCLIC only: blocks per shuffling window (at least 1) */
    uint32_t rank;       /* this process's rank, below world */
    uint32_t world;      /* processes sharing each batch; 0 counts as 1 */
} lx_sampler_config;

/* The library's lx_ interface version, (major << 16) | minor. */
uint32_t lx_abi_version(void);

/* The calling thread's last error text, or NULL after a call that succeeded. */
const char *lx_last_error(void);

/* "LX_OK", "LX_ERR_IO", ... for a code ("LX_ERR_UNKNOWN" for another value); a static string. */
const char *lx_error_name(int32_t code);

/* Opens or creates the store at `path` (LX_OPEN_*; `format` is used when creating). */
int32_t lx_store_open(const char *path, int32_t mode, int32_t format, lx_store **out_store);

/*
 * Closes a store (its writes are committed as they are made); NULL is a no-op. Once, and with no
 * call on the handle in flight on any thread: close does not wait for them (a gather running on
 * another thread while the handle is closed reads freed memory).
 */
void lx_store_close(lx_store *store);

int32_t lx_store_len(const lx_store *store, uint64_t *out_len);
int32_t lx_store_format(const lx_store *store, int32_t *out_format);

/*
 * Appends `count` records in one commit: record i is data[offsets[i] .. offsets[i+1]], so
 * `offsets` holds count + 1 non-decreasing values and `data` offsets[count] bytes. The index of
 * the first goes to *out_first (which may be NULL). All or nothing.
 */
int32_t lx_store_append(const lx_store *store, const uint8_t *data, const uint64_t *offsets, size_t count,
                        int32_t codec, uint64_t *out_first);

/*
 * Trains the store's LX_CODEC_ZSTD_DICT dictionary on sample records (laid out as for
 * lx_store_append). *out_trained (may be NULL) is 0 when the store has a dictionary already or
 * the samples are too few to train one.
 */
int32_t lx_store_train_dictionary(const lx_store *store, const uint8_t *data, const uint64_t *offsets,
                                  size_t count, int32_t *out_trained);

/* The decoded sizes of the records at `indices` into out_lens[0 .. count-1]. */
int32_t lx_store_record_lens(const lx_store *store, const uint64_t *indices, size_t count, uint32_t *out_lens);

/* The bytes lx_store_gather needs for these records. */
int32_t lx_store_gather_size(const lx_store *store, const uint64_t *indices, size_t count, uint64_t *out_total);

/*
 * Gathers read as the engine's readers do: a compressed record is checked by its decoder, a raw
 * one is copied without its checksum (the copy runs at memory speed), so a raw record damaged
 * on disk comes back as it now is. lx_store_verify checks every record's checksum.
 *
 * Records that are each exactly `record_len` bytes (a dense dataset's items), back to back in
 * `out`, whose length `out_len` must be count * record_len. A record of another size is
 * LX_ERR_CORRUPT naming it.
 */
int32_t lx_store_gather_fixed(const lx_store *store, const uint64_t *indices, size_t count, size_t record_len,
                              uint8_t *out, size_t out_len);

/*
 * Records of any size back to back at the start of `out` (`out_capacity` bytes, at least what
 * lx_store_gather_size says), record i at out[out_offsets[i] .. out_offsets[i+1]]
 * (`out_offsets` holds count + 1 values); the bytes used go to *out_total (may be NULL).
 */
int32_t lx_store_gather(const lx_store *store, const uint64_t *indices, size_t count, uint8_t *out,
                        size_t out_capacity, uint64_t *out_offsets, uint64_t *out_total);

/* Deletes the records at `indices`: the last record moves into each hole (indices change). */
int32_t lx_store_delete(const lx_store *store, const uint64_t *indices, size_t count);

/* Rewrites the live records densely, reclaiming deleted space; *out_report may be NULL. */
int32_t lx_store_compact(const lx_store *store, lx_compact_report *out_report);

int32_t lx_store_stats(const lx_store *store, lx_stats *out_stats);

/*
 * Reads back every record (and, v2, checks the store's files). LX_OK when all is intact;
 * otherwise the first problem's code (LX_ERR_CORRUPT for damaged bytes) and text, naming the
 * file: a problem with the store's files if there is one, else the first damaged record.
 * *out_report (may be NULL) is filled either way once the store could be read. The scan
 * streams: of the damaged records it keeps only their count and the first, so its memory is
 * the same however many are damaged.
 */
int32_t lx_store_verify(const lx_store *store, lx_verify_report *out_report);

/* Makes every committed record durable (fsync). A handle opened LX_OPEN_READ is LX_ERR_READ_ONLY. */
int32_t lx_store_sync(const lx_store *store);

/* A dataset's schema, from dir/schema.msgpack. */
int32_t lx_schema_read(const char *dir, lx_schema *out_schema);

/*
 * Writes dir/schema.msgpack (beside a store: the store becomes a dataset the CLI can export).
 * A schema lx_schema_read would refuse (an item, or a ragged row, of more bytes than a record
 * can hold: 4 GiB - 1) is LX_ERR_INVALID_ARGUMENT ("schema: ..."), and nothing is written.
 */
int32_t lx_schema_write(const char *dir, const lx_schema *schema);

/*
 * A sampler: each step's batch is a pure function of (config, step), the same as loaderx's
 * Rust and Python samplers give for the same settings.
 */
int32_t lx_sampler_new(const lx_sampler_config *config, lx_sampler **out_sampler);

/* Frees a sampler; NULL is a no-op. Once, and with no call on it in flight on any thread. */
void lx_sampler_free(lx_sampler *sampler);

/* This rank's share of each batch: batch_size / world, the length lx_sampler_batch fills. */
int32_t lx_sampler_batch_size(const lx_sampler *sampler, uint32_t *out_size);

/* This rank's indices of step `step` into out[0 .. out_len-1]; out_len must be the batch size. */
int32_t lx_sampler_batch(const lx_sampler *sampler, uint64_t step, uint32_t *out, size_t out_len);

#ifdef __cplusplus
}
#endif

#endif /* LOADERX_H */
