#!/usr/bin/env python3
"""Random valid kiln graphs (elementwise chains, broadcasts, reductions over
rows, columns or everything, one or two outputs; f32/bf16/f16; static and
dynamic dims) compiled for sm_90 by `kiln compile --json`, no GPU needed.
Prints every compile that fails (with its error) or spills, and keeps the
graph as OUTDIR/bad<i>.kiln / spill<i>.kiln; a line of counts at the end
("check": graphs the generator got wrong, which `kiln check` refused).

  python3 scripts/random-graphs.py SEED COUNT [OUTDIR]     (KILN=path/to/kiln)

Session 22 found three compile failures this way (docs/benchmarks.md)."""
import random, subprocess, sys, os, json
K = os.environ.get("KILN", os.path.join(os.path.dirname(__file__), "..", "build", "tools", "kiln"))
OUT = sys.argv[3] if len(sys.argv) > 3 else "/tmp/kiln-random-graphs"
os.makedirs(OUT, exist_ok=True)
UN = ["neg", "abs", "exp", "tanh", "sigmoid", "relu", "sqrt", "rsqrt", "log1p", "erf", "sin"]
BIN = ["add", "sub", "mul", "div", "maximum", "minimum"]
RED = ["sum", "mean", "max", "min", "var", "prod", "std"]

def shp(dt, s):
    return dt if not s else f"{dt}[{', '.join(str(d) for d in s)}]"

def bcast(a, b):
    n = max(len(a), len(b)); a = [1] * (n - len(a)) + list(a); b = [1] * (n - len(b)) + list(b)
    out = []
    for x, y in zip(a, b):
        if x == y or y == 1: out.append(x)
        elif x == 1: out.append(y)
        else: return None
    return out

def gen(rng):
    A = rng.choice([1, 7, 64, 512, 4097, "N"]); B = rng.choice([1, 17, 256, 4096, 4097, 32768, "C"])
    if A == "N" and B == "C" and rng.random() < 0.5: B = 4096
    dt_in = rng.choice(["f32", "bf16", "f16"])
    lines = ["kiln.graph v1"]; vals = []  # (id, shape, dtype)
    def add(text, s, dt):
        i = len(lines) - 1
        lines.append(f"%{i} = {text} : {shp(dt, s)}"); vals.append((i, s, dt)); return i
    x = add(f'input "x"', [A, B], dt_in)
    if rng.random() < 0.5: add('input "w"', [B], dt_in)
    if rng.random() < 0.3: add('input "c"', [A, 1], dt_in)
    # compute in f32
    for (i, s, dt) in list(vals):
        if dt != "f32": add(f"cast %{i}", s, "f32")
    for _ in range(rng.randint(2, 9)):
        f32s = [v for v in vals if v[2] == "f32"]
        r = rng.random()
        if r < 0.3:
            i, s, _ = rng.choice(f32s); add(f"{rng.choice(UN)} %{i}", s, "f32")
        elif r < 0.65:
            (i, s, _), (j, t, _) = rng.choice(f32s), rng.choice(f32s)
            o = bcast(s, t)
            if o is None: continue
            add(f"{rng.choice(BIN)} %{i}, %{j}", o, "f32")
        elif r < 0.75:
            i, s, _ = rng.choice(f32s)
            k = add(f"const {rng.choice([0.5, 2.0, 1e-5, -3.0])}", [], "f32")
            lines[-1] += " weak"
            add(f"{rng.choice(BIN)} %{i}, %{k}", s, "f32")
        else:
            full = [v for v in f32s if len(v[1]) == 2 and v[1] == [A, B]]
            if not full: continue
            i, s, _ = rng.choice(full)
            op = rng.choice(RED)
            ax = rng.choice([[1], [0], [0, 1]])
            keep = rng.random() < 0.7 and ax != [0, 1]
            out = [1 if a in ax else d for a, d in enumerate(s)] if keep else [d for a, d in enumerate(s) if a not in ax]
            extra = ", correction = 1" if op in ("var", "std") else ""
            add(f"{op} %{i} {{axes = [{', '.join(map(str, ax))}], keepdim = {'true' if keep else 'false'}{extra}}}", out, "f32")
    f32s = [v for v in vals if v[2] == "f32"]
    outs = rng.sample(f32s[-4:], k=min(len(f32s[-4:]), rng.randint(1, 2)))
    for n, (i, s, _) in enumerate(outs):
        if rng.random() < 0.5 and dt_in != "f32":
            i = add(f"cast %{i}", s, dt_in)
        lines.append(f'output "y{n}" = %{i}')
    return "\n".join(lines) + "\n"

rng = random.Random(int(sys.argv[1])); n = int(sys.argv[2])
stats = {"ok": 0, "check": 0, "bad": 0, "spill": 0}
for it in range(n):
    t = gen(rng)
    p = os.path.join(OUT, "case.kiln"); open(p, "w").write(t)
    r = subprocess.run([K, "check", p], capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        stats["check"] += 1
        if stats["check"] <= 3: print("CHECK", r.stderr.strip()[:200])
        continue
    r = subprocess.run([K, "compile", p, "--json"], capture_output=True, text=True, timeout=300, env=dict(os.environ, KILN_CACHE="0"))
    if r.returncode != 0 or "internal" in r.stderr.lower():
        stats["bad"] += 1; open(os.path.join(OUT, f"bad{it}.kiln"), "w").write(t)
        print("BAD", it, r.returncode, r.stderr.strip()[-400:].replace("\n", " | ")); continue
    d = json.loads(r.stdout)
    sp = [k["name"] for k in d["kernels"] if k.get("spills", 0) > 0]
    if sp:
        stats["spill"] += 1; open(os.path.join(OUT, f"spill{it}.kiln"), "w").write(t); print("SPILL", it, sp)
    stats["ok"] += 1
print(stats)
