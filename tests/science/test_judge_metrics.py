"""Classical metrics (analysis.science.metrics): known values on constructed images."""

from __future__ import annotations

import math

import numpy as np
import pytest

from analysis.science import metrics

rng = np.random.default_rng(7)
TEXTURE = rng.random((48, 48, 3))


def test_identical_images_have_zero_distance_infinite_psnr_and_ssim_one():
    assert metrics.l1(TEXTURE, TEXTURE) == 0
    assert metrics.psnr(TEXTURE, TEXTURE) == math.inf
    assert metrics.ssim(TEXTURE, TEXTURE) == pytest.approx(1.0)


def test_a_constant_offset_gives_the_expected_l1_l2_and_psnr():
    a = np.full((20, 20), 0.5)
    b = a + 0.1
    assert metrics.l1(a, b) == pytest.approx(0.1)
    assert metrics.l2(a, b) == pytest.approx(0.01)
    assert metrics.psnr(a, b) == pytest.approx(20.0)


def test_ssim_of_a_uniform_pair_matches_the_closed_form():
    # Flat images: σ terms vanish, SSIM = (2μxμy + C1) / (μx² + μy² + C1).
    a, b = np.full((16, 16), 0.2), np.full((16, 16), 0.6)
    c1 = 0.01**2
    assert metrics.ssim(a, b) == pytest.approx((2 * 0.2 * 0.6 + c1) / (0.04 + 0.36 + c1))


def test_ssim_drops_as_noise_grows():
    light = np.clip(TEXTURE + rng.normal(0, 0.05, TEXTURE.shape), 0, 1)
    heavy = np.clip(TEXTURE + rng.normal(0, 0.3, TEXTURE.shape), 0, 1)
    assert 1 > metrics.ssim(TEXTURE, light) > metrics.ssim(TEXTURE, heavy)


def test_background_metrics_ignore_changes_inside_the_mask():
    edited = TEXTURE.copy()
    mask = np.zeros((48, 48), dtype=bool)
    mask[10:30, 10:30] = True
    edited[mask] = 0.0
    assert metrics.l1(edited, TEXTURE) > 0
    assert metrics.l1(edited, TEXTURE, mask=mask) == 0
    assert metrics.psnr(edited, TEXTURE, mask=mask) == math.inf
    # SSIM windows centred outside the mask may still overlap it, so only "close to 1".
    assert metrics.ssim(edited, TEXTURE, mask=mask) > metrics.ssim(edited, TEXTURE)


def test_a_mask_covering_everything_is_an_error():
    with pytest.raises(ValueError, match="whole image"):
        metrics.l1(TEXTURE, TEXTURE, mask=np.ones((48, 48), dtype=bool))


def test_images_of_different_sizes_are_refused():
    with pytest.raises(ValueError, match="differ in shape"):
        metrics.l2(TEXTURE, TEXTURE[:40])


def test_uint8_images_are_scaled_to_unit_range():
    a = np.zeros((12, 12), dtype=np.uint8)
    b = np.full((12, 12), 255, dtype=np.uint8)
    assert metrics.l1(a, b) == 1.0


def test_blur_lowers_sharpness():
    sharp = np.kron(np.indices((8, 8)).sum(axis=0) % 2, np.ones((4, 4))).astype(float)
    blurred = (sharp + np.roll(sharp, 1, 0) + np.roll(sharp, 1, 1) + np.roll(sharp, 1, (0, 1))) / 4
    assert metrics.sharpness(sharp) > metrics.sharpness(blurred) > 0
    assert metrics.sharpness(np.full((10, 10), 0.3)) == 0


def test_the_noise_estimate_recovers_added_gaussian_noise():
    flat = np.full((128, 128), 0.5)
    noisy = flat + rng.normal(0, 0.05, flat.shape)
    assert metrics.noise_sigma(flat) == 0
    assert metrics.noise_sigma(noisy) == pytest.approx(0.05, rel=0.1)


def test_editing_metrics_reports_background_values_only_with_a_mask():
    assert "bg_SSIM" not in metrics.editing_metrics(TEXTURE, TEXTURE)
    mask = np.zeros((48, 48), dtype=bool)
    mask[:5, :5] = True
    result = metrics.editing_metrics(TEXTURE, TEXTURE, mask=mask)
    assert result["bg_L1"] == 0 and set(result) >= {"L1", "L2", "PSNR", "SSIM", "sharpness", "noise"}
