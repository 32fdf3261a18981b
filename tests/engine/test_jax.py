"""The JAX backend: device flags, refusing a GPU that is missing, parity with the C backend,
build time against depth.

The backend is fixed when PyTensor is imported, so every training check runs the engine in
a fresh process with its own flags. With no GPU here, "JAX" means JAX on the CPU; the GPU
itself is checked by ``python bench/gpu.py`` on a GPU machine.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from tiers import skip_optional

from dnnframe.engine.backend import probe
from dnnframe.engine.flags import FlagWarning, translate
from dnnframe.engine.graphkey import process_dtype

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.filterwarnings("ignore::dnnframe.engine.flags.FlagWarning")


def _env(theano_flags: str = "", pytensor_flags: str = "", **extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("THEANO_FLAGS", "PYTENSOR_FLAGS", "JAX_PLATFORMS")
    }
    env.update(THEANO_FLAGS=theano_flags, PYTHONPATH=str(ROOT), **extra)
    if pytensor_flags:
        env["PYTENSOR_FLAGS"] = pytensor_flags
    return env


def _run(script: str, env: dict[str, str], timeout: int = 900) -> dict:
    """Run ``script`` in a fresh interpreter; it prints one JSON line last."""
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


# --------------------------------------------------------------------------- flags
@pytest.mark.parametrize(
    "device, index",
    [
        ("cuda", 0),
        ("cuda0", 0),
        ("cuda1", 1),
        ("gpu", 0),
        ("gpu0", 0),
        ("gpu3", 3),
        ("CUDA2", 2),
    ],
)
@pytest.mark.parametrize("variable", ["THEANO_FLAGS", "PYTENSOR_FLAGS"])
def test_every_gpu_spelling_selects_jax_on_that_gpu_in_float32(device, index, variable):
    text = f"device={device}"
    s = translate(text) if variable == "THEANO_FLAGS" else translate("", text)
    assert (s.backend, s.mode, s.device, s.gpu_index) == ("jax", "JAX", f"cuda:{index}", index)
    assert s.pytensor_flags["mode"] == "JAX" and "device" not in s.pytensor_flags
    assert s.pytensor_flags["floatX"] == "float32"  # Theano's GPU habit, now the default
    assert s.requested_device == device and s.device_error is None
    assert s.to_dict()["backend"] == "jax"


@pytest.mark.parametrize("text", ["", "device=cpu", "floatX=float32,device=cpu", "mode=FAST_RUN"])
def test_cpu_or_no_device_is_the_c_backend(text):
    s = translate(text)
    assert (s.backend, s.mode, s.device, s.gpu_index) == ("c", "CVM", "cpu", None)


@pytest.mark.parametrize("text", ["mode=JAX", "mode=jax"])
def test_mode_jax_alone_is_jax_on_the_cpu_with_floatx_untouched(text):
    s = translate(text)
    assert (s.backend, s.mode, s.device, s.gpu_index) == ("jax", "JAX", "cpu", None)
    assert "floatX" not in s.pytensor_flags  # PyTensor's default, float64


def test_floatx_is_honoured_on_a_gpu():
    assert translate("device=cuda,floatX=float64").pytensor_flags["floatX"] == "float64"
    assert (
        translate("device=cuda,floatX=float32", "floatX=float64").pytensor_flags["floatX"]
        == "float64"
    )


def test_a_gpu_keeps_theano_fast_run_and_drops_other_modes_with_a_warning():
    assert translate("mode=FAST_RUN,device=gpu").mode == "JAX"
    with pytest.warns(
        FlagWarning, match="mode=FAST_COMPILE is ignored: device=cuda trains through mode=JAX"
    ):
        s = translate("device=cuda,mode=FAST_COMPILE")
    assert s.mode == "JAX" and "mode" in s.dropped


def test_a_device_that_is_no_nvidia_gpu_is_an_error_not_a_cpu_run():
    s = translate("device=opencl0")
    assert s.device_error == (
        "device=opencl0 cannot be used: dnnframe trains on device=cpu or an "
        "NVIDIA GPU (device=cuda, cudaN, gpu, gpuN)"
    )


@pytest.mark.parametrize(
    "flags, dtype",
    [
        ("", "float64"),
        ("device=cpu", "float64"),
        ("device=cuda", "float32"),
        ("device=gpu1,floatX=float64", "float64"),
        ("mode=JAX", "float64"),
    ],
)
def test_the_keys_dtype_follows_the_gpu_default(monkeypatch, flags, dtype):
    monkeypatch.setenv("THEANO_FLAGS", flags)
    monkeypatch.delenv("PYTENSOR_FLAGS", raising=False)
    assert process_dtype() == dtype


# --------------------------------------------------------------------------- refusal
_GPU_REASON = probe(_env("device=cuda"))


@pytest.fixture
def no_gpu() -> None:
    """Skips on a machine with a usable GPU: a GPU's presence is a skip CI accepts."""
    if _GPU_REASON is None:
        skip_optional("a usable GPU is present here")


