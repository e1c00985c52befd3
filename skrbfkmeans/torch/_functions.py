"""One autograd Function in the three forms that PyTorch's callers need.

A Function written with ``setup_context`` (its forward without ``ctx``) is
what ``torch.func`` transforms need (with a ``jvp`` and a generated ``vmap``
rule), but ``torch.compile`` cannot trace a Function that defines ``jvp``,
and an eager call of such a Function pays for ``Function.apply`` binding the
forward's signature on every call (``inspect.signature``: a Function
doubling 64 x 10 scores took 48 us per call that way and 16 us with ``ctx``
in its forward, on one thread of a loaded machine). So each Function is
applied in the form that fits its caller:

- the class itself (forward without ``ctx``, ``setup_context``,
  ``backward``) under ``torch.compile`` and ``torch.export``;
- a subclass with the ``jvp`` and a generated ``vmap`` rule inside
  ``torch.func`` transforms;
- in plain eager code, a twin with ``ctx`` in its forward (and the ``jvp``,
  for ``torch.autograd.forward_ad``).
"""

import torch


def attach_forms(function, jvp):
    """Give ``function`` its eager twin and ``torch.func`` subclass (``forms``).

    :func:`apply` picks among them and the class itself.
    """

    class Transformable(function):
        generate_vmap_rule = True

    Transformable.jvp = staticmethod(jvp)

    class Eager(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *args):
            output = function.forward(*args)
            function.setup_context(ctx, args, output)
            return output

        backward = staticmethod(function.backward)

    Eager.jvp = staticmethod(jvp)
    Transformable.__name__ = Transformable.__qualname__ = function.__name__
    Eager.__name__ = Eager.__qualname__ = function.__name__
    function.forms = Eager, Transformable
    return function


def apply(function, *args):
    """Apply the form of ``function`` that fits the calling context.

    ``function`` carries its forms (:func:`attach_forms`); compiled code
    sees the class itself and nothing else.
    """
    if torch.compiler.is_compiling():
        return function.apply(*args)
    eager, transformable = function.forms
    if torch._C._are_functorch_transforms_active():
        return transformable.apply(*args)
    return eager.apply(*args)
