# Bench (h): decode every frame of the clip (or every sample of the audio), save the first
# result to argv[4] (compared between builds with torch.equal), then time argv[3] runs.
import sys, time, json, warnings
warnings.filterwarnings("ignore")
import torch
from torchcodec.decoders import VideoDecoder, AudioDecoder
media, kind, reps, save = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
def once():
    if kind == "video":
        d = VideoDecoder(media + "/clip.mp4", seek_mode="exact")
        return d.get_frames_in_range(0, len(d)).data
    return AudioDecoder(media + "/audio.mp3").get_all_samples().data
t = once()
torch.save(t, save)
times = []
for _ in range(reps):
    t0 = time.perf_counter(); once(); times.append(time.perf_counter() - t0)
print(json.dumps({"shape": list(t.shape), "times": times}))
