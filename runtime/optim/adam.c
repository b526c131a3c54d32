/*
 * adam.c - the CPU AdamW of tencache.h: torch.optim.AdamW's update, float
 * for float, over fp32 master weights and moments, split over a small
 * persistent thread pool. An AVX-512 kernel handles 16 elements at a time
 * (where the CPU has AVX-512F/BW/VL), an AVX2/FMA/F16C kernel 8; the scalar
 * code does the tails and older CPUs. All three give the same bits (fma()
 * where torch fuses, nothing fused elsewhere).
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* only the FMAs written as fma() may be fused: torch fuses exactly those */
#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#else
#pragma GCC optimize("fp-contract=off")
#endif

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define TC_ADAM_X86 1
#endif

#define ADAM_MAX_THREADS	32	/* default cap: the update is memory bound */
#define ADAM_MAX_THREADS_SET	256
#define ADAM_MIN_PER_THREAD	32768	/* elements; fewer run in the caller */
#define ADAM_SLICE_ALIGN	64	/* slice boundaries, in elements */

enum { ISA_SCALAR, ISA_AVX2, ISA_AVX512 };

/* what one update needs, the scalars already in float as torch has them */
struct adam_job {
	float *p, *m, *v;
	const void *g;
	void *out;
	unsigned gtype, otype;
	int decay, small;	/* weight decay on; |lerp weight| < 0.5 */
	float decay_mul, w, w1, beta2, one_minus_beta2, bc2_sqrt, eps, neg_step;
	uint64_t n;
	unsigned parts;		/* slices this job is split into */
};

struct tencache_adam {
	pthread_mutex_t call_lock;	/* one step at a time */
	pthread_mutex_t lock;		/* guards gen, busy, stop */
	pthread_cond_t go, done;
	pthread_t *tids;
	unsigned nthreads;		/* the caller's included */
	unsigned started;		/* workers running */
	uint64_t gen;
	unsigned busy;
	int stop;
	int isa;			/* ISA_*: the kernel steps run */
	struct adam_job job;
};

/* ---- conversions (round to nearest even, as c10::Half / c10::BFloat16) --- */

static inline uint32_t f2u(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	return u;
}

static inline float u2f(uint32_t u)
{
	float f;

	memcpy(&f, &u, 4);
	return f;
}

static inline float bf16_to_f32(uint16_t h)
{
	return u2f((uint32_t)h << 16);
}

static inline uint16_t f32_to_bf16(float f)
{
	uint32_t u = f2u(f);

	if (f != f)
		return 0x7fc0;
	return (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}

static inline float fp16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16;
	uint32_t em = h & 0x7fff;

	if (em >= 0x7c00)		/* inf, NaN (payload kept) */
		return u2f(sign | 0x7f800000 | ((em & 0x3ff) << 13));
	if (em >= 0x0400)		/* normal */
		return u2f(sign | ((em << 13) + ((127 - 15) << 23)));
	/* subnormal or zero: em * 2^-24, exact */
	return u2f(sign | f2u((float)em * 0x1p-24f));
}

static inline uint16_t f32_to_fp16(float f)
{
	uint32_t u = f2u(f);
	uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
	uint32_t a = u & 0x7fffffff;

	if (a > 0x7f800000)		/* NaN */
		return sign | 0x7e00;
	if (a >= 0x47800000)		/* >= 65536: inf (65520 and up round there too) */
		return sign | 0x7c00;
	if (a >= 0x38800000) {		/* normal half: >= 2^-14 */
		uint32_t r = a + ((uint32_t)(15 - 127) << 23) + 0xfff + ((a >> 13) & 1);

		return sign | (uint16_t)(r >> 13);	/* a carry into inf is right */
	}
	/* subnormal half: the FPU rounds to nearest even when adding 0.5 */
	return sign | (uint16_t)(f2u(u2f(a) + 0.5f) - f2u(0.5f));
}

/* ---- the update, one element (also the tails of the SIMD kernel) ------- */

