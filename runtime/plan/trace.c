/* trace.c - the step trace: tensors, accesses grouped into ops, validation. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "plan/plan.h"

int tc_trace_init(struct tc_trace *tr)
{
	if (!tr)
		return -EINVAL;
	memset(tr, 0, sizeof(*tr));
	return 0;
}

void tc_trace_free(struct tc_trace *tr)
{
	if (!tr)
		return;
	free(tr->tensors);
	free(tr->acc);
	memset(tr, 0, sizeof(*tr));
}

static int grow(void **p, uint32_t *cap, uint32_t nr, size_t sz)
{
	uint32_t ncap;
	void *np;

	if (nr < *cap)
		return 0;
	if (*cap >= UINT32_MAX / 2)
		return -EOVERFLOW;
	ncap = *cap ? *cap * 2 : 64;
	np = realloc(*p, (size_t)ncap * sz);
	if (!np)
		return -ENOMEM;
	*p = np;
	*cap = ncap;
	return 0;
}

int tc_trace_add_tensor(struct tc_trace *tr, uint64_t bytes, enum tc_role role)
{
	int ret;

	if (!tr || !bytes || (unsigned)role >= TC_ROLE_NR)
		return -EINVAL;
	if (tr->nr_tensors >= INT32_MAX)
		return -EOVERFLOW;
	ret = grow((void **)&tr->tensors, &tr->cap_tensors, tr->nr_tensors,
		   sizeof(*tr->tensors));
	if (ret)
		return ret;
	tr->tensors[tr->nr_tensors] = (struct tc_tensor){ .bytes = bytes, .role = role };
	return tr->nr_tensors++;
}

int tc_trace_add_access(struct tc_trace *tr, uint32_t tensor,
			enum tc_phase phase, unsigned flags, uint64_t compute_ns)
{
	int ret;

	if (!tr || tensor >= tr->nr_tensors || (unsigned)phase >= TC_PHASE_NR ||
	    (flags & ~TC_ACC_MASK) || !(flags & (TC_ACC_READ | TC_ACC_WRITE)) ||
	    (compute_ns && !(flags & TC_ACC_END)))
		return -EINVAL;
	if (tr->nr_acc >= INT32_MAX)
		return -EOVERFLOW;
	ret = grow((void **)&tr->acc, &tr->cap_acc, tr->nr_acc, sizeof(*tr->acc));
	if (ret)
		return ret;
	tr->acc[tr->nr_acc++] = (struct tc_access){
		.tensor = tensor, .phase = phase, .flags = flags, .compute_ns = compute_ns,
	};
	if (flags & TC_ACC_WRITE)
		tr->tensors[tensor].dirty = 1;
	return 0;
}

int tc_trace_validate(const struct tc_trace *tr)
{
	uint32_t *seen, i, start = 0;
	int ret = 0;

	if (!tr || !tr->nr_acc || !tr->nr_tensors || !tr->tensors || !tr->acc)
		return -EINVAL;
	if (!(tr->acc[tr->nr_acc - 1].flags & TC_ACC_END))
		return -EINVAL;
	/* seen[t] = 1 + index of the op start where t was last seen */
	seen = calloc(tr->nr_tensors, sizeof(*seen));
	if (!seen)
		return -ENOMEM;
	for (i = 0; i < tr->nr_tensors && !ret; i++)
		if (!tr->tensors[i].bytes || tr->tensors[i].role >= TC_ROLE_NR)
			ret = -EINVAL;
	for (i = 0; i < tr->nr_acc && !ret; i++) {
		const struct tc_access *a = &tr->acc[i];

		if (a->tensor >= tr->nr_tensors || a->phase >= TC_PHASE_NR ||
		    (a->flags & ~TC_ACC_MASK) ||
		    !(a->flags & (TC_ACC_READ | TC_ACC_WRITE)) ||
		    (a->compute_ns && !(a->flags & TC_ACC_END)) ||
		    ((a->flags ^ tr->acc[start].flags) & TC_ACC_HOST) ||
		    seen[a->tensor] == start + 1 ||
		    ((a->flags & TC_ACC_WRITE) && !tr->tensors[a->tensor].dirty)) {
			ret = -EINVAL;
			break;
		}
		seen[a->tensor] = start + 1;
		if (a->flags & TC_ACC_END)
			start = i + 1;
	}
	free(seen);
	return ret;
}

uint64_t tc_trace_bytes(const struct tc_trace *tr, int role)
{
	uint64_t sum = 0;

	for (uint32_t i = 0; tr && i < tr->nr_tensors; i++)
		if (role < 0 || tr->tensors[i].role == role)
			sum += tr->tensors[i].bytes;
	return sum;
}

uint64_t tc_trace_compute_ns(const struct tc_trace *tr)
{
	uint64_t sum = 0;

	for (uint32_t i = 0; tr && i < tr->nr_acc; i++)
		sum += tr->acc[i].compute_ns;
	return sum;
}

/* The most bytes one op holds on the GPU (host: in pinned memory) at once,
 * each tensor's rounded up to align. */
static uint64_t max_op_bytes(const struct tc_trace *tr, unsigned host, uint64_t align)
{
	uint64_t cur = 0, max = 0;

	for (uint32_t i = 0; tr && i < tr->nr_acc; i++) {
		const struct tc_access *a = &tr->acc[i];

		if ((a->flags & TC_ACC_HOST) == host)
			cur += (tr->tensors[a->tensor].bytes + align - 1) / align * align;
		if (a->flags & TC_ACC_END) {
			if (cur > max)
				max = cur;
			cur = 0;
		}
	}
	return max;
}

uint64_t tc_trace_max_op_bytes(const struct tc_trace *tr)
{
	return max_op_bytes(tr, 0, 1);
}

uint64_t tc_trace_max_op_span(const struct tc_trace *tr, uint64_t align)
{
	return max_op_bytes(tr, 0, align);
}

uint64_t tc_trace_max_host_op_bytes(const struct tc_trace *tr)
{
	return max_op_bytes(tr, TC_ACC_HOST, 1);
}
