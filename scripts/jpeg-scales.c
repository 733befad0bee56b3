/* Spike G of docs/benchmarks/images.md: what libjpeg-turbo's decode of a RandomResizedCrop's
 * region costs at each DCT scale, on the bench's photographs, to choose the scales the image
 * pipeline decodes at (loaderx-core/src/vision/decode.rs). Three ways, interleaved per round:
 *   whole  - each whole file at full size (the bench's full-decode ceiling);
 *   pow2   - the crop's region, scaled by 1/2, 1/4 or 1/8 while the crop stays at least the
 *            224x224 output (what the pipeline does);
 *   eighth - the crop's region at the smallest scale M/8 (M = 1..8) that keeps the crop at
 *            least the output: fewer pixels, but scales with no SIMD inverse DCT.
 * Crops are torchvision's RandomResizedCrop(224) draws (scale 0.08-1, ratio 3/4-4/3), one per file,
 * the same for every way, with the margin decode.rs adds. Prints the median ms per image.
 *
 *   cc -O2 -IOUT/include scripts/jpeg-scales.c OUT/lib/libturbojpeg.a -lm -o jpeg-scales
 *   ./jpeg-scales PHOTOS [ROUNDS]
 * where OUT is the out folder of turbojpeg-sys under target/release/build (a release build with
 * `images`), and
 * PHOTOS a folder of class folders of JPEGs (loaderx-bench/python/photos.py writes one). */
#include <glob.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <turbojpeg.h>

