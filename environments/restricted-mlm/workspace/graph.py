"""The forward pass as a graph of ATen operators (do not edit: protected).

The official scorer never runs your Python forward on the held-out data.
In your process, after get_trained_model(), the forward is traced once on
an example batch into a graph of the ATen operators it executes (capture);
the graph and the tensors it uses travel to the scorer, which checks every
operator against rules.py and runs the graph itself (Graph), inside the
same operation tracer. What the graph computes is what gets scored.

So the forward must trace to a fixed sequence of operators: Python control
flow is fine (it is unrolled for the example's shapes, and the held-out
batches have those shapes), but whatever the forward does outside PyTorch
is frozen at capture time. The rules' tracer refuses such escapes anyway.

    from graph import capture, Graph
    spec, tensors = capture(model, example_tokens)   # in your process
    logits = Graph(spec, tensors)(tokens)            # what the scorer runs

`spec` is plain JSON; `tensors` a {name: torch.Tensor} dict (torch.save'd
and read back with torch.load(weights_only=True): no code travels).
"""

import math
import operator

import torch

import rules

# Operators whose output memory is left unset: the graph runs in the
# scorer's process, so their results are zeroed before anything reads them.
UNINITIALIZED = frozenset({"empty", "empty_like", "new_empty", "new_empty_strided", "empty_strided"})
# Non-tensor values an operator's arguments may hold, by kind.
TORCH_CONSTANTS = (torch.dtype, torch.layout, torch.memory_format)


class GraphError(ValueError):
    """The graph breaks the format or the rules; the message says where."""


def capture(forward, example):
    """(spec, tensors): `forward(example)` traced into ATen operators."""
    from torch.fx.experimental.proxy_tensor import make_fx

    with torch.no_grad():
        module = make_fx(lambda tokens: forward(tokens), tracing_mode="real")(example)
    tensors, numbers, nodes = {}, {}, []

    def encode(value):
        if isinstance(value, torch.fx.Node):
            return {"node": numbers[value]}
        if isinstance(value, (list, tuple)):
            return [encode(v) for v in value]
        if value is None or isinstance(value, (bool, int, str)):
            return value
        if isinstance(value, float):
            return value if math.isfinite(value) else {"float": repr(value)}
        if isinstance(value, TORCH_CONSTANTS):
            return {"torch": str(value).removeprefix("torch.")}
        if isinstance(value, torch.device):
            return {"device": str(value)}
        raise GraphError(f"the forward's graph holds a {type(value).__name__} argument ({value!r}), which cannot be sent")

    for node in module.graph.nodes:
        numbers[node] = len(nodes)
        if node.op == "placeholder":
            nodes.append({"op": "input"})
        elif node.op == "get_attr":
            value = getattr(module, node.target)
            value = value.detach() if isinstance(value, torch.Tensor) else value
            if type(value) is not torch.Tensor:
                raise GraphError(f"the forward's graph holds a {type(value).__name__} constant, not a plain tensor")
            tensors[node.target] = value
            nodes.append({"op": "tensor", "name": node.target})
        elif node.op == "call_function" and node.target is operator.getitem:
            nodes.append({"op": "item", "of": encode(node.args[0]), "index": node.args[1]})
        elif node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload):
            nodes.append({"op": "call", "target": str(node.target), "args": encode(node.args), "kwargs": {k: encode(v) for k, v in node.kwargs.items()}})
        elif node.op == "output":
            nodes.append({"op": "output", "value": encode(node.args[0])})
        else:
            raise GraphError(f"the forward's graph holds a {node.op} of {node.target!r}, which is not an ATen operator")
    return {"format": 1, "nodes": nodes}, tensors


def _operator(target, at):
    """The ATen OpOverload named `target` ("aten.addmm.default"), if the rules allow it."""
    if not isinstance(target, str) or target.count(".") != 2:
        raise GraphError(f"node {at}: bad operator name {target!r}")
    namespace, packet, overload = target.split(".")
    if namespace != "aten" or packet not in rules.ALLOWED_OPS:
        raise GraphError(f"disallowed operation in forward: {namespace}.{packet}")
    found = getattr(getattr(torch.ops.aten, packet, None), overload, None)
    if not isinstance(found, torch._ops.OpOverload):
        raise GraphError(f"node {at}: no operator {target}")
    return found, packet