needs_no_gpu = pytest.mark.usefixtures("no_gpu")


@needs_no_gpu
def test_probe_names_why_the_gpu_cannot_be_used():
    assert _GPU_REASON.startswith("device=cuda but ")
    assert "\n" not in _GPU_REASON


@needs_no_gpu
@pytest.mark.parametrize(
    "args, flags, device",
    [
        (["--queues=gpu"], "", "cuda"),  # the gpu queue implies device=cuda
        (["--queues=default"], "device=cuda1,floatX=float32", "cuda1"),
    ],
)
def test_worker_refuses_to_start_without_a_usable_gpu(args, flags, device):
    # a port nothing listens on: a worker that did start would retry there until the timeout
    cmd = [
        sys.executable,
        "-c",
        "from dnnframe.cli import main; main()",
        "worker",
        *args,
        "--broker",
        "amqp://guest:guest@127.0.0.1:1//",
    ]
    proc = subprocess.run(
        cmd, env=_env(flags), cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 1, proc.stderr[-2000:]
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith(f"error: refusing to start the worker: device={device} but "), line


def test_worker_refuses_an_unknown_device():
    cmd = [
        sys.executable,
        "-c",
        "from dnnframe.cli import main; main()",
        "worker",
        "--broker",
        "amqp://guest:guest@127.0.0.1:1//",
    ]
    proc = subprocess.run(
        cmd, env=_env("device=opencl0"), cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 1
    assert proc.stderr.strip() == (
        "error: refusing to start the worker: device=opencl0 cannot be "
        "used: dnnframe trains on device=cpu or an NVIDIA GPU (device=cuda, "
        "cudaN, gpu, gpuN)"
    )


@needs_no_gpu
def test_a_trial_asking_for_a_missing_gpu_fails_with_the_reason_and_never_trains(tmp_path):
    out = _run(
        f"""
        import json
        from dnnframe.runner import run_pack
        from dnnframe.spec import expand_with_ids, parse_spec
        from dnnframe.store import open_store
        store = open_store("sqlite:///{tmp_path / "gpu.db"}")
        spec = parse_spec({{"name": "gpu", "dataset": {{"name": "iris"}},
                           "model": {{"hidden_layers": 2, "width": 8}}, "training": {{"max_epochs": 2}}}})
        pairs = [(tid, cfg.model_dump(mode="json")) for tid, cfg in expand_with_ids(spec)]
        store.create_experiment(spec.experiment_id, spec.name, spec.to_dict(), len(pairs))
        store.create_trials(spec.experiment_id, pairs)
        run_pack([pairs[0][0]], store, worker="w")
        t = store.get_trial(pairs[0][0])
        print(json.dumps({{"state": t.state.value, "error": t.error, "result": t.result}}))
    """,
        _env("device=cuda"),
    )
    assert out["state"] == "FAILED" and out["result"] is None
    (line,) = out["error"].strip().splitlines()  # the reason, not a traceback
    assert line.startswith("dnnframe.engine.backend.DeviceUnavailableError: device=cuda but "), line


# --------------------------------------------------------------------------- parity
def _cfg(depth=3, width=16, activation="tanh", optimizer="sgd", lr=0.05, epochs=4, **extra):
    model = {
        "hidden_layers": depth,
        "width": width,
        "activation": activation,
        **extra.pop("model", {}),
    }
    training = {
        "optimizer": optimizer,
        "learning_rate": lr,
        "batch_size": 35,
        "max_epochs": epochs,
        "momentum": 0.9,
        **extra.pop("training", {}),
    }
    return {
        "dataset": {"name": "iris"},
        "seed": extra.pop("seed", 3),
        "model": model,
        "training": training,
    }


# batch 35 divides iris's 105 training rows: one train-step shape to compile per graph
PARITY = {
    "sgd-tanh": _cfg(),
    "momentum-relu-mixed-widths": _cfg(
        width=[16, 8, 8], activation="relu", optimizer="momentum", lr=0.01
    ),
    "nesterov-elu-residual": _cfg(
        depth=6, activation="elu", optimizer="nesterov", lr=0.01, model={"residual": True}
    ),
    "adam-selu-l2": _cfg(
        depth=2,
        activation="selu",
        optimizer="adam",
        lr=0.003,
        model={"init": "lecun"},
        training={"l2": 0.001},
    ),
    "rmsprop-sigmoid-squared-error": _cfg(
        activation="sigmoid", optimizer="rmsprop", lr=0.003, model={"loss": "squared_error"}
    ),
    # orthogonal tanh keeps a deep stack well conditioned: a residual stack of 500 glorot
    # layers has gradients so large that rounding differences grow into different curves
    "depth-500": _cfg(depth=500, width=8, lr=0.01, epochs=2, model={"init": "orthogonal"}),
    "early-stopping": _cfg(
        lr=0.5,
        epochs=40,  # the graph of sgd-tanh
        training={"early_stopping": {"patience": 2, "metric": "val_loss"}},
    ),
    "diverges": _cfg(activation="linear", lr=1.0, epochs=10, model={"loss": "squared_error"}),
    # the layer designs: normalisation, scaled residual branches, clipping, schedules
    "rezero-batchnorm-clip-cosine": _cfg(
        depth=5,
        optimizer="adam",
        lr=0.01,
        model={"residual": "rezero", "normalization": "batch"},
        training={"grad_clip": 1.0, "lr_schedule": {"kind": "cosine", "warmup_epochs": 1}},
    ),
    "prenorm-layernorm-scaled-skipinit": _cfg(
        depth=6,
        activation="relu",
        lr=0.05,
        model={
            "residual": "scaled",
            "residual_learnable": True,
            "normalization": "layer",
            "norm_position": "pre",
        },
        training={"lr_schedule": "step"},
    ),
}
PACK = [_cfg(depth=2, lr=lr, optimizer="adam") for lr in (0.001, 0.01, 0.1)]
PACK_DROPOUT = [_cfg(depth=2, lr=0.01, seed=s, model={"dropout": 0.2}) for s in (1, 2)]

_PARITY_SCRIPT = """
    import json, sys
    from dnnframe.engine import train, train_pack
    configs, pack, pack_dropout = json.loads(sys.argv[1])
    def view(r):
        return {"status": r.status, "metrics": r.metrics, "epochs_run": r.epochs_run,
                "best_epoch": r.best_epoch, "stopped_early": r.stopped_early,
                "diverged_epoch": r.diverged_epoch,
                "train_loss": [h["train_loss"] for h in r.history]}
    out = {name: view(train(cfg)) for name, cfg in configs.items()}
    out["pack"] = [view(r) for r in train_pack(pack)]
    out["pack_dropout"] = [view(r) for r in train_pack(pack_dropout)]
    dropout = dict(pack_dropout[0])
    out["dropout_twice"] = [view(train(dropout)), view(train(dropout))]
    out["environment"] = train(configs["sgd-tanh"]).environment
    print(json.dumps(out))
"""


def _parity_run(pytensor_flags: str) -> dict:
    script = _PARITY_SCRIPT.replace("sys.argv[1]", repr(json.dumps([PARITY, PACK, PACK_DROPOUT])))
    return _run(script, _env(pytensor_flags=pytensor_flags))


@pytest.fixture(scope="module")
def both_backends() -> tuple[dict, dict]:
    # the host's own compile caches, as a user's runs have them: what is compared is what
    # each backend computes, and a fresh build of each case is the build tests' concern
    # (test_the_program_jax_compiles_..., tests/engine/test_caches.py)
    return _parity_run(""), _parity_run("mode=JAX")


def _same(c: dict, j: dict, where: str) -> None:
    for field in ("status", "epochs_run", "best_epoch", "stopped_early", "diverged_epoch"):
        assert c[field] == j[field], f"{where}: {field} {c[field]} (C) != {j[field]} (JAX)"
    for name, value in c["metrics"].items():
        if value is None:
            assert j["metrics"][name] is None, (where, name)
        else:
            assert j["metrics"][name] == pytest.approx(value, rel=1e-6, abs=1e-9, nan_ok=True), (
                where,
                name,
            )
    curves = [
        [math.nan if v is None else v for v in r["train_loss"]] for r in (c, j)
    ]  # None: diverged
    assert curves[1] == pytest.approx(curves[0], rel=1e-6, abs=1e-9, nan_ok=True), where


@pytest.mark.slow
@pytest.mark.parametrize("name", list(PARITY))
def test_same_trial_and_seed_give_the_same_metrics_on_c_and_jax(both_backends, name):
    c, j = both_backends
    _same(c[name], j[name], name)


@pytest.mark.slow
def test_the_cases_exercise_what_they_name(both_backends):
    c, _ = both_backends
    assert c["early-stopping"]["stopped_early"] and c["early-stopping"]["epochs_run"] < 40
    assert c["diverges"]["status"] == "DIVERGED"
    assert all(c[n]["status"] == "COMPLETE" for n in PARITY if n != "diverges")


@pytest.mark.slow
def test_packs_give_the_same_metrics_on_c_and_jax(both_backends):
    c, j = both_backends
    for key in ("pack", "pack_dropout"):  # pack dropout masks come from NumPy: equal too
        for k, (rc, rj) in enumerate(zip(c[key], j[key])):
            _same(rc, rj, f"{key}[{k}]")


@pytest.mark.slow
def test_jax_dropout_replays_for_the_same_seed(both_backends):
    _, j = both_backends
    first, second = j["dropout_twice"]
    assert first["train_loss"] == second["train_loss"] and first["metrics"] == second["metrics"]


@pytest.mark.slow
def test_the_environment_records_backend_and_device(both_backends):
    c, j = both_backends
    assert c["environment"]["backend"] == "c" and j["environment"]["backend"] == "jax"
    for env in (c["environment"], j["environment"]):
        assert env["device"] == "cpu" and env["device_name"]
    assert (
        j["environment"]["mode"] == "JAX" and j["environment"]["jax"] and j["environment"]["jaxlib"]
    )
    assert j["environment"]["cuda"] is None  # JAX on the CPU


# --------------------------------------------------------------------------- build time
@pytest.mark.slow
def test_the_program_jax_compiles_at_depth_1000_is_the_size_of_depth_10s(tmp_path):
    """What XLA compiles, counted in operations (every inner loop's body included) rather
    than timed: no larger at depth 1,000 than at depth 10, so build time cannot grow with
    depth. Each jitted function is traced once per distinct input signature it is called
    with."""
    base = json.dumps(_cfg(epochs=1, lr=0.001, model={"residual": True}))
    out = _run(
        f"""
        import json
        import jax
        from pytensor.link.jax.linker import JAXLinker

        def size(jaxpr):
            n = 0
            for eqn in jaxpr.eqns:
                n += 1
                for value in eqn.params.values():
                    for inner in value if isinstance(value, (list, tuple)) else [value]:
                        inner = getattr(inner, "jaxpr", inner)
                        if hasattr(inner, "eqns"):
                            n += size(inner)
            return n

        traced = []
        real_jit_compile = JAXLinker.jit_compile

        def counting_jit_compile(self, fn):
            compiled = real_jit_compile(self, fn)
            static = tuple(self.scalar_shape_inputs)
            seen = set()

            def call(*inputs):
                inputs = tuple(int(x) if i in static else x for i, x in enumerate(inputs))
                signature = tuple(x if i in static else getattr(x, "shape", x)
                                  for i, x in enumerate(inputs))
                if signature not in seen:
                    seen.add(signature)
                    closed = jax.make_jaxpr(fn, static_argnums=static)(*inputs)
                    traced.append(size(closed.jaxpr))
                return compiled(*inputs)
            return call

        JAXLinker.jit_compile = counting_jit_compile
        from dnnframe.engine import train
        base = json.loads({base!r})
        def cfg(depth):
            return {{**base, "model": {{**base["model"], "hidden_layers": depth}}}}
        sizes = {{}}
        for depth in (10, 1000):
            before = len(traced)
            result = train(cfg(depth))
            assert result.status == "COMPLETE", result.error
            sizes[depth] = traced[before:]
        print(json.dumps(sizes))
    """,
        _env(pytensor_flags="mode=JAX", DNNFRAME_CACHE_DIR=str(tmp_path)),
    )
    assert out["10"], "no JAX program was traced: the run did not go through JAX"
    # depth 1,000 may need no new trace at all; any it needs is one of depth 10's sizes
    assert set(out["1000"]) <= set(out["10"]), f"operations traced by depth: {out}"