typedef struct { unsigned char *bytes; size_t len; int w, h, mcu; double left, top, cw, ch; } Photo;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}
static unsigned long long state = 12345;
static double uniform(void) { /* xorshift64, a fixed seed: the same crops every run */
    state ^= state << 13, state ^= state >> 7, state ^= state << 17;
    return (state >> 11) * (1.0 / 9007199254740992.0);
}
static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: jpeg-scales PHOTOS [ROUNDS]\n"); return 2; }
    int rounds = argc > 2 ? atoi(argv[2]) : 11, ow = 224, oh = 224;
    if (rounds < 1 || rounds > 1000) { fprintf(stderr, "jpeg-scales: ROUNDS 1 to 1000\n"); return 2; }
    char pattern[4096];
    snprintf(pattern, sizeof pattern, "%s/*/*.jpg", argv[1]);
    glob_t files;
    if (glob(pattern, 0, NULL, &files) != 0 || files.gl_pathc == 0) {
        fprintf(stderr, "jpeg-scales: no %s\n", pattern);
        return 1;
    }
    int n = (int)files.gl_pathc;
    Photo *photos = calloc(n, sizeof(Photo));
    tjhandle tj = tj3Init(TJINIT_DECOMPRESS);
    for (int i = 0; i < n; i++) {
        Photo *p = &photos[i];
        FILE *f = fopen(files.gl_pathv[i], "rb");
        if (!f) { perror(files.gl_pathv[i]); return 1; }
        fseek(f, 0, SEEK_END), p->len = ftell(f), fseek(f, 0, SEEK_SET);
        p->bytes = malloc(p->len);
        if (fread(p->bytes, 1, p->len, f) != p->len) { perror(files.gl_pathv[i]); return 1; }
        fclose(f);
        if (tj3DecompressHeader(tj, p->bytes, p->len) != 0) { fprintf(stderr, "%s: %s\n", files.gl_pathv[i], tj3GetErrorStr(tj)); return 1; }
        p->w = tj3Get(tj, TJPARAM_JPEGWIDTH), p->h = tj3Get(tj, TJPARAM_JPEGHEIGHT);
        p->mcu = tjMCUWidth[tj3Get(tj, TJPARAM_SUBSAMP)];
        double W = p->w, H = p->h;
        int found = 0;
        for (int k = 0; k < 10 && !found; k++) {
            double area = W * H * (0.08 + 0.92 * uniform());
            double ratio = exp(log(3. / 4) + (log(4. / 3) - log(3. / 4)) * uniform());
            double cw = round(sqrt(area * ratio)), ch = round(sqrt(area / ratio));
            if (cw > 0 && cw <= W && ch > 0 && ch <= H) {
                p->cw = cw, p->ch = ch, p->left = floor(uniform() * (W - cw + 1)), p->top = floor(uniform() * (H - ch + 1));
                found = 1;
            }
        }
        if (!found) p->cw = p->ch = fmin(W, H), p->left = (W - p->cw) / 2, p->top = (H - p->ch) / 2;
    }
    unsigned char *out = malloc((size_t)8192 * 8192 * 3);
    double *times[3];
    for (int way = 0; way < 3; way++) times[way] = calloc(rounds, sizeof(double));
    long scales[3][9] = {{0}};
    double pixels[3] = {0};
    for (int r = 0; r < rounds; r++) {
        for (int way = 0; way < 3; way++) {
            double t0 = now();
            for (int i = 0; i < n; i++) {
                Photo *p = &photos[i];
                tj3DecompressHeader(tj, p->bytes, p->len);
                int num = 8;
                if (way == 1)
                    while (num > 1 && p->cw * (num / 2) / 8.0 >= ow && p->ch * (num / 2) / 8.0 >= oh) num /= 2;
                if (way == 2)
                    while (num > 1 && p->cw * (num - 1) / 8.0 >= ow && p->ch * (num - 1) / 8.0 >= oh) num -= 1;
                int g = num, d = 8;
                while (g % 2 == 0 && d % 2 == 0) g /= 2, d /= 2;
                tjscalingfactor factor = {g, d};
                tjregion region = TJUNCROPPED;
                if (way > 0) { /* the crop's pixels at this scale and decode.rs's margin */
                    double s = num / 8.0;
                    int sw = (p->w * num + 7) / 8, sh = (p->h * num + 7) / 8, mcu = (p->mcu * num + 7) / 8;
                    int mx = (int)ceil(p->cw * s / ow) + 2, my = (int)ceil(p->ch * s / oh) + 1;
                    int x0 = (int)fmin(fmax(floor(p->left * s) - mx, 0), sw - 1) / mcu * mcu;
                    int y0 = (int)fmin(fmax(floor(p->top * s) - my, 0), sh - 1);
                    int x1 = (int)fmax(fmin(ceil((p->left + p->cw) * s) + mx, sw), x0 + 1);
                    int y1 = (int)fmax(fmin(ceil((p->top + p->ch) * s) + my, sh), y0 + 1);
                    region = (tjregion){x0, y0, x1 - x0, y1 - y0};
                }
                if (tj3SetScalingFactor(tj, factor) || tj3SetCroppingRegion(tj, region) ||
                    tj3Decompress8(tj, p->bytes, p->len, out, 0, TJPF_RGB)) {
                    fprintf(stderr, "%s: %s\n", files.gl_pathv[i], tj3GetErrorStr(tj));
                    return 1;
                }
                if (r == 0) {
                    scales[way][num]++;
                    pixels[way] += way ? (double)region.w * region.h : (double)p->w * p->h;
                }
            }
            times[way][r] = (now() - t0) * 1e3 / n;
        }
    }
    const char *names[3] = {"whole", "pow2", "eighth"};
    printf("%d photographs, %d rounds, median ms per image (pixels decoded per image; scales M/8 used)\n", n, rounds);
    for (int way = 0; way < 3; way++) {
        qsort(times[way], rounds, sizeof(double), by_value);
        printf("%-7s %.3f ms  %8.0f px ", names[way], times[way][rounds / 2], pixels[way] / n);
        for (int m = 1; m <= 8; m++) if (scales[way][m]) printf(" %d/8:%ld", m, scales[way][m]);
        printf("\n");
    }
    return 0;
}
