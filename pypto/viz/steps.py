"""The tensor passes one at a time: a stepper over the pass manager's before/after snapshots.

``steps(lowered)`` takes ``f.lower(*args, snapshots=True)`` (or a function and its arguments)
and returns a :class:`PassSteps` widget: a slider and back/next buttons over the passes, the
pass's name, what it changed, and the Tensor IR after it with the lines the pass added in
green and the ones it removed struck through in red. Outside a notebook ``print(...)`` shows
the same as text, a diff per pass.
"""

from __future__ import annotations

import difflib
import html
from collections.abc import Sequence
from typing import Any

import ipywidgets as widgets

from pypto.core.passes import Snapshot

__all__ = ["PassSteps", "line_diff", "passes", "steps"]

_ADDED = "background:#e6ffec"
_REMOVED = "background:#ffebe9;color:#a33;text-decoration:line-through"


def line_diff(before: str, after: str) -> list[tuple[str, str]]:
    """The lines of ``after`` with the lines of ``before`` it dropped, each tagged ``" "``
    (kept), ``"+"`` (added by the pass) or ``"-"`` (removed by it), in reading order. Lines
    that differ only in spacing count as kept (fusion indents the ops it groups).

    >>> line_diff("a\\nb\\nc", "a\\n  c\\nd")
    [(' ', 'a'), ('-', 'b'), (' ', '  c'), ('+', 'd')]
    """
    old, new = before.splitlines(), after.splitlines()
    out: list[tuple[str, str]] = []
    sm = difflib.SequenceMatcher(None, _squash(old), _squash(new), autojunk=False)
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag == "equal":
            out += [(" ", s) for s in new[j1:j2]]
            continue
        out += [("-", s) for s in old[i1:i2]]
        out += [("+", s) for s in new[j1:j2]]
    return out


def _squash(lines: list[str]) -> list[str]:
    return [" ".join(s.split()) for s in lines]


