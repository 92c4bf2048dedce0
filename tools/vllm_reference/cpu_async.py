"""Runtime patches that let vLLM 0.32's async scheduling run on the CPU platform.

Imported by ``record.py`` and applied (``enable()``) only when a scenario asks for
``async_scheduling``; nothing under the vLLM installation is edited. With the patches the
engine runs what a GPU deployment with ``--async-scheduling`` runs: ``AsyncScheduler``
(output placeholders), ``EngineCore.step_with_batch_queue`` with a batch queue of 2
(``VllmConfig.max_concurrent_batches``), and the model runner's async output path
(``AsyncGPUModelRunnerOutput``, sampled tokens fed back on device through
``input_batch.prev_sampled_token_ids``). Only the CUDA stream/event plumbing, which has no
meaning on a CPU, becomes a no-op: the CPU forward pass is synchronous, so "wait for the copy"
is always already true.

Three patches, each the smallest that works:

1. ``vllm/platforms/cpu.py: CpuPlatform.check_and_update_config`` ends with
   ``scheduler_config.async_scheduling = False`` ("not required on CPU"). Wrapped: the value
   the caller asked for is put back after the platform hook. ``VllmConfig.__post_init__``
   has already validated it (``UniProcExecutor.supports_async_scheduling()`` is True), and
   ``max_concurrent_batches`` (hence ``EngineCore.batch_queue_size`` and ``step_fn``) is
   read from it later, when the engine core is built.
2. ``vllm/v1/worker/gpu_model_runner.py: GPUModelRunner.__init__`` (inherited by
   ``CPUModelRunner``) creates ``torch.cuda.Event(blocking=True)`` for
   ``prepare_inputs_event`` when async scheduling is on; a CPU build of torch cannot
   instantiate it ("Tried to instantiate dummy base class Event"). ``CPUModelRunner``
   already builds its parent inside ``cpu_model_runner._torch_cuda_wrapper``, which stubs
   ``torch.Event`` and ``torch.cuda.Stream`` but not ``torch.cuda.Event``: the wrapper is
   extended to stub that one too (record/synchronize are no-ops, as for the others).
3. ``vllm/v1/worker/gpu_model_runner.py: AsyncGPUModelRunnerOutput.__init__`` starts a
   non-blocking device-to-host copy on a side stream (``torch.cuda.current_stream``,
   ``torch.cuda.stream``, ``torch.cuda.Event``), none of which exist on a CPU build. The
   module-level name is replaced by a subclass whose ``__init__`` keeps the host tensors
   (cloned, as the real copy would be) and a no-op ready event; ``get_output`` is vLLM's own.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any

_enabled = False


class _NoEvent:
    """Stands for a CUDA event on the CPU: everything already happened."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def record(self, *args: Any, **kwargs: Any) -> None:
        pass

    def synchronize(self) -> None:
        pass

    def query(self) -> bool:
        return True


def enable() -> None:
    """Apply the three patches (idempotent). Call before building ``vllm.LLM``."""
    global _enabled
    if _enabled:
        return
    import torch
    from vllm.platforms import cpu as cpu_platform
    from vllm.v1.worker import cpu_model_runner, gpu_model_runner

    # -- 1. platforms/cpu.py: CpuPlatform.check_and_update_config forces async off --------
    original_check = cpu_platform.CpuPlatform.check_and_update_config.__func__

    def check_and_update_config(cls: type, vllm_config: Any) -> None:
        wanted = vllm_config.scheduler_config.async_scheduling
        original_check(cls, vllm_config)
        if wanted:  # only an explicit request is restored; None/False stay off
            vllm_config.scheduler_config.async_scheduling = True

    cpu_platform.CpuPlatform.check_and_update_config = classmethod(check_and_update_config)

    # -- 2. worker/cpu_model_runner.py: _torch_cuda_wrapper also stubs torch.cuda.Event ----
    # (GPUModelRunner.__init__ builds prepare_inputs_event = torch.cuda.Event(blocking=True))
    original_wrapper = cpu_model_runner._torch_cuda_wrapper

    @contextmanager
    def torch_cuda_wrapper():  # type: ignore[no-untyped-def]
        cuda_event = torch.cuda.Event
        try:
            torch.cuda.Event = _NoEvent  # type: ignore[misc, assignment]
            with original_wrapper():
                yield
        finally:
            torch.cuda.Event = cuda_event  # type: ignore[misc]

    cpu_model_runner._torch_cuda_wrapper = torch_cuda_wrapper

    # -- 3. worker/gpu_model_runner.py: AsyncGPUModelRunnerOutput without CUDA streams ----
    base = gpu_model_runner.AsyncGPUModelRunnerOutput

    class CpuAsyncModelRunnerOutput(base):  # type: ignore[misc, valid-type]
        def __init__(
            self,
            model_runner_output: Any,
            sampled_token_ids: Any,
            logprobs_tensors: Any,
            invalid_req_indices: list[int],
            async_output_copy_stream: Any,
            vocab_size: int,
            check_ep_fault: bool = False,
            num_nans: Any = None,
        ) -> None:
            # the fields vLLM's __init__ sets, the "copies" made synchronously on the host
            self._model_runner_output = model_runner_output
            self._invalid_req_indices = invalid_req_indices
            self.async_copy_ready_event = _NoEvent()
            self._sampled_token_ids = sampled_token_ids
            self.vocab_size = vocab_size
            self._logprobs_tensors = logprobs_tensors
            self._num_nans = num_nans
            self._has_fault = None  # no expert-parallel all2all on one CPU
            self.sampled_token_ids_cpu = sampled_token_ids.clone()
            self._logprobs_tensors_cpu = (
                logprobs_tensors.to_cpu_nonblocking() if logprobs_tensors else None
            )
            self._num_nans_cpu = num_nans.clone() if num_nans is not None else None

    gpu_model_runner.AsyncGPUModelRunnerOutput = CpuAsyncModelRunnerOutput
    _enabled = True
