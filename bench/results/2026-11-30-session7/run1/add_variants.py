# Adds the hand-edited PTX variants (cubins in .device/variants) of the
# heuristic's fma kernels to an export folder, as variants of the case.
import json, os, shutil, sys
folder, variants = sys.argv[1], sys.argv[2]
lines = [json.loads(l) for l in open(os.path.join(folder, "kernels.jsonl"))]
base = {l["op"]: l for l in lines}
with open(os.path.join(folder, "kernels.jsonl"), "a") as f:
    for t, tag in (("f32", "32768x4096 float32"), ("bf16", "32768x4096 bfloat16")):
        op = f"fma x*y+z [{tag}]"
        if op not in base:
            print("no", op); continue
        for v in ("plain", "noalloc", "cs"):
            cubin = f"fma_{t}_{v}.cubin"
            data = open(os.path.join(variants, cubin), "rb").read()
            if base[op]["entry"].encode() not in data:
                print("entry", base[op]["entry"], "not in", cubin); continue
            shutil.copy(os.path.join(variants, cubin), os.path.join(folder, cubin))
            l = dict(base[op]); l["op"] = op + ' {"ptx": "' + v + '"}'; l["cubin"] = cubin
            f.write(json.dumps(l) + "\n")
            print("added", l["op"])
