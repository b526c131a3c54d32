"""overlap.py - the optimizer's host ops run on a worker thread while backward
goes on, and into the next step's forward (offload(overlap=True), the
default; overlap=False runs them in optimizer.step()).

A parameter's AdamW update may start once its module's backward op is
released: its gradient is final then (one backward per step). The cache's
calls stay on the training thread:
  - a parameter's host op (gradient, master, moments and compute copy as
    pinned host memory) is acquired `lag` module releases after its own,
    with TENCACHE_ACQ_NOWAIT: the acquire does not wait for the gradient's
    copy to the host (the worker does, tencache_op_wait), so the training
    thread never waits on the GPU there and the queue of backward kernels
    stays full;
  - the host op is detached (tencache_op_detach): the cache goes on with
    the next ops, and whatever copies its tensors waits for it;
  - the C AdamW runs on one worker thread (ctypes drops the GIL; the C code
    fans out to its own threads), which then marks the op done. The worker
    takes the first parameter in forward order among those queued, so the
    updates still running when backward ends are the last layers': the next
    step's forward finds its first layers updated;
  - an op is released (after waiting for it) when its parameter is next
    needed: the next forward's pre-hook (settle). Without a window the
    updates carry over the step's end; with one (an NVMe tier, where only
    pinned_budget is pinned) they are released oldest first once more than
    `window` bytes are held, and all of them at optimizer.step().
Releases are not part of the learnt order, so their timing may vary.
"""
import collections
import ctypes
import heapq
import itertools
import threading
from concurrent.futures import Future

from ._lib import check

LAG = 8    # module releases between a module's backward and its parameters' host ops


class _Worker:
    """One thread running submitted calls lowest key first."""

    def __init__(self):
        self.heap, self.seq, self.stop = [], itertools.count(), False
        self.cond = threading.Condition()
        self.thread = threading.Thread(target=self._run, name="tencache-adamw", daemon=True)
        self.thread.start()

    def submit(self, key, fn, *args):
        fut = Future()
        with self.cond:
            heapq.heappush(self.heap, (key, next(self.seq), fut, fn, args))
            self.cond.notify()
        return fut

    def _run(self):
        while True:
            with self.cond:
                while not self.heap and not self.stop:
                    self.cond.wait()
                if not self.heap:
                    return
                _, _, fut, fn, args = heapq.heappop(self.heap)
            if not fut.set_running_or_notify_cancel():
                continue
            try:
                fut.set_result(fn(*args))
            except BaseException as e:    # noqa: BLE001 - handed to the waiter
                fut.set_exception(e)

    def close(self):
        with self.cond:
            self.stop = True
            self.cond.notify()
        self.thread.join()


class HostOps:
    """launch(q) -> (AdamTensor, AdamHparams, held tensor ids, bytes): acquires a
    parameter's host op; retire(q, held): releases it. q.index orders the
    parameters as forward uses them."""

    def __init__(self, lib, cache, adam, launch, retire, window=None, lag=LAG):
        self.lib, self.cache, self.adam = lib, cache, adam
        self._launch, self._retire = launch, retire
        self.window, self.lag = window, lag
        self.worker = _Worker()
        self.ready = collections.deque()    # (param, tick of its module's release)
        self.held = {}                      # param -> (held ids, future, bytes), launch order
        self.tick = self.held_bytes = self.step = 0
        self.carried = 0    # updates still running when their step ended

    def released(self, params):
        """A module's backward op was released; params: its parameters with a
        gradient this step."""
        self.tick += 1
        self.ready.extend((q, self.tick) for q in params)
        self._pump(final=False)

    def finish(self):
        """optimizer.step(): every update launched; with a window all of them
        done and released, without one they carry over (settle)."""
        self._pump(final=True)
        if self.window is not None:
            for q in list(self.held):
                self._settle_one(q)
        self.carried += sum(1 for _, fut, _ in self.held.values() if not fut.done())
        self.tick = 0
        self.step += 1

    def settle(self, params):
        """params are about to be used: their updates done and released."""
        for q in params:
            if q in self.held:
                self._settle_one(q)

    def pending(self):
        return len(self.held)

    def _pump(self, final):
        while self.ready and (final or self.tick - self.ready[0][1] >= self.lag):
            q, _ = self.ready.popleft()
            self.settle([q])    # an update of an earlier step not yet released
            t, hp, held, nbytes = self._launch(q)
            token = ctypes.c_uint64()
            check(self.lib.tencache_op_detach(self.cache, ctypes.byref(token)),
                  f"detaching the AdamW step of '{q.name}'")
            fut = self.worker.submit((self.step, q.index), self._step, t, hp, token.value)
            self.held[q] = (held, fut, nbytes)
            self.held_bytes += nbytes
        while self.held and self.window is not None and self.held_bytes > self.window:
            self._settle_one(next(iter(self.held)))

    def _settle_one(self, q):
        held, fut, nbytes = self.held.pop(q)
        ret, done = fut.result()
        self.held_bytes -= nbytes
        check(ret, f"AdamW step of '{q.name}'")
        check(done, f"tencache_op_done after the AdamW step of '{q.name}'")
        self._retire(q, held)

    def _step(self, t, hp, token):    # on the worker; t and hp live until it returns
        ret = self.lib.tencache_op_wait(self.cache, token)    # its tensors in place
        ret = ret or self.lib.tencache_adam_step(self.adam, ctypes.byref(hp), ctypes.byref(t))
        # done even when AdamW failed: the op's tensors are not written any more
        return ret, self.lib.tencache_op_done(self.cache, token)

    def wait(self):
        """Every launched update done (not released: outside a step)."""
        for _, fut, _ in self.held.values():
            fut.exception()

    def close(self):
        """Wait for the worker: it writes into cache memory until it is done."""
        self.wait()
        self.worker.close()
        self.ready.clear()
        self.held.clear()
        self.held_bytes = 0
