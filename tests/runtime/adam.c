/* adam.c - the CPU AdamW (tencache_adam_*): bit-exact against a scalar
 * reference written here (torch's float operation order, conversions done
 * independently with double arithmetic), and close to Adam in double; every
 * grad/param dtype, random sizes with odd tails, 1..N threads, SIMD and
 * scalar kernels, fp16/bf16 rounding over many float patterns, NaN and inf,
 * bad inputs. Prints the update throughput (ADAM_BENCH_N elements, default
 * 8M; 0 skips it). */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tencache.h"
#include "test.h"

static uint64_t rng = 88172645463325252ULL;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static float frand(float lo, float hi)
{
	return lo + (hi - lo) * (float)((rnd() >> 40) * 0x1p-24);
}

#define TC_T_ALIGN64(x) (((x) + 63) & ~(uint64_t)63)

static uint32_t f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* ---- reference conversions, by value (double), not by bit tricks ------- */

/* round |x| (finite, >= 0) to a float with mant_bits fraction bits and
 * minimum normal exponent emin (subnormals below), nearest even */
static double round_to(double a, int mant_bits, int emin)
{
	int e;

	if (a == 0)
		return 0;
	frexp(a, &e);
	e -= 1;				/* a in [2^e, 2^(e+1)) */
	if (e < emin)
		e = emin;
	return ldexp(nearbyint(ldexp(a, mant_bits - e)), e - mant_bits);
}

static uint16_t ref_fp16(float x)
{
	uint16_t sign = signbit(x) ? 0x8000 : 0;
	double r;
	int e;

	if (isnan(x))
		return sign | 0x7e00;
	r = round_to(fabs((double)x), 10, -14);
	if (r >= 65536.0)
		return sign | 0x7c00;
	if (r < 0x1p-14)
		return sign | (uint16_t)ldexp(r, 24);
	frexp(r, &e);
	e -= 1;
	return sign | (uint16_t)((e + 15) << 10) | (uint16_t)(ldexp(r, 10 - e) - 1024);
}

static uint16_t ref_bf16(float x)
{
	uint16_t sign = signbit(x) ? 0x8000 : 0;
	double r;
	int e;

	if (isnan(x))
		return 0x7fc0;
	if (isinf(x))
		return sign | 0x7f80;
	r = round_to(fabs((double)x), 7, -126);
	if (r >= 0x1p128)
		return sign | 0x7f80;
	if (r < 0x1p-126)
		return sign | (uint16_t)ldexp(r, 133);
	frexp(r, &e);
	e -= 1;
	return sign | (uint16_t)((e + 127) << 7) | (uint16_t)(ldexp(r, 7 - e) - 128);
}

static float ref_from_fp16(uint16_t h)
{
	int e = (h >> 10) & 31, m = h & 1023;
	float s = (h & 0x8000) ? -1.0f : 1.0f;

	if (e == 31)
		return m ? u2f(((uint32_t)(h & 0x8000) << 16) | 0x7f800000 | (m << 13)) : s * INFINITY;
	if (e == 0)
		return s * (float)ldexp(m, -24);
	return s * (float)ldexp(1024 + m, e - 25);
}

static float ref_from_bf16(uint16_t h)
{
	return u2f((uint32_t)h << 16);
}

/* ---- reference update: torch's _single_tensor_adam, float by float ------ */

struct hp { double lr, b1, b2, eps, wd; uint64_t step; };

static void ref_step(const struct hp *h, uint64_t n, float *p, float *m, float *v,
		     const float *g)
{
	double bc1 = 1 - pow(h->b1, (double)h->step), bc2 = 1 - pow(h->b2, (double)h->step);
	float decay = (float)(1 - h->lr * h->wd), w = (float)(1 - h->b1), b2 = (float)h->b2;
	float omb2 = (float)(1 - h->b2), bc2s = (float)pow(bc2, 0.5), eps = (float)h->eps;
	float neg_step = (float)-(h->lr / bc1);

	for (uint64_t i = 0; i < n; i++) {
		float pi = p[i], d, gs;

		if (h->wd != 0) {
			pi = pi * decay;		/* param.mul_(1 - lr * wd) */
		}
		d = g[i] - m[i];			/* exp_avg.lerp_(grad, 1 - beta1) */
		m[i] = fabsf(w) < 0.5f ? fmaf(w, d, m[i]) : fmaf(w - 1.0f, d, g[i]);
		v[i] = v[i] * b2;			/* exp_avg_sq.mul_(beta2) */
		gs = omb2 * g[i];			/* .addcmul_(g, g, 1 - beta2), fused */
		v[i] = fmaf(gs, g[i], v[i]);
		d = sqrtf(v[i]) / bc2s;			/* (sqrt() / bc2_sqrt).add_(eps) */
		d = d + eps;
		gs = neg_step * m[i];			/* addcdiv_(m, denom, -step_size) */
		p[i] = pi + gs / d;
	}
}

