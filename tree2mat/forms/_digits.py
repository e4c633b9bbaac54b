"""Exact sums in float32: leaf values as digits on power-of-two grids.

A float32 graph (the graph contract: no float64 tensor) must still give the labels of a library
that sums its trees in float64. Plain float32 sums drift by about trees x 6e-8 relative, enough
to flip a label near a class boundary, and their result depends on the order a runtime adds in.
Instead every leaf value v (float64) is split at build time into P digits,

    v ~= d_1 g_1 + d_2 g_2 + ... + d_P g_P,     g_1 > g_2 > ... powers of two, d_p integers,

each digit a float32 small enough that the sum over all trees of one digit stays below 2**24 in
magnitude: every partial sum is an integer float32 can hold, so ``ReduceSum`` is exact on every
runtime, in any order. Labels are decided exactly on the integer digit sums: a margin against a cutoff by the
sign of floor(difference / g_1), found by carries (``Floor``) from the last digit up; the first
maximal class on normalized digits (carries leave d_2..d_P in [0, R)), whose lexicographic order
is the margins' order. The dropped remainder
is at most trees x g_P / 2 <= 6e-8 (or 2**-43 x S for margins past 2**19; S: the largest
possible |margin|), an eighth of the tolerance of ``verify``; only a margin that close to a class
boundary can get another label than the library's (``verify`` reports such a row). Two digits
for a hundred trees of margins up to a few dozen, three for more.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tree2mat.errors import UnsupportedModelError
from tree2mat.forms._graph import GraphBuilder

#: Bits of the first digit's grid below S: sums of first digits stay within 2**22 (twice that
#: for a difference of two sums, and carries), under float32's 2**24.
TOP_BITS = 21
#: The remainders the last digit drops add up to at most trees x g_P / 2 <= DROPPED (absolute)
#: or 2**-43 x S, the larger: an eighth of verify's tolerance of a float32 graph (at least
#: 4 eps32 = 2**-21, and 1e-12 x S).
DROPPED = 2.0**-24
#: Largest margin bound S a float32 graph takes (beyond, its values would not fit float32).
MAX_SCALE = 2.0**100


@dataclass(frozen=True)
class Plan:
    """The grids: ``exponents[p]`` is log2 of g_{p+1}; ``bits``: log2 of the ratio R of two
    neighbouring grids."""

    exponents: tuple[int, ...]
    bits: int

    @property
    def n_digits(self) -> int:
        return len(self.exponents)


def plan(scale: float, addends: int, divisor: float = 1.0) -> Plan:
    """Grids for sums of ``addends`` values whose total magnitude is at most ``scale`` (and
    that are then divided by ``divisor``: an average, whose error shrinks with it)."""
    if not 0 < scale <= MAX_SCALE or scale < 2.0**-100:
        raise UnsupportedModelError(
            f"the model's margins reach {scale:.3g}: a float32 graph cannot hold them exactly; "
            "convert with --dtype float64"
        )
    k = max(0, math.ceil(math.log2(max(addends, 1))))
    bits = 22 - k
    if bits < 4:
        raise UnsupportedModelError(
            f"{addends} trees add to one output: too many for exact float32 sums; convert with --dtype float64"
        )
    top = math.ceil(math.log2(scale)) - TOP_BITS
    exponents = [top]
    while addends * 2.0 ** (exponents[-1] - 1) > max(DROPPED, 2.0**-43 * scale) * divisor:
        exponents.append(exponents[-1] - bits)
    return Plan(tuple(exponents), bits)


def split(values: np.ndarray, p: Plan) -> list[np.ndarray]:
    """The digits of float64 ``values`` (each digit the nearest integer of what the grids
    before it left), float32 integers; what the last grid cannot hold is dropped."""
    rest = np.asarray(values, np.float64).copy()
    out = []
    for e in p.exponents:
        d = np.rint(np.ldexp(rest, -e))
        rest = rest - np.ldexp(d, e)  # exact: d g is rest rounded to the grid
        out.append(d.astype(np.float32))
    return out


def normalized(values: np.ndarray, p: Plan) -> list[np.ndarray]:
    """The normalized digits of float64 constants (as :func:`normalize` leaves sums)."""
    digits = [d.astype(np.float64) for d in split(values, p)]
    for k in range(p.n_digits - 1, 0, -1):
        q = np.floor(np.ldexp(digits[k], -p.bits))
        digits[k] -= np.ldexp(q, p.bits)
        digits[k - 1] += q
    return [d.astype(np.float32) for d in digits]


def on_grid(value: float, p: Plan, strict: bool) -> tuple[float, bool]:
    """A constant c for ``margin > c`` (``strict``) or ``margin >= c`` as a constant on the last
    grid and the comparison that decides the same for every margin the digits hold (multiples of
    that grid): ``m > c`` iff ``m > floor(c)``; ``m >= c`` iff ``m > floor(c)`` unless c is on it."""
    floor = float(np.ldexp(np.floor(np.ldexp(value, -p.exponents[-1])), p.exponents[-1]))
    return floor, strict or floor != value


def normalize(g: GraphBuilder, digits: Sequence[str], p: Plan, hint: str) -> list[str]:
    """Carry each digit's multiples of R into the one before it: digits 2..P in [0, R). All
    steps exact (integers below 2**24, scaling by powers of two)."""
    out = list(digits)
    inverse = g.const(np.float32(2.0**-p.bits), f"{hint}_inverse_radix")
    radix = g.const(np.float32(2.0**p.bits), f"{hint}_radix")
    for k in range(p.n_digits - 1, 0, -1):
        q = g.op("Floor", [g.op("Mul", [out[k], inverse], f"{hint}{k}_scaled")], f"{hint}{k}_carry")
        out[k] = g.op("Sub", [out[k], g.op("Mul", [q, radix], f"{hint}{k}_carried")], f"{hint}{k}_digit")
        out[k - 1] = g.op("Add", [out[k - 1], q], f"{hint}{k - 1}_with_carry")
    return out


def fold(
    g: GraphBuilder, digits: Sequence[str], p: Plan, hint: str, residual: bool = False, divisor: np.ndarray | None = None,
) -> tuple[str, str | None]:
    """The float32 value of digit sums (normalized or not; one rounding per digit, least
    significant first: within two ulps of the margin), divided by ``divisor`` (an average: two
    more roundings, the scale's and the product's), and with ``residual`` what that value leaves out (for links that magnify the
    margin's rounding, such as exp; not with a divisor)."""
    acc, tail = digits[-1], digits[-1]
    for k in range(p.n_digits - 2, -1, -1):  # (the radix: one initializer, GraphBuilder.const)
        tail = g.op("Mul", [acc, g.const(np.float32(2.0**-p.bits), f"{hint}_fold_inverse")], f"{hint}{k}_tail")
        acc = g.op("Add", [digits[k], tail], f"{hint}{k}_folded")
    grid = 2.0 ** p.exponents[0]
    scale = g.const(np.asarray(grid if divisor is None else grid / np.asarray(divisor, np.float64), np.float32), f"{hint}_grid")
    value = g.op("Mul", [acc, scale], hint)
    if not residual:
        return value, None
    # The last addition's rounding error, exactly (TwoSum: no assumption on the magnitudes).
    taken = g.op("Sub", [acc, digits[0]], f"{hint}_taken")
    lost = g.op("Add", [g.op("Sub", [digits[0], g.op("Sub", [acc, taken], f"{hint}_first")], f"{hint}_first_lost"),
                        g.op("Sub", [tail, taken], f"{hint}_tail_lost")], f"{hint}_lost")
    return value, g.op("Mul", [lost, scale], f"{hint}_residual")


def at_least(g: GraphBuilder, digits: Sequence[str], p: Plan, constant: Sequence[np.ndarray] | None, strict: bool, hint: str) -> str:
    """Bool: the margin (digit sums, normalized or not) > ``constant`` (``strict``) or >= it,
    exactly (``constant``: normalized digits on the grids, see :func:`on_grid`; None: zero).
    With e the digits of the difference D, carries from the last digit up give e_1 + the
    carries = floor(D / g_1) (``Floor``), which is >= 0 exactly when D is, or ceil(D / g_1)
    (``Ceil``), which is > 0 exactly when D is."""
    e = []
    for k, d in enumerate(digits):
        ck = None if constant is None or not np.any(constant[k]) else g.const(np.asarray(constant[k], np.float32), f"{hint}_c{k}")
        e.append(d if ck is None else g.op("Sub", [d, ck], f"{hint}_diff{k}"))
    for k in range(p.n_digits - 1, 1, -1):
        inverse = g.const(np.float32(2.0**-p.bits), f"{hint}_inverse_radix")  # (one initializer, GraphBuilder.const)
        q = g.op("Ceil" if strict else "Floor", [g.op("Mul", [e[k], inverse], f"{hint}{k}_scaled")], f"{hint}{k}_carry")
        e[k - 1] = g.op("Add", [e[k - 1], q], f"{hint}{k - 1}_with_carry")
    if p.n_digits == 1:
        return g.op("Greater" if strict else "GreaterOrEqual", [e[0], g.const(np.float32(0), f"{hint}_zero")], hint)
    # The last carry folded into the comparison: e_1 + ceil(e_2 / R) > 0 iff e_1 > floor(-e_2 / R),
    # e_1 + floor(e_2 / R) >= 0 iff e_1 >= ceil(-e_2 / R).
    scaled = g.op("Mul", [e[1], g.const(np.float32(-(2.0**-p.bits)), f"{hint}_negative_inverse_radix")], f"{hint}1_scaled")
    bound = g.op("Floor" if strict else "Ceil", [scaled], f"{hint}1_bound")
    return g.op("Greater" if strict else "GreaterOrEqual", [e[0], bound], hint)


def compare(g: GraphBuilder, digits: Sequence[str], constant: Sequence[np.ndarray], strict: bool, hint: str) -> str:
    """Bool: the margin (normalized ``digits``) > the constant (``strict``) or >= it, decided
    exactly: lexicographically on the digits. ``constant``: its normalized digits, each
    broadcastable to the margin's shape."""
    c = [g.const(np.asarray(d, np.float32), f"{hint}_c{k}") for k, d in enumerate(constant)]
    last = len(digits) - 1
    out = g.op("Greater" if strict else "GreaterOrEqual", [digits[last], c[last]], f"{hint}_{last}")
    for k in range(last - 1, -1, -1):
        above = g.op("Greater", [digits[k], c[k]], f"{hint}_{k}_above")
        same = g.op("Equal", [digits[k], c[k]], f"{hint}_{k}_same")
        out = g.op("Or", [above, g.op("And", [same, out], f"{hint}_{k}_then")], f"{hint}_{k}")
    return out


def argmax(g: GraphBuilder, digits: Sequence[str], p: Plan, width: int, hint: str) -> str:
    """int64 [N]: the first column of the largest margin ([N, C] digit sums), exact. Two
    columns: the second iff its margin is above the first's. More: on the normalized digits,
    the columns with the largest first digit, of those the ones with the largest second, ..."""
    if width == 2:  # the second column minus the first, [N]: its sign
        sign = g.const(np.asarray([-1, 1], np.float32), f"{hint}_difference")
        diff = [g.reduce_sum(g.op("Mul", [d, sign], f"{hint}_signed{j}"), [1], keepdims=False, hint=f"{hint}_diff{j}")
                for j, d in enumerate(digits)]
        second = at_least(g, diff, p, None, True, f"{hint}_second")
        return g.op("Cast", [second], f"{hint}_index", to=7)
    digits = normalize(g, digits, p, f"{hint}_norm")
    candidate = None
    for k, d in enumerate(digits):
        key = d
        if candidate is not None:  # digits >= -2**23 (first) or >= 0: -2**24 is below them all
            key = g.op("Where", [candidate, d, g.const(np.float32(-(2.0**24)), f"{hint}{k}_out")], f"{hint}{k}_key")
        best = g.reduce_max(key, [1], True, f"{hint}{k}_best")
        hit = g.op("Equal", [key, best], f"{hint}{k}_hit")
        candidate = hit if candidate is None else g.op("And", [candidate, hit], f"{hint}{k}_candidate")
    assert candidate is not None
    flag = g.op("Cast", [candidate], f"{hint}_flag", to=1)
    return g.op("ArgMax", [flag], f"{hint}_index", axis=1, keepdims=0)


def select(g: GraphBuilder, condition: str, constant: Sequence[np.ndarray], digits: Sequence[str], hint: str) -> list[str]:
    """Digits of ``constant`` where ``condition`` holds, else ``digits``."""
    return [
        g.op("Where", [condition, g.const(np.asarray(c, np.float32), f"{hint}_c{k}"), d], f"{hint}{k}")
        for k, (c, d) in enumerate(zip(constant, digits))
    ]
