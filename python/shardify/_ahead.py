"""A Loader's transform run ahead of the training loop in a helper thread, so that the
loop's next() takes a finished batch instead of launching (or computing) the transform."""

import contextlib
import queue
import threading

_POLL_S = 0.05  # how often a blocked hand-over looks for a stop or a dead helper
_END = object()


class TransformAhead:
    """Takes batches from the C++ loader `core` from (epoch, step) to the end of the epoch,
    transforms them and queues up to `depth` finished ones. With a CUDA device the helper
    works on its own stream: it waits there for each staged batch, transforms there, and
    records an event that the loop's stream (current when the iteration began) waits for
    when it takes the batch. The staged buffers are reused only after that stream's work
    is done (they are released on it), and tensors the transform allocated are marked as
    used by it, so the caching allocator does not hand them to the helper too soon."""

    def __init__(self, loader, core, epoch, step, depth):
        self._loader, self._core = loader, core
        self._queue = queue.Queue(depth)
        self._stop = threading.Event()
        torch, cuda = loader._torch, loader._cuda
        self._torch = torch
        self._cuda = cuda
        self._stream = torch.cuda.Stream(cuda) if cuda is not None else None
        self._consumer = torch.cuda.current_stream(cuda) if cuda is not None else None
        self._thread = threading.Thread(target=self._produce, args=(epoch, step), daemon=True,
                                        name="shardify-transform-ahead")
        self._thread.start()

    def take(self):
        """The next finished batch and the Loader position after it; None at the epoch's end.
        Raises what the transform (or the C++ loader) raised, after moving the position past
        the batch that raised it."""
        while True:
            try:
                item = self._queue.get(timeout=_POLL_S)
                break
            except queue.Empty:
                if not self._thread.is_alive() and self._queue.empty():
                    raise RuntimeError("shardify.Loader: the transform thread ended without handing over its "
                                       "batches") from None
        if item is _END:
            return None
        kind, value, pos, done = item
        if kind == "error":
            if pos is not None:
                self._loader._pos = pos
            raise value
        batch, raw = value
        if self._consumer is not None:
            self._consumer.wait_event(done)
            for t in batch.values():
                if isinstance(t, self._torch.Tensor) and t.is_cuda:
                    t.record_stream(self._consumer)
        # `raw`, the staged input, is freed here: its buffers are released on the loop's
        # stream, after the transform (waited for above) and the work queued before it.
        del raw
        return batch, pos

    def stop(self):
        """Stops the helper and drops what it queued; returns when it has ended."""
        self._stop.set()
        self._thread.join()  # a hand-over waiting for room gives up within _POLL_S
        self._order_after_helper()  # before the inputs of the batches dropped here are released
        self._drain()

    def _order_after_helper(self):
        """Makes the loop's stream wait for the work queued on the helper's stream so far: the
        inputs of batches the loop never takes are released on the loop's stream, and their
        buffers must not be refilled before their transforms have read them."""
        if self._stream is not None:
            self._consumer.wait_stream(self._stream)

    def _drain(self):
        try:
            while True:
                self._queue.get_nowait()
        except queue.Empty:
            pass

    def _put(self, item):
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=_POLL_S)
                return True
            except queue.Full:
                pass
        return False

    def _produce(self, epoch, step):
        loader, torch = self._loader, self._torch
        n = loader._batches
        pos = None
        try:
            with self._on_device():
                wait = self._stream.cuda_stream if self._stream is not None else 0
                release = self._consumer.cuda_stream if self._consumer is not None else 0
                while step < n and not self._stop.is_set():
                    raw = self._core.next(loader._convert, wait, torch is not None, release)
                    if raw is None:
                        break
                    pos = loader._core_pos = loader._position_after(epoch, step)
                    batch = loader._prepare(dict(raw), epoch, step)
                    step += 1
                    done = None
                    if self._stream is not None:
                        done = torch.cuda.Event()
                        done.record(self._stream)
                    if not self._put(("batch", (batch, raw), pos, done)):
                        self._order_after_helper()
                        return
                    del raw, batch
        except BaseException as e:  # handed to the loop, which raises it (its frames hold the input)
            self._order_after_helper()
            self._put(("error", e, pos, None))
            return
        self._put(_END)

    def _on_device(self):
        if self._stream is None:
            return contextlib.nullcontext()
        stack = contextlib.ExitStack()
        stack.enter_context(self._torch.cuda.device(self._cuda))
        stack.enter_context(self._torch.cuda.stream(self._stream))
        return stack
