# Bench (g): a random-weight Transformer of realistic size (6+6 layers, d_model 512, FFN 2048,
# 8 heads, 32k shared vocabulary) built with ctranslate2.specs and saved to argv[1].
import sys, numpy as np
from ctranslate2.specs import transformer_spec, model_spec, common_spec
out, vocab, d, ffn, layers, heads = sys.argv[1], 32000, 512, 2048, 6, 8
rng = np.random.default_rng(1234)
spec = transformer_spec.TransformerSpec.from_config((layers, layers), heads)
def rnd(*shape, scale=None):
    s = scale if scale is not None else 1.0 / np.sqrt(shape[-1])
    return (rng.standard_normal(shape) * s).astype(np.float32)
def fill(obj, path):
    if isinstance(obj, list):
        for i, o in enumerate(obj):
            fill(o, path + [str(i)])
        return
    if not isinstance(obj, model_spec.LayerSpec):
        return
    for name, val in list(vars(obj).items()):
        p = path + [name]
        if isinstance(val, (model_spec.LayerSpec, list)):
            fill(val, p)
            continue
        if val is not None:
            continue
        if isinstance(obj, common_spec.LayerNormSpec):
            v = np.ones(d, np.float32) if name == "gamma" else np.zeros(d, np.float32)
        elif isinstance(obj, common_spec.LinearSpec):
            # p: ... <attention|ffn|projection> ... weight
            owner = p[-4] if p[-2].isdigit() else p[-2]
            idx = int(p[-2]) if p[-2].isdigit() else None
            if owner == "self_attention":
                rows = [3 * d, d][idx]; cols = d
            elif owner == "attention":
                rows = [d, 2 * d, d][idx]; cols = d
            elif p[-2] == "linear_0":
                rows, cols = ffn, d
            elif p[-2] == "linear_1":
                rows, cols = d, ffn
            elif p[-2] == "projection":
                # Logits with a spread like a trained model's (a std of about 8, not 1): the
                # next token is clear, not a near-tie among 32k that the last bit decides.
                v = rnd(vocab, d, scale=8.0 / np.sqrt(d))
                setattr(obj, name, v)
                continue
            else:
                raise SystemExit("unknown linear " + ".".join(p))
            v = rnd(rows, cols)
        elif isinstance(obj, common_spec.EmbeddingsSpec):
            v = rnd(vocab, d, scale=1.0)
        else:
            raise SystemExit("unknown variable " + ".".join(p) + " " + type(obj).__name__)
        setattr(obj, name, v)
fill(spec, [])
toks = ["<blank>", "<s>", "</s>", "<unk>"] + ["t%d" % i for i in range(vocab - 4)]
spec.register_source_vocabulary(toks)
spec.register_target_vocabulary(toks)
spec.validate()
import os; os.makedirs(out, exist_ok=True)
spec.save(out)
print("saved", out)
