/*
 * The engine's guards seen from C: a store a live writer holds, and index fields that lie.
 *
 *   guards create-under-writer DIR  LX_OPEN_CREATE over a store open for writing is
 *                                   LX_ERR_LOCKED, and the writer's records stay intact
 *   guards far-chunk STORE          record 1's entry names chunk 4294967295 (an empty
 *                                   4294967295.zr beside it): its gathers are LX_ERR_CORRUPT
 *   guards huge-blocks STORE        a fixed-stride header claiming 2^32 - 1 records a block and
 *                                   2^32 - 1 records: the open or the verify is LX_ERR_CORRUPT
 *   guards huge-plan FILE           plans of a range per byte that do not fit in memory
 *                                   return 0 with an error, never abort
 *   guards handle-alias DIR         an output pointing into the store or sampler handle is
 *                                   LX_ERR_INVALID_ARGUMENT (it overwrote the handle's lock, and
 *                                   the next compact hung), and the handle still works
 *   guards thread-exit              calls from a pthread key's destructor (the thread's Rust
 *                                   locals already gone) return their codes, never abort;
 *                                   a misaligned out_chunk is named as misaligned
 *   guards fork DIR                 a child forked after the parent's gathers started the
 *                                   thread pool gathers (the pool's threads are not in it);
 *                                   children forked while a thread of the parent compacts, or
 *                                   while four gather through a read handle of a growing store
 *                                   (the engine's chunk and index caches held), read or are
 *                                   LX_ERR_LOCKED, never wait for good (alarm: 20 s)
 *
 * tests/c.rs writes the lying stores (through loaderx-core, then patching index.zr). The
 * store's guards run with their address space capped at 4 GiB and their CPU time at 60 s, so
 * an engine that sizes an allocation or a loop by a lying field fails here (an abort, SIGXCPU)
 * instead of taking the machine's memory or hours.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <unistd.h>
#include <signal.h>
#include <time.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "mmap_chunker.h"

#include "loaderx.h"

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

#define RECORD 64

/* Byte j of record i. */
static uint8_t record_byte(uint64_t i, size_t j) { return (uint8_t)(i * 31 + j); }

/* Whether `s` holds exactly records 0 .. n-1, each intact, and verifies clean. */
static int all_intact(const lx_store *s, uint64_t n) {
    uint64_t len = 0;
    if (lx_store_len(s, &len) != LX_OK || len != n) {
        return 0;
    }
    uint64_t *indices = malloc(n * sizeof *indices);
    uint8_t *out = malloc(n * RECORD);
    for (uint64_t i = 0; i < n; i++) {
        indices[i] = i;
    }
    int ok = lx_store_gather_fixed(s, indices, n, RECORD, out, n * RECORD) == LX_OK;
    for (uint64_t i = 0; ok && i < n; i++) {
        for (size_t j = 0; j < RECORD; j++) {
            ok &= out[i * RECORD + j] == record_byte(i, j);
        }
    }
    free(indices);
    free(out);
    lx_verify_report report = {0};
    return ok && lx_store_verify(s, &report) == LX_OK && report.checked == n && report.bad_records == 0;
}

/* Appends records first .. first+count-1. */
static int append(const lx_store *s, uint64_t first, size_t count) {
    uint8_t *data = malloc(count * RECORD);
    uint64_t *offsets = malloc((count + 1) * sizeof *offsets);
    for (size_t k = 0; k <= count; k++) {
        offsets[k] = k * RECORD;
    }
    for (size_t k = 0; k < count; k++) {
        for (size_t j = 0; j < RECORD; j++) {
            data[k * RECORD + j] = record_byte(first + k, j);
        }
    }
    uint64_t at = UINT64_MAX;
    int ok = lx_store_append(s, data, offsets, count, LX_CODEC_ZSTD, &at) == LX_OK && at == first;
    free(data);
    free(offsets);
    return ok;
}

