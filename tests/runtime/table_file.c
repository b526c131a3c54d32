/* table_file.c - the learnt-table file: round trip of a generated OPT-1.3B
 * trace, signature mismatch (-ESTALE), missing file (-ENOENT), truncated,
 * garbled and out-of-range files and other versions (-EINVAL, trace left
 * empty), a non-empty target, an unwritable directory. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "exec/table_file.h"
#include "test.h"

static char dir[] = "/tmp/tc-table-XXXXXX";

static char *path_of(const char *name)
{
	static char buf[256];

	snprintf(buf, sizeof(buf), "%s/%s", dir, name);
	return buf;
}

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	long n;

	if (!f)
		return NULL;
	if (!fseek(f, 0, SEEK_END) && (n = ftell(f)) >= 0 && !fseek(f, 0, SEEK_SET) &&
	    (buf = malloc(n + 1)) && fread(buf, 1, n, f) == (size_t)n) {
		buf[n] = 0;
		*len = n;
	} else {
		free(buf);
		buf = NULL;
	}
	fclose(f);
	return buf;
}

static int spit(const char *path, const char *buf, size_t len)
{
	FILE *f = fopen(path, "wb");
	int ok;

	if (!f)
		return -1;
	ok = fwrite(buf, 1, len, f) == len;
	return fclose(f) || !ok ? -1 : 0;
}

/* Load text from a file and expect err; the trace must stay empty. */
static void expect_load(const char *what, const char *text, size_t len, uint64_t sig, int err)
{
	struct tc_trace tr;
	int ret;

	tc_trace_init(&tr);
	T_CHECK(!spit(path_of("bad.json"), text, len), "%s: write", what);
	ret = tc_table_load(path_of("bad.json"), sig, &tr);
	T_CHECK(ret == err, "%s: load = %d (%s), expected %d", what, ret, strerror(-ret), err);
	T_CHECK(err == 0 || (!tr.nr_tensors && !tr.nr_acc), "%s: trace not left empty", what);
	tc_trace_free(&tr);
}

/* Replace the first occurrence of from with to in text (a new string). */
static char *subst(const char *text, const char *from, const char *to)
{
	const char *p = strstr(text, from);
	size_t a, b = strlen(from), c = strlen(to);
	char *s;

	if (!p)
		return NULL;
	a = p - text;
	s = malloc(strlen(text) - b + c + 1);
	if (!s)
		return NULL;
	memcpy(s, text, a);
	memcpy(s + a, to, c);
	strcpy(s + a + c, p + b);
	return s;
}

static void expect_subst(const char *what, const char *text, const char *from, const char *to,
			 uint64_t sig, int err)
{
	char *s = subst(text, from, to);

	T_CHECK(s, "%s: '%s' not in the file", what, from);
	if (s)
		expect_load(what, s, strlen(s), sig, err);
	free(s);
}

