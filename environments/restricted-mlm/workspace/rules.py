"""The forward-pass rules, as the scorer enforces them (do not edit: protected).

    from rules import ForwardRules
    with torch.no_grad(), ForwardRules() as rules:
        logits = model(tokens)
    if rules.violation:
        print(rules.violation)   # e.g. "disallowed operation in forward: aten.exp (called as torch.exp)"

The official scorer runs every forward pass it scores inside ForwardRules
(the same code as this file). It watches two levels:
  * every ATen operator PyTorch executes (a TorchDispatchMode): whatever
    Python code you write, the arithmetic ends up as these operators, so
    this is the list that decides. Anything not in ALLOWED_OPS is refused,
    and a few allowed ones are refused for some arguments (see _refused);
  * the torch functions and Tensor methods you call (a TorchFunctionMode):
    a few escape hatches that move numbers out of PyTorch (.numpy(),
    .item(), .tolist(), .data_ptr(), ...) are refused here, and the
    outermost function you called is named in the message.
A refused operator raises DisallowedOperation at once and is recorded in
`violation`; the first one recorded makes the scored attempt invalid, even if
the model caught the exception.

It only sees PyTorch calls in the calling thread. Numeric work done any other
way (Python arithmetic on values pulled out of tensors, numpy, hand-written
kernels, other threads) is equally against the rules; it is just not
machine-checked.
"""

import torch
from torch.overrides import TorchFunctionMode, _get_current_function_mode_stack
from torch.utils._python_dispatch import TorchDispatchMode, _get_current_dispatch_mode_stack

# ATen operator packets (the name before the overload: aten.add.Tensor -> "add").
ALLOWED_OPS = frozenset(
    {
        # layers: nn.Linear and nn.Embedding, and matrix products
        "embedding", "linear", "addmm", "mm", "bmm", "baddbmm", "addbmm", "matmul", "mv", "addmv",
        "dot", "einsum",
        # sums, addition and multiplication (x - y is x + (-1) * y)
        "sum", "cumsum", "add", "add_", "sub", "sub_", "rsub", "mul", "mul_", "neg", "neg_",
        "addcmul", "addcmul_",
        # the one non-linearity
        "relu", "relu_",
        # indexing
        "index", "index_select", "gather", "select", "slice", "narrow", "take", "index_put",
        "index_put_", "scatter", "scatter_", "scatter_add", "scatter_add_", "masked_select",
        "diagonal", "diag", "diag_embed", "tril", "triu", "tril_", "triu_", "slice_scatter",
        "select_scatter", "unfold",
        # reshaping, copying and moving
        "view", "_unsafe_view", "reshape", "_reshape_alias", "as_strided", "t", "transpose",
        "transpose_", "permute", "expand", "unsqueeze", "unsqueeze_", "squeeze", "squeeze_",
        "flatten", "unflatten", "cat", "stack", "split", "split_with_sizes", "unbind", "chunk",
        "repeat", "flip", "roll", "constant_pad_nd", "clone", "contiguous", "alias", "detach",
        "copy_", "_to_copy", "lift_fresh", "lift_fresh_copy", "movedim",
        # constants made inside forward
        "zeros", "ones", "full", "empty", "arange", "scalar_tensor", "zeros_like", "ones_like",
        "full_like", "empty_like", "new_zeros", "new_ones", "new_full", "new_empty",
        "new_empty_strided", "empty_strided", "fill_", "zero_", "eye",
    }
)

# Torch functions / Tensor methods refused outright (they leave PyTorch).
REFUSED_FUNCTIONS = {
    "numpy": "Tensor.numpy (numeric code outside PyTorch)",
    "tolist": "Tensor.tolist (numeric code outside PyTorch)",
    "item": "Tensor.item (numeric code outside PyTorch)",
    "data_ptr": "Tensor.data_ptr (custom kernels or raw memory access)",
    "__array__": "Tensor.__array__ (numeric code outside PyTorch)",
    "__float__": "float(tensor) (numeric code outside PyTorch)",
    "__int__": "int(tensor) (numeric code outside PyTorch)",
    "__bool__": "bool(tensor) (a comparison)",
    "__index__": "a tensor used as a Python index",
}


class DisallowedOperation(RuntimeError):
    pass


# Printing a tensor inside forward runs formatting code (abs, max, ...) whose
# result is only text; it is not checked.
UNCHECKED_FUNCTIONS = frozenset({"__repr__", "__str__", "__format__"})


def _function_name(func):
    """torch.exp, Tensor.exp, torch.nn.functional.softmax, ..."""
    qualname = getattr(func, "__qualname__", None) or getattr(func, "__name__", None) or repr(func)
    module = getattr(func, "__module__", None) or ""
    if qualname.startswith("_VariableFunctionsClass."):
        return "torch." + qualname.split(".", 1)[1]
    if qualname.startswith(("TensorBase.", "_TensorBase.", "Tensor.")):
        return "Tensor." + qualname.split(".", 1)[1]
    if module.startswith("torch") and "." not in qualname:
        return f"{module}.{qualname}"
    return qualname