/* A writer (opened with `mode`) holds the store: a create there is LX_ERR_LOCKED and touches
 * nothing; once the writer is gone, a create replaces the store. */
static void create_under_writer(const char *dir, int32_t mode) {
    char path[4096];
    snprintf(path, sizeof path, "%s/live-%d", dir, mode);
    lx_store *w = NULL;
    CHECK(lx_store_open(path, mode, LX_FORMAT_V2, &w) == LX_OK);
    CHECK(append(w, 0, 50));

    lx_store *c = NULL;
    CHECK(lx_store_open(path, LX_OPEN_CREATE, LX_FORMAT_V2, &c) == LX_ERR_LOCKED);
    CHECK(lx_last_error() != NULL && strstr(lx_last_error(), path) != NULL);
    CHECK(c == NULL);
    lx_store_close(c); /* a create that went through */

    CHECK(all_intact(w, 50));
    lx_store *r = NULL;
    CHECK(lx_store_open(path, LX_OPEN_READ, 0, &r) == LX_OK);
    CHECK(r != NULL && all_intact(r, 50));
    CHECK(append(w, 50, 1)); /* the writer still writes, and a reader sees it */
    CHECK(r != NULL && all_intact(r, 51));
    lx_store_close(r);
    lx_store_close(w);

    CHECK(lx_store_open(path, LX_OPEN_CREATE, LX_FORMAT_V2, &c) == LX_OK);
    uint64_t len = 99;
    CHECK(lx_store_len(c, &len) == LX_OK && len == 0);
    lx_store_close(c);
}

/* Caps this process's address space at `bytes` and its CPU time at 60 s. */
static void cap_resources_to(unsigned long long bytes) {
    struct rlimit memory = {.rlim_cur = bytes, .rlim_max = bytes};
    struct rlimit cpu = {.rlim_cur = 60, .rlim_max = 70}; /* SIGXCPU at 60 s */
    CHECK(setrlimit(RLIMIT_AS, &memory) == 0);
    CHECK(setrlimit(RLIMIT_CPU, &cpu) == 0);
}

/* Caps this process's address space at 4 GiB and its CPU time at 60 s. */
static void cap_resources(void) { cap_resources_to(4ULL << 30); }

/*
 * A 64 MiB file of NUL bytes cut at every other byte: a plan of 32 Mi ranges (16 bytes each,
 * more for a partition) in an address space capped at 384 MiB. Each plan that does not fit is
 * refused, with the error text, keeping the plan before it; the process does not abort.
 */
static void huge_plan(const char *path) {
    cap_resources_to(384ULL << 20);
    CEngineHandle *h = mmap_engine_open(path);
    CHECK(h != NULL);
    if (h == NULL) return;
    size_t n = mmap_engine_scan_chunks_ex(h, 1 << 20, 0);
    CHECK(n > 0);
    CChunkView view;
    CHECK(mmap_engine_scan_chunks_ex(h, 1, 0) == 0);
    CHECK(mmap_engine_last_error() != NULL && strstr(mmap_engine_last_error(), "memory") != NULL);
    CHECK(mmap_engine_get_chunk(h, n - 1, &view) == 0 && view.len > 0); /* the plan before it */
    CHECK(mmap_engine_get_chunk(h, n, &view) == -1);
    CHECK(mmap_engine_partition_records(h, SIZE_MAX, 0) == 0);
    CHECK(mmap_engine_last_error() != NULL && strstr(mmap_engine_last_error(), "memory") != NULL);
    const uint8_t nul = 0;
    CHECK(mmap_engine_scan_chunks_pattern(h, 1, &nul, 1) == 0);
    CHECK(mmap_engine_last_error() != NULL && strstr(mmap_engine_last_error(), "memory") != NULL);
    CHECK(mmap_engine_get_chunk(h, n - 1, &view) == 0);
    CHECK(mmap_engine_partition_records(h, 4, 0) == 4);
    mmap_engine_free(h);
}