static inline float load_grad(const struct adam_job *j, uint64_t i)
{
	switch (j->gtype) {
	case TENCACHE_DTYPE_FP16:
		return fp16_to_f32(((const uint16_t *)j->g)[i]);
	case TENCACHE_DTYPE_BF16:
		return bf16_to_f32(((const uint16_t *)j->g)[i]);
	default:
		return ((const float *)j->g)[i];
	}
}

static inline void store_out(const struct adam_job *j, uint64_t i, float x)
{
	switch (j->otype) {
	case TENCACHE_DTYPE_FP16:
		((uint16_t *)j->out)[i] = f32_to_fp16(x);
		break;
	case TENCACHE_DTYPE_BF16:
		((uint16_t *)j->out)[i] = f32_to_bf16(x);
		break;
	default:
		((float *)j->out)[i] = x;
	}
}

static inline void adam_one(const struct adam_job *j, uint64_t i)
{
	float g = load_grad(j, i), p = j->p[i], m = j->m[i], v = j->v[i], d;

	if (j->decay)
		p = p * j->decay_mul;
	d = g - m;
	m = j->small ? fmaf(j->w, d, m) : fmaf(j->w1, d, g);
	v = v * j->beta2;
	v = fmaf(j->one_minus_beta2 * g, g, v);
	d = sqrtf(v) / j->bc2_sqrt + j->eps;
	p = p + (j->neg_step * m) / d;
	j->p[i] = p;
	j->m[i] = m;
	j->v[i] = v;
	if (j->out)
		store_out(j, i, p);
}

static void adam_span_scalar(const struct adam_job *j, uint64_t lo, uint64_t hi)
{
	for (uint64_t i = lo; i < hi; i++)
		adam_one(j, i);
}

/* ---- AVX2 + FMA + F16C ---------------------------------------------------- */

#ifdef TC_ADAM_X86
#define AVX2_TARGET __attribute__((target("avx2,fma,f16c")))

AVX2_TARGET static inline __m256 avx2_load_grad(const struct adam_job *j, uint64_t i)
{
	__m128i h;

	switch (j->gtype) {
	case TENCACHE_DTYPE_FP16:
		h = _mm_loadu_si128((const __m128i *)((const uint16_t *)j->g + i));
		return _mm256_cvtph_ps(h);	/* exact, NaN payload kept */
	case TENCACHE_DTYPE_BF16:
		h = _mm_loadu_si128((const __m128i *)((const uint16_t *)j->g + i));
		return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
	default:
		return _mm256_loadu_ps((const float *)j->g + i);
	}
}

/* 8 x u32 holding 16-bit values -> 8 x u16 */
AVX2_TARGET static inline __m128i avx2_pack16(__m256i x)
{
	return _mm_packus_epi32(_mm256_castsi256_si128(x), _mm256_extracti128_si256(x, 1));
}

AVX2_TARGET static inline void avx2_store_out(const struct adam_job *j, uint64_t i, __m256 x)
{
	__m256i u = _mm256_castps_si256(x);
	__m256 nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
	__m128i r, nanmask = _mm_packs_epi32(_mm256_castsi256_si128(_mm256_castps_si256(nan)),
					     _mm256_extracti128_si256(_mm256_castps_si256(nan), 1));

	switch (j->otype) {
	case TENCACHE_DTYPE_FP16: {
		/* hardware RNE; NaN made 0x7e00 | sign as the scalar code does */
		__m128i sign = avx2_pack16(_mm256_and_si256(_mm256_srli_epi32(u, 16),
							    _mm256_set1_epi32(0x8000)));

		r = _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
		r = _mm_blendv_epi8(r, _mm_or_si128(sign, _mm_set1_epi16(0x7e00)), nanmask);
		_mm_storeu_si128((__m128i *)((uint16_t *)j->out + i), r);
		break;
	}
	case TENCACHE_DTYPE_BF16: {
		__m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
		__m256i t = _mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), lsb);

		r = avx2_pack16(_mm256_srli_epi32(t, 16));
		r = _mm_blendv_epi8(r, _mm_set1_epi16(0x7fc0), nanmask);
		_mm_storeu_si128((__m128i *)((uint16_t *)j->out + i), r);
		break;
	}
	default:
		_mm256_storeu_ps((float *)j->out + i, x);
	}
}

