"""Tests of tfwb.workloads: the registry of (model_fn, data_fn, loss) and RunConfig's view of it."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import tfwb
from tfwb.config import RunConfig
from tfwb.workloads import SOURCE_KNOBS, Ref, Workload, get_workload, register_workload, unregister_workload, workload_names

NAME = "test-workloads-mine"


def model_a(cfg):
    return "model a"


def model_b(cfg):
    return "model b"


def data_a(cfg):
    return "data a"


@pytest.fixture(autouse=True)
def clean_registry():
    unregister_workload(NAME)
    yield
    unregister_workload(NAME)


def test_builtins_come_first_and_are_lazy_references():
    assert workload_names()[:2] == ("images", "mlp")
    for name in ("images", "mlp"):
        w = get_workload(name)
        assert w.builtin and callable(w.model_fn) and callable(w.data_fn)
        assert w.model_fn == Ref(f"tfwb.tf.workloads.{name}:model")
    assert get_workload("images").source_fn == Ref("tfwb.tf.workloads.images:source")
    assert get_workload("mlp").source_fn is None


def test_register_then_use_in_runconfig():
    with pytest.raises(ValueError):
        RunConfig(workload=NAME)
    w = register_workload(NAME, model_fn=model_a, data_fn=data_a, description="mine")
    assert (w.name, w.builtin, w.description, w.loss) == (NAME, False, "mine", None)
    assert set(w.data_sources) == {"files", "memory"} and w.source_knobs == ()
    assert get_workload(NAME) is w
    assert NAME in workload_names()
    assert RunConfig(workload=NAME).workload == NAME


def test_public_register_is_the_same_function():
    assert tfwb.register_workload is register_workload


def test_register_replaces_a_user_workload():
    register_workload(NAME, model_fn=model_a, data_fn=data_a)
    loss = object()
    register_workload(NAME, model_fn=model_b, data_fn=data_a, loss=loss)
    w = get_workload(NAME)
    assert w.model_fn.fn is model_b and w.loss is loss      # wrapped: what it returns is checked
    assert workload_names().count(NAME) == 1


def test_unregister_then_runconfig_fails_listing_names():
    register_workload(NAME, model_fn=model_a, data_fn=data_a)
    cfg = RunConfig(workload=NAME)
    unregister_workload(NAME)
    assert NAME not in workload_names()
    with pytest.raises(ValueError) as info:
        RunConfig(workload=NAME)
    msg = str(info.value)
    assert f"workload={NAME!r}" in msg and "'images'" in msg
    with pytest.raises(ValueError) as info:
        get_workload(NAME)
    assert NAME in str(info.value) and "'images'" in str(info.value)
    # A config built before still exists, but copies of it are re-validated.
    with pytest.raises(ValueError, match="workload"):
        cfg.replace(batch_size=8)


def test_unregister_unknown_is_ignored_and_builtins_stay():
    unregister_workload("never-registered")
    unregister_workload("images")
    assert "images" in workload_names()
    assert get_workload("images").builtin


def test_builtin_cannot_be_replaced():
    before = get_workload("images")
    with pytest.raises(ValueError, match="built-in"):
        register_workload("images", model_fn=model_a, data_fn=data_a)
    assert get_workload("images") is before


@pytest.mark.parametrize("name", ["", "   ", None, 3])
def test_bad_names_rejected(name):
    with pytest.raises(ValueError, match="name="):
        register_workload(name, model_fn=model_a, data_fn=data_a)


@pytest.mark.parametrize("arg", ["model_fn", "data_fn"])
@pytest.mark.parametrize("bad", [None, "model", 3])
def test_non_callable_factories_rejected_naming_the_argument(arg, bad):
    kwargs = {"model_fn": model_a, "data_fn": data_a, arg: bad}
    with pytest.raises(ValueError) as info:
        register_workload(NAME, **kwargs)
    assert f"{arg}=" in str(info.value) and "callable" in str(info.value) and "module:attribute" in str(info.value)
    assert NAME not in workload_names()


# -- what a workload declares ---------------------------------------------------------------------
def test_images_honours_every_source_knob_and_data_source():
    w = get_workload("images")
    assert set(w.data_sources) == {"files", "generator", "memory"}
    assert all(w.applies(k) for k in SOURCE_KNOBS)


def test_mlp_honours_generic_knobs_only():
    w = get_workload("mlp")
    assert set(w.data_sources) == {"files", "memory"}
    assert not any(w.applies(k) for k in SOURCE_KNOBS)
    assert w.applies("cache") and w.applies("prefetch") and w.applies("jit_compile")
    cfg = RunConfig(workload="mlp", interleave=True, parallel_map=True, storage_latency_ms=0.0)
    assert w.unused_knobs(cfg) == ("storage_latency_ms", "parallel_map", "interleave")   # declaration order
    assert w.unused_knobs(RunConfig(workload="mlp")) == ()


@pytest.mark.parametrize("name", ["mlp", NAME])
def test_a_data_source_the_workload_lacks_is_refused_naming_field_and_choices(name):
    register_workload(NAME, model_fn=model_a, data_fn=data_a)
    with pytest.raises(ValueError) as info:          # at construction, before any work
        RunConfig(workload=name, data_source="generator")
    msg = str(info.value)
    assert f"data_source='generator' does not apply to workload {name!r}" in msg
    assert "'files'" in msg and "'memory'" in msg
    get_workload("images").check(RunConfig(data_source="generator"))    # no error


def test_unknown_source_knobs_are_refused():
    with pytest.raises(ValueError, match="source_knobs="):
        Workload("x", model_a, data_a, source_knobs=("interleave", "turbo"))


# -- lazy "module:attribute" factories -------------------------------------------------------------
def test_ref_imports_at_first_call_and_names_its_role():
    assert Ref("math:floor")(2.5) == 2
    missing = Ref("tfwb_no_such_module:model", "model_fn of workload 'x'")
    with pytest.raises(ValueError) as info:
        missing(None)
    assert "model_fn of workload 'x'='tfwb_no_such_module:model'" in str(info.value)
    with pytest.raises(ValueError, match="not callable"):
        Ref("math:pi")()
    for bad in ("math", "math:", ":floor", "math floor:x"):
        with pytest.raises(ValueError, match="module:attribute"):
            Ref(bad)


def test_a_workload_is_a_module_plus_a_registration(tmp_path, monkeypatch):
    (tmp_path / "tfwb_test_lazy_workload.py").write_text(
        "def model(cfg):\n    return ('model', cfg)\n\n"
        "def data(cfg):\n    return ('data', cfg)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    w = register_workload(NAME, model_fn="tfwb_test_lazy_workload:model",
                          data_fn="tfwb_test_lazy_workload:data")
    assert "tfwb_test_lazy_workload" not in sys.modules, "nothing is imported at registration"
    cfg = RunConfig(workload=NAME)
    assert w.model_fn.resolve()(cfg) == ("model", cfg) and w.data_fn.resolve()(cfg) == ("data", cfg)
    with pytest.raises(ValueError, match="returned a builtins.tuple"):   # a call checks what it returns
        w.model_fn(cfg)
    assert "tfwb_test_lazy_workload" in sys.modules
    monkeypatch.delitem(sys.modules, "tfwb_test_lazy_workload")


# -- the import structure ----------------------------------------------------------------------------
PACKAGE = Path(__file__).resolve().parents[1] / "tfwb"
PURE = ("tfwb", "tfwb.config", "tfwb.workloads", "tfwb.knobs", "tfwb.stats", "tfwb.records",
        "tfwb.render", "tfwb.analysis.diagnosis", "tfwb.expect")


def _modules() -> dict:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _imports(name: str, path: Path, modules: dict, *, inside_functions: bool = True) -> set:
    """The modules ``name`` imports: at module level, and inside functions too if asked."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text())
    nodes = ast.walk(tree) if inside_functions else [
        n for top in tree.body for n in (ast.walk(top) if isinstance(top, (ast.If, ast.Try)) else [top])]
    found = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for a in node.names:
                sub = f"{target}.{a.name}"
                found.add(sub if sub in modules else target)
    return found


