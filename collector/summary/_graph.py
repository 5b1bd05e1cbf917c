"""A torch network as an anf_ir ``GraphProto`` that MindInsight's graph page draws.

How the graph is obtained, in order (one log line says which one when it is not the first):
``torch.fx.symbolic_trace`` of the network; ``torch.export.export`` when tracing fails and
example inputs are given; else the leaf modules in registration order, chained.

How it is written (MindSpore 2.10's shape, docs/summary-format.md):

* nodes named ``'1'``, ``'2'``, ... in execution order; ``scope`` is the module path, each
  level ``{attribute}-{ClassName}`` under ``Default``; ``full_name`` is
  ``{scope}/{op_type}-op{k}``; ``instance_name`` the fx node's name;
* inputs name a graph input, a parameter or buffer, another node or a constant
  (``const_vals``); ``parameters`` are the graph inputs, then every parameter and buffer a
  node uses, with dtype and shape; ``outputs`` the node(s) the network returns.

Operator types are named as MindSpore names its primitives, so that MindInsight shows
familiar nodes (``nn.Linear`` is ``MatMul`` + ``BiasAdd``, ``+`` is ``Add``, ``view`` is
``Reshape``, ...; the table is ``_OP_TYPES``; anything else its name in CamelCase).

Shapes: with ``example_inputs`` they are propagated with fake tensors (no computation, no
change to batch-norm statistics). Without, an input consumed by a ``Linear`` is given a batch
of two zero samples and propagated, the first dimension shown as -1; for other inputs only
parameters carry shapes (how :class:`SummaryRecord` builds a network's graph). Nothing is
printed when shapes cannot be propagated; the library's logger says why at DEBUG level.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Sequence
from typing import Any

import torch
from torch import nn

from collector.common import unwrap_module
from collector.summary import _proto as proto

logger = logging.getLogger(__name__)

__all__ = ["build_graph"]

#: The batch size of a guessed input (see :func:`_guess_input_shape`).
_GUESSED_BATCH = 2

_OP_TYPES = {
    "add": "Add", "iadd": "Add", "add_": "Add", "sub": "Sub", "isub": "Sub", "rsub": "Sub", "mul": "Mul",
    "imul": "Mul", "truediv": "RealDiv", "div": "RealDiv", "floordiv": "FloorDiv", "neg": "Neg", "pow": "Pow",
    "matmul": "MatMul", "mm": "MatMul", "bmm": "BatchMatMul", "addmm": "MatMul", "linear": "MatMul",
    "relu": "ReLU", "relu_": "ReLU", "relu6": "ReLU6", "gelu": "GeLU", "silu": "SiLU", "sigmoid": "Sigmoid",
    "tanh": "Tanh", "softmax": "Softmax", "log_softmax": "LogSoftmax", "leaky_relu": "LeakyReLU", "elu": "Elu",
    "flatten": "Flatten", "view": "Reshape", "reshape": "Reshape", "_unsafe_view": "Reshape",
    "permute": "Transpose", "transpose": "Transpose", "t": "Transpose", "cat": "Concat", "stack": "Stack",
    "mean": "ReduceMean", "sum": "ReduceSum", "max": "ReduceMax", "dropout": "Dropout", "max_pool2d": "MaxPool",
    "avg_pool2d": "AvgPool", "adaptive_avg_pool2d": "AdaptiveAvgPool2D", "conv2d": "Conv2D",
    "convolution": "Conv2D", "batch_norm": "BatchNorm", "_native_batch_norm_legit_no_training": "BatchNorm",
    "layer_norm": "LayerNorm", "embedding": "Gather", "size": "Shape", "squeeze": "Squeeze",
    "unsqueeze": "ExpandDims", "exp": "Exp", "log": "Log", "sqrt": "Sqrt", "clone": "Identity",
    "contiguous": "Identity", "expand": "BroadcastTo", "getitem": "TupleGetItem", "chunk": "Split",
    "split": "Split",
}
_MODULE_OPS: dict[type, str] = {
    nn.ReLU: "ReLU", nn.ReLU6: "ReLU6", nn.GELU: "GeLU", nn.SiLU: "SiLU", nn.Sigmoid: "Sigmoid", nn.Tanh: "Tanh",
    nn.Softmax: "Softmax", nn.LogSoftmax: "LogSoftmax", nn.LeakyReLU: "LeakyReLU", nn.ELU: "Elu",
    nn.Dropout: "Dropout", nn.Dropout2d: "Dropout2D", nn.Flatten: "Flatten", nn.Identity: "Identity",
    nn.MaxPool1d: "MaxPool", nn.MaxPool2d: "MaxPool", nn.MaxPool3d: "MaxPool3D", nn.AvgPool1d: "AvgPool",
    nn.AvgPool2d: "AvgPool", nn.AdaptiveAvgPool1d: "AdaptiveAvgPool1D", nn.AdaptiveAvgPool2d: "AdaptiveAvgPool2D",
    nn.AdaptiveMaxPool2d: "AdaptiveMaxPool2D", nn.BatchNorm1d: "BatchNorm", nn.BatchNorm2d: "BatchNorm",
    nn.BatchNorm3d: "BatchNorm", nn.LayerNorm: "LayerNorm", nn.GroupNorm: "GroupNorm", nn.Embedding: "Gather",
}
_MODULE_ATTRS = ("in_features", "out_features", "in_channels", "out_channels", "kernel_size", "stride", "padding",
                 "dilation", "groups", "eps", "momentum", "p", "start_dim", "end_dim", "dim", "num_embeddings",
                 "embedding_dim", "output_size", "negative_slope", "inplace")
_TORCH_TO_DT = {
    torch.bool: proto.DT_BOOL, torch.int8: proto.DT_INT8, torch.int16: proto.DT_INT16, torch.int32: proto.DT_INT32,
    torch.int64: proto.DT_INT64, torch.uint8: proto.DT_UINT8, torch.float16: proto.DT_FLOAT16,
    torch.float32: proto.DT_FLOAT32, torch.float64: proto.DT_FLOAT64, torch.bfloat16: proto.DT_BFLOAT16,
}


def build_graph(network: nn.Module, example_inputs: Any = None) -> Any:
    """Describe ``network`` as a ``proto.GraphProto`` for the graph plugin.

    Parameters
    ----------
    network : torch.nn.Module
        DataParallel/DDP and ``torch.compile`` wrappers are looked through.
    example_inputs : torch.Tensor or tuple of torch.Tensor, optional
        One batch as ``network`` takes it; gives every node its output shape (no
        computation is run: the shapes are propagated with fake tensors).

    Returns
    -------
    proto.GraphProto
        Never raises for a network that cannot be traced: it falls back to
        ``torch.export`` (with example inputs) and then to the module tree.
    """
    module = unwrap_module(network)
    if isinstance(example_inputs, torch.Tensor):
        example_inputs = (example_inputs,)
    elif example_inputs is not None:
        example_inputs = tuple(example_inputs)
    cls_name = type(module).__name__
    try:
        gm = _trace(module)
        return _Builder(module).from_fx(gm, example_inputs)
    except Exception as exc:
        reason = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        if example_inputs is not None:
            try:
                ep = torch.export.export(module, example_inputs)
                logger.info("Graph of %s: torch.fx could not trace it (%s); built from torch.export.", cls_name, reason)
                return _Builder(module).from_export(ep)
            except Exception as exc2:
                reason += f"; torch.export failed too ({type(exc2).__name__})"
        logger.info("Graph of %s: torch.fx could not trace it (%s); the graph describes the module tree.",
                    cls_name, reason)
        return _Builder(module).from_module_tree()


class _Traced:
    """What ``torch.fx.symbolic_trace`` returns, without generating and compiling the GraphModule's code.

    The graph builder only walks the graph and looks submodules up, which the traced
    module itself answers; that code generation was a third of building the graph on
    the training thread. A real ``GraphModule`` is made on demand (fake-tensor shapes).
    """

    def __init__(self, root: nn.Module, graph: torch.fx.Graph) -> None:
        self.root = root
        self.graph = graph
        self._graph_module: torch.fx.GraphModule | None = None

    def get_submodule(self, target: str) -> nn.Module:
        return self.root.get_submodule(target)

    @property
    def graph_module(self) -> torch.fx.GraphModule:
        if self._graph_module is None:
            self._graph_module = torch.fx.GraphModule(self.root, self.graph, type(self.root).__name__)
        return self._graph_module


def _trace(module: nn.Module) -> _Traced:
    """``torch.fx.symbolic_trace(module)``: the same tracer and graph (see :class:`_Traced`).

    The first attempt leaves out the tracer's wrapping of the ``math`` module: wrapping
    its ~60 functions was a third of the trace's time (0.6 ms of 1.4 ms for the demo
    MLP), and only a forward that calls a ``math`` function on a traced value needs it.
    Such a call fails without it (``math`` functions take no Proxy: "must be real
    number"), so nothing traces differently: the trace is then repeated with it.
    """
    try:
        tracer = torch.fx.Tracer(autowrap_modules=())  # type: ignore[arg-type]  # torch's stub wants a non-empty tuple
        graph = tracer.trace(module)
    except Exception:
        tracer = torch.fx.Tracer()
        graph = tracer.trace(module)
    return _Traced(tracer.root, graph)


def _graph_name(module: nn.Module) -> str:
    cls = type(module)
    return f"{cls.__module__.replace('.', '_')}_{cls.__name__}_forward"


def _camel(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.strip("_").split("_")) or "Op"


def _scope(stack: Sequence[tuple[str, type | str]]) -> str:
    """``Default/{attr}-{Class}/...`` from (module path, class) pairs, outermost first."""
    parts = ["Default"]
    for path, cls in stack:
        attr = path.rsplit(".", 1)[-1] if path else ""
        cls_name = cls.rsplit(".", 1)[-1] if isinstance(cls, str) else cls.__name__  # export gives a str
        parts.append(f"{attr}-{cls_name}")
    return "/".join(parts)


def _type_proto(value: Any, batch_unknown: bool = False) -> Any:
    """TypeProto of a tensor, or a tuple of tensors; None when nothing is known."""
    if isinstance(value, (tuple, list)) and not hasattr(value, "shape"):  # TensorMetadata is a NamedTuple
        elems = [_type_proto(v, batch_unknown) for v in value]
        if not elems or any(e is None for e in elems):
            return None
        tp = proto.TypeProto(data_type=proto.DT_TUPLE)
        tp.sequence_type.elem_types.extend(elems)
        return tp
    shape = getattr(value, "shape", None)
    dtype = getattr(value, "dtype", None)
    if shape is None or dtype is None:
        return None
    tp = proto.TypeProto(data_type=proto.DT_TENSOR)
    tp.tensor_type.elem_type = _TORCH_TO_DT.get(dtype, proto.DT_UNDEFINED)
    for i, size in enumerate(shape):
        tp.tensor_type.shape.dim.add(size=-1 if (batch_unknown and i == 0) else int(size))
    return tp


class _Builder:
    """Accumulates nodes, parameters and constants of one GraphProto."""

    def __init__(self, module: nn.Module) -> None:
        self.module = module
        self.graph = proto.GraphProto(name=_graph_name(module))
        self.tensors: dict[str, torch.Tensor] = dict(module.named_parameters())
        self.tensors.update(module.named_buffers())
        self.param_done: set[str] = set()
        self.n_const = 0
        self.batch_unknown = False

    # -------------------------------------------------------------- pieces
    def node(self, op_type: str, scope: str, inputs: list[str], instance: str, out_type: Any = None,
             attrs: dict[str, Any] | None = None) -> str:
        k = len(self.graph.node)
        name = str(k + 1)
        node = self.graph.node.add(name=name, op_type=op_type, scope=scope, instance_name=instance,
                                   full_name=f"{scope}/{op_type}-op{k}")
        for inp in inputs:
            node.input.add(name=inp, type=0)
        if out_type is not None:
            node.output_type.CopyFrom(out_type)
        for key, value in (attrs or {}).items():
            val = self.value(value)
            if val is not None:
                node.attribute.add(name=key, value=val)
        return name

    def param(self, name: str, value: Any = None) -> str:
        """Declare a parameter (graph input, module parameter or buffer) once; return its name."""
        if name not in self.param_done:
            self.param_done.add(name)
            p = self.graph.parameters.add(name=name)
            tensor = self.tensors.get(name, value)
            tp = _type_proto(tensor, batch_unknown=self.batch_unknown and name not in self.tensors)
            if tp is not None:
                p.type.CopyFrom(tp)
            elif isinstance(tensor, torch.Tensor) or name not in self.tensors:
                p.type.CopyFrom(proto.TypeProto(data_type=proto.DT_TENSOR))
        return name

    @staticmethod
    def value(value: Any) -> Any:
        if isinstance(value, bool):
            return proto.ValueProto(dtype=proto.DT_BOOL, bool_val=value)
        if isinstance(value, int):
            return proto.ValueProto(dtype=proto.DT_INT64, int_val=value)
        if isinstance(value, float):
            return proto.ValueProto(dtype=proto.DT_FLOAT64, double_val=value)
        if isinstance(value, str):
            return proto.ValueProto(dtype=proto.DT_STRING, str_val=value)
        if isinstance(value, (tuple, list)) and value and all(isinstance(v, int) and not isinstance(v, bool)
                                                              for v in value):
            return proto.ValueProto(dtype=proto.DT_TUPLE, int_vals=list(value))
        return None

    def const(self, value: Any) -> str | None:
        val = self.value(value)
        if val is None:
            return None
        self.n_const += 1
        key = f"cst{self.n_const}"
        self.graph.const_vals.add(key=key, value=val)
        return key

    def output(self, name: str, out_type: Any) -> None:
        out = self.graph.outputs.add(name=name)
        if out_type is not None:
            out.type.CopyFrom(out_type)

    # -------------------------------------------------------------- fx
    def from_fx(self, gm: _Traced, example_inputs: tuple | None) -> Any:
        self.batch_unknown = _propagate_shapes(gm, example_inputs)
        names: dict[torch.fx.Node, str] = {}
        for fx_node in gm.graph.nodes:
            meta = fx_node.meta.get("tensor_meta")
            out_type = _type_proto(meta, self.batch_unknown) if meta is not None else None
            stack = [(path, cls) for path, cls in (fx_node.meta.get("nn_module_stack") or {}).values()]
            if fx_node.op == "placeholder":
                names[fx_node] = self.param(fx_node.name, meta)
            elif fx_node.op == "get_attr":
                names[fx_node] = self.param(str(fx_node.target))
            elif fx_node.op == "output":
                for out in _flat(fx_node.args):
                    if isinstance(out, torch.fx.Node) and out in names:
                        m = out.meta.get("tensor_meta")
                        self.output(names[out], _type_proto(m, self.batch_unknown) if m is not None else None)
            else:
                inputs = self.fx_inputs(fx_node, names)
                if fx_node.op == "call_module":
                    sub = gm.get_submodule(str(fx_node.target))
                    names[fx_node] = self.module_ops(sub, str(fx_node.target), _scope(stack), inputs,
                                                     fx_node.name, out_type)
                else:
                    op_type = self.function_op_type(fx_node)
                    names[fx_node] = self.node(op_type, _scope(stack), inputs, fx_node.name, out_type)
        return self.graph

    def fx_inputs(self, fx_node: torch.fx.Node, names: dict) -> list[str]:
        inputs: list[str] = []
        for arg in (*fx_node.args, *fx_node.kwargs.values()):
            nodes = [a for a in _flat(arg) if isinstance(a, torch.fx.Node)]
            if nodes:
                inputs.extend(names[a] for a in nodes if a in names)
            elif arg is not None and not callable(arg):
                key = self.const(arg)
                if key is not None:
                    inputs.append(key)
        return inputs

    def function_op_type(self, fx_node: torch.fx.Node) -> str:
        target = fx_node.target
        name = target if isinstance(target, str) else getattr(target, "__name__", type(target).__name__)
        if name == "getitem":
            src = fx_node.args[0] if fx_node.args else None
            is_tensor = isinstance(src, torch.fx.Node) and isinstance(src.meta.get("tensor_meta"),
                                                                       torch.fx.passes.shape_prop.TensorMetadata)
            return "StridedSlice" if is_tensor else "TupleGetItem"
        return _OP_TYPES.get(name) or _camel(name)

    def module_ops(self, sub: nn.Module, path: str, scope: str, inputs: list[str], instance: str,
                   out_type: Any) -> str:
        """The nodes of one leaf module; returns the name of its last node."""
        attrs = {a: getattr(sub, a) for a in _MODULE_ATTRS if hasattr(sub, a)}
        prefix = f"{path}." if path else ""
        if isinstance(sub, (nn.Linear, nn.modules.conv._ConvNd)):
            op = "MatMul" if isinstance(sub, nn.Linear) else f"Conv{len(sub.kernel_size)}D"
            name = self.node(op, scope, inputs + [self.param(prefix + "weight")],
                             "matmul" if op == "MatMul" else "conv2d", out_type, attrs)
            if sub.bias is not None:
                name = self.node("BiasAdd", scope, [name, self.param(prefix + "bias")], "bias_add", out_type)
            return name
        op = next((v for k, v in _MODULE_OPS.items() if type(sub) is k), None) or _camel(type(sub).__name__)
        params = [self.param(prefix + n) for n, _ in (*sub.named_parameters(), *sub.named_buffers())
                  if prefix + n in self.tensors and not n.endswith("num_batches_tracked")]
        if isinstance(sub, nn.Embedding):
            return self.node(op, scope, params + inputs, instance, out_type, attrs)
        return self.node(op, scope, inputs + params, instance, out_type, attrs)

    # -------------------------------------------------------------- torch.export
    def from_export(self, ep: Any) -> Any:
        sig = ep.graph_signature
        to_param = {**sig.inputs_to_parameters, **sig.inputs_to_buffers}
        names: dict[Any, str] = {}
        for node in ep.graph.nodes:
            val = node.meta.get("val")
            out_type = _type_proto(val)
            if node.op == "placeholder":
                names[node] = self.param(to_param.get(node.name, node.name), val)
            elif node.op == "output":
                user_outputs = set(sig.user_outputs)
                for out in _flat(node.args):
                    if isinstance(out, torch.fx.Node) and out in names and (out.name in user_outputs or not
                                                                            user_outputs):
                        self.output(names[out], _type_proto(out.meta.get("val")))
            elif node.op == "call_function":
                stack = [(path, cls) for path, cls in (node.meta.get("nn_module_stack") or {}).values() if path]
                opname = str(getattr(getattr(node.target, "_overloadpacket", None), "__name__", None)
                             or getattr(node.target, "__name__", str(node.target))).split(".")[-1]
                op_type = _OP_TYPES.get(opname) or _camel(opname)
                names[node] = self.node(op_type, _scope(stack), self.fx_inputs(node, names), node.name, out_type)
        return self.graph

    # -------------------------------------------------------------- module tree
    def from_module_tree(self) -> Any:
        """Leaf modules in registration order, each fed by the previous one."""
        previous = self.param("x")
        for path, sub in self.module.named_modules():
            if path == "" or any(True for _ in sub.children()):
                continue
            stack, parts = [], path.split(".")
            for i in range(len(parts)):
                sub_path = ".".join(parts[: i + 1])
                stack.append((sub_path, type(self.module.get_submodule(sub_path))))
            previous = self.module_ops(sub, path, _scope(stack), [previous], parts[-1], None)
        if previous != "x":
            self.output(previous, None)
        return self.graph


def _flat(obj: Any) -> list:
    if isinstance(obj, (tuple, list)):
        return [x for item in obj for x in _flat(item)]
    if isinstance(obj, dict):
        return [x for item in obj.values() for x in _flat(item)]
    return [obj]


def _propagate_shapes(gm: _Traced, example_inputs: tuple | None) -> bool:
    """Fill ``tensor_meta`` on ``gm``'s nodes; return True when the batch size was guessed."""
    from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

    guessed = False
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    if example_inputs is None:
        shapes = [_guess_input_shape(gm, ph) for ph in placeholders]
        if any(shape is None for shape in shapes):
            return False
        guessed = True
        if _propagate_one_sample(gm, [torch.zeros(shape[0], dtype=shape[1]) for shape in shapes if shape]):
            return True
        # on the network's device (where fake tensors are made: nothing is allocated there)
        device = next((p.device for p in gm.root.parameters()), torch.device("cpu"))
        with mode:
            example_inputs = tuple(torch.zeros(shape[0], dtype=shape[1], device=device) for shape in shapes if shape)
    if len(example_inputs) != len(placeholders):
        return False
    try:
        fake = [t if isinstance(t, FakeTensor) else mode.from_tensor(t) if isinstance(t, torch.Tensor) else t
                for t in example_inputs]
        # the network's own modules run on fake tensors (its buffers and tensor attributes replaced by
        # fakes while they run): no computation, no change to batch-norm statistics
        with torch.no_grad(), _state_replaced(gm, mode.from_tensor), mode:
            _run_recording_shapes(gm.root, gm.graph, fake)
    except Exception as exc:
        logger.debug("Graph: shape propagation failed (%s); nodes carry no shapes.", exc)
        for node in gm.graph.nodes:
            node.meta.pop("tensor_meta", None)
        return False
    return guessed


def _run_recording_shapes(root: nn.Module, graph: torch.fx.Graph, inputs: list[Any]) -> None:
    """Run ``graph`` on ``root``'s modules, node by node, and set each node's ``tensor_meta``.

    What ``torch.fx.Interpreter`` (ShapeProp) does for the node kinds ``symbolic_trace``
    makes, without its per-node bookkeeping (tracebacks, freeing values early), which
    was most of the time for a small network's handful of nodes on the training
    thread; and no traceback on stderr when a node fails (ShapeProp prints one): a
    failure here only means fewer shapes in the graph, which the caller logs. Also
    without ShapeProp's fake copy of the network, made by ``torch._dynamo`` (1.7 s to
    import on the training thread). The metadata leaves out the memory format (the
    graph does not show it).
    """
    from torch.fx.node import map_aggregate, map_arg
    from torch.fx.passes.shape_prop import _extract_tensor_metadata

    env: dict[torch.fx.Node, Any] = {}
    load = env.__getitem__
    remaining = iter(inputs)
    for node in graph.nodes:
        op, target = node.op, node.target
        if op == "output":
            return
        if op == "placeholder":
            if str(target).startswith("*"):
                value: Any = list(remaining)
            else:
                value = next(remaining, _MISSING)
                if value is _MISSING:
                    if not node.args:
                        raise RuntimeError(f"no input for the graph's parameter {target}")
                    value = node.args[0]  # the parameter's default
        elif op == "get_attr":
            value = root
            for part in str(target).split("."):
                value = getattr(value, part)
        else:
            args, kwargs = map_arg(node.args, load), map_arg(node.kwargs, load)
            if op == "call_module":
                value = root.get_submodule(str(target))(*args, **kwargs)
            elif op == "call_function":
                value = target(*args, **kwargs)
            elif op == "call_method":
                value = getattr(args[0], target)(*args[1:], **kwargs)
            else:
                raise RuntimeError(f"unknown fx node kind {op!r}")
        found = False

        def extract(obj: Any) -> Any:
            nonlocal found
            if isinstance(obj, torch.Tensor):
                found = True
                return _extract_tensor_metadata(obj, include_contiguity=False)
            return obj

        meta = map_aggregate(value, extract) if not isinstance(value, torch.Tensor) else extract(value)
        if found:
            node.meta["tensor_meta"] = meta
        node.meta["type"] = type(value)
        env[node] = value


_MISSING = object()


def _propagate_one_sample(gm: _Traced, inputs: list[torch.Tensor]) -> bool:
    """Fill ``tensor_meta`` by running the guessed batch for real; False if that cannot be done.

    Fake tensors (the general way) cost milliseconds even for a small MLP: every
    operator goes through fake dispatch, which SummaryCollector pays on the training
    thread. A guessed input only exists when the first layer is a ``Linear``, where a
    batch of two samples of zeros (one sample cannot train a batch norm) costs less than
    a training step, so it is run on the real modules instead -- without side effects:
    buffers (BatchNorm statistics) are swapped for copies while it runs, the CPU random
    state is restored afterwards (dropout draws from it), and no autograd graph is
    recorded. Networks with tensors off the CPU keep the fake-tensor path (their random
    state lives on the device), as does anything that raises here.
    """
    try:
        if any(t.device.type != "cpu" for t in [*gm.root.parameters(), *(t for _, _, t in _state_tensors(gm))]):
            return False
        with torch.no_grad(), torch.random.fork_rng(devices=[]), _state_replaced(gm, torch.Tensor.clone):
            _run_recording_shapes(gm.root, gm.graph, inputs)
        return True
    except Exception as exc:
        logger.debug("Graph: shape propagation on real tensors failed (%s); trying fake tensors.", exc)
        for node in gm.graph.nodes:
            node.meta.pop("tensor_meta", None)
        return False


def _state_tensors(gm: _Traced) -> list[tuple[Any, str, torch.Tensor]]:
    """``(where, name, tensor)`` of the tensors a run of the graph may change or read besides
    parameters: every buffer (``where``: its module's ``_buffers``) and the plain tensor attributes
    the graph reads (``where``: the module; a GraphModule would hold them as buffers)."""
    found: list[tuple[Any, str, torch.Tensor]] = []
    for module in gm.root.modules():
        found += [(module._buffers, name, buf) for name, buf in module._buffers.items() if buf is not None]
    for node in gm.graph.nodes:
        if node.op == "get_attr":
            path, _, name = str(node.target).rpartition(".")
            owner = gm.root.get_submodule(path)
            value = getattr(owner, name, None)
            if isinstance(value, torch.Tensor) and name not in owner._parameters and name not in owner._buffers:
                found.append((owner, name, value))
    return found


@contextlib.contextmanager
def _state_replaced(gm: _Traced, make: Any) -> Iterator[None]:
    """Replace the tensors of :func:`_state_tensors` by ``make(tensor)`` while the block runs."""
    state = _state_tensors(gm)

    def put(where: Any, name: str, value: torch.Tensor) -> None:
        if isinstance(where, dict):
            where[name] = value
        else:
            setattr(where, name, value)

    try:
        for where, name, value in state:
            put(where, name, make(value))
        yield
    finally:
        for where, name, value in state:
            put(where, name, value)


def _guess_input_shape(gm: _Traced, ph: torch.fx.Node) -> tuple[tuple[int, ...], torch.dtype] | None:
    """(shape, dtype) of a batch of two samples for an input whose first layer tells its size, else None.

    Two: one sample cannot go through a batch norm in training mode (its variance needs two)."""
    node = ph
    while node.users:
        user = next(iter(node.users))
        if user.op == "call_module":
            sub = gm.get_submodule(str(user.target))
            if isinstance(sub, nn.Linear):
                return (_GUESSED_BATCH, sub.in_features), torch.float32
            if isinstance(sub, (nn.Flatten, nn.Dropout, nn.Identity)):
                node = user
                continue
        return None
    return None
