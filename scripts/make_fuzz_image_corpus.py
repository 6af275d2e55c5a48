#!/usr/bin/python3
"""Writes the seed corpus of tests/fuzz/fuzz_image.c into tests/fuzz/image/: one small file per
format variant that stb_image decodes (PNG gray/RGB/RGBA/palette/16-bit/interlaced, baseline and
progressive JPEG, BMP 8/24/32-bit, TGA plain and RLE, PGM, PPM), made with Pillow. Small files
keep the fuzzer fast; variety gives it every decoder's code paths to start from.
Run: /usr/bin/python3 scripts/make_fuzz_image_corpus.py"""
import os
from PIL import Image

out = os.path.join(os.path.dirname(__file__), "..", "tests", "fuzz", "image")
os.makedirs(out, exist_ok=True)
w, h = 13, 9
rgb = Image.new("RGB", (w, h))
rgb.putdata([((x * 19) % 256, (y * 27) % 256, (x * y * 5) % 256) for y in range(h) for x in range(w)])
gray, rgba, pal = rgb.convert("L"), rgb.convert("RGBA"), rgb.convert("P")
rgb.save(f"{out}/seed-rgb.png")
gray.save(f"{out}/seed-gray.png")
rgba.save(f"{out}/seed-rgba.png")
pal.save(f"{out}/seed-palette.png")
gray.convert("I;16").save(f"{out}/seed-16bit.png")
rgb.save(f"{out}/seed-interlaced.png", interlace=1)
rgb.save(f"{out}/seed-baseline.jpg", quality=80)
rgb.save(f"{out}/seed-progressive.jpg", quality=80, progressive=True)
gray.save(f"{out}/seed-gray.jpg", quality=80)
rgb.save(f"{out}/seed-24bit.bmp")
pal.save(f"{out}/seed-8bit.bmp")
rgba.save(f"{out}/seed-32bit.bmp")
rgb.save(f"{out}/seed-plain.tga")
rgb.save(f"{out}/seed-rle.tga", compression="tga_rle")
gray.save(f"{out}/seed.pgm")
rgb.save(f"{out}/seed.ppm")