def _circles(graph: dict) -> list:
    """Every import circle a depth-first walk of ``graph`` meets, as module lists."""
    state: dict = {}
    found = []

    def visit(m, trail):
        state[m] = "open"
        for t in sorted(graph[m]):
            if state.get(t) == "open":
                found.append(trail[trail.index(t):] + [t])
            elif t not in state:
                visit(t, trail + [t])
        state[m] = "done"

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
    return found


def _graph(inside_functions: bool) -> dict:
    modules = _modules()
    return {m: {t for t in _imports(m, p, modules, inside_functions=inside_functions)
                if t in modules and t != m} for m, p in modules.items()}


def test_the_package_has_no_import_circle_at_module_level():
    assert _circles(_graph(inside_functions=False)) == []


def test_config_workloads_and_tf_form_no_circle_even_through_lazy_imports():
    graph = _graph(inside_functions=True)
    core = [m for m in graph if m in ("tfwb.config", "tfwb.knobs", "tfwb.workloads")
            or m == "tfwb.tf" or m.startswith("tfwb.tf.")]
    on_a_circle = []
    for start in core:                         # is ``start`` reachable from what it imports?
        seen, todo = set(), list(graph[start])
        while todo:
            m = todo.pop()
            if m == start:
                on_a_circle.append(start)
                break
            if m not in seen:
                seen.add(m)
                todo.extend(graph[m])
    assert on_a_circle == [], _circles(graph)


