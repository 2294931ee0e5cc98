"""Random programs that exercise CPython 3.11's symbol-table checks: nested
functions and classes over a small pool of names, with nonlocal and global
declarations, parameters (def and lambda), keyword arguments, comprehensions,
f-string fields, imports, walrus conditions and every binding form, and now
and then `__debug__` in a binding place.  Names collide on purpose, so that
about half the programs hit one of the checks.  context_programs: the same
for where await, yield, async comprehensions, return values and assignment
expressions may stand.  Used by
tests/py/test_python_strict.py::test_scope_checks_against_cpython (the
engine's scope layer against compile()); run as a script it prints a few.
"""
from __future__ import annotations

import random

NAMES = ["a", "b", "x", "y"]


class Gen:
    def __init__(self, rng: random.Random):
        self.r = rng
        self.lines: list[str] = []

    def name(self):
        r = self.r
        return "__debug__" if r.random() < 0.03 else r.choice(NAMES)

    def expr(self, depth=0):
        r = self.r
        k = r.randrange(9 if depth < 2 else 3)
        if k == 0:
            return r.choice(NAMES)
        if k == 1:
            return str(r.randrange(10))
        if k == 2:
            return f"f'{{{r.choice(NAMES)}}}'"
        if k == 3:
            args = [self.expr(depth + 1) for _ in range(r.randrange(2))]
            kws = [f"{self.name()}={self.expr(depth + 1)}" for _ in range(r.randrange(3))]
            return f"{r.choice(NAMES)}({', '.join(args + kws)})"
        if k == 4:
            return f"(lambda {self.params(lam=True)}: {self.expr(depth + 1)})"
        if k == 5:
            return f"[{self.expr(depth + 1)} for {self.name()} in {self.expr(depth + 1)}]"
        if k == 6:
            return f"{self.expr(depth + 1)} + {self.expr(depth + 1)}"
        if k == 7:
            return f"{r.choice(NAMES)}.{self.name()}"
        return f"({self.expr(depth + 1)})"

    def params(self, lam=False):
        r = self.r
        ps = []
        for i in range(r.randrange(4)):
            p = self.name()
            if i == 2 and r.random() < 0.3:
                p = "*" + p
            ps.append(p)
        if r.random() < 0.2:
            ps.append("**" + self.name())
        out, star = [], False
        for p in ps:
            if p.startswith("**"):
                out.append(p)
            elif p.startswith("*"):
                if star:
                    continue
                star = True
                out.append(p)
            else:
                out.append(p if lam or r.random() < 0.8 else f"{p}: {self.expr(2)}")
        # keep CPython's order: a ** parameter last
        out = [p for p in out if not p.startswith("**")] + [p for p in out if p.startswith("**")]
        return ", ".join(out)

    def simple(self, kind):
        r = self.r
        k = r.randrange(14)
        if k == 0:
            if r.random() < .2:
                return f"{self.name()} = lambda {self.params(lam=True)}: {self.expr()}"
            return f"{self.name()} = {self.expr()}"
        if k == 1:
            return f"{self.name()} += {self.expr()}"
        if k == 2:
            return f"{self.name()}: {r.choice(NAMES)}" + (f" = {self.expr()}" if r.random() < .5 else "")
        if k == 3:
            return f"{self.name()}, {self.name()} = {self.expr()}"
        if k == 4:
            return f"global {', '.join(self.name() for _ in range(r.randrange(1, 3)))}"
        if k in (5, 6):
            return f"nonlocal {', '.join(self.name() for _ in range(r.randrange(1, 3)))}"
        if k == 7:
            return f"del {self.name()}"
        if k == 8:
            return f"import {self.name()}" + (f" as {self.name()}" if r.random() < .3 else "")
        if k == 9:
            return f"from m import {self.name()}" + (f" as {self.name()}" if r.random() < .3 else "")
        if k == 10 and kind == "f":
            return "return " + self.expr()
        if k == 11:
            return f"{r.choice(NAMES)}.{self.name()} = {self.expr()}"
        return self.expr()

    def block(self, ind, kind, depth):
        r = self.r
        n = r.randint(1, 4)
        for _ in range(n):
            self.stmt(ind, kind, depth)

    def stmt(self, ind, kind, depth):
        r = self.r
        pad = "    " * ind
        k = r.randrange(10)
        if k == 0 and depth < 3:
            self.lines.append(f"{pad}def {self.name()}({self.params()}):")
            self.block(ind + 1, "f", depth + 1)
        elif k == 1 and depth < 3 and r.random() < .5:
            args = ", ".join([r.choice(NAMES)] * r.randrange(2)
                             + [f"{self.name()}={self.expr(2)}" for _ in range(r.randrange(2))])
            self.lines.append(f"{pad}class {self.name()}" + (f"({args})" if args else "") + ":")
            self.block(ind + 1, "c", depth + 1)
        elif k == 2:
            self.lines.append(f"{pad}for {self.name()} in {self.expr()}:")
            self.block(ind + 1, kind, depth)
        elif k == 3:
            self.lines.append(f"{pad}with {self.expr()} as {self.name()}:")
            self.block(ind + 1, kind, depth)
        elif k == 4 and r.random() < .5:
            self.lines.append(f"{pad}if ({self.name()} := {self.expr()}):")
            self.block(ind + 1, kind, depth)
        elif k == 5 and r.random() < .5:
            self.lines.append(f"{pad}try:")
            self.block(ind + 1, kind, depth)
            self.lines.append(f"{pad}except E as {self.name()}:")
            self.block(ind + 1, kind, depth)
        else:
            self.lines.append(pad + self.simple(kind))

    def program(self):
        for _ in range(self.r.randint(1, 3)):
            self.stmt(0, "m", 0)
        return "\n".join(self.lines) + "\n"