static int same_float(float a, float b)
{
	return (isnan(a) && isnan(b)) || f2u(a) == f2u(b);
}

static int same_half(uint16_t a, uint16_t b, int bf)
{
	int na = bf ? (a & 0x7fff) > 0x7f80 : (a & 0x7fff) > 0x7c00;
	int nb = bf ? (b & 0x7fff) > 0x7f80 : (b & 0x7fff) > 0x7c00;

	return (na && nb) || a == b;
}

static const char *dname(unsigned t)
{
	return t == TENCACHE_DTYPE_FP32 ? "fp32" : t == TENCACHE_DTYPE_FP16 ? "fp16" : "bf16";
}

/* random values with a few specials; grads in [-gs, gs] */
static void fill(float *x, uint64_t n, float lo, float hi, int specials)
{
	for (uint64_t i = 0; i < n; i++) {
		x[i] = frand(lo, hi);
		if (specials && rnd() % 97 == 0) {
			static const float sp[] = { NAN, INFINITY, -INFINITY, 0.0f, -0.0f,
						    1e-40f, 65504.0f, 1e30f };
			x[i] = sp[rnd() % 8];
		}
	}
}

/*
 * One random case: n elements, given dtypes, several steps; bit-exact. The
 * copy starts oshift elements past a 64-byte boundary (the AVX-512 kernel
 * streams it from the first vector-aligned element on).
 */
static int one_case(struct tencache_adam *a, uint64_t n, unsigned gt, unsigned pt, int out,
		    int specials, const struct hp *h0, int nsteps, unsigned oshift)
{
	float *p = malloc(n * 4), *m = malloc(n * 4), *v = malloc(n * 4);
	float *rp = malloc(n * 4), *rm = malloc(n * 4), *rv = malloc(n * 4);
	float *g = malloc(n * 4), *gr = malloc(n * 4);
	void *gb = malloc(n * 4), *obuf = aligned_alloc(64, TC_T_ALIGN64(n * 4 + 64));
	char *ob = (char *)obuf + oshift * (pt == TENCACHE_DTYPE_FP32 ? 4 : 2);
	struct hp h = *h0;
	int bad = 0;

	if (!p || !m || !v || !rp || !rm || !rv || !g || !gr || !gb || !obuf) {
		fprintf(stderr, "out of memory\n");
		exit(T_EXIT_FAIL);
	}
	fill(p, n, -1, 1, specials);
	fill(m, n, -0.01f, 0.01f, 0);
	fill(v, n, 0, 1e-4f, 0);
	memcpy(rp, p, n * 4);
	memcpy(rm, m, n * 4);
	memcpy(rv, v, n * 4);
	for (int s = 0; s < nsteps && !bad; s++) {
		struct tencache_adam_hparams hp = { .lr = h.lr, .beta1 = h.b1, .beta2 = h.b2,
						    .eps = h.eps, .weight_decay = h.wd, .step = h.step };
		struct tencache_adam_tensor t = { .master = p, .exp_avg = m, .exp_avg_sq = v,
						  .grad = gb, .grad_dtype = gt,
						  .param = out ? ob : NULL, .param_dtype = pt,
						  .numel = n };

		fill(g, n, -0.1f, 0.1f, specials);
		for (uint64_t i = 0; i < n; i++) {
			if (gt == TENCACHE_DTYPE_FP32) {
				((float *)gb)[i] = gr[i] = g[i];
			} else if (gt == TENCACHE_DTYPE_FP16) {
				((uint16_t *)gb)[i] = ref_fp16(g[i]);
				gr[i] = ref_from_fp16(((uint16_t *)gb)[i]);
			} else {
				((uint16_t *)gb)[i] = ref_bf16(g[i]);
				gr[i] = ref_from_bf16(((uint16_t *)gb)[i]);
			}
		}
		T_EQ(tencache_adam_step(a, &hp, &t), 0);
		ref_step(&h, n, rp, rm, rv, gr);
		for (uint64_t i = 0; i < n && !bad; i++) {
			int ok = same_float(p[i], rp[i]) && same_float(m[i], rm[i]) &&
				 same_float(v[i], rv[i]);

			if (ok && out) {
				if (pt == TENCACHE_DTYPE_FP32)
					ok = same_float(((float *)ob)[i], rp[i]);
				else if (pt == TENCACHE_DTYPE_FP16)
					ok = same_half(((uint16_t *)ob)[i], ref_fp16(rp[i]), 0);
				else
					ok = same_half(((uint16_t *)ob)[i], ref_bf16(rp[i]), 1);
			}
			if (!ok) {
				T_CHECK(0, "n %llu grad %s param %s step %d: element %llu: p %a/%a m %a/%a v %a/%a (g %a, copy %s)",
					(unsigned long long)n, dname(gt), out ? dname(pt) : "none", s,
					(unsigned long long)i, p[i], rp[i], m[i], rm[i], v[i], rv[i], gr[i],
					same_float(p[i], rp[i]) ? "differs" : "-");
				bad = 1;
			}
		}
		h.step++;
	}
	free(p); free(m); free(v); free(rp); free(rm); free(rv);
	free(g); free(gr); free(gb); free(obuf);
	return bad;
}

