/* register.cu - pools are registered with CUDA once per segment at creation
 * (or on request), and the registration is visible to cudart. */
#include <errno.h>

#include "gpu.h"

#define MiB (1ULL << 20)

static int is_registered(void *p)
{
	cudaPointerAttributes a;

	if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
		cudaGetLastError();
		return 0;
	}
	return a.type == cudaMemoryTypeHost;
}

int main(void)
{
	struct tencache_params p = {};
	struct tencache_pool *pool;
	struct tencache_pool_info info;
	struct tencache *tc;
	int node = -2;
	char *buf;

	p.segment_size = 32 * MiB;
	tc = gpu_setup(&p);
	T_EQ(tencache_gpu_numa_node(tc, 0, &node), 0);
	T_CHECK(node >= -1, "node %d", node);

	T_EQ(tencache_pool_create(tc, &pool, 96 * MiB, NULL, 0), 0);
	T_EQ(tencache_pool_info(pool, &info), 0);
	T_EQ(info.cuda_registered, 1);
	T_EQ(info.nr_segments, 3);
	T_EQ(tencache_pool_alloc(pool, 70 * MiB, (void **)&buf), 0);
	T_CHECK(is_registered(buf) && is_registered(buf + 70 * MiB - 1), "pool memory registered");
	T_EQ(tencache_pool_cuda_register(pool), 0);	/* again: nothing to do */
	tencache_pool_destroy(pool);
	tencache_exit(tc);

	/* Registration deferred, then asked for. */
	p.flags = TENCACHE_F_NO_CUDA_REG;
	T_EQ(tencache_init(&tc, &p), 0);
	T_EQ(tencache_pool_create(tc, &pool, 32 * MiB, NULL, 0), 0);
	T_EQ(tencache_pool_info(pool, &info), 0);
	T_EQ(info.cuda_registered, 0);
	T_CHECK(!is_registered(info.base), "not registered yet");
	T_EQ(tencache_pool_cuda_register(pool), 0);
	T_EQ(tencache_pool_info(pool, &info), 0);
	T_EQ(info.cuda_registered, 1);
	T_CHECK(is_registered(info.base), "registered on request");
	tencache_pool_destroy(pool);
	tencache_exit(tc);
	return t_exit();
}
