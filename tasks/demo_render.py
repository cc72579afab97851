"""Drawing for the demo scenes: shapes, subjects, backgrounds, control maps, and the artifacts
fake models add. Pure Pillow and numpy; the scene types live in tasks.demo_scenes.

Everything is drawn at SUPERSAMPLE times the size and box-downsampled, so edges are anti-aliased.
Artifact strengths are tuned at 384 px and scale with the image side.
"""

from __future__ import annotations

import io
import math
from typing import TYPE_CHECKING

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

if TYPE_CHECKING:
    from tasks.demo_scenes import Background, Scene, Subject

COLOURS: dict[str, tuple[int, int, int]] = {
    "red": (214, 45, 48),
    "orange": (243, 129, 22),
    "yellow": (247, 203, 30),
    "green": (44, 158, 70),
    "blue": (34, 100, 214),
    "purple": (138, 62, 190),
}
INKS = {**COLOURS, "white": (250, 250, 250), "black": (28, 28, 32)}
SHAPES = ("circle", "square", "triangle", "star", "heart", "diamond", "hexagon")
# Pale backgrounds (top, bottom) so every shape colour stands out.
PALETTES: dict[str, tuple[tuple[int, int, int], tuple[int, int, int]]] = {
    "sky": ((206, 226, 246), (244, 248, 253)),
    "sand": ((248, 238, 218), (230, 212, 178)),
    "mint": ((226, 246, 236), (196, 228, 210)),
    "lavender": ((240, 234, 250), (216, 206, 238)),
    "peach": ((254, 236, 224), (240, 208, 190)),
    "stone": ((236, 236, 232), (206, 206, 200)),
}
TEXTURES = ("grain", "dots", "stripes", "plain")
ARTIFACTS = ("blur", "noise", "jpeg", "smudge", "seam", "banding")


def _unit_polygon(shape: str) -> list[tuple[float, float]]:
    if shape == "circle":
        return [(math.cos(t), math.sin(t)) for t in np.linspace(0, 2 * math.pi, 64, endpoint=False)]
    if shape == "square":
        return [(-0.8, -0.8), (0.8, -0.8), (0.8, 0.8), (-0.8, 0.8)]
    if shape == "triangle":
        return [(math.cos(a), math.sin(a) + 0.15) for a in (-math.pi / 2, math.pi / 6, 5 * math.pi / 6)]
    if shape == "star":
        return [((1.0 if k % 2 == 0 else 0.45) * math.cos(-math.pi / 2 + k * math.pi / 5),
                 (1.0 if k % 2 == 0 else 0.45) * math.sin(-math.pi / 2 + k * math.pi / 5) + 0.08) for k in range(10)]
    if shape == "heart":
        ts = np.linspace(0, 2 * math.pi, 72, endpoint=False)
        return [(16 * math.sin(t) ** 3 / 17,
                 -(13 * math.cos(t) - 5 * math.cos(2 * t) - 2 * math.cos(3 * t) - math.cos(4 * t)) / 17 - 0.12)
                for t in ts]
    if shape == "diamond":
        return [(0, -1), (0.72, 0), (0, 1), (-0.72, 0)]
    if shape == "hexagon":
        return [(0.95 * math.cos(k * math.pi / 3), 0.95 * math.sin(k * math.pi / 3)) for k in range(6)]
    raise ValueError(f"unknown shape {shape!r}")


_UNIT = {shape: _unit_polygon(shape) for shape in SHAPES}


def _polygon(shape: str, cx: float, cy: float, r: float, angle: float, sx: float = 1, sy: float = 1):
    c, s = math.cos(angle), math.sin(angle)
    return [(cx + r * (x * sx * c - y * sy * s), cy + r * (x * sx * s + y * sy * c)) for x, y in _UNIT[shape]]


SUPERSAMPLE = 3  # draw at 3x and box-downsample: 9 samples per pixel anti-alias the edges