AVX2_TARGET static void adam_span_avx2(const struct adam_job *j, uint64_t lo, uint64_t hi)
{
	const __m256 decay_mul = _mm256_set1_ps(j->decay_mul), w = _mm256_set1_ps(j->w);
	const __m256 w1 = _mm256_set1_ps(j->w1), beta2 = _mm256_set1_ps(j->beta2);
	const __m256 omb2 = _mm256_set1_ps(j->one_minus_beta2), bc2 = _mm256_set1_ps(j->bc2_sqrt);
	const __m256 eps = _mm256_set1_ps(j->eps), neg_step = _mm256_set1_ps(j->neg_step);
	uint64_t i = lo;

	for (; i + 8 <= hi; i += 8) {
		__m256 g = avx2_load_grad(j, i), p = _mm256_loadu_ps(j->p + i);
		__m256 m = _mm256_loadu_ps(j->m + i), v = _mm256_loadu_ps(j->v + i), d;

		if (j->decay)
			p = _mm256_mul_ps(p, decay_mul);
		d = _mm256_sub_ps(g, m);
		m = j->small ? _mm256_fmadd_ps(w, d, m) : _mm256_fmadd_ps(w1, d, g);
		v = _mm256_mul_ps(v, beta2);
		v = _mm256_fmadd_ps(_mm256_mul_ps(omb2, g), g, v);
		d = _mm256_add_ps(_mm256_div_ps(_mm256_sqrt_ps(v), bc2), eps);
		p = _mm256_add_ps(p, _mm256_div_ps(_mm256_mul_ps(neg_step, m), d));
		_mm256_storeu_ps(j->p + i, p);
		_mm256_storeu_ps(j->m + i, m);
		_mm256_storeu_ps(j->v + i, v);
		if (j->out)
			avx2_store_out(j, i, p);
	}
	for (; i < hi; i++)
		adam_one(j, i);
}

/* ---- AVX-512 (F, BW, VL): 16 elements; the parameter copy streamed ------ */

#define AVX512_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))

AVX512_TARGET static inline __m512 avx512_load_grad(const struct adam_job *j, uint64_t i)
{
	__m256i h;

	switch (j->gtype) {
	case TENCACHE_DTYPE_FP16:
		h = _mm256_loadu_si256((const __m256i *)((const uint16_t *)j->g + i));
		return _mm512_cvtph_ps(h);
	case TENCACHE_DTYPE_BF16:
		h = _mm256_loadu_si256((const __m256i *)((const uint16_t *)j->g + i));
		return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
	default:
		return _mm512_loadu_ps((const float *)j->g + i);
	}
}

/*
 * The copy is only written here (the GPU reads it next, by DMA), so a
 * non-temporal store spares reading its lines for ownership: ~2 of the 30
 * bytes per element the update moves. j->out + i is vector-aligned.
 */
AVX512_TARGET static inline void avx512_store_out(const struct adam_job *j, uint64_t i, __m512 x)
{
	__m512i u = _mm512_castps_si512(x);
	__mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
	__m256i r;

	switch (j->otype) {
	case TENCACHE_DTYPE_FP16: {
		/* hardware RNE; NaN made 0x7e00 | sign as the scalar code does */
		__m256i sign = _mm512_cvtepi32_epi16(_mm512_and_si512(_mm512_srli_epi32(u, 16),
								      _mm512_set1_epi32(0x8000)));

		r = _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
		r = _mm256_mask_mov_epi16(r, nan, _mm256_or_si256(sign, _mm256_set1_epi16(0x7e00)));
		break;
	}
	case TENCACHE_DTYPE_BF16: {
		__m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
		__m512i t = _mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), lsb);

		r = _mm512_cvtepi32_epi16(_mm512_srli_epi32(t, 16));
		r = _mm256_mask_mov_epi16(r, nan, _mm256_set1_epi16(0x7fc0));
		break;
	}
	default:
		_mm512_stream_ps((float *)j->out + i, x);
		return;
	}
	_mm256_stream_si256((__m256i *)((uint16_t *)j->out + i), r);
}