/* Record 1's entry names chunk 4294967295; records 0 and 2 are intact. */
static void far_chunk(const char *path) {
    cap_resources();
    lx_store *s = NULL;
    CHECK(lx_store_open(path, LX_OPEN_READ, 0, &s) == LX_OK);
    uint64_t one = 1, total = 0, offsets[2];
    uint8_t out[RECORD];
    CHECK(lx_store_gather_fixed(s, &one, 1, RECORD, out, sizeof out) == LX_ERR_CORRUPT);
    CHECK(lx_last_error() != NULL && strstr(lx_last_error(), path) != NULL);
    CHECK(lx_store_gather(s, &one, 1, out, sizeof out, offsets, &total) == LX_ERR_CORRUPT);
    CHECK(lx_last_error() != NULL && strstr(lx_last_error(), path) != NULL);
    uint64_t good[2] = {0, 2};
    uint8_t both[2 * RECORD];
    CHECK(lx_store_gather_fixed(s, good, 2, RECORD, both, sizeof both) == LX_OK);
    CHECK(both[0] == record_byte(0, 0) && both[RECORD + 5] == record_byte(2, 5));
    lx_store_close(s);
}

/* A fixed-stride header claiming 2^32 - 1 records a block and as many records. */
static void huge_blocks(const char *path) {
    cap_resources();
    lx_store *s = NULL;
    int32_t code = lx_store_open(path, LX_OPEN_READ, 0, &s);
    if (code == LX_OK) {
        lx_verify_report report = {0};
        code = lx_store_verify(s, &report);
        lx_store_close(s);
    }
    printf("code=%s\n", lx_error_name(code));
    CHECK(code == LX_ERR_CORRUPT);
    CHECK(lx_last_error() != NULL && strstr(lx_last_error(), path) != NULL);
}

/* Runs at thread exit, after the thread's Rust thread-locals were destroyed. */
static int dtor_code = 1, dtor_len = 1;
static void at_exit_of_thread(void *arg) {
    (void)arg;
    uint64_t n = 0;
    dtor_code = lx_store_len(NULL, &n);
    dtor_len = (int)mmap_engine_scan_chunks(NULL, 1);
    (void)lx_last_error();
    (void)mmap_engine_last_error();
}
static pthread_key_t key;
static void *thread_with_key(void *arg) {
    (void)arg;
    uint64_t n = 0;
    (void)lx_store_len(NULL, &n); /* the thread's last-error slot in use before it exits */
    pthread_setspecific(key, (void *)1);
    return NULL;
}
static void thread_exit(void) {
    CHECK(pthread_key_create(&key, at_exit_of_thread) == 0);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, thread_with_key, NULL) == 0);
    CHECK(pthread_join(t, NULL) == 0);
    CHECK(dtor_code == LX_ERR_INVALID_ARGUMENT);
    CHECK(dtor_len == 0);
    /* A misaligned out_chunk is not a null one. */
    char path[] = "/tmp/loaderx-guards-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0 && write(fd, "a\nbb\nccc\n", 9) == 9);
    close(fd);
    CEngineHandle *h = mmap_engine_open(path);
    CHECK(h != NULL && mmap_engine_scan_chunks(h, 4) > 0);
    CChunkView views[2];
    CHECK(mmap_engine_get_chunk(h, 0, (CChunkView *)((char *)views + 1)) == -1);
    CHECK(mmap_engine_last_error() != NULL && strstr(mmap_engine_last_error(), "misaligned") != NULL);
    CHECK(mmap_engine_get_chunk(h, 0, NULL) == -1);
    CHECK(mmap_engine_last_error() != NULL && strcmp(mmap_engine_last_error(), "out_chunk is null") == 0);
    mmap_engine_free(h);
    unlink(path);
}

