# Bench (g): translate_batch of 8 fixed random sentences (greedy or beam, 40 tokens each) with
# argv: MODEL COMPUTE_TYPE BEAM THREADS MODE. One warm-up whose outputs are printed as one JSON
# line (tokens and a digest, compared between builds). MODE "0" stops there; MODE "serve" then
# times one translate_batch per line read from stdin and prints its seconds, until EOF — the
# bench alternates two such workers (rocbuild's build and the wheel) call by call.
import sys, time, json, hashlib, random
import ctranslate2
model, compute, beam, threads, mode = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
r = random.Random(7)
batch = [["t%d" % r.randrange(31990) for _ in range(r.randrange(12, 30))] for _ in range(8)]
tr = ctranslate2.Translator(model, device="cpu", compute_type=compute, inter_threads=1, intra_threads=threads)
kw = dict(beam_size=beam, max_decoding_length=40, return_scores=True)
out = tr.translate_batch(batch, **kw)  # warm-up, and the outputs compared
toks = [h.hypotheses[0] for h in out]
digest = hashlib.sha256(json.dumps(toks).encode()).hexdigest()[:16]
n = sum(len(t) for t in toks)
print(json.dumps({"tokens": n, "digest": digest, "scores": [h.scores[0] for h in out], "hyps": toks}), flush=True)
if mode == "serve":
    for _ in sys.stdin:
        t0 = time.perf_counter(); tr.translate_batch(batch, **kw)
        print(time.perf_counter() - t0, flush=True)
