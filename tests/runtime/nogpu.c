/* nogpu.c - without a CUDA driver or GPU (or with TENCACHE_F_NO_CUDA), every
 * CUDA entry point returns -ENODEV and pools still work, unregistered. */
#include <errno.h>

#include "tencache.h"
#include "test.h"

static void check_no_cuda(struct tencache *tc)
{
	struct tencache_gpu_arena *g = NULL;
	struct tencache_pool *pool = NULL;
	struct tencache_pool_info info;
	char host[64];
	int node = 7;

	T_EQ(tencache_cuda_available(tc), -ENODEV);
	T_EQ(tencache_gpu_numa_node(tc, 0, &node), -ENODEV);
	T_EQ(node, 7);
	T_EQ(tencache_copy_async(tc, TENCACHE_COPY_H2D, (void *)0x1000, host, 64, NULL, NULL),
	     -ENODEV);
	T_EQ(tencache_copy_async(tc, TENCACHE_COPY_D2H, host, (void *)0x1000, 64, NULL, NULL),
	     -ENODEV);
	T_EQ(tencache_gpu_arena_create(tc, &g, 1 << 20, NULL, 0), -ENODEV);
	T_CHECK(g == NULL, "no arena");
	T_EQ(tencache_pool_create(tc, &pool, 4 << 20, NULL, 0), 0);
	if (pool) {
		T_EQ(tencache_pool_info(pool, &info), 0);
		T_EQ(info.cuda_registered, 0);
		T_EQ(tencache_pool_cuda_register(pool), -ENODEV);
		tencache_pool_destroy(pool);
	}
}

int main(void)
{
	struct tencache_params p = { .log_level = TENCACHE_LOG_ERR };
	struct tencache *tc;
	char host[64];

	/* Argument checks come before the driver. */
	T_EQ(tencache_init(&tc, &p), 0);
	T_EQ(tencache_copy_async(tc, 3, host, host, 64, NULL, NULL), -EINVAL);
	T_EQ(tencache_copy_async(tc, TENCACHE_COPY_H2D, host, host, 0, NULL, NULL), -EINVAL);
	T_EQ(tencache_copy_async(NULL, TENCACHE_COPY_H2D, host, host, 64, NULL, NULL), -EINVAL);
	T_EQ(tencache_cuda_available(NULL), -EINVAL);
	T_EQ(tencache_pool_cuda_register(NULL), -EINVAL);
	T_EQ(tencache_gpu_arena_alloc(NULL, 64, (void **)&host), -EINVAL);

	/* Disabled by flag: -ENODEV on any machine. */
	p.flags = TENCACHE_F_NO_CUDA;
	tencache_exit(tc);
	T_EQ(tencache_init(&tc, &p), 0);
	check_no_cuda(tc);
	tencache_exit(tc);

	/* Without a GPU: the real probe. */
	p.flags = 0;
	T_EQ(tencache_init(&tc, &p), 0);
	if (tencache_cuda_available(tc) == 0) {
		tencache_exit(tc);
		if (t_failures)
			return T_EXIT_FAIL;
		printf("a CUDA GPU is present: the no-GPU half is covered by tests/gpu\n");
		return T_EXIT_SKIP;
	}
	check_no_cuda(tc);
	tencache_exit(tc);
	return t_exit();
}