/* Twentieth look, U4: outputs aimed at the handles themselves. */
static int overlap_refused(int32_t code) {
    const char *e = lx_last_error();
    return code == LX_ERR_INVALID_ARGUMENT && e != NULL && strstr(e, "overlaps") != NULL;
}
static void handle_alias(const char *dir) {
    lx_store *s = NULL;
    CHECK(lx_store_open(dir, LX_OPEN_CREATE, LX_FORMAT_V2, &s) == LX_OK);
    if (s == NULL) return;
    uint8_t data[4] = {1, 2, 3, 4};
    uint64_t offsets[2] = {0, 4};
    CHECK(lx_store_append(s, data, offsets, 1, LX_CODEC_RAW, NULL) == LX_OK);
    CHECK(overlap_refused(lx_store_len(s, (uint64_t *)(void *)s)));
    CHECK(overlap_refused(lx_store_format(s, (int32_t *)(void *)s)));
    CHECK(overlap_refused(lx_store_append(s, data, offsets, 1, LX_CODEC_RAW, (uint64_t *)(void *)s)));
    CHECK(overlap_refused(lx_store_stats(s, (lx_stats *)(void *)s)));
    uint64_t index = 0;
    CHECK(overlap_refused(lx_store_gather_fixed(s, &index, 1, 4, (uint8_t *)(void *)s, 4)));
    CHECK(overlap_refused(lx_store_gather_size(s, &index, 1, (uint64_t *)(void *)s)));
    /* The handle is intact: its lock still works, so compact returns. */
    uint64_t n = 0;
    CHECK(lx_store_len(s, &n) == LX_OK && n == 1);
    CHECK(lx_store_compact(s, NULL) == LX_OK);
    uint8_t back[4] = {0};
    CHECK(lx_store_gather_fixed(s, &index, 1, 4, back, 4) == LX_OK && memcmp(back, data, 4) == 0);
    lx_store_close(s);

    lx_sampler_config config = {.seed = 1, .len = 100, .batch_size = 4, .mode = LX_SAMPLER_CYCLIC};
    lx_sampler *smp = NULL;
    CHECK(lx_sampler_new(&config, &smp) == LX_OK);
    if (smp == NULL) return;
    CHECK(overlap_refused(lx_sampler_batch_size(smp, (uint32_t *)(void *)smp)));
    CHECK(overlap_refused(lx_sampler_batch(smp, 0, (uint32_t *)(void *)smp, 4)));
    uint32_t size = 0, batch[4];
    CHECK(lx_sampler_batch_size(smp, &size) == LX_OK && size == 4);
    CHECK(lx_sampler_batch(smp, 0, batch, 4) == LX_OK && batch[0] < 100);
    lx_sampler_free(smp);

    /* Twenty-first look, V3: the chunker's handle too (a view written over it replaced its
     * plan; a later scan read wild memory). */
    char path[] = "/tmp/loaderx-guards-alias-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0 && write(fd, "a\nbb\nccc\ndddd\n", 14) == 14);
    close(fd);
    CEngineHandle *h = mmap_engine_open(path);
    size_t chunks = h != NULL ? mmap_engine_scan_chunks(h, 4) : 0;
    CHECK(chunks > 1);
    if (chunks > 1) {
        CChunkView before, after;
        CHECK(mmap_engine_get_chunk(h, chunks - 1, &before) == 0);
        CHECK(mmap_engine_get_chunk(h, 0, (CChunkView *)(void *)h) == -1);
        CHECK(mmap_engine_last_error() != NULL && strstr(mmap_engine_last_error(), "overlaps") != NULL);
        CHECK(mmap_engine_get_chunk(h, chunks - 1, &after) == 0);
        CHECK(after.data == before.data && after.len == before.len);
        CHECK(mmap_engine_scan_chunks(h, 4) == chunks);
    }
    mmap_engine_free(h);
    unlink(path);
}

/* The fork test's store: FORK_RECORDS records of FORK_LEN bytes, byte j of record i being
 * i + 7j; a batch of FORK_BATCH is 4 MiB, enough for a gather to split over the pool. */
