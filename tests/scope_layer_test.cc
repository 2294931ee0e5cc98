// The scope layer of the strict Python grammar (runtime/scope_layer.h) on
// minimal cases, both ways: programs CPython 3.11 compiles are read to the
// end and may end; programs it rejects for a symbol-table reason are refused,
// at the byte that commits to the mistake (marked `|` in the case: the layer
// reads the text before it and refuses that byte), or, for a nonlocal whose
// binding never came, at the end (`$`) or at the line start that closes the
// last function able to bind it.  tests/py/test_python_strict.py compares
// the layer, through the engine, with CPython's compile() on generated
// programs.
#include "runtime/scope_layer.h"

#include <gtest/gtest.h>

#include <string>

#include "runtime/session.h"
#include "tests/test_store_cache.h"

namespace cfgmask {
namespace {

struct Case {
  const char* text;  // `|`: the refused byte follows; `$`: refused at the end
};

// Accepted: read to the end, and the text may end.
const char* const kAccepted[] = {
    // `async` after an operand where an asynchronous comprehension may stand
    "x = (b async for b in c)\n",
    "x = ({a % b async for a in c} for d in e)\n",
    "async def f():\n    x = [b async for b in c]\n",
    "asyncio = 1\nx = [asyncio for asyncio in y]\n",
    "def f(a, b, *c, d, **e):\n    pass\n",
    "f = lambda a, b=1, *c, **d: a\n",
    "f(a=1, b=2, **k)\n",
    "f(a, a, a=1)\n",
    "class A(B, metaclass=M, x=1):\n    pass\n",
    "def f():\n    x = 1\n    def g():\n        nonlocal x\n        x = 2\n",
    "def f():\n    def g():\n        nonlocal x\n    x = 1\n",
    "def f():\n    def g():\n        def h():\n            nonlocal x\n    x = 1\n",
    "def f(x):\n    def g():\n        nonlocal x\n",
    "def f():\n    for x in y:\n        pass\n    def g():\n        nonlocal x\n",
    "def f():\n    import x.y\n    def g():\n        nonlocal x\n",
    "def f():\n    del x\n    def g():\n        nonlocal x\n",
    "def f():\n    x: int\n    def g():\n        nonlocal x\n",
    "def f():\n    if (x := 1):\n        pass\n    def g():\n        nonlocal x\n",
    "def f():\n    with a as (x, y):\n        pass\n    def g():\n        nonlocal y\n",
    "def f():\n    try:\n        pass\n    except E as x:\n        pass\n    def g():\n        nonlocal x\n",
    "def f():\n    class C:\n        def g(self):\n            nonlocal x\n    x = 1\n",
    "def f():\n    x = 1\n    class C:\n        nonlocal x\n",
    "class C:\n    def f(self):\n        nonlocal __class__\n",
    "class C:\n    def f(self):\n        nonlocal __class__, __class__\n",
    "class C:\n    def f(self):\n        def g():\n            nonlocal self\n",
    "def f():\n    x = 1\n    def g():\n        nonlocal x\n        def h():\n            nonlocal x\n",
    "def f():\n    x = 1\n    def a():\n        global x\n    def b():\n        nonlocal x\n",
    "global x\nglobal x\nx = 1\n",
    "def f():\n    global x\n    x = 1\n",
    "def f():\n    g(x=1)\n    a.x\n    global x\n",
    "def f():\n    def g():\n        x\n    global x\n",
    "def f():\n    lambda: x\n    [x for y in z]\n    [y for y in z for w in x]\n    global x\n",
    "from __future__ import annotations\ndef f():\n    def g(a: x) -> x:\n        pass\n    y: x\n    global x\n",
    "def f():\n    from x import y\n    global x\n",
    "def f():\n    class C:\n        x = 1\n    global x\n",
    "global x\nx: int\n",
    "def f():\n    global x\n    (x): int\n    x.y: int\n",
    "x = __debug__\nif __debug__:\n    pass\nf'{__debug__}'\n",
    "for (__debug__).x in y:\n    pass\n",
    "global __debug__\n",
    "import __debug__ as d\nfrom m import __debug__ as e\n",
    "from m import (__debug__ as e,\n    f)\ndef g():\n    def h():\n        nonlocal f\n    from m import (a,\n        f)\n",
    "f(**{'__debug__': 1})\n",
    "__debug__ == 1\n",
    "x = '''a\n'b' \"\"\" '''\ny = f\"{a!r:>10}\" + rf'\\{b}'\n",
    "def f():\n    x = 1\n    def g():\n        nonlocal x\n    def h():\n        nonlocal x\n",
    // await, yield and async comprehensions where CPython 3.11 allows them
    "async def f():\n    x = (await g(1)) + await h ** 2\n    return [await y for y in z]\n",
    "async def f():\n    yield 1\n    x = yield\n    return\n",
    "async def f():\n    lambda: (yield from x)\n    return 1\n",
    "async def f():\n    def g(x=await y, *, z: await w):\n        pass\n",
    "async def f():\n    class A(await b):\n        pass\n",
    "async def f():\n    [[x async for x in y] for z in w]\n    {k: v async for k, v in d}\n",
    "async def f():\n    lambda x=await y: x\n",
    "(await x for x in y)\n",
    "f(await x for x in y)\n",
    "((await x) for x in y)\n",
    "([await x for x in y] for z in w)\n",
    "def f():\n    return (x async for x in y), ([x async for x in y] for z in w)\n",
    "x = (... async for a in c)\n",
    "f = lambda: (yield)\n",
    "def f():\n    x = (yield) + (yield from g())\n    return [x for x in (yield)]\n",
    "def f():\n    class A((yield)):\n        pass\n    def g(x=(yield)):\n        pass\n",
    "def f():\n    [lambda: (yield) for x in y]\n",
    "def f():\n    return\n    yield\n",
    "async def f():\n    await x\n    yield 1\n",
    // assignment expressions
    "x = (y := 1)\nf(a, b := 1)\na[b := 1]\n[x := 1, 2]\n(x := 1, 2)\n",
    "T = _sum((d := x - c) * d for x in data)\n[y := f(x) for x in z]\n",
    "[y for x in z if (y := f(x))]\n[[w := 1 for x in a] for y in b]\n",
    "class A:\n    x = (y := 1)\n    z = [lambda: (w := 1) for v in u]\n",
    "[lambda: (y := 1) for y in z]\n",
    "if (a := [b.a for a in [x for a in f'{a}']]):\n    pass\n",
    "x = [(a := 1), [0 for a in b]]\n",
    "def f():\n    a: (await y, [x async for x in z]) = 1\nasync def g():\n    y: (yield from x) = 1\n",
    "async def f():\n    b: (__debug__ := 4) = (b := (yield 1))\n",
    // \N{...}: a character's name (upper case; CJK unified ideographs by
    // their hex digits), also in f-string text
    "x = '\\N{ZOMBIE}\\N{CJK UNIFIED IDEOGRAPH-2A6DF}' + f'\\N{EM DASH}{y}'\n",
    // hex escapes with their digits (\U up to U+10FFFF), octal of any value,
    // \u and \U in bytes and raw strings (no escapes there), invalid escapes
    "x = '\\x41\\xfF\\u00e9\\U0010FFFF\\U00000000\\777\\q' + b'\\x00\\u12\\U1\\N{x}' + r'\\x' + rb'\\x4'\n",
    "x = f'\\x41{y:\\x3e\\u0031}\\U0001F600' + rf'\\x{y}\\u'\n",
    // a backslash before a field's brace in an f-string is text
    "x = f'\\{y}\\}}\\{{' + f'{y:\\{z}}' + f'{y:\\}'\n",
    // starred targets and del
    "(a, *b) = c\n",
    "[*a] = b\n",
    "for x, *(a, b) in y: pass\n",
    "del x[*a]\n",
    "del (a, f(*b))\n",
    "del (a * b).c, [x][0]\n",
    "del (), []\n",
    // match statements: soft keywords, every pattern form, captures binding
    "match = 1\nmatch(x)\nmatch.y = 2\nmatch[0] = 3\nmatch -= 1\ncase = 3\n_ = case\n",
    "def f(match, case):\n    match match:\n        case case:\n            return case\n",
    "match x:\n    case [a, b] | [b, a] if a:\n        pass\n    case {'a': 1, **rest}:\n        pass\n"
    "    case C(1, a=2) as z if z:\n        pass\n    case -1 | 1.5 | 2j | -3+4j | 1e-5 | -1.5e-3+2e-3j | .5:\n"
    "        pass\n    case {1: a, 2: b, 'x': c, b'x': d, 1.5: e, 1+2j: f, None: g, 'y' 'z': h}:\n        pass\n"
    "    case [1, *_] | (2, *_):\n        pass\n    case (x, *y):\n        pass\n    case {**rest}:\n        pass\n"
    "    case a.b | c.d:\n        pass\n    case C(_=1, b=_):\n        pass\n    case {_.x: 1}:\n        pass\n"
    "    case (a):\n        pass\n",
    "match x:\n    case y if y:\n        pass\n    case 1:\n        pass\n",
    "match x:\n    case 1:\n        match y:\n            case z:\n                pass\n    case _:\n        pass\ny = 1\n",
    "def f():\n    def g():\n        nonlocal y\n    match x:\n        case [y]:\n            pass\n",
    "match *a, b:\n    case (1 | 2) as z:\n        pass\n    case {0: a, 1: b, -1: c}:\n        pass\n",
};

// Refused by CPython; the layer refuses the byte after `|` (or the end, `$`).
const char* const kRefused[] = {
    // `async` after an operand can only be the keyword: judged at its last
    // byte, not at the byte after it (which every continuation would meet).
    "x = [b asyn|c for b in c]\n",
    "x = {a % b asyn|c for a in c}\n",
    "def f():\n    return {k: v asyn|c for k, v in y}\n",
    "x = [(a) asyn|c for a in c]\n",
    "x = [... asyn|c for a in c]\n",  // `...` is an operand (read as three `.`)
    "x = [....real asyn|c for a in c]\n",
    "def f(a, a|)",
    "def f(a, *a|)",
    "def f(a, *, b, a|)",
    "def f(a, **a|)",
    "lambda a, a|: 1",
    "lambda a, b=1, *, a|: 1",
    "f(a=1, a|=1)",
    "f(a=1, **k, a|=1)",
    "class A(x=1, x|=2): pass",
    "nonlocal| x",
    "def f():\n    nonlocal| x",
    "class C:\n    nonlocal| x",
    "def f():\n    x = 1\n    def g(x):\n        nonlocal x|\n",
    "def f():\n    x = 1\n    def g():\n        x\n        nonlocal x|\n",
    "def f():\n    x = 1\n    def g():\n        global x\n        nonlocal x|\n",
    "def f():\n    x = 1\n    def g():\n        nonlocal x\n        global x|\n",
    "def f():\n    def g():\n        nonlocal x\n|x = 1\n",
    "def f():\n    def g():\n        nonlocal x\n$",
    "def f():\n    def g():\n        def h():\n            nonlocal x\n        pass\n|y = 1\n",
    "def f():\n    [x for x in y]\n    def g():\n        nonlocal x\n|",
    "def f():\n    lambda x: 1\n    def g():\n        nonlocal x\n$",
    "def f():\n    x = 1\n    def g():\n        global x\n        def h():\n            nonlocal x|\n",
    "def f():\n    x = 1\n    def g():\n        def h():\n            nonlocal x\n        global x|\n",
    "def f():\n    class C:\n        x = 1\n        def g(self):\n            nonlocal x\n$",
    "def f():\n    def g():\n        nonlocal __debug__|\n",
    // A method of a class at module level: only `__class__` has a binding,
    // so a word that leaves its prefix is refused at once (it could only
    // grow, never end).
    "class C:\n    def f(self):\n        nonlocal |a",
    "class C:\n    def f(self):\n        nonlocal __cl|x",
    "class C:\n    def f(self):\n        nonlocal __class__|_",
    "class C:\n    def f(self):\n        nonlocal __class__, |x",
    "x\nglobal x|\n",
    "x = 1\nglobal x|\n",
    "def f(x):\n    global x|\n",
    "def f():\n    f'{x}'\n    global x|\n",
    "def f():\n    lambda a=x: 1\n    global x|\n",
    "def f():\n    [y for y in x]\n    global x|\n",
    "def f():\n    def x():\n        pass\n    global x|\n",
    "def f():\n    def g(a: x):\n        pass\n    global x|\n",
    "def f():\n    y: x\n    global x|\n",
    "def f():\n    @x\n    def g():\n        pass\n    global x|\n",
    "def f():\n    class C(x):\n        pass\n    global x|\n",
    "def f():\n    global x\n    x|: int\n",
    "def f():\n    x: int\n    global x|\n",
    "class C:\n    global x\n    x|: int\n",
    "def g():\n    x = 1\n    def f():\n        nonlocal x\n        x|: int\n",
    "x.__debug__ =| 1\n",
    "f(__debug__=|1)\n",
    "f(a=1, __debug__|=1)\n",
    "import __debug__|\n",
    "from m import __debug__|\n",
    "from m import (a, __debug__|)\n",
    "from m import (a as __debug__|, b)\n",
    "from m import x as __debug__|\n",
    "del __debug__|\n",
    "def __debug__|(): pass\n",
    "class __debug__|: pass\n",
    "def f(__debug__|): pass\n",
    "lambda __debug__|: 1\n",
    "[1 for __debug__ |in x]\n",
    "__debug__|: int\n",
    "x.__debug__|: int\n",
    "class A(__debug__=|1): pass\n",
    "with a as __debug__|: pass\n",
    "for (__debug__) |in x: pass\n",
    "for __debug__|, y in x: pass\n",
    "if (__debug__ |:= 1): pass\n",
    "__debug__ +|= 1\n",
    "try: pass\nexcept E as __debug__|: pass\n",
    "__debug__, y =| 1, 2\n",
    // await, yield, async comprehensions
    "await| x\n",
    "def f():\n    await| x\n",
    "def f():\n    return [await| x for x in y]\n",
    "def f():\n    return [x asyn|c for x in y]\n",
    "def f():\n    return [[x asyn|c for x in y] for z in w]\n",
    "class A:\n    x = await| y\n",
    "async def f():\n    class A:\n        x = await| y\n",
    "async def f():\n    lambda: await| x\n",
    "[x for x in await| y]\n",
    "(await x|)\n",
    "(await x|, 1)\n",
    "f(await x|)\n",
    "f(a, await| x)\n",
    "f(k=await| x)\n",
    "((await x)|)\n",
    "[(await x for x in y), await| z]\n",
    "x = (yield|)\n",
    "class A:\n    x = (yield|)\n",
    "def f():\n    return [x for x in y if (yield|)]\n",
    "def f():\n    return [(yield) for| x in y]\n",
    "def f():\n    return ((yield) for| x in y)\n",
    "def f():\n    return {k: (yield) for| k in y}\n",
    "async def f():\n    x = yield from| y\n",
    "async def f():\n    yield 1\n    return |2\n",
    "async def f():\n    yield 1\n    return|(2)\n",
    "async def f():\n    return 2\n    yield|\n",
    "async def f():\n    return None\n    x = (yield|)\n",
    "from __future__ import annotations\ndef f():\n    x: (yield|) = 1\n",
    "from __future__ import annotations\nasync def f():\n    def g(x: await| y):\n        pass\n",
    "[x for x in (y |:= z)]\n",
    "async def f():\n    x: (yield) = 1\n    return |1\n",
    "def f():\n    x: [(yield) for| y in z] = 1\n",
    "def f():\n    a: await z = 1\n    yield\n    return |1\n",
    "[x for w in v for x in (y |:= z)]\n",
    "[x for y in z if (y |:= 1)]\n",
    "[(y := 1) for y |in z]\n",
    "[(y := 1) for (y) |in z]\n",
    "[[y := 1 for x in a] for y |in b]\n",
    "class A:\n    [y := 1 for| x in z]\n",
    "class A:\n    [x for x in z if (y |:= 1)]\n",
    "x = '\\N{EM DASH|E}'\n",
    "x = '\\N{EM DAS|}'\n",
    "x = '\\N{CJK UNIFIED IDEOGRAPH-4D|C0}'\n",
    "x = f'\\N{BULLE|}{y}'\n",
    // hex escapes: the first byte that is no digit, or takes \U past U+10FFFF
    "x = '\\x4|'\n",
    "x = '\\x|g0'\n",
    "x = b'\\x4|'\n",
    "x = '\\u00e|'\n",
    "x = u'\\U0000004|'\n",
    "x = '\\U001|10000'\n",
    "x = '\\U0|1000000'\n",
    "x = '''\\x|\n'''\n",
    "x = f'\\x4|{y}'\n",
    "x = f'{y:\\u12|}'\n",
    "x = f'{y:{z}\\x|}'\n",
    // del of a starred target (the grammar reads them as in assignments)
    "del (a, *|b)\n",
    "del [a, [*|b]]\n",
    "del [*|a]\n",
    "del x, (*|y, z)\n",
};

// match statements: refused at the byte after `@` (patterns hold `|`).
const char* const kMatchRefused[] = {
    "match x:\n    case [a, a@]:\n",
    "match x:\n    case a as a@ :\n",
    "match x:\n    case 1 as _@:\n",
    "match x:\n    case a @| b:\n",
    "match x:\n    case (x) @| y:\n",
    "match x:\n    case [*a, @*b]:\n",
    "match x:\n    case *a, @*b:\n",
    "match x:\n    case C(a=1, a@=2):\n",
    "match x:\n    case {'a': 1, 'a'@: 2}:\n",
    "match x:\n    case {1: a, True@: b}:\n",
    "match x:\n    case {0: a, -0.0@: b}:\n",
    "match x:\n    case {'a' 'b': 1, 'ab'@: 2}:\n",
    "match x:\n    case {'\\x41': 1, 'A'@: 2}:\n",
    "match x:\n    case {1e400: 1, 1e500@: 2}:\n",
    "match x:\n    case f@'x':\n",
    "match x:\n    case 1j@+2:\n",
    "match x:\n    case 1 + 2@:\n",
    "match x:\n    case {**_@}:\n",
    "match x:\n    case __debug__@:\n",
    "match x:\n    case 1 | (x@):\n",
    "match x:\n    case [a, b] | [a@]:\n",
    "match x:\n    case [a] | (b@):\n",
    "match x:\n    case y:\n        pass\n    @case 1:\n",
    "match x:\n    case _:\n        pass\n    @case 1:\n",
    "match x:\n    case (_) as y:\n        pass\n    @case 1:\n",
    "match x:\n    case [a,\n          a@]:\n",
    "match x:\n    case {**b}, [b@]:\n",
};

// f-strings read by the parser: the rows of tests/py/test_fstrings.py that
// CPython 3.11 compiles and the grammar accepts.
const char* const kFStringAccepted[] = {
    "def g():\n    return f'{x:{y:>10}}'\n",
    "def g():\n    return f'{x:{y!r}}'\n",
    "def g():\n    return f'{x:{y=}}'\n",
    "def g():\n    return f'{x:\\n}'\n",
    "def g():\n    return f'{x:\\\\}'\n",
    "def g():\n    return f'{x:{{}}}'\n",
    "def g():\n    return f'{\"#\"}'\n",
    "def g():\n    return f'''{'a'}'''\n",
    "def g():\n    return f'''{\"a\"}'''\n",
    "def g():\n    return f'{yield}'\n",
    "def g():\n    return f'{x:=1}'\n",
    "def g():\n    return f'{(x:=1)}'\n",
    "def g():\n    return f'{(lambda: 1)}'\n",
    "def g():\n    return f'{*a,}'\n",
    "def g():\n    return f'{a, b}'\n",
    "def g():\n    return f'{x !r}'\n",
    "def g():\n    return f'{x = }'\n",
    "def g():\n    return f'{x=!r:>10}'\n",
    "def g():\n    return f'{x!=y}'\n",
    "def g():\n    return f'{x==y=}'\n",
    "def g():\n    return f'{ {1:2} }'\n",
    "def g():\n    return f'{x[1:2]}'\n",
    "def g():\n    return f'{f\"{x}\"}'\n",
    "def g():\n    return f\"{f'{x}'}\"\n",
    "def g():\n    return f'{x:{\"a\"}}'\n",
    "def g():\n    return f\"{x:'}\"\n",
    "def g():\n    return f'{x:{y:a}}'\n",
    "async def g():\n    return f'{await x}'\n",
    "def g():\n    return f'{x:{y}{z}}'\n",
    "def g():\n    return rf'\\{x}'\n",
    "def g():\n    return rf'\\{{x}}'\n",
    "def g():\n    return f'{x=!r}'\n",
    "def g():\n    return f'{x if y else z}'\n",
    "def g():\n    return f'{x:>{w}.{p}}'\n",
    "def g():\n    return f'{x}' 'a' f\"{y}\"\n",
    "def g():\n    return f'''{x:\\n}'''\n",
    "def g():\n    return f'\\N{EM DASH}{x}'\n",
    "def g():\n    return f'{x:{y}=}'\n",
    "def g():\n    return f'{x:#x}'\n",
    "def g():\n    return f'{x:#{y}}'\n",
    "def g():\n    return f'{x:!r}'\n",
    "def g():\n    return f'{yield x}'\n",
    "def g():\n    return f'{(yield)}'\n",
    "def g():\n    return f'{x:\\t}'\n",
    "def g():\n    return f'''{\"\"\"a\"\"\"}'''\n",
    "def g():\n    return f'''{\"a'b\"}'''\n",
    "def g():\n    return f'''{\"a''b\"}'''\n",
    "def g():\n    return f'''{x+''}'''\n",
    "def g():\n    return f'{x,}'\n",
    "def g():\n    return f'{x=   }'\n",
    "def g():\n    return f'{x =:>3}'\n",
    "def g():\n    return f'{x!a:{y}}'\n",
    "def g():\n    return f'}}{{'\n",
    "def g():\n    return f'{{{x}}}'\n",
    "def g():\n    return f'{x:{y!r:>3}}'\n",
    "def g():\n    return f'''{x:\n}'''\n",
    "def g():\n    return f'{x:{y}}'\n",
    "x = f'{type_ref}[{\",\".join(arg_refs)}]'\n",
    "x = f'{choice[\"type\"]!r}'\n",
    "x = f'{m.group(1)}_{m.group(2)}'\n",
    "x = f'{round(x, 2)})'\n",
    "x = f\"c{i + 1}\"\n",
    "x = f'{[y for y in z if y]}'\n",
    "x = f'{ {k: v for k, v in d.items()} }'\n",
    "x = f'{x[1:2:3]}'\n",
    "x = f'{a if b else c!r:>{w}}'\n",
    "x = FR'\\d{x}' Rf\"{y}\" rF'''{z}'''\n",
    "x = f'#{x}'  # c\n",
    "x = f'{x:%Y-%m-%d %H:%M}'\n",
    "x = f'{\"a\" \"b\"}'\n",
    "x = f'{-x ** 2 // 3 @ m}'\n",
    "x = f'{not a or b and c is not d}'\n",
    "x = f'{x!r:{w}.{p}f}'\n",
    "x = f'{f(*a, **k)}'\n",
    "x = f'{b\"x\"}'\n",
    "x = f'{...}'\n",
    "x = f'{x for x in y}'\n",
    "x = f'{x:=}'\n",
    "x = f'{(x := 1) + 1}'\n",
    "x = f'''a\nb{x}\n'''\n",
    "x = f\"{x['a']}\" + f'{y[\"b\"]}'\n",
    "x = f'{x.__class__.__name__!s}'\n",
    "x = f'{x:\\N{EM DASH}}'\n",
    "x = f'a\\\nb{x}'\n",
    "x = (f'{a}'\n     f'{b}')\n",
    "x = f'''{a}\n'''\n",
    "x = rf'\\N{x}'\n",
    "x = f'{x!r}' '\\n'\n",
};

// f-strings: CPython 3.11's lexical limits on a field, which the grammar
// leaves to the layer ("|": the committing byte).
const char* const kFStringRefused[] = {
    "x = f'{\"|\\n\"}'\n",
    "x = f'{\"it|\\'s\"}'\n",
    "x = f'''{''|'a'''}'''\n",
    "x = f'{f\"{f|'''{x}'''}\"}'\n",
    "x = f'{x|#}'\n",
    "x = (f'a|\nb')\n",
    "x = (f'{a|\n}')\n",
    "x = f'{x:\\N{DASH|}}'\n",
    "x = f'{x:{y|\\t}}'\n",
    "x = f'{lambda|: 1}'\n",
};

// Feeds `text` up to the marker; returns where the layer refused (-1: never,
// text.size(): at the end).
int64_t RefusedAt(const std::string& text) {
  ScopeLayer layer;
  for (size_t i = 0; i < text.size(); ++i) {
    if (!layer.Feed(text.substr(i, 1))) return static_cast<int64_t>(i);
  }
  return layer.CanEnd() ? -1 : static_cast<int64_t>(text.size());
}

TEST(ScopeLayer, AcceptsWhatCPythonCompiles) {
  for (const char* c : kAccepted) {
    if (!c) continue;
    EXPECT_EQ(RefusedAt(c), -1) << c;
  }
}

TEST(ScopeLayer, RefusesMatchPatternsAtTheCommittingByte) {
  for (const char* c : kMatchRefused) {
    std::string text(c);
    const size_t at = text.find('@');
    ASSERT_NE(at, std::string::npos) << c;
    text.erase(at, 1);
    EXPECT_EQ(RefusedAt(text), static_cast<int64_t>(at)) << c;
  }
}

TEST(ScopeLayer, RefusesAtTheCommittingByte) {
  for (const char* c : kRefused) {
    std::string text(c);
    const size_t bar = text.find('|');
    int64_t want;
    if (bar != std::string::npos) {
      text.erase(bar, 1);
      want = static_cast<int64_t>(bar);
    } else {
      const size_t end = text.find('$');
      ASSERT_NE(end, std::string::npos) << c;
      text.erase(end, 1);
      want = static_cast<int64_t>(text.size());
    }
    EXPECT_EQ(RefusedAt(text), want) << c;
    // Everything before the refusal can still be completed: the layer alone
    // accepts the prefix (the completions are in the accepted cases).
  }
}

TEST(ScopeLayer, FStringFields) {
  for (const char* c : kFStringAccepted) EXPECT_EQ(RefusedAt(c), -1) << c;
  for (const char* c : kFStringRefused) {
    std::string text(c);
    const size_t bar = text.find('|');
    ASSERT_NE(bar, std::string::npos) << c;
    text.erase(bar, 1);
    EXPECT_EQ(RefusedAt(text), static_cast<int64_t>(bar)) << c;
  }
}

TEST(ScopeLayer, ForkedCopiesAreIndependent) {
  ScopeLayer a;
  ASSERT_TRUE(a.Feed("def f():\n    x = 1\n    def g():\n        nonlocal x\n"));
  ScopeLayer b = a;
  EXPECT_FALSE(b.Feed("        global x\n"));
  EXPECT_TRUE(a.Feed("        y = x\n"));
  EXPECT_TRUE(a.CanEnd());
}

// Through a session of the strict grammar with a real tokenizer: EOS, fork,
// rollback, the mask and jump-forward all see the layer.
TEST(ScopeLayer, SessionForkRollbackMaskAndEnd) {
  const std::string tok = TestEnv("CFGMASK_TOK_LLAMA_SPM");
  if (tok.empty()) GTEST_SKIP() << "CFGMASK_TOK_LLAMA_SPM not set";
  Status st;
  const CompiledStore* store = CachedTestStore(
      std::string(CFGMASK_SOURCE_DIR) + "/grammar/lark/python.lark", tok, "file_input", &st);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_TRUE(ScopeTokenIndex::Wanted(*store));
  Session s(store);
  ASSERT_TRUE(s.AdvanceBytes("def f():\n    def g():\n        nonlocal x\n").ok());
  EXPECT_FALSE(s.CanEnd());  // x has no binding yet
  Session fork = s.Fork();
  ASSERT_TRUE(fork.AdvanceBytes("    x = 1\n").ok());
  EXPECT_TRUE(fork.CanEnd());
  EXPECT_FALSE(s.CanEnd());
  EXPECT_FALSE(s.AdvanceBytes("y = 1\n").ok());  // the dedent that closes f
  ASSERT_TRUE(fork.Rollback(1).ok());
  EXPECT_FALSE(fork.CanEnd());
  // The mask agrees with the slow reference on every token, here and after
  // `def h(a, ` (a second `a` is refused).
  ASSERT_TRUE(fork.AdvanceBytes("    def h(a, ").ok());
  for (Session* x : {&s, &fork}) {
    const std::vector<uint32_t> mask = x->Mask();
    for (int32_t t = 0; t < store->vocab_size; ++t) {
      ASSERT_EQ(MaskAllows(mask, t), x->AllowsSlow(t)) << t << " " << store->TokenBytes(t);
    }
  }
  EXPECT_FALSE(fork.AdvanceBytes("a)").ok());
  EXPECT_TRUE(fork.AdvanceBytes("b)").ok());
  EXPECT_EQ(s.JumpForwardString(), "");
  // The same at the states where await, yield and assignment expressions
  // are decided: module-level await waiting for a generator expression,
  // a return after an async generator's yield, `from` after its yield, an
  // iteration variable an assignment expression binds, a comprehension's
  // iterable, a partial `awai` at module level; a declared name that a `:`
  // would annotate.
  for (const char* prefix :
       {"x = (await y", "async def f():\n    yield 1\n    return", "async def f():\n    x = yield",
        "x = [(y := 1) for ", "def f():\n    return [x for x in (y", "[x for x in z if (x", "[x for x in z if (w :",
        "awai", "class A:\n    x = [(y := 1) ", "def f():\n    return [(yield) ",
        "async def f():\n    yield 1\n    ", "async def f():\n    yield 1\n    retur",
        "async def f():\n    yield 1\n    return", "await", "async def f():\n    await",
        "def f():\n    yield", "async def f():\n    x = yield", "async def f():\n    return 1\n    yield",
        "x = [y a", "async def f():\n    x = [y asyn", "async def f():\n    x = [y async", "def f():\n    x = (await",
        // a statement that so far is a declared name: only a `:` (or a
        // backslash before one) can annotate it
        "def f():\n    global X\n    X", "def f():\n    global X\n    X ",
        "def g():\n    y = 1\n    def f():\n        nonlocal y\n        y",
        "def f():\n    global X, Y\n    X \\\n",
        // inside and before a \N{...} name
        "x = '\\", "x = '\\N", "x = '\\N{EM", "x = '\\N{EM DA", "x = f'a\\N{CJK UNIFIED IDEOGRAPH-4",
        // inside and before a hex escape's digits (str, bytes, f-string
        // text and spec), and after a backslash in an f-string
        "x = '\\x", "x = '\\x4", "x = '\\u00", "x = '\\U0010", "x = '\\U001", "x = b'\\x",
        "x = b'\\", "x = f'\\", "x = f'\\x", "x = f'{y:\\u", "x = f'{y:\\", "x = rf'\\",
        // the step after a whole `global` / `nonlocal` keyword (judged by a
        // copy with the keyword read), and del statements (a `*` there)
        "def f():\n    x = y + z\n    global", "def f():\n    x = y + z\n    global v, w\n    global",
        "def g():\n    y = 1\n    def f():\n        z = y\n        nonlocal",
        "def g():\n    def f():\n        nonlocal", "nonlocal", "global",
        "del (a, ", "del", "de", "del [a", "del x, (y", "x = (a, ",
        // `async` after an operand: refused in a list, set or dict display
        // outside an async function, allowed in parentheses and inside one
        // (`[b as`, `[b asy`: no completion but the refused `async`, so
        // the session refuses them, Session::WordLeadsNowhere)
        "x = [b", "x = [b a", "x = (b as", "x = (b asy", "x = ({ a % b", "x = (a % b",
        "async def f():\n    x = [b", "async def f():\n    x = [b as", "x = [f(a)", "x = [...",
        "x = [... a", "x = [....real",
        // match statements: the soft keyword, case lines, patterns, the
        // line starts after an irrefutable case
        "matc", "match", "match ", "match x", "match x:\n", "match x:\n    ", "match x:\n    cas",
        "match x:\n    case", "match x:\n    case [a, ", "match x:\n    case [a, a", "match x:\n    case [a] | [", "match x:\n    case 1 |",
        "match x:\n    case {1: a, ", "match x:\n    case {1: a, True", "match x:\n    case C(a=1, a",
        "match x:\n    case 1j", "match x:\n    case 1 + 2", "match x:\n    case f", "match x:\n    case 1 as ",
        "match x:\n    case {**", "match x:\n    case {**_", "match x:\n    case [*a, ", "match x:\n    case a ",
        "match x:\n    case _:\n        pass\n", "match x:\n    case _:\n        pass\n    ",
        "match x:\n    case y:\n        pass\n", "match x:\n    case y:\n        pass\n  ", "match x:\n    case y:\n        x = 1",
        "match x:\n    case 1:\n        match y:\n            case z:\n                pass\n",
        // a word open in a pattern (its end judged by a copy with it read)
        "match x:\n    case x if", "match x:\n    case [a] as", "match x:\n    case 1.5e", "match x:\n    case Point",
        "match x:\n    case a as b", "match x:\n    case [a, b] | [a", "match x:\n    case (a as _",
        "match x:\n    case {'a': 1, 'a'", "match x:\n    case rb", "match x:\n    case None", "match x:\n    case y",
        "match x:\n    case [a, *a", "match x:\n    case C(a=1, a", "match x:\n    case {1: a, -0", "match x:\n    case (x) as y",
        "match x:\n    case 'a", "match x:\n    case 1 + 2",
        // f-string fields (CPython 3.11's lexical limits: backslash, `#`,
        // quotes, newlines, lambda at the top) and format specs
        "x = f'{", "x = f'{a", "x = f'{\"a", "x = f'''{'", "x = f'''{''", "x = f'{x:",
        "x = f'{x:\\", "x = f'{x:\\N{EM", "x = f'{x:{y", "x = f'{x!", "x = f'{x=",
        "x = (f'a", "x = (f'{a", "x = f'{lam", "x = f'{(lambda", "x = f\"{f'{a", "x = f'{a}",
        "x = f'{x:{y}", "x = rf'{a"}) {
    Session p(store);
    ASSERT_TRUE(p.AdvanceBytes(prefix).ok()) << prefix;
    const std::vector<uint32_t> mask = p.Mask();
    for (int32_t t = 0; t < store->vocab_size; ++t) {
      ASSERT_EQ(MaskAllows(mask, t), p.AllowsSlow(t)) << prefix << " | " << t << " " << store->TokenBytes(t);
    }
  }
}


// Names above ASCII (CPython 3.11: `str.isidentifier()`, compared after
// NFKC).  Accepted by CPython:
const char* const kAboveAsciiAccepted[] = {
    "\xc3\xa4 = 1\nprint(\xc3\xa4)\n",                         // ä
    "if\xc3\xa4 = 1\n",                                        // ifä: one name
    "\xef\xbd\x89\xef\xbd\x86 = 1\nx = \xef\xbd\x89\xef\xbd\x86\n",  // fullwidth `if`: a name
    "\xef\xbc\xae\xef\xbd\x8f\xef\xbd\x8e\xef\xbd\x85 = 1\n",   // fullwidth `None`
    "\xef\xac\x81le = 1\nprint(file)\n",                       // U+FB01 ligature
    "def f(a\xc2\xb7" "b, _\xc3\xa4):\n    pass\n",               // middle dot goes on a name
    "\xe2\x84\x98 = 1\n",                                      // U+2118 (Other_ID_Start)
    "e\xcc\x81 = 1\n",                                         // e + combining acute
    "x = \xf0\x9d\x90\xb1\n",                                  // U+1D431
    "def f():\n    \xef\xbd\x98 = 1\n    def g():\n        nonlocal x\n",
    "match \xc3\xa4:\n    case \xc3\xbc:\n        pass\n",
    "\xef\xbd\x8d\xef\xbd\x81\xef\xbd\x94\xef\xbd\x83\xef\xbd\x88 = 1\n",  // fullwidth `match`
    "f(\xef\xbd\x98=1, y=2)\n",
    "x = f'{\xc3\xa4}'\n",
    "x = '\xc2\xb7\xef\xbc\x8c'  # \xc2\xb7\xef\xbc\x8c\n",    // any character in strings and comments
    "x\xef\xb8\xb3 = 1\n",                                     // U+FE33: NFKC `_`
};

// Refused by CPython, at the byte after `|`.
const char* const kAboveAsciiRefused[] = {
    "\xc2|\xb7" "a = 1\n",                 // U+00B7 cannot begin a name
    "x\xe3\x82|\x9b = 1\n",                // U+309B goes on no name
    "x = 1 + \xef\xbc|\x8c\n",             // fullwidth comma
    "\xef\xbc|\xbf\xef\xbc\xbf" "debug = 1\n",  // fullwidth low line
    "x = 1|\xc3\xa4\n",                    // a number goes on with a letter (no completion fits)
    "x = a\xe2|\x88\x80\n",                // U+2200-U+223F: no completion goes on a name
    "x\xc3|(\n",                           // not UTF-8
    "x = \xed|\xa0\x80\n",                 // a surrogate
    "x = |\xc0\n",                         // an overlong lead byte
    "def f(\xef\xac\x81le, file|):\n    pass\n",  // ﬁle is file
    "def f():\n    x = 1\n    global \xef\xbd\x98|\n",
    "f(\xef\xbd\x98=1, x|=2)\n",
    "class A(x=1, \xef\xbd\x98|=2): pass\n",
};

TEST(ScopeLayer, NamesAboveAscii) {
  for (const char* c : kAboveAsciiAccepted) EXPECT_EQ(RefusedAt(c), -1) << c;
  for (const char* c : kAboveAsciiRefused) {
    std::string text(c);
    const size_t bar = text.find('|');
    ASSERT_NE(bar, std::string::npos) << c;
    text.erase(bar, 1);
    EXPECT_EQ(RefusedAt(text), static_cast<int64_t>(bar)) << c;
  }
}

}  // namespace
}  // namespace cfgmask