/* The reference is Adam: close to the same update done in double. */
static void against_double(void)
{
	enum { N = 4099 };
	static float p[N], m[N], v[N], g[N];
	static double dp[N], dm[N], dv[N];
	struct hp h = { 1e-3, 0.9, 0.999, 1e-8, 0.01, 1 };
	double worst = 0;

	for (int i = 0; i < N; i++) {
		dp[i] = p[i] = frand(-1, 1);
		dm[i] = m[i] = 0;
		dv[i] = v[i] = 0;
	}
	for (int s = 1; s <= 30; s++, h.step++) {
		double bc1 = 1 - pow(h.b1, s), bc2 = 1 - pow(h.b2, s);

		for (int i = 0; i < N; i++)
			g[i] = frand(-0.1f, 0.1f);
		ref_step(&h, N, p, m, v, g);
		for (int i = 0; i < N; i++) {
			dp[i] *= 1 - h.lr * h.wd;
			dm[i] = h.b1 * dm[i] + (1 - h.b1) * g[i];
			dv[i] = h.b2 * dv[i] + (1 - h.b2) * (double)g[i] * g[i];
			dp[i] -= h.lr / bc1 * dm[i] / (sqrt(dv[i]) / sqrt(bc2) + h.eps);
		}
	}
	for (int i = 0; i < N; i++)
		worst = fmax(worst, fabs(p[i] - dp[i]));
	/* 30 steps of lr 1e-3: float rounding of |p| <= 1 is ~1e-7 per step */
	T_CHECK(worst < 1e-5, "float reference is %g away from Adam in double", worst);
}

