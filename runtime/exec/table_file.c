/* table_file.c - save/load a learnt step trace as JSON (cJSON), keyed by a
 * signature of the registered tensors. The file:
 *   { "format": "tencache-table", "version": 1, "signature": "<16 hex>",
 *     "tensors": [[bytes, role], ...],
 *     "accesses": [[tensor, phase, flags, compute_ns], ...] }
 * Loading trusts nothing in the file: every field is range-checked and the
 * trace is rebuilt through tc_trace_add_* and tc_trace_validate. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "exec/table_file.h"

#define TABLE_FORMAT	"tencache-table"
#define TABLE_MAX_FILE	(1ULL << 30)	/* refuse to read more than this */
#define JSON_INT_MAX	9007199254740992.0	/* 2^53: exact in a double */

uint64_t tc_table_signature(const struct tc_trace *tr)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	for (uint32_t i = 0; tr && i < tr->nr_tensors; i++) {
		uint64_t b = tr->tensors[i].bytes;

		for (int k = 0; k < 8; k++) {
			h ^= (b >> (8 * k)) & 0xff;
			h *= 0x100000001b3ULL;
		}
		h ^= tr->tensors[i].role;
		h *= 0x100000001b3ULL;
	}
	return h;
}

/* ---- save ----------------------------------------------------------------- */

static cJSON *row(const uint64_t *v, int n)
{
	cJSON *a = cJSON_CreateArray();

	for (int i = 0; a && i < n; i++) {
		cJSON *x = cJSON_CreateNumber((double)v[i]);

		if (!x || !cJSON_AddItemToArray(a, x)) {
			cJSON_Delete(x);
			cJSON_Delete(a);
			return NULL;
		}
	}
	return a;
}

static cJSON *to_json(uint64_t sig, const struct tc_trace *tr)
{
	cJSON *root = cJSON_CreateObject(), *ts, *as;
	char hex[17];

	if (!root)
		return NULL;
	snprintf(hex, sizeof(hex), "%016" PRIx64, sig);
	if (!cJSON_AddStringToObject(root, "format", TABLE_FORMAT) ||
	    !cJSON_AddNumberToObject(root, "version", TC_TABLE_VERSION) ||
	    !cJSON_AddStringToObject(root, "signature", hex) ||
	    !(ts = cJSON_AddArrayToObject(root, "tensors")) ||
	    !(as = cJSON_AddArrayToObject(root, "accesses")))
		goto fail;
	for (uint32_t i = 0; i < tr->nr_tensors; i++) {
		uint64_t v[2] = { tr->tensors[i].bytes, tr->tensors[i].role };
		cJSON *r = row(v, 2);

		if (!r || !cJSON_AddItemToArray(ts, r)) {
			cJSON_Delete(r);
			goto fail;
		}
	}
	for (uint32_t i = 0; i < tr->nr_acc; i++) {
		const struct tc_access *a = &tr->acc[i];
		uint64_t v[4] = { a->tensor, a->phase, a->flags, a->compute_ns };
		cJSON *r = row(v, 4);

		if (!r || !cJSON_AddItemToArray(as, r)) {
			cJSON_Delete(r);
			goto fail;
		}
	}
	return root;
fail:
	cJSON_Delete(root);
	return NULL;
}

static int write_all(int fd, const char *buf, size_t len)
{
	while (len) {
		ssize_t n = write(fd, buf, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		buf += n;
		len -= n;
	}
	return 0;
}

/* fsync the directory holding path, so the rename is durable (best effort). */
static void sync_dir(const char *path)
{
	char *copy = strdup(path);
	int fd;

	if (!copy)
		return;
	fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) {
		fsync(fd);
		close(fd);
	}
	free(copy);
}

int tc_table_save(const char *path, uint64_t sig, const struct tc_trace *tr)
{
	char *text = NULL, *tmp = NULL;
	cJSON *root = NULL;
	int fd = -1, ret;

	if (!path || !*path || !tr)
		return -EINVAL;
	ret = tc_trace_validate(tr);
	if (ret)
		return ret;
	for (uint32_t i = 0; i < tr->nr_tensors; i++)
		if ((double)tr->tensors[i].bytes > JSON_INT_MAX)
			return -ERANGE;
	for (uint32_t i = 0; i < tr->nr_acc; i++)
		if ((double)tr->acc[i].compute_ns > JSON_INT_MAX)
			return -ERANGE;
	root = to_json(sig, tr);
	if (!root)
		return -ENOMEM;
	text = cJSON_PrintUnformatted(root);
	cJSON_Delete(root);
	if (!text)
		return -ENOMEM;
	if (asprintf(&tmp, "%s.tmp.XXXXXX", path) < 0) {
		tmp = NULL;
		ret = -ENOMEM;
		goto out;
	}
	fd = mkstemp(tmp);
	if (fd < 0) {
		ret = -errno;
		free(tmp);
		tmp = NULL;
		goto out;
	}
	ret = write_all(fd, text, strlen(text));
	if (!ret)
		ret = write_all(fd, "\n", 1);
	if (!ret && fsync(fd))
		ret = -errno;
	if (close(fd) && !ret)
		ret = -errno;
	if (!ret && fchmodat(AT_FDCWD, tmp, 0644, 0))
		ret = -errno;
	if (!ret && rename(tmp, path))
		ret = -errno;
	if (ret)
		unlink(tmp);
	else
		sync_dir(path);
out:
	free(tmp);
	cJSON_free(text);
	return ret;
}

