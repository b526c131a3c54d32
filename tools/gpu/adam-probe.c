/*
 * adam-probe.c - what limits the C AdamW on a host: its AVX2 kernel and
 * variants (non-temporal stores, software prefetch, AVX-512, no math) beside
 * plain memory bandwidth (read, copy), over threads and page sizes, in one
 * run, over four placements of the arrays. Exploration for
 * runtime/optim/adam.c, not part of the library (results/h200-adam-probe.txt).
 *   cc -O2 -pthread -o adam-probe tools/gpu/adam-probe.c -lm && ./adam-probe
 * QUICK=1 runs 1 and 4 threads only.
 */
#define _GNU_SOURCE
#include <immintrin.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define N	(64ull << 20)	/* params */

static float *P, *M, *V;
static uint16_t *G, *O;
static volatile double sink;

enum { K_ADAM_BLK, K_ADAM, K_ADAM_NTO, K_ADAM_NTALL, K_ADAM_PF, K_ADAM512, K_ADAM512_NTO, K_NOMATH,
	K_READ, K_COPY, K_NR };
static const char *kname[K_NR] = { "adam-blocked", "adam", "adam+nt-out", "adam+nt-all", "adam+pf",
	"adam512", "adam512+nt-out", "nomath", "read", "copy" };
/* bytes per element for GB/s (adam: 28 moved + 2 read for ownership of O;
 * read: P and M; copy: M -> V, its read for ownership not counted) */
static const double kbytes[K_NR] = { 30, 30, 30, 30, 30, 30, 30, 30, 8, 8 };

struct job { int k; uint64_t lo, hi; double acc; };

#define AVX2 __attribute__((target("avx2,fma,f16c")))
#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,fma,f16c")))

static const float w = 0.1f, beta2 = 0.999f, omb2 = 0.001f, bc2 = 0.97f, eps = 1e-8f,
	neg_step = -1e-4f, decay_mul = 0.9999f;

AVX2 static inline __m128i bf16(__m256 x)
{
	__m256i u = _mm256_castps_si256(x);
	__m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
	__m256i t = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), lsb), 16);

	return _mm_packus_epi32(_mm256_castsi256_si128(t), _mm256_extracti128_si256(t, 1));
}

AVX2 static void adam2(int k, uint64_t lo, uint64_t hi)
{
	const __m256 vw = _mm256_set1_ps(w), vb2 = _mm256_set1_ps(beta2), vo = _mm256_set1_ps(omb2);
	const __m256 vbc = _mm256_set1_ps(bc2), ve = _mm256_set1_ps(eps), vs = _mm256_set1_ps(neg_step);
	const __m256 vd = _mm256_set1_ps(decay_mul);

	for (uint64_t i = lo; i < hi; i += 8) {
		__m128i h = _mm_load_si128((const __m128i *)(G + i));
		__m256 g = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
		__m256 p = _mm256_load_ps(P + i), m = _mm256_load_ps(M + i), v = _mm256_load_ps(V + i), d;

		if (k == K_ADAM_PF) {
			_mm_prefetch((const char *)(P + i + 512), _MM_HINT_T0);
			_mm_prefetch((const char *)(M + i + 512), _MM_HINT_T0);
			_mm_prefetch((const char *)(V + i + 512), _MM_HINT_T0);
			if (!(i & 31))
				_mm_prefetch((const char *)(G + i + 512), _MM_HINT_T0);
		}
		if (k == K_NOMATH) {
			p = _mm256_add_ps(p, g);
			m = _mm256_add_ps(m, g);
			v = _mm256_add_ps(v, g);
		} else {
			p = _mm256_mul_ps(p, vd);
			d = _mm256_sub_ps(g, m);
			m = _mm256_fmadd_ps(vw, d, m);
			v = _mm256_mul_ps(v, vb2);
			v = _mm256_fmadd_ps(_mm256_mul_ps(vo, g), g, v);
			d = _mm256_add_ps(_mm256_div_ps(_mm256_sqrt_ps(v), vbc), ve);
			p = _mm256_add_ps(p, _mm256_div_ps(_mm256_mul_ps(vs, m), d));
		}
		if (k == K_ADAM_NTALL) {
			_mm256_stream_ps(P + i, p);
			_mm256_stream_ps(M + i, m);
			_mm256_stream_ps(V + i, v);
		} else {
			_mm256_store_ps(P + i, p);
			_mm256_store_ps(M + i, m);
			_mm256_store_ps(V + i, v);
		}
		if (k == K_ADAM_NTO || k == K_ADAM_NTALL)
			_mm_stream_si128((__m128i *)(O + i), bf16(p));
		else
			_mm_store_si128((__m128i *)(O + i), bf16(p));
	}
}