enum { FORK_RECORDS = 2048, FORK_LEN = 4096, FORK_BATCH = 1024 };

static uint8_t fork_byte(uint64_t i, size_t j) { return (uint8_t)(i + 7 * j); }

/* Gathers a batch and checks its bytes: LX_OK, the call's error, or -1000 for wrong bytes. */
static int fork_gather(const lx_store *s) {
    uint64_t indices[FORK_BATCH];
    for (size_t k = 0; k < FORK_BATCH; k++) indices[k] = (k * 7919) % FORK_RECORDS;
    uint8_t *out = malloc((size_t)FORK_BATCH * FORK_LEN);
    if (out == NULL) return -1000;
    int code = lx_store_gather_fixed(s, indices, FORK_BATCH, FORK_LEN, out, (size_t)FORK_BATCH * FORK_LEN);
    for (size_t k = 0; code == LX_OK && k < FORK_BATCH; k++)
        for (size_t j = 0; j < FORK_LEN; j++)
            if (out[k * FORK_LEN + j] != fork_byte(indices[k], j)) { code = -1000; break; }
    free(out);
    return code;
}

/* A refusal names the fork. */
static int refused_for_fork(int code) {
    const char *e = lx_last_error();
    return code == LX_ERR_LOCKED && e != NULL && strstr(e, "fork") != NULL;
}

/* A forked child's calls: 0 when it read everything, 3 when a call was refused for the fork,
 * 1 on anything else; SIGALRM after 20 s when a call waits for good. */
static int fork_child(lx_store *s) {
    alarm(20);
    uint64_t n = 0;
    int code = lx_store_len(s, &n);
    if (code != LX_OK) return refused_for_fork(code) ? 3 : 1;
    if (n != FORK_RECORDS) return 1;
    code = fork_gather(s);
    if (code != LX_OK) return refused_for_fork(code) ? 3 : 1;
    /* A write from a fork is never taken: its lock and its files are the parent's. */
    uint8_t rec[FORK_LEN] = {0};
    uint64_t offsets[2] = {0, FORK_LEN};
    code = lx_store_append(s, rec, offsets, 1, LX_CODEC_RAW, NULL);
    return refused_for_fork(code) ? 0 : 1;
}

/* Forks a child running fork_child: its exit status, or 100 + the signal that ended it. */
static int fork_run(lx_store *s) {
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) _exit(fork_child(s));
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid) return 99;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 100 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

static volatile int compacting;

/* Gathers record 0 through the read handle `arg` until `compacting` is cleared. */
static void *gather_loop(void *arg) {
    const lx_store *r = arg;
    uint64_t first = 0;
    uint8_t rec[FORK_LEN];
    while (__atomic_load_n(&compacting, __ATOMIC_ACQUIRE)) {
        if (lx_store_gather_fixed(r, &first, 1, FORK_LEN, rec, FORK_LEN) != LX_OK) return (void *)1;
    }
    return NULL;
}

/* Look 63, L63-1: children forked while four threads gather through a read handle `r` of the
 * store the writer `w` grows, each child gathering the newest record through `r` (a chunk and
 * an index mapped anew, whose caches' locks the parent's threads held at the fork). */