class PassSteps(widgets.VBox):
    """A stepper over the tensor passes: ``.slider`` (the pass shown, 0-based), ``.back`` and
    ``.next`` buttons, ``.header`` (the pass and what it changed) and ``.listing`` (the IR after
    it, changes highlighted). ``str()`` is the text form of every pass.

    >>> import pypto as pto
    >>> s = steps(pto.jit(lambda x: pto.exp(x) * 1.0 + 0.0, backend="interpret"), pto.ones(4))
    >>> [sn.name for sn in s.snapshots]
    ['simplify', 'shifted_sums', 'constant_fold', 'cse', 'dce', 'drop_barriers', 'fuse']
    >>> s.show(0); s.header.value  # doctest: +ELLIPSIS
    '<b>pass 1 of 7: simplify</b> — 1 line added, 3 removed ...'
    >>> s.next.click(); s.slider.value
    1
    """

    def __init__(self, snapshots: Sequence[Snapshot], title: str = "") -> None:
        self.snapshots = tuple(snapshots)
        if not self.snapshots:
            raise ValueError("no pass snapshots: lower with f.lower(*args, snapshots=True)")
        self.title = title
        n = len(self.snapshots)
        self.slider = widgets.IntSlider(
            value=0, min=0, max=n - 1, description="pass", continuous_update=True
        )
        self.back = widgets.Button(description="◀ back", layout=widgets.Layout(width="80px"))
        self.next = widgets.Button(description="next ▶", layout=widgets.Layout(width="80px"))
        self.ribbon = widgets.HTML()
        self.header = widgets.HTML()
        self.listing = widgets.HTML()
        self.back.on_click(lambda _: self.show(self.slider.value - 1))
        self.next.on_click(lambda _: self.show(self.slider.value + 1))
        self.slider.observe(lambda ch: self._render(ch["new"]), names="value")
        super().__init__(
            [
                widgets.HBox([self.back, self.slider, self.next]),
                self.ribbon,
                self.header,
                self.listing,
            ]
        )
        self._render(0)

    def __len__(self) -> int:
        return len(self.snapshots)

    def show(self, i: int) -> None:
        """Show pass ``i`` (clamped to the passes there are)."""
        self.slider.value = max(0, min(i, len(self.snapshots) - 1))

    def summary(self, i: int) -> str:
        """One line on pass ``i``: its name, position and what it changed."""
        s = self.snapshots[i]
        head = f"pass {i + 1} of {len(self.snapshots)}: {s.name}"
        if not s.changed:
            return f"{head} — no change ({s.seconds * 1e3:.2f} ms)"
        d = line_diff(s.before, s.after)
        add = sum(t == "+" for t, _ in d)
        rem = sum(t == "-" for t, _ in d)
        return (
            f"{head} — {add} line{'s' * (add != 1)} added, {rem} removed ({s.seconds * 1e3:.2f} ms)"
        )

    def html(self, i: int) -> str:
        """Pass ``i``'s IR after it, as HTML: added lines green, removed ones struck red."""
        s = self.snapshots[i]
        rows = []
        for tag, line in line_diff(s.before, s.after):
            style = _ADDED if tag == "+" else _REMOVED if tag == "-" else ""
            rows.append(
                f"<span class='pto-diff-{'add' if tag == '+' else 'del' if tag == '-' else 'eq'}'"
                f" style='{style}'>{tag} {html.escape(line)}</span>"
            )
        return (
            "<pre style='font-size:12px;line-height:1.35;max-height:560px;overflow:auto'>"
            + "\n".join(rows)
            + "</pre>"
        )

    def text(self, i: int) -> str:
        """Pass ``i`` as text: its summary, then the diff lines (``+``/``-``/`` `` prefixed)."""
        s = self.snapshots[i]
        lines = [self.summary(i)]
        if s.changed:
            lines += [f"{t} {line}" for t, line in line_diff(s.before, s.after)]
        return "\n".join(lines)

    def _render(self, i: int) -> None:
        chips = []
        for j, s in enumerate(self.snapshots):
            weight = "bold" if s.changed else "normal"
            here = "background:#ffd966;" if j == i else ""
            chips.append(
                f"<span style='{here}font-weight:{weight};padding:1px 5px;border-radius:3px'>"
                f"{j + 1}. {html.escape(s.name)}</span>"
            )
        self.ribbon.value = " → ".join(chips)
        parts = self.summary(i).split(" — ", 1)
        self.header.value = f"<b>{html.escape(parts[0])}</b> — {html.escape(parts[1])}"
        self.listing.value = self.html(i)

    def __str__(self) -> str:
        head = [f"tensor passes of @{self.title}" if self.title else "tensor passes"]
        return "\n\n".join(head + [self.text(i) for i in range(len(self.snapshots))])

    __repr__ = __str__

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        bundle = dict(super()._repr_mimebundle_(**kwargs) or {})
        bundle["text/plain"] = str(self)
        return bundle


def steps(lowered: Any, *args: Any) -> PassSteps:
    """The tensor passes of a lowering as a stepper (:class:`PassSteps`).

    ``lowered`` is a ``Lowered`` made with ``snapshots=True``, a sequence of
    :class:`~pypto.core.passes.Snapshot`, or a function (jitted or plain) followed by its
    arguments, lowered here with snapshots.

    >>> import pypto as pto
    >>> f = pto.jit(lambda x: pto.exp(x) + 0.0, machine="tiny")
    >>> print(steps(f.lower(pto.ones(4), snapshots=True)))  # doctest: +ELLIPSIS
    tensor passes of @lambda
    <BLANKLINE>
    pass 1 of 7: simplify — 1 line added, 2 removed (... ms)
      func @lambda(%x: f32[4]) -> (f32[4]) {
        %0: f32[4] = exp %x ...
    -   %1: f32[4] = add %0, 0.0:f32 ...
    -   return %1
    +   return %0
      }
    <BLANKLINE>
    pass 2 of 7: shifted_sums — no change (... ms)
    ...
    """
    from pypto.compiler import Jitted, Lowered, jit

    if callable(lowered) and not isinstance(lowered, Lowered):
        f = lowered if isinstance(lowered, Jitted) else jit(lowered, backend="interpret")
        lowered = f.lower(*args, snapshots=True)
    elif args:
        raise TypeError("steps(lowered) takes no further arguments; steps(f, *args) lowers f")
    if isinstance(lowered, Lowered):
        if not lowered.snapshots:
            raise ValueError(
                "this lowering kept no pass snapshots: lower with f.lower(*args, snapshots=True)"
            )
        return PassSteps(lowered.snapshots, lowered.traced.name)
    return PassSteps(list(lowered))


passes = steps
