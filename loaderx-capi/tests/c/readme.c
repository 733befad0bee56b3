/* README.md's "From C" example, compiled and run by tests/c.rs: keep the two the same. */
#include <stdio.h>
#include <stdlib.h>

#include "loaderx.h"
#include "mmap_chunker.h"

static int lx_failed(void) {
    fprintf(stderr, "loaderx: %s\n", lx_last_error());
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: readme FILE.jsonl STORE\n");
        return 2;
    }
    /* Plan the file into 4 record-aligned parts, as 4 workers would read it. */
    CEngineHandle *file = mmap_engine_open(argv[1]);
    if (file == NULL) {
        fprintf(stderr, "mmap_engine_open: %s\n", mmap_engine_last_error());
        return 1;
    }
    size_t parts = mmap_engine_partition_records(file, 4, '\n');

    /* Store each part as one zstd record. */
    lx_store *store = NULL;
    if (lx_store_open(argv[2], LX_OPEN_CREATE, LX_FORMAT_V2, &store) != LX_OK) return lx_failed();
    for (size_t i = 0; i < parts; i++) {
        CChunkView part;
        mmap_engine_get_chunk(file, i, &part);
        uint64_t offsets[2] = {0, part.len};
        if (lx_store_append(store, part.data, offsets, 1, LX_CODEC_ZSTD, NULL) != LX_OK) return lx_failed();
    }
    mmap_engine_free(file);

    /* Step 0 of a shuffled sampler over the records, gathered back with their offsets. */
    lx_sampler_config config = {.seed = 7, .len = (uint32_t)parts, .batch_size = 2, .mode = LX_SAMPLER_CYCLIC};
    lx_sampler *sampler = NULL;
    uint32_t batch[2];
    if (lx_sampler_new(&config, &sampler) != LX_OK) return lx_failed();
    if (lx_sampler_batch(sampler, 0, batch, 2) != LX_OK) return lx_failed();
    uint64_t indices[2] = {batch[0], batch[1]}, offsets[3], size = 0;
    if (lx_store_gather_size(store, indices, 2, &size) != LX_OK) return lx_failed();
    uint8_t *bytes = malloc(size);
    if (lx_store_gather(store, indices, 2, bytes, size, offsets, NULL) != LX_OK) return lx_failed();
    printf("%zu parts; step 0 reads parts %u and %u: %llu bytes\n", parts, batch[0], batch[1],
           (unsigned long long)offsets[2]);

    free(bytes);
    lx_sampler_free(sampler);
    lx_store_close(store);
    return 0;
}
