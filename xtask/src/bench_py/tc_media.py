# Bench (h): the inputs, made once with the PyPI wheel: an H.264 clip (240 frames, 640x360,
# libx264) and 60 s of stereo MP3 at 48 kHz, into argv[1].
import sys, torch, math
from torchcodec.encoders import VideoEncoder, AudioEncoder
out = sys.argv[1]
g = torch.Generator().manual_seed(5)
n, h, w = 240, 360, 640
y = torch.arange(h).view(h, 1).float(); x = torch.arange(w).view(1, w).float()
frames = torch.empty(n, 3, h, w, dtype=torch.uint8)
for i in range(n):
    base = torch.stack([(x + 3 * i) % 256 + 0 * y, (y + 2 * i) % 256 + 0 * x, ((x + y + i) / 2) % 256])
    frames[i] = (base + torch.randint(0, 24, (3, h, w), generator=g)).clamp(0, 255).to(torch.uint8)
VideoEncoder(frames, frame_rate=30).to_file(out + "/clip.mp4", codec="libx264")
sr = 48000; t = torch.arange(sr * 60) / sr
a = torch.stack([0.3 * torch.sin(2 * math.pi * 440 * t), 0.3 * torch.sin(2 * math.pi * 660 * t)]) + 0.05 * torch.randn(2, t.numel(), generator=g)
AudioEncoder(a.float(), sample_rate=sr).to_file(out + "/audio.mp3")
print("ok")