int main(void)
{
	struct tc_trace tr, back;
	struct tc_gen_cfg g;
	struct tc_model m;
	uint64_t sig;
	size_t len;
	char *text;
	char sigstr[40];

	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return T_EXIT_FAIL;
	}
	tc_trace_init(&tr);
	tc_gen_cfg_default(&g);
	T_EQ(tc_model_builtin("opt-1.3b", &m), 0);
	T_EQ(tc_model_trace(&m, &g, &tr), 0);
	sig = tc_table_signature(&tr);

	/* signature: deterministic, sensitive to bytes, role and order */
	T_CHECK(sig == tc_table_signature(&tr), "not deterministic");
	tr.tensors[3].bytes++;
	T_CHECK(sig != tc_table_signature(&tr), "blind to bytes");
	tr.tensors[3].bytes--;
	tr.tensors[0].role ^= 1;
	T_CHECK(sig != tc_table_signature(&tr), "blind to role");
	tr.tensors[0].role ^= 1;
	{
		struct tc_tensor t = tr.tensors[0];

		tr.tensors[0] = tr.tensors[1];
		tr.tensors[1] = t;
		T_CHECK(tr.tensors[0].bytes == tr.tensors[1].bytes ||
			sig != tc_table_signature(&tr), "blind to order");
		tr.tensors[1] = tr.tensors[0];
		tr.tensors[0] = t;
	}
	T_EQ(tc_table_signature(&tr), sig);

	/* round trip */
	T_EQ(tc_table_save(path_of("t.json"), sig, &tr), 0);
	tc_trace_init(&back);
	T_EQ(tc_table_load(path_of("t.json"), sig, &back), 0);
	T_EQ(back.nr_tensors, tr.nr_tensors);
	T_EQ(back.nr_acc, tr.nr_acc);
	if (back.nr_tensors == tr.nr_tensors && back.nr_acc == tr.nr_acc) {
		for (uint32_t i = 0; i < tr.nr_tensors; i++)
			T_CHECK(back.tensors[i].bytes == tr.tensors[i].bytes &&
				back.tensors[i].role == tr.tensors[i].role &&
				back.tensors[i].dirty == tr.tensors[i].dirty, "tensor %u differs", i);
		for (uint32_t i = 0; i < tr.nr_acc; i++)
			T_CHECK(back.acc[i].tensor == tr.acc[i].tensor &&
				back.acc[i].phase == tr.acc[i].phase &&
				back.acc[i].flags == tr.acc[i].flags &&
				back.acc[i].compute_ns == tr.acc[i].compute_ns,
				"access %u differs", i);
	}
	T_EQ(tc_table_signature(&back), sig);

	/* a non-empty target is refused and left alone */
	T_EQ(tc_table_load(path_of("t.json"), sig, &back), -EINVAL);
	T_EQ(back.nr_tensors, tr.nr_tensors);
	tc_trace_free(&back);

	/* overwrite in place: still one good file, no temporaries left */
	T_EQ(tc_table_save(path_of("t.json"), sig, &tr), 0);
	{
		char cmd[300];

		snprintf(cmd, sizeof(cmd), "test $(ls -A %s | wc -l) = 1", dir);
		T_EQ(system(cmd), 0);
	}

	/* signature mismatch, missing file */
	tc_trace_init(&back);
	T_EQ(tc_table_load(path_of("t.json"), sig ^ 1, &back), -ESTALE);
	T_EQ(back.nr_tensors, 0);
	T_EQ(tc_table_load(path_of("none.json"), sig, &back), -ENOENT);

	/* argument checks */
	T_EQ(tc_table_save(NULL, sig, &tr), -EINVAL);
	T_EQ(tc_table_save(path_of("x.json"), sig, NULL), -EINVAL);
	T_EQ(tc_table_save(path_of("x.json"), sig, &back), -EINVAL);	/* empty trace */
	T_EQ(tc_table_load(NULL, sig, &back), -EINVAL);
	T_EQ(tc_table_load(path_of("t.json"), sig, NULL), -EINVAL);
	T_EQ(tc_table_load(dir, sig, &back), -EINVAL);			/* a directory */

	/* unwritable: a missing directory always; a read-only one unless root */
	T_EQ(tc_table_save("/nonexistent-dir/t.json", sig, &tr), -ENOENT);
	{
		char p[300];

		snprintf(p, sizeof(p), "%s/t.json/x.json", dir);	/* a file as directory */
		T_EQ(tc_table_save(p, sig, &tr), -ENOTDIR);
	}
	mkdir(path_of("ro"), 0555);
	if (geteuid() != 0) {
		char p[300];

		snprintf(p, sizeof(p), "%s/ro/t.json", dir);
		T_EQ(tc_table_save(p, sig, &tr), -EACCES);
	}
	rmdir(path_of("ro"));

	/* damaged files */
	text = slurp(path_of("t.json"), &len);
	T_CHECK(text, "read back");
	if (text) {
		snprintf(sigstr, sizeof(sigstr), "\"%016llx\"", (unsigned long long)sig);
		expect_load("empty", "", 0, sig, -EINVAL);
		expect_load("not json", "hello", 5, sig, -EINVAL);
		expect_load("array", "[1,2]", 5, sig, -EINVAL);
		for (size_t cut = 1; cut < 64; cut++)
			expect_load("truncated head", text, cut, sig, -EINVAL);
		expect_load("truncated half", text, len / 2, sig, -EINVAL);
		expect_load("truncated tail", text, len - 3, sig, -EINVAL);
		{
			char *g2 = strdup(text);

			for (size_t i = 0; g2 && i < len; i += 97)
				if (g2[i] == ',')
					g2[i] = ';';
			if (g2)
				expect_load("garbled", g2, len, sig, -EINVAL);
			free(g2);
		}
		{
			char *nul = malloc(len + 2);

			memcpy(nul, text, len);
			nul[len - 1] = 0;	/* the newline becomes a NUL */
			expect_load("embedded NUL", nul, len, sig, -EINVAL);
			memcpy(nul, text, len);
			strcpy(nul + len - 1, "]");
			expect_load("trailing junk", nul, len, sig, -EINVAL);
			free(nul);
		}
		expect_subst("version 2", text, "\"version\":1", "\"version\":2", sig, -EINVAL);
		expect_subst("version text", text, "\"version\":1", "\"version\":\"1\"", sig, -EINVAL);
		expect_subst("no version", text, "\"version\":1,", "", sig, -EINVAL);
		expect_subst("format", text, "tencache-table", "other-table", sig, -EINVAL);
		expect_subst("short signature", text, sigstr, "\"abc\"", sig, -EINVAL);
		expect_subst("signature number", text, sigstr, "12", sig, -EINVAL);
		expect_subst("no tensors", text, "\"tensors\":", "\"tensorz\":", sig, -EINVAL);
		expect_subst("no accesses", text, "\"accesses\":", "\"accessez\":", sig, -EINVAL);
		/* tensors: the first one (embed, fp16) is [bytes, 0] */
		{
			char from[64], to[64];

			snprintf(from, sizeof(from), "[[%llu,0]",
				 (unsigned long long)tr.tensors[0].bytes);
			snprintf(to, sizeof(to), "[[%llu,0]",
				 (unsigned long long)tr.tensors[0].bytes + 2);
			expect_subst("tensor bytes (signature)", text, from, to, sig, -EINVAL);
			snprintf(to, sizeof(to), "[[%llu,9]", (unsigned long long)tr.tensors[0].bytes);
			expect_subst("tensor role", text, from, to, sig, -EINVAL);
			snprintf(to, sizeof(to), "[[%llu,0,0]", (unsigned long long)tr.tensors[0].bytes);
			expect_subst("tensor row length", text, from, to, sig, -EINVAL);
			snprintf(to, sizeof(to), "[[%llu.5,0]", (unsigned long long)tr.tensors[0].bytes);
			expect_subst("tensor bytes fraction", text, from, to, sig, -EINVAL);
			expect_subst("tensor bytes zero", text, from, "[[0,0]", sig, -EINVAL);
			expect_subst("tensor bytes negative", text, from, "[[-1,0]", sig, -EINVAL);
		}
		/* accesses: the first one is [0, FWD, READ, 0] */
		expect_subst("access id range", text, "\"accesses\":[[0,", "\"accesses\":[[99999,",
			     sig, -EINVAL);
		expect_subst("access phase", text, "\"accesses\":[[0,0,", "\"accesses\":[[0,7,",
			     sig, -EINVAL);
		expect_subst("access flags mask", text, "\"accesses\":[[0,0,1,",
			     "\"accesses\":[[0,0,17,", sig, -EINVAL);
		expect_subst("access no read/write", text, "\"accesses\":[[0,0,1,",
			     "\"accesses\":[[0,0,0,", sig, -EINVAL);
		expect_subst("compute on a non-END", text, "\"accesses\":[[0,0,1,0]",
			     "\"accesses\":[[0,0,1,5]", sig, -EINVAL);
		expect_subst("access as object", text, "\"accesses\":[[0,0,1,0]",
			     "\"accesses\":[{}", sig, -EINVAL);
		/* structure (tc_trace_validate): the same tensor twice in an op */
		expect_subst("tensor twice in an op", text, "\"accesses\":[[0,0,1,0]",
			     "\"accesses\":[[0,0,1,0],[0,0,1,0]", sig, -EINVAL);
		/* unchanged text still loads (the substitutions above were the cause) */
		expect_load("original", text, len, sig, 0);
		free(text);
	}

	tc_trace_free(&back);
	tc_trace_free(&tr);
	unlink(path_of("t.json"));
	unlink(path_of("bad.json"));
	rmdir(dir);
	return t_exit();
}
