# Bench (h): decode every frame of the clip (or every sample of the audio), save the first
# result to argv[4] (compared between builds with torch.equal) and print its shape as one JSON
# line. argv[3] "0" stops there; "serve" then times one decode per line read from stdin and
# prints its seconds, until EOF (the bench alternates rocbuild's build and the wheel).
import sys, time, json, warnings
warnings.filterwarnings("ignore")
import torch
from torchcodec.decoders import VideoDecoder, AudioDecoder
media, kind, mode, save = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
def once():
    if kind == "video":
        d = VideoDecoder(media + "/clip.mp4", seek_mode="exact")
        return d.get_frames_in_range(0, len(d)).data
    return AudioDecoder(media + "/audio.mp3").get_all_samples().data
t = once()
torch.save(t, save)
print(json.dumps({"shape": list(t.shape)}), flush=True)
if mode == "serve":
    for _ in sys.stdin:
        t0 = time.perf_counter(); once()
        print(time.perf_counter() - t0, flush=True)
