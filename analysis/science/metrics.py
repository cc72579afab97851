"""Classical image metrics, offline and pure numpy (no Django, no learned models).

Full-reference metrics compare an output with its source (editing tasks): L1, L2 (mean squared
error), PSNR and SSIM. Their masked variants look only *outside* an edit mask, which measures
background preservation: an editing model should leave what it was not asked to touch alone.
The no-reference measures (sharpness, noise) need only the output.

Units and conventions:
- Images are float arrays scaled to [0, 1]: ``(H, W)`` grey or ``(H, W, C)`` colour. Use
  :func:`to_float` to convert uint8 arrays. Both images of a pair must have the same shape;
  resize before calling (a size mismatch raises ``ValueError`` rather than guessing).
- L1 = mean |a − b| in [0, 1]; L2 = mean (a − b)² in [0, 1]; PSNR in dB with peak 1.0, and
  ``inf`` for identical images; SSIM in [−1, 1] (Wang et al. 2004, Gaussian window σ = 1.5,
  size 11, K1 = 0.01, K2 = 0.03), computed per channel on luminance-free RGB and averaged.
- Masks are boolean ``(H, W)``; True marks the edited region. "Outside the mask" uses the pixels
  where the mask is False. An all-True mask leaves nothing to compare: ``ValueError``.
- Sharpness = variance of the Laplacian of the grey image (higher = sharper).
  Noise = Immerkær's (1996) fast noise σ estimate on the grey image, in [0, 1] units.
"""

from __future__ import annotations

import math

import numpy as np

SSIM_WINDOW = 11
SSIM_SIGMA = 1.5
SSIM_K1, SSIM_K2 = 0.01, 0.03


def to_float(image) -> np.ndarray:
    """uint8 (0–255) or float array → float64 in [0, 1]; a trailing alpha channel is dropped."""
    array = np.asarray(image)
    if array.ndim == 3 and array.shape[2] == 4:
        array = array[:, :, :3]
    if array.dtype == np.uint8:
        return array.astype(np.float64) / 255.0
    array = array.astype(np.float64)
    if array.size and (array.min() < 0 or array.max() > 1):
        raise ValueError("float images must be scaled to [0, 1]")
    return array


def _pair(a, b) -> tuple[np.ndarray, np.ndarray]:
    a, b = to_float(a), to_float(b)
    if a.shape != b.shape:
        raise ValueError(f"images differ in shape: {a.shape} vs {b.shape}; resize one first")
    return a, b


def _outside(mask, shape: tuple[int, ...]) -> np.ndarray:
    keep = ~np.asarray(mask, dtype=bool)
    if keep.shape != shape[:2]:
        raise ValueError(f"mask shape {keep.shape} does not match image {shape[:2]}")
    if not keep.any():
        raise ValueError("the mask covers the whole image: nothing outside it to compare")
    return keep


def l1(a, b, *, mask=None) -> float:
    """Mean absolute difference; with ``mask``, only over pixels outside it."""
    a, b = _pair(a, b)
    diff = np.abs(a - b)
    if mask is not None:
        diff = diff[_outside(mask, a.shape)]
    return float(diff.mean())


def l2(a, b, *, mask=None) -> float:
    """Mean squared difference (MSE); with ``mask``, only over pixels outside it."""
    a, b = _pair(a, b)
    diff = (a - b) ** 2
    if mask is not None:
        diff = diff[_outside(mask, a.shape)]
    return float(diff.mean())


def psnr(a, b, *, mask=None) -> float:
    """Peak signal-to-noise ratio in dB for peak 1.0; ``inf`` when the images are identical."""
    mse = l2(a, b, mask=mask)
    if mse == 0:
        return math.inf
    return float(10.0 * math.log10(1.0 / mse))


def _gaussian_kernel(size: int = SSIM_WINDOW, sigma: float = SSIM_SIGMA) -> np.ndarray:
    x = np.arange(size, dtype=np.float64) - (size - 1) / 2
    kernel = np.exp(-(x**2) / (2 * sigma**2))
    return kernel / kernel.sum()


def _filter2d(image: np.ndarray, kernel: np.ndarray) -> np.ndarray:
    """Separable 'valid' convolution of a 2-D array with a 1-D kernel along both axes."""
    size = kernel.size
    rows = np.lib.stride_tricks.sliding_window_view(image, size, axis=1) @ kernel
    return np.lib.stride_tricks.sliding_window_view(rows, size, axis=0) @ kernel