AVX512_TARGET static void adam_span_avx512(const struct adam_job *j, uint64_t lo, uint64_t hi)
{
	const __m512 decay_mul = _mm512_set1_ps(j->decay_mul), w = _mm512_set1_ps(j->w);
	const __m512 w1 = _mm512_set1_ps(j->w1), beta2 = _mm512_set1_ps(j->beta2);
	const __m512 omb2 = _mm512_set1_ps(j->one_minus_beta2), bc2 = _mm512_set1_ps(j->bc2_sqrt);
	const __m512 eps = _mm512_set1_ps(j->eps), neg_step = _mm512_set1_ps(j->neg_step);
	uint64_t i = lo;

	if (j->out) {	/* scalar up to where the copy's vectors are aligned */
		unsigned esz = j->otype == TENCACHE_DTYPE_FP32 ? 4 : 2, vbytes = 16 * esz;
		uintptr_t at = (uintptr_t)j->out + i * esz;
		uint64_t head = (vbytes - at % vbytes) % vbytes / esz;

		for (; i < hi && head; i++, head--)
			adam_one(j, i);
	}
	for (; i + 16 <= hi; i += 16) {
		__m512 g = avx512_load_grad(j, i), p = _mm512_loadu_ps(j->p + i);
		__m512 m = _mm512_loadu_ps(j->m + i), v = _mm512_loadu_ps(j->v + i), d;

		if (j->decay)
			p = _mm512_mul_ps(p, decay_mul);
		d = _mm512_sub_ps(g, m);
		m = j->small ? _mm512_fmadd_ps(w, d, m) : _mm512_fmadd_ps(w1, d, g);
		v = _mm512_mul_ps(v, beta2);
		v = _mm512_fmadd_ps(_mm512_mul_ps(omb2, g), g, v);
		d = _mm512_add_ps(_mm512_div_ps(_mm512_sqrt_ps(v), bc2), eps);
		p = _mm512_add_ps(p, _mm512_div_ps(_mm512_mul_ps(neg_step, m), d));
		_mm512_storeu_ps(j->p + i, p);
		_mm512_storeu_ps(j->m + i, m);
		_mm512_storeu_ps(j->v + i, v);
		if (j->out)
			avx512_store_out(j, i, p);
	}
	for (; i < hi; i++)
		adam_one(j, i);
	/* the streamed stores are weakly ordered: visible before "done" is */
	if (j->out)
		_mm_sfence();
}

static int cpu_isa(void)
{
	__builtin_cpu_init();
	if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma") ||
	    !__builtin_cpu_supports("f16c"))
		return ISA_SCALAR;
	if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
	    __builtin_cpu_supports("avx512vl"))
		return ISA_AVX512;
	return ISA_AVX2;
}
#else
static int cpu_isa(void)
{
	return ISA_SCALAR;
}
#endif

/* ---- the pool ---------------------------------------------------------- */

static void run_part(struct tencache_adam *a, unsigned k)
{
	const struct adam_job *j = &a->job;
	uint64_t per, lo, hi;

	if (k >= j->parts)
		return;
	per = TC_ALIGN_UP((j->n + j->parts - 1) / j->parts, ADAM_SLICE_ALIGN);
	lo = (uint64_t)k * per;
	hi = lo + per < j->n ? lo + per : j->n;
	if (lo >= hi)
		return;
#ifdef TC_ADAM_X86
	if (a->isa == ISA_AVX512) {
		adam_span_avx512(j, lo, hi);
		return;
	}
	if (a->isa == ISA_AVX2) {
		adam_span_avx2(j, lo, hi);
		return;
	}
#endif
	adam_span_scalar(j, lo, hi);
}

struct worker_arg {
	struct tencache_adam *a;
	unsigned k;
};