def programs(seed, n):
    rng = random.Random(seed)
    return [Gen(rng).program() for _ in range(n)]


class ContextGen(Gen):
    """Programs where `await`, `yield`, `yield from`, async comprehensions,
    return values and assignment expressions land in every kind of place:
    module, class and (async) function bodies, lambdas, comprehensions (their
    element, clauses and iterables), generator expressions, tuples and
    call arguments, defaults and annotations (CPython's context checks)."""

    def expr(self, depth=0):
        r = self.r
        k = r.randrange(16 if depth < 2 else 3)
        if depth == 0 and r.random() < .3:
            k = r.randrange(3)
        n = r.choice(NAMES)
        if k == 0:
            return n
        if k == 1:
            return str(r.randrange(10))
        if k == 2:
            return f"{n}.{r.choice(NAMES)}"
        if k == 3:
            return f"await {n}" + (f"({self.expr(depth + 1)})" if r.random() < .4 else "")
        if k == 4:
            return f"(yield {self.expr(depth + 1)})" if r.random() < .6 else "(yield)"
        if k == 5:
            return f"(yield from {self.expr(depth + 1)})"
        if k == 6:
            return f"({self.name()} := {self.expr(depth + 1)})"
        if k in (7, 8):
            op, cl = r.choice(["[]", "()", "{}", "[]"])
            cond = f" if {self.expr(depth + 1)}" if r.random() < .4 else ""
            more = f" for {self.name()} in {self.expr(depth + 1)}" if r.random() < .3 else ""
            asy = "async " if r.random() < .25 else ""
            return (f"{op}{self.expr(depth + 1)} {asy}for {self.name()} in {self.expr(depth + 1)}"
                    f"{more}{cond}{cl}")
        if k == 9:
            return f"(lambda {self.name()}={self.expr(depth + 1)}: {self.expr(depth + 1)})"
        if k == 10:
            return f"{n}({self.expr(depth + 1)})"
        if k == 11:
            return f"{n}({self.expr(depth + 1)}, {self.expr(depth + 1)})"
        if k == 12:
            return f"({self.expr(depth + 1)}, {self.expr(depth + 1)})"
        if k == 13:
            return f"{n}({self.name()} := {self.expr(depth + 1)})"
        if k == 14:
            return f"[{self.name()} := {self.expr(depth + 1)}, {self.expr(depth + 1)}]"
        return f"{self.expr(depth + 1)} + {self.expr(depth + 1)}"

    def simple(self, kind):
        r = self.r
        k = r.randrange(8)
        if k == 0:
            return f"{self.name()} = {self.expr()}"
        if k == 1 and kind in "fa":
            return "return" + (f" {self.expr()}" if r.random() < .6 else "")
        if k == 2 and kind in "fa":
            return r.choice(["yield", f"yield {self.expr()}", f"{self.name()} = yield {self.expr()}",
                             f"yield from {self.expr()}"])
        if k == 3:
            return f"{self.name()}: {self.expr()} = {self.expr()}"
        return self.expr()

    def block(self, ind, kind, depth):
        for _ in range(self.r.randint(1, 3)):
            self.stmt(ind, kind, depth)

    def stmt(self, ind, kind, depth):
        r = self.r
        pad = "    " * ind
        k = r.randrange(7)
        if k == 0 and depth < 2:
            ann = f": {self.expr(2)}" if r.random() < .3 else ""
            dflt = f"={self.expr(2)}" if r.random() < .4 else ""
            asy = r.random() < .5
            self.lines.append(f"{pad}{'async ' if asy else ''}def {self.name()}({self.name()}{ann}{dflt}):")
            self.block(ind + 1, "a" if asy else "f", depth + 1)
        elif k == 1 and depth < 2 and r.random() < .5:
            self.lines.append(f"{pad}class {self.name()}:")
            self.block(ind + 1, "c", depth + 1)
        elif k == 2:
            self.lines.append(f"{pad}if {self.expr()}:")
            self.block(ind + 1, kind, depth)
        else:
            self.lines.append(pad + self.simple(kind))

    def program(self):
        if self.r.random() < .1:
            self.lines.append("from __future__ import annotations")
        for _ in range(self.r.randint(1, 2)):
            self.stmt(0, "m", 0 if self.r.random() < .8 else 1)
        return "\n".join(self.lines) + "\n"


def context_programs(seed, n):
    rng = random.Random(seed)
    return [ContextGen(rng).program() for _ in range(n)]


if __name__ == "__main__":
    import sys
    gen = context_programs if "--context" in sys.argv else programs
    seed = int(next((a for a in sys.argv[1:] if a.isdigit()), "1"))
    for p in gen(seed, 5):
        print(p)
        print("-" * 40)