class Graph:
    """A captured forward, checked on construction: every node is well-formed
    and every operator is one rules.ALLOWED_OPS names. Calling it runs the
    operators in order on the input tokens (run it inside rules.ForwardRules:
    the tracer also refuses allowed operators used with refused arguments)."""

    def __init__(self, spec, tensors):
        if not isinstance(spec, dict) or spec.get("format") != 1 or not isinstance(spec.get("nodes"), list):
            raise GraphError("not a forward graph of format 1")
        if not isinstance(tensors, dict) or any(type(t) is not torch.Tensor for t in tensors.values()):
            raise GraphError("the graph's tensors must be a {name: tensor} dict")
        self.tensors = tensors
        self.steps = []
        self.output = None
        for at, node in enumerate(spec["nodes"]):
            if self.output is not None:
                raise GraphError(f"node {at} follows the output")
            self.steps.append(self._compile(at, node))
        if self.output is None:
            raise GraphError("the graph has no output")

    def _compile(self, at, node):
        kind = node.get("op") if isinstance(node, dict) else None
        if kind == "input":
            return ("input",)
        if kind == "tensor":
            if node.get("name") not in self.tensors:
                raise GraphError(f"node {at}: unknown tensor {node.get('name')!r}")
            return ("tensor", node["name"])
        if kind == "item":
            index = node.get("index")
            if type(index) is not int:
                raise GraphError(f"node {at}: bad index {index!r}")
            return ("item", self._value(node.get("of"), at), index)
        if kind == "call":
            function, packet = _operator(node.get("target"), at)
            kwargs = node.get("kwargs", {})
            if not isinstance(kwargs, dict):
                raise GraphError(f"node {at}: bad keyword arguments")
            args = self._value(node.get("args", []), at)
            if not isinstance(args, list):
                raise GraphError(f"node {at}: bad arguments")
            return ("call", function, args, {k: self._value(v, at) for k, v in kwargs.items()}, packet in UNINITIALIZED)
        if kind == "output":
            self.output = self._value(node.get("value"), at)
            return ("output",)
        raise GraphError(f"node {at}: unknown kind {kind!r}")

    def _value(self, value, at):
        """A JSON argument made ready to run: node references become ("node", i)."""
        if isinstance(value, list):
            return [self._value(v, at) for v in value]
        if value is None or isinstance(value, (bool, int, float, str)):
            return value
        if isinstance(value, dict) and len(value) == 1:
            (tag, inner), = value.items()
            if tag == "node" and type(inner) is int and 0 <= inner < at:
                return _Ref(inner)
            if tag == "float" and inner in ("inf", "-inf", "nan"):
                return float(inner)
            if tag == "torch" and isinstance(inner, str) and isinstance(getattr(torch, inner, None), TORCH_CONSTANTS):
                return getattr(torch, inner)
            if tag == "device" and isinstance(inner, str):
                try:
                    return torch.device(inner)
                except RuntimeError:
                    pass
        raise GraphError(f"node {at}: bad argument {str(value)[:100]}")

    def __call__(self, tokens):
        values = []
        for step in self.steps:
            if step[0] == "input":
                values.append(tokens)
            elif step[0] == "tensor":
                values.append(self.tensors[step[1]])
            elif step[0] == "item":
                values.append(_resolve(step[1], values)[step[2]])
            elif step[0] == "call":
                _, function, args, kwargs, uninitialized = step
                result = function(*_resolve(args, values), **_resolve(kwargs, values))
                if uninitialized:
                    result.zero_()
                values.append(result)
            else:
                values.append(None)
        return _resolve(self.output, values)


class _Ref:
    __slots__ = ("at",)

    def __init__(self, at):
        self.at = at


def _resolve(value, values):
    if isinstance(value, _Ref):
        return values[value.at]
    if isinstance(value, list):
        return [_resolve(v, values) for v in value]
    if isinstance(value, dict):
        return {k: _resolve(v, values) for k, v in value.items()}
    return value