class Renderer:
    """Draws scenes supersampled and downsamples, so edges are anti-aliased."""

    def __init__(self, size: int):
        self.size = size
        self._backgrounds: dict[Background, np.ndarray] = {}

    def background(self, bg: Background) -> np.ndarray:
        if bg not in self._backgrounds:
            self._backgrounds[bg] = _background_array(bg, self.size)
        return self._backgrounds[bg]

    def render(self, scene: Scene) -> Image.Image:
        # A soft drop shadow grounds the shapes; it is blurred anyway, so drawn at half size.
        half = self.size // 2
        shadow = Image.new("L", (half, half), 0)
        offset = half / 128
        self._draw_objects(ImageDraw.Draw(shadow), scene, half, offset, 2 * offset, silhouette=True)
        shadow = shadow.filter(ImageFilter.GaussianBlur(half / 120)).resize((self.size,) * 2, Image.Resampling.BILINEAR)
        arr = self.background(scene.background) * (1 - 0.28 / 255 * np.asarray(shadow, np.float32)[..., None])
        arr = np.clip(arr, 0, 255).astype(np.uint8)
        big = Image.fromarray(arr).resize((self.size * SUPERSAMPLE,) * 2, Image.Resampling.NEAREST)
        self._draw_objects(ImageDraw.Draw(big), scene, big.width)
        return big.reduce(SUPERSAMPLE)

    @staticmethod
    def _draw_objects(draw: ImageDraw.ImageDraw, scene: Scene, side: int, dx: float = 0, dy: float = 0,
                      silhouette: bool = False) -> None:
        for p in scene.placements:
            g = scene.groups[p.group]
            cx, cy, r = p.x * side + dx, p.y * side + dy, p.r * side
            if silhouette and g.subject is not None:
                _draw_subject(draw, g.subject, cx, cy, r, p.angle, silhouette=True)
            elif silhouette:
                draw.polygon(_polygon(g.shape, cx, cy, r, p.angle), fill=255)
            elif g.subject is not None:
                _draw_subject(draw, g.subject, cx, cy, r, p.angle)
            else:
                _draw_shape(draw, g.shape, COLOURS[g.colour], cx, cy, r, p.angle)

    def render_control(self, scene: Scene) -> Image.Image:
        """An edge map of the layout: white outlines on black, like a Canny control image."""
        big = self.size * SUPERSAMPLE
        image = Image.new("L", (big, big), 0)
        draw = ImageDraw.Draw(image)
        for p in scene.placements:
            points = _polygon(scene.groups[p.group].shape, p.x * big, p.y * big, p.r * big, p.angle)
            draw.line([*points, points[0], points[1]], fill=255, width=max(SUPERSAMPLE, big // 160), joint="curve")
        return image.reduce(SUPERSAMPLE).convert("RGB")

    def region_mask(self, scene: Scene, groups: list[int]) -> Image.Image:
        """Binary mask (L, 0 or 255) of rounded boxes around the objects of `groups`."""
        mask = Image.new("L", (self.size, self.size), 0)
        draw = ImageDraw.Draw(mask)
        for p in scene.placements:
            if p.group in groups:
                half = 1.3 * p.r * self.size
                box = [p.x * self.size - half, p.y * self.size - half, p.x * self.size + half, p.y * self.size + half]
                draw.rounded_rectangle(box, radius=half * 0.3, fill=255)
        return mask


def _shade(rgb: tuple[int, int, int], factor: float) -> tuple[int, int, int]:
    return tuple(int(max(0, min(255, c * factor))) for c in rgb)  # type: ignore[return-value]


def _draw_shape(draw: ImageDraw.ImageDraw, shape: str, rgb, cx, cy, r, angle, sx=1.0, sy=1.0, outline=True):
    points = _polygon(shape, cx, cy, r, angle, sx, sy)
    draw.polygon(points, fill=rgb)
    if outline:
        width = max(2, int(r * 0.07))
        joint = "curve" if len(points) <= 12 else None  # many-sided outlines are smooth already
        draw.line([*points, points[0], points[1]], fill=_shade(rgb, 0.62), width=width, joint=joint)


def _draw_subject(draw: ImageDraw.ImageDraw, subject: Subject, cx, cy, r, angle, silhouette: bool = False):
    c, s = math.cos(angle), math.sin(angle)
    for shape, ink, dx, dy, scale, sx, sy, rot in subject.parts():
        px, py = cx + r * (dx * c - dy * s), cy + r * (dx * s + dy * c)
        if silhouette:
            draw.polygon(_polygon(shape, px, py, r * scale, angle + rot, sx, sy), fill=255)
        else:
            _draw_shape(draw, shape, INKS[ink], px, py, r * scale, angle + rot, sx, sy, outline=scale > 0.15)


def _background_array(bg: Background, size: int) -> np.ndarray:
    top, bottom = (np.array(c, np.float32) for c in PALETTES[bg.palette])
    axis = np.arange(size, dtype=np.float32) / size
    yy, xx = axis[:, None], axis[None, :]
    t = (0.8 * yy + 0.2 * xx)[..., None]
    arr = top + (bottom - top) * t
    arr *= (1 - 0.16 * ((xx - 0.5) ** 2 + (yy - 0.5) ** 2))[..., None]  # gentle vignette
    rng = np.random.default_rng(bg.seed)
    if bg.texture == "grain":
        grain = Image.fromarray(rng.normal(128, 40, (size // 2, size // 2)).clip(0, 255).astype(np.uint8))
        grain = np.asarray(grain.resize((size, size), Image.Resampling.BICUBIC), np.float32) - 128
        arr += 0.12 * grain[..., None]
    elif bg.texture == "dots":
        period = rng.uniform(14, 20)
        d2 = ((xx * size / period) % 1 - 0.5) ** 2 + ((yy * size / period) % 1 - 0.5) ** 2
        arr -= 10 * np.clip((0.05 - d2) / 0.02, 0, 1)[..., None]
    elif bg.texture == "stripes":
        period = rng.uniform(18, 28)
        arr += 4 * np.sin((xx + yy) * size / period * 2 * math.pi)[..., None]
    return arr


# --- perceptual failures ------------------------------------------------------------------------
# Each takes (image, severe, numpy rng, drawn scene, edit box) and returns a new image.
# Strengths are tuned at 384 px and scale with the image side.


def _blur(image, severe, rng, scene, box):
    return image.filter(ImageFilter.GaussianBlur(image.width / 384 * (4.0 if severe else 1.8)))


def _noise(image, severe, rng, scene, box):
    sigma = 34 if severe else 13
    arr = np.asarray(image, np.float32) + sigma * rng.standard_normal((image.height, image.width, 3), np.float32)
    return Image.fromarray(arr.clip(0, 255).astype(np.uint8))


def _jpeg(image, severe, rng, scene, box):
    buffer = io.BytesIO()
    image.save(buffer, "JPEG", quality=4 if severe else 12)
    return Image.open(io.BytesIO(buffer.getvalue())).convert("RGB")


def _smudge(image, severe, rng, scene, box):
    """Drag paint across object edges in a few places, like a finger through wet paint."""
    arr = np.asarray(image, np.float32).copy()
    size = image.width
    radius = size * (0.13 if severe else 0.09)
    length = radius * (1.6 if severe else 1.0)
    pad = int(length) + 2
    for _ in range(4 if severe else 2):
        if scene.placements:
            p = scene.placements[rng.integers(len(scene.placements))]
            theta = rng.uniform(0, 2 * math.pi)
            cx = (p.x + 0.8 * p.r * math.cos(theta)) * size
            cy = (p.y + 0.8 * p.r * math.sin(theta)) * size
            theta += math.pi + rng.normal(0, 0.4)  # drag from the object outwards
        else:
            cx, cy, theta = rng.uniform(0.2, 0.8) * size, rng.uniform(0.2, 0.8) * size, rng.uniform(0, 2 * math.pi)
        x0, x1 = int(max(0, cx - radius)), int(min(size, cx + radius))
        y0, y1 = int(max(0, cy - radius)), int(min(size, cy + radius))
        if x1 - x0 < 4 or y1 - y0 < 4:
            continue
        padded = np.pad(arr, ((pad, pad), (pad, pad), (0, 0)), mode="edge")
        smeared = np.zeros_like(arr[y0:y1, x0:x1])
        steps = 12
        for k in range(steps):
            dx = int(round(k / steps * length * math.cos(theta)))
            dy = int(round(k / steps * length * math.sin(theta)))
            smeared += padded[pad + y0 + dy:pad + y1 + dy, pad + x0 + dx:pad + x1 + dx]
        smeared /= steps
        yy, xx = np.mgrid[y0:y1, x0:x1]
        weight = np.exp(-(((xx - cx) ** 2 + (yy - cy) ** 2) / (0.6 * radius) ** 2))[..., None]
        arr[y0:y1, x0:x1] = arr[y0:y1, x0:x1] * (1 - weight) + smeared * weight
    return Image.fromarray(arr.clip(0, 255).astype(np.uint8))


def _seam(image, severe, rng, scene, box):
    """A visible seam: a pasted edit box that doesn't match, or misaligned tiles."""
    arr = np.asarray(image, np.float32).copy()
    size = image.width
    shift = np.array([1.0, 1.0, 1.0]) * (24 if severe else 10) * rng.choice([-1, 1]) + rng.normal(0, 4, 3)
    if box is not None:
        x0, y0, x1, y1 = box
        arr[y0:y1, x0:x1] += shift
        if severe:
            arr[y0:y1, x0:x1] = np.roll(arr[y0:y1, x0:x1], int(size * 0.02), axis=1)
    else:
        for axis in ([0, 1] if severe else [int(rng.integers(2))]):
            at = int(rng.uniform(0.3, 0.7) * size)
            offset = int(size * (0.03 if severe else 0.015))
            if axis == 0:  # vertical seam: the right part slides down
                arr[:, at:] = np.roll(arr[:, at:], offset, axis=0) + shift
            else:
                arr[at:, :] = np.roll(arr[at:, :], offset, axis=1) + shift
    return Image.fromarray(arr.clip(0, 255).astype(np.uint8))


def _banding(image, severe, rng, scene, box):
    step = 40.0 if severe else 18.0
    arr = np.round(np.asarray(image, np.float32) / step) * step
    return Image.fromarray(arr.clip(0, 255).astype(np.uint8))


ARTIFACT_FUNCTIONS = {"blur": _blur, "noise": _noise, "jpeg": _jpeg, "smudge": _smudge, "seam": _seam,
                       "banding": _banding}