/* Conversions of the parameter copy over many float bit patterns. */
static void conversions(struct tencache_adam *a)
{
	const uint64_t n = 1 << 22;
	float *p = malloc(n * 4), *m = calloc(n, 4), *v = calloc(n, 4), *g = calloc(n, 4);
	uint16_t *o = malloc(n * 2);
	/* lr 0, zero grads and moments: p unchanged (p + -0), then converted */
	struct tencache_adam_hparams hp = { .lr = 0, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8,
					    .step = 1 };
	unsigned fails[2] = { 0, 0 };

	if (!p || !m || !v || !g || !o)
		exit(T_EXIT_FAIL);
	for (int bf = 0; bf < 2; bf++) {
		struct tencache_adam_tensor t = { .master = p, .exp_avg = m, .exp_avg_sq = v,
						  .grad = g, .param = o, .numel = n,
						  .param_dtype = bf ? TENCACHE_DTYPE_BF16 :
								      TENCACHE_DTYPE_FP16 };

		for (uint64_t i = 0; i < n; i++) {
			/* every 1024th pattern, with low bits that hit ties and near-ties */
			static const uint32_t low[] = { 0, 1, 0xfff, 0x1000, 0x1001, 0x2000, 0x7fff,
							0x8000, 0x8001, 0x18000, 0x3ff };
			uint32_t u = (uint32_t)(i << 10) | low[i % 11];

			p[i] = u2f(u);
		}
		T_EQ(tencache_adam_step(a, &hp, &t), 0);
		for (uint64_t i = 0; i < n; i++) {
			uint16_t want = bf ? ref_bf16(p[i]) : ref_fp16(p[i]);

			if (!same_half(o[i], want, bf) && fails[bf]++ < 5)
				T_CHECK(0, "%s(%a = 0x%08x) = 0x%04x, want 0x%04x", bf ? "bf16" : "fp16",
					p[i], f2u(p[i]), o[i], want);
		}
		/* NaN -> the canonical quiet NaN with the sign (fp16) or 0x7fc0 (bf16) */
		for (uint64_t i = 0; i < n; i++)
			if (isnan(p[i]) && o[i] != (bf ? 0x7fc0 : (uint16_t)((f2u(p[i]) >> 16 & 0x8000) | 0x7e00)) &&
			    fails[bf]++ < 5)
				T_CHECK(0, "NaN 0x%08x -> 0x%04x", f2u(p[i]), o[i]);
	}
	/* a few by hand */
	{
		static const struct { float x; uint16_t h, b; } c[] = {
			{ 1.0f, 0x3c00, 0x3f80 }, { -2.0f, 0xc000, 0xc000 },
			{ 65504.0f, 0x7bff, 0x4780 }, { 65280.0f, 0x7bf8, 0x477f }, { 65519.99f, 0x7bff, 0x4780 },
			{ 65520.0f, 0x7c00, 0x4780 }, { 0x1p-24f, 0x0001, 0x3380 },
			{ 0x1p-25f, 0x0000, 0x3300 }, { 0x1.8p-25f, 0x0001, 0x3340 },
			{ 1.0f + 0x1p-8f, 0x3c04, 0x3f80 },	/* bf16 tie -> even */
			{ 1.0f + 0x3p-8f, 0x3c0c, 0x3f82 },	/* bf16 tie -> even (up) */
			{ 1.0f + 0x1p-11f, 0x3c00, 0x3f80 },	/* fp16 tie -> even */
			{ 1.0f + 0x3p-11f, 0x3c02, 0x3f80 },	/* fp16 tie -> even (up) */
			{ INFINITY, 0x7c00, 0x7f80 }, { -INFINITY, 0xfc00, 0xff80 },
			{ -0.0f, 0x8000, 0x8000 }, { 3.4e38f, 0x7c00, 0x7f80 },
		};
		for (unsigned k = 0; k < sizeof(c) / sizeof(c[0]); k++) {
			T_EQ(ref_fp16(c[k].x), c[k].h);
			T_EQ(ref_bf16(c[k].x), c[k].b);
			for (int bf = 0; bf < 2; bf++) {
				struct tencache_adam_tensor t = { .master = p, .exp_avg = m,
					.exp_avg_sq = v, .grad = g, .param = o, .numel = 1,
					.param_dtype = bf ? TENCACHE_DTYPE_BF16 : TENCACHE_DTYPE_FP16 };

				p[0] = c[k].x;
				m[0] = v[0] = g[0] = 0;
				T_EQ(tencache_adam_step(a, &hp, &t), 0);
				T_CHECK(o[0] == (bf ? c[k].b : c[k].h), "%a -> 0x%04x", c[k].x, o[0]);
			}
		}
	}
	/* every fp16 and bf16 gradient converts exactly */
	for (uint32_t h = 0; h < 65536; h++) {
		float r = ref_from_fp16((uint16_t)h);
		float b = ref_from_bf16((uint16_t)h);

		T_CHECK(isnan(r) || ref_fp16(r) == h, "fp16 0x%04x round trip", h);
		T_CHECK(isnan(b) || ref_bf16(b) == h, "bf16 0x%04x round trip", h);
		(void)b;
	}
	free(p); free(m); free(v); free(g); free(o);
}