static void forks_while_gathering(lx_store *w, const char *dir) {
    lx_store *r = NULL;
    CHECK(lx_store_open(dir, LX_OPEN_READ, LX_FORMAT_V2, &r) == LX_OK);
    if (r == NULL) return;
    pthread_t threads[4];
    __atomic_store_n(&compacting, 1, __ATOMIC_RELEASE);
    for (int t = 0; t < 4; t++) CHECK(pthread_create(&threads[t], NULL, gather_loop, r) == 0);
    int read = 0, refused = 0;
    uint8_t rec[FORK_LEN];
    for (int k = 0; k < 24; k++) {
        uint64_t n = 0, offsets[2] = {0, FORK_LEN};
        CHECK(lx_store_len(w, &n) == LX_OK);
        for (size_t j = 0; j < FORK_LEN; j++) rec[j] = fork_byte(n, j);
        CHECK(lx_store_append(w, rec, offsets, 1, LX_CODEC_RAW, NULL) == LX_OK);
        fflush(stdout);
        fflush(stderr);
        pid_t pid = fork();
        if (pid == 0) {
            alarm(20);
            uint8_t got[FORK_LEN];
            int code = lx_store_gather_fixed(r, &n, 1, FORK_LEN, got, FORK_LEN);
            if (code != LX_OK) _exit(refused_for_fork(code) ? 3 : 1);
            _exit(memcmp(got, rec, FORK_LEN) == 0 ? 0 : 1);
        }
        int status = 0;
        CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
        int code = WIFEXITED(status) ? WEXITSTATUS(status) : 100 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
        if (code == 0) read++;
        else if (code == 3) refused++;
        else fprintf(stderr, "fork: gathering child %d ended with %d (114: waited for good)\n", k, code);
    }
    __atomic_store_n(&compacting, 0, __ATOMIC_RELEASE);
    for (int t = 0; t < 4; t++) {
        void *failed = NULL;
        CHECK(pthread_join(threads[t], &failed) == 0 && failed == NULL);
    }
    printf("fork: children forked while threads gather: %d read, %d refused\n", read, refused);
    CHECK(read + refused == 24);
    lx_store_close(r);
}

/* Compacts `arg` until `compacting` is cleared; refused (LX_ERR_LOCKED) while a child reads
 * through a handle of its own. */
static void *compact_loop(void *arg) {
    lx_store *s = arg;
    while (__atomic_load_n(&compacting, __ATOMIC_ACQUIRE)) {
        int code = lx_store_compact(s, NULL);
        if (code != LX_OK && code != LX_ERR_LOCKED) return (void *)1;
    }
    return NULL;
}

/* Records that describe themselves: an 8-byte id, then byte j is fork_byte(id, j). */
static void rewrite_fill(uint8_t *p, uint64_t id) {
    memcpy(p, &id, 8);
    for (size_t j = 8; j < FORK_LEN; j++) p[j] = fork_byte(id, j);
}

/* Deletes and compacts the read-write handle `arg` until `compacting` is cleared, appending
 * as many records as it deletes (LX_ERR_LOCKED while a child reads is expected). */
static void *rewrite_loop(void *arg) {
    lx_store *s = arg;
    uint8_t rec[FORK_LEN];
    uint64_t offsets[2] = {0, FORK_LEN}, id = 1u << 20, n = 0;
    unsigned seed = 7;
    while (__atomic_load_n(&compacting, __ATOMIC_ACQUIRE)) {
        rewrite_fill(rec, id++);
        if (lx_store_append(s, rec, offsets, 1, LX_CODEC_ZSTD, NULL) != LX_OK) return (void *)1;
        if (lx_store_len(s, &n) != LX_OK) return (void *)1;
        uint64_t victim = (uint64_t)rand_r(&seed) % n;
        int code = lx_store_delete(s, &victim, 1);
        if (code == LX_OK) code = lx_store_compact(s, NULL);
        if (code != LX_OK && code != LX_ERR_LOCKED) return (void *)1;
        /* Free between rewrites, so that most forks find the handle idle. */
        nanosleep(&(struct timespec){.tv_sec = 0, .tv_nsec = 2000000}, NULL);
    }
    return NULL;
}

/* Look 64, L64-1: children reading through the parent's read-write handle while the parent's
 * thread deleted and compacted got other records' bytes back as LX_OK, and LX_ERR_CORRUPT for
 * intact records: the parent's lock was theirs too, so the parent found the store alone. */