/* ---- load ----------------------------------------------------------------- */

static int read_file(const char *path, char **bufp, size_t *lenp)
{
	struct stat st;
	size_t len = 0;
	char *buf;
	int fd, ret = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st)) {
		ret = -errno;
		goto out;
	}
	if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size > TABLE_MAX_FILE) {
		ret = -EINVAL;
		goto out;
	}
	buf = malloc(st.st_size + 1);
	if (!buf) {
		ret = -ENOMEM;
		goto out;
	}
	while (len < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + len, st.st_size - len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			ret = n < 0 ? -errno : -EINVAL;	/* shrank under us */
			free(buf);
			goto out;
		}
		len += n;
	}
	buf[len] = 0;
	*bufp = buf;
	*lenp = len;
out:
	close(fd);
	return ret;
}

/* An integer in [0, max] stored as a JSON number. */
static int get_uint(const cJSON *it, double max, uint64_t *v)
{
	double d;

	if (!cJSON_IsNumber(it))
		return -EINVAL;
	d = it->valuedouble;
	if (!(d >= 0 && d <= max) || d != (double)(uint64_t)d)
		return -EINVAL;
	*v = (uint64_t)d;
	return 0;
}

/* row must be an array of exactly n integers, each <= max[i]. */
static int get_row(const cJSON *r, int n, const double *max, uint64_t *v)
{
	if (!cJSON_IsArray(r) || cJSON_GetArraySize(r) != n)
		return -EINVAL;
	for (int i = 0; i < n; i++)
		if (get_uint(cJSON_GetArrayItem(r, i), max[i], &v[i]))
			return -EINVAL;
	return 0;
}

static int parse_sig(const cJSON *it, uint64_t *sig)
{
	const char *s;
	char *end;

	if (!cJSON_IsString(it))
		return -EINVAL;
	s = it->valuestring;
	if (strlen(s) != 16 || strspn(s, "0123456789abcdef") != 16)
		return -EINVAL;
	errno = 0;
	*sig = strtoull(s, &end, 16);
	return errno || *end ? -EINVAL : 0;
}

static int from_json(const cJSON *root, uint64_t sig, struct tc_trace *tr)
{
	static const double tmax[2] = { JSON_INT_MAX, TC_ROLE_NR - 1 };
	const cJSON *fmt, *ver, *ts, *as, *r;
	double amax[4] = { 0, TC_PHASE_NR - 1, TC_ACC_MASK, JSON_INT_MAX };
	uint64_t v[4], file_sig;
	int ret;

	if (!cJSON_IsObject(root))
		return -EINVAL;
	fmt = cJSON_GetObjectItemCaseSensitive(root, "format");
	ver = cJSON_GetObjectItemCaseSensitive(root, "version");
	if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, TABLE_FORMAT) ||
	    get_uint(ver, JSON_INT_MAX, v) || v[0] != TC_TABLE_VERSION)
		return -EINVAL;
	if (parse_sig(cJSON_GetObjectItemCaseSensitive(root, "signature"), &file_sig))
		return -EINVAL;
	if (file_sig != sig)
		return -ESTALE;
	ts = cJSON_GetObjectItemCaseSensitive(root, "tensors");
	as = cJSON_GetObjectItemCaseSensitive(root, "accesses");
	if (!cJSON_IsArray(ts) || !cJSON_IsArray(as) || !cJSON_GetArraySize(ts) ||
	    !cJSON_GetArraySize(as))
		return -EINVAL;
	cJSON_ArrayForEach(r, ts) {
		if (get_row(r, 2, tmax, v) || !v[0])
			return -EINVAL;
		ret = tc_trace_add_tensor(tr, v[0], (enum tc_role)v[1]);
		if (ret < 0)
			return ret == -ENOMEM ? ret : -EINVAL;
	}
	/* the tensors must be the ones the signature names */
	if (tc_table_signature(tr) != file_sig)
		return -EINVAL;
	amax[0] = tr->nr_tensors - 1;
	cJSON_ArrayForEach(r, as) {
		if (get_row(r, 4, amax, v))
			return -EINVAL;
		ret = tc_trace_add_access(tr, v[0], (enum tc_phase)v[1], v[2], v[3]);
		if (ret)
			return ret == -ENOMEM ? ret : -EINVAL;
	}
	ret = tc_trace_validate(tr);
	return ret == -ENOMEM ? ret : ret ? -EINVAL : 0;
}

int tc_table_load(const char *path, uint64_t sig, struct tc_trace *tr)
{
	cJSON *root;
	size_t len = 0;
	char *buf = NULL;
	int ret;

	if (!path || !*path || !tr || tr->nr_tensors || tr->nr_acc)
		return -EINVAL;
	ret = read_file(path, &buf, &len);
	if (ret)
		return ret;
	/* the whole file must be one JSON value: no NUL inside, nothing after */
	root = strlen(buf) == len ? cJSON_ParseWithLengthOpts(buf, len + 1, NULL, 1) : NULL;
	free(buf);
	if (!root)
		return -EINVAL;
	ret = from_json(root, sig, tr);
	cJSON_Delete(root);
	if (ret) {
		tc_trace_free(tr);
		tc_trace_init(tr);
	}
	return ret;
}