def _is_float(dtype):
    return dtype.is_floating_point or dtype.is_complex


def _cast_refused(source, target):
    """Why casting `source` to `target` is refused, or None. Float to float
    and integer to float are bookkeeping; float to integer rounds and
    anything to bool compares with zero: both are non-linearities."""
    if source is None or target is None or source == target:
        return None
    if target == torch.bool or (_is_float(source) and not _is_float(target)):
        return f"a cast from {source} to {target}"
    return None


def _refused(packet, args, kwargs):
    """Why an allowed operator is refused for these arguments, or None."""
    if packet == "_to_copy" and args and isinstance(args[0], torch.Tensor):
        why = _cast_refused(args[0].dtype, kwargs.get("dtype"))
        if why:
            return f"aten._to_copy ({why})"
    if packet == "copy_" and len(args) >= 2 and all(isinstance(a, torch.Tensor) for a in args[:2]):
        why = _cast_refused(args[1].dtype, args[0].dtype)
        if why:
            return f"aten.copy_ ({why})"
    return None


class _Dispatch(TorchDispatchMode):
    """Sees every ATen operator run in this thread while active."""

    def __init__(self, owner):
        super().__init__()
        self.owner = owner

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if not self.owner.suspended:
            namespace = getattr(func, "namespace", "?")
            packet = func.__name__.split(".")[0]
            self.owner.ops_seen += 1
            if namespace != "aten" or packet not in ALLOWED_OPS:
                self.owner.refuse(f"{namespace}.{packet}")
            reason = _refused(packet, args, kwargs)
            if reason:
                self.owner.refuse(reason)
        return func(*args, **kwargs)


class _Function(TorchFunctionMode):
    """Sees the torch functions and Tensor methods called directly (while
    one runs, the mode is off, so the functions it calls are not seen)."""

    def __init__(self, owner):
        super().__init__()
        self.owner = owner

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if name in REFUSED_FUNCTIONS:
            self.owner.refuse(REFUSED_FUNCTIONS[name], named=False)
        outer = (self.owner.calling, self.owner.suspended)
        self.owner.calling = _function_name(func)
        self.owner.suspended = outer[1] or name in UNCHECKED_FUNCTIONS
        try:
            return func(*args, **kwargs)
        finally:
            self.owner.calling, self.owner.suspended = outer


class ForwardRules:
    """Context manager: refuses disallowed operations while active (in this
    thread). `violation` holds the first refusal's message, else None."""

    def __init__(self):
        self.violation = None
        self.calling = None
        self.suspended = False
        self.ops_seen = 0
        self._dispatch = _Dispatch(self)
        self._function = _Function(self)

    def refuse(self, what, named=True):
        message = f"disallowed operation in forward: {what}"
        if named and self.calling:
            message += f" (called as {self.calling})"
        if self.violation is None:
            self.violation = message
        raise DisallowedOperation(message)

    def _on_top(self):
        dispatch = _get_current_dispatch_mode_stack()
        function = _get_current_function_mode_stack()
        return bool(dispatch) and dispatch[-1] is self._dispatch and bool(function) and function[-1] is self._function

    def __enter__(self):
        self._function.__enter__()
        self._dispatch.__enter__()
        return self

    def __exit__(self, *exc):
        if self._on_top():
            self._dispatch.__exit__(None, None, None)
            self._function.__exit__(None, None, None)
            return False
        # The forward pushed or popped modes of its own: that blinds the tracer.
        if self.violation is None:
            self.violation = "disallowed operation in forward: the forward pass changed the operation tracer's modes"
        for stack in (_get_current_dispatch_mode_stack, _get_current_function_mode_stack):
            ours = self._dispatch if stack is _get_current_dispatch_mode_stack else self._function
            for _ in range(len(stack())):  # pop down to (and including) ours
                if ours not in stack():
                    break
                stack()[-1].__exit__(None, None, None)
        return False


def self_check():
    """Raises RuntimeError unless the tracer allows a small ReLU network and
    refuses torch.exp and division."""
    layer = torch.nn.Linear(4, 3)
    x = torch.randn(2, 5, 4)
    with torch.no_grad(), ForwardRules() as rules:
        torch.nn.functional.relu(layer(x)).sum(-1) * 0.5
    if rules.violation is not None:
        raise RuntimeError(f"rules self-check: an allowed forward was refused: {rules.violation}")
    for bad, op in ((torch.exp, "aten.exp"), (lambda t: t / 2, "aten.div")):
        with torch.no_grad(), ForwardRules() as rules:
            try:
                bad(x)
            except DisallowedOperation:
                pass
        if rules.violation is None or op not in rules.violation:
            raise RuntimeError(f"rules self-check: {op} was not refused ({rules.violation!r})")