static void forks_while_rewriting(const char *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s-rewritten", dir);
    lx_store *s = NULL;
    CHECK(lx_store_open(path, LX_OPEN_CREATE, LX_FORMAT_V2, &s) == LX_OK);
    if (s == NULL) return;
    uint8_t *data = malloc((size_t)256 * FORK_LEN);
    uint64_t offsets[257];
    for (size_t k = 0; data != NULL && k < 256; k++) {
        rewrite_fill(data + k * FORK_LEN, k);
        offsets[k] = k * FORK_LEN;
    }
    offsets[256] = 256 * FORK_LEN;
    CHECK(data != NULL && lx_store_append(s, data, offsets, 256, LX_CODEC_ZSTD, NULL) == LX_OK);
    free(data);
    pthread_t t;
    __atomic_store_n(&compacting, 1, __ATOMIC_RELEASE);
    CHECK(pthread_create(&t, NULL, rewrite_loop, s) == 0);
    long counts[3] = {0}; /* records read, wrong bytes as LX_OK, calls failed */
    for (int k = 0; k < 12; k++) {
        nanosleep(&(struct timespec){.tv_sec = 0, .tv_nsec = 20000000}, NULL);
        int pipes[2];
        CHECK(pipe(pipes) == 0);
        fflush(stdout);
        fflush(stderr);
        pid_t pid = fork();
        if (pid == 0) {
            alarm(20);
            long c[3] = {0};
            unsigned seed = (unsigned)getpid();
            uint8_t out[8 * FORK_LEN];
            for (int round = 0; round < 400; round++) {
                uint64_t n = 0, indices[8];
                int code = lx_store_len(s, &n);
                for (int i = 0; code == LX_OK && i < 8; i++) indices[i] = (uint64_t)rand_r(&seed) % n;
                if (code == LX_OK) code = lx_store_gather_fixed(s, indices, 8, FORK_LEN, out, sizeof out);
                if (code != LX_OK) {
                    /* Refused while the parent rewrites (named): not a failure; anything else is. */
                    if (!refused_for_fork(code)) c[2]++;
                    continue;
                }
                for (int i = 0; i < 8; i++) {
                    uint64_t id;
                    memcpy(&id, out + i * FORK_LEN, 8);
                    c[0]++;
                    for (size_t j = 8; j < FORK_LEN; j++)
                        if (out[i * FORK_LEN + j] != fork_byte(id, j)) { c[1]++; break; }
                }
            }
            _exit(write(pipes[1], c, sizeof c) == (ssize_t)sizeof c ? 0 : 1);
        }
        close(pipes[1]);
        long c[3] = {0};
        ssize_t got = read(pipes[0], c, sizeof c);
        close(pipes[0]);
        int status = 0;
        CHECK(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && got == (ssize_t)sizeof c);
        for (int i = 0; i < 3; i++) counts[i] += c[i];
    }
    __atomic_store_n(&compacting, 0, __ATOMIC_RELEASE);
    void *failed = NULL;
    CHECK(pthread_join(t, &failed) == 0 && failed == NULL);
    printf("fork: children read %ld records while the parent rewrote: %ld wrong, %ld calls failed\n",
           counts[0], counts[1], counts[2]);
    CHECK(counts[0] > 0 && counts[1] == 0 && counts[2] == 0);
    lx_verify_report report;
    CHECK(lx_store_verify(s, &report) == LX_OK && report.bad_records == 0);
    lx_store_close(s);
}