def ssim_map(a, b) -> np.ndarray:
    """Local SSIM values; for colour images the per-channel maps are averaged.

    The map is smaller than the image by ``SSIM_WINDOW − 1`` pixels per axis ('valid' filtering).
    Images smaller than the window raise ``ValueError``.
    """
    a, b = _pair(a, b)
    if min(a.shape[:2]) < SSIM_WINDOW:
        raise ValueError(f"SSIM needs images of at least {SSIM_WINDOW}×{SSIM_WINDOW} pixels")
    if a.ndim == 2:
        a, b = a[:, :, None], b[:, :, None]
    kernel = _gaussian_kernel()
    c1, c2 = (SSIM_K1 * 1.0) ** 2, (SSIM_K2 * 1.0) ** 2
    maps = []
    for channel in range(a.shape[2]):
        x, y = a[:, :, channel], b[:, :, channel]
        mu_x, mu_y = _filter2d(x, kernel), _filter2d(y, kernel)
        sxx = _filter2d(x * x, kernel) - mu_x**2
        syy = _filter2d(y * y, kernel) - mu_y**2
        sxy = _filter2d(x * y, kernel) - mu_x * mu_y
        numerator = (2 * mu_x * mu_y + c1) * (2 * sxy + c2)
        denominator = (mu_x**2 + mu_y**2 + c1) * (sxx + syy + c2)
        maps.append(numerator / denominator)
    return np.mean(maps, axis=0)


def ssim(a, b, *, mask=None) -> float:
    """Mean SSIM; with ``mask``, the mean over windows whose centre lies outside the mask."""
    local = ssim_map(a, b)
    if mask is None:
        return float(local.mean())
    keep = _outside(mask, to_float(a).shape)
    half = SSIM_WINDOW // 2
    keep = keep[half : half + local.shape[0], half : half + local.shape[1]]
    if not keep.any():
        raise ValueError("no SSIM window centre lies outside the mask")
    return float(local[keep].mean())


def grey(image) -> np.ndarray:
    """ITU-R BT.601 luma of an RGB image in [0, 1]; grey images pass through."""
    array = to_float(image)
    if array.ndim == 2:
        return array
    return array[:, :, 0] * 0.299 + array[:, :, 1] * 0.587 + array[:, :, 2] * 0.114


def _convolve3x3(image: np.ndarray, kernel: np.ndarray) -> np.ndarray:
    h, w = image.shape
    out = np.zeros((h - 2, w - 2))
    for dy in range(3):
        for dx in range(3):
            out += kernel[dy, dx] * image[dy : dy + h - 2, dx : dx + w - 2]
    return out


def sharpness(image) -> float:
    """Variance of the 4-neighbour Laplacian of the grey image (0 for a flat image)."""
    g = grey(image)
    if min(g.shape) < 3:
        raise ValueError("sharpness needs images of at least 3×3 pixels")
    laplacian = _convolve3x3(g, np.array([[0, 1, 0], [1, -4, 1], [0, 1, 0]], dtype=np.float64))
    return float(laplacian.var())


def noise_sigma(image) -> float:
    """Immerkær's noise standard deviation estimate (same units as the image, [0, 1]).

    σ = sqrt(π/2) / (6 (W−2)(H−2)) · Σ |I * N| with N the difference of two Laplacians, which
    cancels image structure to first order. Flat images give 0; added Gaussian noise of σ
    gives ≈ σ.
    """
    g = grey(image)
    if min(g.shape) < 3:
        raise ValueError("noise estimation needs images of at least 3×3 pixels")
    kernel = np.array([[1, -2, 1], [-2, 4, -2], [1, -2, 1]], dtype=np.float64)
    response = np.abs(_convolve3x3(g, kernel)).sum()
    h, w = g.shape
    return float(math.sqrt(math.pi / 2) * response / (6 * (w - 2) * (h - 2)))


def editing_metrics(output, source, *, mask=None) -> dict[str, float]:
    """All full-reference metrics for one edit, plus the no-reference ones of the output.

    Keys: ``L1, L2, PSNR, SSIM`` (whole image), ``bg_L1, bg_L2, bg_PSNR, bg_SSIM`` (outside
    the mask, only when a mask is given), ``sharpness``, ``noise``.
    """
    result = {
        "L1": l1(output, source),
        "L2": l2(output, source),
        "PSNR": psnr(output, source),
        "SSIM": ssim(output, source),
    }
    if mask is not None:
        result.update(
            bg_L1=l1(output, source, mask=mask),
            bg_L2=l2(output, source, mask=mask),
            bg_PSNR=psnr(output, source, mask=mask),
            bg_SSIM=ssim(output, source, mask=mask),
        )
    result.update(sharpness=sharpness(output), noise=noise_sigma(output))
    return result


# Direction of each metric: distances are better when lower.
LOWER_IS_BETTER = {"L1": True, "L2": True, "bg_L1": True, "bg_L2": True, "noise": True}

ALL_METRICS = ("L1", "L2", "PSNR", "SSIM", "bg_L1", "bg_L2", "bg_PSNR", "bg_SSIM", "sharpness", "noise")
VERSION = "metrics-v1"  # bump when a formula changes, so cached metric scores are recomputed