static void bad_input(void)
{
	struct tencache_adam_params ap = { 0 };
	struct tencache_adam *a;
	float x[4] = { 0 }, y[4] = { 0 }, z[4] = { 0 }, w[5] = { 0 };
	struct tencache_adam_hparams h = { .lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999,
					   .eps = 1e-8, .weight_decay = 0.01, .step = 1 };
	struct tencache_adam_tensor t = { .master = x, .exp_avg = y, .exp_avg_sq = z,
					  .grad = w, .numel = 4 };
	struct tencache_adam_tensor bt;
	struct tencache_adam_hparams bh;

	T_EQ(tencache_adam_create(NULL, NULL), -EINVAL);
	ap.flags = 0x80;
	T_EQ(tencache_adam_create(&a, &ap), -EINVAL);
	ap.flags = 1u << 2;	/* the first unknown flag */
	T_EQ(tencache_adam_create(&a, &ap), -EINVAL);
	ap.flags = 0;
	ap.threads = 100000;
	T_EQ(tencache_adam_create(&a, &ap), -EINVAL);
	ap.threads = 2;
	ap.__reserved[1] = 1;
	T_EQ(tencache_adam_create(&a, &ap), -EINVAL);
	ap.__reserved[1] = 0;
	T_EQ(tencache_adam_create(&a, &ap), 0);
	T_EQ(tencache_adam_threads(a), 2);
	T_EQ(tencache_adam_threads(NULL), -EINVAL);
	T_CHECK(tencache_adam_kernel(NULL) == NULL, "kernel of NULL");
	T_EQ(tencache_adam_step(a, &h, &t), 0);
	T_EQ(tencache_adam_step(NULL, &h, &t), -EINVAL);
	T_EQ(tencache_adam_step(a, NULL, &t), -EINVAL);
	T_EQ(tencache_adam_step(a, &h, NULL), -EINVAL);
#define BADH(field, val) do { bh = h; bh.field = val; T_EQ(tencache_adam_step(a, &bh, &t), -EINVAL); } while (0)
	BADH(lr, -1);
	BADH(lr, NAN);
	BADH(lr, INFINITY);
	BADH(beta1, 1.0);
	BADH(beta1, -0.1);
	BADH(beta2, 1.5);
	BADH(beta2, NAN);
	BADH(eps, -1e-8);
	BADH(weight_decay, -0.1);
	BADH(step, 0);
	BADH(__reserved[0], 1);
#define BADT(field, val) do { bt = t; bt.field = val; T_EQ(tencache_adam_step(a, &h, &bt), -EINVAL); } while (0)
	BADT(master, NULL);
	BADT(exp_avg, NULL);
	BADT(exp_avg_sq, NULL);
	BADT(grad, NULL);
	BADT(grad_dtype, 3);
	BADT(__reserved[1], 7);
	BADT(exp_avg, x);				/* aliases master */
	BADT(exp_avg_sq, y);				/* aliases exp_avg */
	BADT(master, (float *)((char *)x + 1));		/* misaligned */
	BADT(grad, (char *)w + 2);			/* fp32 grad at 2 bytes */
	BADT(numel, UINT64_MAX);
	bt = t;
	bt.param = w;
	bt.param_dtype = 9;
	T_EQ(tencache_adam_step(a, &h, &bt), -EINVAL);
	bt.param_dtype = TENCACHE_DTYPE_FP32;
	bt.param = (char *)w + 2;
	T_EQ(tencache_adam_step(a, &h, &bt), -EINVAL);
	bt.param_dtype = TENCACHE_DTYPE_BF16;		/* 2-byte aligned is fine for bf16 */
	T_EQ(tencache_adam_step(a, &h, &bt), 0);
	bt = t;
	bt.grad = (char *)w + 2;
	bt.grad_dtype = TENCACHE_DTYPE_FP16;
	bt.numel = 1;
	T_EQ(tencache_adam_step(a, &h, &bt), 0);
	bt = t;
	bt.numel = 0;
	bt.master = NULL;				/* nothing to do: no pointers needed */
	T_EQ(tencache_adam_step(a, &h, &bt), 0);
	tencache_adam_destroy(a);
	tencache_adam_destroy(NULL);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* params/s for bf16 grads and a bf16 copy, single and all threads */
static void bench(uint64_t n)
{
	float *p = malloc(n * 4), *m = calloc(n, 4), *v = calloc(n, 4);
	uint16_t *g = malloc(n * 2), *o = malloc(n * 2);
	struct tencache_adam_hparams h = { .lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999,
					   .eps = 1e-8, .weight_decay = 0.01, .step = 1 };
	struct tencache_adam_tensor t = { .master = p, .exp_avg = m, .exp_avg_sq = v, .grad = g,
					  .grad_dtype = TENCACHE_DTYPE_BF16, .param = o,
					  .param_dtype = TENCACHE_DTYPE_BF16, .numel = n };

	if (!p || !m || !v || !g || !o)
		exit(T_EXIT_FAIL);
	for (uint64_t i = 0; i < n; i++) {
		p[i] = frand(-1, 1);
		g[i] = ref_bf16(frand(-0.1f, 0.1f));
	}
	for (int mode = 0; mode < 4; mode++) {
		/* scalar, AVX2, the best kernel: 1 thread; the best: default threads */
		static const uint32_t kf[] = { TENCACHE_ADAM_F_SCALAR, TENCACHE_ADAM_F_NO_AVX512, 0, 0 };
		struct tencache_adam_params ap = { .threads = mode == 3 ? 0 : 1, .flags = kf[mode] };
		struct tencache_adam *a;
		double best = 1e30;

		if (tencache_adam_create(&a, &ap))
			exit(T_EXIT_FAIL);
		for (int r = 0; r < 4; r++) {
			double t0 = now_s();

			T_EQ(tencache_adam_step(a, &h, &t), 0);
			h.step++;
			best = fmin(best, now_s() - t0);
		}
		printf("bench: %s, %d thread(s), %llu params (bf16 grad, bf16 copy): %.0f Mparams/s, %.1f GB/s\n",
		       tencache_adam_kernel(a), tencache_adam_threads(a),
		       (unsigned long long)n, n / best / 1e6, n * 28.0 / best / 1e9);
		tencache_adam_destroy(a);
	}
	free(p); free(m); free(v); free(g); free(o);
}

int main(void)
{
	const char *bn = getenv("ADAM_BENCH_N");
	uint64_t sizes[] = { 1, 7, 8, 9, 15, 16, 17, 31, 33, 63, 64, 65, 100, 1000, 4097,
			     32768 * 2 + 5, 32768 * 5 + 3, 200003 };
	static const uint32_t kflags[] = { TENCACHE_ADAM_F_SCALAR, TENCACHE_ADAM_F_NO_AVX512, 0 };
	struct hp hps[] = {
		{ 1e-3, 0.9, 0.999, 1e-8, 0.01, 1 },	/* AdamW defaults */
		{ 3e-4, 0.9, 0.95, 1e-6, 0.1, 7 },	/* LLM-ish */
		{ 1e-2, 0.3, 0.5, 1e-8, 0.0, 100 },	/* big lerp weight, no decay */
		{ 1e-3, 0.0, 0.0, 0.0, 0.0, 1 },	/* betas 0, eps 0 */
	};

	against_double();
	bad_input();
	for (int mode = 0; mode < 7; mode++) {
		/* scalar / AVX2 / best kernel x 1 thread / 3 threads (odd slices),
		 * then the best kernel with the default threads */
		struct tencache_adam_params ap = { .threads = mode == 6 ? 0 : mode % 2 ? 3 : 1,
						   .flags = kflags[mode < 6 ? mode / 2 : 2] };
		struct tencache_adam *a;

		T_EQ(tencache_adam_create(&a, &ap), 0);
		if (t_failures)
			return T_EXIT_FAIL;
		printf("kernel %s, %d thread(s)\n", tencache_adam_kernel(a), tencache_adam_threads(a));
		for (unsigned si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++)
			for (unsigned gt = 0; gt < 3; gt++)
				for (unsigned pt = 0; pt < 4; pt++) {
					const struct hp *h = &hps[(si + gt + pt) % 4];

					one_case(a, sizes[si], gt, pt % 3, pt < 3, si % 3 == 1, h, 3,
						 (si * 5 + pt) % 17);
				}
		if (mode == 3 || mode == 5)
			conversions(a);
		tencache_adam_destroy(a);
	}
	if (!t_failures && (!bn || strtoull(bn, NULL, 0)))
		bench(bn ? strtoull(bn, NULL, 0) : 8ULL << 20);
	return t_exit();
}
