"""overlap.py - the optimizer's host ops run on a worker thread while backward
goes on (offload(overlap=True), the default).

A parameter's AdamW update may start once its module's backward op is
released: its gradient is final then (one backward per step). The cache's
calls stay on the training thread, in an order that depends only on the
model, so the cache's learnt step is the same every step:
  - a parameter's host op (gradient, master, moments and compute copy as
    pinned host memory) is acquired `lag` module releases after its own; by
    then its gradient's copy to the host is done, so the acquire does not
    wait on the GPU, which keeps the queue of backward kernels full;
  - the host op is detached (tencache_op_detach): the cache goes on with
    the next ops, and whatever copies its tensors waits for it;
  - the C AdamW runs on one worker thread (ctypes drops the GIL; the C code
    fans out to its own threads), which then marks the op done;
  - host ops are released oldest first, after waiting for the worker, once
    more than `window` bytes of them are held, and all of them at
    optimizer.step().
"""
import collections
import ctypes
from concurrent.futures import ThreadPoolExecutor

from ._lib import check

LAG = 8    # module releases between a module's backward and its parameters' host ops


class HostOps:
    """launch(q) -> (AdamTensor, AdamHparams, held tensor ids, bytes): acquires a
    parameter's host op; retire(q, held): releases it."""

    def __init__(self, lib, cache, adam, launch, retire, window=None, lag=LAG):
        self.lib, self.cache, self.adam = lib, cache, adam
        self._launch, self._retire = launch, retire
        self.window, self.lag = window, lag
        self.pool = ThreadPoolExecutor(1, thread_name_prefix="tencache-adamw")
        self.ready = collections.deque()    # (param, tick of its module's release)
        self.held = collections.deque()     # (param, held ids, future, bytes)
        self.tick = self.held_bytes = 0

    def released(self, params):
        """A module's backward op was released; params: its parameters with a
        gradient this step."""
        self.tick += 1
        self.ready.extend((q, self.tick) for q in params)
        self._pump(final=False)

    def finish(self):
        """optimizer.step(): every update launched, done and released."""
        self._pump(final=True)
        self.tick = 0

    def _pump(self, final):
        while self.ready and (final or self.tick - self.ready[0][1] >= self.lag):
            q, _ = self.ready.popleft()
            t, hp, held, nbytes = self._launch(q)
            token = ctypes.c_uint64()
            check(self.lib.tencache_op_detach(self.cache, ctypes.byref(token)),
                  f"detaching the AdamW step of '{q.name}'")
            fut = self.pool.submit(self._step, t, hp, token.value)
            self.held.append((q, held, fut, nbytes))
            self.held_bytes += nbytes
        while self.held and (final or (self.window is not None and
                                       self.held_bytes > self.window)):
            q, held, fut, nbytes = self.held.popleft()
            ret, done = fut.result()
            self.held_bytes -= nbytes
            check(ret, f"AdamW step of '{q.name}'")
            check(done, f"tencache_op_done after the AdamW step of '{q.name}'")
            self._retire(q, held)

    def _step(self, t, hp, token):    # on the worker; t and hp live until it returns
        ret = self.lib.tencache_adam_step(self.adam, ctypes.byref(hp), ctypes.byref(t))
        # done even when AdamW failed: the op's tensors are not written any more
        return ret, self.lib.tencache_op_done(self.cache, token)

    def close(self):
        """Wait for the worker: it writes into cache memory until it is done."""
        for _, _, fut, _ in self.held:
            fut.exception()
        self.pool.shutdown(wait=True)
        self.ready.clear()
        self.held.clear()
        self.held_bytes = 0