/* per block: the bf16 grads to fp32 in L1 first, then the fp32 streams, then
 * the bf16 copies from the updated p (still in L1): 2- and 4-byte streams
 * never interleave */
#define BLK 512
AVX2 static void adam2_blk(uint64_t lo, uint64_t hi)
{
	const __m256 vw = _mm256_set1_ps(w), vb2 = _mm256_set1_ps(beta2), vo = _mm256_set1_ps(omb2);
	const __m256 vbc = _mm256_set1_ps(bc2), ve = _mm256_set1_ps(eps), vs = _mm256_set1_ps(neg_step);
	const __m256 vd = _mm256_set1_ps(decay_mul);
	float gb[BLK] __attribute__((aligned(64)));

	for (uint64_t b = lo; b < hi; b += BLK) {
		uint64_t e = b + BLK < hi ? b + BLK : hi;

		for (uint64_t i = b; i < e; i += 8) {
			__m128i h = _mm_load_si128((const __m128i *)(G + i));

			_mm256_store_ps(gb + (i - b), _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)));
		}
		for (uint64_t i = b; i < e; i += 8) {
			__m256 g = _mm256_load_ps(gb + (i - b));
			__m256 p = _mm256_load_ps(P + i), m = _mm256_load_ps(M + i), v = _mm256_load_ps(V + i), d;

			p = _mm256_mul_ps(p, vd);
			d = _mm256_sub_ps(g, m);
			m = _mm256_fmadd_ps(vw, d, m);
			v = _mm256_mul_ps(v, vb2);
			v = _mm256_fmadd_ps(_mm256_mul_ps(vo, g), g, v);
			d = _mm256_add_ps(_mm256_div_ps(_mm256_sqrt_ps(v), vbc), ve);
			p = _mm256_add_ps(p, _mm256_div_ps(_mm256_mul_ps(vs, m), d));
			_mm256_store_ps(P + i, p);
			_mm256_store_ps(M + i, m);
			_mm256_store_ps(V + i, v);
		}
		for (uint64_t i = b; i < e; i += 8)
			_mm_store_si128((__m128i *)(O + i), bf16(_mm256_load_ps(P + i)));
	}
}

AVX512 static void adam512(int k, uint64_t lo, uint64_t hi)
{
	const __m512 vw = _mm512_set1_ps(w), vb2 = _mm512_set1_ps(beta2), vo = _mm512_set1_ps(omb2);
	const __m512 vbc = _mm512_set1_ps(bc2), ve = _mm512_set1_ps(eps), vs = _mm512_set1_ps(neg_step);
	const __m512 vd = _mm512_set1_ps(decay_mul);

	for (uint64_t i = lo; i < hi; i += 16) {
		__m256i h = _mm256_load_si256((const __m256i *)(G + i));
		__m512 g = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
		__m512 p = _mm512_load_ps(P + i), m = _mm512_load_ps(M + i), v = _mm512_load_ps(V + i), d;
		__m512i u, t;
		__m256i r;

		p = _mm512_mul_ps(p, vd);
		d = _mm512_sub_ps(g, m);
		m = _mm512_fmadd_ps(vw, d, m);
		v = _mm512_mul_ps(v, vb2);
		v = _mm512_fmadd_ps(_mm512_mul_ps(vo, g), g, v);
		d = _mm512_add_ps(_mm512_div_ps(_mm512_sqrt_ps(v), vbc), ve);
		p = _mm512_add_ps(p, _mm512_div_ps(_mm512_mul_ps(vs, m), d));
		_mm512_store_ps(P + i, p);
		_mm512_store_ps(M + i, m);
		_mm512_store_ps(V + i, v);
		u = _mm512_castps_si512(p);
		t = _mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)),
				     _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1)));
		r = _mm512_cvtepi32_epi16(_mm512_srli_epi32(t, 16));
		if (k == K_ADAM512_NTO)
			_mm256_stream_si256((__m256i *)(O + i), r);
		else
			_mm256_store_si256((__m256i *)(O + i), r);
	}
}

AVX2 static double readk(uint64_t lo, uint64_t hi)
{
	__m256 a = _mm256_setzero_ps(), b = a;

	for (uint64_t i = lo; i < hi; i += 8) {	/* P and M: 8 B per element */
		a = _mm256_add_ps(a, _mm256_load_ps(P + i));
		b = _mm256_add_ps(b, _mm256_load_ps(M + i));
	}
	a = _mm256_add_ps(a, b);
	return a[0] + a[7];
}