def test_pure_modules_never_import_tensorflow_or_tfwb_tf():
    modules = _modules()
    for name in PURE:
        imported = _imports(name, modules[name], modules)
        heavy = {i for i in imported if i.split(".")[0] in ("tensorflow", "keras") or i.startswith("tfwb.tf")}
        assert not heavy, f"{name} imports {sorted(heavy)}"


def test_pure_layer_in_a_fresh_process_leaves_tensorflow_unloaded():
    code = (
        "import sys\n"
        f"import {', '.join(PURE)}\n"
        "from tfwb.config import RunConfig\n"
        "from tfwb.workloads import get_workload, register_workload, workload_names\n"
        "RunConfig(workload='mlp', size='small'); workload_names()\n"
        "get_workload('images').applies('interleave'); get_workload('mlp').check(RunConfig(workload='mlp'))\n"
        "register_workload('lazy', model_fn='some.module:model', data_fn='some.module:data')\n"
        "RunConfig(workload='lazy')\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'keras') or m.startswith('tfwb.tf'))\n"
        "print(heavy)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         cwd=str(PACKAGE.parent))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_the_text_workload_is_tensor_core_shaped_and_learnable():
    pytest.importorskip("tensorflow")
    import numpy as np

    import tfwb
    from tfwb.tf.workloads import text

    for spec in text.SPECS.values():
        assert all(v % 8 == 0 for v in (spec.seq_len, spec.d_model, spec.d_model // spec.heads, spec.ff))
    tokens, labels = text.rows("small", seed=3)
    assert ((tokens == labels[:, None]).sum(axis=1) == 1).all()     # exactly one marker, the label's
    r = tfwb.run(RunConfig(workload="text", size="small", batch_size=32, steps=30, warmup_steps=2,
                           sample_interval_s=0.05))
    assert r.ok, r.error
    assert np.mean(r.losses[-5:]) < 0.8 * np.mean(r.warmup_losses)


# -- what a user's factories return is checked (issue 20, item 2) ------------------------------
def _cfg():
    return RunConfig(_check_workload=False)


def test_a_model_fn_that_returns_no_keras_model_says_what_it_returned_and_what_is_needed():
    w = register_workload(NAME, model_fn=model_a, data_fn=data_a)
    with pytest.raises(ValueError, match=r"model_fn of workload 'test-workloads-mine' returned a builtins.str "
                                         r"\('model a'\); it must return a keras.Model"):
        w.model_fn(_cfg())


def test_a_model_class_instead_of_an_instance_is_told_to_call_it():
    import keras

    w = register_workload(NAME, model_fn=lambda cfg: keras.Sequential, data_fn=data_a)
    with pytest.raises(ValueError, match="returned a class .*call it"):
        w.model_fn(_cfg())


def test_a_data_fn_that_returns_arrays_or_unlabelled_elements_is_refused_naming_both():
    import numpy as np
    import tensorflow as tf

    x = np.zeros((8, 4), "float32")
    cases = {
        "returned a builtins.tuple": lambda cfg: (x, x[:, 0]),
        "a dataset without labels: its elements are single tensors": lambda cfg: tf.data.Dataset.from_tensor_slices(x),
        "elements are a dict with keys \\['image', 'label'\\]":
            lambda cfg: tf.data.Dataset.from_tensor_slices({"image": x, "label": x[:, 0]}),
        "looks batched": lambda cfg: tf.data.Dataset.from_tensor_slices((x, x[:, 0].astype("int32"))).batch(4),
        "labels of shape \\(3,\\); the default loss": lambda cfg: tf.data.Dataset.from_tensor_slices(
            (x, np.zeros((8, 3), "float32"))),
    }
    for message, fn in cases.items():
        w = register_workload(NAME, model_fn=model_a, data_fn=fn)
        with pytest.raises(ValueError, match=message):
            w.data_fn(_cfg())


def test_one_hot_labels_pass_with_a_loss_of_their_own_and_the_model_shape_is_checked_against_the_data():
    import keras
    import numpy as np
    import tensorflow as tf

    x = np.zeros((8, 4), "float32")
    one_hot = lambda cfg: tf.data.Dataset.from_tensor_slices((x, np.zeros((8, 3), "float32")))  # noqa: E731
    wrong = lambda cfg: keras.Sequential([keras.Input((5,)), keras.layers.Dense(3)])           # noqa: E731
    w = register_workload(NAME, model_fn=wrong, data_fn=one_hot,
                          loss=keras.losses.CategoricalCrossentropy(from_logits=True))
    w.data_fn(_cfg())
    with pytest.raises(ValueError, match=r"input shape is \(batch, 5\) but data_fn's elements have features "
                                         r"of shape \(4,\)"):
        w.model_fn(_cfg())
    right = register_workload(NAME, model_fn="tests.fakes:tiny_model", data_fn="tests.fakes:tiny_data")
    assert isinstance(right.model_fn, Ref)                      # still a Ref: the cluster can name it
    right.data_fn(_cfg())
    assert right.model_fn(_cfg()).inputs[0].shape[1:] == (4,)


def test_resolve_factory_registers_what_a_module_function_returns(tmp_path, monkeypatch):
    from tfwb.workloads import resolve_factory

    (tmp_path / "j8_user_work.py").write_text(
        "import tfwb\n"
        f"def register():\n    return tfwb.register_workload({NAME!r}, 'tests.fakes:tiny_model', 'tests.fakes:tiny_data')\n"
        f"def by_name():\n    register(); return {NAME!r}\n"
        "def needs_args(x):\n    return x\n"
        "NOT_A_FACTORY = 3\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert resolve_factory("mlp") == "mlp"
    assert resolve_factory("j8_user_work:register") == NAME and get_workload(NAME).name == NAME
    unregister_workload(NAME)
    assert resolve_factory("j8_user_work:by_name") == NAME
    with pytest.raises(ValueError, match="'j8_user_work:NOT_A_FACTORY' is a builtins.int"):
        resolve_factory("j8_user_work:NOT_A_FACTORY")
    with pytest.raises(ValueError, match="could not be called with no arguments"):
        resolve_factory("j8_user_work:needs_args")
    with pytest.raises(ValueError, match="cannot be loaded .*ModuleNotFoundError"):
        resolve_factory("no_such_module_j8:register")
    with pytest.raises(ValueError, match="is not allowed; workload must be one of .* or 'module:function'"):
        resolve_factory("nothing-here")


# -- what a model is made of (issue 35: a CPU rule depends on it) ------------------------------------
def test_made_of_is_validated_naming_the_value_and_the_parts():
    w = register_workload(NAME, model_fn=model_a, data_fn=data_a, made_of=["dense", "embeddings", "dense"])
    assert w.made_of == ("dense", "embeddings") and get_workload(NAME).made_of == ("dense", "embeddings")
    assert register_workload(NAME, model_fn=model_a, data_fn=data_a).made_of == ()     # unknown by default
    for bad, match in (("dense", r"made_of='dense' is not allowed; a tuple of some of"),
                       (("dense", "lstm"), r"'lstm' is not a part; made_of must be some of \('convolutions'")):
        with pytest.raises(ValueError, match=match):
            register_workload(NAME, model_fn=model_a, data_fn=data_a, made_of=bad)


def test_each_builtin_declares_what_its_model_is_made_of():
    from tfwb.workloads import MADE_OF, PARTS

    assert {n: get_workload(n).made_of for n in MADE_OF} == MADE_OF
    assert all(get_workload(n).made_of and set(get_workload(n).made_of) <= set(PARTS) for n in MADE_OF)


@pytest.mark.parametrize("name", ("images", "mlp", "text", "cifar10"))
def test_a_builtin_models_layers_are_what_it_declares(name):
    pytest.importorskip("tensorflow")
    import tfwb.tf  # noqa: F401  (TensorFlow, quietly)

    model = get_workload(name).model_fn(RunConfig(workload=name, size="small"))
    kinds = {type(layer).__name__ for layer in model._flatten_layers(include_self=False, recursive=True)}
    found = {part for part, names in (("convolutions", ("Conv1D", "Conv2D", "Conv3D", "DepthwiseConv2D",
                                                        "SeparableConv2D")),
                                      ("dense", ("Dense", "EinsumDense")), ("embeddings", ("Embedding",)))
             if kinds & set(names)}
    assert found == set(get_workload(name).made_of), sorted(kinds)