static void forks(const char *dir) {
    /* Four pool threads whatever the machine's cores, so that the gathers split. */
    setenv("RAYON_NUM_THREADS", "4", 1);
    lx_store *s = NULL;
    CHECK(lx_store_open(dir, LX_OPEN_CREATE, LX_FORMAT_V2, &s) == LX_OK);
    if (s == NULL) return;
    uint8_t *data = malloc((size_t)256 * FORK_LEN);
    uint64_t offsets[257];
    for (uint64_t first = 0; data != NULL && first < FORK_RECORDS; first += 256) {
        for (size_t k = 0; k < 256; k++) {
            offsets[k] = k * FORK_LEN;
            for (size_t j = 0; j < FORK_LEN; j++) data[k * FORK_LEN + j] = fork_byte(first + k, j);
        }
        offsets[256] = 256 * FORK_LEN;
        CHECK(lx_store_append(s, data, offsets, 256, LX_CODEC_RAW, NULL) == LX_OK);
    }
    free(data);
    CHECK(fork_gather(s) == LX_OK); /* starts the pool in this process */
    int alone = fork_run(s);
    printf("fork: a child of a process whose pool ran: %d\n", alone);
    CHECK(alone == 0);

    pthread_t t;
    __atomic_store_n(&compacting, 1, __ATOMIC_RELEASE);
    CHECK(pthread_create(&t, NULL, compact_loop, s) == 0);
    int read = 0, refused = 0;
    for (int k = 0; k < 8; k++) {
        nanosleep(&(struct timespec){.tv_sec = 0, .tv_nsec = 1000000}, NULL);
        int status = fork_run(s);
        if (status == 0) read++;
        else if (status == 3) refused++;
        else fprintf(stderr, "fork: child %d ended with %d (114: waited for good)\n", k, status);
    }
    __atomic_store_n(&compacting, 0, __ATOMIC_RELEASE);
    void *compacted = NULL;
    CHECK(pthread_join(t, &compacted) == 0 && compacted == NULL);
    printf("fork: children forked while a thread compacts: %d read, %d refused\n", read, refused);
    CHECK(read + refused == 8);
    CHECK(fork_gather(s) == LX_OK); /* the parent reads on */
    forks_while_gathering(s, dir);
    lx_store_close(s);
    forks_while_rewriting(dir);
}

/* Look 75, L75-1: a store set's directory opened to append or create made a store inside it,
 * whose appends no reader of the set saw. Refused, nothing made. */
static void store_set(const char *set) {
    int32_t modes[2] = {LX_OPEN_APPEND, LX_OPEN_CREATE};
    for (int k = 0; k < 2; k++) {
        lx_store *s = NULL;
        CHECK(lx_store_open(set, modes[k], LX_FORMAT_V2, &s) == LX_ERR_ALREADY_EXISTS);
        CHECK(s == NULL);
        CHECK(lx_last_error() != NULL && strstr(lx_last_error(), "is a store set") != NULL);
        lx_store_close(s);
    }
    char index[4096];
    snprintf(index, sizeof index, "%s/index.zr", set);
    CHECK(access(index, F_OK) != 0);
}

int main(int argc, char **argv) {
    const char *cmd = argc > 1 ? argv[1] : "";
    if (strcmp(cmd, "create-under-writer") == 0 && argc == 3) {
        create_under_writer(argv[2], LX_OPEN_APPEND);
        create_under_writer(argv[2], LX_OPEN_CREATE);
    } else if (strcmp(cmd, "store-set") == 0 && argc == 3) {
        store_set(argv[2]);
    } else if (strcmp(cmd, "far-chunk") == 0 && argc == 3) {
        far_chunk(argv[2]);
    } else if (strcmp(cmd, "huge-blocks") == 0 && argc == 3) {
        huge_blocks(argv[2]);
    } else if (strcmp(cmd, "huge-plan") == 0 && argc == 3) {
        huge_plan(argv[2]);
    } else if (strcmp(cmd, "handle-alias") == 0 && argc == 3) {
        handle_alias(argv[2]);
    } else if (strcmp(cmd, "thread-exit") == 0) {
        thread_exit();
    } else if (strcmp(cmd, "fork") == 0 && argc == 3) {
        forks(argv[2]);
    } else {
        fprintf(stderr, "usage: guards create-under-writer DIR | store-set SET | far-chunk STORE | huge-blocks STORE | huge-plan FILE | handle-alias DIR | thread-exit | fork DIR\n");
        return 2;
    }
    printf("guards: %d checks, %d failed\n", checks, failures);
    return failures == 0 ? 0 : 1;
}