static void *worker_main(void *arg)
{
	struct worker_arg wa = *(struct worker_arg *)arg;
	struct tencache_adam *a = wa.a;
	uint64_t seen = 0;

	free(arg);
	for (;;) {
		pthread_mutex_lock(&a->lock);
		while (a->gen == seen && !a->stop)
			pthread_cond_wait(&a->go, &a->lock);
		if (a->stop) {
			pthread_mutex_unlock(&a->lock);
			return NULL;
		}
		seen = a->gen;
		pthread_mutex_unlock(&a->lock);
		run_part(a, wa.k);
		pthread_mutex_lock(&a->lock);
		if (--a->busy == 0)
			pthread_cond_signal(&a->done);
		pthread_mutex_unlock(&a->lock);
	}
}

static unsigned default_threads(void)
{
	cpu_set_t set;
	int n;

	if (sched_getaffinity(0, sizeof(set), &set))
		return 1;
	n = CPU_COUNT(&set);
	if (n < 1)
		return 1;
	return n > ADAM_MAX_THREADS ? ADAM_MAX_THREADS : (unsigned)n;
}

static void stop_workers(struct tencache_adam *a)
{
	pthread_mutex_lock(&a->lock);
	a->stop = 1;
	pthread_cond_broadcast(&a->go);
	pthread_mutex_unlock(&a->lock);
	for (unsigned i = 0; i < a->started; i++)
		pthread_join(a->tids[i], NULL);
	a->started = 0;
}

int tencache_adam_create(struct tencache_adam **ap, const struct tencache_adam_params *p)
{
	struct tencache_adam_params dp = { 0 };
	struct tencache_adam *a;
	int ret = 0;

	if (!ap)
		return -EINVAL;
	if (!p)
		p = &dp;
	for (unsigned i = 0; i < sizeof(p->__reserved) / sizeof(p->__reserved[0]); i++)
		if (p->__reserved[i])
			return -EINVAL;
	if ((p->flags & ~(TENCACHE_ADAM_F_SCALAR | TENCACHE_ADAM_F_NO_AVX512)) ||
	    p->threads > ADAM_MAX_THREADS_SET)
		return -EINVAL;
	a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	a->nthreads = p->threads ? p->threads : default_threads();
	a->isa = p->flags & TENCACHE_ADAM_F_SCALAR ? ISA_SCALAR : cpu_isa();
	if (a->isa == ISA_AVX512 && (p->flags & TENCACHE_ADAM_F_NO_AVX512))
		a->isa = ISA_AVX2;
	pthread_mutex_init(&a->call_lock, NULL);
	pthread_mutex_init(&a->lock, NULL);
	pthread_cond_init(&a->go, NULL);
	pthread_cond_init(&a->done, NULL);
	if (a->nthreads > 1) {
		a->tids = calloc(a->nthreads - 1, sizeof(*a->tids));
		if (!a->tids) {
			ret = -ENOMEM;
			goto err_free;
		}
	}
	for (unsigned k = 1; k < a->nthreads; k++) {
		struct worker_arg *wa = malloc(sizeof(*wa));

		if (!wa) {
			ret = -ENOMEM;
			goto err_stop;
		}
		*wa = (struct worker_arg){ a, k };
		ret = -pthread_create(&a->tids[a->started], NULL, worker_main, wa);
		if (ret) {
			free(wa);
			goto err_stop;
		}
		a->started++;
	}
	*ap = a;
	return 0;

err_stop:
	stop_workers(a);
err_free:
	free(a->tids);
	pthread_cond_destroy(&a->done);
	pthread_cond_destroy(&a->go);
	pthread_mutex_destroy(&a->lock);
	pthread_mutex_destroy(&a->call_lock);
	free(a);
	return ret;
}

void tencache_adam_destroy(struct tencache_adam *a)
{
	if (!a)
		return;
	stop_workers(a);
	free(a->tids);
	pthread_cond_destroy(&a->done);
	pthread_cond_destroy(&a->go);
	pthread_mutex_destroy(&a->lock);
	pthread_mutex_destroy(&a->call_lock);
	free(a);
}

int tencache_adam_threads(struct tencache_adam *a)
{
	return a ? (int)a->nthreads : -EINVAL;
}

const char *tencache_adam_kernel(struct tencache_adam *a)
{
	static const char *const name[] = { "scalar", "avx2", "avx512" };

	return a ? name[a->isa] : NULL;
}

