/* sim_pinned_wait.c - the timing model blocks the host where an op needs
 * pinned space that a detached host op still holds and the host ops may
 * run out of order, as the executor's caller waits for what may wait for
 * a detached op (cache.c det_pending): a hand-made table (a short GPU op,
 * a 100 ms host op reading A, two long GPU ops) where B's PALLOC, issued
 * before the first long GPU op, takes A's space. That GPU op cannot start
 * before the host op ends; with room for every copy at once, or with the
 * host ops run in order (TC_PLAN_HOST_FIFO: the PALLOC waits, the caller
 * does not), it starts at once. The disk's idle time it reports (nvme_idle_ns,
 * the longest gap and where it starts) is the step less A's one read. */
#include <stdio.h>

#include "test.h"
#include "plan/plan.h"

#define MiB (1ull << 20)
#define HOST_NS 100000000ull	/* the host op on A */
#define GPU_NS 150000000ull	/* the last two GPU ops: the host op ends in the step */

enum { A, B, C };

static void run(uint64_t pinned, unsigned flags, struct tc_sim_result *sr)
{
	struct tc_trace tr;
	struct tc_plan_cfg cfg;
	/* pos 2: A's space goes once the host op is done, B takes it;
	 * pos 3: B goes, A comes back from NVMe for the next step */
	struct tc_op ops[] = {
		{ .tensor = A, .kind = TC_OP_PDROP, .pos = 2, .need = -1, .dep_first = 0, .nr_deps = 1 },
		{ .tensor = B, .kind = TC_OP_PALLOC, .pos = 2, .need = -1 },
		{ .tensor = B, .kind = TC_OP_PDROP, .pos = 3, .need = -1 },
		{ .tensor = A, .kind = TC_OP_STAGE_IN, .pos = 3, .need = 1, .need_next = 1 },
	};
	int32_t deps[] = { -2 };	/* the compute of access 1: the host op */
	uint32_t op_first[] = { 0, 0, 0, 2, 4 }, wait_first[] = { 0, 0, 1, 1, 1 }, wait_ops[] = { 3 };
	uint8_t hit[4] = { 0 }, placement[3] = { TC_TIER_NVME, TC_TIER_PINNED, TC_TIER_GPU };
	uint8_t start_gpu[3] = { 0, 0, 1 }, start_pinned[3] = { 1, 0, 0 };
	struct tc_plan pl = {
		.nr_acc = 4, .nr_tensors = 3, .nr_ops = 4, .nr_deps = 1, .ops = ops,
		.op_first = op_first, .deps = deps, .wait_first = wait_first,
		.wait_ops = wait_ops, .hit = hit, .placement = placement,
		.start_gpu = start_gpu, .start_pinned = start_pinned,
	};

	T_EQ(tc_trace_init(&tr), 0);
	T_EQ(tc_trace_add_tensor(&tr, 64 * MiB, TC_ROLE_OPT_STATE), A);
	T_EQ(tc_trace_add_tensor(&tr, 64 * MiB, TC_ROLE_PARAM_FP16), B);
	T_EQ(tc_trace_add_tensor(&tr, 1 * MiB, TC_ROLE_PARAM_FP16), C);
	T_EQ(tc_trace_add_access(&tr, C, TC_PHASE_FWD, TC_ACC_READ | TC_ACC_END, 1000000), 0);
	T_EQ(tc_trace_add_access(&tr, A, TC_PHASE_OPT, TC_ACC_HOST | TC_ACC_READ | TC_ACC_END,
				 HOST_NS), 0);
	T_EQ(tc_trace_add_access(&tr, C, TC_PHASE_FWD, TC_ACC_READ | TC_ACC_END, GPU_NS), 0);
	T_EQ(tc_trace_add_access(&tr, C, TC_PHASE_FWD, TC_ACC_READ | TC_ACC_END, GPU_NS), 0);
	tc_plan_cfg_default(&cfg);
	cfg.flags |= TC_PLAN_HOST_ASYNC | flags;
	cfg.gpu_bytes = 16 * MiB;
	cfg.pinned_bytes = pinned;
	cfg.nvme_bytes = 1024 * MiB;
	T_EQ(tc_sim_run(&tr, &cfg, &pl, 3, sr), 0);
	tc_trace_free(&tr);
}

int main(void)
{
	struct tc_sim_result tight, room, fifo;

	run(64 * MiB, 0, &tight);	/* B must wait for A's space */
	run(256 * MiB, 0, &room);	/* room for every copy at once */
	run(64 * MiB, TC_PLAN_HOST_FIFO, &fifo);	/* B's PALLOC waits, not the host */
	printf("worst GPU op wait: %.1f ms with A's space shared, %.1f ms with room; "
	       "step %.1f / %.1f ms\n", tight.max_wait_ns / 1e6, room.max_wait_ns / 1e6,
	       tight.step_ns / 1e6, room.step_ns / 1e6);
	T_CHECK(tight.max_wait_ns >= HOST_NS * 9 / 10,
		"the GPU op after B's PALLOC waited %llu ns, not the host op's %llu",
		(unsigned long long)tight.max_wait_ns, HOST_NS);
	T_CHECK(room.max_wait_ns < HOST_NS / 10, "with room it waited %llu ns",
		(unsigned long long)room.max_wait_ns);
	printf("host ops in order: worst GPU op wait %.1f ms, step %.1f ms\n",
	       fifo.max_wait_ns / 1e6, fifo.step_ns / 1e6);
	T_CHECK(fifo.max_wait_ns < HOST_NS / 10, "with the host ops in order it waited %llu ns",
		(unsigned long long)fifo.max_wait_ns);
	for (int k = 0; k < 2; k++) {
		const struct tc_sim_result *r = k ? &room : &tight;
		uint64_t rd = r->link_busy_ns[TC_LINK_NVME_RD];

		printf("disk idle %.1f of %.1f ms (read %.1f ms; longest gap %.1f ms, %.1f ms in)\n",
		       r->nvme_idle_ns / 1e6, r->step_ns / 1e6, rd / 1e6, r->nvme_gap_ns / 1e6,
		       r->nvme_gap_at_ns / 1e6);
		T_CHECK(rd > 0 && r->nvme_idle_ns + rd >= r->step_ns - 1000 &&
			r->nvme_idle_ns + rd <= r->step_ns + 1000,
			"disk idle %llu + read %llu ns is not the step's %llu",
			(unsigned long long)r->nvme_idle_ns, (unsigned long long)rd,
			(unsigned long long)r->step_ns);
		T_CHECK(r->nvme_gap_ns > 0 && r->nvme_gap_ns <= r->nvme_idle_ns &&
			r->nvme_gap_at_ns + r->nvme_gap_ns <= r->step_ns,
			"longest gap %llu ns at %llu", (unsigned long long)r->nvme_gap_ns,
			(unsigned long long)r->nvme_gap_at_ns);
	}
	return t_exit();
}