AVX2 static void copyk(uint64_t lo, uint64_t hi)	/* M -> V: 8 B per element */
{
	for (uint64_t i = lo; i < hi; i += 8)
		_mm256_store_ps(V + i, _mm256_load_ps(M + i));
}

static void *run(void *arg)
{
	struct job *j = arg;

	switch (j->k) {
	case K_ADAM_BLK: adam2_blk(j->lo, j->hi); break;
	case K_READ: j->acc = readk(j->lo, j->hi); break;
	case K_COPY: copyk(j->lo, j->hi); break;
	case K_ADAM512: case K_ADAM512_NTO: adam512(j->k, j->lo, j->hi); break;
	default: adam2(j->k, j->lo, j->hi);
	}
	if (j->k == K_ADAM_NTO || j->k == K_ADAM_NTALL || j->k == K_ADAM512_NTO)
		_mm_sfence();
	return NULL;
}

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

/* threads started per pass (as simple as it gets; ~20 us per thread) */
static double pass(int k, int nt)
{
	pthread_t tid[64];
	struct job js[64];
	uint64_t per = (N / nt + 63) & ~63ull;
	double t0 = now();

	for (int t = 0; t < nt; t++) {
		js[t] = (struct job){ .k = k, .lo = t * per, .hi = (t + 1) * per < N ? (t + 1) * per : N };
		pthread_create(&tid[t], NULL, run, &js[t]);
	}
	for (int t = 0; t < nt; t++) {
		pthread_join(tid[t], NULL);
		sink += js[t].acc;
	}
	return now() - t0;
}

/* One mapping holding P, M, V, G, O back to back (as a pool places a layer's
 * master, moments, grad and copy) at power-of-two distances, each array then
 * moved skew[k] bytes on. */
static char *base;
static size_t maplen;

static void layout(const size_t skew[5])
{
	size_t off = 0;
	void *a[5];
	const size_t sz[5] = { N * 4, N * 4, N * 4, N * 2, N * 2 };

	maplen = 16 * N + (5 << 16);
	base = mmap(NULL, maplen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (base == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	madvise(base, maplen, MADV_HUGEPAGE);
	memset(base, 0, maplen);
	for (int k = 0; k < 5; k++) {
		a[k] = base + off + skew[k];
		off += sz[k] + (skew[k] ? 65536 : 0);
	}
	P = a[0]; M = a[1]; V = a[2]; G = a[3]; O = a[4];
}

int main(int argc, char **argv)
{
	int threads[] = { 1, 4, 8, 11, 12, 14, 16 };
	unsigned nthr = getenv("QUICK") ? 2 : sizeof(threads) / sizeof(threads[0]);
	int avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");

	(void)argc; (void)argv;
	printf("adam-probe: %llu M params, avx512 %s; GB/s at 30 B/param for the adam kernels; "
	       "best of 5 passes; ns/param in ()\n", N >> 20, avx512 ? "yes" : "no");
	static const struct { const char *name; size_t skew[5]; } modes[] = {
		{ "back to back (power-of-two distances)", { 0, 0, 0, 0, 0 } },
		{ "pages apart (0, 4, 8, 12, 16 KiB on)", { 0, 4096, 8192, 12288, 16384 } },
		{ "768 B apart (0, 768, ... 3072 B on)", { 0, 768, 1536, 2304, 3072 } },
		{ "page + 768 B apart", { 0, 4096 + 768, 8192 + 1536, 12288 + 2304, 16384 + 3072 } },
	};

	for (unsigned mode = 0; mode < sizeof(modes) / sizeof(modes[0]); mode++) {
		layout(modes[mode].skew);
		for (uint64_t i = 0; i < N; i++) {
			V[i] = 1e-6f;
			G[i] = 0x3a83;	/* bf16 1e-3 */
		}
		printf("\nTHP; P, M, V, G, O %s\n%-15s", modes[mode].name, "kernel");
		for (unsigned t = 0; t < nthr; t++)
			printf(" %13d", threads[t]);
		printf("\n");
		for (int k = 0; k < K_NR; k++) {
			if ((k == K_ADAM512 || k == K_ADAM512_NTO) && !avx512)
				continue;
			printf("%-15s", kname[k]);
			for (unsigned t = 0; t < nthr; t++) {
				double best = 1e9;

				for (int r = 0; r < 5; r++) {
					double d = pass(k, threads[t]);

					best = d < best ? d : best;
				}
				printf(" %6.1f (%.3f)", kbytes[k] * N / best / 1e9, best / N * 1e9);
			}
			printf("\n");
			fflush(stdout);
		}
		munmap(base, maplen);
	}
	return 0;
}