static int bad_hparams(const struct tencache_adam_hparams *h)
{
	/* torch.optim.AdamW's checks; the negations also catch NaN */
	return !(h->lr >= 0.0) || !(h->eps >= 0.0) || !(h->beta1 >= 0.0 && h->beta1 < 1.0) ||
	       !(h->beta2 >= 0.0 && h->beta2 < 1.0) || !(h->weight_decay >= 0.0) ||
	       !isfinite(h->lr) || !isfinite(h->eps) || !isfinite(h->weight_decay) ||
	       h->step == 0 || h->__reserved[0] || h->__reserved[1];
}

static int bad_tensor(const struct tencache_adam_tensor *t)
{
	uintptr_t gal, pal;

	if (t->__reserved[0] || t->__reserved[1] || t->grad_dtype > TENCACHE_DTYPE_BF16 ||
	    (t->param && t->param_dtype > TENCACHE_DTYPE_BF16))
		return 1;
	if (!t->numel)
		return 0;
	if (!t->master || !t->exp_avg || !t->exp_avg_sq || !t->grad)
		return 1;
	if (t->numel > UINT64_MAX / 4)
		return 1;
	gal = t->grad_dtype == TENCACHE_DTYPE_FP32 ? 4 : 2;
	pal = t->param_dtype == TENCACHE_DTYPE_FP32 ? 4 : 2;
	if (((uintptr_t)t->master | (uintptr_t)t->exp_avg | (uintptr_t)t->exp_avg_sq) & 3 ||
	    (uintptr_t)t->grad & (gal - 1) || (t->param && (uintptr_t)t->param & (pal - 1)))
		return 1;
	/* the three state arrays are distinct */
	return t->master == t->exp_avg || t->master == t->exp_avg_sq ||
	       t->exp_avg == t->exp_avg_sq;
}

int tencache_adam_step(struct tencache_adam *a, const struct tencache_adam_hparams *h,
		       const struct tencache_adam_tensor *t)
{
	struct adam_job *j;
	double bc1, bc2, step;
	unsigned parts;

	if (!a || !h || !t || bad_hparams(h) || bad_tensor(t))
		return -EINVAL;
	if (!t->numel)
		return 0;
	pthread_mutex_lock(&a->call_lock);
	j = &a->job;
	/* torch: Python floats (double), cast to float where a kernel takes them */
	step = (double)h->step;
	bc1 = 1.0 - pow(h->beta1, step);
	bc2 = 1.0 - pow(h->beta2, step);
	*j = (struct adam_job){
		.p = t->master, .m = t->exp_avg, .v = t->exp_avg_sq, .g = t->grad,
		.out = t->param, .gtype = t->grad_dtype, .otype = t->param_dtype,
		.decay = h->weight_decay != 0.0,
		.decay_mul = (float)(1.0 - h->lr * h->weight_decay),
		.w = (float)(1.0 - h->beta1),
		.beta2 = (float)h->beta2,
		.one_minus_beta2 = (float)(1.0 - h->beta2),
		.bc2_sqrt = (float)pow(bc2, 0.5),
		.eps = (float)h->eps,
		.neg_step = (float)-(h->lr / bc1),
		.n = t->numel,
	};
	j->small = fabsf(j->w) < 0.5f;
	j->w1 = j->w - 1.0f;
	parts = (unsigned)((t->numel + ADAM_MIN_PER_THREAD - 1) / ADAM_MIN_PER_THREAD);
	j->parts = parts < a->nthreads ? parts : a->nthreads;
	if (j->parts <= 1 || a->started + 1 < a->nthreads) {
		j->parts = 1;
		run_part(a, 0);
	} else {
		pthread_mutex_lock(&a->lock);
		a->busy = a->started;
		a->gen++;
		pthread_cond_broadcast(&a->go);
		pthread_mutex_unlock(&a->lock);
		run_part(a, 0);
		pthread_mutex_lock(&a->lock);
		while (a->busy)
			pthread_cond_wait(&a->done, &a->lock);
		pthread_mutex_unlock(&a->lock);
	}
	pthread_mutex_unlock(&a->call_lock);
	return 0;
}
